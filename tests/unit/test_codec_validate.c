/*
 * test_codec_validate.c - the codecs (common/codec/) against what the
 * network may send: validate() on malformed and random payloads (each one
 * copied into a heap buffer of exactly its length, so under ASan an
 * out-of-bounds read fails the test); then decode_add, the error-feedback
 * invariant, and the edge cases n = 0, n = 1, ragged int8 blocks and
 * all-zero input.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "check_main.h"
#include "codec.h"
#include "codec_fixture.h"
#include "finite.h"
#include "rng.h"
#include "zeps_errors.h"

/* ------------------------------------------------------------------ */
/* validate: malformed payloads                                        */

/* Length off by one each way and an empty payload, for every codec. */
START_TEST(test_validate_lengths)
{
    const size_t sizes[] = {1, 7, 8, 100, 257};
    zp_codec_params p = params();
    p.fraction = 0.1;
    for (size_t ci = 0; zp_codec_at(ci); ci++) {
        const zp_codec_ops *c = zp_codec_at(ci);
        for (int si = 0; si < 5; si++) {
            size_t n = sizes[si], len;
            float *x = randn(n, 17, 1.0);
            unsigned char *buf = enc(c, x, n, &p, 0, &len);
            unsigned char *longer = zp_alloc_zeroed(len + 1, 1);
            memcpy(longer, buf, len);
            check_payload(c, buf, len, n, 0, NULL);
            check_payload(c, buf, len - 1, n, ZEPS_ESIZE, NULL);
            check_payload(c, longer, len + 1, n, ZEPS_ESIZE, NULL);
            check_payload(c, buf, 0, n, ZEPS_ESIZE, NULL);
            /* the payload of another n does not pass either (dense codecs) */
            if (c->id != ZP_CODEC_TOPK && c->id != ZP_CODEC_RANDK &&
                (c->id != ZP_CODEC_SIGN || n % 8 == 0))
                check_payload(c, buf, len, n + 1, ZEPS_ESIZE, NULL);
            free(x);
            free(buf);
            free(longer);
        }
    }
    check_payload(&zp_float_fp16_ops, "abc", 3, 1, ZEPS_ESIZE, "must be 2 bytes, got 3");
    check_payload(&zp_sparsify_topk_ops, "abc", 3, 1, ZEPS_ESIZE, "shorter");
    check_payload(&zp_int8_ops, "abc", 3, 1, ZEPS_ESIZE, "shorter");
}
END_TEST

static void put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void putf(unsigned char *p, float v)
{
    memcpy(p, &v, 4);
}

