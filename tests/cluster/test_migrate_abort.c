/*
 * test_migrate_abort.c - live moves of a slot set that fail or are
 * refused (docs/elastic.md, "What each failure does"), with real shards
 * and the real `zepsctl shards move`.
 *
 * test_move_aborted: while the target imports, it refuses the slots'
 * requests naming the source; zepsctl killed (-9) while it copies: the
 * shards' lease ends the move, the target drops what it imported; then the target
 * killed (-9) while the rows are copied: zepsctl fails saying which shard
 * did not answer, the source keeps its map, rows and values, and may move
 * its slots again.
 * test_move_refusals: the source as target, slots past the map or none
 * of the source's, a shard in a move already, an unreachable target:
 * refused (exit 2, or 1 with the source's part aborted), nothing changed.
 * test_move_unsupported: a shard without sparse tables.
 * test_late_copy_of_parked_push: a push parked in the cut-over and
 * answered EMOVED by the abort: a late copy of its seq is a duplicate.
 * test_commit_repairs_the_window: the target committed, the source did
 * not (the tool silent past its lease); a COMMIT sent to the source
 * afterwards repairs it.
 */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define BIG 120000

/* zepsctl moving every slot of shard 0 to shard 2 in small pages, in the
 * background: its pid. */
static pid_t move_slowly(const zt_cluster *cl, const char *log, const char *lease_ms)
{
    char bin[512];
    zt_bin("zepsctl", bin, sizeof(bin));
    char *argv[] = {bin,  "shards",       "move", "--config",   (char *)cl->conf, "--from",
                    "0",  "--to",         "2",    "--slots",    "0-4094",         "--page",
                    "16", "--timeout-ms", "1000", "--lease-ms", (char *)lease_ms, NULL};
    pid_t pid = zt_spawn(bin, argv, log);
    ck_assert_int_gt(pid, 0);
    return pid;
}

/* The tool dies while it copies: the lease ends the move on both sides,
 * the target drops what it had imported. */
static void tool_killed(zt_cluster *cl, zeps_client *tl, const uint64_t *before)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/move-tool.log", cl->dir);
    pid_t pid = move_slowly(cl, log, "600");
    ck_assert(zt_wait_log(cl, 2, "rows of them here"));
    for (int i = 0; i < 400 && zt_move_rows(tl, 2, NULL) == before[2]; i++)
        usleep(5 * 1000);
    ck_assert_uint_gt(zt_move_rows(tl, 2, NULL), before[2]); /* rows imported */
    /* the target refuses the slots it imports, naming the source */
    zp_slotmap *d3 = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d3, 3), 0);
    void *zctx = zmq_ctx_new(), *sock = zt_move_raw_worker(zctx, cl, 2, 1, 0x51);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PULL;
    h.rank = 1;
    h.incarnation = 0x51;
    h.seq = h.req_id = 2;
    h.count = 1;
    uint64_t id = 1;
    while (zp_slotmap_owner(d3, id) != 0)
        id++;
    Zeps__Header *rep = zt_raw_req(sock, &h, &id, sizeof(id));
    ck_assert_int_eq(rep->error, ZEPS_EMOVED);
    ck_assert_uint_eq(rep->slot_owner, 0);
    ck_assert_uint_eq(rep->slot_epoch, 0);
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    zp_slotmap_destroy(&d3);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    zt_wait(pid, 10);
    ck_assert(zt_wait_log(cl, 2, "aborted (the tool's lease passed)"));
    ck_assert(zt_wait_log(cl, 0, "aborted (the tool's lease passed)"));
    for (int k = 0; k < 3; k++) {
        uint64_t epoch;
        ck_assert_uint_eq(zt_move_rows(tl, k, &epoch), before[k]);
        ck_assert_uint_eq(epoch, 0);
    }
}

/* The target dies (-9) while the rows are copied: the move fails, saying
 * so, and the source keeps its map and rows. */
