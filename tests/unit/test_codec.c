/*
 * test_codec.c - common/codec.c: every codec's rounding rule and error
 * bound, the unbiasedness of the stochastic ones, determinism in (seed,
 * nonce), validate() against malformed and random payloads (each one copied
 * into a heap buffer of exactly its length, so under ASan an out-of-bounds
 * read fails the test), the error-feedback invariant, and the edge cases
 * n = 0, n = 1, ragged int8 blocks and all-zero input.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "codec.h"
#include "util.h"
#include "zeps_errors.h"

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static float *randn(size_t n, uint64_t seed, double scale)
{
    zp_rng r;
    zp_rng_seed(&r, seed, 0, 0);
    float *x = zp_xmalloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * zp_rng_normal(&r));
    return x;
}

static zp_codec_params params(void)
{
    zp_codec_params p;
    zp_codec_params_init(&p);
    p.seed = 1234;
    return p;
}

/* Encode into a buffer of exactly max_size bytes; checks encode's length. */
static unsigned char *enc(const zp_codec_ops *c, const float *x, size_t n, const zp_codec_params *p,
                          uint64_t nonce, size_t *len)
{
    size_t want = c->max_size(n, p);
    unsigned char *buf = zp_xmalloc(want);
    *len = c->encode(x, n, p, nonce, buf);
    ck_assert_uint_eq(*len, want);
    return buf;
}

