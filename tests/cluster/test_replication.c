/*
 * test_replication.c - a replicated shard's data (docs/replication.md),
 * with real zeps-server processes and a real ZooKeeper: one shard, two
 * replicas, a worker through libzeps.
 *
 *   - every push the primary acknowledged is in the backup: after SIGKILL
 *     of the primary at once after the last acknowledgement, the new
 *     primary holds the same bits (dense Adam and sparse Adagrad tables)
 *     and the same versions;
 *   - the killed replica started again catches up from the new primary's
 *     log, joins the in-sync set, and after a second SIGKILL (of the new
 *     primary) holds the same bits again;
 *   - a REPLICATE from a stranger on the backup's own socket, and a FOLLOW
 *     from someone who is not a member, are refused and change nothing.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bsp_ref.h"
#include "check_main.h"
#include "harness.h"
#include "rawreq.h"
#include "relay.h"
#include "scratch.h"
#include "wire.h"
#include "zeps.h"
#include "zeps_errors.h"
#include "replset.h"
#include "zkserver.h"

#define SESSION_MS 2000 /* a loaded machine may stall a JVM or a shard for a second */
#define LEN        1003
#define NIDS       64
#define DIM        8
#define STEPS      60
#define MAX_LAG_MS 500 /* under the session timeout: the lag bound acts first */

typedef zt_rset rset;

/* The cluster file: one shard of two replicas under `mode` (bsp: 2
 * workers, else 3), its log kept to `log_mb`, the cluster `name` in
 * ZooKeeper, `extra` lines inside cluster (lost_worker_timeout_s among
 * them, or 2 s). */
static void rset_write_session(rset *rs, const char *hosts, const char *mode, int log_mb,
                               const char *name, const char *extra, int session_ms)
{
    char lines[1200];
    snprintf(lines, sizeof(lines),
             "  workers = %d;\n  consistency = \"%s\";\n  hello_timeout_ms = 5000;\n%s"
             "  replication = { max_lag_ms = %d; log_mb = %d; };\n%s",
             strcmp(mode, "bsp") == 0 ? 2 : 3, mode,
             strstr(extra, "lost_worker_timeout_s") ? "" : "  lost_worker_timeout_s = 2;\n",
             MAX_LAG_MS, log_mb, extra);
    zt_rset_write(rs, "replication", hosts, name, session_ms, lines);
}

static void rset_write_as(rset *rs, const char *hosts, const char *mode, int log_mb)
{
    memset(rs, 0, sizeof(*rs));
    rset_write_session(rs, hosts, mode, log_mb, "r", "", SESSION_MS);
}

static void rset_write(rset *rs, const char *hosts)
{
    rset_write_as(rs, hosts, "async", 256);
}

/* A worker of rank `rank` through libzeps reaching replica r alone,
 * waiting request_timeout_ms for a reply (0: the default). */
static zeps_client *client_waiting(rset *rs, int r, uint32_t rank, int request_timeout_ms)
{
    char conf[400];
    snprintf(conf, sizeof(conf), "%s/client-%d.conf", rs->dir, r);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "cluster = { servers = [\"%s\"]; workers = 3; consistency = \"async\"; ", rs->ep[r]);
    if (request_timeout_ms > 0)
        fprintf(f, "request_timeout_ms = %d; ", request_timeout_ms);
    fprintf(f, "};\n");
    fclose(f);
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, conf, rank), 0);
    return c;
}

static zeps_client *client_of(rset *rs, int r, uint32_t rank)
{
    return client_waiting(rs, r, rank, 0);
}

static const zeps_table_spec dense = {.name = "w",
                                      .length = LEN,
                                      .optimizer = "adam",
                                      .lr = 0.01,
                                      .init = "normal",
                                      .init_scale = 0.5,
                                      .seed = 3};
static const zeps_sparse_spec sparse = {.name = "e",
                                        .dim = DIM,
                                        .optimizer = "adagrad",
                                        .lr = 0.05,
                                        .init = "normal",
                                        .init_scale = 0.1,
                                        .seed = 5};

/* plain sgd, whose one-pass kernel may use the received gradient as
 * scratch: larger than a ZeroMQ message kept inline */
