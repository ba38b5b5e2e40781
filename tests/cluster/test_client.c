/*
 * test_client.c - the client library against real servers: ranges sliced
 * over shards, requests in flight together, zero-copy views, versions, a
 * push that finishes a clock sending CLOCK to the shards it does not reach;
 * a client refused (no ZeroMQ context, bad CURVE keys) leaking nothing; a
 * client's BYE bounded when a shard does not answer; a table's declared
 * weight decay applied on every shard; a declaration by init segments.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "now.h"
#include "zeps.h"

/* The binary wraps zmq_ctx_new (CMakeLists.txt): refuse_ctx makes it fail.
 * The real one is found by dlsym: ld left __real_zmq_ctx_new unresolved
 * in the ASan and mutation trees. */
static int refuse_ctx;
void *__wrap_zmq_ctx_new(void);
void *__wrap_zmq_ctx_new(void)
{
    if (refuse_ctx)
        return NULL;
    void *(*real)(void) = (void *(*)(void))dlsym(RTLD_NEXT, "zmq_ctx_new");
    return real ? real() : NULL;
}

#define N 1001

static zt_cluster cl;
static zeps_client *c;

static void setup(void)
{
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", NULL, NULL), 0);
    c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
}

static void teardown(void)
{
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

static uint32_t declare(const char *name, uint64_t len)
{
    zeps_table_spec sp = {.name = name, .length = len, .optimizer = "sgd", .lr = 1.0,
                          .init = "uniform", .init_scale = 1.0, .seed = 3};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    ck_assert_uint_eq(zeps_table_length(c, t), len);
    return t;
}

/* Any sub-range pulls the same values whichever shards it spans. A first
 * incarnation's client is no rejoin: no shard knew its rank before. */
START_TEST(test_ranges_over_shards)
{
    ck_assert(!zeps_rejoined(c));
    uint32_t t = declare("r", N);
    float *all = malloc(N * sizeof(float)), *part = malloc(N * sizeof(float));
    ck_assert_int_eq(zeps_pull(c, t, all, 0, N, 0), 0);
    const uint64_t cuts[][2] = {{0, 1}, {332, 2}, {333, 334}, {500, 501}, {1000, 1}, {10, 900}};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        uint64_t off = cuts[i][0], cnt = cuts[i][1];
        memset(part, 0, N * sizeof(float));
        ck_assert_int_eq(zeps_pull(c, t, part, off, cnt, 0), 0);
        ck_assert(memcmp(part, all + off, cnt * sizeof(float)) == 0);
    }
    /* a push to a range spanning two shards changes exactly that range */
    float g[10];
    for (int i = 0; i < 10; i++)
        g[i] = 1.0f;
    ck_assert_int_eq(zeps_push(c, t, g, 330, 10, 0), 0);
    ck_assert_int_eq(zeps_pull(c, t, part, 0, N, 0), 0);
    for (int i = 0; i < N; i++) {
        float want = (i >= 330 && i < 340) ? all[i] - 1.0f : all[i];
        ck_assert_float_eq(part[i], want);
    }
    ck_assert_uint_eq(zeps_pulled_version(c, t, 0), 1); /* shard 0 has [0, 333) */
    ck_assert_uint_eq(zeps_pulled_version(c, t, 1), 1);
    ck_assert_uint_eq(zeps_pulled_version(c, t, 2), 0);
    free(all);
    free(part);
}
END_TEST