START_TEST(test_validate_values)
{
    unsigned char b[64];
    /* none */
    putf(b, 1.0f);
    putf(b + 4, NAN);
    check_payload(&zp_float_none_ops, b, 8, 2, ZEPS_ENONFINITE, "value 1");
    putf(b + 4, -INFINITY);
    check_payload(&zp_float_none_ops, b, 8, 2, ZEPS_ENONFINITE, NULL);
    /* fp16, bf16 */
    const uint16_t bad16[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01};
    for (int i = 0; i < 4; i++) {
        uint16_t h[3] = {0x3c00, 0x0001, bad16[i]};
        check_payload(&zp_float_fp16_ops, h, 6, 3, ZEPS_ENONFINITE, "value 2");
    }
    const uint16_t badb[] = {0x7f80, 0xff80, 0x7fc0, 0xffc1};
    for (int i = 0; i < 4; i++) {
        uint16_t h[3] = {0x3f80, badb[i], 0x0001};
        check_payload(&zp_float_bf16_ops, h, 6, 3, ZEPS_ENONFINITE, "value 1");
    }
    /* int8: [u32 B][scales][values], n = 5, B = 4: two scales */
    memset(b, 0, sizeof b);
    put32(b, 4);
    putf(b + 4, 0.5f);
    putf(b + 8, 0.25f);
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, 0, NULL);
    put32(b, 0);
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "block size 0");
    put32(b, ZP_CODEC_INT8_BLOCK_MAX + 1);
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "block size");
    put32(b, 0xffffffffu);
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "block size");
    put32(b, 8); /* one scale fewer than the length says */
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_ESIZE, NULL);
    put32(b, 4);
    putf(b + 8, NAN);
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_ENONFINITE, "block 1");
    putf(b + 8, INFINITY);
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_ENONFINITE, "block 1");
    putf(b + 8, -0.25f);
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "negative");
    putf(b + 8, 0.25f);
    b[4 + 8 + 3] = 0x80;
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "value 3 is -128");
    b[4 + 8 + 3] = 0x81; /* -127 is fine */
    check_payload(&zp_int8_ops, b, 4 + 8 + 5, 5, 0, NULL);
    /* sign: n = 11, 2 bytes of bits */
    memset(b, 0, sizeof b);
    putf(b, 0.5f);
    b[4] = 0xff;
    b[5] = 0x07;
    check_payload(&zp_sign_ops, b, 6, 11, 0, NULL);
    b[5] = 0x0f; /* bit 11 is past the end */
    check_payload(&zp_sign_ops, b, 6, 11, ZEPS_EPROTO, "must be zero");
    b[5] = 0x07;
    putf(b, NAN);
    check_payload(&zp_sign_ops, b, 6, 11, ZEPS_ENONFINITE, "scale");
    putf(b, INFINITY);
    check_payload(&zp_sign_ops, b, 6, 11, ZEPS_ENONFINITE, "scale");
    putf(b, -1.0f);
    check_payload(&zp_sign_ops, b, 6, 11, ZEPS_EPROTO, "negative");
}
END_TEST

/* topk/randk: k, index range, ordering, values. n = 10, k = 3. */
static size_t sparse(unsigned char *b, uint32_t k, const uint32_t *idx, const float *val)
{
    put32(b, k);
    for (uint32_t j = 0; j < k; j++) {
        put32(b + 4 + 4 * j, idx[j]);
        putf(b + 4 + 4 * k + 4 * j, val[j]);
    }
    return 4 + 8 * (size_t)k;
}

