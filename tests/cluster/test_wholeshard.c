/*
 * test_wholeshard.c - a whole replicated shard stopped and started again
 * under the same coordination.name (docs/replication.md, "A whole shard
 * restarted"), with real zeps-server processes, a real ZooKeeper and a
 * worker through libzeps. Both replicas share one snapshot_dir.
 *
 *   - stopped with SIGTERM (the backup, then the primary): the primary's
 *     final snapshot and its clean-exit record let a restarted replica be
 *     elected; a new worker reads exactly the values acknowledged before
 *     the stop and trains on; then both stopped at once and started again:
 *     the same values; one replica started again alone is elected too;
 *   - killed with SIGKILL (after a snapshot taken by hand): nobody is
 *     elected, every replica refuses workers, the log says why;
 *   - a record of an earlier epoch (the primary stopped cleanly, the backup
 *     took over, acknowledged more and was killed) is not honoured;
 *   - a record naming a snapshot no restarted replica restored (its file
 *     damaged, an older set restored) is not honoured;
 *   - each replica with a snapshot_dir of its own: the last primary's
 *     replica is elected, the other takes its whole state.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "rawreq.h"
#include "replset.h"
#include "wire.h"
#include "zeps.h"
#include "zeps_errors.h"
#include "zkserver.h"

#define SESSION_MS 2000 /* a loaded machine may stall a JVM or a shard for a second */
#define LEN        1000
#define WAIT_S     30.0 /* generous bounds: a loaded 2-core machine */

static const zeps_table_spec table = {.name = "w", .length = LEN, .optimizer = "sgd", .lr = 1.0};

/* The cluster file: one shard of two replicas sharing <dir>/snap, one
 * async worker, the cluster `name` in ZooKeeper. */
static void write_conf(zt_rset *rs, const char *hosts, const char *name)
{
    char lines[600];
    zt_rset_write(rs, "wholeshard", hosts, name, SESSION_MS, ""); /* makes the folder */
    snprintf(lines, sizeof(lines),
             "  workers = 1;\n  consistency = \"async\";\n  hello_timeout_ms = 5000;\n"
             "  snapshot_dir = \"%s/snap\";\n  snapshot_on_exit = true;\n",
             rs->dir);
    zt_rset_write(rs, "wholeshard", hosts, name, SESSION_MS, lines);
}

/* `steps` pushes of small integers (exact in f32 with sgd at lr 1), added
 * to `expect`, from step `from`. */
static void push_steps(zeps_client *c, int from, int steps, float *expect)
{
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &table, &t), 0);
    static float g[LEN];
    for (int k = from; k < from + steps; k++) {
        for (int i = 0; i < LEN; i++) {
            g[i] = -(float)((i + k) % 5);
            expect[i] -= g[i];
        }
        ck_assert_int_eq(zeps_push(c, t, g, 0, LEN, k), 0);
    }
}

