/*
 * test_migrate_doubt.c - the window between a move's two commits without
 * coordination (docs/elastic.md, "What each failure does"): two shards of
 * one replica, no ZooKeeper, real zeps-server processes and the real
 * `zepsctl shards move`, stopped right after the target's SLOTS by its
 * fault hook (ZEPS_FAULT_MOVE=after-target) and killed with -9, so the
 * source never gets its COMMIT:
 *
 *   - test_source_asks_the_target: three worker processes push the
 *     counter oracle's ids all along (async); the source, its cut-over
 *     bound (2 s) passed, asks the target, learns it committed and
 *     commits within the bound and a second; every push a worker was
 *     answered for is counted once, and each shard holds epoch 1 and
 *     exactly the rows the map gives it;
 *   - test_doubt_then_abort: the target killed with -9 too: the source
 *     keeps the slots unserved (a push of them is not answered and not
 *     applied) past its bound, says so in STATS and `zepsctl status`,
 *     until `zepsctl shards resolve --outcome abort`: then the push is
 *     answered EMOVED naming the source, and the rows hold what they held;
 *   - test_doubt_then_commit: the target stopped (SIGSTOP) instead: the
 *     same doubt, ended by `zepsctl shards resolve --outcome commit`: the
 *     source takes the map of epoch 1 and drops the slots' rows, the push
 *     is answered EMOVED naming the target, which (let go) serves them.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define WORKERS 3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* zepsctl moving shard 0's slots below 2048 to shard 1 with --cutover-ms
 * bound_ms, stopped right after shard 1's SLOTS, then killed with -9. */
static void tool_killed_after_target(zt_cluster *cl, char *bound_ms)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/move.log", cl->dir);
    char *args[] = {"shards", "move",       "--config",    cl->conf,  "--from",
                    "0",      "--to",       "1",           "--slots", "0-2047",
                    "--page", "512",        "--threshold", "64",      "--cutover-ms",
                    bound_ms, "--lease-ms", "10000",       NULL};
    setenv("ZEPS_FAULT_MOVE", "after-target", 1);
    pid_t pid = zt_move_zepsctl_start(log, args);
    unsetenv("ZEPS_FAULT_MOVE");
    int st = 0;
    pid_t got;
    double t0 = now_s();
    while ((got = waitpid(pid, &st, WNOHANG | WUNTRACED)) == 0 && now_s() - t0 < 60)
        usleep(20 * 1000);
    zt_move_print_file(log);
    ck_assert_msg(got == pid && WIFSTOPPED(st), "zepsctl did not stop after the target's SLOTS");
    ck_assert_int_eq(kill(pid, SIGKILL), 0); /* the source never gets its COMMIT */
    zt_wait(pid, 15);
}

/* Shard k's slot map epoch and sparse rows. */
static uint64_t epoch_of(const zt_cluster *cl, int k, uint64_t *rows)
{
    zeps_client *t = zt_move_tool(cl);
    uint64_t e = 0, n = zt_move_rows(t, k, &e);
    zeps_client_destroy(&t);
    if (rows)
        *rows = n;
    return e;
}

/* The map of epoch 1: the default map of 2 with slots 0-2047 on shard 1. */
static zp_slotmap *moved_map(void)
{
    zp_slotmap *d = NULL, *next = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint32_t slots = zp_slotmap_slots(d);
    uint8_t which[ZP_SLOTS_MAX];
    char err[256];
    ck_assert_uint_le(slots, ZP_SLOTS_MAX);
    ck_assert_int_eq(zp_slotmap_parse_set("0-2047", slots, which, err, sizeof(err)), 2048);
    for (uint32_t k = 0; k < slots; k++)
        which[k] = which[k] && zp_slotmap_slot_owner(d, k) == 0;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 1, &next), 0);
    zp_slotmap_destroy(&d);
    return next;
}

