/*
 * test_bell.c - a co-located worker's requests on its attach connection
 * (docs/protocol.md, "Shared memory", "Headers on the attach connection"),
 * with real processes and unix sockets:
 *   - a worker's requests go there (the shard counts them per worker), a
 *     payload larger than the segment still goes (as a frame over ZeroMQ)
 *     and its pull's reply, too big for a packet, is asked for again over
 *     ZeroMQ, with the right values, and the requests after it go back to
 *     the connection;
 *   - malformed packets are answered EPROTO with what is wrong, and the
 *     same connection goes on serving;
 *   - a shard killed with a request outstanding there: the worker falls
 *     back to ZeroMQ, finishes it on the restarted shard and attaches anew;
 *   - with CURVE the payloads go through the segment but every header
 *     stays on the authenticated ZeroMQ socket.
 */
#define _GNU_SOURCE
#include <check.h>
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
#include "rawreq.h"
#include "scratch.h"
#include "shard.h"
#include "xport.h"
#include "zeps.h"
#include "zeps_errors.h"

#define AUTO "transport = \"auto\";\nshm_segment_mb = 1;\n"

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
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", AUTO, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_ge(zp_xport_shm_socket(&c->shards[0]), 0);
    zeps_table_spec small = {.name = "s", .length = 1000, .optimizer = "sgd", .lr = 1.0};
    zeps_table_spec big = {.name = "b", .length = 1 << 19, .optimizer = "sgd", .lr = 1.0};
    uint32_t ts, tb;
    ck_assert_int_eq(zeps_declare(c, &small, &ts), 0);
    ck_assert_int_eq(zeps_declare(c, &big, &tb), 0);
    float *g = malloc((1 << 19) * sizeof(float)), *w = malloc((1 << 19) * sizeof(float));
    for (int i = 0; i < 1 << 19; i++)
        g[i] = 1.0f;
    uint64_t before = bell_requests(c, 0, 0);
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(zeps_push(c, ts, g, 0, 1000, i), 0);
        ck_assert_int_eq(zeps_pull(c, ts, w, 0, 1000, i + 1), 0);
    }
    ck_assert_float_eq(w[999], -20.0f);
    /* the 40 requests, and the STATS that counted the first ones */
    ck_assert_uint_ge(bell_requests(c, 0, 0), before + 41);
    /* 2 MiB, twice the segment's area: the push as a frame on the DEALER; the
     * pull's reply does not fit a packet either: asked again over ZeroMQ */
    ck_assert_int_eq(zeps_push(c, tb, g, 0, 1 << 19, 0), 0);
    ck_assert_int_eq(zeps_pull(c, tb, w, 0, 1 << 19, 1), 0);
    ck_assert_float_eq(w[0], -1.0f);
    ck_assert_float_eq(w[(1 << 19) - 1], -1.0f);
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
    ck_assert_int_eq(
        zt_cluster_start(&cl, 1, 2, "async", AUTO "snapshot_dir = \"@DIR@/snap\";", NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    zeps_table_spec spec = {.name = "v", .length = 4096, .optimizer = "sgd", .lr = 1.0};
    uint32_t t;
    float g[4096], w[4096];
    for (int i = 0; i < 4096; i++)
        g[i] = 1.0f;
    ck_assert_int_eq(zeps_declare(c, &spec, &t), 0);
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
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", extra, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    zeps_table_spec spec = {.name = "v", .length = 1000, .optimizer = "sgd", .lr = 1.0};
    uint32_t t;
    float g[1000], w[1000];
    for (int i = 0; i < 1000; i++)
        g[i] = 1.0f;
    ck_assert_int_eq(zeps_declare(c, &spec, &t), 0);
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
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bell");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_requests_on_the_connection);
    tcase_add_test(tc, test_bad_packets);
    tcase_add_test(tc, test_shard_killed_mid_request);
    tcase_add_test(tc, test_curve_keeps_headers_on_zeromq);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
