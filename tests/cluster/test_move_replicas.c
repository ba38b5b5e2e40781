/*
 * test_move_replicas.c - live moves between replicated shards
 * (docs/elastic.md, "Moves with replicas"): two shards of two replicas
 * each, real zeps-server processes, a real ZooKeeper, real worker
 * processes and the real `zepsctl shards move`.
 *
 *   - test_commit_survives_failovers: three workers push the same ids
 *     over and over (the counter oracle of move_fixture.h) while zepsctl
 *     moves half of shard 0's slots to shard 1; then the target's primary
 *     and the source's primary are killed with -9 in turn. Every row
 *     still counts every push a worker was answered for, once; each new
 *     primary holds the new map and exactly the rows it gives its shard
 *     (the target's backup applied the rows put and the map, the source's
 *     backup the commit);
 *   - test_parked_push_not_logged: a push parked by the source's cut-over
 *     and answered EMOVED naming the source by the abort is sent again and
 *     applied once, on the source and on its backup (a parked push is not
 *     logged: a backup that applied it would hold it twice after the
 *     failover that follows);
 *   - test_killed_mid_copy: the target's primary, then in a second move
 *     the source's, killed with -9 while the rows are copied: the move
 *     fails, nothing changes (the target's new primary ends its part by
 *     the lease and drops what it took), and a next move succeeds;
 *   - test_whole_state_waits_for_the_move: a backup of the target that
 *     needs the whole state while the move copies gets it after the
 *     commit, and holds the moved rows when elected;
 *   - test_source_killed_in_cutover, test_target_killed_in_cutover: the
 *     source's or the target's primary killed in the cut-over with the
 *     workers' pushes of the moving slots parked (checked: no shard
 *     applies a push for 300 ms before the kill): nothing lost, nothing
 *     applied twice, the map unchanged;
 *   - test_late_copy_after_abort: a late copy of a push parked and
 *     answered EMOVED at the abort is a duplicate on the primary and is
 *     not applied by its backup (what a failover then shows);
 *   - test_remove_and_retire: `zepsctl shards remove 1` and `retire 1`
 *     under three pushing workers, shard 1 stopped, shard 0's primary
 *     killed: nothing lost, and a new client does not wait for shard 1;
 *   - test_dense_refused: a move of a dense piece (BEGIN) and a map
 *     placing a dense table by range (SLOTS) refused with replicas, and
 *     `zepsctl shards move --dense` refused before asking (exit 2).
 */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "move_rset.h"
#include "rawreq.h"
#include "replset.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"
#include "zkserver.h"

#define WORKERS ZT_RCL_WORKERS

/* The map moving shard 0's slots below 2048 to shard 1 (*next, the
 * caller's) and the first of the oracle's ids it moves. */
static uint64_t moving_id(zp_slotmap **next)
{
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *d = NULL;
    ck_assert_uint_gt(zt_rcl_moved_map("0-2047", ids, NIDS, next), 0);
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint64_t id = 0;
    for (int i = 0; i < NIDS && !id; i++)
        if (zp_slotmap_owner(*next, ids[i]) == 1 && zp_slotmap_owner(d, ids[i]) == 0)
            id = ids[i];
    zp_slotmap_destroy(&d);
    ck_assert_uint_ne(id, 0);
    return id;
}

START_TEST(test_commit_survives_failovers)
{
    zt_rcl c;
    zt_rcl_up_pushing(&c, "mvrepl");
    char *args[] = {"shards",  "move",   "--config", c.cl.conf, "--from",      "0",  "--to", "1",
                    "--slots", "0-2047", "--page",   "512",     "--threshold", "64", NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "move", args), 0);
    zt_rcl_workers_run(&c);
    zt_rcl_fail_over(&c, 1); /* the target: its backup must hold the rows and the map */
    usleep(500 * 1000);
    zt_rcl_workers_run(&c);
    zt_rcl_fail_over(&c, 0); /* the source: its backup must have taken the commit */
    usleep(500 * 1000);      /* the workers push on through the new primaries */
    zt_rcl_workers_end(&c, "the move and two failovers");
    zt_rcl_check_oracle_placed(&c, "0-2047");
    zt_rcl_down(&c);
}
END_TEST

