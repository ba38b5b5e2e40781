/*
 * test_codec.c - the codecs (common/codec/): the registry and parameters,
 * every codec's rounding rule and error bound, the unbiasedness of the
 * stochastic ones, and determinism in (seed, nonce). Validation, decode_add,
 * error feedback and the edge cases are test_codec_validate.c; the helpers
 * are tests/support/codec_fixture.h.
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
#include "rng.h"
#include "zeps_errors.h"

/* ------------------------------------------------------------------ */
/* registry and parameters                                             */

START_TEST(test_registry)
{
    ck_assert_ptr_eq(zp_codec_by_id(0), &zp_float_none_ops);
    ck_assert_str_eq(zp_float_none_ops.name, "none");
    size_t i = 0;
    for (; zp_codec_at(i); i++) {
        const zp_codec_ops *c = zp_codec_at(i);
        ck_assert_uint_eq(c->id, i);
        ck_assert_ptr_eq(zp_codec_by_id((uint32_t)i), c);
        ck_assert_ptr_eq(zp_codec_find(c->name), c);
        ck_assert(c->layout && c->layout[0]);
        ck_assert(c->max_size && c->encode && c->validate && c->decode && c->decode_add);
    }
    ck_assert_uint_eq(i, 7);
    const char *names[] = {"none", "fp16", "bf16", "int8", "sign", "topk", "randk"};
    for (size_t j = 0; j < 7; j++)
        ck_assert_str_eq(zp_codec_at(j)->name, names[j]);
    ck_assert_ptr_null(zp_codec_by_id(7));
    ck_assert_ptr_null(zp_codec_by_id(0xffffffffu));
    ck_assert_ptr_null(zp_codec_find("gzip"));
    ck_assert_ptr_null(zp_codec_find(NULL));
    ck_assert(zp_float_none_ops.lossless && !zp_float_fp16_ops.lossless);
    ck_assert(zp_int8_ops.stochastic && zp_sparsify_randk_ops.stochastic &&
              !zp_sparsify_topk_ops.stochastic);
}
END_TEST

START_TEST(test_params)
{
    zp_codec_params p;
    zp_codec_params_init(&p);
    ck_assert_uint_eq(p.block, 256);
    ck_assert_double_eq(p.fraction, 0.01);
    char err[128];
    ck_assert_int_eq(zp_codec_params_check(&zp_sparsify_topk_ops, &p, err, sizeof err), 0);
    ck_assert_int_eq(zp_codec_params_check(&zp_int8_ops, &p, err, sizeof err), 0);
    ck_assert_uint_eq(zp_sparsify_k(0, &p), 0);
    ck_assert_uint_eq(zp_sparsify_k(1000, &p), 10);
    ck_assert_uint_eq(zp_sparsify_k(1050, &p), 11); /* ceil(10.5) */
    ck_assert_uint_eq(zp_sparsify_k(5, &p), 1);     /* at least one */
    p.fraction = 1.0;
    ck_assert_uint_eq(zp_sparsify_k(77, &p), 77);
    p.count = 5000;
    ck_assert_uint_eq(zp_sparsify_k(1000, &p), 1000);
    p.count = 3;
    ck_assert_uint_eq(zp_sparsify_k(1000, &p), 3);
    p.fraction = 0; /* a count alone is fine */
    ck_assert_int_eq(zp_codec_params_check(&zp_sparsify_randk_ops, &p, err, sizeof err), 0);
    p.count = 0;
    const double bad[] = {0.0, -0.5, 1.5, NAN};
    for (int i = 0; i < 4; i++) {
        p.fraction = bad[i];
        ck_assert_int_eq(zp_codec_params_check(&zp_sparsify_topk_ops, &p, err, sizeof err),
                         ZEPS_EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "fraction"));
        /* codecs that do not read the fraction do not check it */
        ck_assert_int_eq(zp_codec_params_check(&zp_float_fp16_ops, &p, err, sizeof err), 0);
    }
    zp_codec_params_init(&p);
    p.block = ZP_CODEC_INT8_BLOCK_MAX + 1;
    ck_assert_int_eq(zp_codec_params_check(&zp_int8_ops, &p, err, sizeof err), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "block"));
}
END_TEST

/* ------------------------------------------------------------------ */
/* fp16 / bf16                                                         */