START_TEST(test_view)
{
    uint32_t t = declare("v", N);
    float *all = malloc(N * sizeof(float));
    ck_assert_int_eq(zeps_pull(c, t, all, 0, N, 0), 0);
    zeps_req *r;
    ck_assert_int_eq(zeps_pull_view_start(c, t, 100, 800, 0, &r), 0);
    zeps_view *v = NULL;
    ck_assert_int_eq(zeps_wait_view(&r, &v), 0);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(zeps_view_parts(v), 3);
    uint64_t next = 100;
    for (int i = 0; i < zeps_view_parts(v); i++) {
        uint64_t off, cnt;
        const float *d = zeps_view_part(v, i, &off, &cnt);
        ck_assert_uint_eq(off, next);
        ck_assert_uint_eq((uintptr_t)d % 4, 0);
        ck_assert(memcmp(d, all + off, cnt * sizeof(float)) == 0);
        next = off + cnt;
    }
    ck_assert_uint_eq(next, 900);
    ck_assert_ptr_null(zeps_view_part(v, 3, NULL, NULL));
    zeps_view_release(&v);
    ck_assert_ptr_null(v);
    zeps_view_release(&v); /* NULL is fine */

    /* a small view (frames inside ZeroMQ's receive buffer) is aligned too */
    ck_assert_int_eq(zeps_pull_view_start(c, t, 333, 1, 0, &r), 0);
    ck_assert_int_eq(zeps_wait_view(&r, &v), 0);
    uint64_t cnt;
    const float *d = zeps_view_part(v, 0, NULL, &cnt);
    ck_assert_uint_eq(cnt, 1);
    ck_assert_uint_eq((uintptr_t)d % 4, 0);
    ck_assert_float_eq(d[0], all[333]);
    zeps_view_release(&v);

    /* a copying pull is not a view; a view may still be waited on plainly */
    ck_assert_int_eq(zeps_pull_start(c, t, all, 0, 10, 0, &r), 0);
    ck_assert_int_eq(zeps_wait_view(&r, &v), ZEPS_EINVAL);
    ck_assert_ptr_null(v);
    ck_assert_int_eq(zeps_pull_view_start(c, t, 0, N, 0, &r), 0);
    ck_assert_int_eq(zeps_wait(&r), 0);
    /* errors come back through the view call too */
    ck_assert_int_eq(zeps_pull_view_start(c, t, N, 1, 0, &r), ZEPS_ERANGE);
    free(all);
}
END_TEST

/* A view refers to no client: read and released after its client is
 * destroyed (the Python binding's arrays may outlive Client.close()). */
START_TEST(test_view_outlives_client)
{
    uint32_t t = declare("vo", N);
    float *all = malloc(N * sizeof(float));
    ck_assert_int_eq(zeps_pull(c, t, all, 0, N, 0), 0);
    zeps_req *r;
    zeps_view *v = NULL;
    ck_assert_int_eq(zeps_pull_view_start(c, t, 0, N, 0, &r), 0);
    ck_assert_int_eq(zeps_wait_view(&r, &v), 0);
    zeps_client_destroy(&c);
    for (int i = 0; i < zeps_view_parts(v); i++) {
        uint64_t off, cnt;
        const float *d = zeps_view_part(v, i, &off, &cnt);
        ck_assert(memcmp(d, all + off, cnt * sizeof(float)) == 0);
    }
    zeps_view_release(&v);
    free(all);
}
END_TEST

/* Several tables' pulls and pushes in flight at once, waited in any order;
 * zeps_wait_all takes the n handles given and no more. */
