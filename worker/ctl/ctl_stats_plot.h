/*
 * ctl_stats_plot.h - `zepsctl stats --plot DIR` (ctl_stats_plot.c).
 */
#ifndef ZP_CTL_STATS_PLOT_H
#define ZP_CTL_STATS_PLOT_H

#include "zeps.pb-c.h"

/* Sum the histograms of the n shards' statistics st[0..n) (a NULL entry: a
 * shard that did not answer, skipped) per table and per rank, write them
 * and a gnuplot script into dir (which must exist; its name must hold no
 * double quote), and run gnuplot. The caller keeps st. Returns 0 with the
 * figures made, 1 when only gnuplot failed (said on stderr; the data and
 * script are there), -1 when a file could not be written (said). */
int zp_ctl_stats_plot(const char *dir, Zeps__ShardStats *const *st, int n, const char *command);

#endif