START_TEST(test_fp16_error_bound)
{
    zp_rng r;
    zp_rng_seed(&r, 5, 0, 0);
    const size_t n = 200000;
    float *x = zp_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        /* normal range of binary16: [2^-14, 65504] */
        int e = -14 + (int)zp_rng_below(&r, 30);
        double v = ldexp(1.0 + zp_rng_uniform(&r), e);
        if (v > 65504.0)
            v = 65504.0;
        x[i] = (float)(zp_rng_below(&r, 2) ? -v : v);
    }
    zp_codec_params p = params();
    float *y = roundtrip(&zp_float_fp16_ops, x, n, &p, 0);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double rel = fabs((double)y[i] - x[i]) / fabs((double)x[i]);
        worst = rel > worst ? rel : worst;
    }
    ck_assert_msg(worst <= 0x1p-11, "fp16 relative error %g > 2^-11", worst);
    ck_assert(worst > 0x1p-13); /* and it does round */
    free(x);
    free(y);
}
END_TEST

/* Every finite half decodes to its exact value and encodes back to itself. */
START_TEST(test_fp16_exhaustive)
{
    uint16_t *h = zp_alloc(65536 * 2);
    size_t n = 0;
    for (uint32_t v = 0; v < 65536; v++)
        if ((v & 0x7c00) != 0x7c00)
            h[n++] = (uint16_t)v;
    ck_assert_int_eq(check_payload(&zp_float_fp16_ops, h, 2 * n, n, 0, NULL), 0);
    float *f = zp_alloc(n * sizeof(float));
    zp_float_fp16_ops.decode(h, 2 * n, n, f);
    for (size_t i = 0; i < n; i++) {
        int e = (h[i] >> 10) & 0x1f, m = h[i] & 0x3ff;
        double want = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        if (h[i] & 0x8000)
            want = -want;
        ck_assert_msg((double)f[i] == want && !!signbit(f[i]) == !!signbit(want),
                      "half %04x decoded to %g, want %g", h[i], (double)f[i], want);
    }
    uint16_t *back = zp_alloc(65536 * 2);
    zp_codec_params p = params();
    zp_float_fp16_ops.encode(f, n, &p, 0, back);
    ck_assert(memcmp(back, h, 2 * n) == 0);
    free(h);
    free(f);
    free(back);
}
END_TEST

/* Against the compiler's _Float16 conversion (round to nearest even) on
 * random bit patterns over the whole finite range of halves, subnormals
 * included, plus hand-made ties and the saturation rule. */
