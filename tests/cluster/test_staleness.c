/*
 * test_staleness.c - bounded staleness, staleness weighting, DC-ASGD,
 * backup workers and the exact measurement of staleness, with real servers
 * and worker processes (and the policies' arithmetic as unit tests).
 *
 * Worker processes run pull(c) / compute / push(c) / clock(c); rank
 * `slow` sleeps before each push, so the others run ahead as far as the
 * consistency model lets them. The servers' trace (one CSV row per pull and
 * push) is then read back to check what every pull and push really saw.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "config.h"
#include "dc.h"
#include "modes.h"
#include "harness.h"
#include "hist.h"
#include "zeps.h"

#define LEN 64

static const zeps_table_spec spec = {.name = "x", .length = LEN, .optimizer = "sgd", .lr = 0.01};

/* --- arithmetic --- */

START_TEST(test_weight_functions)
{
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_NONE, 0, 7), 1.0);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_INVERSE, 0, 0), 1.0);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_INVERSE, 0, 3), 0.25);
    ck_assert_double_eq_tol(zp_weighted_weight(ZP_WEIGHT_EXP, 0.5, 2), exp(-1.0), 1e-15);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_EXP, 0.5, 0), 1.0);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_LR_OVER_TAU, 0, 0), 1.0);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_LR_OVER_TAU, 0, 1), 1.0);
    ck_assert_double_eq(zp_weighted_weight(ZP_WEIGHT_LR_OVER_TAU, 0, 4), 0.25);
}
END_TEST

START_TEST(test_dc_formula)
{
    const float g[3] = {2.0f, -1.0f, 0.5f}, now[3] = {1.0f, 1.0f, 1.0f};
    const float stale[3] = {0.5f, 2.0f, 1.0f};
    float out[3];
    zp_dc_compensate(out, g, now, stale, 3, 0.1f);
    ck_assert_float_eq(out[0], 2.0f + 0.1f * 4.0f * 0.5f);
    ck_assert_float_eq(out[1], -1.0f + 0.1f * 1.0f * -1.0f);
    ck_assert_float_eq(out[2], 0.5f); /* w did not move: no compensation */
}
END_TEST

START_TEST(test_histograms)
{
    zp_hist h = {0};
    zp_hist_add_linear(&h, 0);
    zp_hist_add_linear(&h, 5);
    zp_hist_add_linear(&h, 1000);
    ck_assert_uint_eq(h.counts[0], 1);
    ck_assert_uint_eq(h.counts[5], 1);
    ck_assert_uint_eq(h.counts[ZP_HIST_BUCKETS - 1], 1);
    ck_assert_uint_eq(h.n, 3);
    ck_assert_uint_eq(h.sum, 1005);
    ck_assert_uint_eq(h.max, 1000);
    zp_hist w = {0};
    zp_hist_add_log2(&w, 0);
    zp_hist_add_log2(&w, 1);
    zp_hist_add_log2(&w, 3);
    zp_hist_add_log2(&w, 1024);
    ck_assert_uint_eq(w.counts[0], 1);
    ck_assert_uint_eq(w.counts[1], 1);  /* [1, 2) */
    ck_assert_uint_eq(w.counts[2], 1);  /* [2, 4) */
    ck_assert_uint_eq(w.counts[11], 1); /* [1024, 2048) */
}
END_TEST

/* --- real processes --- */

/* A worker process: `steps` iterations; sleeps delay_ms before each push. */
static void worker(const zt_cluster *cl, int r, int steps, double delay_ms)
{
    zeps_client *c = zt_client(cl, (uint32_t)r);
    if (!c)
        _exit(10);
    uint32_t t;
    if (zeps_declare(c, &spec, &t) != 0)
        _exit(11);
    float w[LEN], g[LEN];
    for (int64_t k = 0; k < steps; k++) {
        if (zeps_pull(c, t, w, 0, LEN, k) != 0)
            _exit(12);
        for (int i = 0; i < LEN; i++)
            g[i] = 0.01f * w[i] + 0.001f;
        if (delay_ms > 0) {
            struct timespec ts = {0, (long)(delay_ms * 1e6)};
            nanosleep(&ts, NULL);
        }
        if (zeps_push(c, t, g, 0, LEN, k) != 0)
            _exit(13);
        if (zeps_clock(c, k) != 0)
            _exit(14);
    }
    zeps_client_destroy(&c);
    _exit(0);
}