START_TEST(test_validate_sparse)
{
    const zp_codec_ops *cs[] = {&zp_sparsify_topk_ops, &zp_sparsify_randk_ops};
    unsigned char b[256];
    for (int ci = 0; ci < 2; ci++) {
        const zp_codec_ops *c = cs[ci];
        float v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
        uint32_t ok[3] = {0, 4, 9};
        check_payload(c, b, sparse(b, 3, ok, v), 10, 0, NULL);
        check_payload(c, b, sparse(b, 0, ok, v), 10, 0, NULL); /* k = 0 is allowed */
        check_payload(c, b, 3, 10, ZEPS_ESIZE, NULL);
        /* k > n, with the length that k implies */
        uint32_t many[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        check_payload(c, b, sparse(b, 11, many, v), 10, ZEPS_EPROTO, "k = 11 exceeds n = 10");
        check_payload(c, b, sparse(b, 10, many, v), 10, 0, NULL);
        /* a huge k must not make the length check overflow or read past len */
        put32(b, 0xffffffffu);
        check_payload(c, b, 4, 10, ZEPS_EPROTO, "exceeds");
        check_payload(c, b, 4, 0xffffffffull + 1, ZEPS_ESIZE, NULL);
        uint32_t out_of_range[3] = {0, 4, 10};
        check_payload(c, b, sparse(b, 3, out_of_range, v), 10, ZEPS_ERANGE, "index[2] = 10");
        uint32_t huge[3] = {0xffffffffu, 1, 2};
        check_payload(c, b, sparse(b, 3, huge, v), 10, ZEPS_ERANGE, NULL);
        uint32_t dup[3] = {1, 4, 4};
        check_payload(c, b, sparse(b, 3, dup, v), 10, ZEPS_EPROTO, "strictly increasing");
        check_payload(c, b, sparse(b, 3, dup, v), 10, ZEPS_EPROTO, "duplicates");
        uint32_t down[3] = {1, 5, 4};
        check_payload(c, b, sparse(b, 3, down, v), 10, ZEPS_EPROTO, "strictly increasing");
        float vn[3] = {1, NAN, 3}, vi[3] = {1, 2, -INFINITY};
        check_payload(c, b, sparse(b, 3, ok, vn), 10, ZEPS_ENONFINITE, "value 1 (index 4)");
        check_payload(c, b, sparse(b, 3, ok, vi), 10, ZEPS_ENONFINITE, "value 2 (index 9)");
        /* length one byte off around a k that is right */
        size_t len = sparse(b, 3, ok, v);
        check_payload(c, b, len - 1, 10, ZEPS_ESIZE, "k = 3");
        check_payload(c, b, len + 1, 10, ZEPS_ESIZE, "k = 3");
    }
}
END_TEST

/* Random and mutated payloads: validate never reads out of bounds (ASan),
 * and whatever it accepts decodes to finite values without writing past n. */
START_TEST(test_validate_fuzz)
{
    zp_rng r;
    zp_rng_seed(&r, 18, 0, 0);
    unsigned char raw[256];
    float *out = zp_alloc(40 * sizeof(float));
    unsigned accepted = 0;
    for (size_t ci = 0; zp_codec_at(ci); ci++) {
        const zp_codec_ops *c = zp_codec_at(ci);
        for (int it = 0; it < 20000; it++) {
            size_t n = zp_rng_below(&r, 24), len;
            if (it % 2) {
                /* a valid payload with one byte changed and maybe truncated */
                float x[24];
                for (size_t i = 0; i < n; i++)
                    x[i] = (float)zp_rng_normal(&r);
                zp_codec_params p = params();
                p.block = 1 + zp_rng_below(&r, 9);
                p.count = zp_rng_below(&r, 6);
                len = c->encode(x, n, &p, (uint64_t)it, raw);
                if (len)
                    raw[zp_rng_below(&r, (uint32_t)len)] ^=
                        (unsigned char)(1 + zp_rng_below(&r, 255));
                if (zp_rng_below(&r, 4) == 0)
                    len = zp_rng_below(&r, (uint32_t)len + 2);
            } else {
                len = zp_rng_below(&r, 80);
                for (size_t i = 0; i < len; i++)
                    raw[i] = (unsigned char)zp_rng_next(&r);
                if (len >= 4 && zp_rng_below(&r, 2))
                    put32(raw, zp_rng_below(&r, 12)); /* plausible k or block */
            }
            unsigned char *copy = malloc(len);
            if (len)
                memcpy(copy, raw, len);
            char err[128];
            if (c->validate(copy, len, n, err, sizeof err) == 0) {
                accepted++;
                float *o = zp_alloc((n ? n : 1) * sizeof(float));
                c->decode(copy, len, n, o);
                ck_assert_msg(zp_finite_all(o, n), "%s: accepted payload decodes to non-finite",
                              c->name);
                for (size_t i = 0; i < n; i++)
                    o[i] = 1.0f;
                c->decode_add(copy, len, n, 0.5f, o);
                ck_assert(zp_finite_all(o, n));
                free(o);
            }
            free(copy);
        }
    }
    ck_assert_uint_gt(accepted, 1000); /* the fuzz also reaches decode */
    free(out);
}
END_TEST

/* ------------------------------------------------------------------ */
/* decode_add, error feedback                                          */

START_TEST(test_decode_add)
{
    const size_t n = 1001;
    float *x = randn(n, 19, 3.0);
    float *acc0 = randn(n, 20, 1.0);
    zp_codec_params p = params();
    p.fraction = 0.05;
    for (size_t ci = 0; zp_codec_at(ci); ci++) {
        const zp_codec_ops *c = zp_codec_at(ci);
        size_t len;
        unsigned char *buf = enc(c, x, n, &p, 7, &len);
        float *d = zp_alloc(n * sizeof(float));
        float *acc = zp_alloc(n * sizeof(float));
        c->decode(buf, len, n, d);
        const float alphas[] = {1.0f, -1.0f, 0.3f, 0.0f};
        for (int a = 0; a < 4; a++) {
            memcpy(acc, acc0, n * sizeof(float));
            c->decode_add(buf, len, n, alphas[a], acc);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(acc[i] == acc0[i] + alphas[a] * d[i],
                              "%s: decode_add(%g) at %zu: %g != %g", c->name, (double)alphas[a], i,
                              (double)acc[i], (double)(acc0[i] + alphas[a] * d[i]));
        }
        free(buf);
        free(d);
        free(acc);
    }
    free(x);
    free(acc0);
}
END_TEST

/* Error feedback loses nothing: after T steps, sum of decoded sent =
 * sum of g_t - r_T, up to float rounding (bounded by a few ulps of the
 * largest magnitude per step). */
START_TEST(test_ef_invariant)
{
    const size_t n = 1003;
    const int T = 60;
    zp_rng r;
    zp_rng_seed(&r, 21, 0, 0);
    for (size_t ci = 0; zp_codec_at(ci); ci++) {
        const zp_codec_ops *c = zp_codec_at(ci);
        zp_codec_params p = params();
        p.block = 64;
        /* randk at k = n/2: with error feedback its n/k scaling makes the
         * residual grow for smaller k (see codec.h) */
        p.fraction = c->id == ZP_CODEC_RANDK ? 0.5 : 0.02;
        float *res = zp_alloc_zeroed(n, sizeof(float));
        float *g = zp_alloc(n * sizeof(float));
        float *d = zp_alloc(n * sizeof(float));
        double *sent = zp_alloc_zeroed(n, sizeof(double)),
               *gsum = zp_alloc_zeroed(n, sizeof(double));
        unsigned char *buf = zp_alloc(c->max_size(n, &p));
        double mag = 0;
        for (int t = 0; t < T; t++) {
            double sc = 1.0 + (t % 5);
            for (size_t i = 0; i < n; i++) {
                g[i] = (float)(sc * zp_rng_normal(&r));
                mag = fmax(mag, fabs((double)g[i]) + fabs((double)res[i]));
            }
            size_t len = zp_codec_ef_encode(c, &p, res, g, n, (uint64_t)t, buf);
            ck_assert_uint_eq(len, c->max_size(n, &p));
            char err[128] = "";
            ck_assert_msg(c->validate(buf, len, n, err, sizeof err) == 0, "%s: %s", c->name, err);
            c->decode(buf, len, n, d);
            for (size_t i = 0; i < n; i++) {
                sent[i] += d[i];
                gsum[i] += g[i];
                mag = fmax(mag, fabs((double)d[i]));
            }
        }
        double tol = 4.0 * T * mag * 0x1p-24, worst = 0, rmax = 0;
        for (size_t i = 0; i < n; i++) {
            double dev = fabs(sent[i] - (gsum[i] - res[i]));
            worst = fmax(worst, dev);
            rmax = fmax(rmax, fabs((double)res[i]));
        }
        ck_assert_msg(worst <= tol, "%s: EF invariant off by %g (tolerance %g)", c->name, worst,
                      tol);
        if (c->lossless)
            ck_assert(rmax == 0);
        else
            ck_assert_msg(rmax > 0, "%s: lossy codec left no residual", c->name);
        free(res);
        free(g);
        free(d);
        free(sent);
        free(gsum);
        free(buf);
    }
}
END_TEST

/* With top-k and error feedback, a constant gradient is delivered in full
 * over time: the residual stays bounded while the total grows. */
START_TEST(test_ef_topk_delivers)
{
    const size_t n = 500;
    float *g = randn(n, 22, 1.0);
    float *res = zp_alloc_zeroed(n, sizeof(float));
    float *acc = zp_alloc_zeroed(n, sizeof(float));
    zp_codec_params p = params();
    p.count = 10;
    unsigned char *buf = zp_alloc(zp_sparsify_topk_ops.max_size(n, &p));
    const int T = 2000;
    for (int t = 0; t < T; t++) {
        size_t len = zp_codec_ef_encode(&zp_sparsify_topk_ops, &p, res, g, n, (uint64_t)t, buf);
        zp_sparsify_topk_ops.decode_add(buf, len, n, 1.0f, acc);
    }
    /* every element was sent; each has received ~T g_i */
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(acc[i] / T - g[i]) <= 0.05 * fabs(g[i]) + 0.1,
                      "element %zu delivered %g of %g", i, (double)(acc[i] / T), (double)g[i]);
    free(g);
    free(res);
    free(acc);
    free(buf);
}
END_TEST