START_TEST(test_in_flight_together)
{
    enum { T = 5 };
    uint32_t ids[T];
    float *w[T], *g[T];
    zeps_req *pr[T], *ur[T];
    for (int i = 0; i < T; i++) {
        char name[8] = {'t', (char)('0' + i), 0};
        ids[i] = declare(name, 3000);
        w[i] = calloc(3000, sizeof(float));
        g[i] = malloc(3000 * sizeof(float));
        for (int k = 0; k < 3000; k++)
            g[i][k] = (float)(i + 1);
    }
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(zeps_push_start(c, ids[i], g[i], 0, 3000, 0, &ur[i]), 0);
    for (int i = 0; i < T; i++)
        ck_assert_int_eq(zeps_pull_start(c, ids[i], w[i], 0, 3000, 1, &pr[i]), 0);
    /* zeps_wait_all takes reqs[0..n) only: the one past them stays the caller's */
    ck_assert_int_eq(zeps_wait_all(ur, T - 1), 0);
    for (int i = 0; i < T - 1; i++)
        ck_assert_ptr_null(ur[i]);
    ck_assert_ptr_nonnull(ur[T - 1]);
    ck_assert_int_eq(zeps_wait_all(ur, T - 1), 0); /* NULL handles are passed over */
    for (int i = T - 1; i >= 0; i--) { /* out of order */
        ck_assert_int_eq(zeps_wait(&pr[i]), 0);
        if (i == T - 1)
            ck_assert_int_eq(zeps_wait(&ur[i]), 0);
    }
    float init[3000];
    for (int i = 0; i < T; i++) {
        /* the pull was sent after the push on each shard's socket: it sees it */
        zeps_pull(c, ids[i], init, 0, 3000, 1);
        for (int k = 0; k < 3000; k++)
            ck_assert_float_eq(w[i][k], init[k]);
        free(w[i]);
        free(g[i]);
    }
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    ck_assert_uint_eq(st.retries, 0);
    ck_assert_uint_ge(st.requests, 3 * T * 2);
}
END_TEST

/* The gradient of the top-k pushes, what top-k (1 per shard) sends of it
 * first, and a zero gradient that sends what error feedback kept back. */
static const float topk_g[9] = {1, 5, 2, /**/ -7, 3, 1, /**/ 0.5f, 0.25f, 4};
static const float topk_sent1[9] = {0, 5, 0, -7, 0, 0, 0, 0, 4};
static const float topk_zero[9] = {0};

/* topk keeps the largest element per shard; with error feedback what it
 * left out arrives later; the servers count wire and raw bytes. */
static void check_topk_push(void)
{
    const float *g = topk_g, *sent1 = topk_sent1, *zero = topk_zero;
    uint32_t t = declare("c", 9); /* 3 elements per shard */
    float w0[9], w[9];
    ck_assert_int_eq(zeps_pull(c, t, w0, 0, 9, 0), 0);
    zeps_codec_opts o = {.codec = "topk", .count = 1, .error_feedback = 1};
    ck_assert_int_eq(zeps_set_push_codec(c, t, &o), 0);
    ck_assert_int_eq(zeps_push(c, t, g, 0, 9, 0), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, 9, 0), 0);
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(w[i], w0[i] - sent1[i]); /* sgd, lr 1 */
    ck_assert_int_eq(zeps_push(c, t, zero, 0, 9, 1), 0); /* the residual's largest now */
    ck_assert_int_eq(zeps_pull(c, t, w, 0, 9, 0), 0);
    const float sent2[9] = {0, 5, 2, -7, 3, 0, 0.5f, 0, 4};
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(w[i], w0[i] - sent2[i]);
    Zeps__ShardStats *st = zt_stats(c, 0);
    ck_assert_ptr_nonnull(st);
    Zeps__TableStats *ts = NULL;
    for (size_t i = 0; i < st->n_tables; i++)
        if (strcmp(st->tables[i]->name, "c") == 0)
            ts = st->tables[i];
    ck_assert_ptr_nonnull(ts);
    ck_assert_uint_eq(ts->push_bytes_raw, 2 * 3 * sizeof(float));
    ck_assert_uint_lt(ts->push_bytes_wire, 2 * 3 * sizeof(float) + 1); /* 12 B each: k, idx, val */
    zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_lt(cs.bytes_out, cs.bytes_out_raw + 1);
}

