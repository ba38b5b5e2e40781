/*
 * test_shards_retire.c - a removed shard retired for good (docs/elastic.md,
 * "Retiring a removed shard"), with real shards, real worker processes and
 * the real zepsctl.
 *
 * test_retire: two shards, three pushing workers; shard 2 joins (shards
 * add). `shards retire` of shard 0 and of a shard owning slots is refused;
 * after `shards remove 1` and `shards retire 1` shard 1 is stopped: a
 * client started then comes up at once (not after hello_timeout_ms) and
 * declares, pushes, pulls and clocks; a map that forgets the retirement
 * is refused; `zepsctl status` names shard 1 retired and exits 0;
 * `rebalance` goes on without it. Then the joined shard 2 is removed,
 * retired and stopped: a new client meets a map that retires a joined
 * shard. At the end every row is exact (counter oracle).
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "slotmap.h"
#include "zeps.h"

#define WORKERS 3

/* zepsctl shards CMD K (move options as the tests use them), its output
 * to <dir>/NAME.log (into log, printed): the exit status. */
static int shards_cmd(const zt_cluster *cl, const char *cmd, const char *k, const char *name,
                      char *log, size_t len)
{
    snprintf(log, len, "%s/%s.log", cl->dir, name);
    char *argv[] = {"shards",         (char *)cmd,   (char *)k, "--config",
                    (char *)cl->conf, "--threshold", "64",      NULL};
    int st = zt_move_zepsctl(log, argv);
    zt_move_print_file(log);
    return st;
}

/* A client started now: it must come up well inside hello_timeout_ms (10 s
 * in the harness) while a retired shard is stopped, then push, pull and
 * clock; the seconds it took to start. */
static double new_client_works(const zt_cluster *cl, int shards)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    zeps_client *c = zt_client(cl, WORKERS);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double took = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(zeps_num_shards(c), shards);
    uint32_t t = zt_move_declare(c);
    uint64_t ids[64];
    zt_move_ids(ids, 64, 77);
    float g[64 * DIM], got[64 * DIM];
    for (int i = 0; i < 64 * DIM; i++)
        g[i] = 0;
    ck_assert_msg(zeps_spush(c, t, ids, 64, g, 0) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_spull(c, t, ids, 64, got, 0) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(zeps_clock(c, 0) == 0, "%s", zeps_last_error(c));
    zeps_client_destroy(&c); /* BYE to the live shards only: no wait for the stopped one */
    printf("a client started in %.2f s with %d shards, one retired and stopped\n", took, shards);
    ck_assert_msg(took < 5.0, "a new client took %.1f s to start", took);
    return took;
}

/* zepsctl status exits 0 while retired shard k is stopped, and says it is
 * retired; zepsctl stats --json marks it so. */
static void status_names_retired(const zt_cluster *cl, int k)
{
    char log[400], line[100];
    snprintf(log, sizeof(log), "%s/status-retired-%d.log", cl->dir, k);
    char *status[] = {"status", "--config", (char *)cl->conf, NULL};
    int st = zt_move_zepsctl(log, status);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    snprintf(line, sizeof(line), "shard %d (", k);
    ck_assert(zt_move_file_has(log, line));
    ck_assert(zt_move_file_has(log, ") is retired: it owns nothing and need not run"));
    snprintf(log, sizeof(log), "%s/stats-retired-%d.json", cl->dir, k);
    char *stats[] = {"stats", "--config", (char *)cl->conf, "--json", NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, stats), 0);
    snprintf(line, sizeof(line), "{\"shard\": %d, \"endpoint\": ", k);
    ck_assert(zt_move_file_has(log, line));
    ck_assert(zt_move_file_has(log, "\"retired\": true, \"answered\": false"));
}

/* A map of the two base shards and the joined one at `ep`, at epoch 50,
 * that retires no shard (a static map, replaced at each call). */
static const zp_slotmap *unretiring(const char *ep)
{
    static zp_slotmap *m;
    zp_slotmap *d = NULL, *j = NULL;
    char why[256];
    uint8_t none[4096] = {0};
    zp_slotmap_destroy(&m);
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_joined(d, ep, &j, why, sizeof(why)), 0);
    for (int e = 1; e < 50; e++) {
        zp_slotmap_destroy(&m);
        ck_assert_int_eq(zp_slotmap_moved(j, none, 0, &m), 0);
        zp_slotmap_destroy(&j);
        j = m;
        m = NULL;
    }
    m = j;
    ck_assert_uint_eq(zp_slotmap_epoch(m), 50);
    zp_slotmap_destroy(&d);
    return m;
}

