/*
 * hist.h - exact staleness measurement on a shard: histograms of tau (in
 * versions), clock gaps and pull waits (trace.h has the per-update trace).
 *
 * tau of a push = the slice's version when the push is applied - the version
 * the gradient was computed from (the version its worker last pulled). The
 * clock gap of a push = the most advanced live worker's clock when it is
 * applied - the clock it was computed at (>= 0). A pull's observed gap = its
 * clock - the slowest live worker's clock when it is answered.
 *
 * Per-row tau by row frequency (sparse tables): each applied row's tau (the
 * row's version - the version the worker read of that row) is counted in
 * the histogram of the row's frequency bucket, floor(log2(touches)) of the
 * row as the push touches it, so hot and cold rows' staleness can be told
 * apart (docs/consistency.md).
 */
#ifndef ZP_HIST_H
#define ZP_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "zeps.pb-c.h"

#define ZP_HIST_BUCKETS 64 /* tau/gap: 0..62 exact, 63 = 63 or more; waits: log2 us */

typedef struct zp_hist {
    uint64_t counts[ZP_HIST_BUCKETS];
    uint64_t n, sum, max;
} zp_hist;

/* Row frequency buckets: bucket b holds rows touched [2^b, 2^(b+1)) times,
 * the last one 2^15 times or more. */
#define ZP_FREQ_BUCKETS 16

/* The frequency bucket of a row touched freq times (0 counts as 1). */
static inline int zp_freq_bucket(uint32_t freq)
{
    int b = 31 - __builtin_clz(freq | 1);
    return b < ZP_FREQ_BUCKETS - 1 ? b : ZP_FREQ_BUCKETS - 1;
}

/* Count value v in bucket min(v, 63). Inline: sparse pushes count every
 * row they apply. */
static inline void zp_hist_add_linear(zp_hist *h, uint64_t v)
{
    h->counts[v < ZP_HIST_BUCKETS - 1 ? v : ZP_HIST_BUCKETS - 1]++;
    h->n++;
    h->sum += v;
    h->max = v > h->max ? v : h->max;
}

/* Count v in bucket 0 if v == 0, else 1 + floor(log2(v)) (capped at 63). */
void zp_hist_add_log2(zp_hist *h, uint64_t v);

/* Per-row tau by row frequency: counts[f][t] = rows pushed in frequency
 * bucket f with tau bucket t (linear, as zp_hist_add_linear). Only counts,
 * so a row costs one increment; a bucket's n, sum and max are derived when
 * exported (zp_hist_freq_to_pb), where a tau of 63 or more counts as 63
 * (the table's tau histogram keeps the exact sum and max). */
typedef struct zp_freq_hist {
    uint64_t counts[ZP_FREQ_BUCKETS][ZP_HIST_BUCKETS];
} zp_freq_hist;

/* Count a row touched freq times (this push's touch included) with tau. */
static inline void zp_freq_hist_add(zp_freq_hist *f, uint32_t freq, uint64_t tau)
{
    f->counts[zp_freq_bucket(freq)][tau < ZP_HIST_BUCKETS - 1 ? tau : ZP_HIST_BUCKETS - 1]++;
}

/* How many frequency buckets to export: up to the last one with a count
 * (0 when none has). */
size_t zp_hist_freq_used(const zp_freq_hist *f);

/* Fill a protobuf Histogram of frequency bucket b: counts point into f
 * (valid while f is), n, sum and max derived from them. */
void zp_hist_freq_to_pb(const zp_freq_hist *f, size_t b, Zeps__Histogram *pb);

/* Fill a protobuf Histogram that points into h (valid while h is). */
void zp_hist_to_pb(const zp_hist *h, Zeps__Histogram *pb);

#endif