/* Run n workers: rank `slow` does slow_steps with delay slow_ms, the others
 * fast_steps with fast_ms. */
static void run_workers(const zt_cluster *cl, int n, int slow_steps, int fast_steps, int slow,
                        double slow_ms, double fast_ms)
{
    pid_t pids[16];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            worker(cl, r, r == slow ? slow_steps : fast_steps, r == slow ? slow_ms : fast_ms);
    }
    for (int r = 0; r < n; r++) {
        int st = zt_wait(pids[r], 120);
        ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "worker %d failed (status %d)", r, st);
    }
}

typedef struct trace_sum {
    int pulls, pushes, drops, lates, lates_applied;
    int64_t max_pull_gap[16];  /* per worker */
    int waited_pulls[16];      /* pulls parked over 2 ms, per worker */
    double tau_sum[16];
    int tau_n[16];
} trace_sum;

/* Read <dir>/trace-shard0.csv (server still running: it flushes every 100 ms). */
static void read_trace(const zt_cluster *cl, trace_sum *ts)
{
    memset(ts, 0, sizeof(*ts));
    char path[400], line[512], kind[16];
    snprintf(path, sizeof(path), "%s/trace-shard0.csv", cl->dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f)); /* header */
    ck_assert_ptr_nonnull(strstr(line, "time_s,kind,worker"));
    while (fgets(line, sizeof(line), f)) {
        double time_s, weight, wait_us;
        unsigned worker, table;
        long long clock, gap;
        unsigned long long vr, va, tau;
        int applied;
        int n = sscanf(line, "%lf,%15[a-z],%u,%u,%lld,%llu,%llu,%llu,%lld,%lf,%lf,%d", &time_s,
                       kind, &worker, &table, &clock, &vr, &va, &tau, &gap, &weight, &wait_us,
                       &applied);
        ck_assert_int_eq(n, 12);
        ck_assert_uint_lt(worker, 16);
        if (strcmp(kind, "pull") == 0) {
            ts->pulls++;
            if (gap > ts->max_pull_gap[worker])
                ts->max_pull_gap[worker] = gap;
            ts->waited_pulls[worker] += wait_us > 2000;
        } else if (strcmp(kind, "push") == 0) {
            ts->pushes++;
            ck_assert_uint_eq(tau, va - vr);
            ts->tau_sum[worker] += (double)tau;
            ts->tau_n[worker]++;
        } else if (strcmp(kind, "drop") == 0) {
            ts->drops++;
        } else if (strcmp(kind, "late") == 0) {
            ts->lates++;
            ts->lates_applied += applied;
        }
    }
    fclose(f);
}

static Zeps__TableStats *table_stats(Zeps__ShardStats *st)
{
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_ge(st->n_tables, 1);
    return st->tables[0];
}

/* After a run: the trace's push rows equal the histograms' counts. */
static void check_trace_matches_stats(const zt_cluster *cl, const trace_sum *ts)
{
    zeps_client *tool = zt_client(cl, 0);
    ck_assert_ptr_nonnull(tool);
    Zeps__ShardStats *st = zt_stats(tool, 0);
    Zeps__TableStats *t = table_stats(st);
    ck_assert_uint_eq(t->tau->n, (uint64_t)(ts->pushes + ts->lates_applied));
    ck_assert_uint_eq(t->clock_gap->n, t->tau->n);
    ck_assert_uint_eq(t->dropped, (uint64_t)ts->drops);
    ck_assert_uint_eq(t->late, (uint64_t)ts->lates);
    zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_destroy(&tool);
}

static const int ssp_bounds[] = {0, 1, 3};

/* ssp (the slow worker sleeps 60 ms a step: far above the noise of a loaded
 * machine): no pull ever observes a clock gap above s, the fast workers do run
 * s clocks ahead, and they are parked when they would run further. */