/* int8 within its error bound, without error feedback; returns the table. */
static uint32_t check_int8_push(void)
{
    zeps_client_stats cs;
    Zeps__ShardStats *st;
    Zeps__TableStats *ts;
    uint32_t t2 = declare("q", 1000);
    float *v0 = malloc(1000 * sizeof(float)), *v = malloc(1000 * sizeof(float));
    float *gg = malloc(1000 * sizeof(float));
    ck_assert_int_eq(zeps_pull(c, t2, v0, 0, 1000, 0), 0);
    zeps_codec_opts q = {.codec = "int8", .block = 100};
    ck_assert_int_eq(zeps_set_push_codec(c, t2, &q), 0);
    for (int i = 0; i < 1000; i++)
        gg[i] = (float)((i * 37) % 101 - 50) / 50.0f;
    ck_assert_int_eq(zeps_push(c, t2, gg, 0, 1000, 0), 0);
    ck_assert_int_eq(zeps_pull(c, t2, v, 0, 1000, 0), 0);
    for (int i = 0; i < 1000; i++)
        ck_assert_float_eq_tol(v0[i] - v[i], gg[i], 1.0f / 127.0f + 1e-6f);
    /* here compression is visible in bytes (top-k of 3 elements above is
     * as large as raw): shard 0's 333 values arrived as
     * [u32 block][4 scales][333 x i8] = 353 bytes instead of 1332 */
    st = zt_stats(c, 0);
    ck_assert_ptr_nonnull(st);
    ts = NULL;
    for (size_t i = 0; i < st->n_tables; i++)
        if (strcmp(st->tables[i]->name, "q") == 0)
            ts = st->tables[i];
    ck_assert_ptr_nonnull(ts);
    ck_assert_uint_eq(ts->push_bytes_raw, 333 * sizeof(float));
    ck_assert_uint_eq(ts->push_bytes_wire, 4 + 4 * 4 + 333);
    zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_lt(cs.bytes_out * 2, cs.bytes_out_raw);
    free(v0);
    free(v);
    free(gg);
    return t2;
}

/* top-k into a momentum table; then an unknown codec on table t2. */
static void check_momentum_push(uint32_t t2)
{
    const float *g = topk_g, *sent1 = topk_sent1, *zero = topk_zero;
    float w0[9], w[9];
    /* momentum cannot take a top-k payload as it is: decoded into the
     * table's scratch, zeros where nothing was sent (v = 0.5 v + g) */
    zeps_table_spec ms = {.name = "mom",
                          .length = 9,
                          .optimizer = "momentum",
                          .lr = 1.0,
                          .momentum = 0.5,
                          .init = "uniform",
                          .init_scale = 1.0,
                          .seed = 4};
    uint32_t tm;
    ck_assert_int_eq(zeps_declare(c, &ms, &tm), 0);
    ck_assert_int_eq(zeps_pull(c, tm, w0, 0, 9, 0), 0);
    zeps_codec_opts mo = {.codec = "topk", .count = 1};
    ck_assert_int_eq(zeps_set_push_codec(c, tm, &mo), 0);
    ck_assert_int_eq(zeps_push(c, tm, g, 0, 9, 0), 0);
    ck_assert_int_eq(zeps_push(c, tm, zero, 0, 9, 1), 0);
    ck_assert_int_eq(zeps_pull(c, tm, w, 0, 9, 1), 0);
    for (int i = 0; i < 9; i++)
        ck_assert_float_eq(w[i], (w0[i] - sent1[i]) - 0.5f * sent1[i]);
    zeps_codec_opts bad = {.codec = "zip"};
    ck_assert_int_eq(zeps_set_push_codec(c, t2, &bad), ZEPS_EINVAL);
}

/* Compressed pushes through the real servers: top-k with error feedback,
 * int8, and top-k into a momentum table. */
START_TEST(test_compressed_push)
{
    check_topk_push();
    uint32_t t2 = check_int8_push();
    check_momentum_push(t2);
}
END_TEST