START_TEST(test_fp16_rounding)
{
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 1.0f + 0x1p-11f), 0x3c00);     /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 1.0f + 3 * 0x1p-11f), 0x3c02); /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 0x1p-25f), 0x0000);     /* subnormal tie -> 0 */
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 3 * 0x1p-25f), 0x0002); /* -> even */
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 0x1p-24f), 0x0001);
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 0x1p-14f), 0x0400);
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 0x1p-14f - 0x1p-26f),
                      0x0400); /* rounds up to normal */
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, -0.0f), 0x8000);
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 1e-30f), 0x0000);
    /* finite overflow saturates to the largest half, keeping the sign */
    const float big[] = {65504.0f, 65519.0f, 65520.0f, 65536.0f, 1e10f, FLT_MAX};
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, big[i]), 0x7bff);
        ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, -big[i]), 0xfbff);
    }
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 65503.0f), 0x7bff);
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, 65487.0f), 0x7bfe);
    /* Inf and NaN stay non-finite, so the server rejects them */
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, INFINITY), 0x7c00);
    ck_assert_uint_eq(enc1_16(&zp_float_fp16_ops, -INFINITY), 0xfc00);
    uint16_t hn = enc1_16(&zp_float_fp16_ops, NAN);
    ck_assert((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
#ifdef __FLT16_MAX__
    zp_rng r;
    zp_rng_seed(&r, 6, 0, 0);
    for (int i = 0; i < 1000000; i++) {
        /* |x| below 65504: exponent bits from f32 2^-26 to 2^15 */
        uint32_t e = 101 + zp_rng_below(&r, 42);
        uint32_t u = (uint32_t)zp_rng_next(&r) & 0x807fffffu;
        u |= e << 23;
        float x = u2f(u);
        if (fabsf(x) >= 65504.0f)
            continue;
        _Float16 ref = (_Float16)x;
        uint16_t rb;
        memcpy(&rb, &ref, 2);
        ck_assert_msg(enc1_16(&zp_float_fp16_ops, x) == rb, "fp16(%a) = %04x, reference %04x",
                      (double)x, enc1_16(&zp_float_fp16_ops, x), rb);
    }
#endif
}
END_TEST

START_TEST(test_bf16)
{
    /* error bound on normal floats of any exponent */
    zp_rng r;
    zp_rng_seed(&r, 8, 0, 0);
    const size_t n = 200000;
    float *x = zp_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = ((uint32_t)zp_rng_next(&r) & 0x807fffffu) | (1 + zp_rng_below(&r, 253)) << 23;
        x[i] = u2f(u);
    }
    zp_codec_params p = params();
    float *y = roundtrip(&zp_float_bf16_ops, x, n, &p, 0);
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double rel = fabs((double)y[i] - x[i]) / fabs((double)x[i]);
        worst = rel > worst ? rel : worst;
        /* reference round to nearest even on the dropped 16 bits */
        uint32_t u = f2u(x[i]), lo = u >> 16, rem = u & 0xffff;
        uint32_t want = lo + (rem > 0x8000 || (rem == 0x8000 && (lo & 1)));
        if ((want & 0x7fff) == 0x7f80)
            want--; /* saturation */
        ck_assert_uint_eq(f2u(y[i]) >> 16, want);
        ck_assert_uint_eq(f2u(y[i]) & 0xffff, 0);
    }
    ck_assert_msg(worst <= 0x1p-8, "bf16 relative error %g > 2^-8", worst);
    ck_assert(worst > 0x1p-10);
    free(x);
    free(y);
    ck_assert_uint_eq(enc1_16(&zp_float_bf16_ops, 1.0f + 0x1p-8f), 0x3f80);     /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_float_bf16_ops, 1.0f + 3 * 0x1p-8f), 0x3f82); /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_float_bf16_ops, 1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    ck_assert_uint_eq(enc1_16(&zp_float_bf16_ops, FLT_MAX), 0x7f7f);
    ck_assert_uint_eq(enc1_16(&zp_float_bf16_ops, -FLT_MAX), 0xff7f);
    ck_assert_uint_eq(enc1_16(&zp_float_bf16_ops, INFINITY), 0x7f80);
    uint16_t hn = enc1_16(&zp_float_bf16_ops, NAN);
    ck_assert((hn & 0x7f80) == 0x7f80 && (hn & 0x7f) != 0);
    /* every finite bf16 survives decode -> encode */
    uint16_t *h = zp_alloc(65536 * 2), *back = zp_alloc(65536 * 2);
    size_t m = 0;
    for (uint32_t v = 0; v < 65536; v++)
        if ((v & 0x7f80) != 0x7f80)
            h[m++] = (uint16_t)v;
    float *f = zp_alloc(m * sizeof(float));
    ck_assert_int_eq(check_payload(&zp_float_bf16_ops, h, 2 * m, m, 0, NULL), 0);
    zp_float_bf16_ops.decode(h, 2 * m, m, f);
    zp_float_bf16_ops.encode(f, m, &p, 0, back);
    ck_assert(memcmp(back, h, 2 * m) == 0);
    free(h);
    free(back);
    free(f);
}
END_TEST

/* ------------------------------------------------------------------ */
/* int8                                                                */

static float int8_scale(const unsigned char *buf, size_t b)
{
    float s;
    memcpy(&s, buf + 4 + 4 * b, 4);
    return s;
}

START_TEST(test_int8_error_bound)
{
    const size_t n = 1000; /* 64-element blocks: the last one has 40 */
    float *x = randn(n, 9, 1.0);
    for (size_t i = 0; i < n; i++)
        x[i] *= powf(10.0f, (float)((int)(i / 64) % 7 - 3)); /* scales 1e-3 .. 1e3 by block */
    zp_codec_params p = params();
    p.block = 64;
    size_t len;
    unsigned char *buf = enc(&zp_int8_ops, x, n, &p, 3, &len);
    ck_assert_uint_eq(len, 4 + 4 * 16 + n);
    ck_assert_int_eq(check_payload(&zp_int8_ops, buf, len, n, 0, NULL), 0);
    float *y = zp_alloc(n * sizeof(float));
    zp_int8_ops.decode(buf, len, n, y);
    const int8_t *q = (const int8_t *)(buf + 4 + 4 * 16);
    int rounded_up = 0, rounded_down = 0;
    for (size_t b = 0; b < 16; b++) {
        size_t lo = b * 64, hi = lo + 64 < n ? lo + 64 : n;
        float mx = 0;
        for (size_t i = lo; i < hi; i++)
            mx = fmaxf(mx, fabsf(x[i]));
        float s = int8_scale(buf, b);
        ck_assert_float_eq(s, mx / 127.0f);
        for (size_t i = lo; i < hi; i++) {
            ck_assert(q[i] >= -127 && q[i] <= 127);
            double err = fabs((double)y[i] - x[i]);
            ck_assert_msg(err <= s * (1 + 1e-6), "int8 error %g > scale %g", err, (double)s);
            /* one of the two neighbouring grid points */
            double v = (double)x[i] / s;
            ck_assert(q[i] == floor(v) || q[i] == ceil(v) || fabs(q[i] - v) < 1e-4);
            rounded_up += q[i] > v + 1e-4;
            rounded_down += q[i] < v - 1e-4;
        }
    }
    ck_assert_int_gt(rounded_up, 200); /* stochastic, not nearest: both directions */
    ck_assert_int_gt(rounded_down, 200);
    free(x);
    free(y);
    free(buf);
}
END_TEST