/* A worker process that pushes -1 to id `id` once (sgd, lr 1: the row
 * gains 1 per push applied) and exits 0 once answered. */
static pid_t push_once(const zt_cluster *cl, uint64_t id)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid > 0)
        return pid;
    zeps_client *w = zt_client(cl, 0);
    float g[DIM] = {-1.0f, -1.0f};
    int rc = w ? zeps_spush(w, zt_move_declare(w), &id, 1, g, 0) : -1;
    if (rc != 0)
        fprintf(stderr, "push_once: %s\n", w ? zeps_last_error(w) : "no client");
    zeps_client_destroy(&w);
    _exit(rc == 0 ? 0 : 1);
}

/* Shard k's primary's reply to MOVE step `step` with peer `peer`. */
static void step_ok(const zt_rcl *c, int k, uint32_t peer, uint32_t step, const zp_slotmap *map)
{
    size_t len = map ? zp_slotmap_wire_size(map) : 0;
    uint8_t *wire = map ? malloc(len) : NULL;
    if (map)
        zp_slotmap_encode(map, wire);
    Zeps__Header *rep = zt_move_step(&c->cl, k, peer, step, wire, len);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->op != ZEPS__OP__ERROR, "step %u at shard %d: %s", step, k,
                  rep->error_text ? rep->error_text : "?");
    zeps__header__free_unpacked(rep, NULL);
    free(wire);
}

/* The move of `next` from shard 0 to shard 1 begun by hand and in its
 * cut-over: BEGIN and FREEZE to the source, IMPORT to the target. */
static void cut_over(const zt_rcl *c, const zp_slotmap *next)
{
    step_ok(c, 0, 1, ZP_MOVE_BEGIN, next);
    step_ok(c, 1, 0, ZP_MOVE_IMPORT, next);
    step_ok(c, 0, 1, ZP_MOVE_FREEZE, NULL);
}

START_TEST(test_parked_push_not_logged)
{
    zt_rcl c;
    zt_rcl_up(&c, "mvpark", "");
    zp_slotmap *next = NULL;
    uint64_t id = moving_id(&next);
    zeps_client *w = zt_client(&c.cl, 1);
    uint32_t t = zt_move_declare(w);
    cut_over(&c, next);
    pid_t pid = push_once(&c.cl, id);
    usleep(400 * 1000);
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the push was not parked by the cut-over");
    step_ok(&c, 0, 1, ZP_MOVE_ABORT, NULL);
    step_ok(&c, 1, 0, ZP_MOVE_ABORT, NULL);
    int ws = zt_wait(pid, 30);
    ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "the parked push failed");
    zt_rcl_fail_over(&c, 0);
    float row[DIM];
    ck_assert_msg(zeps_spull(w, t, &id, 1, row, 0) == 0, "%s", zeps_last_error(w));
    ck_assert_msg(row[0] == 1.0f, "the parked push is applied %g times on the new primary", row[0]);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&next);
    zt_rcl_down(&c);
}
END_TEST

/* ABORT to both shards of the move from 0 to 1 (arg: the zt_rcl). */
static void abort_both(void *arg)
{
    step_ok(arg, 0, 1, ZP_MOVE_ABORT, NULL);
    step_ok(arg, 1, 0, ZP_MOVE_ABORT, NULL);
}

/* A push parked by the cut-over and a retry of it, then the move aborted:
 * a late copy of its seq is a duplicate on the source's primary and is
 * not applied on its backup either (a duplicate is not logged: the
 * backup's window never had the seq the primary recorded when it answered
 * EMOVED); after a failover the row holds the one push applied. */
START_TEST(test_late_copy_after_abort)
{
    zt_rcl c;
    zt_rcl_up(&c, "mvlate", "");
    zp_slotmap *next = NULL;
    uint64_t id = moving_id(&next);
    zeps_client *w = zt_client(&c.cl, 0);
    uint32_t t = zt_move_declare(w);
    void *zctx = zmq_ctx_new(), *sock = zt_move_raw_worker(zctx, &c.cl, 0, 1, 0x53);
    cut_over(&c, next);
    zt_move_parked_then_late(sock, 0x53, t, id, abort_both, &c);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    zt_rcl_fail_over(&c, 0);
    float row[DIM];
    ck_assert_msg(zeps_spull(w, t, &id, 1, row, 0) == 0, "%s", zeps_last_error(w));
    ck_assert_msg(row[0] == 1.0f, "the push is applied %g times on the new primary", row[0]);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&next);
    zt_rcl_down(&c);
}
END_TEST

