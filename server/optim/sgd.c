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

/* Row, in double. */
static void sgd_apply_row(const zp_hyper *h, uint32_t dim, float *w, float *s, const float *g,
                          float scale, uint32_t step)
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
};
