/*
 * hist.c - the fixed-bucket histograms of exact staleness measurement
 * (tau, clock gap, pull wait, a sparse table's per-row tau by row
 * frequency). Pure counting, no allocation: the op layer
 * records into them, STATS copies them out. See hist.h.
 */
#include "hist.h"

static void hist_count(zp_hist *h, int bucket, uint64_t v)
{
    h->counts[bucket]++;
    h->n++;
    h->sum += v;
    if (v > h->max)
        h->max = v;
}

void zp_hist_add_log2(zp_hist *h, uint64_t v)
{
    int b = v == 0 ? 0 : 64 - __builtin_clzll(v);
    hist_count(h, b < ZP_HIST_BUCKETS ? b : ZP_HIST_BUCKETS - 1, v);
}

size_t zp_hist_freq_used(const zp_hist *by_freq)
{
    size_t n = ZP_FREQ_BUCKETS;
    while (n > 0 && by_freq[n - 1].n == 0)
        n--;
    return n;
}

void zp_hist_to_pb(const zp_hist *h, Zeps__Histogram *pb)
{
    zeps__histogram__init(pb);
    /* only up to the last non-empty bucket */
    size_t n = ZP_HIST_BUCKETS;
    while (n > 0 && h->counts[n - 1] == 0)
        n--;
    pb->n_counts = n;
    pb->counts = (uint64_t *)h->counts;
    pb->n = h->n;
    pb->sum = h->sum;
    pb->max = h->max;
}
