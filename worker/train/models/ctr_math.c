/*
 * ctr_math.c - forward and backward pass of the ctr model (ctr_math.h).
 *
 * Per example: S_d = sum_i v_id a_i and Q = sum_i,d v_id^2 a_i^2 give the
 * FM term (|S|^2 - Q) / 2; with g = (sigmoid(z) - y) / nb the gradients
 * are dz/dw_i = a_i, dz/dv_id = a_i S_d - v_id a_i^2, dz/du_j = x_j,
 * dz/db = 1. Accumulation is in double per example; rows stay f32 as on
 * the servers.
 */
#include "ctr_math.h"

#include <math.h>
#include <string.h>

#include "ctr_metrics.h"

#define MAX_DIM 4096

size_t zp_ctr_math_batch_positions(const zp_ctr_data *d, const size_t *ex, size_t nb)
{
    size_t n = 0;
    for (size_t b = 0; b < nb; b++)
        n += d->off[ex[b] + 1] - d->off[ex[b]];
    return n;
}

size_t zp_ctr_math_batch_ids(const zp_ctr_data *d, const size_t *ex, size_t nb, uint64_t *ids)
{
    size_t n = 0;
    for (size_t b = 0; b < nb; b++) {
        size_t lo = d->off[ex[b]], hi = d->off[ex[b] + 1];
        memcpy(&ids[n], &d->ids[lo], (hi - lo) * sizeof(uint64_t));
        n += hi - lo;
    }
    return n;
}

double zp_ctr_math_pass(const zp_ctr_data *d, const size_t *ex, size_t nb, uint32_t dim,
                        const float *lin, const float *emb, const float *dw, float *logit,
                        float *glin, float *gemb, float *gdense)
{
    int nd = d->ndense;
    double loss = 0, s[MAX_DIM];
    if (dim > MAX_DIM || nb == 0)
        return NAN;
    if (gdense)
        memset(gdense, 0, (size_t)(nd + 1) * sizeof(float));
    double gd[ZP_CTR_MAX_DENSE + 1] = {0};
    size_t p = 0; /* position of the example's first id */
    for (size_t b = 0; b < nb; b++) {
        size_t e = ex[b], lo = d->off[e], n = d->off[e + 1] - lo;
        const float *x = &d->dense[e * (size_t)nd], *a = d->val ? &d->val[lo] : NULL;
        double z = dw[nd];
        for (int j = 0; j < nd; j++)
            z += (double)dw[j] * x[j];
        memset(s, 0, dim * sizeof(double));
        double q = 0;
        for (size_t i = 0; i < n; i++) {
            const float *v = &emb[(p + i) * dim];
            double ai = a ? a[i] : 1.0;
            z += lin[p + i] * ai;
            for (uint32_t k = 0; k < dim; k++) {
                double t = v[k] * ai;
                s[k] += t;
                q += t * t;
            }
        }
        double ss = 0;
        for (uint32_t k = 0; k < dim; k++)
            ss += s[k] * s[k];
        z += 0.5 * (ss - q);
        float y = d->label[e];
        /* logloss from the logit: softplus(-z) for y = 1, softplus(z) for 0 */
        double m = y > 0.5f ? -z : z;
        loss += fmax(m, 0.0) + log1p(exp(-fabs(m)));
        if (logit)
            logit[b] = (float)z;
        if (glin) {
            double g = (zp_sigmoid(z) - y) / (double)nb;
            for (int j = 0; j < nd; j++)
                gd[j] += g * x[j];
            gd[nd] += g;
            for (size_t i = 0; i < n; i++) {
                const float *v = &emb[(p + i) * dim];
                float *gv = &gemb[(p + i) * dim];
                double ai = a ? a[i] : 1.0;
                glin[p + i] = (float)(g * ai);
                for (uint32_t k = 0; k < dim; k++)
                    gv[k] = (float)(g * (ai * s[k] - v[k] * ai * ai));
            }
        }
        p += n;
    }
    if (gdense)
        for (int j = 0; j <= nd; j++)
            gdense[j] = (float)gd[j];
    return loss / (double)nb;
}
