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
 *     killed: nothing lost, and a new client does not wait for shard 1.
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
#include "rawreq.h"
#include "replset.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"
#include "zkserver.h"

#define SESSION_MS 2000
#define WORKERS    3

typedef struct rcl {
    zt_zk zk;
    zt_rset rs[2];
    zt_cluster cl; /* the cluster file and folder, for move_fixture.h */
} rcl;

/* cl's endpoint of shard k (raw requests go there): replica r's. */
static void set_endpoint(rcl *c, int k, int r)
{
    _Static_assert(sizeof(c->cl.endpoints[0]) > sizeof(c->rs[0].ep[0]), "an endpoint fits");
    _Static_assert(sizeof(c->cl.replica_endpoints[0][0]) == sizeof(c->rs[0].ep[0]), "it fits");
    memcpy(c->cl.endpoints[k], c->rs[k].ep[r], sizeof(c->rs[k].ep[r]));
}

/* Two shards of two replicas, each replica 0 primary at epoch 1 and its
 * backup in sync; `extra` lines in the cluster group. */
static void rcl_up(rcl *c, const char *tag, const char *extra)
{
    memset(c, 0, sizeof(*c));
    ck_assert_int_eq(zt_zk_start(&c->zk), 0);
    char lines[400];
    snprintf(lines, sizeof(lines),
             "  workers = %d;\n  consistency = \"async\";\n  hello_timeout_ms = 20000;\n%s",
             WORKERS, extra);
    zt_rset_write_shards(c->rs, 2, tag, c->zk.hosts, tag, SESSION_MS, lines);
    for (int k = 0; k < 2; k++)
        zt_rset_up(&c->rs[k]);
    _Static_assert(sizeof(c->cl.dir) == sizeof(c->rs[0].dir), "the folder's path fits");
    _Static_assert(sizeof(c->cl.conf) == sizeof(c->rs[0].conf), "the file's path fits");
    memcpy(c->cl.dir, c->rs[0].dir, sizeof(c->cl.dir));
    memcpy(c->cl.conf, c->rs[0].conf, sizeof(c->cl.conf));
    c->cl.nservers = 2;
    c->cl.nworkers = WORKERS;
    c->cl.replicas = 2;
    for (int k = 0; k < 2; k++) {
        set_endpoint(c, k, 0);
        for (int r = 0; r < 2; r++)
            memcpy(c->cl.replica_endpoints[k][r], c->rs[k].ep[r], sizeof(c->rs[k].ep[r]));
    }
}

static void rcl_down(rcl *c)
{
    for (int k = 0; k < 2; k++)
        zt_rset_stop(&c->rs[k]);
    zt_zk_stop(&c->zk, SIGTERM);
}

/* Kill shard k's primary (replica r) with -9 and wait until the other
 * replica is primary at the next epoch. */
static void fail_over(rcl *c, int k)
{
    int r = zt_rset_primary(&c->rs[k]);
    uint64_t epoch = zt_rset_epoch(&c->rs[k], r);
    zt_rset_kill(&c->rs[k], r, SIGKILL);
    double s = zt_rset_wait(&c->rs[k], 1 - r, "primary", epoch + 1, -1, 30);
    printf("shard %d: replica %d primary %.2f s after the kill\n", k, 1 - r, s);
    set_endpoint(c, k, 1 - r);
}

/* Start shard k's dead replica again and wait until it is in sync. */
static void back_to_two(rcl *c, int k)
{
    int r = zt_rset_primary(&c->rs[k]);
    zt_rset_start(&c->rs[k], 1 - r);
    zt_rset_wait(&c->rs[k], r, "primary", zt_rset_epoch(&c->rs[k], r), 2, 30);
}

/* The map of shard 0's slots among `set` given to shard 1, one epoch up
 * from the default map of 2, into *next; the ids of ids[0..n) it moves. */
