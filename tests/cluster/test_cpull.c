/*
 * test_cpull.c - compressed pulls against real servers.
 *
 * A worker that pulls a table as compressed deltas must end up, pull after
 * pull, with exactly the copy the shards believe it holds. The shards' record
 * is not visible from outside, so the test keeps its own model of it: the
 * exact parameters (a plain pull on a second buffer) and a reference copy R
 * updated as the protocol says, R += D(C(params - R)) with the same codec;
 * the worker's buffer must equal R bit for bit after every pull. With the
 * parameters frozen, repeated pulls must deliver everything (the copy becomes
 * the parameters exactly), which only holds if the shards' record and the
 * worker's copy agree. Bytes are checked in the shards' and the client's
 * counters; malformed compressed pulls get ERROR replies with reasons.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "check_main.h"
#include "codec.h"
#include "harness.h"
#include "rawreq.h"
#include "wire.h"
#include "zeps.h"

#define LEN   10000 /* 5000 per shard */
#define SLICE (LEN / 2)

static zt_cluster cl;
static zeps_client *c;

static void setup(void)
{
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "async", NULL, NULL), 0);
    c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
}

static void teardown(void)
{
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

static uint32_t declare(const char *name)
{
    zeps_table_spec sp = {.name = name,
                          .length = LEN,
                          .optimizer = "sgd",
                          .lr = 0.1,
                          .init = "normal",
                          .init_scale = 1.0,
                          .seed = 5};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    return t;
}

static void gradient(float *g, int step)
{
    for (int i = 0; i < LEN; i++)
        g[i] = (float)sin(0.37 * i + 1.3 * step) * (1.0f + (float)(i % 7));
}

static const Zeps__TableStats *table_stats(Zeps__ShardStats *st, const char *name)
{
    for (size_t i = 0; i < st->n_tables; i++)
        if (strcmp(st->tables[i]->name, name) == 0)
            return st->tables[i];
    ck_abort_msg("no table %s in STATS", name);
    return NULL;
}

static double distance(const float *a, const float *b)
{
    double s = 0;
    for (int i = 0; i < LEN; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s);
}

/* The reference: R += D(C(P - R)) per shard slice, as the protocol says. */
static void reference_step(const zp_codec_ops *codec, const zp_codec_params *p, const float *P,
                           float *R, void *buf, float *d)
{
    for (int k = 0; k < 2; k++) {
        const float *ps = P + k * SLICE;
        float *rs = R + k * SLICE;
        for (int i = 0; i < SLICE; i++)
            d[i] = ps[i] - rs[i];
        size_t len = codec->encode(d, SLICE, p, 0, buf);
        codec->decode_add(buf, len, SLICE, 1.0f, rs);
    }
}

/* 20 steps of push (plain) then compressed pull; the copy equals the
 * reference bit for bit after each, and frozen parameters are reached. */
static void run_sequence(const char *codec_name, const char *table, double shrink)
{
    uint32_t t = declare(table);
    float *w = malloc(LEN * sizeof(float)), *P = malloc(LEN * sizeof(float));
    float *R = malloc(LEN * sizeof(float)), *g = malloc(LEN * sizeof(float));
    float *d = malloc(SLICE * sizeof(float));
    zeps_codec_opts o = {.codec = codec_name, .fraction = 0.01};
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    const zp_codec_ops *codec = zp_codec_find(codec_name);
    zp_codec_params p;
    zp_codec_params_init(&p);
    p.fraction = 0.01;
    void *buf = malloc(codec->max_size(SLICE, &p));

    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 0), 0);     /* first: full values */
    ck_assert_int_eq(zeps_pull(c, t, P, 0, LEN - 1, 0), 0); /* partial: plain */
    ck_assert_int_eq(zeps_pull(c, t, P + LEN - 1, LEN - 1, 1, 0), 0);
    ck_assert(memcmp(w, P, LEN * sizeof(float)) == 0);
    memcpy(R, w, LEN * sizeof(float));
    int differs = 0;
    for (int step = 0; step < 20; step++) {
        gradient(g, step);
        ck_assert_int_eq(zeps_push(c, t, g, 0, LEN, step), 0);
        ck_assert_int_eq(zeps_pull(c, t, P, 0, LEN - 1, step), 0);
        ck_assert_int_eq(zeps_pull(c, t, P + LEN - 1, LEN - 1, 1, step), 0);
        ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, step), 0);
        reference_step(codec, &p, P, R, buf, d);
        for (int i = 0; i < LEN; i++)
            ck_assert_msg(memcmp(&w[i], &R[i], sizeof(float)) == 0,
                          "%s step %d: copy[%d] = %.9g, the shards' record %.9g", codec_name, step,
                          i, w[i], R[i]);
        differs += memcmp(w, P, LEN * sizeof(float)) != 0;
    }
    ck_assert_msg(differs > 0, "%s: the copy never differed from the parameters", codec_name);
    /* frozen parameters: what was held back arrives, to the last bit, or
     * (shrink > 0) until the distance fell by that factor: sign cannot send
     * less than its mean magnitude, fp16 nothing below 2^-24 */
    double e0 = distance(w, P);
    int pulls = 0, exact = shrink == 0;
    while ((exact ? memcmp(w, P, LEN * sizeof(float)) != 0 : distance(w, P) > e0 / shrink) &&
           pulls < 400) {
        ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 20), 0);
        pulls++;
    }
    ck_assert_msg(exact ? memcmp(w, P, LEN * sizeof(float)) == 0 : distance(w, P) <= e0 / shrink,
                  "%s: the copy did not reach the parameters in %d pulls (distance %g from %g)",
                  codec_name, pulls, distance(w, P), e0);
    free(w);
    free(P);
    free(R);
    free(g);
    free(d);
    free(buf);
}