static void target_killed(zt_cluster *cl, zeps_client *tl, const uint64_t *before)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/move-target.log", cl->dir);
    pid_t pid = move_slowly(cl, log, "10000");
    for (int i = 0; i < 2000 && zt_move_rows(tl, 2, NULL) == before[2]; i++)
        usleep(2 * 1000); /* until the copy began */
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the copy ended before the kill");
    zt_server_kill(cl, 2, SIGKILL);
    int st = zt_wait(pid, 60);
    zt_move_print_file(log);
    ck_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
    ck_assert(zt_move_file_has(log, "shard 2 (") && zt_move_file_has(log, "did not answer"));
    ck_assert(zt_move_file_has(log, "aborted; the slot map is unchanged"));
    ck_assert(zt_wait_log(cl, 0, "aborted (the tool aborted it)"));
    for (int k = 0; k < 2; k++) {
        uint64_t epoch;
        ck_assert_uint_eq(zt_move_rows(tl, k, &epoch), before[k]);
        ck_assert_uint_eq(epoch, 0);
    }
}

START_TEST(test_move_aborted)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 2, "async", NULL, NULL), 0);
    static uint64_t ids[BIG];
    zt_move_ids(ids, BIG, 11);
    zeps_client *c = zt_client(&cl, 0), *tl = zt_move_tool(&cl);
    ck_assert_ptr_nonnull(c);
    uint32_t t = zt_move_declare(c);
    zt_move_populate(c, t, ids, BIG);
    uint64_t before[3];
    for (int k = 0; k < 3; k++)
        before[k] = zt_move_rows(tl, k, NULL);
    tool_killed(&cl, tl, before);
    zt_move_check_values(c, t, ids, BIG, 1);
    target_killed(&cl, tl, before);
    /* the source serves the slots as before, and may move them again */
    zt_move_check_values(c, t, ids, BIG, 1);
    char log[400];
    snprintf(log, sizeof(log), "%s/move-again.log", cl.dir);
    char *again[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                     "--to",   "1",    "--slots",  "0-299", NULL};
    int st = zt_move_zepsctl(log, again);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    zt_move_check_values(c, t, ids, BIG, 1);
    uint64_t epoch;
    ck_assert_uint_lt(zt_move_rows(tl, 0, &epoch), before[0]);
    ck_assert_uint_eq(epoch, 1);
    zeps_client_destroy(&c);
    zeps_client_destroy(&tl);
    zt_cluster_stop(&cl);
}
END_TEST

/* zepsctl with args exits with `status`, its output holding `needle`. */
static void refused(const zt_cluster *cl, char **args, int status, const char *needle)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/refused.log", cl->dir);
    unlink(log);
    int st = zt_move_zepsctl(log, args);
    ck_assert_msg(st == status && zt_move_file_has(log, needle),
                  "exit %d (not %d), or no '%s' in:", st, status, needle);
}

/* MOVE step `step` to shard k of 3 with peer `peer`; BEGIN and IMPORT
 * carry the map of epoch 1 moving slot 0 (shard 0's) to the target (peer
 * for BEGIN, k for IMPORT). The reply header. */
static Zeps__Header *raw_begin(const zt_cluster *cl, int k, uint32_t peer, uint32_t step)
{
    bool map = step == ZP_MOVE_BEGIN || step == ZP_MOVE_IMPORT;
    uint32_t to = step == ZP_MOVE_BEGIN ? peer : (uint32_t)k;
    return zt_move_step(cl, k, peer, step, map ? zt_move_map_wire(1, 4095, to) : NULL,
                        map ? 16 + 2 * 4095 : 0);
}

/* raw_begin that must be answered without an error. */
static void raw_step_ok(const zt_cluster *cl, int k, uint32_t peer, uint32_t step)
{
    Zeps__Header *rep = raw_begin(cl, k, peer, step);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "step %u at shard %d: %s", step, k, rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
}

static void abort_both(void *arg)
{
    raw_step_ok(arg, 0, 1, ZP_MOVE_ABORT);
    raw_step_ok(arg, 1, 0, ZP_MOVE_ABORT);
}

/* A push parked by the cut-over, and a retry of it (the same seq), then
 * the move aborted: the one EMOVED answer sends the client on with a new
 * seq, and a copy of the old seq still on its way is a duplicate, not a
 * second update (docs/elastic.md, "After the commit"). */