#define SGD_LEN 3000
static const zeps_table_spec plain = {.name = "s",
                                      .length = SGD_LEN,
                                      .optimizer = "sgd",
                                      .lr = 0.1,
                                      .init = "normal",
                                      .init_scale = 0.5,
                                      .seed = 9};

typedef struct state {
    float w[LEN], e[NIDS * DIM], s[SGD_LEN];
} state;

/* Declare both tables, push `steps` steps of gradients that depend on what
 * was pulled, and read the state. */
static void train(zeps_client *c, int steps, state *out)
{
    uint32_t tw, te, ts;
    ck_assert_int_eq(zeps_declare(c, &dense, &tw), 0);
    ck_assert_int_eq(zeps_declare_sparse(c, &sparse, &te), 0);
    ck_assert_int_eq(zeps_declare(c, &plain, &ts), 0);
    uint64_t ids[NIDS];
    static float g[NIDS * DIM], gw[LEN], gs[SGD_LEN];
    for (int k = 0; k < steps; k++) {
        for (int i = 0; i < NIDS; i++)
            ids[i] = (uint64_t)((i * 7919 + k * 31) % 200) * 1000003ull;
        ck_assert_int_eq(zeps_pull(c, tw, out->w, 0, LEN, k), 0);
        ck_assert_int_eq(zeps_spull(c, te, ids, NIDS, out->e, k), 0);
        for (int i = 0; i < LEN; i++)
            gw[i] = 0.1f * out->w[i] + 0.01f * (float)((i + k) % 7);
        for (int i = 0; i < NIDS * DIM; i++)
            g[i] = out->e[i] - 0.01f * (float)(i % 5);
        ck_assert_int_eq(zeps_pull(c, ts, out->s, 0, SGD_LEN, k), 0);
        for (int i = 0; i < SGD_LEN; i++)
            gs[i] = out->s[i] - 0.02f * (float)(i % 11);
        ck_assert_int_eq(zeps_push(c, tw, gw, 0, LEN, k), 0);
        ck_assert_int_eq(zeps_spush(c, te, ids, NIDS, g, k), 0);
        ck_assert_int_eq(zeps_push(c, ts, gs, 0, SGD_LEN, k), 0);
    }
}

/* What the serving replica holds, read through client c (NULL: a new
 * client of replica r). */
static void read_state(rset *rs, int r, zeps_client *given, state *st)
{
    zeps_client *c = given ? given : client_of(rs, r, 1);
    uint32_t tw, te, ts;
    ck_assert_int_eq(zeps_declare(c, &dense, &tw), 0);
    ck_assert_int_eq(zeps_declare_sparse(c, &sparse, &te), 0);
    uint64_t ids[NIDS];
    for (int i = 0; i < NIDS; i++)
        ids[i] = (uint64_t)((i * 7919 + (STEPS - 1) * 31) % 200) * 1000003ull;
    ck_assert_int_eq(zeps_pull(c, tw, st->w, 0, LEN, 0), 0);
    ck_assert_int_eq(zeps_spull(c, te, ids, NIDS, st->e, 0), 0);
    ck_assert_int_eq(zeps_declare(c, &plain, &ts), 0);
    ck_assert_int_eq(zeps_pull(c, ts, st->s, 0, SGD_LEN, 0), 0);
    if (!given)
        zeps_client_destroy(&c);
}

/* Replica r's log: its last entry, lag and whole-state transfers (STATS). */
static void log_of(rset *rs, int r, uint64_t *lsn, uint64_t *lag, uint64_t *transfers)
{
    Zeps__Header *rep = zt_rset_stats(rs, r);
    ck_assert_ptr_nonnull(rep);
    *lsn = rep->stats->repl_lsn;
    *lag = rep->stats->repl_lag;
    *transfers = rep->stats->repl_transfers;
    zeps__header__free_unpacked(rep, NULL);
}

static void expect_same(const state *a, const state *b, const char *when);

/* SIGKILL of primary p at once after what *c saw acknowledged (*c is
 * destroyed: its BYE goes nowhere), the other replica primary at `epoch`:
 * a new worker reads there what *before holds; the seconds to the
 * election. */
static double failover_same(rset *rs, int p, uint64_t epoch, zeps_client **c, const state *before,
                            const char *when)
{
    static state after;
    zt_rset_kill(rs, p, SIGKILL);
    zeps_client_destroy(c);
    double took = zt_rset_wait(rs, 1 - p, "primary", epoch, 1, 15);
    read_state(rs, 1 - p, NULL, &after);
    expect_same(before, &after, when);
    return took;
}

