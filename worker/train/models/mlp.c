/*
 * mlp.c - "mlp": 784 -> hidden (ReLU) -> 10 with softmax cross-entropy
 * on Fashion-MNIST, the non-convex model.
 *
 * Tables, all row-major with the input index first: "w1" (784 x hidden, He
 * normal sqrt(2/784)), "b1" (hidden), "w2" (hidden x 10, normal
 * sqrt(2/hidden)), "b2" (10); the biases start at zero. Forward and backward
 * are four sgemm calls plus elementwise loops, on scratch buffers allocated
 * once in create() and sized for the larger of a minibatch and an evaluation
 * chunk, so grad() and evaluate() never allocate. Gradients are the mean over
 * the minibatch. The data side is zp_mnist_data, shared with softmax.
 */
#include "alloc.h"
#include "errors.h"
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "mnist.h"
#include "zeps_errors.h"

#define NI         ZP_MNIST_PIXELS
#define NK         ZP_MNIST_CLASSES
#define MAX_HIDDEN 65536

struct zp_model {
    zp_mnist_data *data;
    int batch;
    int hidden;
    float *a1;      /* rows x hidden: ReLU activations (a1 > 0 is the ReLU mask) */
    float *da1;     /* batch x hidden: gradient w.r.t. a1, then w.r.t. the pre-activation */
    float *dlogits; /* batch x NK */
};

static void mlp_destroy(zp_model **mp)
{
    if (mp == NULL || *mp == NULL)
        return;
    zp_model *m = *mp;
    zp_mnist_data_destroy(&m->data);
    free(m->a1);
    free(m->da1);
    free(m->dlogits);
    free(m);
    *mp = NULL;
}

static int mlp_create(zp_model **out, const zp_config *cfg, int rank, int num_workers, char *err,
                      size_t errlen)
{
    if (cfg->hidden < 1 || cfg->hidden > MAX_HIDDEN)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "training.hidden must be in 1..%d, not %d",
                             MAX_HIDDEN, cfg->hidden);
    zp_model *m = zp_alloc_zeroed(1, sizeof(*m));
    int rc = zp_mnist_data_new(&m->data, cfg, rank, num_workers, err, errlen);
    if (rc != 0) {
        mlp_destroy(&m);
        return rc;
    }
    m->batch = zp_mnist_data_batch_size(m->data);
    m->hidden = cfg->hidden;
    size_t rows = m->batch > ZP_MNIST_EVAL_CHUNK ? (size_t)m->batch : ZP_MNIST_EVAL_CHUNK;
    m->a1 = zp_alloc_zeroed(rows * (size_t)m->hidden, sizeof(float));
    m->da1 = zp_alloc_zeroed((size_t)m->batch * m->hidden, sizeof(float));
    m->dlogits = zp_alloc_zeroed((size_t)m->batch * NK, sizeof(float));
    *out = m;
    return 0;
}

static void set_table(zp_table_def *def, const char *name, uint64_t length, const char *init,
                      double scale)
{
    memset(def, 0, sizeof(*def));
    snprintf(def->name, sizeof(def->name), "%s", name);
    def->length = length;
    def->init = init;
    def->init_scale = scale;
}

static int mlp_tables(const zp_model *m, zp_table_def *defs)
{
    uint64_t h = (uint64_t)m->hidden;
    set_table(&defs[0], "w1", NI * h, "normal", sqrt(2.0 / NI));
    set_table(&defs[1], "b1", h, "zeros", 0.0);
    set_table(&defs[2], "w2", h * NK, "normal", sqrt(2.0 / (double)h));
    set_table(&defs[3], "b2", NK, "zeros", 0.0);
    return 4;
}

static int mlp_steps_per_epoch(const zp_model *m)
{
    return zp_mnist_data_steps(m->data);
}

static int mlp_batch_examples(const zp_model *m)
{
    return m->batch;
}

/* Fill the n rows of the row-major n x cols matrix c with the vector v. */
static void broadcast_rows(float *c, const float *v, int n, int cols)
{
    for (int i = 0; i < n; i++)
        memcpy(c + (size_t)i * cols, v, (size_t)cols * sizeof(float));
}

/* Column sums of the row-major n x cols matrix a into s. */
static void column_sums(float *s, const float *a, int n, int cols)
{
    memset(s, 0, (size_t)cols * sizeof(float));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < cols; j++)
            s[j] += a[(size_t)i * cols + j];
}

/* a1 = relu(x w1 + b1); logits = a1 w2 + b2, for n <= the rows of a1. */
static void forward(void *ctx, float *const *w, const float *x, int n, float *logits)
{
    zp_model *m = ctx;
    int h = m->hidden;
    broadcast_rows(m->a1, w[1], n, h);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, h, NI, 1.0f, x, NI, w[0], h, 1.0f,
                m->a1, h);
    for (size_t i = 0; i < (size_t)n * h; i++)
        m->a1[i] = m->a1[i] > 0.0f ? m->a1[i] : 0.0f;
    broadcast_rows(logits, w[3], n, NK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, NK, h, 1.0f, m->a1, h, w[2], NK, 1.0f,
                logits, NK);
}

static double mlp_grad(zp_model *m, float *const *w, float *const *g, int64_t step)
{
    const float *x;
    const uint8_t *y;
    int n = m->batch, h = m->hidden;
    zp_mnist_data_batch(m->data, step, &x, &y);
    forward(m, w, x, n, m->dlogits);
    double loss = zp_mnist_xent(m->dlogits, y, n, 1.0f / (float)n, m->dlogits, NULL);

    /* Output layer: gw2 = a1^T dl, gb2 = colsum dl, da1 = dl w2^T. */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, h, NK, n, 1.0f, m->a1, h, m->dlogits, NK,
                0.0f, g[2], NK);
    column_sums(g[3], m->dlogits, n, NK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, h, NK, 1.0f, m->dlogits, NK, w[2], NK,
                0.0f, m->da1, h);
    /* Through the ReLU, then the hidden layer: gw1 = x^T dz1, gb1 = colsum dz1. */
    for (size_t i = 0; i < (size_t)n * h; i++)
        if (!(m->a1[i] > 0.0f))
            m->da1[i] = 0.0f;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NI, h, n, 1.0f, x, NI, m->da1, h, 0.0f,
                g[0], h);
    column_sums(g[1], m->da1, n, h);
    return loss / n;
}

static int mlp_evaluate(zp_model *m, float *const *w, zp_eval *out)
{
    return zp_mnist_evaluate(m->data, forward, m, w, out);
}

const zp_model_ops zp_mlp_ops = {
    .name = "mlp",
    .create = mlp_create,
    .destroy = mlp_destroy,
    .tables = mlp_tables,
    .steps_per_epoch = mlp_steps_per_epoch,
    .batch_examples = mlp_batch_examples,
    .grad = mlp_grad,
    .evaluate = mlp_evaluate,
};