START_TEST(test_source_asks_the_target)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, WORKERS, "async", NULL, NULL), 0);
    pid_t pids[WORKERS];
    zt_move_workers_start(&cl, WORKERS, pids);
    zeps_client *tl = zt_move_tool(&cl);
    for (int i = 0; i < 600; i++) { /* the move begins once every worker pushed */
        Zeps__ShardStats *st = zt_stats(tl, 0);
        uint64_t pushes = st && st->n_tables > 0 ? st->tables[0]->pushes : 0;
        zeps__shard_stats__free_unpacked(st, NULL);
        if (pushes >= 3 * WORKERS)
            break;
        usleep(50 * 1000);
    }
    tool_killed_after_target(&cl, "2000");
    double t0 = now_s();
    while (epoch_of(&cl, 0, NULL) != 1 && now_s() - t0 < 3.0)
        usleep(50 * 1000);
    printf("the source at map epoch %llu %.2f s after the tool was killed (its bound: 2 s)\n",
           (unsigned long long)epoch_of(&cl, 0, NULL), now_s() - t0);
    ck_assert_msg(epoch_of(&cl, 0, NULL) == 1,
                  "the source did not commit within its bound and a second");
    ck_assert(zt_wait_log(&cl, 0, "shard 1 committed the map of epoch 1"));
    zt_move_workers_run(pids, WORKERS);
    usleep(500 * 1000);
    long weighted = 0, total = zt_move_workers_end(&cl, WORKERS, pids, &weighted);
    zt_move_check_oracle(&cl, total, weighted);
    /* each shard at epoch 1 with exactly the rows the map gives it */
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *next = moved_map();
    uint64_t want[2] = {0, 0};
    for (int i = 0; i < NIDS; i++)
        want[zp_slotmap_owner(next, ids[i])]++;
    for (int k = 0; k < 2; k++) {
        uint64_t rows;
        ck_assert_uint_eq(epoch_of(&cl, k, &rows), 1);
        ck_assert_msg(rows == want[k], "shard %d holds %llu rows; the map gives it %llu", k,
                      (unsigned long long)rows, (unsigned long long)want[k]);
    }
    printf("%ld pushes answered, each counted once\n", total);
    zp_slotmap_destroy(&next);
    zeps_client_destroy(&tl);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Shard k's STATS over a raw request (no client: a dead shard is not
 * waited for); the caller frees the header it is in (*rep). */
static Zeps__ShardStats *raw_stats(const zt_cluster *cl, int k, Zeps__Header **rep)
{
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__STATS);
    *rep = zt_raw_req_once(cl, k, &h, NULL, 0);
    ck_assert_msg((*rep)->stats != NULL, "STATS of shard %d: %s", k, (*rep)->error_text);
    return (*rep)->stats;
}

/* An id of the moving slots (shard 0's below 2048). */
static uint64_t moving_id(void)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint64_t id = 1;
    while (zp_slotmap_slot_of(d, id) >= 2048 || zp_slotmap_owner(d, id) != 0)
        id++;
    zp_slotmap_destroy(&d);
    return id;
}

/* After the tool was killed past the target's SLOTS and the target made
 * silent (`sig`): the source holds the slots in doubt past its bound (a
 * push of id on sock, parked, is not answered), says so in STATS and in
 * zepsctl status. */
static void in_doubt(zt_cluster *cl, void *sock, uint32_t t, uint64_t id)
{
    ck_assert(zt_wait_log(cl, 0, "did not answer whether it committed the map of epoch 1"));
    zt_move_raw_push(sock, 1, 0x61, t, id, 2, 2);
    ck_assert_msg(!zt_move_replied(sock, 2500), "a push of the slots in doubt was answered");
    Zeps__Header *rep;
    Zeps__ShardStats *st = raw_stats(cl, 0, &rep);
    ck_assert_uint_eq(st->slot_epoch, 0);
    ck_assert_msg(st->move_doubt &&
                      strstr(st->move_doubt, "move of 1024 slots to shard 1 in doubt"),
                  "STATS: '%s'", st->move_doubt ? st->move_doubt : "");
    zeps__header__free_unpacked(rep, NULL);
    char log[400], *args[] = {"status", "--config", cl->conf, "--shard", "0", NULL};
    snprintf(log, sizeof(log), "%s/status.log", cl->dir);
    zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    ck_assert(zt_move_file_has(log, "MOVE IN DOUBT: move of 1024 slots to shard 1 in doubt"));
}

