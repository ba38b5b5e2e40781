/*
 * segments.c - a dense table's initial values by segment; see segments.h.
 */
#include "segments.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "init.h"
#include "sparse_hash.h" /* xxHash, inlined */
#include "zeps_errors.h"

int zp_segments_check(const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    if (spec->n_segments > ZP_SEGMENTS_MAX) {
        snprintf(err, errlen, "table '%s': %zu init segments, at most %d", spec->name,
                 spec->n_segments, ZP_SEGMENTS_MAX);
        return ZEPS_EINVAL;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < spec->n_segments; i++) {
        const Zeps__InitSegment *g = spec->segments[i];
        if (g->length == 0 || g->length > spec->length - sum) {
            snprintf(err, errlen,
                     "table '%s': init segment %zu of length %" PRIu64 " does not fit the %" PRIu64
                     " elements left of %" PRIu64,
                     spec->name, i, g->length, spec->length - sum, spec->length);
            return ZEPS_EINVAL;
        }
        if (zp_init_from_name(g->init) < 0 || !isfinite(g->init_scale)) {
            snprintf(err, errlen,
                     "table '%s': init segment %zu: initializer '%s' scale %g (zeros, constant, "
                     "uniform, normal; a finite scale)",
                     spec->name, i, g->init ? g->init : "", g->init_scale);
            return ZEPS_EINVAL;
        }
        sum += g->length;
    }
    if (spec->n_segments && sum != spec->length) {
        snprintf(err, errlen,
                 "table '%s': its init segments cover %" PRIu64 " of %" PRIu64 " elements",
                 spec->name, sum, spec->length);
        return ZEPS_EINVAL;
    }
    return 0;
}

void zp_segments_fill(const Zeps__TableSpec *spec, float *dst, uint64_t begin, size_t n)
{
    uint64_t end = begin + n, at = 0;
    for (size_t i = 0; i < spec->n_segments && at < end; i++) {
        const Zeps__InitSegment *g = spec->segments[i];
        uint64_t lo = at > begin ? at : begin, hi = at + g->length < end ? at + g->length : end;
        if (lo < hi)
            zp_init_fill(dst + (lo - begin), lo - at, (size_t)(hi - lo),
                         (zp_init_kind)zp_init_from_name(g->init), g->init_scale, g->seed);
        at += g->length;
    }
}

uint64_t zp_segments_digest(const Zeps__TableSpec *spec)
{
    uint64_t h = 0;
    for (size_t i = 0; i < spec->n_segments; i++) {
        const Zeps__InitSegment *g = spec->segments[i];
        uint64_t v[4] = {g->length, (uint64_t)zp_init_from_name(g->init), 0, g->seed};
        memcpy(&v[2], &g->init_scale, sizeof(double));
        h = XXH3_64bits_withSeed(v, sizeof(v), h + 1);
    }
    return h;
}