/* Encode, validate and decode: the dense result, freshly allocated. */
static float *roundtrip(const zp_codec_ops *c, const float *x, size_t n, const zp_codec_params *p,
                        uint64_t nonce)
{
    size_t len;
    unsigned char *buf = enc(c, x, n, p, nonce, &len);
    char err[256] = "";
    int rc = c->validate(buf, len, n, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: own payload rejected: %s", c->name, err);
    float *out = zp_xmalloc(n * sizeof(float) + 1);
    c->decode(buf, len, n, out);
    free(buf);
    return out;
}

/* validate() on an exact-size heap copy of buf[0..len): returns its code and
 * checks that a failure comes with a message containing `want` (if set). */
static int check_payload(const zp_codec_ops *c, const void *buf, size_t len, size_t n, int want_rc,
                         const char *want)
{
    unsigned char *copy = malloc(len); /* len may be 0: then ASan flags any read */
    ck_assert_ptr_nonnull(copy);
    if (len)
        memcpy(copy, buf, len);
    char err[256] = "";
    int rc = c->validate(copy, len, n, err, sizeof err);
    free(copy);
    ck_assert_msg(rc == want_rc, "%s: validate gave %s (%s), expected %s", c->name,
                  zeps_errname(rc), err, zeps_errname(want_rc));
    if (rc != 0) {
        ck_assert_msg(err[0] != '\0', "%s: error without a message", c->name);
        if (want)
            ck_assert_msg(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", c->name, err,
                          want);
    }
    return rc;
}

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t enc1_16(const zp_codec_ops *c, float x)
{
    unsigned char b[2];
    zp_codec_params p = params();
    c->encode(&x, 1, &p, 0, b);
    return (uint16_t)(b[0] | b[1] << 8);
}

/* ------------------------------------------------------------------ */
/* registry and parameters                                             */

START_TEST(test_registry)
{
    ck_assert_ptr_eq(zp_codec_by_id(0), &zp_codec_none);
    ck_assert_str_eq(zp_codec_none.name, "none");
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
    ck_assert(zp_codec_none.lossless && !zp_codec_fp16.lossless);
    ck_assert(zp_codec_int8.stochastic && zp_codec_randk.stochastic && !zp_codec_topk.stochastic);
}
END_TEST

START_TEST(test_params)
{
    zp_codec_params p;
    zp_codec_params_init(&p);
    ck_assert_uint_eq(p.block, 256);
    ck_assert_double_eq(p.fraction, 0.01);
    char err[128];
    ck_assert_int_eq(zp_codec_params_check(&zp_codec_topk, &p, err, sizeof err), 0);
    ck_assert_int_eq(zp_codec_params_check(&zp_codec_int8, &p, err, sizeof err), 0);
    ck_assert_uint_eq(zp_codec_k(0, &p), 0);
    ck_assert_uint_eq(zp_codec_k(1000, &p), 10);
    ck_assert_uint_eq(zp_codec_k(1050, &p), 11); /* ceil(10.5) */
    ck_assert_uint_eq(zp_codec_k(5, &p), 1);     /* at least one */
    p.fraction = 1.0;
    ck_assert_uint_eq(zp_codec_k(77, &p), 77);
    p.count = 5000;
    ck_assert_uint_eq(zp_codec_k(1000, &p), 1000);
    p.count = 3;
    ck_assert_uint_eq(zp_codec_k(1000, &p), 3);
    p.fraction = 0; /* a count alone is fine */
    ck_assert_int_eq(zp_codec_params_check(&zp_codec_randk, &p, err, sizeof err), 0);
    p.count = 0;
    const double bad[] = {0.0, -0.5, 1.5, NAN};
    for (int i = 0; i < 4; i++) {
        p.fraction = bad[i];
        ck_assert_int_eq(zp_codec_params_check(&zp_codec_topk, &p, err, sizeof err), ZEPS_EINVAL);
        ck_assert_ptr_nonnull(strstr(err, "fraction"));
        /* codecs that do not read the fraction do not check it */
        ck_assert_int_eq(zp_codec_params_check(&zp_codec_fp16, &p, err, sizeof err), 0);
    }
    zp_codec_params_init(&p);
    p.block = ZP_CODEC_INT8_BLOCK_MAX + 1;
    ck_assert_int_eq(zp_codec_params_check(&zp_codec_int8, &p, err, sizeof err), ZEPS_EINVAL);
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
    float *x = zp_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        /* normal range of binary16: [2^-14, 65504] */
        int e = -14 + (int)zp_rng_below(&r, 30);
        double v = ldexp(1.0 + zp_rng_uniform(&r), e);
        if (v > 65504.0)
            v = 65504.0;
        x[i] = (float)(zp_rng_below(&r, 2) ? -v : v);
    }
    zp_codec_params p = params();
    float *y = roundtrip(&zp_codec_fp16, x, n, &p, 0);
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
    uint16_t *h = zp_xmalloc(65536 * 2);
    size_t n = 0;
    for (uint32_t v = 0; v < 65536; v++)
        if ((v & 0x7c00) != 0x7c00)
            h[n++] = (uint16_t)v;
    ck_assert_int_eq(check_payload(&zp_codec_fp16, h, 2 * n, n, 0, NULL), 0);
    float *f = zp_xmalloc(n * sizeof(float));
    zp_codec_fp16.decode(h, 2 * n, n, f);
    for (size_t i = 0; i < n; i++) {
        int e = (h[i] >> 10) & 0x1f, m = h[i] & 0x3ff;
        double want = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        if (h[i] & 0x8000)
            want = -want;
        ck_assert_msg((double)f[i] == want && !!signbit(f[i]) == !!signbit(want),
                      "half %04x decoded to %g, want %g", h[i], (double)f[i], want);
    }
    uint16_t *back = zp_xmalloc(65536 * 2);
    zp_codec_params p = params();
    zp_codec_fp16.encode(f, n, &p, 0, back);
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
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 1.0f + 0x1p-11f), 0x3c00);     /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 1.0f + 3 * 0x1p-11f), 0x3c02); /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 0x1p-25f), 0x0000);     /* subnormal tie -> 0 */
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 3 * 0x1p-25f), 0x0002); /* -> even */
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 0x1p-24f), 0x0001);
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 0x1p-14f), 0x0400);
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 0x1p-14f - 0x1p-26f),
                      0x0400); /* rounds up to normal */
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, -0.0f), 0x8000);
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 1e-30f), 0x0000);
    /* finite overflow saturates to the largest half, keeping the sign */
    const float big[] = {65504.0f, 65519.0f, 65520.0f, 65536.0f, 1e10f, FLT_MAX};
    for (int i = 0; i < 6; i++) {
        ck_assert_uint_eq(enc1_16(&zp_codec_fp16, big[i]), 0x7bff);
        ck_assert_uint_eq(enc1_16(&zp_codec_fp16, -big[i]), 0xfbff);
    }
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 65503.0f), 0x7bff);
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, 65487.0f), 0x7bfe);
    /* Inf and NaN stay non-finite, so the server rejects them */
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, INFINITY), 0x7c00);
    ck_assert_uint_eq(enc1_16(&zp_codec_fp16, -INFINITY), 0xfc00);
    uint16_t hn = enc1_16(&zp_codec_fp16, NAN);
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
        ck_assert_msg(enc1_16(&zp_codec_fp16, x) == rb, "fp16(%a) = %04x, reference %04x",
                      (double)x, enc1_16(&zp_codec_fp16, x), rb);
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
    float *x = zp_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = ((uint32_t)zp_rng_next(&r) & 0x807fffffu) | (1 + zp_rng_below(&r, 253)) << 23;
        x[i] = u2f(u);
    }
    zp_codec_params p = params();
    float *y = roundtrip(&zp_codec_bf16, x, n, &p, 0);
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
    ck_assert_uint_eq(enc1_16(&zp_codec_bf16, 1.0f + 0x1p-8f), 0x3f80);     /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_codec_bf16, 1.0f + 3 * 0x1p-8f), 0x3f82); /* tie -> even */
    ck_assert_uint_eq(enc1_16(&zp_codec_bf16, 1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    ck_assert_uint_eq(enc1_16(&zp_codec_bf16, FLT_MAX), 0x7f7f);
    ck_assert_uint_eq(enc1_16(&zp_codec_bf16, -FLT_MAX), 0xff7f);
    ck_assert_uint_eq(enc1_16(&zp_codec_bf16, INFINITY), 0x7f80);
    uint16_t hn = enc1_16(&zp_codec_bf16, NAN);
    ck_assert((hn & 0x7f80) == 0x7f80 && (hn & 0x7f) != 0);
    /* every finite bf16 survives decode -> encode */
    uint16_t *h = zp_xmalloc(65536 * 2), *back = zp_xmalloc(65536 * 2);
    size_t m = 0;
    for (uint32_t v = 0; v < 65536; v++)
        if ((v & 0x7f80) != 0x7f80)
            h[m++] = (uint16_t)v;
    float *f = zp_xmalloc(m * sizeof(float));
    ck_assert_int_eq(check_payload(&zp_codec_bf16, h, 2 * m, m, 0, NULL), 0);
    zp_codec_bf16.decode(h, 2 * m, m, f);
    zp_codec_bf16.encode(f, m, &p, 0, back);
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
    unsigned char *buf = enc(&zp_codec_int8, x, n, &p, 3, &len);
    ck_assert_uint_eq(len, 4 + 4 * 16 + n);
    ck_assert_int_eq(check_payload(&zp_codec_int8, buf, len, n, 0, NULL), 0);
    float *y = zp_xmalloc(n * sizeof(float));
    zp_codec_int8.decode(buf, len, n, y);
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
        float *x = zp_xmalloc(n * sizeof(float));
        float s = scales[si];
        for (size_t i = 0; i < n; i++)
            x[i] = (float)((int)zp_rng_below(&r, 255) - 127) * s;
        for (size_t b = 0; b < n; b += 100)
            x[b] = (b / 100) % 2 ? 127 * s : -127 * s; /* every block's max is 127 s */
        zp_codec_params p = params();
        p.block = 100;
        for (uint64_t nonce = 0; nonce < 5; nonce++) {
            float *y = roundtrip(&zp_codec_int8, x, n, &p, nonce);
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
    double *sum = zp_xcalloc(n, sizeof(double));
    float s_max = 0;
    for (uint64_t t = 0; t < T; t++) {
        size_t len;
        unsigned char *buf = enc(&zp_codec_int8, x, n, &p, t, &len);
        float *y = zp_xmalloc(n * sizeof(float));
        zp_codec_int8.decode(buf, len, n, y);
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
        unsigned char *buf = enc(&zp_codec_sign, x, n, &p, 0, &len);
        ck_assert_uint_eq(len, 4 + (n + 7) / 8);
        float s;
        memcpy(&s, buf, 4);
        ck_assert_double_eq_tol(s, mean, 1e-6 * mean + 1e-30);
        float *y = roundtrip(&zp_codec_sign, x, n, &p, 0);
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
    size_t k = zp_codec_k(n, p), len;
    unsigned char *buf = enc(&zp_codec_topk, x, n, p, 0, &len);
    ck_assert_int_eq(check_payload(&zp_codec_topk, buf, len, n, 0, NULL), 0);
    uint32_t kk;
    memcpy(&kk, buf, 4);
    ck_assert_uint_eq(kk, k);
    float *y = zp_xmalloc(n * sizeof(float) + 1);
    zp_codec_topk.decode(buf, len, n, y);
    uint32_t *order = zp_xmalloc(n * sizeof(uint32_t) + 1);
    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    sort_key = x;
    qsort(order, n, sizeof(uint32_t), by_mag_then_index);
    char *kept = zp_xcalloc(n + 1, 1);
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
    float *x = zp_xmalloc(n * sizeof(float));
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
    unsigned *hits = zp_xcalloc(n, sizeof(unsigned));
    for (uint64_t t = 0; t < T; t++) {
        size_t len;
        unsigned char *buf = enc(&zp_codec_randk, x, n, &p, t, &len);
        ck_assert_uint_eq(len, 4 + 8 * 37);
        ck_assert_int_eq(check_payload(&zp_codec_randk, buf, len, n, 0, NULL), 0);
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
    double *sum = zp_xcalloc(n, sizeof(double));
    float *acc = zp_xcalloc(n, sizeof(float));
    for (uint64_t t = 0; t < T; t++) {
        size_t len;
        unsigned char *buf = enc(&zp_codec_randk, x, n, &p, t, &len);
        memset(acc, 0, n * sizeof(float));
        zp_codec_randk.decode_add(buf, len, n, 1.0f, acc);
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
            unsigned char *longer = zp_xcalloc(len + 1, 1);
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
    check_payload(&zp_codec_fp16, "abc", 3, 1, ZEPS_ESIZE, "must be 2 bytes, got 3");
    check_payload(&zp_codec_topk, "abc", 3, 1, ZEPS_ESIZE, "shorter");
    check_payload(&zp_codec_int8, "abc", 3, 1, ZEPS_ESIZE, "shorter");
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
    check_payload(&zp_codec_none, b, 8, 2, ZEPS_ENONFINITE, "value 1");
    putf(b + 4, -INFINITY);
    check_payload(&zp_codec_none, b, 8, 2, ZEPS_ENONFINITE, NULL);
    /* fp16, bf16 */
    const uint16_t bad16[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01};
    for (int i = 0; i < 4; i++) {
        uint16_t h[3] = {0x3c00, 0x0001, bad16[i]};
        check_payload(&zp_codec_fp16, h, 6, 3, ZEPS_ENONFINITE, "value 2");
    }
    const uint16_t badb[] = {0x7f80, 0xff80, 0x7fc0, 0xffc1};
    for (int i = 0; i < 4; i++) {
        uint16_t h[3] = {0x3f80, badb[i], 0x0001};
        check_payload(&zp_codec_bf16, h, 6, 3, ZEPS_ENONFINITE, "value 1");
    }
    /* int8: [u32 B][scales][values], n = 5, B = 4: two scales */
    memset(b, 0, sizeof b);
    put32(b, 4);
    putf(b + 4, 0.5f);
    putf(b + 8, 0.25f);
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, 0, NULL);
    put32(b, 0);
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "block size 0");
    put32(b, ZP_CODEC_INT8_BLOCK_MAX + 1);
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "block size");
    put32(b, 0xffffffffu);
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "block size");
    put32(b, 8); /* one scale fewer than the length says */
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_ESIZE, NULL);
    put32(b, 4);
    putf(b + 8, NAN);
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_ENONFINITE, "block 1");
    putf(b + 8, INFINITY);
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_ENONFINITE, "block 1");
    putf(b + 8, -0.25f);
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "negative");
    putf(b + 8, 0.25f);
    b[4 + 8 + 3] = 0x80;
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, ZEPS_EPROTO, "value 3 is -128");
    b[4 + 8 + 3] = 0x81; /* -127 is fine */
    check_payload(&zp_codec_int8, b, 4 + 8 + 5, 5, 0, NULL);
    /* sign: n = 11, 2 bytes of bits */
    memset(b, 0, sizeof b);
    putf(b, 0.5f);
    b[4] = 0xff;
    b[5] = 0x07;
    check_payload(&zp_codec_sign, b, 6, 11, 0, NULL);
    b[5] = 0x0f; /* bit 11 is past the end */
    check_payload(&zp_codec_sign, b, 6, 11, ZEPS_EPROTO, "must be zero");
    b[5] = 0x07;
    putf(b, NAN);
    check_payload(&zp_codec_sign, b, 6, 11, ZEPS_ENONFINITE, "scale");
    putf(b, INFINITY);
    check_payload(&zp_codec_sign, b, 6, 11, ZEPS_ENONFINITE, "scale");
    putf(b, -1.0f);
    check_payload(&zp_codec_sign, b, 6, 11, ZEPS_EPROTO, "negative");
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
    const zp_codec_ops *cs[] = {&zp_codec_topk, &zp_codec_randk};
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
    float *out = zp_xmalloc(40 * sizeof(float));
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
                float *o = zp_xmalloc((n ? n : 1) * sizeof(float));
                c->decode(copy, len, n, o);
                ck_assert_msg(zp_all_finite(o, n), "%s: accepted payload decodes to non-finite",
                              c->name);
                for (size_t i = 0; i < n; i++)
                    o[i] = 1.0f;
                c->decode_add(copy, len, n, 0.5f, o);
                ck_assert(zp_all_finite(o, n));
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
        float *d = zp_xmalloc(n * sizeof(float));
        float *acc = zp_xmalloc(n * sizeof(float));
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
        float *res = zp_xcalloc(n, sizeof(float));
        float *g = zp_xmalloc(n * sizeof(float));
        float *d = zp_xmalloc(n * sizeof(float));
        double *sent = zp_xcalloc(n, sizeof(double)), *gsum = zp_xcalloc(n, sizeof(double));
        unsigned char *buf = zp_xmalloc(c->max_size(n, &p));
        double mag = 0;
        for (int t = 0; t < T; t++) {
            double sc = 1.0 + (t % 5);
            for (size_t i = 0; i < n; i++) {
                g[i] = (float)(sc * zp_rng_normal(&r));
                mag = fmax(mag, fabs((double)g[i]) + fabs((double)res[i]));
            }
            size_t len = zp_ef_encode(c, &p, res, g, n, (uint64_t)t, buf);
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
    float *res = zp_xcalloc(n, sizeof(float));
    float *acc = zp_xcalloc(n, sizeof(float));
    zp_codec_params p = params();
    p.count = 10;
    unsigned char *buf = zp_xmalloc(zp_codec_topk.max_size(n, &p));
    const int T = 2000;
    for (int t = 0; t < T; t++) {
        size_t len = zp_ef_encode(&zp_codec_topk, &p, res, g, n, (uint64_t)t, buf);
        zp_codec_topk.decode_add(buf, len, n, 1.0f, acc);
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
        float *z = zp_xcalloc(n, sizeof(float));
        float *y = roundtrip(c, z, n, &p, 2);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(y[i] == 0.0f, "%s: zero input decoded to %g", c->name, (double)y[i]);
        free(y);
        for (size_t i = 0; i < n; i++)
            z[i] = (i % 2 ? -1e-38f : 1e-39f);
        y = roundtrip(c, z, n, &p, 3);
        ck_assert(zp_all_finite(y, n));
        free(y);
        /* the largest floats: int8's 127 x scale must not overflow, sign's
         * mean must not either */
        for (size_t i = 0; i < n; i++)
            z[i] = i % 3 == 0 ? FLT_MAX : i % 3 == 1 ? -FLT_MAX : 1.0f;
        y = roundtrip(c, z, n, &p, 4);
        ck_assert(zp_all_finite(y, n));
        free(y);
        free(z);
    }
    /* the zero scales on the wire */
    float z[10] = {0};
    unsigned char b[64];
    float s;
    zp_codec_sign.encode(z, 10, &p, 0, b);
    memcpy(&s, b, 4);
    ck_assert(s == 0.0f);
    zp_codec_int8.encode(z, 10, &p, 0, b);
    memcpy(&s, b + 4, 4);
    ck_assert(s == 0.0f);
    /* ragged int8 blocks: n = block * 3 + 1 keeps the last element */
    p.block = 5;
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i + 1);
    float *y = roundtrip(&zp_codec_int8, x, 16, &p, 0);
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
