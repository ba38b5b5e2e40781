/*
 * ftrl.c - FTRL-Proximal (McMahan et al., "Ad Click Prediction: a View from
 * the Trenches", 2013, algorithm 1) per coordinate, for sparse rows.
 *
 * Rows only: its l1/l2/beta are not among the six hyper-parameters a dense
 * slice's snapshot records, so a dense FTRL table could not be restored
 * faithfully without a new snapshot format.
 */
#include <math.h>

#include "optim.h"

/* State z at s[0..dim), n at s[stride..stride + dim). alpha = lr, beta =
 * ftrl_beta (the sparse table sets its default, 1). */
static void ftrl_apply_row(const zp_hyper *h, uint32_t dim, uint32_t stride, float *w, float *s,
                           const float *g, float scale, uint32_t step)
{
    float *zs = s, *ns = s + stride;
    const double alpha = h->lr, l1 = h->l1, l2 = h->l2, fbeta = h->ftrl_beta;

    for (uint32_t j = 0; j < dim; j++) {
        double gj = (double)scale * g[j];
        double n = ns[j], z = zs[j];
        double sigma = (sqrt(n + gj * gj) - sqrt(n)) / alpha;
        z += gj - sigma * w[j];
        n += gj * gj;
        zs[j] = (float)z;
        ns[j] = (float)n;
        if (fabs(z) <= l1)
            w[j] = 0.0f;
        else
            w[j] = (float)(-(z - copysign(l1, z)) / ((fbeta + sqrt(n)) / alpha + l2));
    }
}

const zp_optim_ops zp_ftrl_ops = {
    .name = "ftrl",
    .state_per_param = 2,
    .uses = ZP_OPTIM_USES_FTRL,
    .apply_row = ftrl_apply_row,
};