static void expect_same(const state *a, const state *b, const char *when)
{
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(memcmp(&a->w[i], &b->w[i], sizeof(float)) == 0,
                      "%s: w[%d] is %.9g, the primary had %.9g", when, i, b->w[i], a->w[i]);
    for (int i = 0; i < SGD_LEN; i++)
        ck_assert_msg(memcmp(&a->s[i], &b->s[i], sizeof(float)) == 0,
                      "%s: s[%d] is %.9g, the primary had %.9g", when, i, b->s[i], a->s[i]);
    for (int i = 0; i < NIDS * DIM; i++)
        ck_assert_msg(memcmp(&a->e[i], &b->e[i], sizeof(float)) == 0,
                      "%s: e[%d] is %.9g, the primary had %.9g", when, i, b->e[i], a->e[i]);
}

START_TEST(test_nothing_acknowledged_is_lost)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts);
    zt_rset_up(&rs); /* the backup followed and caught up */

    /* train against the primary, read what it holds, and kill it at once
     * after the last acknowledgement */
    zeps_client *c = client_of(&rs, 0, 0);
    state before;
    train(c, STEPS, &before);
    read_state(&rs, 0, c, &before);
    double took = failover_same(&rs, 0, 2, &c, &before, "after the first failover");
    printf("replica 1 primary at epoch 2 %.3f s after the kill\n", took);

    /* back to two: the killed replica catches up from the log */
    zt_rset_start(&rs, 0);
    double back = zt_rset_wait(&rs, 1, "primary", 2, 2, 20);
    printf("replica 0 in sync again %.3f s after its start\n", back);
    c = client_of(&rs, 1, 2); /* rank 0 is held by the first, which died with its primary */
    train(c, 10, &before);
    read_state(&rs, 1, c, &before);
    failover_same(&rs, 1, 3, &c, &before, "after the second failover");

    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A backup that stops answering (SIGSTOP): the primary holds its
 * acknowledgements until max_lag_ms has passed, then drops it from the
 * in-sync set and acknowledges of itself (not when the worker, which waits
 * 20 s for a reply, sends again, nor when it is declared lost); SIGCONT: it catches up and is back
 * in the set. A REPLICATE sent to the backup's own socket by a stranger, and a FOLLOW from a
 * non-member, are refused. */
START_TEST(test_lagging_backup_and_strangers)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    memset(&rs, 0, sizeof(rs)); /* nothing else sends while the push waits */
    rset_write_session(&rs, zk.hosts, "async", 256, "r", "  lost_worker_timeout_s = 60;\n",
                       SESSION_MS);
    zt_rset_up(&rs);
    zeps_client *c = client_waiting(&rs, 0, 0, 20000);
    state st;
    train(c, 2, &st);

    uint32_t tw;
    ck_assert_int_eq(zeps_declare(c, &dense, &tw), 0);
    ck_assert_int_eq(kill(rs.pid[1], SIGSTOP), 0);
    double t0 = zt_now_s();
    ck_assert_int_eq(zeps_push(c, tw, st.w, 0, LEN, 2), 0);
    double held = zt_now_s() - t0;
    printf("a push with the backup stopped was acknowledged after %.3f s (max_lag_ms %d)\n", held,
           MAX_LAG_MS);
    ck_assert_msg(held >= MAX_LAG_MS / 1000.0 * 0.9, "acknowledged after %.3f s", held);
    /* released by the primary once the set shrank, not by the resend */
    ck_assert_msg(held < 10.0, "acknowledged only after %.3f s", held);
    zt_rset_wait(&rs, 0, "primary", 1, 1, 5);
    t0 = zt_now_s();
    ck_assert_int_eq(zeps_push(c, tw, st.w, 0, LEN, 3), 0); /* no backup to wait for */
    ck_assert_msg(zt_now_s() - t0 < MAX_LAG_MS / 1000.0 * 0.5, "%.3f s", zt_now_s() - t0);
    ck_assert_int_eq(kill(rs.pid[1], SIGCONT), 0);
    zt_rset_wait(&rs, 0, "primary", 1, 2, 10);

    /* a stranger's REPLICATE on the backup's socket: refused, not applied */
    void *s = zmq_socket(rs.zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, rs.ep[1]), 0);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__REPLICATE;
    h.req_id = 9;
    h.rank = 0xffffffffu;
    h.epoch = 1;
    h.lsn = 1000;
    zt_raw_expect_error(zt_raw_req(s, &h, NULL, 0), ZEPS_ENOTPRIMARY, "backup");
    /* a FOLLOW from a non-member at the primary */
    zmq_close(s);
    s = zmq_socket(rs.zctx, ZMQ_DEALER);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, rs.ep[0]), 0);
    h.op = ZEPS__OP__FOLLOW;
    h.replica = 1;
    h.member = "m-0000000000000000-0000000007";
    h.lsn = 0;
    zt_raw_expect_error(zt_raw_req(s, &h, NULL, 0), ZEPS_ERANK, "not a live member");
    h.epoch = 7;
    zt_raw_expect_error(zt_raw_req(s, &h, NULL, 0), ZEPS_ESTALE, "epoch 7");
    zmq_close(s);

    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A worker's raw request header (rank 1, a fixed incarnation). */