/* Values on the grid of their block's scale come back exactly. */
START_TEST(test_int8_exact_multiples)
{
    const size_t n = 777;
    zp_rng r;
    zp_rng_seed(&r, 10, 0, 0);
    const float scales[] = {0.125f, 3.0f, 1.0f / 3.0f, 0.0173f, 2.5e-20f, 1e30f};
    for (int si = 0; si < 6; si++) {
        float *x = zp_alloc(n * sizeof(float));
        float s = scales[si];
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((int)zp_rng_below(&r, 255) - 127) * s;
        for (size_t b = 0; b < n; b += 100)
            x[b] = (b / 100) % 2 ? 127 * s : -127 * s; /* every block's max is 127 s */
        zp_codec_params p = params();
        p.block = 100;
        for (uint64_t nonce = 0; nonce < 5; nonce++) {
            float *y = roundtrip(&zp_int8_ops, x, n, &p, nonce);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(y[i] == x[i], "scale %g: x[%zu] = %a decoded %a", (double)s, i,
                              (double)x[i], (double)y[i]);
            free(y);
        }
        free(x);
    }
}
END_TEST

/* E[decoded] = x: the mean over many nonces is within 5 standard errors
 * (per element variance <= s^2/4), where nearest rounding would be off by
 * up to s/2, ~45 standard errors here. */
START_TEST(test_int8_unbiased)
{
    const size_t n = 300, T = 2000;
    float *x = randn(n, 11, 1.0);
    zp_codec_params p = params();
    double *sum = zp_alloc_zeroed(n, sizeof(double));
    float s_max = 0;
    for (uint64_t t = 0; t < T; t++) {
        size_t len;
        unsigned char *buf = enc(&zp_int8_ops, x, n, &p, t, &len);
        float *y = zp_alloc(n * sizeof(float));
        zp_int8_ops.decode(buf, len, n, y);
        for (size_t i = 0; i < n; i++)
            sum[i] += y[i];
        s_max = fmaxf(s_max, fmaxf(int8_scale(buf, 0), int8_scale(buf, 1)));
        free(buf);
        free(y);
    }
    double se = s_max / 2 / sqrt((double)T), chi = 0;
    for (size_t i = 0; i < n; i++) {
        double d = sum[i] / (double)T - x[i];
        ck_assert_msg(fabs(d) <= 5 * se, "int8 mean of x[%zu] off by %g (se %g)", i, d, se);
        chi += d * d;
    }
    /* and on aggregate: the mean squared deviation is at most the variance bound */
    ck_assert_double_le(chi / (double)n, se * se * 1.2);
    free(x);
    free(sum);
}
END_TEST

/* ------------------------------------------------------------------ */
/* sign                                                                */

