/*
 * test_ctl_hist.c - zepsctl stats' reading of the shards' histograms
 * (worker/ctl/ctl_hist.c) against histograms built by hand: the quantiles
 * of log2 buckets (pull wait) as ranges, of linear buckets (tau) as values.
 */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "ctl_hist.h"

static Zeps__Histogram hist(uint64_t *counts, size_t n, uint64_t sum)
{
    Zeps__Histogram h = ZEPS__HISTOGRAM__INIT;
    h.counts = counts;
    h.n_counts = n;
    for (size_t i = 0; i < n; i++)
        h.n += counts[i];
    h.sum = sum;
    return h;
}

static void expect_q(const Zeps__Histogram *h, double q, bool log2, const char *want)
{
    char buf[32];
    zp_ctl_hist_quantile(h, q, log2, buf, sizeof(buf));
    ck_assert_msg(strcmp(buf, want) == 0, "q %.2f: got %s, want %s", q, buf, want);
}

/* 4 pulls answered at once and 2 that waited ~5 s (bucket 23 holds
 * [2^22, 2^23) us): the p50 is 0, the p99 the 5-second range; before, zepsctl
 * printed 0 for both whatever the data. */
START_TEST(test_pull_wait_quantiles)
{
    uint64_t c[24] = {0};
    c[0] = 4;
    c[23] = 2;
    Zeps__Histogram h = hist(c, 24, 2 * 5000000);
    ck_assert_uint_eq(zp_ctl_hist_bucket(&h, 0.5), 0);
    ck_assert_uint_eq(zp_ctl_hist_bucket(&h, 0.99), 23);
    expect_q(&h, 0.5, true, "0");
    expect_q(&h, 0.99, true, "<8388608");
    ck_assert(zp_ctl_hist_mean(&h) > 1.6e6 && zp_ctl_hist_mean(&h) < 1.7e6);
}
END_TEST

START_TEST(test_linear_quantiles)
{
    uint64_t c[64] = {0};
    c[0] = 40;
    c[1] = 55;
    c[3] = 4;
    c[63] = 1; /* tau 63 or more */
    Zeps__Histogram h = hist(c, 64, 55 + 12 + 70);
    expect_q(&h, 0.5, false, "1");
    expect_q(&h, 0.99, false, "3");
    expect_q(&h, 1.0, false, "63+");
    Zeps__Histogram empty = hist(c, 0, 0);
    expect_q(&empty, 0.5, false, "0");
    expect_q(NULL, 0.99, true, "0");
    ck_assert(zp_ctl_hist_mean(NULL) == 0.0);
}
END_TEST

/* The frequency buckets' labels (tau by row frequency): floor(log2) ranges
 * of touches, the last open-ended. */
START_TEST(test_freq_labels)
{
    static const struct {
        size_t b;
        const char *label;
    } cases[] = {{0, "1"}, {1, "2-3"}, {2, "4-7"}, {10, "1024-2047"}, {14, "16384-32767"},
                 {15, "32768+"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        zp_ctl_hist_freq_label(cases[i].b, buf, sizeof(buf));
        ck_assert_str_eq(buf, cases[i].label);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl_hist");
    TCase *tc = tcase_create("quantiles");
    tcase_add_test(tc, test_pull_wait_quantiles);
    tcase_add_test(tc, test_linear_quantiles);
    tcase_add_test(tc, test_freq_labels);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
