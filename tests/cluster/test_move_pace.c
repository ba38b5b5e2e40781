/*
 * test_move_pace.c - a move's pace (zepsctl shards move --max-mb-s,
 * docs/elastic.md "Pacing a move") with real shards and the real zepsctl.
 *
 * test_paced_then_unlimited: two shards; a tool client pushes WIDE rows
 * (dim 128, sgd lr 1 from zeros: each row holds what was pushed). `shards
 * move --max-mb-s 5` gives all of shard 0's slots (about 12 MB of pages) to
 * shard 1: it takes at least (MB - 5) / 5 s (the sliding second lets one
 * second's worth go at once), prints its pace, and no second held more
 * than 5 MB; every row is then exact. Then the same without the option
 * moves every slot back to shard 0 faster than the cap: unlimited is the
 * default. A bad value (text, negative, NaN) is refused, naming the
 * option, before any shard changes.
 *
 * test_cutover_not_in_pace: the same paced move while a thread pulls
 * every row over and over (a pull touches its rows, so every round holds
 * them all again), with --max-rounds 1: the cut-over sends every row
 * again, unpaced, and the busiest second the move reports (the copy
 * rounds' pages, which the pace holds) stays under the cap.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "now.h"
#include "zeps.h"

#define WDIM  128
#define WIDS  44000
#define CAPMB 5.0

static uint64_t ids[WIDS];
static float rows[WIDS * WDIM];

/* Push every id once: row i's column j gains (i + j) % 7 + 1. */
static uint32_t populate(zeps_client *c)
{
    zeps_sparse_spec spec = {
        .name = "wide", .dim = WDIM, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    zt_move_ids(ids, WIDS, 7);
    for (size_t i = 0; i < WIDS; i++)
        for (int j = 0; j < WDIM; j++)
            rows[i * WDIM + j] = -(float)((i + j) % 7 + 1);
    for (size_t at = 0; at < WIDS; at += 4000) {
        size_t k = WIDS - at < 4000 ? WIDS - at : 4000;
        ck_assert_int_eq(zeps_spush(c, t, ids + at, k, rows + at * WDIM, 0), 0);
    }
    return t;
}

/* Every row, pulled through whatever map the client learns, is exact. */
static void check_rows(zeps_client *c, uint32_t t)
{
    size_t bad = 0, first = WIDS;
    for (size_t at = 0; at < WIDS; at += 4000) {
        size_t k = WIDS - at < 4000 ? WIDS - at : 4000;
        ck_assert_msg(zeps_spull(c, t, ids + at, k, rows + at * WDIM, 0) == 0, "%s",
                      zeps_last_error(c));
        for (size_t i = at; i < at + k; i++)
            for (int j = 0; j < WDIM; j++)
                if (rows[i * WDIM + j] != (float)((i + j) % 7 + 1) && bad++ == 0)
                    first = i;
    }
    ck_assert_msg(bad == 0, "%zu values differ, the first in id %zu", bad, first);
}

/* zepsctl's summary in log: bytes and seconds. */
static void summary(const char *log, double *mb, double *secs)
{
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    unsigned long long b = 0;
    *secs = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "summary: rows=%*u bytes=%llu rounds=%*u seconds=%lf", &b, secs) == 2)
            break;
    fclose(f);
    ck_assert_msg(*secs > 0, "no summary in %s", log);
    *mb = b / 1e6;
}

/* The busiest second the paced move's log says. */
static double busiest(const char *log)
{
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    double held = -1, cap = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "paced: at most %lf MB/s (--max-mb-s); the busiest second held %lf MB",
                   &cap, &held) == 2)
            break;
    fclose(f);
    ck_assert_msg(cap == CAPMB, "no pace line in %s", log);
    return held;
}

