/*
 * momentum.c - heavy-ball momentum: v = mu*v + (scale*g + wd*w); w -= lr*v.
 *
 * The slice kernel is one pass over w, v and g, built per CPU level
 * (clones.h). Per element it makes exactly the roundings the four BLAS-1
 * steps it replaced made (v *= mu; v = fma(scale, g, v); with weight decay
 * v = fma(wd, w, v) with w before this step; w = fma(-lr, v, w)), so
 * results did not change; it reads g, v and w once instead of three times.
 *
 * Slices only: sparse rows have no momentum kernel (a row's velocity would
 * keep moving it long after its id stops appearing; Adagrad, Adam and FTRL
 * are what sparse tables use).
 */
#include <math.h>

#include "clones.h"
#include "optim.h"

/* See adagrad_loop for `use_wd`. */
static inline void momentum_loop(float *restrict w, float *restrict v, const float *restrict g,
                                 size_t n, float mu, float scale, float wd, float neglr,
                                 int use_wd)
{
    for (size_t i = 0; i < n; i++) {
        float vi = fmaf(scale, g[i], v[i] * mu);
        if (use_wd)
            vi = fmaf(wd, w[i], vi);
        v[i] = vi;
        w[i] = fmaf(neglr, vi, w[i]);
    }
}

ZP_CLONES static void momentum_apply(float *w, float *state, const float *g, size_t n,
                                     size_t stride, const zp_hyper *h, uint64_t step, float scale)
{
    if (h->weight_decay != 0.0f)
        momentum_loop(w, state, g, n, h->momentum, scale, h->weight_decay, -h->lr, 1);
    else
        momentum_loop(w, state, g, n, h->momentum, scale, 0.0f, -h->lr, 0);
}

const zp_optim_ops zp_momentum_ops = {
    .name = "momentum",
    .state_per_param = 1,
    .uses = ZP_OPTIM_USES_MOMENTUM,
    .apply = momentum_apply,
};
