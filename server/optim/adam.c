/*
 * adam.c - Adam: m = b1*m + (1-b1)g; v = b2*v + (1-b2)g^2; with t = step + 1,
 * w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
 *
 * The slice kernel is one fused pass (see adagrad.c on -fno-math-errno),
 * built per CPU level (clones.h: 16 floats a step with AVX-512); the
 * bias corrections are computed once per call, in double, because
 * 1 - b2^t is tiny for small t and b2 near 1.
 */
#include <math.h>

#include "clones.h"
#include "optim.h"

/* See adagrad_loop for `use_wd`. */
static inline void adam_loop(float *restrict w, float *restrict m, float *restrict v,
                             const float *restrict g, size_t n, const zp_hyper *h, float bc1inv,
                             float bc2inv, float scale, int use_wd)
{
    const float lr = h->lr, eps = h->eps, wd = h->weight_decay;
    const float b1 = h->beta1, b2 = h->beta2;
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;

    for (size_t i = 0; i < n; i++) {
        float gi = scale * g[i];
        if (use_wd)
            gi += wd * w[i];
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
        w[i] -= lr * (m[i] * bc1inv) / (sqrtf(v[i] * bc2inv) + eps);
    }
}

/* One copy per CPU level, each with a loop for wd == 0 and one for not. */
ZP_CLONES static void adam_run(float *w, float *m, float *v, const float *g, size_t n,
                               const zp_hyper *h, float bc1inv, float bc2inv, float scale)
{
    if (h->weight_decay != 0.0f)
        adam_loop(w, m, v, g, n, h, bc1inv, bc2inv, scale, 1);
    else
        adam_loop(w, m, v, g, n, h, bc1inv, bc2inv, scale, 0);
}

static void adam_apply(float *w, float *state, const float *g, size_t n, size_t stride,
                       const zp_hyper *h, uint64_t step, float scale)
{
    double t = (double)step + 1.0;
    float bc1inv = (float)(1.0 / (1.0 - pow(h->beta1, t)));
    float bc2inv = (float)(1.0 / (1.0 - pow(h->beta2, t)));
    float *m = state, *v = state + stride;

    adam_run(w, m, v, g, n, h, bc1inv, bc2inv, scale);
}

/* Row, in double; m and v stored as f32 after each step. */
static void adam_apply_row(const zp_hyper *h, uint32_t dim, uint32_t stride, float *w, float *s,
                           const float *g, float scale, uint32_t step)
{
    const double lr = h->lr, wd = h->weight_decay, eps = h->eps;
    const double b1 = h->beta1, b2 = h->beta2;
    double t = (double)step + 1.0;
    double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
    float *m = s, *v = s + stride;

    for (uint32_t j = 0; j < dim; j++) {
        double wj = w[j];
        double gj = (double)scale * g[j] + (wd != 0 ? wd * wj : 0);
        double mj = b1 * m[j] + (1.0 - b1) * gj;
        double vj = b2 * v[j] + (1.0 - b2) * gj * gj;
        m[j] = (float)mj;
        v[j] = (float)vj;
        w[j] = (float)(wj - lr * (mj / bc1) / (sqrt(vj / bc2) + eps));
    }
}

const zp_optim_ops zp_adam_ops = {
    .name = "adam",
    .state_per_param = 2,
    .uses = ZP_OPTIM_USES_BETAS | ZP_OPTIM_USES_EPS,
    .apply = adam_apply,
    .apply_row = adam_apply_row,
};
