/*
 * dc.c - a dense table's DC-ASGD state; see dc.h. It only keeps references
 * and scratch: when to compensate is policy/weighted.c's decision.
 */
#include "dc.h"

#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>

#include "alloc.h"
#include "buf.h"

void zp_dc_remember(zp_dc *dc, int nworkers, uint32_t rank, zp_buf *b)
{
    if (rank >= (uint32_t)nworkers)
        return;
    if (!dc->pulled)
        dc->pulled = zp_alloc_zeroed((size_t)nworkers, sizeof(zp_buf *));
    if (dc->pulled[rank] == b)
        return;
    if (dc->pulled[rank])
        zp_buf_release(dc->pulled[rank]->data, dc->pulled[rank]);
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    dc->pulled[rank] = b;
}

const zp_buf *zp_dc_pulled(const zp_dc *dc, uint32_t rank)
{
    return dc->pulled ? dc->pulled[rank] : NULL;
}

float *zp_dc_scratch(zp_dc *dc, size_t n)
{
    if (!dc->scratch)
        dc->scratch = malloc((n ? n : 1) * sizeof(float));
    return dc->scratch;
}

void zp_dc_compensate(float *restrict out, const float *restrict g, const float *restrict w_now,
                      const float *restrict w_stale, size_t n, float lambda)
{
    for (size_t i = 0; i < n; i++)
        out[i] = g[i] + lambda * g[i] * g[i] * (w_now[i] - w_stale[i]);
}

void zp_dc_compensate_adaptive(float *restrict out, const float *restrict g,
                               const float *restrict w_now, const float *restrict w_stale,
                               float *restrict ms, size_t n, float lambda0, float m)
{
    for (size_t i = 0; i < n; i++) {
        float gg = g[i] * g[i];
        ms[i] = m * ms[i] + (1.0f - m) * gg;
        out[i] = g[i] + lambda0 / sqrtf(ms[i] + 1e-7f) * gg * (w_now[i] - w_stale[i]);
    }
}

float *zp_dc_mean_square(zp_dc *dc, size_t n)
{
    if (!dc->ms)
        dc->ms = calloc(n ? n : 1, sizeof(float));
    return dc->ms;
}

void zp_dc_fini(zp_dc *dc, int nworkers)
{
    for (int r = 0; r < nworkers && dc->pulled; r++)
        if (dc->pulled[r])
            zp_buf_release(dc->pulled[r]->data, dc->pulled[r]);
    free(dc->pulled);
    free(dc->scratch);
    free(dc->ms);
    dc->pulled = NULL;
    dc->scratch = NULL;
    dc->ms = NULL;
}

uint64_t zp_dc_bytes(const zp_dc *dc, size_t n)
{
    return ((dc->scratch ? n : 0) + (dc->ms ? n : 0)) * sizeof(float);
}
