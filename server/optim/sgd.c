/*
 * sgd.c - plain stochastic gradient descent, w -= lr * (scale*g + wd*w).
 */
#include "optim.h"
#include "vec.h"

/* Slice: w = (1 - lr*wd) * w, then w = fma(-lr*scale, g, w). */
static void sgd_apply(float *w, float *state, const float *g, size_t n, size_t stride,
                      const zp_hyper *h, uint64_t step, float scale)
{
    if (n == 0)
        return;
    if (h->weight_decay != 0.0f)
        zp_vec_scal(n, 1.0f - h->lr * h->weight_decay, w);
    zp_vec_axpy(n, -h->lr * scale, g, w);
}

/* Chunks of 16 KB of g: a bad value stops the pass at the end of its
 * chunk, and only what was done is put back. */
#define KEEP_CHUNK 4096

/* Slice, from a gradient given up: the same two steps as sgd_apply, fused
 * in one pass that checks g and keeps the old w in g's place (vec.h). */
static bool sgd_apply_keep(float *w, float *state, float *g, size_t n, size_t stride,
                           const zp_hyper *h, uint64_t step, float scale)
{
    const bool decay = h->weight_decay != 0.0f;
    const float d = 1.0f - h->lr * h->weight_decay, a = -h->lr * scale;
    for (size_t k = 0; k < n; k += KEEP_CHUNK) {
        size_t c = n - k < KEEP_CHUNK ? n - k : KEEP_CHUNK;
        if (!zp_vec_axpy_keep(c, a, d, decay, g + k, w + k)) {
            zp_vec_restore(k + c, g, w);
            return false;
        }
    }
    return true;
}

/* Row, in double. */
static void sgd_apply_row(const zp_hyper *h, uint32_t dim, uint32_t stride, float *w, float *s,
                          const float *g, float scale, uint32_t step)
{
    const double lr = h->lr, wd = h->weight_decay;

    for (uint32_t j = 0; j < dim; j++) {
        double wj = w[j];
        double gj = (double)scale * g[j] + (wd != 0 ? wd * wj : 0);
        w[j] = (float)(wj - lr * gj);
    }
}

const zp_optim_ops zp_sgd_ops = {
    .name = "sgd",
    .state_per_param = 0,
    .uses = 0,
    .linear = true, /* when weight_decay is 0: see zp_table_linear */
    .apply = sgd_apply,
    .apply_row = sgd_apply_row,
    .apply_keep = sgd_apply_keep,
};
