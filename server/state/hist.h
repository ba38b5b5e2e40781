/*
 * hist.h - exact staleness measurement on a shard: histograms of tau (in
 * versions), clock gaps and pull waits (trace.h has the per-update trace).
 *
 * tau of a push = the slice's version when the push is applied - the version
 * the gradient was computed from (the version its worker last pulled). The
 * clock gap of a push = the most advanced live worker's clock when it is
 * applied - the clock it was computed at (>= 0). A pull's observed gap = its
 * clock - the slowest live worker's clock when it is answered.
 */
#ifndef ZP_HIST_H
#define ZP_HIST_H

#include <stdint.h>

#include "zeps.pb-c.h"

#define ZP_HIST_BUCKETS 64 /* tau/gap: 0..62 exact, 63 = 63 or more; waits: log2 us */

typedef struct zp_hist {
    uint64_t counts[ZP_HIST_BUCKETS];
    uint64_t n, sum, max;
} zp_hist;

/* Count value v in bucket min(v, 63). */
void zp_hist_add_linear(zp_hist *h, uint64_t v);

/* Count v in bucket 0 if v == 0, else 1 + floor(log2(v)) (capped at 63). */
void zp_hist_add_log2(zp_hist *h, uint64_t v);

/* Fill a protobuf Histogram that points into h (valid while h is). */
void zp_hist_to_pb(const zp_hist *h, Zeps__Histogram *pb);

#endif