static uint64_t moved_map(const char *set, const uint64_t *ids, size_t n, zp_slotmap **next)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint32_t slots = zp_slotmap_slots(d);
    uint8_t *which = calloc(slots, 1);
    char err[256];
    ck_assert_int_gt(zp_slotmap_parse_set(set, slots, which, err, sizeof(err)), 0);
    for (uint32_t k = 0; k < slots; k++)
        which[k] = which[k] && zp_slotmap_slot_owner(d, k) == 0;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 1, next), 0);
    uint64_t moved = 0;
    for (size_t i = 0; i < n; i++)
        moved += zp_slotmap_owner(d, ids[i]) != zp_slotmap_owner(*next, ids[i]);
    free(which);
    zp_slotmap_destroy(&d);
    return moved;
}

/* The map moving shard 0's slots below 2048 to shard 1 (*next, the
 * caller's) and the first of the oracle's ids it moves. */
static uint64_t moving_id(zp_slotmap **next)
{
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *d = NULL;
    ck_assert_uint_gt(moved_map("0-2047", ids, NIDS, next), 0);
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint64_t id = 0;
    for (int i = 0; i < NIDS && !id; i++)
        if (zp_slotmap_owner(*next, ids[i]) == 1 && zp_slotmap_owner(d, ids[i]) == 0)
            id = ids[i];
    zp_slotmap_destroy(&d);
    ck_assert_uint_ne(id, 0);
    return id;
}

/* Every shard's primary holds the map of epoch `epoch` and exactly the
 * rows of ids[0..n) that `map` gives it. */
static void check_placed(const rcl *c, const uint64_t *ids, size_t n, const zp_slotmap *map,
                         uint64_t epoch)
{
    uint64_t want[2] = {0, 0};
    for (size_t i = 0; i < n; i++)
        want[zp_slotmap_owner(map, ids[i])]++;
    zeps_client *t = zt_move_tool(&c->cl);
    for (int k = 0; k < 2; k++) {
        uint64_t e = 0, rows = zt_move_rows(t, k, &e);
        ck_assert_msg(rows == want[k] && e == epoch,
                      "shard %d holds %llu rows at map epoch %llu; the map of epoch %llu gives it "
                      "%llu",
                      k, (unsigned long long)rows, (unsigned long long)e, (unsigned long long)epoch,
                      (unsigned long long)want[k]);
    }
    zeps_client_destroy(&t);
}

/* Wait until shard 0's table has at least n pushes. */
/* The pushes shard k's primary applied to table 0 (STATS). */
static uint64_t pushes_at(zeps_client *t, int k)
{
    Zeps__ShardStats *st = zt_stats(t, k);
    ck_assert_ptr_nonnull(st);
    uint64_t p = st->n_tables > 0 ? st->tables[0]->pushes : 0;
    zeps__shard_stats__free_unpacked(st, NULL);
    return p;
}

static void wait_pushes(const rcl *c, uint64_t n)
{
    zeps_client *t = zt_move_tool(&c->cl);
    for (int i = 0; i < 600 && pushes_at(t, 0) < n; i++)
        usleep(50 * 1000);
    zeps_client_destroy(&t);
}

/* Every worker waits on a parked push: neither shard applies one in
 * 300 ms (each worker's push spans both shards and blocks until every
 * piece is answered). */
static void check_all_parked(const rcl *c)
{
    zeps_client *t = zt_move_tool(&c->cl);
    uint64_t before = pushes_at(t, 0) + pushes_at(t, 1);
    usleep(300 * 1000);
    uint64_t after = pushes_at(t, 0) + pushes_at(t, 1);
    zeps_client_destroy(&t);
    ck_assert_msg(after == before,
                  "pushes went on in the cut-over (%" PRIu64 " -> %" PRIu64
                  "): not every worker's push was parked",
                  before, after);
}

