/*
 * test_dedup.c - a duplicated or retried request is applied once.
 *
 * Two angles, both against a real zeps-server: a raw socket sends the same
 * (rank, incarnation, seq) PUSH twice; and a real client whose server is
 * frozen (SIGSTOP) past the request timeout resends its push, the server
 * wakes up to both copies, and applies one.
 */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "now.h"
#include "rawreq.h"
#include "wire.h"
#include "zeps.h"
#include "zeps.pb-c.h"

#define LEN 64

static Zeps__Header *roundtrip(void *sock, Zeps__Op op, uint64_t inc, uint64_t seq,
                               const float *vals)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = op;
    h.req_id = seq;
    h.rank = 1;
    h.incarnation = inc;
    h.seq = seq;
    h.count = vals ? LEN : 0;
    Zeps__Header *rep = zt_raw_req(sock, &h, vals, vals ? LEN * sizeof(float) : 0);
    ck_assert_msg(rep->op != ZEPS__OP__ERROR, "error: %s", rep->error_text);
    return rep;
}

static uint32_t push_flags(void *sock, uint64_t inc, uint64_t seq, const float *vals)
{
    Zeps__Header *rep = roundtrip(sock, ZEPS__OP__PUSH, inc, seq, vals);
    uint32_t f = rep->flags;
    zeps__header__free_unpacked(rep, NULL);
    return f;
}

static float value(zeps_client *c, uint32_t t)
{
    float v[LEN];
    ck_assert_int_eq(zeps_pull(c, t, v, 0, LEN, 0), 0);
    for (int i = 1; i < LEN; i++)
        ck_assert_float_eq(v[i], v[0]);
    return v[0];
}

static const zeps_table_spec spec = {.name = "d", .length = LEN, .optimizer = "sgd", .lr = 1.0};

/* A client of rank 0 with table "d" declared as *t: the harness's client
 * (opt NULL), or one made with opt (its timeouts, its faults). */
static zeps_client *declared(const zt_cluster *cl, zeps_options *opt, uint32_t *t)
{
    zeps_client *c;
    if (opt) {
        const char *eps[1] = {cl->endpoints[0]};
        ck_assert_int_eq(zeps_client_new_endpoints(&c, eps, 1, 0, opt), 0);
    } else {
        c = zt_client(cl, 0);
        ck_assert_ptr_nonnull(c);
    }
    ck_assert_int_eq(zeps_declare(c, &spec, t), 0);
    return c;
}

static void fill_ones(float *v)
{
    for (int i = 0; i < LEN; i++)
        v[i] = 1.0f;
}

/* A raw socket to shard 0 of cl that said HELLO as rank 1, incarnation inc. */
static void *raw_hello(void *zctx, const zt_cluster *cl, uint64_t inc)
{
    void *sock = zt_raw_socket(zctx, cl, 0);
    zeps__header__free_unpacked(roundtrip(sock, ZEPS__OP__HELLO, inc, 1, NULL), NULL);
    return sock;
}