/* zepsctl shards move of shard 0's slots below 2048 to shard 1, a row a
 * page (a copy of a few seconds), with the shards' lease and the tool's
 * wait per request as given, started; its log at <dir>/move-<tag>.log. */
static pid_t slow_move(zt_rcl *c, const char *tag, char *lease_ms, char *timeout_ms, char *log,
                       size_t len)
{
    snprintf(log, len, "%s/move-%s.log", c->cl.dir, tag);
    char *args[] = {"shards",      "move", "--config",   c->cl.conf, "--from",       "0",
                    "--to",        "1",    "--slots",    "0-2047",   "--page",       "1",
                    "--threshold", "0",    "--lease-ms", lease_ms,   "--timeout-ms", timeout_ms,
                    NULL};
    pid_t pid = zt_move_zepsctl_start(log, args);
    usleep(300 * 1000);
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the move ended within 300 ms");
    return pid;
}

/* slow_move with shard `victim`'s primary (-1: the tool itself) killed
 * 300 ms in: the move fails with nothing changed. */
static void kill_mid_copy(zt_rcl *c, int victim)
{
    char log[400], tag[16];
    snprintf(tag, sizeof(tag), "kill-%d", victim);
    pid_t pid = slow_move(c, tag, "1500", "1000", log, sizeof(log));
    if (victim < 0)
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
    else
        zt_rcl_fail_over(c, victim);
    int st = zt_wait(pid, 60);
    zt_move_print_file(log);
    ck_assert_msg(victim < 0 ? WIFSIGNALED(st) : WIFEXITED(st) && WEXITSTATUS(st) == 1,
                  "zepsctl: status 0x%x", st);
}

/* Rows enough that a copy of a row a page lasts a few seconds: the
 * counter oracle's NIDS ids first. */
enum { ALL = 24000 };

/* ids[0..ALL) pushed `times` times (zt_move_populate) by worker 0's
 * client, made into *w (the caller's): the table's id. */
static uint32_t fill(const zt_rcl *c, uint64_t *ids, int times, zeps_client **w)
{
    zt_move_ids(ids, NIDS, 0);
    zt_move_ids(ids + NIDS, ALL - NIDS, 1);
    *w = zt_client(&c->cl, 0);
    ck_assert_ptr_nonnull(*w);
    uint32_t t = zt_move_declare(*w);
    for (int i = 0; i < times; i++)
        zt_move_populate(*w, t, ids, ALL);
    return t;
}

START_TEST(test_killed_mid_copy)
{
    zt_rcl c;
    zt_rcl_up(&c, "mvkill", "");
    static uint64_t ids[ALL];
    zeps_client *w = NULL;
    uint32_t t = fill(&c, ids, 1, &w);
    zp_slotmap *d = NULL, *next = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    /* the target's primary: its backup, elected, ends its part by the
     * lease and drops the rows it took */
    kill_mid_copy(&c, 1);
    zt_rcl_wait_owned(&c, 1, ids, ALL, d, 15);
    zt_rcl_check_placed(&c, ids, ALL, d, 0);
    zt_rcl_back_to_two(&c, 1);
    /* the source's primary: the tool aborts the target */
    kill_mid_copy(&c, 0);
    zt_rcl_check_placed(&c, ids, ALL, d, 0);
    zt_rcl_back_to_two(&c, 0);
    /* the tool: both primaries end their parts by the lease, the target's
     * backup too (the ABORT its primary logs) */
    kill_mid_copy(&c, -1);
    zt_rcl_wait_owned(&c, 1, ids, ALL, d, 15);
    zt_move_check_values(w, t, ids, NIDS, 1);
    /* nothing is left of any attempt: another move commits, and the
     * target's backup holds what it took when elected */
    char *args[] = {"shards", "move", "--config", c.cl.conf,   "--from", "0",
                    "--to",   "1",    "--slots",  "2048-4095", NULL};
    /* the source's part ends by its lease, which may come after the
     * target's rows are placed: BEGIN is refused (ESTATE, exit 2) until then */
    int st = 2;
    for (int i = 0; i < 30 && st == 2; i++)
        if ((st = zt_move_zepsctl_logged(&c.cl, "move-again", args)) == 2)
            zt_sleep_ms(500);
    ck_assert_int_eq(st, 0);
    ck_assert_uint_gt(zt_rcl_moved_map("2048-4095", ids, ALL, &next), 0);
    zt_rcl_fail_over(&c, 1);
    zt_rcl_check_placed(&c, ids, ALL, next, 1);
    zt_move_check_values(w, t, ids, NIDS, 1);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&next);
    zt_rcl_down(&c);
}
END_TEST