START_TEST(test_sign)
{
    const size_t sizes[] = {1001, 8, 13, 1};
    for (int si = 0; si < 4; si++) {
        size_t n = sizes[si];
        float *x = randn(n, 12 + (uint64_t)si, 2.0);
        x[0] = -0.0f;
        double mean = 0;
        for (size_t i = 0; i < n; i++)
            mean += fabs((double)x[i]);
        mean /= (double)n;
        zp_codec_params p = params();
        size_t len;
        unsigned char *buf = enc(&zp_sign_ops, x, n, &p, 0, &len);
        ck_assert_uint_eq(len, 4 + (n + 7) / 8);
        float s;
        memcpy(&s, buf, 4);
        ck_assert_double_eq_tol(s, mean, 1e-6 * mean + 1e-30);
        float *y = roundtrip(&zp_sign_ops, x, n, &p, 0);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(y[i] == (signbit(x[i]) ? -s : s), "sign: x[%zu] = %g decoded %g", i,
                          (double)x[i], (double)y[i]);
        free(buf);
        free(x);
        free(y);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* topk                                                                */

static const float *sort_key;
static int by_mag_then_index(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    float x = fabsf(sort_key[i]), y = fabsf(sort_key[j]);
    if (x != y)
        return x > y ? -1 : 1;
    return i < j ? -1 : 1;
}

/* topk keeps exactly the k largest |x| (ties: lowest indices), checked
 * against a full sort. */
static void topk_check(const float *x, size_t n, const zp_codec_params *p)
{
    size_t k = zp_sparsify_k(n, p), len;
    unsigned char *buf = enc(&zp_sparsify_topk_ops, x, n, p, 0, &len);
    ck_assert_int_eq(check_payload(&zp_sparsify_topk_ops, buf, len, n, 0, NULL), 0);
    uint32_t kk;
    memcpy(&kk, buf, 4);
    ck_assert_uint_eq(kk, k);
    float *y = zp_alloc(n * sizeof(float) + 1);
    zp_sparsify_topk_ops.decode(buf, len, n, y);
    uint32_t *order = zp_alloc(n * sizeof(uint32_t) + 1);
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    sort_key = x;
    qsort(order, n, sizeof(uint32_t), by_mag_then_index);
    char *kept = zp_alloc_zeroed(n + 1, 1);
    for (size_t j = 0; j < k; j++)
        kept[order[j]] = 1;
    for (size_t i = 0; i < n; i++) {
        if (kept[i])
            ck_assert_msg(f2u(y[i]) == f2u(x[i]), "topk: x[%zu] = %g should be kept, got %g", i,
                          (double)x[i], (double)y[i]);
        else
            ck_assert_msg(f2u(y[i]) == 0, "topk: x[%zu] = %g should be dropped, got %g", i,
                          (double)x[i], (double)y[i]);
    }
    free(buf);
    free(y);
    free(order);
    free(kept);
}

START_TEST(test_topk_exact)
{
    const size_t n = 10007;
    zp_codec_params p = params();
    p.fraction = 0.013;
    zp_rng r;
    zp_rng_seed(&r, 13, 0, 0);
    float *x = zp_alloc(n * sizeof(float));
    /* gaussian */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)zp_rng_normal(&r);
    topk_check(x, n, &p);
    /* values agreeing in their top bits: selection needs all three radix passes */
    for (size_t i = 0; i < n; i++)
        x[i] = (zp_rng_below(&r, 2) ? -1.0f : 1.0f) * u2f(0x3f800000u + zp_rng_below(&r, 4096));
    topk_check(x, n, &p);
    /* heavy ties, mixed signs and zeros: the lowest indices win */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((int)(i % 7) - 3);
    topk_check(x, n, &p);
    /* ties at the threshold with larger values after them: the larger ones
     * are all sent, then the ties with the lowest indices */
    for (size_t i = 0; i < n; i++)
        x[i] = i % 200 == 199 ? 2.0f + (float)i : (i % 2 ? -1.0f : 1.0f);
    p.count = 100; /* 50 larger values, 50 of the ties */
    topk_check(x, n, &p);
    p.count = 0;
    /* a whole radix bucket taken at once, with subnormals and huge values */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)zp_rng_normal(&r) * (i % 3 == 0 ? 1e30f : i % 3 == 1 ? 1e-40f : 1.0f);
    topk_check(x, n, &p);
    /* k = 1, k = n - 1, k = n, counts */
    for (size_t i = 0; i < n; i++)
        x[i] = (float)zp_rng_normal(&r);
    const uint64_t counts[] = {1, 2, n - 1, n, n + 5};
    for (int c = 0; c < 5; c++) {
        p.count = counts[c];
        topk_check(x, n, &p);
    }
    /* all equal */
    for (size_t i = 0; i < n; i++)
        x[i] = 0.5f;
    p.count = 100;
    topk_check(x, n, &p);
    free(x);
}
END_TEST

/* ------------------------------------------------------------------ */
/* randk                                                               */