START_TEST(test_paced_then_unlimited)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *w = NULL, *c = zt_move_tool(&cl); /* w pushes as worker 0; c reads STATS */
    ck_assert_int_eq(zeps_client_new(&w, cl.conf, 0), 0);
    uint32_t t = populate(w);
    char log[400], cap[16];
    snprintf(cap, sizeof(cap), "%g", CAPMB);

    const char *bad[] = {"ten", "-1", "nan"};
    for (int i = 0; i < 3; i++) {
        snprintf(log, sizeof(log), "%s/bad-%d.log", cl.dir, i);
        char *move[] = {"shards", "move",    "--config", cl.conf,      "--from",       "0", "--to",
                        "1",      "--slots", "0-4095",   "--max-mb-s", (char *)bad[i], NULL};
        ck_assert_int_eq(zt_move_zepsctl(log, move), 2);
        ck_assert(zt_move_file_has(log, "--max-mb-s"));
    }
    snprintf(log, sizeof(log), "%s/bad-lease.log", cl.dir); /* waits longer than the lease */
    char *short_lease[] = {"shards",     "move", "--config",   cl.conf,   "--from",
                           "0",          "--to", "1",          "--slots", "0-4095",
                           "--max-mb-s", cap,    "--lease-ms", "500",     NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, short_lease), 2);
    ck_assert(zt_move_file_has(log, "give --lease-ms 2000 or more"));
    ck_assert_uint_gt(zt_move_rows(c, 0, NULL), WIDS / 3); /* nothing moved */

    snprintf(log, sizeof(log), "%s/paced.log", cl.dir);
    char *paced[] = {"shards", "move",    "--config", cl.conf,      "--from", "0", "--to",
                     "1",      "--slots", "0-4095",   "--max-mb-s", cap,      NULL};
    double t0 = zp_now_s();
    ck_assert_int_eq(zt_move_zepsctl(log, paced), 0);
    double took = zp_now_s() - t0, mb, secs;
    zt_move_print_file(log);
    summary(log, &mb, &secs);
    ck_assert_msg(mb > 10, "only %.1f MB moved: too few to see a pace", mb);
    ck_assert_msg(took >= 0.9 * (mb - CAPMB) / CAPMB, "%.1f MB at %g MB/s in %.2f s", mb, CAPMB,
                  took);
    double held = busiest(log);
    ck_assert_msg(held > 0 && held <= CAPMB, "the busiest second held %.2f MB", held);
    ck_assert_uint_eq(zt_move_rows(c, 0, NULL), 0);
    check_rows(w, t);
    printf("paced: %.1f MB in %.2f s (%.2f s by zepsctl), busiest second %.2f MB\n", mb, took, secs,
           held);

    snprintf(log, sizeof(log), "%s/unlimited.log", cl.dir);
    char *back[] = {"shards", "move", "--config", cl.conf,  "--from", "1",
                    "--to",   "0",    "--slots",  "0-4095", NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, back), 0);
    zt_move_print_file(log);
    double mb2, secs2;
    summary(log, &mb2, &secs2);
    ck_assert(!zt_move_file_has(log, "paced"));
    ck_assert_msg(mb2 / secs2 > 1.5 * CAPMB, "unlimited: %.1f MB in %.2f s", mb2, secs2);
    ck_assert_uint_eq(zt_move_rows(c, 1, NULL), 0);
    check_rows(w, t);
    printf("unlimited: %.1f MB in %.2f s\n", mb2, secs2);
    zeps_client_destroy(&c);
    zeps_client_destroy(&w);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

typedef struct puller {
    zeps_client *c;
    uint32_t t;
    volatile int stop;
} puller;

/* Pull every id, 4000 at a time, until told to stop. */
static void *pull_loop(void *arg)
{
    static float buf[4000 * WDIM];
    puller *p = arg;
    while (!p->stop)
        for (size_t at = 0; at < WIDS && !p->stop; at += 4000) {
            size_t k = WIDS - at < 4000 ? WIDS - at : 4000;
            ck_assert_int_eq(zeps_spull(p->c, p->t, ids + at, k, buf, 0), 0);
        }
    return NULL;
}