/* Shard `victim`'s primary killed in the cut-over (BEGIN, IMPORT and
 * FREEZE sent by hand, no row copied) while three workers push every id:
 * the pushes of the moving slots parked at the source are sent again to
 * its new primary, or go on at the target's; the target's part is
 * aborted (by hand, or by the new primary's lease); every row counts
 * every push answered once, the map stays at epoch 0. */
static void killed_in_cutover(int victim)
{
    zt_rcl c;
    zt_rcl_up_pushing(&c, victim ? "mvcut1" : "mvcut0");
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *next = NULL, *d = NULL;
    ck_assert_uint_gt(zt_rcl_moved_map("0-2047", ids, NIDS, &next), 0);
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    cut_over(&c, next);
    usleep(300 * 1000); /* every worker's push parked at the source */
    zt_rcl_check_all_parked(&c);
    zt_rcl_fail_over(&c, victim);
    step_ok(&c, 1 - victim, victim, ZP_MOVE_ABORT, NULL); /* the survivor's part */
    usleep(500 * 1000);                                   /* the workers push on */
    zt_rcl_workers_end(&c, victim ? "a kill of shard 1 in the cut-over"
                                  : "a kill of shard 0 in the cut-over");
    if (victim == 1) /* the target's new primary ends its part by the lease (10 s) */
        zt_rcl_wait_owned(&c, 1, ids, NIDS, d, 20);
    zt_rcl_check_placed(&c, ids, NIDS, d, 0);
    zp_slotmap_destroy(&next);
    zp_slotmap_destroy(&d);
    zt_rcl_down(&c);
}

START_TEST(test_source_killed_in_cutover)
{
    killed_in_cutover(0);
}
END_TEST

START_TEST(test_target_killed_in_cutover)
{
    killed_in_cutover(1);
}
END_TEST

/* zepsctl shards remove 1, then retire 1, while three workers push; shard
 * 1's replicas stopped, then shard 0's primary killed: the workers go on
 * through shard 0's new primary, every push counted once, and a new client
 * does not wait for the retired shard. */
START_TEST(test_remove_and_retire)
{
    zt_rcl c;
    zt_rcl_up_pushing(&c, "mvretire");
    char *rm[] = {"shards", "remove", "1", "--config", c.cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "remove", rm), 0);
    char *rt[] = {"shards", "retire", "1", "--config", c.cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "retire", rt), 0);
    for (int r = 0; r < 2; r++)
        zt_rset_kill(&c.rs[1], r, SIGTERM);
    usleep(500 * 1000);
    zt_rcl_workers_run(&c);
    zt_rcl_fail_over(&c, 0);
    usleep(500 * 1000);
    zt_rcl_workers_end(&c, "shards remove, retire and a failover");
    zeps_client *t = zt_move_tool(&c.cl);
    ck_assert_uint_eq(zt_move_rows(t, 0, NULL), NIDS);
    zeps_client_destroy(&t);
    zt_rcl_down(&c);
}
END_TEST

/* The target's backup restarted while the move copies, its primary's log
 * trimmed (log_mb 1) so that it needs the whole state: it gets it only
 * after the move committed, and holds the moved rows when elected. */