START_TEST(test_ssp_bound)
{
    int s = ssp_bounds[_i];
    char extra[64];
    zt_cluster cl;
    snprintf(extra, sizeof(extra), "  staleness = %d;", s);
    ck_assert_int_eq(zt_cluster_start_traced(&cl, 1, 3, "ssp", extra), 0);
    run_workers(&cl, 3, 12, 12, 2, 60.0, 0.0);
    struct timespec ts150 = {0, 250000000};
    nanosleep(&ts150, NULL); /* a trace flush */
    trace_sum tr;
    read_trace(&cl, &tr);
    ck_assert_int_ge(tr.pulls, 36);
    for (int w = 0; w < 3; w++)
        ck_assert_msg(tr.max_pull_gap[w] <= s, "s=%d: worker %d saw a clock gap of %lld", s, w,
                      (long long)tr.max_pull_gap[w]);
    for (int w = 0; w < 2; w++) {
        ck_assert_msg(tr.max_pull_gap[w] == s, "s=%d: fast worker %d never ran %d ahead (max %lld)",
                      s, w, s, (long long)tr.max_pull_gap[w]);
        ck_assert_msg(tr.waited_pulls[w] >= 5, "s=%d: fast worker %d was parked only %d times", s,
                      w, tr.waited_pulls[w]);
    }
    check_trace_matches_stats(&cl, &tr);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static const int weighted_bounds[] = {1, 2};

/* weighted with a pull `bound`: as ssp, the largest clock gap any pull
 * observes is exactly the bound (an off-by-one either way fails: one more
 * is seen, or the fast workers never reach it), and the fast workers are
 * parked for it. */
START_TEST(test_weighted_bound)
{
    int b = weighted_bounds[_i];
    char extra[96];
    zt_cluster cl;
    snprintf(extra, sizeof(extra), "  weighting = { function = \"inverse\"; bound = %d; };", b);
    ck_assert_int_eq(zt_cluster_start_traced(&cl, 1, 3, "weighted", extra), 0);
    run_workers(&cl, 3, 12, 12, 2, 60.0, 0.0);
    struct timespec flush = {0, 250000000};
    nanosleep(&flush, NULL);
    trace_sum tr;
    read_trace(&cl, &tr);
    ck_assert_int_ge(tr.pulls, 36);
    int64_t max = 0;
    for (int w = 0; w < 3; w++)
        if (tr.max_pull_gap[w] > max)
            max = tr.max_pull_gap[w];
    ck_assert_msg(max == b, "bound %d: the largest clock gap at a pull was %lld", b,
                  (long long)max);
    for (int w = 0; w < 2; w++)
        ck_assert_msg(tr.waited_pulls[w] >= 5, "bound %d: fast worker %d was parked only %d times",
                      b, w, tr.waited_pulls[w]);
    check_trace_matches_stats(&cl, &tr);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* bsp: every applied push has tau 0, slow worker or not. */
START_TEST(test_bsp_tau_zero)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start_traced(&cl, 1, 3, "bsp", ""), 0);
    run_workers(&cl, 3, 8, 8, 2, 15.0, 0.0);
    zeps_client *tool = zt_client(&cl, 0);
    Zeps__ShardStats *st = zt_stats(tool, 0);
    Zeps__TableStats *t = table_stats(st);
    ck_assert_uint_eq(t->tau->n, 24);
    ck_assert_uint_eq(t->tau->max, 0);
    ck_assert_uint_eq(t->tau->counts[0], 24);
    zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_destroy(&tool);
    struct timespec ts150 = {0, 250000000};
    nanosleep(&ts150, NULL);
    trace_sum tr;
    read_trace(&cl, &tr);
    check_trace_matches_stats(&cl, &tr);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* The slow worker's mean tau in one async run. */
static double async_slow_tau(double slow_ms)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start_traced(&cl, 1, 3, "async", ""), 0);
    /* the fast workers keep pushing for as long as the slow one runs */
    run_workers(&cl, 3, 10, (int)(10 * slow_ms / 2.0), 2, slow_ms, 2.0);
    struct timespec ts150 = {0, 250000000};
    nanosleep(&ts150, NULL);
    trace_sum tr;
    read_trace(&cl, &tr);
    check_trace_matches_stats(&cl, &tr);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    ck_assert_int_eq(tr.tau_n[2], 10);
    return tr.tau_sum[2] / tr.tau_n[2];
}