START_TEST(test_randk)
{
    const size_t n = 1000, T = 4000;
    zp_codec_params p = params();
    p.count = 37;
    float *x = randn(n, 14, 1.0);
    float scale = (float)(1000.0 / 37.0);
    unsigned *hits = zp_alloc_zeroed(n, sizeof(unsigned));
    for (uint64_t t = 0; t < T; t++) {
        size_t len;
        unsigned char *buf = enc(&zp_sparsify_randk_ops, x, n, &p, t, &len);
        ck_assert_uint_eq(len, 4 + 8 * 37);
        ck_assert_int_eq(check_payload(&zp_sparsify_randk_ops, buf, len, n, 0, NULL), 0);
        uint32_t k, prev = 0;
        memcpy(&k, buf, 4);
        ck_assert_uint_eq(k, 37);
        for (uint32_t j = 0; j < k; j++) {
            uint32_t i;
            float v;
            memcpy(&i, buf + 4 + 4 * j, 4);
            memcpy(&v, buf + 4 + 4 * k + 4 * j, 4);
            ck_assert(i < n && (j == 0 || i > prev)); /* distinct, increasing */
            ck_assert(v == x[i] * scale);
            prev = i;
            hits[i]++;
        }
        free(buf);
    }
    /* each index is chosen with probability k/n: binomial, 5 sigma */
    double pk = 37.0 / 1000.0, mean = pk * T, sd = sqrt(T * pk * (1 - pk));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(hits[i] - mean) <= 5 * sd, "randk: index %zu chosen %u times", i,
                      hits[i]);
    free(x);
    free(hits);
}
END_TEST

START_TEST(test_randk_unbiased)
{
    const size_t n = 200, T = 6000;
    zp_codec_params p = params();
    p.fraction = 0.1;
    float *x = randn(n, 15, 1.0);
    double *sum = zp_alloc_zeroed(n, sizeof(double));
    float *acc = zp_alloc_zeroed(n, sizeof(float));
    for (uint64_t t = 0; t < T; t++) {
        size_t len;
        unsigned char *buf = enc(&zp_sparsify_randk_ops, x, n, &p, t, &len);
        memset(acc, 0, n * sizeof(float));
        zp_sparsify_randk_ops.decode_add(buf, len, n, 1.0f, acc);
        for (size_t i = 0; i < n; i++)
            sum[i] += acc[i];
        free(buf);
    }
    /* var of one draw = x^2 (n/k - 1) */
    for (size_t i = 0; i < n; i++) {
        double se = fabs(x[i]) * sqrt((10.0 - 1.0) / (double)T);
        double d = sum[i] / (double)T - x[i];
        ck_assert_msg(fabs(d) <= 5 * se + 1e-6, "randk mean of x[%zu] off by %g (se %g)", i, d, se);
    }
    free(x);
    free(sum);
    free(acc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* determinism                                                         */

START_TEST(test_determinism)
{
    const size_t n = 5000;
    float *x = randn(n, 16, 1.0);
    zp_codec_params p = params();
    p.fraction = 0.1;
    for (size_t ci = 0; zp_codec_at(ci); ci++) {
        const zp_codec_ops *c = zp_codec_at(ci);
        size_t l1, l2, l3, l4;
        unsigned char *a = enc(c, x, n, &p, 42, &l1);
        unsigned char *b = enc(c, x, n, &p, 42, &l2);
        unsigned char *d = enc(c, x, n, &p, 43, &l3);
        zp_codec_params q = p;
        q.seed++;
        unsigned char *e = enc(c, x, n, &q, 42, &l4);
        ck_assert_uint_eq(l1, l2);
        ck_assert_msg(memcmp(a, b, l1) == 0, "%s: same (seed, nonce), different bytes", c->name);
        if (c->stochastic) {
            ck_assert_msg(memcmp(a, d, l1) != 0, "%s: nonce does not change the draw", c->name);
            ck_assert_msg(memcmp(a, e, l1) != 0, "%s: seed does not change the draw", c->name);
        } else {
            ck_assert(memcmp(a, d, l1) == 0 && memcmp(a, e, l1) == 0);
        }
        free(a);
        free(b);
        free(d);
        free(e);
    }
    free(x);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_params);
    tcase_add_test(tc, test_fp16_error_bound);
    tcase_add_test(tc, test_fp16_exhaustive);
    tcase_add_test(tc, test_fp16_rounding);
    tcase_add_test(tc, test_bf16);
    tcase_add_test(tc, test_int8_error_bound);
    tcase_add_test(tc, test_int8_exact_multiples);
    tcase_add_test(tc, test_int8_unbiased);
    tcase_add_test(tc, test_sign);
    tcase_add_test(tc, test_topk_exact);
    tcase_add_test(tc, test_randk);
    tcase_add_test(tc, test_randk_unbiased);
    tcase_add_test(tc, test_determinism);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
