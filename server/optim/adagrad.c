/*
 * adagrad.c - Adagrad: G += g^2; w -= lr * g / (sqrt(G) + eps).
 *
 * The slice kernel is one fused pass over w, g and G, a restrict-qualified
 * loop with no calls but sqrtf so that gcc -O2 -ftree-vectorize turns it
 * into SIMD code - provided the file is built with -fno-math-errno: gcc 12
 * otherwise keeps a scalar errno path beside each sqrtf and will not
 * vectorise (server/CMakeLists.txt). The results are the same either way,
 * as sqrtf only sees non-negative sums of squares. Built per CPU level
 * (clones.h).
 */
#include <math.h>

#include "clones.h"
#include "optim.h"

/* `wd` is a separate argument so each call below gets a copy specialised
 * for wd == 0 or not, keeping the loop branch-free. */
static inline void adagrad_loop(float *restrict w, float *restrict G, const float *restrict g,
                                size_t n, float lr, float eps, float scale, float wd, int use_wd)
{
    for (size_t i = 0; i < n; i++) {
        float gi = scale * g[i];
        if (use_wd)
            gi += wd * w[i];
        G[i] += gi * gi;
        w[i] -= lr * gi / (sqrtf(G[i]) + eps);
    }
}

ZP_CLONES static void adagrad_apply(float *w, float *state, const float *g, size_t n,
                                    size_t stride, const zp_hyper *h, uint64_t step, float scale)
{
    if (h->weight_decay != 0.0f)
        adagrad_loop(w, state, g, n, h->lr, h->eps, scale, h->weight_decay, 1);
    else
        adagrad_loop(w, state, g, n, h->lr, h->eps, scale, 0.0f, 0);
}

/* A sparse table's row: the slice's loop on dim values, in f32 as the
 * slice (a row and a slice given the same gradients end the same bits). */
static void adagrad_apply_row(const zp_hyper *h, uint32_t dim, uint32_t stride, float *w, float *s,
                              const float *g, float scale, uint32_t step)
{
    (void)step;
    (void)stride; /* one block */
    if (h->weight_decay != 0.0f)
        adagrad_loop(w, s, g, dim, h->lr, h->eps, scale, h->weight_decay, 1);
    else
        adagrad_loop(w, s, g, dim, h->lr, h->eps, scale, 0.0f, 0);
}

const zp_optim_ops zp_adagrad_ops = {
    .name = "adagrad",
    .state_per_param = 1,
    .uses = ZP_OPTIM_USES_EPS,
    .apply = adagrad_apply,
    .apply_row = adagrad_apply_row,
};