/* async: the slow worker's staleness grows with its slow-down. */
START_TEST(test_async_tau_grows)
{
    double a = async_slow_tau(5.0), b = async_slow_tau(30.0);
    ck_assert_msg(b > a + 2.0 && b > 4.0, "mean tau %.2f at 5 ms, %.2f at 30 ms", a, b);
}
END_TEST

/* weighted: a push computed 3 versions ago is applied with 1/(1+3) of its
 * weight, exactly; past max_staleness it is dropped and the worker told. */
START_TEST(test_weighted_exact)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start_traced(&cl, 1, 2, "weighted",
                                             "  weighting = { function = \"inverse\"; "
                                             "max_staleness = 4; };"),
                     0);
    zeps_client *a = zt_client(&cl, 0), *b = zt_client(&cl, 1);
    zeps_table_spec sp = {.name = "w", .length = LEN, .optimizer = "sgd", .lr = 1.0};
    uint32_t ta, tb;
    ck_assert_int_eq(zeps_declare(a, &sp, &ta), 0);
    ck_assert_int_eq(zeps_declare(b, &sp, &tb), 0);
    float w[LEN], g[LEN];
    for (int i = 0; i < LEN; i++)
        g[i] = 1.0f;
    ck_assert_int_eq(zeps_pull(a, ta, w, 0, LEN, 0), 0); /* a reads version 0 */
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(zeps_pull(b, tb, w, 0, LEN, k), 0);
        ck_assert_int_eq(zeps_push(b, tb, g, 0, LEN, k), 0); /* tau 0: -1 each */
    }
    ck_assert_int_eq(zeps_push(a, ta, g, 0, LEN, 0), 0); /* tau 3: weight 1/4 */
    ck_assert_int_eq(zeps_pull(b, tb, w, 0, LEN, 3), 0);
    ck_assert_float_eq(w[0], -3.25f);
    ck_assert_uint_eq(zeps_pulled_version(b, tb, 0), 4);
    /* now a's view is 4 versions old; after one more push by b it is 5 > 4 */
    ck_assert_int_eq(zeps_push(b, tb, g, 0, LEN, 3), 0);
    ck_assert_int_eq(zeps_push(a, ta, g, 0, LEN, 1), 0); /* accepted, not applied */
    zeps_client_stats cs;
    zeps_client_get_stats(a, &cs);
    ck_assert_uint_eq(cs.dropped, 1);
    ck_assert_int_eq(zeps_pull(b, tb, w, 0, LEN, 4), 0);
    ck_assert_float_eq(w[0], -4.25f);
    Zeps__ShardStats *st = zt_stats(b, 0);
    Zeps__TableStats *t = table_stats(st);
    ck_assert_uint_eq(t->dropped, 1);
    ck_assert_uint_eq(t->tau->n, 5);
    ck_assert_uint_eq(t->tau->counts[3], 1);
    ck_assert_uint_eq(t->tau->counts[0], 4);
    zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_destroy(&a);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    zeps_client_destroy(&b);
}
END_TEST

