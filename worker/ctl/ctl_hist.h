/*
 * ctl_hist.h - reading the shards' histograms (zeps.Histogram) for zepsctl
 * stats: mean and quantiles, for linear buckets (bucket i = value i, the
 * last = more) and log2 buckets (bucket 0 = 0, bucket i = [2^(i-1), 2^i)).
 */
#ifndef ZP_CTL_HIST_H
#define ZP_CTL_HIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zeps.pb-c.h"

/* Row frequency buckets of TableStats.tau_by_freq: b = rows touched
 * [2^b, 2^(b+1)) times, the last 2^15 times or more (server/state/hist.h). */
#define ZP_CTL_FREQ_BUCKETS 16

/* The touches of frequency bucket b as text: "1", "2-3", .., "32768+". */
void zp_ctl_hist_freq_label(size_t b, char *buf, size_t len);

/* The mean of the values counted (exact: the histogram keeps their sum). */
double zp_ctl_hist_mean(const Zeps__Histogram *h);

/* The bucket that holds quantile q (0 < q <= 1) of the values; 0 for an
 * empty or NULL histogram. */
size_t zp_ctl_hist_bucket(const Zeps__Histogram *h, double q);

/* Quantile q as text into buf: a linear bucket's value ("3", "63+" for
 * the last), or a log2 bucket's range as its upper bound ("0", "<1024"):
 * what the buckets can say, no more. */
void zp_ctl_hist_quantile(const Zeps__Histogram *h, double q, bool log2, char *buf, size_t len);

#endif