/* What a worker reads equals `expect`, bit for bit. */
static void expect_values(zeps_client *c, const float *expect, const char *when)
{
    uint32_t t;
    static float w[LEN];
    ck_assert_int_eq(zeps_declare(c, &table, &t), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(w[i] == expect[i], "%s: w[%d] = %g, acknowledged %g", when, i, w[i],
                      expect[i]);
}

static char *role_of(zt_rset *rs, int r, char *buf, size_t len, uint64_t *epoch)
{
    Zeps__Header *rep = zt_rset_stats(rs, r);
    snprintf(buf, len, "%s", rep ? rep->stats->role : "no answer");
    *epoch = rep ? rep->stats->epoch : 0;
    if (rep)
        zeps__header__free_unpacked(rep, NULL);
    return buf;
}

/* The replica that becomes primary within WAIT_S (asserted). */
static int wait_any_primary(zt_rset *rs, uint64_t *epoch)
{
    double t0 = zt_now_s();
    char role[2][32];
    while (zt_now_s() - t0 < WAIT_S) {
        for (int r = 0; r < 2; r++)
            if (strcmp(role_of(rs, r, role[r], sizeof(role[r]), epoch), "primary") == 0)
                return r;
        zt_sleep_ms(50);
    }
    ck_abort_msg("no replica primary within %.0f s (%s, %s)", WAIT_S, role[0], role[1]);
    return -1;
}

/* Whether replica r's log holds `needle`. */
static bool log_has(const zt_rset *rs, int r, const char *needle)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/replica-%d.log", rs->dir, r);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* A HELLO to replica r is refused with ENOTPRIMARY: it serves nothing. */
static void expect_refused(zt_rset *rs, int r)
{
    void *s = zmq_socket(rs->zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, rs->ep[r]), 0);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__HELLO;
    h.req_id = 1;
    h.rank = 0;
    h.incarnation = 4242;
    Zeps__Header *rep = zt_raw_req(s, &h, NULL, 0);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->op == ZEPS__OP__ERROR && rep->error == ZEPS_ENOTPRIMARY,
                  "replica %d answered HELLO: op %d error %d", r, (int)rep->op, rep->error);
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(s);
}

/* Both restarted replicas without a primary: once the dead primary's
 * session is gone each logs `why` (only then: a replica says `none` too
 * before it has heard of the dead primary), both say `none`, stay so for
 * 3 s, and refuse workers. */
static void expect_nobody_elected(zt_rset *rs, const char *why)
{
    char role[2][32];
    uint64_t epoch;
    double t0 = zt_now_s();
    while (!log_has(rs, 0, why) || !log_has(rs, 1, why)) {
        role_of(rs, 0, role[0], sizeof(role[0]), &epoch);
        role_of(rs, 1, role[1], sizeof(role[1]), &epoch);
        ck_assert_msg(strcmp(role[0], "primary") != 0 && strcmp(role[1], "primary") != 0,
                      "a replica was elected: %s, %s", role[0], role[1]);
        ck_assert_msg(zt_now_s() - t0 < WAIT_S, "the logs do not say '%s' within %.0f s: %s, %s",
                      why, WAIT_S, role[0], role[1]);
        zt_sleep_ms(50);
    }
    for (t0 = zt_now_s(); zt_now_s() - t0 < 3.0; zt_sleep_ms(100))
        for (int r = 0; r < 2; r++)
            ck_assert_msg(strcmp(role_of(rs, r, role[r], sizeof(role[r]), &epoch), "none") == 0,
                          "replica %d is %s", r, role[r]);
    for (int r = 0; r < 2; r++)
        expect_refused(rs, r);
}

static void start_both(zt_rset *rs)
{
    zt_rset_start(rs, 0);
    zt_rset_start(rs, 1);
}

/* SIGTERM of the backup, then of the primary (exit 0 each, asserted): the
 * primary's final snapshot and clean-exit record. */
static void stop_cleanly(zt_rset *rs)
{
    zt_rset_kill(rs, 1, SIGTERM);
    zt_rset_kill(rs, 0, SIGTERM);
    ck_assert_msg(log_has(rs, 0, "clean-exit record written at epoch 1"),
                  "replica 0 wrote no clean-exit record");
}

/* ZooKeeper, both replicas of cluster "whole" up, `expect` zeroed, and a
 * worker of rank 0 (the caller's to destroy). */
static zeps_client *begin(zt_zk *zk, zt_rset *rs, float *expect)
{
    ck_assert_int_eq(zt_zk_start(zk), 0);
    write_conf(rs, zk->hosts, "whole");
    zt_rset_up(rs);
    memset(expect, 0, LEN * sizeof(float));
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, rs->conf, 0), 0);
    return c;
}