static Zeps__Header raw_header(Zeps__Op op, uint64_t seq)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = op;
    h.req_id = seq;
    h.seq = seq;
    h.rank = 1;
    h.incarnation = 4242;
    return h;
}

/* No split brain: the primary frozen (SIGSTOP) past its session, a backup
 * elected, the old one thawed: a push sent to it at once is not
 * acknowledged (no reply, or ENOTPRIMARY), and it ends a backup of the new
 * epoch, in sync again (its log had an entry the new primary never got:
 * it is sent the whole state), no longer reporting itself fenced. */
START_TEST(test_frozen_primary_acknowledges_nothing)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts);
    zt_rset_up(&rs);
    zeps_client *c = client_of(&rs, 0, 0);
    state st;
    train(c, 3, &st);
    void *s = zmq_socket(rs.zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, rs.ep[0]), 0);
    Zeps__Header h = raw_header(ZEPS__OP__HELLO, 1);
    Zeps__Header *rep = zt_raw_req(s, &h, NULL, 0);
    ck_assert_int_eq(rep->op, ZEPS__OP__HELLO);
    zeps__header__free_unpacked(rep, NULL);

    ck_assert_int_eq(kill(rs.pid[0], SIGSTOP), 0);
    double took = zt_rset_wait(&rs, 1, "primary", 2, 1, 10);
    printf("replica 1 primary at epoch 2 %.3f s after replica 0 froze\n", took);
    ck_assert_int_eq(kill(rs.pid[0], SIGCONT), 0);
    h = raw_header(ZEPS__OP__PUSH, 2);
    h.table = 0;
    h.count = LEN;
    h.clock = 3;
    rep = zt_raw_request(s, &h, st.w, sizeof(st.w));
    ck_assert_msg(rep == NULL || (rep->op == ZEPS__OP__ERROR && rep->error == ZEPS_ENOTPRIMARY),
                  "the deposed primary answered a push: op %d error %d", rep ? (int)rep->op : -1,
                  rep ? rep->error : 0);
    if (rep)
        zeps__header__free_unpacked(rep, NULL);
    zt_rset_wait(&rs, 0, "backup", 2, 2, 10); /* sent the whole state, in sync again */
    rep = zt_rset_stats(&rs, 0);              /* a backup now: no longer the fenced primary */
    ck_assert_msg(rep && !rep->stats->fenced, "replica 0, a backup of epoch 2, still fenced");
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(s);
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* ZooKeeper killed mid-run and started again: training goes on throughout
 * (the in-sync set cannot change, the backup still acknowledges), and a
 * failover after it loses nothing. */