START_TEST(test_late_copy_of_parked_push)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 2, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = zt_move_declare(c);
    zp_slotmap *d3 = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d3, 3), 0);
    uint64_t id = 1;
    while (zp_slotmap_slot_of(d3, id) != 0)
        id++;
    void *zctx = zmq_ctx_new(), *sock = zt_move_raw_worker(zctx, &cl, 0, 1, 0x52);
    raw_step_ok(&cl, 0, 1, ZP_MOVE_BEGIN);
    raw_step_ok(&cl, 1, 0, ZP_MOVE_IMPORT);
    raw_step_ok(&cl, 0, 1, ZP_MOVE_FREEZE);
    zt_move_parked_then_late(sock, 0x52, t, id, abort_both, &cl);
    float row[DIM];
    ck_assert_int_eq(zeps_spull(c, t, &id, 1, row, 0), 0);
    ck_assert_msg(row[0] == 1.0f, "the push applied %g times", row[0]);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    zp_slotmap_destroy(&d3);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_move_refusals)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", NULL, NULL), 0);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 3);
    zeps_client *c = zt_client(&cl, 0), *tl = zt_move_tool(&cl);
    uint32_t t = zt_move_declare(c);
    zt_move_populate(c, t, ids, NIDS);
    uint64_t before[3];
    for (int k = 0; k < 3; k++)
        before[k] = zt_move_rows(tl, k, NULL);
    char *self[] = {"shards", "move", "--config", cl.conf, "--from", "1",
                    "--to",   "1",    "--slots",  "0-9",   NULL};
    refused(&cl, self, 2, "two different shards of the cluster's 3");
    char *past[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "2",    "--slots",  "4095",  NULL};
    refused(&cl, past, 2, "LO <= HI < 4095");
    char *none[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "2",    "--slots",  "1-2",   NULL};
    refused(&cl, none, 2, "no slot of '1-2' is on shard 0");
    /* at the shard: itself as the other shard; a move while one runs */
    zt_raw_expect_error(raw_begin(&cl, 0, 0, ZP_MOVE_BEGIN), ZEPS_EINVAL,
                        "must be one of shards 0..2 but 0, not 0");
    zt_raw_expect_error(
        zt_move_step(&cl, 0, 1, ZP_MOVE_BEGIN, zt_move_map_wire(1, 2048, 1), 16 + 2 * 2048),
        ZEPS_EINVAL, "a map of 2048 slots; shard 0's has 4095");
    zt_raw_expect_error(
        zt_move_step(&cl, 0, 1, ZP_MOVE_BEGIN, zt_move_map_wire(0, 4095, 1), 16 + 2 * 4095),
        ZEPS_ESTALE, "the map's epoch 0 is not newer than shard 0's 0");
    zt_raw_expect_error(
        zt_move_step(&cl, 0, 1, ZP_MOVE_BEGIN, zt_move_map_wire(1, 4095, 0), 16 + 2 * 4095),
        ZEPS_EINVAL, "moves no slot from shard 0 to shard 1");
    Zeps__Header *rep = raw_begin(&cl, 0, 1, ZP_MOVE_BEGIN);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    char *busy[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "2",    "--slots",  "0-99",  NULL};
    refused(&cl, busy, 2, "shard 0 already takes part in a move (as its source, with shard 1)");
    rep = raw_begin(&cl, 0, 1, ZP_MOVE_ABORT);
    ck_assert_uint_eq(rep->op, ZEPS__OP__MOVE);
    zeps__header__free_unpacked(rep, NULL);
    /* an unreachable target: the source's part is aborted */
    zt_server_kill(&cl, 2, SIGKILL);
    char *gone[] = {"shards", "move",    "--config", cl.conf,        "--from", "0", "--to",
                    "2",      "--slots", "0-99",     "--timeout-ms", "500",    NULL};
    refused(&cl, gone, 1, "did not answer MOVE/IMPORT within 500 ms");
    ck_assert(zt_wait_log(&cl, 0, "aborted (the tool aborted it)"));
    /* nothing changed */
    for (int k = 0; k < 2; k++) {
        uint64_t epoch;
        ck_assert_uint_eq(zt_move_rows(tl, k, &epoch), before[k]);
        ck_assert_uint_eq(epoch, 0);
    }
    zt_move_check_values(c, t, ids, NIDS, 1);
    zeps_client_destroy(&c);
    zeps_client_destroy(&tl);
    zt_cluster_stop(&cl);
}
END_TEST

