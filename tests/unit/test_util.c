/*
 * test_util.c - common/rng.c, init.c, finite.c and wire.c: the seeded generator, the
 * shard-independent initialiser, the finiteness check, and message framing
 * over a real (inproc) ZeroMQ socket pair.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "check_main.h"
#include "finite.h"
#include "init.h"
#include "ratelimit.h"
#include "rng.h"
#include "wire.h"

START_TEST(test_rng_streams)
{
    zp_rng a, b, c;
    zp_rng_seed(&a, 42, 1, 2);
    zp_rng_seed(&b, 42, 1, 2);
    zp_rng_seed(&c, 42, 1, 3);
    int same_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = zp_rng_next(&a), y = zp_rng_next(&b), z = zp_rng_next(&c);
        ck_assert_uint_eq(x, y);
        same_c += x == z;
    }
    ck_assert_int_eq(same_c, 0);
    /* uniform in [0,1) with the right mean, normal with mean 0 and variance 1 */
    double su = 0, sn = 0, sn2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = zp_rng_uniform(&a);
        ck_assert(u >= 0.0 && u < 1.0);
        su += u;
        double z = zp_rng_normal(&a);
        sn += z;
        sn2 += z * z;
    }
    ck_assert_double_eq_tol(su / n, 0.5, 0.01);
    ck_assert_double_eq_tol(sn / n, 0.0, 0.01);
    ck_assert_double_eq_tol(sn2 / n, 1.0, 0.02);
}
END_TEST

START_TEST(test_shuffle_is_permutation)
{
    uint32_t v[1000];
    for (uint32_t i = 0; i < 1000; i++)
        v[i] = i;
    zp_rng r;
    zp_rng_seed(&r, 7, 0, 0);
    zp_rng_shuffle(&r, v, 1000);
    int seen[1000] = {0}, moved = 0;
    for (uint32_t i = 0; i < 1000; i++) {
        ck_assert_uint_lt(v[i], 1000);
        seen[v[i]]++;
        moved += v[i] != i;
    }
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(seen[i], 1);
    ck_assert_int_gt(moved, 900);
}
END_TEST

/* Element i's initial value depends on (kind, scale, seed, i) only: filling
 * a table in slices (as S shards do) gives exactly the whole-table values. */
START_TEST(test_init_shard_independent)
{
    const size_t n = 10007;
    float *whole = malloc(n * sizeof(float)), *parts = malloc(n * sizeof(float));
    for (int kind = ZP_INIT_ZEROS; kind <= ZP_INIT_NORMAL; kind++) {
        zp_init_fill(whole, 0, n, (zp_init_kind)kind, 0.5, 99);
        for (int S = 1; S <= 5; S++)
            for (int k = 0; k < S; k++) {
                size_t b = n * (size_t)k / (size_t)S, e = n * (size_t)(k + 1) / (size_t)S;
                zp_init_fill(parts + b, b, e - b, (zp_init_kind)kind, 0.5, 99);
            }
        ck_assert(memcmp(whole, parts, n * sizeof(float)) == 0);
    }
    /* the distributions are what they say */
    zp_init_fill(whole, 0, n, ZP_INIT_UNIFORM, 0.5, 1);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert(whole[i] >= -0.5f && whole[i] <= 0.5f);
        s += whole[i];
    }
    ck_assert_double_eq_tol(s / n, 0.0, 0.02);
    zp_init_fill(whole, 0, n, ZP_INIT_NORMAL, 2.0, 1);
    s = 0;
    for (size_t i = 0; i < n; i++) {
        s += whole[i];
        s2 += (double)whole[i] * whole[i];
    }
    ck_assert_double_eq_tol(sqrt(s2 / n - (s / n) * (s / n)), 2.0, 0.1);
    zp_init_fill(whole, 0, 3, ZP_INIT_CONSTANT, 0.25, 1);
    ck_assert_float_eq(whole[2], 0.25f);
    /* another seed, other values */
    zp_init_fill(parts, 0, n, ZP_INIT_NORMAL, 2.0, 2);
    ck_assert(memcmp(whole, parts, n * sizeof(float)) != 0);
    ck_assert_int_eq(zp_init_from_name("normal"), ZP_INIT_NORMAL);
    ck_assert_int_eq(zp_init_from_name(NULL), ZP_INIT_ZEROS);
    ck_assert_int_eq(zp_init_from_name("gaussian"), -1);
    free(whole);
    free(parts);
}
END_TEST

START_TEST(test_all_finite)
{
    float v[1031];
    for (int i = 0; i < 1031; i++)
        v[i] = (float)i * 1e30f; /* large but finite */
    ck_assert(zp_finite_all(v, 1031));
    ck_assert(zp_finite_all(v, 0));
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++)
        for (int pos = 0; pos < 1031; pos += 103) {
            float keep = v[pos];
            v[pos] = bad[b];
            ck_assert(!zp_finite_all(v, 1031));
            v[pos] = keep;
        }
    v[0] = 1e-45f; /* a subnormal is finite */
    ck_assert(zp_finite_all(v, 1031));
}
END_TEST