START_TEST(test_bad_calls)
{
    float v[4];
    zeps_req *r = NULL;
    ck_assert_int_eq(zeps_pull(c, 99, v, 0, 4, 0), ZEPS_ETABLE);
    ck_assert_int_eq(zeps_pull_start(c, 0, NULL, 0, 4, 0, &r), ZEPS_EINVAL);
    ck_assert_int_eq(zeps_wait(&r), ZEPS_EINVAL);
    ck_assert_int_eq(zeps_clock(c, -1), ZEPS_EINVAL);
    uint32_t t = declare("b", 4);
    ck_assert_int_eq(zeps_pull(c, t, v, 0, 0, 0), ZEPS_ERANGE);
    ck_assert_int_eq(zeps_pull(c, t, v, 3, 2, 0), ZEPS_ERANGE);
    ck_assert_int_eq(zeps_clock(c, 5), 0);
    ck_assert_int_eq(zeps_clock(c, 2), ZEPS_ECLOCK); /* clocks do not go back */
    ck_assert_int_eq(zeps_num_shards(c), 3);
    ck_assert_int_eq(zeps_num_workers(c), 1);
}
END_TEST

/* A push that also finishes a clock, over a range that ends exactly where
 * a shard's slice begins: the shards it does not push to (1 and 2) get a
 * CLOCK of their own, and every shard records clock 0 as finished. */
START_TEST(test_push_clock_at_slice_edge)
{
    uint32_t t = declare("k", N); /* shard 0 holds [0, 333) */
    float g[333];
    for (int i = 0; i < 333; i++)
        g[i] = 1.0f;
    zeps_req *push = NULL, *rest = NULL;
    ck_assert_int_eq(zeps_push_clock_start(c, t, g, 0, 333, 0, &push, &rest), 0);
    ck_assert_ptr_nonnull(rest);
    ck_assert_int_eq(zeps_wait(&push), 0);
    ck_assert_int_eq(zeps_wait(&rest), 0);
    for (int k = 0; k < 3; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        ck_assert_uint_ge(st->n_workers, 1);
        ck_assert_msg(st->workers[0]->clock == 1, "shard %d: worker clock %lld", k,
                      (long long)st->workers[0]->clock);
        zeps__shard_stats__free_unpacked(st, NULL);
    }
}
END_TEST

/* A client whose ZeroMQ context cannot be made fails ETRANSPORT saying so,
 * and each such failure frees what it had made: 100 of them, with 256
 * shards (a poll item each), grow the heap by less than 64 KiB. */
START_TEST(test_no_context_frees_all)
{
    static const char *eps[256];
    for (int k = 0; k < 256; k++)
        eps[k] = "tcp://127.0.0.1:1";
    zeps_client *nc = NULL;
    refuse_ctx = 1;
    ck_assert_int_eq(zeps_client_new_endpoints(&nc, eps, 256, 0, NULL), ZEPS_ETRANSPORT);
    ck_assert_ptr_null(nc);
    size_t before = mallinfo2().uordblks;
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(zeps_client_new_endpoints(&nc, eps, 256, 0, NULL), ZEPS_ETRANSPORT);
    size_t after = mallinfo2().uordblks;
    refuse_ctx = 0;
    ck_assert_msg(after < before + 64 * 1024, "heap grew by %zu bytes", after - before);
}
END_TEST

/* A table declared with weight decay has it on every shard: a zero
 * gradient pushed at lr 1 and weight_decay 0.5 halves every weight. */