START_TEST(test_sequence_topk)
{
    run_sequence("topk", "tk", 0);
}
END_TEST

START_TEST(test_sequence_sign_fp16_bf16)
{
    run_sequence("sign", "sg", 100);
    run_sequence("fp16", "f16", 1000);
    run_sequence("bf16", "b16", 0);
}
END_TEST

/* int8 is stochastic (the nonce is the view id, unknown here): the copy
 * is within one scale step of the parameters and reaches them when frozen. */
START_TEST(test_int8_converges)
{
    uint32_t t = declare("i8");
    float *w = malloc(LEN * sizeof(float)), *P = malloc(LEN * sizeof(float));
    float *g = malloc(LEN * sizeof(float));
    zeps_codec_opts o = {.codec = "int8", .block = 64, .seed = 9};
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 0), 0);
    gradient(g, 0);
    ck_assert_int_eq(zeps_push(c, t, g, 0, LEN, 0), 0);
    zeps_pull_codec_reset(c, t); /* P gets the plain pull below */
    ck_assert_int_eq(zeps_set_pull_codec(c, t, NULL), 0);
    ck_assert_int_eq(zeps_pull(c, t, P, 0, LEN, 0), 0);
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 0), 0); /* a resync after the reset */
    ck_assert(memcmp(w, P, LEN * sizeof(float)) == 0);
    gradient(g, 1);
    ck_assert_int_eq(zeps_push(c, t, g, 0, LEN, 1), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 1), 0);
    ck_assert_int_eq(zeps_set_pull_codec(c, t, NULL), 0);
    ck_assert_int_eq(zeps_pull(c, t, P, 0, LEN - 1, 1), 0); /* plain: not the view buffer */
    ck_assert_int_eq(zeps_pull(c, t, P + LEN - 1, LEN - 1, 1, 1), 0);
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    for (int i = 0; i < LEN; i++) /* |delta| <= 0.1 * 7: scale <= 0.7 / 127 */
        ck_assert_float_le(fabsf(w[i] - P[i]), 0.7f / 127.0f * 1.01f);
    int pulls = 0;
    while (memcmp(w, P, LEN * sizeof(float)) != 0 && pulls < 100) {
        ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 1), 0);
        pulls++;
    }
    ck_assert_msg(memcmp(w, P, LEN * sizeof(float)) == 0, "int8: not reached in %d pulls", pulls);
    free(w);
    free(P);
    free(g);
}
END_TEST

/* Codec none: every pull is the full values, the same as a plain pull. */
START_TEST(test_none_equals_plain)
{
    uint32_t t = declare("none");
    float *w = malloc(LEN * sizeof(float)), *P = malloc(LEN * sizeof(float));
    float *g = malloc(LEN * sizeof(float));
    zeps_codec_opts o = {.codec = "none"};
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    for (int step = 0; step < 5; step++) {
        gradient(g, step);
        ck_assert_int_eq(zeps_push(c, t, g, 0, LEN, step), 0);
        ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, step), 0);
        ck_assert_int_eq(zeps_pull(c, t, P, 0, LEN - 1, step), 0);
        ck_assert_int_eq(zeps_pull(c, t, P + LEN - 1, LEN - 1, 1, step), 0);
        ck_assert(memcmp(w, P, LEN * sizeof(float)) == 0);
    }
    Zeps__ShardStats *st = zt_stats(c, 0);
    const Zeps__TableStats *ts = table_stats(st, "none");
    ck_assert_uint_eq(ts->pull_bytes_wire, ts->pull_bytes_raw);
    ck_assert_uint_eq(ts->pull_resyncs, 0);
    zeps__shard_stats__free_unpacked(st, NULL);
    free(w);
    free(P);
    free(g);
}
END_TEST