/* Frames go through a real socket pair intact, a header survives
 * pack/unpack, and a message with too many frames is received whole with the
 * extra frames counted and dropped. */
START_TEST(test_wire_framing)
{
    void *ctx = zmq_ctx_new();
    void *a = zmq_socket(ctx, ZMQ_PAIR), *b = zmq_socket(ctx, ZMQ_PAIR);
    ck_assert_int_eq(zmq_bind(a, "inproc://wire"), 0);
    ck_assert_int_eq(zmq_connect(b, "inproc://wire"), 0);

    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PUSH;
    h.req_id = 1234567890123ull;
    h.offset = 5;
    h.count = 3;
    h.error_text = "hello";
    float vals[3] = {1.5f, -2.0f, 3.25f};
    ck_assert_int_eq(zp_wire_send_header(a, &h, ZMQ_SNDMORE), 0);
    ck_assert_int_eq(zp_wire_send_data(a, vals, sizeof(vals), NULL, NULL, 0), 0);
    zp_frames m;
    ck_assert_int_eq(zp_wire_frames_recv(b, &m, 0), 0);
    ck_assert_int_eq(m.n, 2);
    ck_assert_int_eq(m.dropped, 0);
    Zeps__Header *got = zp_wire_unpack_header(&m.f[0]);
    ck_assert_ptr_nonnull(got);
    ck_assert_uint_eq(got->req_id, h.req_id);
    ck_assert_uint_eq(got->count, 3);
    ck_assert_str_eq(got->error_text, "hello");
    ck_assert_int_eq(got->op, ZEPS__OP__PUSH);
    ck_assert(memcmp(zmq_msg_data(&m.f[1]), vals, sizeof(vals)) == 0);
    ck_assert_uint_eq(m.bytes, zmq_msg_size(&m.f[0]) + sizeof(vals));
    zeps__header__free_unpacked(got, NULL);
    zp_wire_frames_close(&m);

    for (int i = 0; i < 7; i++)
        ck_assert_int_ge(zmq_send(a, "x", 1, i < 6 ? ZMQ_SNDMORE : 0), 0);
    ck_assert_int_eq(zp_wire_frames_recv(b, &m, 0), 0);
    ck_assert_int_eq(m.n, ZP_MAX_FRAMES);
    ck_assert_int_eq(m.dropped, 7 - ZP_MAX_FRAMES);
    zp_wire_frames_close(&m);

    /* nothing waiting: EAGAIN, not a hang */
    ck_assert_int_eq(zp_wire_frames_recv(b, &m, ZMQ_DONTWAIT), -1);
    ck_assert_int_eq(zmq_errno(), EAGAIN);
    /* garbage is not a header */
    zmq_msg_t junk;
    zmq_msg_init_size(&junk, 5);
    memcpy(zmq_msg_data(&junk), "\xff\xff\xff\xff\xff", 5);
    ck_assert_ptr_null(zp_wire_unpack_header(&junk));
    zmq_msg_close(&junk);
    ck_assert_str_eq(zp_wire_op_name(ZEPS__OP__BARRIER), "BARRIER");
    ck_assert_str_eq(zp_wire_op_name(77), "UNKNOWN");

    zmq_close(a);
    zmq_close(b);
    zmq_ctx_term(ctx);
}
END_TEST

/* The one limiter of per-request log lines: a burst, then one per
 * interval; what it leaves out is counted and named on the next line. */
START_TEST(test_ratelimit)
{
    zp_ratelimit rl;
    zp_ratelimit_init(&rl, "refused", 3, 1.0);
    char note[96] = "x";
    double t = 100.0;
    for (int i = 0; i < 3; i++) {
        ck_assert(zp_ratelimit_due(&rl, t, note, sizeof(note)));
        ck_assert_str_eq(note, "");
    }
    for (int i = 0; i < 50; i++)
        ck_assert(!zp_ratelimit_due(&rl, t + 0.01 * i, note, sizeof(note)));
    ck_assert_uint_eq(rl.suppressed, 50);
    ck_assert(!zp_ratelimit_due(&rl, t + 0.9, note, sizeof(note)));
    ck_assert(zp_ratelimit_due(&rl, t + 1.0, note, sizeof(note))); /* one token back */
    ck_assert_str_eq(note, " (51 more refused since the last message)");
    ck_assert(!zp_ratelimit_due(&rl, t + 1.5, note, sizeof(note)));
    /* a long quiet spell refills the burst, no more */
    for (int i = 0; i < 3; i++)
        ck_assert(zp_ratelimit_due(&rl, t + 100.0, note, sizeof(note)));
    ck_assert(!zp_ratelimit_due(&rl, t + 100.0, note, sizeof(note)));
    ck_assert_uint_eq(rl.suppressed, 53);
    ck_assert_uint_eq(rl.pending, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("util");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_rng_streams);
    tcase_add_test(tc, test_shuffle_is_permutation);
    tcase_add_test(tc, test_init_shard_independent);
    tcase_add_test(tc, test_all_finite);
    tcase_add_test(tc, test_wire_framing);
    tcase_add_test(tc, test_ratelimit);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