START_TEST(test_weight_decay_declared)
{
    zeps_table_spec sp = {.name = "wd", .length = N, .optimizer = "sgd", .lr = 1.0,
                          .weight_decay = 0.5, .init = "uniform", .init_scale = 1.0, .seed = 3};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    float *before = malloc(N * sizeof(float)), *after = malloc(N * sizeof(float));
    float *zero = calloc(N, sizeof(float));
    ck_assert_int_eq(zeps_pull(c, t, before, 0, N, 0), 0);
    ck_assert_int_eq(zeps_push(c, t, zero, 0, N, 0), 0);
    ck_assert_int_eq(zeps_pull(c, t, after, 0, N, 0), 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(after[i] == 0.5f * before[i], "weight %d: %g after %g", i, after[i],
                      before[i]);
    free(before);
    free(after);
    free(zero);
}
END_TEST

/* A table declared by init segments gets them on every shard: the
 * "zeros" segments pull as zeros, the "uniform" ones not. (The client
 * keeps nothing of them: LeakSanitizer, in the ASan tree, runs this.) */
START_TEST(test_segments_declared)
{
    zeps_init_segment segs[4] = {{.length = 300, .init = "uniform", .init_scale = 1.0, .seed = 1},
                                 {.length = 300, .init = "zeros"},
                                 {.length = 300, .init = "uniform", .init_scale = 2.0, .seed = 2},
                                 {.length = N - 900, .init = "zeros"}};
    zeps_table_spec sp = {.name = "segs", .length = N, .optimizer = "sgd", .lr = 1.0,
                          .segments = segs, .nsegments = 4};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    float *w = malloc(N * sizeof(float));
    ck_assert_int_eq(zeps_pull(c, t, w, 0, N, 0), 0);
    int nonzero[4] = {0};
    for (int i = 0; i < N; i++)
        nonzero[i < 900 ? i / 300 : 3] += w[i] != 0.0f;
    ck_assert_int_eq(nonzero[1], 0);
    ck_assert_int_eq(nonzero[3], 0);
    ck_assert_int_ge(nonzero[0], 290);
    ck_assert_int_ge(nonzero[2], 290);
    free(w);
}
END_TEST

/* Closing a client says BYE within a bound of its own, whatever its
 * request timeout: with shard 1 stopped (SIGSTOP, no answer) and a request
 * timeout of 8 s, zeps_client_destroy returns within 3 s. */
START_TEST(test_bye_bounded)
{
    zeps_client_destroy(&c); /* rank 0 is the only worker's */
    zeps_options o = {.request_timeout_ms = 8000};
    zeps_client *b = zt_client_opts(&cl, 0, &o);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(kill(cl.pids[1], SIGSTOP), 0);
    double t0 = zp_now_s();
    zeps_client_destroy(&b);
    double took = zp_now_s() - t0;
    ck_assert_int_eq(kill(cl.pids[1], SIGCONT), 0);
    printf("destroy with a stopped shard: %.2f s\n", took);
    ck_assert_msg(took < 3.0, "destroy took %.1f s", took);
}
END_TEST

/* A client refused for its CURVE keys (one of the three given) fails
 * EINVAL naming the key, and each refusal frees the client it began: 100
 * of them grow the heap by less than 16 KiB. */
START_TEST(test_bad_keys_free_all)
{
    static const char *eps[1] = {"tcp://127.0.0.1:1"};
    zeps_options o = {.curve_server_key = "x"};
    zeps_client *nc = NULL;
    ck_assert_int_eq(zeps_client_new_endpoints(&nc, eps, 1, 0, &o), ZEPS_EINVAL);
    ck_assert_ptr_null(nc);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(NULL), "curve_server_key"));
    struct mallinfo2 m = mallinfo2();
    size_t before = m.uordblks + m.hblkhd; /* a client is large: mmap'd */
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(zeps_client_new_endpoints(&nc, eps, 1, 0, &o), ZEPS_EINVAL);
    m = mallinfo2();
    size_t after = m.uordblks + m.hblkhd;
    ck_assert_msg(after < before + 16 * 1024, "heap grew by %zu bytes", after - before);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("client");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_ranges_over_shards);
    tcase_add_test(tc, test_view);
    tcase_add_test(tc, test_view_outlives_client);
    tcase_add_test(tc, test_in_flight_together);
    tcase_add_test(tc, test_bad_calls);
    tcase_add_test(tc, test_compressed_push);
    tcase_add_test(tc, test_push_clock_at_slice_edge);
    tcase_add_test(tc, test_no_context_frees_all);
    tcase_add_test(tc, test_bad_keys_free_all);
    tcase_add_test(tc, test_bye_bounded);
    tcase_add_test(tc, test_weight_decay_declared);
    tcase_add_test(tc, test_segments_declared);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
