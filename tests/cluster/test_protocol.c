/*
 * test_protocol.c - a real zeps-server against malformed and hostile input.
 *
 * A raw DEALER socket sends each kind of bad message; every one must get an
 * ERROR reply with the right code and a message that says what was wrong,
 * nothing may change in the table, and a well-behaved client on another
 * socket must keep being served after each.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "rawreq.h"
#include "wire.h"
#include "zeps.h"

#define LEN 100

static zt_cluster cl;
static zeps_client *good;
static uint32_t tid;
static void *zctx, *raw;
static uint64_t raw_inc = 0xabcdef;
static uint64_t raw_seq;

static void setup(void)
{
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "async", NULL, NULL), 0);
    good = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(good);
    zeps_table_spec spec = {.name = "t", .length = LEN, .optimizer = "sgd", .lr = 0.5,
                            .init = "constant", .init_scale = 1.0};
    ck_assert_int_eq(zeps_declare(good, &spec, &tid), 0);
    zctx = zmq_ctx_new();
    raw = zt_raw_socket(zctx, &cl, 0);
}

static void teardown(void)
{
    zmq_close(raw);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&good);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

static void base_header(Zeps__Header *h, Zeps__Op op)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = op;
    h->req_id = 77;
    h->rank = 1;
    h->incarnation = raw_inc;
    h->seq = ++raw_seq;
}

/* The good client is still served, and the table still holds `expect`. */
static void still_serving(float expect)
{
    float v[LEN];
    ck_assert_int_eq(zeps_pull(good, tid, v, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(v[i] == expect, "v[%d] = %g, expected %g", i, v[i], expect);
}

static void raw_hello(void)
{
    Zeps__Header h;
    base_header(&h, ZEPS__OP__HELLO);
    Zeps__Header *rep = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_int_eq(rep->op, ZEPS__OP__HELLO);
    zeps__header__free_unpacked(rep, NULL);
}

START_TEST(test_garbage_header)
{
    static const char junk[] = "\xff\xff\xff\xff garbage that is not protobuf \x01\x02";
    const void *frames[1] = {junk};
    size_t lens[1] = {sizeof(junk)};
    zt_raw_expect_error(zt_raw_req_frames(raw, frames, lens, 1), ZEPS_EPROTO,
                        "not a valid zeps.Header");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_wrong_version)
{
    Zeps__Header h;
    base_header(&h, ZEPS__OP__HELLO);
    h.version = 7;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EVERSION, "version 7");
    /* an empty frame decodes as all defaults: version 0 */
    const void *frames[1] = {""};
    size_t lens[1] = {0};
    zt_raw_expect_error(zt_raw_req_frames(raw, frames, lens, 1), ZEPS_EVERSION, "version 0");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_unknown_op)
{
    raw_hello();
    Zeps__Header h;
    base_header(&h, (Zeps__Op)99);
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EOP, "99");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_unknown_table)
{
    raw_hello();
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PULL);
    h.table = 42;
    h.count = 1;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ETABLE, "42");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_wrong_length)
{
    raw_hello();
    float vals[9] = {0};
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PUSH);
    h.table = 0;
    h.count = 10;
    zt_raw_expect_error(zt_raw_req(raw, &h, vals, sizeof(vals)), ZEPS_ESIZE, "36 bytes");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_truncated)
{
    raw_hello();
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PUSH);
    h.count = 10;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "values frame");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_out_of_range)
{
    raw_hello();
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PULL);
    h.offset = 90;
    h.count = 20;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANGE, "outside");
    base_header(&h, ZEPS__OP__PULL);
    h.offset = UINT64_MAX - 1;
    h.count = 4; /* offset + count wraps around */
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANGE, "outside");
    still_serving(1.0f);
    /* and the client library refuses it before sending */
    float v[20];
    ck_assert_int_eq(zeps_pull(good, tid, v, 90, 20, 0), ZEPS_ERANGE);
}
END_TEST

