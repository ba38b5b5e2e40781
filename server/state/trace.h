/*
 * trace.h - the optional per-update trace of a shard (trace.c): a CSV, one
 * row per applied, dropped or late push and per answered pull; its push
 * rows and the histograms (hist.h) count the same events.
 */
#ifndef ZP_TRACE_H
#define ZP_TRACE_H

#include <stdint.h>
#include <stdio.h>

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
