/*
 * test_delay.c - the injected per-step delays and the convergence curve of
 * the training loop (worker/train/train.c, delay.c), without a cluster.
 *
 * zp_delay_ms is a pure function of (config, rank, step), so its
 * distributions are checked by drawing many steps: fixed exactly, uniform
 * within its bounds with the right mean, lognormal with median delay_ms and
 * log-stddev delay_sigma, slow ranks exactly slow_factor times the same step
 * of a non-slow configuration. The statistical tolerances are several
 * standard errors wide, and the draws are seeded, so the tests do not
 * flake. The curve part checks when rank 0 records a point and what
 * zp_result_write_json makes of the points.
 */
#include "check_main.h"
#include "scratch.h"
#include "config.h"
#include "train.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NDRAWS 100000

static zp_config *new_cfg(zp_delay_dist dist, double ms)
{
    zp_config *cfg = malloc(sizeof(*cfg));
    ck_assert_ptr_nonnull(cfg);
    zp_config_keys_defaults(cfg);
    cfg->num_workers = 8;
    cfg->seed = 7;
    cfg->delay_dist = dist;
    cfg->delay_ms = ms;
    return cfg;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

START_TEST(deterministic)
{
    zp_delay_dist dists[] = {ZP_DELAY_UNIFORM, ZP_DELAY_LOGNORMAL};
    for (int k = 0; k < 2; k++) {
        zp_config *cfg = new_cfg(dists[k], 3.0);
        cfg->delay_jitter_ms = 5.0;
        enum { N = 1000 };
        static double fwd[N];
        for (int c = 0; c < N; c++)
            fwd[c] = zp_delay_ms(cfg, 2, c);
        /* Backwards, and step by step in another order: the same values,
         * so a step's delay does not depend on the steps before it. */
        for (int c = N - 1; c >= 0; c--)
            ck_assert_msg(zp_delay_ms(cfg, 2, c) == fwd[c], "step %d changed", c);
        for (int c = 0; c < N; c += 7)
            ck_assert(zp_delay_ms(cfg, 2, c) == fwd[c]);
        /* A second config with the same seed (another process) agrees... */
        zp_config *same = new_cfg(dists[k], 3.0);
        same->delay_jitter_ms = 5.0;
        for (int c = 0; c < N; c++)
            ck_assert(zp_delay_ms(same, 2, c) == fwd[c]);
        /* ...and another seed does not. */
        same->seed = 8;
        int differ = 0;
        for (int c = 0; c < N; c++)
            differ += zp_delay_ms(same, 2, c) != fwd[c];
        ck_assert_int_ge(differ, N - 5);
        free(same);
        free(cfg);
    }
}
END_TEST

START_TEST(fixed_exact)
{
    zp_config *cfg = new_cfg(ZP_DELAY_FIXED, 2.5);
    cfg->delay_jitter_ms = 3.0; /* a fixed delay ignores the jitter */
    cfg->delay_sigma = 2.0;     /* and sigma */
    for (int r = 0; r < 8; r++)
        for (int64_t c = 0; c < 1000; c++)
            ck_assert_double_eq(zp_delay_ms(cfg, r, c), 2.5);
    ck_assert_double_eq(zp_delay_ms(cfg, 0, INT64_MAX), 2.5);
    cfg->delay_ms = 0.0;
    ck_assert_double_eq(zp_delay_ms(cfg, 3, 17), 0.0);
    /* The default configuration injects nothing. */
    zp_config_keys_defaults(cfg);
    ck_assert_double_eq(zp_delay_ms(cfg, 0, 0), 0.0);
    ck_assert_double_eq(zp_delay_ms(cfg, 5, 123), 0.0);
    free(cfg);
}
END_TEST

START_TEST(uniform_bounds_and_mean)
{
    zp_config *cfg = new_cfg(ZP_DELAY_UNIFORM, 2.0);
    cfg->delay_jitter_ms = 4.0;
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    int below_mid = 0;
    for (int64_t c = 0; c < NDRAWS; c++) {
        double d = zp_delay_ms(cfg, 1, c);
        ck_assert_msg(d >= 2.0 && d < 6.0, "step %lld: %g outside [2, 6)", (long long)c, d);
        sum += d;
        lo = fmin(lo, d);
        hi = fmax(hi, d);
        below_mid += d < 4.0;
    }
    /* mean ms + jitter/2 = 4; the standard error is 4/sqrt(12)/sqrt(1e5) = 0.0037 */
    double mean = sum / NDRAWS;
    ck_assert_msg(fabs(mean - 4.0) < 0.03, "mean %g, want 4", mean);
    /* It spreads over the whole interval, evenly. */
    ck_assert_double_lt(lo, 2.01);
    ck_assert_double_gt(hi, 5.99);
    ck_assert_int_gt(below_mid, NDRAWS / 2 - 1500);
    ck_assert_int_lt(below_mid, NDRAWS / 2 + 1500);

    /* No jitter: exactly delay_ms. */
    cfg->delay_jitter_ms = 0.0;
    for (int64_t c = 0; c < 100; c++)
        ck_assert_double_eq(zp_delay_ms(cfg, 1, c), 2.0);
    free(cfg);
}
END_TEST

START_TEST(lognormal_median_and_sigma)
{
    double sigmas[] = {0.5, 1.5};
    for (int k = 0; k < 2; k++) {
        zp_config *cfg = new_cfg(ZP_DELAY_LOGNORMAL, 10.0);
        cfg->delay_sigma = sigmas[k];
        cfg->delay_jitter_ms = 100.0; /* ignored by lognormal */
        double *d = malloc(NDRAWS * sizeof(*d));
        ck_assert_ptr_nonnull(d);
        double slog = 0, slog2 = 0;
        for (int64_t c = 0; c < NDRAWS; c++) {
            d[c] = zp_delay_ms(cfg, 0, c);
            ck_assert(d[c] > 0 && isfinite(d[c]));
            double l = log(d[c]);
            slog += l;
            slog2 += l * l;
        }
        qsort(d, NDRAWS, sizeof(*d), cmp_double);
        double median = 0.5 * (d[NDRAWS / 2 - 1] + d[NDRAWS / 2]);
        double mlog = slog / NDRAWS;
        double sdlog = sqrt(slog2 / NDRAWS - mlog * mlog);
        /* Standard errors: median about 1.25 sigma / sqrt(n) relative (0.6%
         * for sigma 1.5), log-stddev sigma / sqrt(2n) (0.34 %). */
        ck_assert_msg(fabs(median / 10.0 - 1.0) < 0.03, "sigma %g: median %g, want 10", sigmas[k],
                      median);
        ck_assert_msg(fabs(mlog - log(10.0)) < 0.03, "sigma %g: mean log %g", sigmas[k], mlog);
        ck_assert_msg(fabs(sdlog / sigmas[k] - 1.0) < 0.02, "log-stddev %g, want %g", sdlog,
                      sigmas[k]);
        free(d);
        free(cfg);
    }
}
END_TEST

START_TEST(slow_ranks_scaled)
{
    zp_delay_dist dists[] = {ZP_DELAY_FIXED, ZP_DELAY_UNIFORM, ZP_DELAY_LOGNORMAL};
    for (int k = 0; k < 3; k++) {
        zp_config *base = new_cfg(dists[k], 1.5);
        base->delay_jitter_ms = 2.0;
        zp_config *slow = new_cfg(dists[k], 1.5);
        slow->delay_jitter_ms = 2.0;
        slow->num_slow_ranks = 2;
        slow->slow_ranks[0] = 5;
        slow->slow_ranks[1] = 3;
        slow->slow_factor = 3.0;
        for (int64_t c = 0; c < 2000; c++) {
            for (int r = 0; r < 8; r++) {
                double b = zp_delay_ms(base, r, c);
                double s = zp_delay_ms(slow, r, c);
                if (r == 3 || r == 5)
                    ck_assert_msg(fabs(s - 3.0 * b) <= 1e-12 * b, "rank %d step %lld: %g vs 3 x %g",
                                  r, (long long)c, s, b);
                else
                    ck_assert_msg(s == b, "rank %d is not slow but got %g, not %g", r, s, b);
            }
        }
        /* A factor of 1 (the default) leaves slow ranks as they were. */
        slow->slow_factor = 1.0;
        ck_assert(zp_delay_ms(slow, 3, 42) == zp_delay_ms(base, 3, 42));
        free(slow);
        free(base);
    }
}
END_TEST

START_TEST(ranks_and_steps_differ)
{
    zp_delay_dist dists[] = {ZP_DELAY_UNIFORM, ZP_DELAY_LOGNORMAL};
    for (int k = 0; k < 2; k++) {
        zp_config *cfg = new_cfg(dists[k], 4.0);
        cfg->delay_jitter_ms = 4.0;
        int same_rank = 0, same_step = 0, same_swap = 0;
        for (int64_t c = 0; c < 1000; c++) {
            double d = zp_delay_ms(cfg, 0, c);
            same_rank += d == zp_delay_ms(cfg, 1, c);
            same_step += d == zp_delay_ms(cfg, 0, c + 1);
            /* (rank, step) are not interchangeable either */
            same_swap += zp_delay_ms(cfg, 1, c + 2) == zp_delay_ms(cfg, 2, c + 1);
        }
        ck_assert_int_le(same_rank, 2);
        ck_assert_int_le(same_step, 2);
        ck_assert_int_le(same_swap, 2);
        /* Ranks are not shifted copies of one sequence: rank 1 at step c is
         * not rank 0 at step c + 1, ... */
        int shifted = 0;
        for (int64_t c = 0; c < 1000; c++)
            shifted += zp_delay_ms(cfg, 1, c) == zp_delay_ms(cfg, 0, c + 1);
        ck_assert_int_le(shifted, 2);
        /* and their uniform draws are not correlated. */
        double sxy = 0, sx = 0, sy = 0, sxx = 0, syy = 0;
        for (int64_t c = 0; c < NDRAWS / 10; c++) {
            double x = zp_delay_ms(cfg, 0, c), y = zp_delay_ms(cfg, 1, c);
            sx += x, sy += y, sxy += x * y, sxx += x * x, syy += y * y;
        }
        double n = NDRAWS / 10;
        double corr = (sxy - sx * sy / n) / sqrt((sxx - sx * sx / n) * (syy - sy * sy / n));
        ck_assert_msg(fabs(corr) < 0.03, "ranks 0 and 1 correlate: %g", corr);
        free(cfg);
    }
}
END_TEST

START_TEST(curve_due)
{
    zp_config *cfg = new_cfg(ZP_DELAY_FIXED, 0.0);
    ck_assert(!zp_train_curve_due(cfg, 0, 0)); /* off by default */
    cfg->eval_every_steps = 20;
    ck_assert(zp_train_curve_due(cfg, 0, 0));
    ck_assert(zp_train_curve_due(cfg, 0, 20));
    ck_assert(zp_train_curve_due(cfg, 0, 280));
    ck_assert(!zp_train_curve_due(cfg, 0, 1));
    ck_assert(!zp_train_curve_due(cfg, 0, 19));
    ck_assert(!zp_train_curve_due(cfg, 0, 21));
    ck_assert(!zp_train_curve_due(cfg, 1, 0)); /* rank 0 only */
    ck_assert(!zp_train_curve_due(cfg, 1, 20));
    int n = 0;
    for (int64_t c = 0; c < 300; c++)
        n += zp_train_curve_due(cfg, 0, c);
    ck_assert_int_eq(n, 15); /* 0, 20, ..., 280 */
    cfg->eval_every_steps = 1;
    ck_assert(zp_train_curve_due(cfg, 0, 7));
    free(cfg);
}
END_TEST

/* The whole of file `path` as a new string the caller frees. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *buf = malloc(1 << 20);
    ck_assert_ptr_nonnull(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

START_TEST(curve_json)
{
    zp_config *cfg = new_cfg(ZP_DELAY_FIXED, 0.0);
    snprintf(cfg->model, sizeof(cfg->model), "quadratic");
    zp_train_result r = {.rank = 0, .epochs = 1, .iterations = 300, .evaluated = 1};
    r.final = (zp_eval){.loss = 0.5, .accuracy = NAN, .distance = 0.25, .rel_distance = 0.125};

    /* 200 points: the array grows past its first allocation. */
    for (int i = 0; i < 200; i++) {
        zp_eval e = {.loss = 100.0 / (i + 1),
                     .accuracy = NAN,
                     .distance = 2.0 / (i + 1),
                     .rel_distance = 1.0 / (i + 1)};
        zp_result_curve_add(&r.curve, 20 * i, (uint64_t)i, &e);
    }
    /* A classifier's point: accuracy, and no distances whatever evaluate left there. */
    zp_eval cls = {.loss = 0.75, .accuracy = 0.875, .distance = 0.0, .rel_distance = 0.0};
    zp_result_curve_add(&r.curve, 4000, 7, &cls);
    ck_assert_uint_eq(r.curve.n, 201);
    ck_assert_int_eq(r.curve.points[199].step, 3980);
    ck_assert_double_eq(r.curve.points[1].loss, 50.0);

    char path[256];
    ck_assert_int_eq(zt_scratch_file(path, sizeof(path), "delay"), 0);
    ck_assert_int_eq(zp_result_write_json(cfg, &r, path), 0);
    char *text = slurp(path);
    /* The flat keys are as before, the curve comes last. */
    ck_assert_ptr_nonnull(strstr(text, "{\"rank\":0,\"model\":\"quadratic\""));
    ck_assert_ptr_nonnull(strstr(text, ",\"final_rel_distance\":0.125,\"diverged\":false,\"stopped\":false,\"diverged_step\":null,\"curve\":[["));
    ck_assert_ptr_nonnull(strstr(text, "\"curve\":[[0,100,1,2,null,0],[20,50,0.5,1,null,1],"));
    ck_assert_ptr_nonnull(
        strstr(text, ",[3980,0.5,0.005,0.01,null,199],[4000,0.75,null,null,0.875,7]]}\n"));
    int points = 0;
    for (const char *p = strstr(text, "\"curve\""); (p = strchr(p + 1, '[')) != NULL;)
        points++;
    ck_assert_int_eq(points, 1 + 201); /* the outer [ and one per point */
    free(text);

    /* Without points the key is still there, empty. */
    zp_result_fini(&r);
    ck_assert_ptr_null(r.curve.points);
    ck_assert_uint_eq(r.curve.n, 0);
    zp_result_fini(&r); /* twice is fine */
    ck_assert_int_eq(zp_result_write_json(cfg, &r, path), 0);
    text = slurp(path);
    ck_assert_ptr_nonnull(strstr(text, ",\"final_rel_distance\":0.125,\"diverged\":false,\"stopped\":false,\"diverged_step\":null,\"curve\":[]}\n"));
    free(text);
    ck_assert_int_eq(unlink(path), 0);
    free(cfg);
}
END_TEST

static Suite *delay_suite(void)
{
    Suite *s = suite_create("delay");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60); /* sampling tests: seconds under ASan on a loaded machine */
    tcase_add_test(tc, deterministic);
    tcase_add_test(tc, fixed_exact);
    tcase_add_test(tc, uniform_bounds_and_mean);
    tcase_add_test(tc, lognormal_median_and_sigma);
    tcase_add_test(tc, slow_ranks_scaled);
    tcase_add_test(tc, ranks_and_steps_differ);
    tcase_add_test(tc, curve_due);
    tcase_add_test(tc, curve_json);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(delay_suite());
}