START_TEST(test_nonfinite)
{
    raw_hello();
    float vals[LEN];
    for (int i = 0; i < LEN; i++)
        vals[i] = 0.5f;
    vals[37] = NAN;
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    zt_raw_expect_error(zt_raw_req(raw, &h, vals, sizeof(vals)), ZEPS_ENONFINITE, "NaN or Inf");
    vals[37] = INFINITY;
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    zt_raw_expect_error(zt_raw_req(raw, &h, vals, sizeof(vals)), ZEPS_ENONFINITE,
                        "nothing applied");
    still_serving(1.0f); /* nothing was applied */
    /* through the library too */
    vals[37] = -INFINITY;
    ck_assert_int_eq(zeps_push(good, tid, vals, 0, LEN, 0), ZEPS_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(good), "NaN or Inf"));
    still_serving(1.0f);
}
END_TEST

START_TEST(test_future_version)
{
    raw_hello();
    float vals[LEN] = {0};
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    h.data_version = 99; /* the table is at version 0 */
    zt_raw_expect_error(zt_raw_req(raw, &h, vals, sizeof(vals)), ZEPS_EINVAL, "version 99");
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    h.clock = -5;
    zt_raw_expect_error(zt_raw_req(raw, &h, vals, sizeof(vals)), ZEPS_ECLOCK, "negative clock");
    still_serving(1.0f);
}
END_TEST

/* Compressed payloads are checked against their codec before decoding. */
START_TEST(test_bad_codec_payloads)
{
    raw_hello();
    uint8_t junk[64] = {0};
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    h.codec = 42;
    zt_raw_expect_error(zt_raw_req(raw, &h, junk, sizeof(junk)), ZEPS_EPROTO, "unknown codec 42");
    /* topk (id 5): [u32 k][k x u32 index][k x f32 value]; index 500 >= 100 */
    uint32_t topk[3] = {1, 500, 0};
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    h.codec = 5;
    zt_raw_expect_error(zt_raw_req(raw, &h, topk, sizeof(topk)), ZEPS_ERANGE, "topk");
    /* fp16 (id 1) of the wrong length */
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    h.codec = 1;
    zt_raw_expect_error(zt_raw_req(raw, &h, junk, 7), ZEPS_ESIZE, "fp16");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_too_many_frames)
{
    raw_hello();
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PUSH);
    uint8_t buf[256];
    size_t hl = zeps__header__pack(&h, buf);
    const void *frames[6] = {buf, "a", "b", "c", "d", "e"};
    size_t lens[6] = {hl, 1, 1, 1, 1, 1};
    zt_raw_expect_error(zt_raw_req_frames(raw, frames, lens, 6), ZEPS_EPROTO, "frames");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_bad_rank_and_state)
{
    Zeps__Header h;
    base_header(&h, ZEPS__OP__HELLO);
    h.rank = 9;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANK, "outside the cluster of 2");
    /* a request from an incarnation that never said HELLO */
    base_header(&h, ZEPS__OP__PULL);
    h.incarnation = 12345;
    h.count = 1;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ESTATE, "HELLO");
    still_serving(1.0f);
}
END_TEST

START_TEST(test_declare_conflicts)
{
    uint32_t id;
    zeps_table_spec same = {.name = "t", .length = LEN, .optimizer = "sgd", .lr = 0.5,
                            .init = "constant", .init_scale = 1.0};
    ck_assert_int_eq(zeps_declare(good, &same, &id), 0); /* idempotent */
    ck_assert_uint_eq(id, tid);
    zeps_table_spec longer = same;
    longer.length = LEN + 1;
    ck_assert_int_eq(zeps_declare(good, &longer, &id), ZEPS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(good), "length 100"));
    zeps_table_spec other = same;
    other.optimizer = "adam";
    ck_assert_int_eq(zeps_declare(good, &other, &id), ZEPS_ECONFLICT);
    zeps_table_spec bad = {.name = "u", .length = 5, .optimizer = "rmsprop", .lr = 0.1};
    ck_assert_int_eq(zeps_declare(good, &bad, &id), ZEPS_EOPTIM);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(good), "rmsprop"));
    zeps_table_spec badlr = {.name = "u", .length = 5, .optimizer = "sgd", .lr = -1};
    ck_assert_int_eq(zeps_declare(good, &badlr, &id), ZEPS_EOPTIM);
    zeps_table_spec badname = {.name = "no spaces", .length = 5, .optimizer = "sgd", .lr = 1};
    ck_assert_int_eq(zeps_declare(good, &badname, &id), ZEPS_EINVAL);
    still_serving(1.0f);
}
END_TEST

