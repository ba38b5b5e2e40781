/*
 * mlp.c - "mlp": 784 -> hidden (ReLU) x depth -> 10 with softmax
 * cross-entropy on Fashion-MNIST, the non-convex model.
 *
 * Tables, all row-major with the input index first, two per layer: "w1"
 * (784 x hidden, He normal sqrt(2/784)), "b1" (hidden), then for each
 * further hidden layer "wK" (hidden x hidden) and "bK", and last
 * "w<depth+1>" (hidden x 10, normal sqrt(2/hidden)) and "b<depth+1>" (10);
 * the biases start at zero. depth = 1 (the default) is the original
 * 784-hidden-10 net with the same tables. Forward and backward are sgemm
 * calls (one forward, two backward per layer, one less for the first)
 * plus elementwise loops, on scratch buffers allocated
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
#define MAX_DEPTH  8 /* hidden layers; 2 (MAX_DEPTH + 1) <= ZP_MODEL_MAX_TABLES */

struct zp_model {
    zp_mnist_data *data;
    int batch;
    int hidden, depth;
    float *a[MAX_DEPTH]; /* rows x hidden: layer l's ReLU activations (> 0 is its mask) */
    float *da[2];        /* batch x hidden: gradient w.r.t. an activation, ping-pong */
    float *dlogits;      /* batch x NK */
};

static void mlp_destroy(zp_model **mp)
{
    if (mp == NULL || *mp == NULL)
        return;
    zp_model *m = *mp;
    zp_mnist_data_destroy(&m->data);
    for (int l = 0; l < MAX_DEPTH; l++)
        free(m->a[l]);
    free(m->da[0]);
    free(m->da[1]);
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
    if (cfg->depth < 1 || cfg->depth > MAX_DEPTH)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "training.depth must be in 1..%d, not %d",
                             MAX_DEPTH, cfg->depth);
    zp_model *m = zp_alloc_zeroed(1, sizeof(*m));
    int rc = zp_mnist_data_new(&m->data, cfg, rank, num_workers, err, errlen);
    if (rc != 0) {
        mlp_destroy(&m);
        return rc;
    }
    m->batch = zp_mnist_data_batch_size(m->data);
    m->hidden = cfg->hidden;
    m->depth = cfg->depth;
    size_t rows = m->batch > ZP_MNIST_EVAL_CHUNK ? (size_t)m->batch : ZP_MNIST_EVAL_CHUNK;
    for (int l = 0; l < m->depth; l++)
        m->a[l] = zp_alloc_zeroed(rows * (size_t)m->hidden, sizeof(float));
    for (int k = 0; k < 2; k++)
        m->da[k] = zp_alloc_zeroed((size_t)m->batch * m->hidden, sizeof(float));
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

/* Inputs and outputs of layer l (0..depth; layer depth is the output). */
static int fan_in(const zp_model *m, int l)
{
    return l == 0 ? NI : m->hidden;
}

static int fan_out(const zp_model *m, int l)
{
    return l == m->depth ? NK : m->hidden;
}

static int mlp_tables(const zp_model *m, zp_table_def *defs)
{
    for (int l = 0; l <= m->depth; l++) {
        char name[16];
        uint64_t in = (uint64_t)fan_in(m, l), out = (uint64_t)fan_out(m, l);
        snprintf(name, sizeof(name), "w%d", l + 1);
        set_table(&defs[2 * l], name, in * out, "normal", sqrt(2.0 / (double)in));
        snprintf(name, sizeof(name), "b%d", l + 1);
        set_table(&defs[2 * l + 1], name, out, "zeros", 0.0);
    }
    return 2 * (m->depth + 1);
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

/* a[l] = relu(a[l-1] w[l] + b[l]) (a[-1] = x); logits = a[depth-1] w + b,
 * for n <= the rows of a[l]. */
static void forward(void *ctx, float *const *w, const float *x, int n, float *logits)
{
    zp_model *m = ctx;
    int h = m->hidden;
    const float *in = x;
    for (int l = 0; l < m->depth; l++) {
        int k = fan_in(m, l);
        broadcast_rows(m->a[l], w[2 * l + 1], n, h);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, h, k, 1.0f, in, k, w[2 * l], h,
                    1.0f, m->a[l], h);
        for (size_t i = 0; i < (size_t)n * h; i++)
            m->a[l][i] = m->a[l][i] > 0.0f ? m->a[l][i] : 0.0f;
        in = m->a[l];
    }
    int d = m->depth;
    broadcast_rows(logits, w[2 * d + 1], n, NK);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, NK, h, 1.0f, in, h, w[2 * d], NK,
                1.0f, logits, NK);
}

static double mlp_grad(zp_model *m, float *const *w, float *const *g, int64_t step)
{
    const float *x;
    const uint8_t *y;
    int n = m->batch, h = m->hidden;
    zp_mnist_data_batch(m->data, step, &x, &y);
    forward(m, w, x, n, m->dlogits);
    double loss = zp_mnist_xent(m->dlogits, y, n, 1.0f / (float)n, m->dlogits, NULL);

    /* Layer l from the top, with dz its output's gradient (n x out):
     * gw = in^T dz, gb = colsum dz; below it, d in = dz w^T through in's ReLU. */
    const float *dz = m->dlogits;
    for (int l = m->depth; l >= 0; l--) {
        int k = fan_in(m, l), o = fan_out(m, l);
        const float *in = l > 0 ? m->a[l - 1] : x;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, o, n, 1.0f, in, k, dz, o, 0.0f,
                    g[2 * l], o);
        column_sums(g[2 * l + 1], dz, n, o);
        if (l == 0)
            break;
        float *din = m->da[l % 2];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, h, o, 1.0f, dz, o, w[2 * l], o,
                    0.0f, din, h);
        for (size_t i = 0; i < (size_t)n * h; i++)
            if (!(in[i] > 0.0f))
                din[i] = 0.0f;
        dz = din;
    }
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
