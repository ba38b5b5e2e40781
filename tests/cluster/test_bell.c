/*
 * test_bell.c - a co-located worker's requests on its attach connection
 * (docs/protocol.md, "Shared memory", "Headers on the attach connection"),
 * with real processes and unix sockets:
 *   - a worker's requests go there (the shard counts them per worker), a
 *     payload larger than the segment still goes (as a frame over ZeroMQ)
 *     and its pull's reply, too big for a packet, comes on the ROUTER,
 *     with the right values, and the requests after it go back to the
 *     connection;
 *   - such a pull followed at once by a push to the same rows reads the
 *     values from before the push (its reply is its own, not a second
 *     serving after the push);
 *   - replies that meet a full connection (the worker reads nothing for a
 *     while) come on the ROUTER at once, not at the worker's timeout;
 *   - a request that must go on the DEALER, sent while the shard's loop
 *     is stopped behind 150 packets, is applied after all of them;
 *   - malformed packets are answered EPROTO with what is wrong, and the
 *     same connection goes on serving;
 *   - a shard killed with a request outstanding there: the worker falls
 *     back to ZeroMQ, finishes it on the restarted shard and attaches anew;
 *   - with CURVE the payloads go through the segment but every header
 *     stays on the authenticated ZeroMQ socket.
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "bell.h"
#include "check_main.h"
#include "client.h"
#include "curve.h"
#include "harness.h"
#include "now.h"
#include "rawreq.h"
#include "scratch.h"
#include "shard.h"
#include "tables.h"
#include "xport.h"
#include "zeps.h"
#include "zeps_errors.h"

#define AUTO "transport = \"auto\";\nshm_segment_mb = 1;\n"
/* 2 MiB of floats: more than the segment's 1 MiB area, so a push of it goes
 * as a frame on the DEALER and its pull's reply does not fit a packet */
#define BIG (1 << 19)

/* n floats of value v; the caller frees them. */
static float *filled(size_t n, float v)
{
    float *p = malloc(n * sizeof(float));
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = v;
    return p;
}

/* A one-shard async cluster of `workers` workers with `extra` in its file,
 * worker 0's client (options opt; NULL: the harness's) and `spec`
 * declared as *t. */
static zeps_client *start_one(zt_cluster *cl, int workers, const char *extra, zeps_options *opt,
                              const zeps_table_spec *spec, uint32_t *t)
{
    ck_assert_int_eq(zt_cluster_start(cl, 1, workers, "async", extra, NULL), 0);
    zeps_client *c = opt ? zt_client_opts(cl, 0, opt) : zt_client(cl, 0);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(zeps_declare(c, spec, t), 0);
    return c;
}

/* start_one with a dense sgd table of BIG elements (lr 1) as *t. */
static zeps_client *start_big(zt_cluster *cl, uint32_t *t)
{
    zeps_table_spec big = {.name = "b", .length = BIG, .optimizer = "sgd", .lr = 1.0};
    return start_one(cl, 1, AUTO, NULL, &big, t);
}

/* Requests worker `rank` sent on its attach connection to shard k. */
static uint64_t bell_requests(zeps_client *c, int k, uint32_t rank)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    uint64_t n = 0;
    for (size_t i = 0; i < st->n_workers; i++)
        if (st->workers[i]->rank == rank)
            n = st->workers[i]->shm_requests;
    zeps__shard_stats__free_unpacked(st, NULL);
    return n;
}

