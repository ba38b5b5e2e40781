/*
 * momentum.c - heavy-ball momentum: v = mu*v + (scale*g + wd*w); w -= lr*v.
 *
 * Slices only: sparse rows have no momentum kernel (a row's velocity would
 * keep moving it long after its id stops appearing; Adagrad, Adam and FTRL
 * are what sparse tables use).
 */
#include "optim.h"
#include "vec.h"

static void momentum_apply(float *w, float *state, const float *g, size_t n, size_t stride,
                           const zp_hyper *h, uint64_t step, float scale)
{
    float *v = state;

    if (n == 0)
        return;
    zp_vec_scal(n, h->momentum, v);
    zp_vec_axpy(n, scale, g, v);
    if (h->weight_decay != 0.0f)
        zp_vec_axpy(n, h->weight_decay, w, v); /* w before this step's update */
    zp_vec_axpy(n, -h->lr, v, w);
}

const zp_optim_ops zp_momentum_ops = {
    .name = "momentum",
    .state_per_param = 1,
    .uses = ZP_OPTIM_USES_MOMENTUM,
    .apply = momentum_apply,
};