START_TEST(test_zookeeper_down_and_back)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts);
    zt_rset_up(&rs);
    zeps_client *c = NULL; /* knows both replicas: a failover while ZooKeeper is away is not a
                              failure of this test (a loaded machine can expire a session) */
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    state before;
    train(c, 10, &before);
    zt_zk_stop(&zk, SIGKILL);
    double t0 = zt_now_s();
    train(c, 20, &before);
    printf("20 steps with ZooKeeper down: %.3f s\n", zt_now_s() - t0);
    ck_assert_int_eq(zt_zk_restart(&zk), 0);
    train(c, 10, &before);
    read_state(&rs, 0, c, &before);
    int p = zt_rset_primary(&rs); /* replica 0, unless a session expired on the way */
    uint64_t e = zt_rset_epoch(&rs, p);
    failover_same(&rs, p, e + 1, &c, &before, "after ZooKeeper's restart and a failover");
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A replica started after the log was trimmed (log_mb = 1) is sent the
 * whole state, the workers' clocks with it, then follows the log: in
 * sync, and a failover to it holds the same bits. */
START_TEST(test_state_transfer)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write_as(&rs, zk.hosts, "async", 1);
    zt_rset_start(&rs, 0);
    zt_rset_wait(&rs, 0, "primary", 1, 1, 20);
    zeps_client *c = client_of(&rs, 0, 0);
    state before;
    train(c, 300, &before); /* about 2 MB of log */
    ck_assert_int_eq(zeps_clock(c, 6), 0);
    double t0 = zt_now_s();
    zt_rset_start(&rs, 1);
    zt_rset_wait(&rs, 0, "primary", 1, 2, 30);
    printf("a new replica in sync after the whole state: %.3f s\n", zt_now_s() - t0);
    ck_assert_int_eq(zt_rset_worker_clock(&rs, 1, 0),
                     7); /* the worker's clock came with the state */
    train(c, 10, &before);
    read_state(&rs, 0, c, &before);
    uint64_t lsn[2], lag[2], xfers[2]; /* the primary's log end, and what the backup applied */
    for (int r = 0; r < 2; r++)
        log_of(&rs, r, &lsn[r], &lag[r], &xfers[r]);
    ck_assert_uint_eq(xfers[0], 1);
    ck_assert_uint_eq(xfers[1], 1);
    ck_assert(!zt_rset_transfer_dir_left(&rs, 0) && !zt_rset_transfer_dir_left(&rs, 1));
    ck_assert_uint_ge(lsn[0], 600);
    ck_assert_uint_le(lsn[1], lsn[0]);
    ck_assert_uint_le(lag[0], lsn[0] - lsn[1] + 4); /* acks in flight */
    failover_same(&rs, 0, 2, &c, &before, "after a state transfer and a failover");
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A whole state larger than the chunks in flight (16 MiB): 2M Adam
 * values (24 MiB with their state), so the transfer goes on only as the
 * backup acknowledges chunks; then a failover holds the same bits. */
START_TEST(test_large_state_transfer)
{
    enum { BIG = 2 << 20 };
    static const zeps_table_spec big = {.name = "big",
                                        .length = BIG,
                                        .optimizer = "adam",
                                        .lr = 0.01,
                                        .init = "normal",
                                        .init_scale = 0.5,
                                        .seed = 11};
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    memset(&rs, 0, sizeof(rs)); /* 6 s sessions: no failover but the planned one */
    rset_write_session(&rs, zk.hosts, "async", 1, "r", "", 6000);
    zt_rset_start(&rs, 0);
    zt_rset_wait(&rs, 0, "primary", 1, 1, 20);
    zeps_client *c = client_of(&rs, 0, 0);
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &big, &t), 0);
    float *g = malloc(BIG * sizeof(float)), *a = malloc(BIG * sizeof(float)),
          *b = malloc(BIG * sizeof(float));
    for (int i = 0; i < BIG; i++)
        g[i] = 0.001f * (float)(i % 97) - 0.03f;
    for (int k = 0; k < 3; k++) /* 8 MiB each: the log keeps one */
        ck_assert_int_eq(zeps_push(c, t, g, 0, BIG, k), 0);
    zt_rset_start(&rs, 1);
    zt_rset_wait(&rs, 0, "primary", 1, 2, 60);
    uint64_t lsn, lag, xfers;
    log_of(&rs, 1, &lsn, &lag, &xfers);
    ck_assert_uint_eq(xfers, 1);
    ck_assert_int_eq(zeps_push(c, t, g, 0, BIG, 3), 0);
    ck_assert_int_eq(zeps_pull(c, t, a, 0, BIG, 4), 0);
    zt_rset_kill(&rs, 0, SIGKILL);
    zeps_client_destroy(&c);
    zt_rset_wait(&rs, 1, "primary", 2, 1, 30);
    c = client_of(&rs, 1, 1);
    ck_assert_int_eq(zeps_declare(c, &big, &t), 0);
    ck_assert_int_eq(zeps_pull(c, t, b, 0, BIG, 4), 0);
    ck_assert_msg(memcmp(a, b, BIG * sizeof(float)) == 0, "the new primary's values differ");
    zeps_client_destroy(&c);
    free(g);
    free(a);
    free(b);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* bsp: the whole state is sent at a moment when no round holds pushes,
 * and the replica then follows the log: after a failover to it the table
 * equals the single-process reference bit for bit. */