/* zepsctl shards resolve with `outcome` (and the slots for commit): exit 0
 * and `said` in its output. */
static void resolve(zt_cluster *cl, const char *outcome, const char *said)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/resolve-%s.log", cl->dir, outcome);
    char *args[] = {"shards",
                    "resolve",
                    "--config",
                    cl->conf,
                    "--from",
                    "0",
                    "--to",
                    "1",
                    "--timeout-ms",
                    "500",
                    "--outcome",
                    (char *)outcome,
                    strcmp(outcome, "commit") == 0 ? "--slots" : NULL,
                    "0-2047",
                    NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, args), 0);
    zt_move_print_file(log);
    ck_assert(zt_move_file_has(log, said));
}

/* The doubt, ended by resolve(commit or abort). */
static void doubt_then(const char *outcome)
{
    zt_cluster cl;
    bool commit = strcmp(outcome, "commit") == 0;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "async", NULL, NULL), 0);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 3);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = zt_move_declare(c);
    zt_move_populate(c, t, ids, NIDS);
    uint64_t id = moving_id(), before;
    float g[DIM] = {-1.0f, -1.0f}, row[DIM];
    ck_assert_int_eq(zeps_spush(c, t, &id, 1, g, 0), 0); /* the row: 1 push */
    epoch_of(&cl, 0, &before);
    tool_killed_after_target(&cl, "1000");
    if (commit)
        ck_assert_int_eq(kill(cl.pids[1], SIGSTOP), 0); /* silent, with its rows */
    else
        zt_server_kill(&cl, 1, SIGKILL);
    void *zctx = zmq_ctx_new(), *sock = zt_move_raw_worker(zctx, &cl, 0, 1, 0x61);
    in_doubt(&cl, sock, t, id);
    resolve(&cl, outcome, commit ? "committed: shard 0 took the map of epoch 1" : "aborted");
    /* the parked push: EMOVED naming the shard that owns the slots now */
    Zeps__Header *rep = zt_raw_recv(sock, 5000);
    ck_assert_int_eq(rep->error, ZEPS_EMOVED);
    ck_assert_uint_eq(rep->slot_owner, commit ? 1 : 0);
    zeps__header__free_unpacked(rep, NULL);
    Zeps__ShardStats *st = raw_stats(&cl, 0, &rep);
    ck_assert_uint_eq(st->slot_epoch, commit ? 1 : 0);
    ck_assert(commit ? st->tables[0]->rows < before : st->tables[0]->rows == before);
    zeps__header__free_unpacked(rep, NULL);
    if (commit)
        ck_assert_int_eq(kill(cl.pids[1], SIGCONT), 0);
    ck_assert_msg(zeps_spull(c, t, &id, 1, row, 0) == 0, "%s", zeps_last_error(c));
    ck_assert_msg(row[0] == 1.0f, "the row counts %g pushes; 1 was answered", row[0]);
    if (!commit) /* again: no move left to resolve, and it says so */
        resolve(&cl, "abort", "nothing to resolve: shard 0 took part in no move in doubt");
    zmq_close(sock);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
}

START_TEST(test_doubt_then_abort)
{
    doubt_then("abort");
}
END_TEST

START_TEST(test_doubt_then_commit)
{
    doubt_then("commit");
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"asks", 120, {test_source_asks_the_target}},
        {"abort", 120, {test_doubt_then_abort}},
        {"commit", 120, {test_doubt_then_commit}},
    };
    return zt_run_cases("migrate_doubt", cases, sizeof(cases) / sizeof(cases[0]));
}