START_TEST(test_whole_state_waits_for_the_move)
{
    zt_rcl c;
    zt_rcl_up(&c, "mvxfer", "  replication = { log_mb = 1; };");
    static uint64_t ids[ALL];
    zeps_client *w = NULL;
    uint32_t t = fill(&c, ids, 4, &w); /* more than log_mb of entries */
    char log[400];
    /* a step waits out the backup's leaving the in-sync set (max_lag_ms,
     * 2 s): the lease and the tool's wait are longer */
    pid_t pid = slow_move(&c, "xfer", "8000", "10000", log, sizeof(log));
    zt_rset_kill(&c.rs[1], 1, SIGKILL);
    zt_rset_start(&c.rs[1], 1);
    zt_move_zepsctl_exits(pid, log, 120, 0);
    zt_rset_wait(&c.rs[1], 0, "primary", 1, 2, 60);
    zp_slotmap *next = NULL;
    ck_assert_uint_gt(zt_rcl_moved_map("0-2047", ids, ALL, &next), 0);
    zt_rcl_fail_over(&c, 1);
    zt_rcl_check_placed(&c, ids, ALL, next, 1);
    zt_move_check_values(w, t, ids, NIDS, 4);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&next);
    zt_rcl_down(&c);
}
END_TEST

/* Dense pieces do not move with replicas (the round pages of a bsp move,
 * and a move's pieces, are not logged; docs/elastic.md): BEGIN of a move
 * of a dense piece and SLOTS placing the table by range are refused
 * (ESTATE) by a primary that holds the piece, and the client's dense
 * push and pull go on by the default slices. */
START_TEST(test_dense_refused)
{
    zt_rcl c;
    zt_rcl_up(&c, "mvdense", "");
    zeps_client *w = zt_client(&c.cl, 0);
    ck_assert_ptr_nonnull(w);
    zeps_table_spec spec = {
        .name = "w", .length = 100, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(w, &spec, &t), 0);
    zp_slotmap *d = NULL, *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", 100, 0, 50, 1, &m, err, sizeof(err)), 0);
    size_t len = zp_slotmap_wire_size(m);
    uint8_t *wire = malloc(len);
    zp_slotmap_encode(m, wire);
    Zeps__Header *rep = zt_move_step(&c.cl, 0, 1, ZP_MOVE_BEGIN, wire, len);
    zt_raw_expect_error(rep, ZEPS_ESTATE, "moving dense pieces is not supported with replicas");
    ck_assert_int_eq(zt_raw_slots(&c.cl, 0, m), ZEPS_ESTATE);
    /* zepsctl says so at once: a refusal, nothing changed (exit 2) */
    char *dense[] = {"shards", "move", "--config", c.cl.conf, "--from", "0",
                     "--to",   "1",    "--dense",  "w:0-50",  NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "dense", dense), 2);
    char log[600];
    snprintf(log, sizeof(log), "%s/dense.log", c.cl.dir);
    ck_assert(zt_move_file_has(log, "--dense with shards of 2 replicas: not built"));
    float g[100], got[100];
    for (int i = 0; i < 100; i++)
        g[i] = (float)(i % 4);
    ck_assert_int_eq(zeps_push(w, t, g, 0, 100, 0), 0);
    ck_assert_int_eq(zeps_pull(w, t, got, 0, 100, 0), 0);
    for (int i = 0; i < 100; i++)
        ck_assert(got[i] == -g[i]);
    zeps_client_stats st;
    zeps_client_get_stats(w, &st);
    ck_assert_uint_eq(st.slot_epoch, 0);
    free(wire);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    zeps_client_destroy(&w);
    zt_rcl_down(&c);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"commit", 240, {test_commit_survives_failovers}},
        {"parked", 240, {test_parked_push_not_logged}},
        {"killed", 240, {test_killed_mid_copy}},
        {"transfer", 240, {test_whole_state_waits_for_the_move}},
        {"cutover_source", 240, {test_source_killed_in_cutover}},
        {"cutover_target", 240, {test_target_killed_in_cutover}},
        {"retire", 240, {test_remove_and_retire}},
        {"late_copy", 240, {test_late_copy_after_abort}},
        {"dense", 240, {test_dense_refused}},
    };
    return zt_run_cases("move_replicas", cases, sizeof(cases) / sizeof(cases[0]));
}