/* The rows the cut-over line of the move's log says it sent. */
static long cutover_rows(const char *log)
{
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    long n = -1;
    while (fgets(line, sizeof(line), f) && sscanf(line, "cut-over: %ld rows", &n) != 1)
        ;
    fclose(f);
    return n;
}

START_TEST(test_cutover_not_in_pace)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *w = NULL;
    ck_assert_int_eq(zeps_client_new(&w, cl.conf, 0), 0);
    puller p = {.c = w, .t = populate(w)};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, pull_loop, &p), 0);
    char log[400], cap[16];
    snprintf(cap, sizeof(cap), "%g", CAPMB);
    snprintf(log, sizeof(log), "%s/paced.log", cl.dir);
    char *paced[] = {"shards",       "move", "--config",     cl.conf,  "--from",     "0",
                     "--to",         "1",    "--slots",      "0-4095", "--max-mb-s", cap,
                     "--max-rounds", "1",    "--cutover-ms", "10000",  NULL};
    int st = zt_move_zepsctl(log, paced);
    p.stop = 1;
    pthread_join(th, NULL);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    long cut = cutover_rows(log);
    ck_assert_msg(cut > WIDS / 4, "the cut-over sent %ld rows: too few to tell", cut);
    double held = busiest(log);
    ck_assert_msg(held > 0 && held <= CAPMB, "the busiest second held %.2f MB", held);
    zeps_client *c = zt_move_tool(&cl);
    ck_assert_uint_eq(zt_move_rows(c, 0, NULL), 0);
    check_rows(w, p.t);
    printf("cut-over of %ld rows; busiest second %.2f MB\n", cut, held);
    zeps_client_destroy(&c);
    zeps_client_destroy(&w);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Ctrl-C of a paced move mid-copy: zepsctl aborts the move at both
 * shards and exits 130 within a second, so a move of the same slots can
 * begin at once (without the ABORT both shards keep their parts until the
 * lease, 10 s, and refuse it: "already takes part in a move"); nothing
 * moved, every row as it was. */
START_TEST(test_ctrl_c_aborts)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *w = NULL, *c = zt_move_tool(&cl);
    ck_assert_int_eq(zeps_client_new(&w, cl.conf, 0), 0);
    uint32_t t = populate(w);
    uint64_t held = zt_move_rows(c, 0, NULL);
    char log[400];
    snprintf(log, sizeof(log), "%s/interrupted.log", cl.dir);
    char *paced[] = {"shards", "move",    "--config", cl.conf,      "--from", "0", "--to",
                     "1",      "--slots", "0-4095",   "--max-mb-s", "2",      NULL};
    pid_t tool = zt_move_zepsctl_start(log, paced);
    struct timespec ts = {0, 700000000L}; /* into the paced copy */
    nanosleep(&ts, NULL);
    double t0 = zp_now_s();
    ck_assert_int_eq(kill(tool, SIGINT), 0);
    zt_move_zepsctl_exits(tool, log, 5, 130);
    double took = zp_now_s() - t0;
    ck_assert_msg(took < 1.0, "zepsctl took %.2f s to end after SIGINT", took);
    ck_assert(zt_move_file_has(log, "interrupted (SIGINT)"));
    ck_assert(zt_move_file_has(log, "aborted; the slot map is unchanged"));
    uint64_t epoch;
    ck_assert_uint_eq(zt_move_rows(c, 0, &epoch), held);
    ck_assert_uint_eq(epoch, 0);
    snprintf(log, sizeof(log), "%s/again.log", cl.dir);
    char *again[] = {"shards", "move", "--config", cl.conf,  "--from", "0",
                     "--to",   "1",    "--slots",  "0-4095", NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, again), 0); /* at once: no part left */
    ck_assert_uint_eq(zt_move_rows(c, 0, NULL), 0);
    check_rows(w, t);
    zeps_client_destroy(&c);
    zeps_client_destroy(&w);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("move_pace");
    TCase *tc = tcase_create("move_pace");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_paced_then_unlimited);
    tcase_add_test(tc, test_cutover_not_in_pace);
    tcase_add_test(tc, test_ctrl_c_aborts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