/* Not supported: a shard without sparse tables. */
START_TEST(test_move_unsupported)
{
    zt_cluster cl;
    char *args[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "1",    "--slots",  "0-99",  NULL};
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_table_spec dense = {.name = "w", .length = 100, .optimizer = "sgd", .lr = 0.1};
    ck_assert_int_eq(zeps_declare(c, &dense, &t), 0);
    args[3] = cl.conf;
    refused(&cl, args, 2, "shard 0 holds no sparse table");
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
}
END_TEST

/* The window of "What each failure does": the target took the commit's
 * map (SLOTS) and the source never got its COMMIT, its lease (1.5 s: the
 * cut-over's bound no longer ends a drained cut-over without coordination)
 * passed and it serves the slots again. A COMMIT with the map, sent to the
 * source now in no move, repairs it: the source takes the map and drops
 * the rows it gives away. */
START_TEST(test_commit_repairs_the_window)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0), *tl = zt_move_tool(&cl);
    uint32_t t = zt_move_declare(c);
    zp_slotmap *d3 = NULL, *m1 = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d3, 3), 0);
    uint64_t id = 1; /* in slot 0, which the map of epoch 1 gives to shard 1 */
    while (zp_slotmap_slot_of(d3, id) != 0)
        id++;
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__MOVE);
    h.move_step = ZP_MOVE_BEGIN;
    h.move_peer = 1;
    h.move_bound_ms = 1500; /* BEGIN: the tool's lease */
    Zeps__Header *rep = zt_raw_req_once(&cl, 0, &h, zt_move_map_wire(1, 4095, 1), 16 + 2 * 4095);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "BEGIN: %s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    raw_step_ok(&cl, 1, 0, ZP_MOVE_IMPORT);
    raw_step_ok(&cl, 0, 1, ZP_MOVE_FREEZE);
    void *zctx = zmq_ctx_new(), *sock = zt_raw_socket(zctx, &cl, 0);
    /* a page of ROWS: none, so drained */
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__MOVE;
    h.req_id = 9;
    h.rank = 0xffffffffu;
    h.move_step = ZP_MOVE_ROWS;
    h.move_peer = 1;
    h.count = 16;
    rep = zt_raw_req(sock, &h, NULL, 0);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE && rep->count == 0 && rep->cursor == 0, "%s",
                  rep->error_text ? rep->error_text : "rows left");
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    const uint8_t *wire = zt_move_map_wire(1, 4095, 1);
    char why[256];
    ck_assert_int_eq(zp_slotmap_decode(&m1, wire, 16 + 2 * 4095, 3, why, sizeof(why)), 0);
    ck_assert_int_eq(zt_raw_slots(&cl, 1, m1), 0); /* the target commits */
    ck_assert(zt_wait_log(&cl, 0, "aborted (the tool's lease passed)"));
    float g[DIM] = {-1.0f, -1.0f}, row[DIM];
    ck_assert_int_eq(zeps_spush(c, t, &id, 1, g, 0), 0); /* served by the source again */
    rep = zt_move_step(&cl, 0, 1, ZP_MOVE_COMMIT, wire, 16 + 2 * 4095);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "the repair: %s", rep->error_text);
    ck_assert_uint_eq(rep->count, 1); /* the row of slot 0 */
    zeps__header__free_unpacked(rep, NULL);
    for (int k = 0; k < 2; k++) {
        uint64_t epoch;
        zt_move_rows(tl, k, &epoch);
        ck_assert_uint_eq(epoch, 1);
    }
    ck_assert_int_eq(zeps_spush(c, t, &id, 1, g, 0), 0); /* now at the target */
    ck_assert_int_eq(zeps_spull(c, t, &id, 1, row, 0), 0);
    ck_assert_msg(row[0] == 1.0f, "%g: the push the source took in the window is lost", row[0]);
    zp_slotmap_destroy(&m1);
    zp_slotmap_destroy(&d3);
    zeps_client_destroy(&tl);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("migrate_abort");
    TCase *tc = tcase_create("migrate_abort");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_move_aborted);
    tcase_add_test(tc, test_move_refusals);
    tcase_add_test(tc, test_move_unsupported);
    tcase_add_test(tc, test_late_copy_of_parked_push);
    tcase_add_test(tc, test_commit_repairs_the_window);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