START_TEST(test_commit_survives_failovers)
{
    rcl c;
    rcl_up(&c, "mvrepl", "");
    pid_t pids[WORKERS];
    zt_move_workers_start(&c.cl, WORKERS, pids);
    wait_pushes(&c, 3 * WORKERS);
    char *args[] = {"shards",  "move",   "--config", c.cl.conf, "--from",      "0",  "--to", "1",
                    "--slots", "0-2047", "--page",   "512",     "--threshold", "64", NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "move", args), 0);
    zt_move_workers_run(pids, WORKERS);
    fail_over(&c, 1); /* the target: its backup must hold the rows and the map */
    usleep(500 * 1000);
    zt_move_workers_run(pids, WORKERS);
    fail_over(&c, 0);   /* the source: its backup must have taken the commit */
    usleep(500 * 1000); /* the workers push on through the new primaries */
    long weighted = 0, sum = zt_move_workers_end(&c.cl, WORKERS, pids, &weighted);
    printf("%ld pushes answered through the move and two failovers\n", sum);
    zt_move_check_oracle(&c.cl, sum, weighted);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *next = NULL;
    ck_assert_uint_gt(moved_map("0-2047", ids, NIDS, &next), 0);
    check_placed(&c, ids, NIDS, next, 1);
    zp_slotmap_destroy(&next);
    rcl_down(&c);
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
static void step_ok(const rcl *c, int k, uint32_t peer, uint32_t step, const zp_slotmap *map)
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
static void cut_over(const rcl *c, const zp_slotmap *next)
{
    step_ok(c, 0, 1, ZP_MOVE_BEGIN, next);
    step_ok(c, 1, 0, ZP_MOVE_IMPORT, next);
    step_ok(c, 0, 1, ZP_MOVE_FREEZE, NULL);
}

START_TEST(test_parked_push_not_logged)
{
    rcl c;
    rcl_up(&c, "mvpark", "");
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
    fail_over(&c, 0);
    float row[DIM];
    ck_assert_msg(zeps_spull(w, t, &id, 1, row, 0) == 0, "%s", zeps_last_error(w));
    ck_assert_msg(row[0] == 1.0f, "the parked push is applied %g times on the new primary", row[0]);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&next);
    rcl_down(&c);
}
END_TEST

/* ABORT to both shards of the move from 0 to 1 (arg: the rcl). */
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
    rcl c;
    rcl_up(&c, "mvlate", "");
    zp_slotmap *next = NULL;
    uint64_t id = moving_id(&next);
    zeps_client *w = zt_client(&c.cl, 0);
    uint32_t t = zt_move_declare(w);
    void *zctx = zmq_ctx_new(), *sock = zt_move_raw_worker(zctx, &c.cl, 0, 1, 0x53);
    cut_over(&c, next);
    zt_move_parked_then_late(sock, 0x53, t, id, abort_both, &c);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    fail_over(&c, 0);
    float row[DIM];
    ck_assert_msg(zeps_spull(w, t, &id, 1, row, 0) == 0, "%s", zeps_last_error(w));
    ck_assert_msg(row[0] == 1.0f, "the push is applied %g times on the new primary", row[0]);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&next);
    rcl_down(&c);
}
END_TEST

/* zepsctl shards move of shard 0's slots below 2048 to shard 1, a row a
 * page (a copy of a few seconds), with the shards' lease and the tool's
 * wait per request as given, started; its log at <dir>/move-<tag>.log. */
static pid_t slow_move(rcl *c, const char *tag, char *lease_ms, char *timeout_ms, char *log,
                       size_t len)
{
    snprintf(log, len, "%s/move-%s.log", c->cl.dir, tag);
    char bin[512];
    zt_bin("zepsctl", bin, sizeof(bin));
    char *argv[] = {bin,        "shards",      "move", "--config",   c->cl.conf, "--from",
                    "0",        "--to",        "1",    "--slots",    "0-2047",   "--page",
                    "1",        "--threshold", "0",    "--lease-ms", lease_ms,   "--timeout-ms",
                    timeout_ms, NULL};
    pid_t pid = zt_spawn(bin, argv, log);
    ck_assert_int_gt(pid, 0);
    usleep(300 * 1000);
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the move ended within 300 ms");
    return pid;
}

/* slow_move with shard `victim`'s primary (-1: the tool itself) killed
 * 300 ms in: the move fails with nothing changed. */
