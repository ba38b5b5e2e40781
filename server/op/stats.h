/*
 * stats.h - one consistent view of a shard's counters, histograms and
 * per-worker state (stats.c), read by STATS and by /metrics alike.
 */
#ifndef ZP_STATS_H
#define ZP_STATS_H

#include "hist.h"
#include "zeps.pb-c.h"

#define TH_PER_TABLE (3 + ZP_FREQ_BUCKETS)

typedef struct zp_server zp_server;

typedef struct zp_stats_view {
    Zeps__ShardStats st; /* tables and workers point into the arrays below */
    Zeps__TableStats *ts, **tsp;
    Zeps__Histogram *th; /* TH_PER_TABLE per table: tau, clock gap, pull wait, by freq */
    Zeps__Histogram **tfp; /* ZP_FREQ_BUCKETS per table: tau_by_freq's pointers */
    Zeps__WorkerStats *ws, **wsp;
    Zeps__Histogram *wh; /* tau, one per listed worker */
} zp_stats_view;

/* Fill v from s as of now (loop thread). The view points into s's live
 * histograms and names: read it before s changes, then release it with
 * zp_stats_view_fini (which frees only the view's own arrays). */
void zp_stats_fill(const zp_server *s, zp_stats_view *v);
void zp_stats_view_fini(zp_stats_view *v);

#endif