START_TEST(test_sigterm_restart_elects)
{
    zt_zk zk;
    zt_rset rs = {0};
    static float expect[LEN];
    zeps_client *c = begin(&zk, &rs, expect);
    push_steps(c, 0, 20, expect);
    expect_values(c, expect, "before the stop");
    zeps_client_destroy(&c);
    stop_cleanly(&rs);

    double t0 = zt_now_s();
    start_both(&rs); /* the same name: the in-sync set names processes that are gone */
    uint64_t epoch;
    int p = wait_any_primary(&rs, &epoch);
    printf("replica %d primary at epoch %llu %.3f s after both started again\n", p,
           (unsigned long long)epoch, zt_now_s() - t0);
    ck_assert_uint_eq(epoch, 2);
    ck_assert(log_has(&rs, p, "standing on that record"));
    zt_rset_wait(&rs, p, "primary", 2, 2, WAIT_S); /* the other caught up and in sync */
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    expect_values(c, expect, "after the whole shard restarted");
    push_steps(c, 20, 10, expect); /* trains on */
    expect_values(c, expect, "trained on after the restart");
    zeps_client_destroy(&c);

    /* both stopped at once (systemctl restart of both units) */
    ck_assert_int_eq(kill(rs.pid[0], SIGTERM), 0);
    ck_assert_int_eq(kill(rs.pid[1], SIGTERM), 0);
    for (int r = 0; r < 2; r++) {
        int st = zt_wait(rs.pid[r], 15);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replica %d: status 0x%x", r, st);
        rs.pid[r] = 0;
    }
    start_both(&rs);
    p = wait_any_primary(&rs, &epoch);
    printf("replica %d primary at epoch %llu after both were stopped at once\n", p,
           (unsigned long long)epoch);
    zt_rset_wait(&rs, p, "primary", epoch, 2, WAIT_S); /* both up: SIGTERM finds handlers */
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    expect_values(c, expect, "after both were stopped at once and started again");
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* One replica back alone (the other machine still down): the record's
 * snapshot is the one it restored, so it is elected on its own, and serves
 * what was acknowledged. */
START_TEST(test_sigterm_one_back_elects)
{
    zt_zk zk;
    zt_rset rs = {0};
    static float expect[LEN];
    zeps_client *c = begin(&zk, &rs, expect);
    push_steps(c, 0, 12, expect);
    zeps_client_destroy(&c);
    stop_cleanly(&rs);

    zt_rset_start(&rs, 1); /* the former backup; the shared snapshot_dir */
    uint64_t epoch;
    int p = wait_any_primary(&rs, &epoch);
    ck_assert_int_eq(p, 1);
    ck_assert_uint_eq(epoch, 2);
    ck_assert(log_has(&rs, 1, "standing on that record"));
    zt_rset_wait(&rs, 1, "primary", 2, 1, WAIT_S);
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    expect_values(c, expect, "one replica back alone");
    push_steps(c, 12, 3, expect);
    expect_values(c, expect, "trained on with one replica");
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

static void snapshot_take(zt_rset *rs)
{
    char cmd[1400], bin[512];
    snprintf(cmd, sizeof(cmd), "%s snapshot take --config %s --timeout 20 >> %s/take.out 2>&1",
             zt_bin("zepsctl", bin, sizeof(bin)), rs->conf, rs->dir);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl snapshot take: 0x%x", st);
    zt_sleep_ms(1100); /* the next set (async: the wall-clock second) is another one */
}

START_TEST(test_sigkill_restart_waits)
{
    zt_zk zk;
    zt_rset rs = {0};
    static float expect[LEN];
    zeps_client *c = begin(&zk, &rs, expect);
    push_steps(c, 0, 10, expect);
    snapshot_take(&rs); /* restorable, but older than what is acknowledged next */
    push_steps(c, 10, 10, expect);
    zeps_client_destroy(&c);
    zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_kill(&rs, 1, SIGKILL);

    start_both(&rs);
    expect_nobody_elected(&rs, "no clean-exit record");
    ck_assert(log_has(&rs, 0, "restored snapshot set"));
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

START_TEST(test_stale_record_not_honoured)
{
    zt_zk zk;
    zt_rset rs = {0};
    static float expect[LEN];
    zeps_client *c = begin(&zk, &rs, expect);
    push_steps(c, 0, 10, expect);
    zt_rset_kill(&rs, 0, SIGTERM); /* final snapshot, record of epoch 1 */
    ck_assert(log_has(&rs, 0, "clean-exit record written at epoch 1"));
    zt_rset_wait(&rs, 1, "primary", 2, 1, WAIT_S);
    push_steps(c, 10, 10, expect); /* acknowledged at epoch 2: not in that snapshot */
    expect_values(c, expect, "at the new primary");
    zeps_client_destroy(&c);
    zt_rset_kill(&rs, 1, SIGKILL);

    start_both(&rs); /* both restore the record's snapshot, which lacks epoch 2's pushes */
    expect_nobody_elected(&rs, "older than epoch 2");
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Damage the newest set's file so a restart restores the set before it. */
static void damage_newest_set(const zt_rset *rs)
{
    char dir[400], newest[300] = "";
    snprintf(dir, sizeof(dir), "%s/snap", rs->dir);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, "set-", 4) == 0 && strcmp(e->d_name, newest) > 0)
            snprintf(newest, sizeof(newest), "%s", e->d_name);
    closedir(d);
    ck_assert(newest[0]);
    char path[800];
    snprintf(path, sizeof(path), "%s/%s/shard-0-of-1.zsnap", dir, newest);
    ck_assert_int_eq(truncate(path, 64), 0);
}

START_TEST(test_record_of_another_snapshot)
{
    zt_zk zk;
    zt_rset rs = {0};
    static float expect[LEN];
    zeps_client *c = begin(&zk, &rs, expect);
    push_steps(c, 0, 10, expect);
    snapshot_take(&rs);
    push_steps(c, 10, 10, expect);
    zeps_client_destroy(&c);
    stop_cleanly(&rs);
    damage_newest_set(&rs); /* the final snapshot: the restart restores the older set */

    start_both(&rs);
    expect_nobody_elected(&rs, "no live replica restored snapshot");
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Each replica its own snapshot_dir (as on two machines): only the last
 * primary's holds its final snapshot. It is elected; the other, which
 * restored nothing, must take the primary's whole state (not follow an
 * empty table from entry 0), which a failover to it then shows. */
START_TEST(test_own_disks)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_rset rs = {0};
    write_conf(&rs, zk.hosts, "whole");
    char text[4096], mine[400];
    FILE *f = fopen(rs.conf, "r");
    ck_assert_ptr_nonnull(f);
    text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
    fclose(f);
    snprintf(mine, sizeof(mine), "%s/snap", rs.dir);
    char *at = strstr(text, mine);
    ck_assert_ptr_nonnull(at);
    snprintf(rs.conf0, sizeof(rs.conf0), "%s/cluster-0.conf", rs.dir);
    f = fopen(rs.conf0, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s%s/snap0%s", (int)(at - text), text, rs.dir, at + strlen(mine));
    fclose(f);
    zt_rset_up(&rs);
    static float expect[LEN];
    memset(expect, 0, sizeof(expect));
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    push_steps(c, 0, 20, expect);
    zeps_client_destroy(&c);
    stop_cleanly(&rs);

    start_both(&rs);
    zt_rset_wait(&rs, 0, "primary", 2, 2, WAIT_S); /* only replica 0 restored it */
    zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_wait(&rs, 1, "primary", 3, -1, WAIT_S);
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    expect_values(c, expect, "at the replica that restored nothing, after a failover");
    push_steps(c, 20, 5, expect);
    expect_values(c, expect, "trained on there");
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("wholeshard");
    TCase *tc = tcase_create("cluster");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sigterm_restart_elects);
    tcase_add_test(tc, test_sigterm_one_back_elects);
    tcase_add_test(tc, test_sigkill_restart_waits);
    tcase_add_test(tc, test_stale_record_not_honoured);
    tcase_add_test(tc, test_record_of_another_snapshot);
    tcase_add_test(tc, test_own_disks);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