/* ------------------------------------------------------------------ */
/* edge cases                                                          */

START_TEST(test_edge_cases)
{
    zp_codec_params p = params();
    float dummy[2] = {7.0f, 7.0f};
    for (size_t ci = 0; zp_codec_at(ci); ci++) {
        const zp_codec_ops *c = zp_codec_at(ci);
        /* n = 0 */
        size_t len;
        unsigned char *buf = enc(c, dummy, 0, &p, 0, &len);
        check_payload(c, buf, len, 0, 0, NULL);
        c->decode(buf, len, 0, dummy);
        c->decode_add(buf, len, 0, 1.0f, dummy);
        ck_assert(dummy[0] == 7.0f);
        free(buf);
        /* n = 1 */
        const float ones[] = {-2.5f, 0.0f, 1e-3f};
        for (int k = 0; k < 3; k++) {
            float *y = roundtrip(c, &ones[k], 1, &p, 1);
            /* (sign of one value: scale |x|, so exact too) */
            ck_assert_msg(fabsf(y[0] - ones[k]) <= 0x1p-8f * fabsf(ones[k]), "%s: n = 1: %g -> %g",
                          c->name, (double)ones[k], (double)y[0]);
            free(y);
        }
        /* all zeros, and values too small for an int8 scale: no NaN, no division by zero */
        const size_t n = 1000;
        float *z = zp_alloc_zeroed(n, sizeof(float));
        float *y = roundtrip(c, z, n, &p, 2);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(y[i] == 0.0f, "%s: zero input decoded to %g", c->name, (double)y[i]);
        free(y);
        for (size_t i = 0; i < n; i++)
            z[i] = (i % 2 ? -1e-38f : 1e-39f);
        y = roundtrip(c, z, n, &p, 3);
        ck_assert(zp_finite_all(y, n));
        free(y);
        /* the largest floats: int8's 127 x scale must not overflow, sign's
         * mean must not either */
        for (size_t i = 0; i < n; i++)
            z[i] = i % 3 == 0 ? FLT_MAX : i % 3 == 1 ? -FLT_MAX : 1.0f;
        y = roundtrip(c, z, n, &p, 4);
        ck_assert(zp_finite_all(y, n));
        free(y);
        free(z);
    }
    /* the zero scales on the wire */
    float z[10] = {0};
    unsigned char b[64];
    float s;
    zp_sign_ops.encode(z, 10, &p, 0, b);
    memcpy(&s, b, 4);
    ck_assert(s == 0.0f);
    zp_int8_ops.encode(z, 10, &p, 0, b);
    memcpy(&s, b + 4, 4);
    ck_assert(s == 0.0f);
    /* ragged int8 blocks: n = block * 3 + 1 keeps the last element */
    p.block = 5;
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i + 1);
    float *y = roundtrip(&zp_int8_ops, x, 16, &p, 0);
    ck_assert(y[15] == 16.0f); /* alone in its block: exactly its scale times 127 */
    for (int i = 0; i < 16; i++) {
        float mx = (float)(i / 5 * 5 + 5 < 16 ? i / 5 * 5 + 5 : 16); /* its block's max */
        ck_assert(fabsf(y[i] - x[i]) <= mx / 127.0f * 1.000001f);
    }
    free(y);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("codec_validate");
    TCase *tc = tcase_create("codec_validate");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_validate_lengths);
    tcase_add_test(tc, test_validate_values);
    tcase_add_test(tc, test_validate_sparse);
    tcase_add_test(tc, test_validate_fuzz);
    tcase_add_test(tc, test_decode_add);
    tcase_add_test(tc, test_ef_invariant);
    tcase_add_test(tc, test_ef_topk_delivers);
    tcase_add_test(tc, test_edge_cases);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