START_TEST(test_requests_on_the_connection)
{
    zt_cluster cl;
    zeps_table_spec small = {.name = "s", .length = 1000, .optimizer = "sgd", .lr = 1.0};
    zeps_table_spec big = {.name = "b", .length = BIG, .optimizer = "sgd", .lr = 1.0};
    uint32_t ts, tb;
    zeps_client *c = start_one(&cl, 1, AUTO, NULL, &small, &ts);
    ck_assert_int_ge(zp_xport_shm_socket(&c->shards[0]), 0);
    ck_assert_int_eq(zeps_declare(c, &big, &tb), 0);
    float *g = filled(BIG, 1.0f), *w = filled(BIG, 0.0f);
    uint64_t before = bell_requests(c, 0, 0);
    /* the first request after the attach (the DECLARE of s) went on the DEALER,
     * so the shard has its route once answered; the next ones came here */
    ck_assert_uint_eq(before, 2);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(zeps_push(c, ts, g, 0, 1000, i), 0);
        ck_assert_int_eq(zeps_pull(c, ts, w, 0, 1000, i + 1), 0);
    }
    ck_assert_float_eq(w[999], -20.0f);
    /* the 40 requests, and the STATS that counted the first ones */
    ck_assert_uint_ge(bell_requests(c, 0, 0), before + 41);
    /* twice the segment's area: the push as a frame on the DEALER; the pull's
     * reply does not fit a packet either: it comes on the ROUTER */
    ck_assert_int_eq(zeps_push(c, tb, g, 0, BIG, 0), 0);
    ck_assert_int_eq(zeps_pull(c, tb, w, 0, BIG, 1), 0);
    ck_assert_float_eq(w[0], -1.0f);
    ck_assert_float_eq(w[BIG - 1], -1.0f);
    /* and the requests after them are on the connection again */
    before = bell_requests(c, 0, 0);
    ck_assert_int_eq(zeps_pull(c, ts, w, 0, 1000, 21), 0);
    ck_assert_uint_eq(bell_requests(c, 0, 0), before + 2);
    free(g);
    free(w);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* A pull whose reply does not fit a packet, then at once a push to the same
 * elements: the pull reads them as they were before the push. (Answered
 * RESEND, the pull was sent again on the DEALER and served after the push:
 * -2 instead of -1.) */
START_TEST(test_big_reply_is_the_first_serving)
{
    zt_cluster cl;
    uint32_t t;
    zeps_client *c = start_big(&cl, &t);
    float *g = filled(BIG, 1.0f), *w = filled(BIG, 0.0f);
    ck_assert_int_eq(zeps_push(c, t, g, 0, BIG, 0), 0);
    zeps_req *r[2];
    uint64_t before = bell_requests(c, 0, 0);
    ck_assert_int_eq(zeps_pull_start(c, t, w, 0, BIG, 1, &r[0]), 0);
    ck_assert_int_eq(zeps_push_start(c, t, g, 0, 1000, 1, &r[1]), 0);
    ck_assert_int_eq(zeps_wait_all(r, 2), 0);
    ck_assert_float_eq(w[0], -1.0f);
    ck_assert_float_eq(w[999], -1.0f);
    ck_assert_float_eq(w[BIG - 1], -1.0f);
    /* both went on the connection (and the STATS), the pull once */
    ck_assert_uint_eq(bell_requests(c, 0, 0), before + 3);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, 1000, 2), 0);
    ck_assert_float_eq(w[0], -2.0f);
    free(g);
    free(w);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

#define PULLS   40
#define PULL_N  15000 /* 60 KB: 16 fill the reply area, the rest go in packets */
#define PATIENT 5000  /* request_timeout_ms: nothing here may wait for it */

/* A worker that reads nothing while PULLS pulls are answered: its
 * connection fills (60 KB packets once its reply area is full), and the
 * replies that meet it full come on the ROUTER: every pull is answered well
 * within the worker's request timeout. (Dropped, they were resent at it.) */