/* DC-ASGD through a real server: g + lambda*g*g*(w_now - w_stale). */
START_TEST(test_dc_asgd)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start_traced(&cl, 1, 2, "weighted",
                                             "  weighting = { function = \"none\"; dc_lambda = "
                                             "0.5; };"),
                     0);
    zeps_client *a = zt_client(&cl, 0), *b = zt_client(&cl, 1);
    zeps_table_spec sp = {.name = "w", .length = LEN, .optimizer = "sgd", .lr = 1.0,
                          .init = "constant", .init_scale = 1.0};
    uint32_t ta, tb;
    ck_assert_int_eq(zeps_declare(a, &sp, &ta), 0);
    ck_assert_int_eq(zeps_declare(b, &sp, &tb), 0);
    float w[LEN], g[LEN];
    ck_assert_int_eq(zeps_pull(a, ta, w, 0, LEN, 0), 0); /* a's w_stale = 1 */
    for (int i = 0; i < LEN; i++)
        g[i] = 1.0f;
    ck_assert_int_eq(zeps_pull(b, tb, w, 0, LEN, 0), 0);
    ck_assert_int_eq(zeps_push(b, tb, g, 0, LEN, 0), 0); /* w_now = 0, b had w_stale = 1: */
    /* b's own push: g + 0.5*1*(1 - 1) = 1 -> w = 0 */
    for (int i = 0; i < LEN; i++)
        g[i] = 2.0f;
    ck_assert_int_eq(zeps_push(a, ta, g, 0, LEN, 0), 0);
    /* a: 2 + 0.5*4*(0 - 1) = 0 -> w stays 0 */
    ck_assert_int_eq(zeps_pull(b, tb, w, 0, LEN, 1), 0);
    ck_assert_float_eq(w[0], 0.0f);
    ck_assert_float_eq(w[LEN - 1], 0.0f);
    zeps_client_destroy(&a);
    zeps_client_destroy(&b);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* bsp with one backup worker: a round closes after 2 of 3 pushes, averaged
 * over those 2; the third, late, is dropped (and counted). */
START_TEST(test_backup_workers)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start_traced(&cl, 1, 3, "bsp", "  backup_workers = 1;"), 0);
    zeps_client *c[3];
    uint32_t t[3];
    zeps_table_spec sp = {.name = "w", .length = LEN, .optimizer = "sgd", .lr = 1.0};
    for (int r = 0; r < 3; r++) {
        c[r] = zt_client(&cl, (uint32_t)r);
        ck_assert_int_eq(zeps_declare(c[r], &sp, &t[r]), 0);
    }
    float w[LEN], g[LEN];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < LEN; i++)
            g[i] = (float)(r + 1); /* 1 and 2 */
        ck_assert_int_eq(zeps_push(c[r], t[r], g, 0, LEN, 0), 0);
    }
    ck_assert_int_eq(zeps_pull(c[0], t[0], w, 0, LEN, 1), 0); /* round 0 closed */
    ck_assert_float_eq(w[0], -1.5f);
    for (int i = 0; i < LEN; i++)
        g[i] = 100.0f;
    ck_assert_int_eq(zeps_push(c[2], t[2], g, 0, LEN, 0), 0); /* late: dropped */
    zeps_client_stats cs;
    zeps_client_get_stats(c[2], &cs);
    ck_assert_uint_eq(cs.dropped, 1);
    ck_assert_int_eq(zeps_pull(c[0], t[0], w, 0, LEN, 1), 0);
    ck_assert_float_eq(w[0], -1.5f);
    Zeps__ShardStats *st = zt_stats(c[0], 0);
    ck_assert_uint_eq(table_stats(st)->late, 1);
    ck_assert_uint_eq(table_stats(st)->rounds, 1);
    zeps__shard_stats__free_unpacked(st, NULL);
    for (int r = 0; r < 3; r++)
        zeps_client_destroy(&c[r]);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("staleness");
    TCase *tc = tcase_create("arithmetic");
    tcase_add_test(tc, test_weight_functions);
    tcase_add_test(tc, test_dc_formula);
    tcase_add_test(tc, test_histograms);
    suite_add_tcase(s, tc);
    tc = tcase_create("processes");
    tcase_set_timeout(tc, 180);
    tcase_add_loop_test(tc, test_ssp_bound, 0, 3);
    tcase_add_loop_test(tc, test_weighted_bound, 0, 2);
    tcase_add_test(tc, test_bsp_tau_zero);
    tcase_add_test(tc, test_async_tau_grows);
    tcase_add_test(tc, test_weighted_exact);
    tcase_add_test(tc, test_dc_asgd);
    tcase_add_test(tc, test_backup_workers);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
