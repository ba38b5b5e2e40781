/*
 * test_rebalance.c - `zepsctl shards rebalance` (docs/elastic.md,
 * "Rebalancing") with real shards, real worker processes and the real
 * zepsctl.
 *
 * test_rebalance_under_load: three shards; two worker processes push
 * every id over and over (sgd, lr 1, zeros: the counter oracle of
 * test_migrate). `zepsctl shards move` first gives all of shard 0's slots
 * to shard 2 (rows about 0, 1/3, 2/3); then `zepsctl shards rebalance`
 * while the workers push. It exits 0 with a summary; every shard then
 * holds the mean of the rows within +-10 % (STATS, NIDS rows in all), all
 * shards hold one map, and every row read through it (no redirect) is
 * exact (0 pushes lost, 0 applied twice).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "zeps.h"

#define WORKERS 2

START_TEST(test_rebalance_under_load)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, WORKERS, "async", NULL, NULL), 0);
    char log[400];
    pid_t pids[WORKERS];
    zt_move_workers_start(&cl, WORKERS, pids);
    zeps_client *tl = zt_move_tool(&cl);
    for (int i = 0; i < 600 && zt_move_rows(tl, 0, NULL) == 0; i++)
        usleep(50 * 1000);
    snprintf(log, sizeof(log), "%s/move.log", cl.dir);
    char *move[] = {"shards", "move", "--config", cl.conf,  "--from", "0",
                    "--to",   "2",    "--slots",  "0-4094", NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, move), 0);
    ck_assert_uint_eq(zt_move_rows(tl, 0, NULL), 0); /* shard 0 empty: far off balance */

    snprintf(log, sizeof(log), "%s/rebalance.log", cl.dir);
    char *rebalance[] = {"shards", "rebalance", "--config", cl.conf, "--threshold", "64", NULL};
    int st = zt_move_zepsctl(log, rebalance);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    ck_assert(zt_move_file_has(log, "before: rows per shard 0 "));
    ck_assert(zt_move_file_has(log, "move 1: "));
    ck_assert(zt_move_file_has(log, "(tolerance 10 %): balanced"));
    zt_move_workers_run(pids, WORKERS); /* they pushed all along */

    /* +-10 % of the mean, one map on every shard */
    uint64_t rows[3], epoch[3], total = 0;
    for (int k = 0; k < 3; k++) {
        rows[k] = zt_move_rows(tl, k, &epoch[k]);
        total += rows[k];
    }
    ck_assert_uint_eq(total, NIDS);
    for (int k = 0; k < 3; k++) {
        double off = ((double)rows[k] - NIDS / 3.0) / (NIDS / 3.0);
        ck_assert_msg(off >= -0.10 && off <= 0.10,
                      "shard %d holds %llu rows: %+.1f %% off the mean", k,
                      (unsigned long long)rows[k], off * 100);
        ck_assert_uint_eq(epoch[k], epoch[0]);
    }
    ck_assert_uint_ge(epoch[0], 2); /* the first move, then at least one of the rebalance */
    zeps_client_destroy(&tl);

    long weighted, sum = zt_move_workers_end(&cl, WORKERS, pids, &weighted);
    zt_move_check_oracle(&cl, sum, weighted);
    printf("rebalanced to %llu %llu %llu rows at epoch %llu under %ld pushes\n",
           (unsigned long long)rows[0], (unsigned long long)rows[1], (unsigned long long)rows[2],
           (unsigned long long)epoch[0], sum);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rebalance");
    TCase *tc = tcase_create("rebalance");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_rebalance_under_load);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
