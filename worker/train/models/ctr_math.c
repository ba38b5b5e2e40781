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

/* A minibatch visits examples in shuffled order, so each one's offsets,
 * label, dense features and ids are cache misses: the loops below ask for
 * example b + AHEAD's (and its ids once its offsets are in) while they
 * work on b, so the misses overlap instead of queueing one by one. The
 * helpers must be inlined early: gcc finds a void function of prefetches
 * free of side effects and deletes calls to it that are not inlined yet. */
enum { AHEAD = 8 };
#define PREFETCHER static inline __attribute__((always_inline)) void

PREFETCHER prefetch_example(const zp_ctr_data *d, const size_t *ex, size_t b, size_t nb)
{
    if (b >= nb)
        return;
    size_t e = ex[b];
    __builtin_prefetch(&d->off[e + 1]);
    __builtin_prefetch(&d->label[e]);
    if (d->ndense > 0) {
        const float *x = &d->dense[e * (size_t)d->ndense];
        __builtin_prefetch(x);
        __builtin_prefetch(x + d->ndense - 1);
    }
}

PREFETCHER prefetch_ids(const zp_ctr_data *d, const size_t *ex, size_t b, size_t nb)
{
    if (b >= nb)
        return;
    const uint64_t *p = &d->ids[d->off[ex[b]]], *end = &d->ids[d->off[ex[b] + 1]];
    if (p == end)
        return;
    for (const uint64_t *q = p; q < end; q += 8) /* a cache line each */
        __builtin_prefetch(q);
    __builtin_prefetch(end - 1);
}

size_t zp_ctr_math_batch_positions(const zp_ctr_data *d, const size_t *ex, size_t nb)
{
    size_t n = 0;
    for (size_t b = 0; b < nb && b < AHEAD; b++)
        prefetch_example(d, ex, b, nb);
    for (size_t b = 0; b < nb; b++) {
        prefetch_example(d, ex, b + AHEAD, nb);
        n += d->off[ex[b] + 1] - d->off[ex[b]];
    }
    return n;
}

size_t zp_ctr_math_batch_ids(const zp_ctr_data *d, const size_t *ex, size_t nb, uint64_t *ids)
{
    size_t n = 0;
    for (size_t b = 0; b < nb && b < AHEAD; b++)
        prefetch_ids(d, ex, b, nb);
    for (size_t b = 0; b < nb; b++) {
        prefetch_ids(d, ex, b + AHEAD, nb);
        size_t lo = d->off[ex[b]], hi = d->off[ex[b] + 1];
        memcpy(&ids[n], &d->ids[lo], (hi - lo) * sizeof(uint64_t));
        n += hi - lo;
    }
    return n;
}

double zp_ctr_math_pass(const zp_ctr_data *d, const size_t *ex, size_t nb, uint32_t dim,
                        const float *rows, const float *dw, float *logit, float *grows,
                        double row_scale, float *gdense)
{
    int nd = d->ndense;
    const size_t W = 1 + (size_t)dim; /* a row: w_i, then v_i */
    double loss = 0, s[MAX_DIM], qk[MAX_DIM];
    if (dim > MAX_DIM || nb == 0)
        return NAN;
    if (gdense)
        memset(gdense, 0, (size_t)(nd + 1) * sizeof(float));
    double gd[ZP_CTR_MAX_DENSE + 1] = {0};
    size_t p = 0; /* position of the example's first id */
    for (size_t b = 0; b < nb && b < AHEAD; b++)
        prefetch_example(d, ex, b, nb);
    for (size_t b = 0; b < nb; b++) {
        prefetch_example(d, ex, b + AHEAD, nb);
        size_t e = ex[b], lo = d->off[e], n = d->off[e + 1] - lo;
        const float *x = &d->dense[e * (size_t)nd], *a = d->val ? &d->val[lo] : NULL;
        const float *r0 = &rows[p * W];
        double z = dw[nd];
        for (int j = 0; j < nd; j++)
            z += (double)dw[j] * x[j];
        /* per column k: S_k and the sum of squares, so the loop over k
         * vectorises; Q is their sum */
        memset(s, 0, dim * sizeof(double));
        memset(qk, 0, dim * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            const float *r = &r0[i * W];
            double ai = a ? a[i] : 1.0;
            z += r[0] * ai;
            for (uint32_t k = 0; k < dim; k++) {
                double t = r[1 + k] * ai;
                s[k] += t;
                qk[k] += t * t;
            }
        }
        double ss = 0, q = 0;
        for (uint32_t k = 0; k < dim; k++) {
            ss += s[k] * s[k];
            q += qk[k];
        }
        z += 0.5 * (ss - q);
        float y = d->label[e];
        /* logloss from the logit: softplus(-z) for y = 1, softplus(z) for 0 */
        double m = y > 0.5f ? -z : z;
        loss += fmax(m, 0.0) + log1p(exp(-fabs(m)));
        if (logit)
            logit[b] = (float)z;
        if (grows) {
            double g = (zp_sigmoid(z) - y) / (double)nb;
            for (int j = 0; j < nd; j++)
                gd[j] += g * x[j];
            gd[nd] += g;
            double gs = g * row_scale;
            for (size_t i = 0; i < n; i++) {
                const float *r = &r0[i * W];
                float *gr = &grows[(p + i) * W];
                double ai = a ? a[i] : 1.0;
                gr[0] = (float)(gs * ai);
                for (uint32_t k = 0; k < dim; k++)
                    gr[1 + k] = (float)(gs * (ai * s[k] - r[1 + k] * ai * ai));
            }
        }
        p += n;
    }
    if (gdense)
        for (int j = 0; j <= nd; j++)
            gdense[j] = (float)gd[j];
    return loss / (double)nb;
}