/* A valid push after all that is applied normally. */
START_TEST(test_good_push_after_bad)
{
    raw_hello();
    float vals[LEN];
    for (int i = 0; i < LEN; i++)
        vals[i] = NAN;
    Zeps__Header h;
    base_header(&h, ZEPS__OP__PUSH);
    h.count = LEN;
    zt_raw_expect_error(zt_raw_req(raw, &h, vals, sizeof(vals)), ZEPS_ENONFINITE, "NaN");
    for (int i = 0; i < LEN; i++)
        vals[i] = 1.0f;
    ck_assert_int_eq(zeps_push(good, tid, vals, 0, LEN, 0), 0);
    still_serving(0.5f); /* 1 - lr 0.5 * 1 */
}
END_TEST

/* A server limited to 1 MiB drops a 2 MiB message (and that connection)
 * before allocating it, and keeps serving others; a client that knows the
 * limit refuses to send it, with ETOOBIG. */
START_TEST(test_oversized)
{
    zt_cluster big;
    ck_assert_int_eq(zt_cluster_start(&big, 1, 2, "async", "  max_message_mb = 1;", NULL), 0);
    zeps_client *c = zt_client(&big, 0);
    ck_assert_ptr_nonnull(c);
    const uint64_t n = 600000; /* 2.4 MB */
    zeps_table_spec sp = {.name = "big", .length = n, .optimizer = "sgd", .lr = 0.1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    float *v = calloc(n, sizeof(float));
    void *ctx = zmq_ctx_new();
    void *s = zt_raw_socket(ctx, &big, 0);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PUSH;
    h.rank = 1;
    h.count = n;
    zt_raw_send(s, &h, v, n * sizeof(float));
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    ck_assert_int_eq(zmq_poll(&it, 1, 1000), 0); /* dropped: no reply */
    /* the server is still there for everyone else */
    ck_assert_int_eq(zeps_pull(c, t, v, 0, 1000, 0), 0);
    ck_assert_float_eq(v[0], 0.0f);
    zmq_close(s);
    zmq_ctx_term(ctx);
    zeps_client_destroy(&c);

    const char *eps[1] = {big.endpoints[0]};
    zeps_options opt = {.max_message_bytes = 1u << 20};
    ck_assert_int_eq(zeps_client_new_endpoints(&c, eps, 1, 0, &opt), 0);
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    ck_assert_int_eq(zeps_push(c, t, v, 0, n, 0), ZEPS_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(c), "max_message_mb"));
    ck_assert_int_eq(zeps_push(c, t, v, 0, 1000, 0), 0); /* small ones still go */
    free(v);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&big), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("protocol");
    TCase *tc = tcase_create("malformed");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_garbage_header);
    tcase_add_test(tc, test_wrong_version);
    tcase_add_test(tc, test_unknown_op);
    tcase_add_test(tc, test_unknown_table);
    tcase_add_test(tc, test_wrong_length);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_out_of_range);
    tcase_add_test(tc, test_nonfinite);
    tcase_add_test(tc, test_too_many_frames);
    tcase_add_test(tc, test_future_version);
    tcase_add_test(tc, test_bad_codec_payloads);
    tcase_add_test(tc, test_bad_rank_and_state);
    tcase_add_test(tc, test_declare_conflicts);
    tcase_add_test(tc, test_good_push_after_bad);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_oversized);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