START_TEST(test_state_transfer_bsp)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write_as(&rs, zk.hosts, "bsp", 1);
    zt_rset_start(&rs, 0);
    zt_rset_wait(&rs, 0, "primary", 1, 1, 20);
    zeps_client *cs[2];
    uint32_t t;
    for (uint32_t r = 0; r < 2; r++) {
        cs[r] = client_of(&rs, 0, r);
        ck_assert_int_eq(zeps_declare(cs[r], &zt_bsp_spec, &t), 0);
    }
    for (int64_t k = 0; k < 300; k++)
        ck_assert_int_eq(zt_bsp_step(cs, 2, t, k), 0);
    zt_rset_start(&rs, 1);
    for (int64_t k = 300; k < 310; k++) /* the transfer happens between rounds */
        ck_assert_int_eq(zt_bsp_step(cs, 2, t, k), 0);
    zt_rset_wait(&rs, 0, "primary", 1, 2, 30);
    for (int64_t k = 310; k < 320; k++)
        ck_assert_int_eq(zt_bsp_step(cs, 2, t, k), 0);
    for (int r = 0; r < 2; r++)
        zeps_client_destroy(&cs[r]);
    zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_wait(&rs, 1, "primary", 2, 1, 15);
    zeps_client *c = client_of(&rs, 1, 0);
    ck_assert_int_eq(zeps_declare(c, &zt_bsp_spec, &t), 0);
    static float w[ZT_BSP_LEN], ref[ZT_BSP_LEN];
    ck_assert_int_eq(zeps_pull(c, t, w, 0, ZT_BSP_LEN, 320), 0);
    zt_bsp_reference(2, 320, ref);
    for (int i = 0; i < ZT_BSP_LEN; i++)
        ck_assert_msg(memcmp(&w[i], &ref[i], sizeof(float)) == 0,
                      "w[%d] = %.9g after the failover, the reference %.9g", i, w[i], ref[i]);
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Snapshots of a replicated cluster: after a failover (the same client
 * carrying on at the new primary), `zepsctl snapshot take` reaches the
 * new primary; the whole shard then stopped and started again under a
 * fresh coordination name (docs/replication.md) restores that set on both
 * replicas, which follow one another from it: a new worker reads the same
 * bits. */
