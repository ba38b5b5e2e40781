/*
 * softmax.c - "softmax": multinomial logistic regression 784 -> 10 on
 * Fashion-MNIST, the convex classifier.
 *
 * Tables "W" (784 x 10, row-major: W[i*10 + k] links pixel i to class k) and
 * "b" (10), both starting at zero. Logits = X W + b with one sgemm; the
 * gradient is the mean over the minibatch, X^T (P - Y) / B and the column sums
 * of (P - Y) / B. The data side (partition, minibatch order, test set) is
 * zp_mnist_data, shared with the mlp model.
 */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "alloc.h"
#include "mnist.h"

#define NI ZP_MNIST_PIXELS
#define NK ZP_MNIST_CLASSES

struct zp_model {
    zp_mnist_data *data;
    int batch;
    float *dlogits; /* batch x NK */
};

static void softmax_destroy(zp_model **mp)
{
    if (mp == NULL || *mp == NULL)
        return;
    zp_model *m = *mp;
    zp_mnist_data_destroy(&m->data);
    free(m->dlogits);
    free(m);
    *mp = NULL;
}

static int softmax_create(zp_model **out, const zp_config *cfg, int rank, int num_workers,
                          char *err, size_t errlen)
{
    zp_model *m = zp_alloc_zeroed(1, sizeof(*m));
    int rc = zp_mnist_data_new(&m->data, cfg, rank, num_workers, err, errlen);
    if (rc != 0) {
        softmax_destroy(&m);
        return rc;
    }
    m->batch = zp_mnist_data_batch_size(m->data);
    m->dlogits = zp_alloc_zeroed((size_t)m->batch * NK, sizeof(float));
    *out = m;
    return 0;
}

static void set_table(zp_table_def *def, const char *name, uint64_t length)
{
    memset(def, 0, sizeof(*def));
    snprintf(def->name, sizeof(def->name), "%s", name);
    def->length = length;
    def->init = "zeros";
    def->init_scale = 0.0;
}

static int softmax_tables(const zp_model *m, zp_table_def *defs)
{
    (void)m;
    set_table(&defs[0], "W", (uint64_t)NI * NK);
    set_table(&defs[1], "b", NK);
    return 2;
}

static int softmax_steps_per_epoch(const zp_model *m)
{
    return zp_mnist_data_steps(m->data);
}

static int softmax_batch_examples(const zp_model *m)
{
    return m->batch;
}

/* logits (n x NK) = x W + b */
static void forward(void *ctx, float *const *w, const float *x, int n, float *logits)
{
    (void)ctx;
    for (int i = 0; i < n; i++)
        memcpy(logits + (size_t)i * NK, w[1], NK * sizeof(float));
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, NK, NI, 1.0f, x, NI, w[0], NK, 1.0f,
                logits, NK);
}

static double softmax_grad(zp_model *m, float *const *w, float *const *g, int64_t step)
{
    const float *x;
    const uint8_t *y;
    int n = m->batch;
    zp_mnist_data_batch(m->data, step, &x, &y);
    forward(NULL, w, x, n, m->dlogits);
    double loss = zp_mnist_xent(m->dlogits, y, n, 1.0f / (float)n, m->dlogits, NULL);
    /* gW = x^T dlogits;  gb = column sums of dlogits */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NI, NK, n, 1.0f, x, NI, m->dlogits, NK,
                0.0f, g[0], NK);
    for (int k = 0; k < NK; k++) {
        float s = 0.0f;
        for (int i = 0; i < n; i++)
            s += m->dlogits[(size_t)i * NK + k];
        g[1][k] = s;
    }
    return loss / n;
}

static int softmax_evaluate(zp_model *m, float *const *w, zp_eval *out)
{
    return zp_mnist_evaluate(m->data, forward, NULL, w, out);
}

const zp_model_ops zp_softmax_ops = {
    .name = "softmax",
    .create = softmax_create,
    .destroy = softmax_destroy,
    .tables = softmax_tables,
    .steps_per_epoch = softmax_steps_per_epoch,
    .batch_examples = softmax_batch_examples,
    .grad = softmax_grad,
    .evaluate = softmax_evaluate,
};