/* topk at 1% of a 5000-element slice: 50 pairs, 404 bytes per pull after
 * the first (full, 20000 bytes): exact counts on the shard, per table and
 * per worker, and in the client. */
START_TEST(test_bytes)
{
    uint32_t t = declare("by");
    float *w = malloc(LEN * sizeof(float)), *g = malloc(LEN * sizeof(float));
    zeps_codec_opts o = {.codec = "topk", .fraction = 0.01};
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    zeps_client_stats before;
    zeps_client_get_stats(c, &before);
    const int pulls = 10;
    for (int step = 0; step < pulls; step++) {
        gradient(g, step);
        ck_assert_int_eq(zeps_push(c, t, g, 0, LEN, step), 0);
        ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, step), 0);
    }
    const uint64_t full = SLICE * 4, delta = 4 + 50 * 8;
    Zeps__ShardStats *st = zt_stats(c, 1);
    const Zeps__TableStats *ts = table_stats(st, "by");
    ck_assert_uint_eq(ts->pull_bytes_raw, pulls * full);
    ck_assert_uint_eq(ts->pull_bytes_wire, full + (pulls - 1) * delta);
    ck_assert_uint_eq(ts->pull_resyncs, 1);
    ck_assert_uint_eq(ts->pull_view_bytes, 2 * full); /* one view + the delta scratch */
    ck_assert(ts->encode_s > 0);
    ck_assert_uint_eq(st->n_workers, 1);
    ck_assert_uint_eq(st->workers[0]->pull_bytes_wire, full + (pulls - 1) * delta);
    ck_assert_uint_eq(st->workers[0]->pull_bytes_raw, pulls * full);
    ck_assert_uint_eq(st->workers[0]->pull_resyncs, 1);
    zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_stats after;
    zeps_client_get_stats(c, &after);
    ck_assert_uint_eq(after.bytes_in - before.bytes_in, 2 * (full + (pulls - 1) * delta));
    ck_assert_uint_eq(after.bytes_in_raw - before.bytes_in_raw, 2 * pulls * full);
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &(zeps_codec_opts){.codec = "randk"}), ZEPS_EINVAL);
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &(zeps_codec_opts){.codec = "zip"}), ZEPS_EINVAL);
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &(zeps_codec_opts){.codec = "topk", .fraction = 2}),
                     ZEPS_EINVAL);
    free(w);
    free(g);
}
END_TEST

/* --- malformed compressed pulls on a raw socket --- */

static void pull_header(Zeps__Header *h, uint64_t seq, uint32_t table)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = ZEPS__OP__PULL;
    h->req_id = seq;
    h->rank = 1;
    h->incarnation = 0x5eed;
    h->seq = seq;
    h->table = table;
    h->offset = 0;
    h->count = SLICE;
    h->flags = ZP_FLAG_PULL_DELTA;
    h->codec = ZP_CODEC_TOPK;
}

