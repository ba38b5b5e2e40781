/*
 * stats.h - exact staleness measurement on a shard: histograms of tau (in
 * versions), clock gaps and pull waits, and the optional per-update trace.
 *
 * tau of a push = the slice's version when the push is applied - the version
 * the gradient was computed from (the version its worker last pulled). The
 * clock gap of a push = the most advanced live worker's clock when it is
 * applied - the clock it was computed at (>= 0). A pull's observed gap = its
 * clock - the slowest live worker's clock when it is answered.
 *
 * The trace is a CSV, one row per applied, dropped or late push and per
 * answered pull, written through a large stdio buffer and flushed by the
 * server's timer and at exit; its push rows and the histograms count the
 * same events.
 */
#ifndef ZP_STATS_H
#define ZP_STATS_H

#include <stdint.h>
#include <stdio.h>

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

typedef struct zp_trace zp_trace;

typedef enum zp_trace_kind {
    ZP_TRACE_PUSH = 0, /* applied */
    ZP_TRACE_DROP = 1, /* too stale: not applied */
    ZP_TRACE_LATE = 2, /* for a closed BSP round: dropped, or applied weighted */
    ZP_TRACE_PULL = 3, /* answered */
} zp_trace_kind;

typedef struct zp_trace_row {
    zp_trace_kind kind;
    uint32_t worker, table;
    int64_t clock;
    uint64_t version_read, version_applied, tau;
    int64_t clock_gap;
    double weight;
    double wait_us; /* pulls: time parked */
    int applied;    /* late rows: 1 if applied weighted */
} zp_trace_row;

/* Open <dir>/trace-shard<shard>.csv (truncating) and write the header. On
 * error returns ZEPS_EIO with a message; on success *out owns the trace. */
int zp_trace_open(zp_trace **out, const char *dir, int shard, char *err, size_t errlen);

/* Append one row; the time column is seconds since the trace was opened. */
void zp_trace_write(zp_trace *t, const zp_trace_row *row);

void zp_trace_flush(zp_trace *t);

/* Flush, fsync and close. Takes *tp; NULL is ignored. */
void zp_trace_close(zp_trace **tp);

#endif