START_TEST(test_full_connection)
{
    zt_cluster cl;
    zeps_table_spec spec = {.name = "v", .length = PULL_N, .optimizer = "sgd", .lr = 1.0};
    zeps_options opt = {.request_timeout_ms = PATIENT, .hello_timeout_ms = 10000};
    uint32_t t;
    zeps_client *c = start_one(&cl, 1, AUTO, &opt, &spec, &t);
    float *g = filled(PULL_N, 1.0f), *w = filled((size_t)PULLS * PULL_N, 0.0f);
    ck_assert_int_eq(zeps_push(c, t, g, 0, PULL_N, 0), 0);
    zeps_req *r[PULLS];
    for (int i = 0; i < PULLS; i++)
        ck_assert_int_eq(zeps_pull_start(c, t, w + (size_t)i * PULL_N, 0, PULL_N, 1, &r[i]), 0);
    usleep(300 * 1000); /* the shard answers them all meanwhile; nothing reads */
    double t0 = zp_now_s();
    ck_assert_int_eq(zeps_wait_all(r, PULLS), 0);
    double waited = zp_now_s() - t0;
    printf("full connection: %d pulls answered %.1f ms after the worker read again\n", PULLS,
           waited * 1e3);
    ck_assert_msg(waited < PATIENT / 5 / 1e3, "the pulls took %.0f ms", waited * 1e3);
    for (int i = 0; i < PULLS; i++)
        ck_assert_float_eq(w[(size_t)i * PULL_N + PULL_N - 1], -1.0f);
    free(g);
    free(w);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

#define TUNES 70        /* more than the 64 packets of one read */
#define BUSY  (1 << 24) /* a table whose initial values keep a loop busy */

/* A tool declares a table of BUSY normal values: its shard's loop makes
 * them while the test goes on (a tool's requests go over ZeroMQ). */
static void *declare_busy(void *arg)
{
    zeps_client *tool = arg;
    zeps_table_spec spec = {
        .name = "busy", .length = BUSY, .optimizer = "sgd", .lr = 1.0, .init = "normal"};
    uint32_t t;
    return (void *)(intptr_t)zeps_declare(tool, &spec, &t);
}

/* TUNEs of table t to lr 0.01 * i for i in (from, from + n], as worker c
 * sends them, as packets on its attach connection at once: the seqs it
 * would give them, req_ids it never waits for (their replies are
 * dropped). */
static void tunes_sent(zeps_client *c, uint32_t t, int from, int n)
{
    zp_shard *sh = &c->shards[0];
    zp_table *ti = zp_tables_get(c, t);
    Zeps__TableSpec spec = ZEPS__TABLE_SPEC__INIT;
    spec.name = ti->name;
    Zeps__Header h = ZEPS__HEADER__INIT;
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__TUNE;
    h.rank = c->rank;
    h.incarnation = c->incarnation;
    h.table = ti->ids[0];
    h.spec = &spec;
    for (int i = from + 1; i <= from + n; i++) {
        spec.lr = 0.01 * i;
        h.seq = ++sh->next_seq;
        h.req_id = (1ull << 48) + h.seq;
        ck_assert_int_eq(zp_bell_send(zp_xport_shm_socket(sh), &h, 0, NULL, 0), 0);
    }
}

/* While the shard's loop is busy (a tool's DECLARE over ZeroMQ: busy once
 * a TUNE of worker 0 goes unanswered for 50 ms), worker 0 sends TUNES more
 * learning rates as packets on its attach connection, then a push too big
 * for its segment, on the DEALER: once free, the loop reads that push
 * next from the ROUTER and applies it after every TUNE, so with the last
 * one's lr. (Reading 64 packets before a ZeroMQ message, it was applied
 * with the 64th's.) */
START_TEST(test_dealer_after_queued_packets)
{
    zt_cluster cl;
    uint32_t t;
    zeps_client *c = start_big(&cl, &t);
    float *hundred = filled(BIG, 100.0f), *w = filled(BIG, 0.0f);
    uint64_t before = bell_requests(c, 0, 0);
    zeps_options opt = {.request_timeout_ms = PATIENT, .hello_timeout_ms = 10000};
    zeps_client *tool = zt_client_opts(&cl, ZEPS_RANK_TOOL, &opt);
    ck_assert_ptr_nonnull(tool);
    pthread_t busy;
    ck_assert_int_eq(pthread_create(&busy, NULL, declare_busy, tool), 0);
    int patient = c->opt.request_timeout_ms, retries = c->opt.max_retries;
    c->opt.request_timeout_ms = 50; /* a free loop answers sooner */
    c->opt.max_retries = 0;         /* given up on, unanswered, without a resend */
    int sent = 0;
    double t0 = zp_now_s();
    while (zeps_set_lr(c, t, 0.01 * ++sent) == 0)
        ck_assert_msg(zp_now_s() - t0 < 10, "the DECLARE never kept the loop busy");
    c->opt.request_timeout_ms = patient;
    c->opt.max_retries = retries;
    tunes_sent(c, t, sent, TUNES);
    sent += TUNES;
    zeps_req *r;
    ck_assert_int_eq(zeps_push_start(c, t, hundred, 0, BIG, 0, &r), 0);
    void *declared;
    ck_assert_int_eq(pthread_join(busy, &declared), 0);
    ck_assert_ptr_null(declared);
    ck_assert_int_eq(zeps_wait(&r), 0);
    /* the STATS, and the TUNEs: packets */
    ck_assert_uint_eq(bell_requests(c, 0, 0), before + 1 + (uint64_t)sent);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, BIG, 1), 0);
    ck_assert_float_eq_tol(w[0], -100.0f * 0.01f * (float)sent, 1e-3);
    ck_assert_float_eq_tol(w[BIG - 1], -100.0f * 0.01f * (float)sent, 1e-3);
    free(hundred);
    free(w);
    zeps_client_destroy(&tool);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* The next packet on fd as a reply header (2 s at most: the attach's
 * receive timeout). */
