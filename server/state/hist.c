/*
 * hist.c - the fixed-bucket histograms of exact staleness measurement
 * (tau, clock gap, pull wait, a sparse table's per-row tau by row
 * frequency). Pure counting, no allocation: the op layer records into
 * them, STATS copies them out. See hist.h.
 */
#include "hist.h"

#include <stdbool.h>

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

static bool freq_bucket_empty(const zp_freq_hist *f, size_t b)
{
    for (size_t t = 0; t < ZP_HIST_BUCKETS; t++)
        if (f->counts[b][t])
            return false;
    return true;
}

size_t zp_hist_freq_used(const zp_freq_hist *f)
{
    size_t n = ZP_FREQ_BUCKETS;
    while (n > 0 && freq_bucket_empty(f, n - 1))
        n--;
    return n;
}

void zp_hist_freq_to_pb(const zp_freq_hist *f, size_t b, Zeps__Histogram *pb)
{
    zeps__histogram__init(pb);
    size_t last = 0;
    for (size_t t = 0; t < ZP_HIST_BUCKETS; t++) {
        uint64_t c = f->counts[b][t];
        if (c == 0)
            continue;
        pb->n += c;
        pb->sum += c * t;
        last = t + 1;
    }
    pb->n_counts = last;
    pb->counts = (uint64_t *)f->counts[b];
    pb->max = last ? last - 1 : 0;
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