START_TEST(test_snapshot_restore)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs = {0};
    char extra[600];
    rset_write_session(&rs, zk.hosts, "async", 256, "s1", "", SESSION_MS); /* the folder */
    snprintf(extra, sizeof(extra), "  snapshot_dir = \"%s/snap\"; snapshot_on_exit = false;",
             rs.dir);
    rset_write_session(&rs, zk.hosts, "async", 256, "s1", extra, SESSION_MS);
    zt_rset_up(&rs);
    char conf[400];
    snprintf(conf, sizeof(conf), "%s", rs.conf);
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, conf, 0), 0); /* knows both replicas */
    state before, after;
    train(c, 20, &before);
    zt_rset_kill(&rs, 0, SIGKILL);
    train(c, 10, &before); /* follows the new primary */
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_ge(cs.redirects, 1);
    char cmd[1400], bin[512];
    snprintf(cmd, sizeof(cmd), "%s snapshot take --config %s --timeout 20 > %s/take.out 2>&1",
             zt_bin("zepsctl", bin, sizeof(bin)), conf, rs.dir);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl snapshot take: 0x%x", st);
    read_state(&rs, 1, c, &before);
    zeps_client_destroy(&c);
    zt_rset_kill(&rs, 1, SIGKILL);

    rset_write_session(&rs, zk.hosts, "async", 256, "s2", extra, SESSION_MS); /* new name */
    zt_rset_up(&rs);
    ck_assert_int_eq(zeps_client_new(&c, conf, 1), 0);
    read_state(&rs, 0, c, &after);
    expect_same(&before, &after, "after the whole shard restored the snapshot");
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Replica 0's cluster file reaching ZooKeeper through `port` (a relay). */
static void conf0_through(rset *rs, const char *hosts, int port)
{
    char text[4096], via[64];
    FILE *f = fopen(rs->conf, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    char *at = strstr(text, hosts);
    ck_assert_ptr_nonnull(at);
    snprintf(via, sizeof(via), "127.0.0.1:%d", port);
    snprintf(rs->conf0, sizeof(rs->conf0), "%s/cluster-0.conf", rs->dir);
    f = fopen(rs->conf0, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*s%s%s", (int)(at - text), text, via, at + strlen(hosts));
    fclose(f);
}

/* No split brain when the primary is cut off from ZooKeeper alone (its
 * connection goes through a relay, which is stopped): it stays up and
 * reachable, a backup is elected, the primary acknowledges no push after
 * that (a push sent to it gets no answer), and a worker carries on at the
 * new primary with every push it saw acknowledged applied there once. */
START_TEST(test_primary_cut_off_from_zookeeper)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_relay relay;
    int port = zt_relay_start(&relay, zk.port);
    rset rs;
    rset_write(&rs, zk.hosts);
    conf0_through(&rs, zk.hosts, port);
    zt_rset_up(&rs);
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    state st;
    train(c, 10, &st);
    void *s = zmq_socket(rs.zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, rs.ep[0]), 0);
    Zeps__Header h = raw_header(ZEPS__OP__HELLO, 1);
    Zeps__Header *rep = zt_raw_req(s, &h, NULL, 0);
    ck_assert_int_eq(rep->op, ZEPS__OP__HELLO);
    zeps__header__free_unpacked(rep, NULL);

    zt_relay_stop(&relay); /* replica 0 loses ZooKeeper, nothing else */
    double took = zt_rset_wait(&rs, 1, "primary", 2, 1, 10);
    printf("replica 1 primary at epoch 2 %.3f s after replica 0 lost ZooKeeper\n", took);
    h = raw_header(ZEPS__OP__PUSH, 2);
    h.count = LEN;
    h.clock = 10;
    rep = zt_raw_request(s, &h, st.w, sizeof(st.w));
    ck_assert_msg(rep == NULL || (rep->op == ZEPS__OP__ERROR && rep->error == ZEPS_ENOTPRIMARY),
                  "the primary cut off from ZooKeeper answered a push: op %d error %d",
                  rep ? (int)rep->op : -1, rep ? rep->error : 0);
    if (rep)
        zeps__header__free_unpacked(rep, NULL);
    zmq_close(s);
    train(c, 10, &st); /* at the new primary */
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    Zeps__Header *stats = zt_rset_stats(&rs, 1);
    ck_assert_ptr_nonnull(stats);
    uint64_t applied = 0;
    for (size_t i = 0; i < stats->stats->n_workers; i++)
        if (stats->stats->workers[i]->rank == 0)
            applied = stats->stats->workers[i]->pushes;
    zeps__header__free_unpacked(stats, NULL);
    ck_assert_msg(applied == cs.pushes_acked,
                  "the new primary applied %llu pushes of rank 0, "
                  "which saw %llu acknowledged",
                  (unsigned long long)applied, (unsigned long long)cs.pushes_acked);
    zeps_client_destroy(&c);
    for (int r = 0; r < 2; r++) {
        kill(rs.pid[r], SIGKILL);
        zt_wait(rs.pid[r], 15);
    }
    zmq_ctx_term(rs.zctx);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("replication");
    TCase *tc = tcase_create("replication");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_nothing_acknowledged_is_lost);
    tcase_add_test(tc, test_lagging_backup_and_strangers);
    tcase_add_test(tc, test_frozen_primary_acknowledges_nothing);
    tcase_add_test(tc, test_zookeeper_down_and_back);
    tcase_add_test(tc, test_state_transfer);
    tcase_add_test(tc, test_state_transfer_bsp);
    tcase_add_test(tc, test_large_state_transfer);
    tcase_add_test(tc, test_snapshot_restore);
    tcase_add_test(tc, test_primary_cut_off_from_zookeeper);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
