/*
 * ctl_hist.c - mean and quantiles of the shards' histograms (ctl_hist.h).
 */
#include "ctl_hist.h"

#include <inttypes.h>
#include <stdio.h>

double zp_ctl_hist_mean(const Zeps__Histogram *h)
{
    return h && h->n ? (double)h->sum / (double)h->n : 0.0;
}

size_t zp_ctl_hist_bucket(const Zeps__Histogram *h, double q)
{
    if (!h || h->n == 0 || h->n_counts == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)h->n + 0.5), seen = 0;
    if (want == 0)
        want = 1;
    for (size_t i = 0; i < h->n_counts; i++) {
        seen += h->counts[i];
        if (seen >= want)
            return i;
    }
    return h->n_counts - 1;
}

void zp_ctl_hist_quantile(const Zeps__Histogram *h, double q, bool log2, char *buf, size_t len)
{
    size_t b = zp_ctl_hist_bucket(h, q);
    bool last = h && h->n_counts > 0 && b + 1 == h->n_counts;
    if (log2)
        snprintf(buf, len, b == 0 ? "0" : "<%llu", b < 64 ? 1ull << b : 0ull);
    else
        snprintf(buf, len, "%zu%s", b, last && h->n_counts == 64 ? "+" : "");
}

void zp_ctl_hist_freq_label(size_t b, char *buf, size_t len)
{
    unsigned long long lo = b < 63 ? 1ull << b : 0;
    if (b + 1 >= ZP_CTL_FREQ_BUCKETS)
        snprintf(buf, len, "%llu+", lo);
    else if (b == 0)
        snprintf(buf, len, "1");
    else
        snprintf(buf, len, "%llu-%llu", lo, 2 * lo - 1);
}