/* Retiring a removed shard (docs/elastic.md, "Retiring a removed shard"):
 * two shards, three pushing workers; shard 2 joins (shards add); then
 * shard 1 is removed and retired and stopped: a client started then comes
 * up at once and works, and shards rebalance goes on without it; then the
 * joined shard 2 is removed, retired and stopped in turn (a client meets a
 * joined shard the map retires). Refused, changing no map: retiring shard
 * 0, a shard that owns slots, a retired shard's remove; retiring again
 * says so. 0 pushes lost, 0 applied twice. */
START_TEST(test_retire)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, WORKERS + 1, "async", NULL, NULL), 0);
    char log[400], ep[400];
    pid_t pids[WORKERS];
    zt_move_workers_start(&cl, WORKERS, pids);
    zt_move_join_endpoint(&cl, 2, ep, sizeof(ep));
    char pattern[400]; /* --join with %d, as a StatefulSet's pods all say it */
    snprintf(pattern, sizeof(pattern), "ipc://%s/joined-%%d", cl.dir);
    ck_assert_int_eq(zt_server_join(&cl, 2, pattern), 0);
    char *add[] = {"shards", "add", ep, "--config", cl.conf, "--threshold", "64", NULL};
    snprintf(log, sizeof(log), "%s/add.log", cl.dir);
    ck_assert_int_eq(zt_move_zepsctl(log, add), 0);

    ck_assert_int_eq(shards_cmd(&cl, "retire", "0", "retire0", log, sizeof(log)), 2);
    ck_assert(zt_move_file_has(log, "BARRIER"));
    ck_assert_int_eq(shards_cmd(&cl, "retire", "1", "owning", log, sizeof(log)), 2);
    ck_assert(zt_move_file_has(log, "move them away first"));
    zeps_client *tl = zt_move_tool(&cl);
    uint64_t e0 = 0, e1 = 0;
    zt_move_rows(tl, 0, &e0);
    zeps_client_destroy(&tl);

    ck_assert_int_eq(shards_cmd(&cl, "remove", "1", "remove1", log, sizeof(log)), 0);
    ck_assert_int_eq(shards_cmd(&cl, "retire", "1", "retire1", log, sizeof(log)), 0);
    ck_assert(zt_move_file_has(log, "retires shard 1"));
    int ks = zt_server_kill(&cl, 1, SIGTERM);
    ck_assert(ks >= 0 && WIFEXITED(ks) && WEXITSTATUS(ks) == 0);
    zt_move_workers_run(pids, WORKERS);
    new_client_works(&cl, 3);
    status_names_retired(&cl, 1);
    ck_assert_int_eq(zt_raw_slots(&cl, 0, unretiring(ep)), ZEPS_EINVAL); /* never comes back */
    ck_assert_int_eq(shards_cmd(&cl, "retire", "1", "again", log, sizeof(log)), 0);
    ck_assert(zt_move_file_has(log, "retired already"));
    ck_assert_int_eq(shards_cmd(&cl, "remove", "1", "remove-retired", log, sizeof(log)), 2);
    ck_assert(zt_move_file_has(log, "shard 1 is retired"));
    snprintf(log, sizeof(log), "%s/rebalance.log", cl.dir);
    char *rb[] = {"shards", "rebalance", "--config", cl.conf, "--threshold", "64", NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, rb), 0);
    zt_move_print_file(log);

    ck_assert_int_eq(shards_cmd(&cl, "remove", "2", "remove2", log, sizeof(log)), 0);
    ck_assert_int_eq(shards_cmd(&cl, "retire", "2", "retire2", log, sizeof(log)), 0);
    ks = zt_server_kill(&cl, 2, SIGTERM);
    ck_assert(ks >= 0 && WIFEXITED(ks) && WEXITSTATUS(ks) == 0);
    tl = zt_move_tool(&cl);
    zt_move_rows(tl, 0, &e1);
    ck_assert_uint_ge(e1, e0 + 4); /* retire 1, remove 2 (moves), retire 2 */
    ck_assert_uint_eq(zt_move_rows(tl, 0, NULL), NIDS + 64); /* every row on shard 0 */
    zeps_client_destroy(&tl);
    new_client_works(&cl, 3);
    status_names_retired(&cl, 2);
    zt_move_workers_run(pids, WORKERS);

    long weighted, sum = zt_move_workers_end(&cl, WORKERS, pids, &weighted);
    zt_move_check_oracle(&cl, sum, weighted);
    printf("0 pushes lost, 0 applied twice under %ld pushes\n", sum);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shards_retire");
    TCase *tc = tcase_create("retire");
    tcase_set_timeout(tc, 400);
    tcase_add_test(tc, test_retire);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