static void kill_mid_copy(rcl *c, int victim)
{
    char log[400], tag[16];
    snprintf(tag, sizeof(tag), "kill-%d", victim);
    pid_t pid = slow_move(c, tag, "1500", "1000", log, sizeof(log));
    if (victim < 0)
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
    else
        fail_over(c, victim);
    int st = zt_wait(pid, 60);
    zt_move_print_file(log);
    ck_assert_msg(victim < 0 ? WIFSIGNALED(st) : WIFEXITED(st) && WEXITSTATUS(st) == 1,
                  "zepsctl: status 0x%x", st);
}

/* Wait until shard k's primary holds exactly the rows of ids[0..n) that
 * map d gives it, within secs. */
static void wait_owned(const rcl *c, int k, const uint64_t *ids, size_t n, const zp_slotmap *d,
                       double secs)
{
    uint64_t want = 0;
    for (size_t i = 0; i < n; i++)
        want += zp_slotmap_owner(d, ids[i]) == k;
    double t0 = zt_now_s();
    for (;;) {
        zeps_client *tl = zt_move_tool(&c->cl);
        uint64_t e, got = zt_move_rows(tl, k, &e);
        zeps_client_destroy(&tl);
        if (got == want)
            return;
        ck_assert_msg(zt_now_s() - t0 < secs, "shard %d still holds %llu rows, %llu its own", k,
                      (unsigned long long)got, (unsigned long long)want);
        usleep(100 * 1000);
    }
}

/* Rows enough that a copy of a row a page lasts a few seconds: the
 * counter oracle's NIDS ids first. */
enum { ALL = 24000 };

/* ids[0..ALL) pushed `times` times (zt_move_populate) by worker 0's
 * client, made into *w (the caller's): the table's id. */
static uint32_t fill(const rcl *c, uint64_t *ids, int times, zeps_client **w)
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
    rcl c;
    rcl_up(&c, "mvkill", "");
    static uint64_t ids[ALL];
    zeps_client *w = NULL;
    uint32_t t = fill(&c, ids, 1, &w);
    zp_slotmap *d = NULL, *next = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    /* the target's primary: its backup, elected, ends its part by the
     * lease and drops the rows it took */
    kill_mid_copy(&c, 1);
    wait_owned(&c, 1, ids, ALL, d, 15);
    check_placed(&c, ids, ALL, d, 0);
    back_to_two(&c, 1);
    /* the source's primary: the tool aborts the target */
    kill_mid_copy(&c, 0);
    check_placed(&c, ids, ALL, d, 0);
    back_to_two(&c, 0);
    /* the tool: both primaries end their parts by the lease, the target's
     * backup too (the ABORT its primary logs) */
    kill_mid_copy(&c, -1);
    wait_owned(&c, 1, ids, ALL, d, 15);
    zt_move_check_values(w, t, ids, NIDS, 1);
    /* nothing is left of any attempt: another move commits, and the
     * target's backup holds what it took when elected */
    char *args[] = {"shards", "move", "--config", c.cl.conf,   "--from", "0",
                    "--to",   "1",    "--slots",  "2048-4095", NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "move-again", args), 0);
    ck_assert_uint_gt(moved_map("2048-4095", ids, ALL, &next), 0);
    fail_over(&c, 1);
    check_placed(&c, ids, ALL, next, 1);
    zt_move_check_values(w, t, ids, NIDS, 1);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&next);
    rcl_down(&c);
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
    rcl c;
    rcl_up(&c, victim ? "mvcut1" : "mvcut0", "");
    pid_t pids[WORKERS];
    zt_move_workers_start(&c.cl, WORKERS, pids);
    wait_pushes(&c, 3 * WORKERS);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *next = NULL, *d = NULL;
    ck_assert_uint_gt(moved_map("0-2047", ids, NIDS, &next), 0);
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    cut_over(&c, next);
    usleep(300 * 1000); /* every worker's push parked at the source */
    check_all_parked(&c);
    fail_over(&c, victim);
    step_ok(&c, 1 - victim, victim, ZP_MOVE_ABORT, NULL); /* the survivor's part */
    usleep(500 * 1000);                                   /* the workers push on */
    long weighted = 0, sum = zt_move_workers_end(&c.cl, WORKERS, pids, &weighted);
    printf("%ld pushes answered through a kill of shard %d in the cut-over\n", sum, victim);
    zt_move_check_oracle(&c.cl, sum, weighted);
    if (victim == 1) /* the target's new primary ends its part by the lease (10 s) */
        wait_owned(&c, 1, ids, NIDS, d, 20);
    check_placed(&c, ids, NIDS, d, 0);
    zp_slotmap_destroy(&next);
    zp_slotmap_destroy(&d);
    rcl_down(&c);
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
    rcl c;
    rcl_up(&c, "mvretire", "");
    pid_t pids[WORKERS];
    zt_move_workers_start(&c.cl, WORKERS, pids);
    wait_pushes(&c, 3 * WORKERS);
    char *rm[] = {"shards", "remove", "1", "--config", c.cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "remove", rm), 0);
    char *rt[] = {"shards", "retire", "1", "--config", c.cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "retire", rt), 0);
    for (int r = 0; r < 2; r++)
        zt_rset_kill(&c.rs[1], r, SIGTERM);
    usleep(500 * 1000);
    zt_move_workers_run(pids, WORKERS);
    fail_over(&c, 0);
    usleep(500 * 1000);
    long weighted = 0, sum = zt_move_workers_end(&c.cl, WORKERS, pids, &weighted);
    printf("%ld pushes answered through shards remove, retire and a failover\n", sum);
    zt_move_check_oracle(&c.cl, sum, weighted);
    zeps_client *t = zt_move_tool(&c.cl);
    ck_assert_uint_eq(zt_move_rows(t, 0, NULL), NIDS);
    zeps_client_destroy(&t);
    rcl_down(&c);
}
END_TEST