static Zeps__Header *bell_reply(int fd)
{
    static uint8_t buf[ZP_BELL_MAX];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ck_assert_int_gt(n, 0);
    zp_frames m = {.n = 0};
    int kind;
    uint64_t rid;
    char err[256];
    ck_assert_int_eq(zp_bell_parse(buf, (size_t)n, 0, &m, &kind, &rid, err, sizeof(err)), 0);
    ck_assert_int_eq(kind, ZP_BELL_MESSAGE);
    Zeps__Header *h = zp_wire_unpack_header(&m.f[0]);
    ck_assert_ptr_nonnull(h);
    zp_wire_frames_close(&m);
    return h;
}

/* Send n bytes at p as one packet on fd; its ERROR reply must say `needle`. */
static void expect_refused(int fd, const void *p, size_t n, const char *needle)
{
    ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
    zt_raw_expect_error(bell_reply(fd), ZEPS_EPROTO, needle);
}

START_TEST(test_bad_packets)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", AUTO, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    int fd = zp_xport_shm_socket(&c->shards[0]);
    ck_assert_int_ge(fd, 0);
    uint32_t pre[4] = {ZP_BELL_MAGIC, 1u | (1u << 16), 4, 0}; /* MESSAGE, 1 frame, 4 bytes */
    expect_refused(fd, "abc", 3, "shorter than its 12-byte prelude");
    uint32_t magic[4] = {0x12345678, 1u | (1u << 16), 4, 0};
    expect_refused(fd, magic, sizeof(magic), "not the magic");
    uint32_t over[4] = {ZP_BELL_MAGIC, 1u | (1u << 16), 100, 0};
    expect_refused(fd, over, sizeof(over), "names a 100-byte header in the 4 bytes");
    uint32_t trail[4] = {ZP_BELL_MAGIC, 1u | (1u << 16), 2, 0}; /* 2 bytes left over */
    expect_refused(fd, trail, sizeof(trail),
                   "names a 2-byte header in the 4 bytes after its "
                   "prelude (1 frames)");
    uint32_t over2[4] = {ZP_BELL_MAGIC, 1u | (2u << 16), 100, 0}; /* with a payload */
    expect_refused(fd, over2, sizeof(over2),
                   "names a 100-byte header in the 4 bytes after its "
                   "prelude (2 frames)");
    uint32_t frames[4] = {ZP_BELL_MAGIC, 1u | (3u << 16), 4, 0};
    expect_refused(fd, frames, sizeof(frames), "with 3 frames");
    uint32_t resend[5] = {ZP_BELL_MAGIC, 2, 0, 1, 0};
    expect_refused(fd, resend, sizeof(resend), "shard's to send");
    pre[3] = 0xffffffffu; /* 4 bytes that are no zeps.Header */
    expect_refused(fd, pre, sizeof(pre), "is not a valid zeps.Header");
    size_t huge = ZP_BELL_MAX + 4096;
    uint8_t *big = calloc(1, huge);
    memcpy(big, pre, 12);
    expect_refused(fd, big, huge, "longer than 65536 bytes");
    free(big);
    /* the connection still serves: a STATS on it, and the client's own */
    Zeps__Header h = ZEPS__HEADER__INIT;
    h.version = 1;
    h.op = ZEPS__OP__STATS;
    h.req_id = 77;
    h.rank = 0xffffffffu;
    ck_assert_int_eq(zp_bell_send(fd, &h, 0, NULL, 0), 0);
    Zeps__Header *rep = bell_reply(fd);
    ck_assert_int_eq(rep->op, ZEPS__OP__STATS);
    ck_assert_uint_eq(rep->req_id, 77);
    zeps__header__free_unpacked(rep, NULL);
    zeps_table_spec spec = {.name = "v", .length = 16, .optimizer = "sgd", .lr = 1.0};
    uint32_t t;
    uint64_t before = bell_requests(c, 0, 0);
    ck_assert_int_eq(zeps_declare(c, &spec, &t), 0);
    ck_assert_uint_ge(bell_requests(c, 0, 0), before + 2); /* the DECLARE and this STATS */
    ck_assert_int_eq(zt_log_has(&cl, 0, "detached"), 0);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_shard_killed_mid_request)
{
    zt_cluster cl;
    zeps_table_spec spec = {.name = "v", .length = 4096, .optimizer = "sgd", .lr = 1.0};
    uint32_t t;
    zeps_client *c = start_one(&cl, 2, AUTO "snapshot_dir = \"@DIR@/snap\";", NULL, &spec, &t);
    float *g = filled(4096, 1.0f), w[4096];
    ck_assert_int_eq(zeps_push(c, t, g, 0, 4096, 0), 0);
    ck_assert_uint_ge(bell_requests(c, 0, 0), 2);
    zeps_client *tool = zt_client(&cl, ZEPS_RANK_TOOL);
    ck_assert_ptr_nonnull(tool);
    ck_assert_int_eq(zeps_snapshot_request(tool, -1, 100), 0); /* so the new shard knows us */
    ck_assert(zt_wait_log(&cl, 0, "snapshot set 0000000000000064 (on request, clock -1) written"));
    zeps_client_destroy(&tool);
    /* the shard stopped dead, a push on the connection, then killed */
    kill(cl.pids[0], SIGSTOP);
    zeps_req *r;
    ck_assert_int_eq(zeps_push_start(c, t, g, 0, 4096, 1, &r), 0);
    zt_server_kill(&cl, 0, SIGKILL);
    ck_assert_int_eq(zt_server_start(&cl, 0), 0);
    ck_assert_int_eq(zeps_wait(&r), 0); /* resent over ZeroMQ; ERESTARTED, HELLO, resent */
    ck_assert_int_eq(zeps_pull(c, t, w, 0, 4096, 2), 0);
    ck_assert_float_eq(w[0], -2.0f); /* the snapshot's push, and the one outstanding */
    ck_assert(zt_wait_log(&cl, 0, "attached segment"));
    ck_assert_uint_ge(bell_requests(c, 0, 0), 1); /* the new shard's connection carries them */
    free(g);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_curve_keeps_headers_on_zeromq)
{
    char dir[256], keys[300], err[512], extra[2048];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "bell-curve"), 0);
    snprintf(keys, sizeof(keys), "%s/keys", dir);
    ck_assert_int_eq(mkdir(keys, 0700), 0);
    ck_assert_msg(zp_curve_keygen(keys, "server", NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(zp_curve_keygen(keys, "w0", NULL, err, sizeof(err)) == 0, "%s", err);
    snprintf(extra, sizeof(extra),
             AUTO "curve_server_secret = \"%s/server.key\";\n"
                  "curve_server_public = \"%s/server.pub\";\n"
                  "curve_allow_dir = \"%s\";\n"
                  "curve_client_secret = \"%s/w0.key\";\n"
                  "curve_client_public = \"%s/w0.pub\";\n",
             keys, keys, keys, keys, keys);
    zt_cluster cl;
    zeps_table_spec spec = {.name = "v", .length = 1000, .optimizer = "sgd", .lr = 1.0};
    uint32_t t;
    zeps_client *c = start_one(&cl, 1, extra, NULL, &spec, &t);
    float *g = filled(1000, 1.0f), w[1000];
    ck_assert_int_eq(zeps_push(c, t, g, 0, 1000, 0), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, 1000, 1), 0);
    ck_assert_float_eq(w[999], -1.0f);
    ck_assert(zt_wait_log(&cl, 0, "worker 0 attached segment"));
    Zeps__ShardStats *st = zt_stats(c, 0);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(st->n_workers, 1);
    ck_assert_str_eq(st->workers[0]->transport, "shm"); /* the payloads: in the segment */
    ck_assert_uint_eq(st->workers[0]->shm_requests, 0); /* the headers: none on the connection */
    zeps__shard_stats__free_unpacked(st, NULL);
    free(g);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"core",
         120,
         {test_requests_on_the_connection, test_big_reply_is_the_first_serving,
          test_full_connection, test_dealer_after_queued_packets, test_bad_packets,
          test_shard_killed_mid_request, test_curve_keeps_headers_on_zeromq}},
    };
    return zt_run_cases("bell", cases, sizeof(cases) / sizeof(cases[0]));
}