START_TEST(test_malformed)
{
    declare("m");
    void *zctx = zmq_ctx_new();
    void *raw = zt_raw_socket(zctx, &cl, 0);
    Zeps__Header h;
    pull_header(&h, 1, 0);
    h.op = ZEPS__OP__HELLO;
    h.flags = 0; /* a HELLO carries no flags (docs/protocol.md, the flags rule) */
    Zeps__Header *hello = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_msg(hello->op == ZEPS__OP__HELLO, "%s", hello->error_text);
    zeps__header__free_unpacked(hello, NULL);
    uint64_t seq = 2;

    pull_header(&h, seq++, 0);
    h.codec = 77;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "unknown codec 77");
    pull_header(&h, seq++, 0);
    h.codec_fraction = 1.5;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EINVAL, "fraction");
    pull_header(&h, seq++, 0);
    h.codec = ZP_CODEC_INT8;
    h.codec_block = (1u << 20) + 1;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EINVAL, "block");
    pull_header(&h, seq++, 0);
    h.codec = ZP_CODEC_RANDK;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EINVAL, "randk");
    pull_header(&h, seq++, 0);
    h.count = SLICE - 1;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANGE, "whole slice");

    /* a view the shard never handed out: the full values, and a fresh id */
    pull_header(&h, seq++, 0);
    h.view_id = 12345;
    Zeps__Header *rep = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_int_eq(rep->op, ZEPS__OP__PULL);
    ck_assert_uint_eq(rep->flags & (ZP_FLAG_PULL_FULL | ZP_FLAG_PULL_DELTA), ZP_FLAG_PULL_FULL);
    uint64_t id = rep->view_id;
    ck_assert_uint_ne(id, 0);
    ck_assert_uint_ne(id, 12345);
    zeps__header__free_unpacked(rep, NULL);
    /* naming it: a delta */
    pull_header(&h, seq++, 0);
    h.view_id = id;
    rep = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_uint_eq(rep->flags & (ZP_FLAG_PULL_FULL | ZP_FLAG_PULL_DELTA), ZP_FLAG_PULL_DELTA);
    ck_assert_uint_eq(rep->codec, ZP_CODEC_TOPK);
    ck_assert_uint_ne(rep->view_id, id);
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(raw);
    zmq_ctx_term(zctx);

    /* the well-behaved client is still served */
    float v[4];
    ck_assert_int_eq(zeps_pull(c, 0, v, 0, 4, 0), 0);
}
END_TEST

static void setup_bsp(void)
{
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "bsp", NULL, NULL), 0);
    c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
}

/* BSP parks a pull for clock 1 until round 0 closes: the parked pull is
 * answered as a compressed one, computed when it is served. */
START_TEST(test_bsp_parked)
{
    uint32_t t = declare("bsp");
    float *w = malloc(LEN * sizeof(float)), *P = malloc(LEN * sizeof(float));
    float *g = malloc(LEN * sizeof(float));
    zeps_codec_opts o = {.codec = "topk", .count = 100};
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 0), 0);
    memcpy(P, w, LEN * sizeof(float));
    zeps_req *r;
    ck_assert_int_eq(zeps_pull_start(c, t, w, 0, LEN, 1, &r), 0); /* parked */
    for (int i = 0; i < LEN; i++)
        g[i] = i % 100 == 3 ? 1.0f : 0.0f; /* 50 elements per shard change */
    ck_assert_int_eq(zeps_push(c, t, g, 0, LEN, 0), 0);
    ck_assert_int_eq(zeps_wait(&r), 0);
    for (int i = 0; i < LEN; i++) /* 50 changes < k = 100: all delivered exactly */
        ck_assert_float_eq(w[i], P[i] - 0.1f * g[i]);
    Zeps__ShardStats *st = zt_stats(c, 0);
    const Zeps__TableStats *ts = table_stats(st, "bsp");
    ck_assert_uint_eq(ts->pull_bytes_wire, SLICE * 4 + 4 + 100 * 8);
    zeps__shard_stats__free_unpacked(st, NULL);
    free(w);
    free(P);
    free(g);
}
END_TEST

static void setup_dc(void)
{
    ck_assert_int_eq(
        zt_cluster_start(&cl, 2, 1, "weighted", "weighting = { dc_lambda = 0.5; };", NULL), 0);
    c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
}

/* DC-ASGD compensates against the buffer a worker pulled: a worker holding
 * a view instead is refused, with the reason; plain pulls go on. */
START_TEST(test_dc_refused)
{
    uint32_t t = declare("dc");
    float *w = malloc(LEN * sizeof(float));
    zeps_codec_opts o = {.codec = "topk"};
    ck_assert_int_eq(zeps_set_pull_codec(c, t, &o), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 0), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(c), "DC-ASGD"));
    ck_assert_int_eq(zeps_set_pull_codec(c, t, NULL), 0);
    ck_assert_int_eq(zeps_pull(c, t, w, 0, LEN, 0), 0);
    free(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpull");
    TCase *tc = tcase_create("cpull");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sequence_topk);
    tcase_add_test(tc, test_sequence_sign_fp16_bf16);
    tcase_add_test(tc, test_int8_converges);
    tcase_add_test(tc, test_none_equals_plain);
    tcase_add_test(tc, test_bytes);
    tcase_add_test(tc, test_malformed);
    suite_add_tcase(s, tc);
    tc = tcase_create("bsp");
    tcase_add_checked_fixture(tc, setup_bsp, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_bsp_parked);
    suite_add_tcase(s, tc);
    tc = tcase_create("dc");
    tcase_add_checked_fixture(tc, setup_dc, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dc_refused);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