/* The target's backup restarted while the move copies, its primary's log
 * trimmed (log_mb 1) so that it needs the whole state: it gets it only
 * after the move committed, and holds the moved rows when elected. */
START_TEST(test_whole_state_waits_for_the_move)
{
    rcl c;
    rcl_up(&c, "mvxfer", "  replication = { log_mb = 1; };");
    static uint64_t ids[ALL];
    zeps_client *w = NULL;
    uint32_t t = fill(&c, ids, 4, &w); /* more than log_mb of entries */
    char log[400];
    /* a step waits out the backup's leaving the in-sync set (max_lag_ms,
     * 2 s): the lease and the tool's wait are longer */
    pid_t pid = slow_move(&c, "xfer", "8000", "10000", log, sizeof(log));
    zt_rset_kill(&c.rs[1], 1, SIGKILL);
    zt_rset_start(&c.rs[1], 1);
    int st = zt_wait(pid, 120);
    zt_move_print_file(log);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl: status 0x%x", st);
    zt_rset_wait(&c.rs[1], 0, "primary", 1, 2, 60);
    zp_slotmap *next = NULL;
    ck_assert_uint_gt(moved_map("0-2047", ids, ALL, &next), 0);
    fail_over(&c, 1);
    check_placed(&c, ids, ALL, next, 1);
    zt_move_check_values(w, t, ids, NIDS, 4);
    zeps_client_destroy(&w);
    zp_slotmap_destroy(&next);
    rcl_down(&c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("move_replicas");
    struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"commit", test_commit_survives_failovers},
        {"parked", test_parked_push_not_logged},
        {"killed", test_killed_mid_copy},
        {"transfer", test_whole_state_waits_for_the_move},
        {"cutover_source", test_source_killed_in_cutover},
        {"cutover_target", test_target_killed_in_cutover},
        {"retire", test_remove_and_retire},
        {"late_copy", test_late_copy_after_abort},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name); /* CK_RUN_CASE=<name> runs one */
        tcase_set_timeout(tc, 240);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