START_TEST(test_raw_duplicate)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "async", NULL, NULL), 0);
    uint32_t t;
    zeps_client *c = declared(&cl, NULL, &t);
    void *zctx = zmq_ctx_new();
    const uint64_t inc = 0x1234;
    void *sock = raw_hello(zctx, &cl, inc);

    float ones[LEN];
    fill_ones(ones);
    ck_assert_uint_eq(push_flags(sock, inc, 5, ones), 0);
    ck_assert_float_eq(value(c, t), -1.0f);
    ck_assert_uint_eq(push_flags(sock, inc, 5, ones), ZP_FLAG_DUPLICATE);
    ck_assert_float_eq(value(c, t), -1.0f); /* not applied again */
    ck_assert_uint_eq(push_flags(sock, inc, 6, ones), 0);
    ck_assert_float_eq(value(c, t), -2.0f);
    ck_assert_uint_eq(push_flags(sock, inc, 5, ones), ZP_FLAG_DUPLICATE); /* late copy */
    /* 64 ahead of the highest seq sent is the largest step accepted
     * (test_bounds: one more is refused), so two steps pass the window */
    ck_assert_uint_eq(push_flags(sock, inc, 70, ones), 0);
    ck_assert_uint_eq(push_flags(sock, inc, 134, ones), 0);
    ck_assert_uint_eq(push_flags(sock, inc, 7, ones), ZP_FLAG_DUPLICATE); /* below the window */
    ck_assert_float_eq(value(c, t), -4.0f);
    /* a gap inside the window is a new request */
    ck_assert_uint_eq(push_flags(sock, inc, 130, ones), 0);
    ck_assert_uint_eq(push_flags(sock, inc, 130, ones), ZP_FLAG_DUPLICATE);
    ck_assert_float_eq(value(c, t), -5.0f);

    /* a new incarnation (a restarted worker) starts its numbers afresh; the
     * old one said BYE first (a live one holds its rank: test_lease) */
    zeps__header__free_unpacked(roundtrip(sock, ZEPS__OP__BYE, inc, 135, NULL), NULL);
    zeps__header__free_unpacked(roundtrip(sock, ZEPS__OP__HELLO, inc + 1, 1, NULL), NULL);
    ck_assert_uint_eq(push_flags(sock, inc + 1, 5, ones), 0);
    ck_assert_float_eq(value(c, t), -6.0f);

    zmq_close(sock);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* TUNE as a raw client: a resend of an older TUNE (its seq seen) is
 * answered DUPLICATE and not applied again, so the newer lr stays; a bad lr,
 * no spec or an unknown table are refused naming the cause, changing
 * nothing (the library refuses a bad lr before sending: only a raw
 * request reaches the shard's own check). */
static Zeps__Header *tune(void *sock, uint64_t inc, uint64_t seq, uint32_t table, double lr,
                          int with_spec)
{
    Zeps__Header h;
    zeps__header__init(&h);
    Zeps__TableSpec sp = ZEPS__TABLE_SPEC__INIT;
    sp.lr = lr;
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__TUNE;
    h.req_id = h.seq = seq;
    h.rank = 1;
    h.incarnation = inc;
    h.table = table;
    h.spec = with_spec ? &sp : NULL;
    return zt_raw_req(sock, &h, NULL, 0);
}

START_TEST(test_tune_resend_and_refusals)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "async", NULL, NULL), 0);
    uint32_t t;
    zeps_client *c = declared(&cl, NULL, &t);
    void *zctx = zmq_ctx_new();
    const uint64_t inc = 0x5678;
    void *sock = raw_hello(zctx, &cl, inc);
    float ones[LEN];
    fill_ones(ones);

    Zeps__Header *rep = tune(sock, inc, 5, 0, 0.5, 1);
    ck_assert_msg(rep->op != ZEPS__OP__ERROR && rep->flags == 0, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    rep = tune(sock, inc, 6, 0, 0.25, 1);
    ck_assert_msg(rep->op != ZEPS__OP__ERROR && rep->flags == 0, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    rep = tune(sock, inc, 5, 0, 0.5, 1); /* the first one again, late */
    ck_assert_uint_eq(rep->flags, ZP_FLAG_DUPLICATE);
    zeps__header__free_unpacked(rep, NULL);
    ck_assert_int_eq(zeps_push(c, t, ones, 0, LEN, 0), 0);
    ck_assert_float_eq(value(c, t), -0.25f); /* the newer lr, not the resent one */

    zt_raw_expect_error(tune(sock, inc, 7, 0, -1.0, 1), ZEPS_EOPTIM, "must be finite and > 0");
    zt_raw_expect_error(tune(sock, inc, 8, 0, 1.0, 0), ZEPS_EPROTO, "without a spec");
    zt_raw_expect_error(tune(sock, inc, 9, 99, 1.0, 1), ZEPS_ETABLE, "no table with id 99");
    ck_assert_int_eq(zeps_push(c, t, ones, 0, LEN, 0), 0);
    ck_assert_float_eq(value(c, t), -0.5f); /* still 0.25 */

    zmq_close(sock);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_client_retry_applied_once)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    zeps_options opt = {.request_timeout_ms = 200, .max_retries = 50};
    uint32_t t;
    zeps_client *c = declared(&cl, &opt, &t);
    float ones[LEN];
    fill_ones(ones);

    /* Freeze the server for 1.2 s: the push is resent about 5 times. */
    ck_assert_int_eq(kill(cl.pids[0], SIGSTOP), 0);
    pid_t waker = fork();
    if (waker == 0) {
        struct timespec ts = {1, 200000000};
        nanosleep(&ts, NULL);
        kill(cl.pids[0], SIGCONT);
        _exit(0);
    }
    ck_assert_int_eq(zeps_push(c, t, ones, 0, LEN, 0), 0);
    zt_wait(waker, 10);
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    ck_assert_msg(st.retries >= 2, "only %llu retries", (unsigned long long)st.retries);
    ck_assert_float_eq(value(c, t), -1.0f); /* applied exactly once */
    /* acknowledged once however often it was resent: the shard's applied
     * count below (test_chaos.sh compares the two) */
    ck_assert_uint_eq(st.pushes_acked, 1);

    Zeps__ShardStats *ss = zt_stats(c, 0);
    ck_assert_ptr_nonnull(ss);
    ck_assert_uint_eq(ss->n_workers, 1);
    ck_assert_uint_ge(ss->workers[0]->duplicates, 1);
    ck_assert_uint_eq(ss->workers[0]->pushes, 1);
    ck_assert_uint_eq(ss->tables[0]->version, 1);
    zeps__shard_stats__free_unpacked(ss, NULL);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* The client's first send of a push is lost (fault injection): the resend
 * after the timeout delivers it, once. Then a duplicate on purpose: both
 * sends of one push arrive (the first is "late"), applied once. */
START_TEST(test_first_send_dropped)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    /* a reply slower than the timeout (a loaded machine) adds a resend: the
     * counts below are lower bounds, "applied once" is exact */
    zeps_options opt = {.request_timeout_ms = 400, .max_retries = 20};
    uint32_t t;
    zeps_client *c = declared(&cl, &opt, &t);
    zeps_client_destroy(&c);
    opt.fault_drop_sends = 1;
    c = declared(&cl, &opt, &t); /* its first send is the one dropped */
    float ones[LEN];
    fill_ones(ones);
    ck_assert_int_eq(zeps_push(c, t, ones, 0, LEN, 0), 0);
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    ck_assert_uint_ge(st.retries, 1); /* the dropped DECLARE went out again */
    ck_assert_float_eq(value(c, t), -1.0f);
    zeps_client_destroy(&c);

    /* drop the push itself this time */
    opt.fault_drop_sends = 0;
    c = declared(&cl, &opt, &t);
    zeps_client_destroy(&c);
    opt.fault_drop_sends = 2; /* DECLARE and the push's first send */
    c = declared(&cl, &opt, &t);
    ck_assert_int_eq(zeps_push(c, t, ones, 0, LEN, 0), 0);
    zeps_client_get_stats(c, &st);
    ck_assert_uint_ge(st.retries, 2);
    ck_assert_float_eq(value(c, t), -2.0f); /* applied exactly once */
    Zeps__ShardStats *ss = zt_stats(c, 0);
    ck_assert_ptr_nonnull(ss);
    ck_assert_uint_eq(ss->tables[0]->version, 2);
    zeps__shard_stats__free_unpacked(ss, NULL);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* The same sparse PUSH sent twice (same rank, incarnation, seq): the
 * second is acknowledged DUPLICATE, and every row changed once (sgd, lr 1,
 * zeros: -g, version 1). */
START_TEST(test_sparse_duplicate)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_sparse_spec sp = {.name = "e", .dim = 2, .optimizer = "sgd", .lr = 1.0, .init = "zeros"};
    uint32_t t;
    ck_assert_int_eq(zeps_declare_sparse(c, &sp, &t), 0);
    void *zctx = zmq_ctx_new();
    const uint64_t inc = 0x5a5a;
    void *sock = raw_hello(zctx, &cl, inc);
    struct {
        uint64_t ids[3];
        float g[6];
    } msg = {{3, 7, 11}, {1, 2, 3, 4, 5, 6}};
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PUSH;
    h.rank = 1;
    h.incarnation = inc;
    h.seq = 2;
    h.table = t;
    h.count = 3;
    for (int k = 0; k < 2; k++) {
        h.req_id = 10 + k;
        Zeps__Header *rep = zt_raw_req(sock, &h, &msg, sizeof(msg));
        ck_assert_msg(rep->op == ZEPS__OP__PUSH, "%s", rep->error_text);
        ck_assert_uint_eq(rep->flags, k ? ZP_FLAG_DUPLICATE : 0);
        zeps__header__free_unpacked(rep, NULL);
    }
    float rows[6];
    ck_assert_int_eq(zeps_spull(c, t, msg.ids, 3, rows, 0), 0);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(rows[i] == -msg.g[i], "row value %d is %g, expected %g", i, rows[i],
                      -msg.g[i]);
    Zeps__ShardStats *ss = zt_stats(c, 0);
    ck_assert_ptr_nonnull(ss);
    ck_assert_uint_eq(ss->tables[0]->keys_pushed, 3);
    ck_assert_uint_eq(ss->tables[0]->rows, 3);
    zeps__shard_stats__free_unpacked(ss, NULL);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* A CLOCK resent after a later CLOCK was applied (its reply was lost) is a
 * duplicate: acknowledged with DUPLICATE, not refused as a clock going
 * backwards, and the clock stays where the later one put it. */
START_TEST(test_retried_clock)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    void *zctx = zmq_ctx_new();
    const uint64_t inc = 0xc10c;
    void *sock = raw_hello(zctx, &cl, inc);
    int64_t clocks[4] = {0, 1, 0, 1}; /* seq 2, 3, then both again */
    uint64_t seqs[4] = {2, 3, 2, 3};
    for (int k = 0; k < 4; k++) {
        Zeps__Header h;
        zeps__header__init(&h);
        h.version = ZP_PROTOCOL_VERSION;
        h.op = ZEPS__OP__CLOCK;
        h.req_id = seqs[k];
        h.rank = 1;
        h.incarnation = inc;
        h.seq = seqs[k];
        h.clock = clocks[k];
        Zeps__Header *rep = zt_raw_req(sock, &h, NULL, 0);
        ck_assert_msg(rep->op == ZEPS__OP__CLOCK, "CLOCK %lld (seq %llu): %s", (long long)clocks[k],
                      (unsigned long long)seqs[k], rep->error_text);
        ck_assert_uint_eq(rep->flags, k >= 2 ? ZP_FLAG_DUPLICATE : 0);
        zeps__header__free_unpacked(rep, NULL);
    }
    Zeps__ShardStats *ss = zt_stats(c, 0);
    ck_assert_ptr_nonnull(ss);
    const Zeps__WorkerStats *w = NULL;
    for (size_t i = 0; i < ss->n_workers; i++)
        if (ss->workers[i]->rank == 1)
            w = ss->workers[i];
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(w->clock, 2); /* finished clocks 0 and 1 */
    ck_assert_uint_eq(w->duplicates, 2);
    zeps__shard_stats__free_unpacked(ss, NULL);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* A server that never answers fails the request, bounded, and the client
 * gets the buffer back. */
START_TEST(test_dead_server_times_out)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    zeps_options opt = {.request_timeout_ms = 100, .max_retries = 3};
    uint32_t t;
    zeps_client *c = declared(&cl, &opt, &t);
    ck_assert_int_eq(kill(cl.pids[0], SIGSTOP), 0);
    float *ones = malloc(LEN * sizeof(float));
    fill_ones(ones);
    double t0 = zp_now_s();
    ck_assert_int_eq(zeps_push(c, t, ones, 0, LEN, 0), ZEPS_ETIMEDOUT);
    double took = zp_now_s() - t0;
    ck_assert_msg(took > 0.3 && took < 3.0, "gave up after %.2f s", took);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(c), "did not answer"));
    free(ones); /* zeps_wait returned: ZeroMQ no longer references it (ASan checks) */
    kill(cl.pids[0], SIGCONT);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dedup");
    TCase *tc = tcase_create("processes");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_raw_duplicate);
    tcase_add_test(tc, test_tune_resend_and_refusals);
    tcase_add_test(tc, test_sparse_duplicate);
    tcase_add_test(tc, test_retried_clock);
    tcase_add_test(tc, test_client_retry_applied_once);
    tcase_add_test(tc, test_dead_server_times_out);
    tcase_add_test(tc, test_first_send_dropped);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
