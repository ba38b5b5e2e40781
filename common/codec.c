/*
 * codec.c - gradient compression codecs (see codec.h and docs/compression.md).
 *
 * One ops table per codec, each a handful of static functions, in the order
 * of their ids. The dense codecs (fp16, bf16, int8, sign) convert with
 * integer bit manipulation in branch-free loops the compiler vectorises at
 * baseline x86-64 (SSE2: no F16C), with no call per element. int8's
 * stochastic rounding therefore uses a counter-based generator, a 32-bit
 * hash of (element, block key), instead of a stateful one: the random number
 * of element j of block b depends only on (seed, nonce, b, j), which is what
 * makes it both vectorisable and deterministic. randk draws its indices from
 * zp_rng (selection sampling, Knuth's algorithm S) and topk finds the k-th
 * largest magnitude by a three-pass radix select on the f32 bit patterns, so
 * neither sorts, and both emit indices already in increasing order.
 *
 * Payload bytes are read and written with memcpy: network buffers carry no
 * alignment promise, and memcpy of a fixed small size compiles to a plain
 * (vectorisable) load or store.
 */
#include "codec.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "util.h"
#include "zeps_errors.h"

/* Payloads are little-endian and read by memcpy: zeps supports only
 * little-endian hosts, like the rest of its wire format. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "zeps codecs assume little-endian");

/* ------------------------------------------------------------------ */
/* byte and bit helpers                                                */

static inline uint32_t ld32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline float ldf(const unsigned char *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint16_t ld16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline void st32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static inline void stf(unsigned char *p, float v)
{
    memcpy(p, &v, 4);
}

static inline void st16(unsigned char *p, uint16_t v)
{
    memcpy(p, &v, 2);
}

static inline uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* c ? a : b as mask arithmetic: the vectoriser if-converts nested
 * conditionals only sometimes, masks always. */
static inline uint32_t sel(bool c, uint32_t a, uint32_t b)
{
    uint32_t m = -(uint32_t)c;
    return (a & m) | (b & ~m);
}

static inline bool finite_bits(uint32_t u)
{
    return (u & 0x7f800000u) != 0x7f800000u;
}

/* ESIZE with the expected and received lengths. */
static int size_err(const zp_codec_ops *c, size_t n, size_t want, size_t len, char *err,
                    size_t errlen)
{
    return zp_seterr(err, errlen, ZEPS_ESIZE,
                     "%s payload for %zu values must be %zu bytes, got %zu", c->name, n, want, len);
}

/* First element of an f32 array (unaligned) that is NaN or Inf; n if none.
 * Branch-free OR-reduction first, since payloads are almost always clean. */
static size_t first_nonfinite_f32(const unsigned char *p, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= !finite_bits(ld32(p + 4 * i));
    if (!bad)
        return n;
    size_t i = 0;
    while (finite_bits(ld32(p + 4 * i)))
        i++;
    return i;
}

/* ------------------------------------------------------------------ */
/* none: raw f32                                                       */

static size_t none_size(size_t n, const zp_codec_params *p)
{
    return 4 * n;
}

static size_t none_encode(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce,
                          void *out)
{
    if (n > 0)
        memcpy(out, x, 4 * n);
    return 4 * n;
}

static int none_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    if (len % 4 != 0 || len / 4 != n)
        return size_err(&zp_codec_none, n, 4 * n, len, err, errlen);
    size_t i = first_nonfinite_f32(buf, n);
    if (i < n)
        return zp_seterr(err, errlen, ZEPS_ENONFINITE, "none: value %zu is NaN or Inf", i);
    return 0;
}

static void none_decode(const void *buf, size_t len, size_t n, float *out)
{
    if (n > 0)
        memcpy(out, buf, 4 * n);
}

static void none_decode_add(const void *buf, size_t len, size_t n, float alpha, float *acc)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        acc[i] += alpha * ldf(b + 4 * i);
}

const zp_codec_ops zp_codec_none = {
    .name = "none",
    .id = ZP_CODEC_NONE,
    .layout = "[n x f32]",
    .lossless = true,
    .stochastic = false,
    .max_size = none_size,
    .encode = none_encode,
    .validate = none_validate,
    .decode = none_decode,
    .decode_add = none_decode_add,
};

/* ------------------------------------------------------------------ */
/* fp16: IEEE binary16, round to nearest even, finite values saturate    */

/* f32 bits -> f16 bits. Branch-free (the selects become blends):
 *   normal results: rebias the exponent, add half an ulp minus one plus the
 *     kept lsb (ties to even), shift;
 *   results below 2^-14 (f16 subnormals and zero): adding 0.5f puts the
 *     value's f16-subnormal units in the low mantissa bits of a float, and
 *     the FPU rounds to nearest even (0.5 + x stays normal, so FTZ/DAZ only
 *     ever turns an f32-subnormal input, far below f16's range, into 0);
 *   finite |x| >= 65504 saturates to 65504 instead of rounding to Inf: a
 *     huge gradient is better sent as the largest half than as an Inf the
 *     server must reject;
 *   Inf stays Inf and NaN becomes a quiet NaN, so validate() rejects them. */
static inline uint16_t f32_to_f16(uint32_t u)
{
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    uint32_t nrm = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
    uint32_t sub = fbits(bitsf(a) + 0.5f) - 0x3f000000u;
    uint32_t o = sel(a < 0x38800000u, sub, nrm);
    o = sel(a >= 0x477fe000u, 0x7bffu, o);
    o = sel(a >= 0x7f800000u, 0x7c00u | (uint32_t)(a > 0x7f800000u) << 9, o);
    return (uint16_t)(o | sign);
}

/* f16 bits -> f32 bits, exact. Subnormals go through a float subtraction of
 * normal numbers (magic 2^-14), never through subnormal arithmetic. */
static inline float f16_to_f32(uint16_t h)
{
    uint32_t m = (uint32_t)(h & 0x7fffu) << 13;
    uint32_t e = m & 0x0f800000u;
    uint32_t nrm = m + 0x38000000u + sel(e == 0x0f800000u, 0x38000000u, 0); /* Inf/NaN */
    uint32_t sub = fbits(bitsf(m + 0x38800000u) - bitsf(0x38800000u));
    uint32_t o = sel(e == 0, sub, nrm);
    return bitsf(o | (uint32_t)(h & 0x8000u) << 16);
}

static size_t half_size(size_t n, const zp_codec_params *p)
{
    return 2 * n;
}

static size_t fp16_encode(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce,
                          void *out)
{
    unsigned char *o = out;
    for (size_t i = 0; i < n; i++)
        st16(o + 2 * i, f32_to_f16(fbits(x[i])));
    return 2 * n;
}

/* fp16 and bf16 payloads: 2 bytes a value, none with an all-ones exponent
 * (`expmask`: Inf or NaN). */
static int half_validate(const zp_codec_ops *c, uint16_t expmask, const void *buf, size_t len,
                         size_t n, char *err, size_t errlen)
{
    const unsigned char *b = buf;
    if (len % 2 != 0 || len / 2 != n)
        return size_err(c, n, 2 * n, len, err, errlen);
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= (ld16(b + 2 * i) & expmask) == expmask;
    if (!bad)
        return 0;
    size_t i = 0;
    while ((ld16(b + 2 * i) & expmask) != expmask)
        i++;
    return zp_seterr(err, errlen, ZEPS_ENONFINITE, "%s: value %zu is NaN or Inf", c->name, i);
}

static int fp16_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    return half_validate(&zp_codec_fp16, 0x7c00u, buf, len, n, err, errlen);
}

static void fp16_decode(const void *buf, size_t len, size_t n, float *out)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        out[i] = f16_to_f32(ld16(b + 2 * i));
}

static void fp16_decode_add(const void *buf, size_t len, size_t n, float alpha, float *acc)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        acc[i] += alpha * f16_to_f32(ld16(b + 2 * i));
}

const zp_codec_ops zp_codec_fp16 = {
    .name = "fp16",
    .id = ZP_CODEC_FP16,
    .layout = "[n x IEEE binary16]",
    .lossless = false,
    .stochastic = false,
    .max_size = half_size,
    .encode = fp16_encode,
    .validate = fp16_validate,
    .decode = fp16_decode,
    .decode_add = fp16_decode_add,
};

/* ------------------------------------------------------------------ */
/* bf16: the top half of an f32, round to nearest even                  */

/* Same rules as fp16: finite values that would round to Inf saturate to the
 * largest finite bf16, Inf stays Inf, NaN stays a (quiet) NaN. */
static inline uint16_t f32_to_bf16(uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    r = (a < 0x7f800000u && (r & 0x7fffu) == 0x7f80u) ? r - 1 : r; /* 0x7f7f | sign */
    r = a > 0x7f800000u ? (u >> 16) | 0x40u : r;
    r = a == 0x7f800000u ? u >> 16 : r;
    return (uint16_t)r;
}

static size_t bf16_encode(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce,
                          void *out)
{
    unsigned char *o = out;
    for (size_t i = 0; i < n; i++)
        st16(o + 2 * i, f32_to_bf16(fbits(x[i])));
    return 2 * n;
}

static int bf16_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    return half_validate(&zp_codec_bf16, 0x7f80u, buf, len, n, err, errlen);
}

static void bf16_decode(const void *buf, size_t len, size_t n, float *out)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        out[i] = bitsf((uint32_t)ld16(b + 2 * i) << 16);
}

static void bf16_decode_add(const void *buf, size_t len, size_t n, float alpha, float *acc)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        acc[i] += alpha * bitsf((uint32_t)ld16(b + 2 * i) << 16);
}

const zp_codec_ops zp_codec_bf16 = {
    .name = "bf16",
    .id = ZP_CODEC_BF16,
    .layout = "[n x bfloat16]",
    .lossless = false,
    .stochastic = false,
    .max_size = half_size,
    .encode = bf16_encode,
    .validate = bf16_validate,
    .decode = bf16_decode,
    .decode_add = bf16_decode_add,
};

/* ------------------------------------------------------------------ */
/* int8: per-block scale max|x|/127, stochastic rounding                */

static uint32_t int8_block(const zp_codec_params *p)
{
    return p && p->block ? p->block : ZP_CODEC_INT8_BLOCK_DEFAULT;
}

static size_t nblocks(size_t n, size_t B)
{
    return n / B + (n % B != 0);
}

static size_t int8_size(size_t n, const zp_codec_params *p)
{
    return 4 + 4 * nblocks(n, int8_block(p)) + n;
}

/* lowbias32 (C. Wellons): a bijective 32-bit hash with good avalanche, two
 * multiplies. Together with a per-block key from zp_mix64 it is the
 * counter-based generator of int8's stochastic rounding. */
static inline uint32_t hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Quantise one block of L values with scale s > 0 (a normal float):
 * q = floor(x/s + u), u uniform on the 2^-16 grid of [0, 1), so E[q] = x/s.
 * Adding 128 first makes the argument positive, so truncation is floor, and
 * puts it on a grid where an integer x/s plus u is exact: values that are
 * multiples of s come back exactly. The clamp only catches x/s rounding a
 * hair above 127. */
static void int8_quantise(const float *x, size_t L, float s, uint32_t key, int8_t *q)
{
    for (size_t j = 0; j < L; j++) {
        float u = (float)(hash32((uint32_t)j + key) >> 16) * 0x1p-16f;
        float t = (x[j] / s + 128.0f) + u;
        int v = (int)t - 128;
        v = v < -127 ? -127 : v;
        v = v > 127 ? 127 : v;
        q[j] = (int8_t)v;
    }
}

static size_t int8_encode(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce,
                          void *out)
{
    unsigned char *o = out;
    uint32_t B = int8_block(p);
    size_t nb = nblocks(n, B);
    unsigned char *scales = o + 4;
    int8_t *q = (int8_t *)(o + 4 + 4 * nb);
    uint64_t base = zp_mix64((p ? p->seed : 0) ^ zp_mix64(nonce ^ 0x696e7438ull /* "int8" */));
    st32(o, B);
    for (size_t b = 0; b < nb; b++) {
        size_t first = b * B, L = n - first < B ? n - first : B;
        /* max |x| on the bit patterns: an integer max reduction vectorises
         * (a float one would not, without -ffast-math) */
        int32_t mx = 0;
        for (size_t j = 0; j < L; j++) {
            int32_t a = (int32_t)(fbits(x[first + j]) & 0x7fffffffu);
            mx = a > mx ? a : mx;
        }
        float s = bitsf((uint32_t)mx) / 127.0f;
        if (!finite_bits((uint32_t)mx) || !(s >= FLT_MIN)) {
            /* NaN/Inf in: send a non-finite scale validate() rejects.
             * Scale below FLT_MIN (max|x| < 1.5e-36): send zeros, so the
             * result does not depend on FTZ/DAZ; error feedback keeps them. */
            if (finite_bits((uint32_t)mx))
                s = 0.0f;
            memset(q + first, 0, L);
        } else {
            /* max|x| near FLT_MAX: m/127 may round up so that 127 s is Inf */
            while (!isfinite(127.0f * s))
                s = bitsf(fbits(s) - 1);
            int8_quantise(x + first, L, s, (uint32_t)zp_mix64(base + b), q + first);
        }
        stf(scales + 4 * b, s);
    }
    return 4 + 4 * nb + n;
}

static int int8_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    const unsigned char *b = buf;
    if (len < 4)
        return zp_seterr(err, errlen, ZEPS_ESIZE,
                         "int8 payload of %zu bytes is shorter than its 4-byte block size", len);
    uint32_t B = ld32(b);
    if (B == 0 || B > ZP_CODEC_INT8_BLOCK_MAX)
        return zp_seterr(err, errlen, ZEPS_EPROTO, "int8: block size %u outside 1..%u", B,
                         ZP_CODEC_INT8_BLOCK_MAX);
    /* n <= len first, so the sum below cannot overflow for any real buffer */
    size_t nb = nblocks(n, B);
    if (n > len || len != 4 + 4 * nb + n)
        return size_err(&zp_codec_int8, n, 4 + 4 * nblocks(n, B) + n, len, err, errlen);
    for (size_t i = 0; i < nb; i++) {
        float s = ldf(b + 4 + 4 * i);
        if (!isfinite(s))
            return zp_seterr(err, errlen, ZEPS_ENONFINITE, "int8: scale of block %zu is %g", i,
                             (double)s);
        if (!(s >= 0.0f))
            return zp_seterr(err, errlen, ZEPS_EPROTO, "int8: scale of block %zu is negative (%g)",
                             i, (double)s);
        /* the encoder keeps 127 s finite; a larger scale would decode to Inf */
        if (!isfinite(127.0f * s))
            return zp_seterr(err, errlen, ZEPS_EPROTO,
                             "int8: scale of block %zu is %g, too large (127 x scale overflows)", i,
                             (double)s);
    }
    /* -128 is never produced (|q| <= 127 keeps the code symmetric) */
    const unsigned char *q = b + 4 + 4 * nb;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= q[i] == 0x80;
    if (bad) {
        size_t i = 0;
        while (q[i] != 0x80)
            i++;
        return zp_seterr(err, errlen, ZEPS_EPROTO, "int8: value %zu is -128 (allowed: -127..127)",
                         i);
    }
    return 0;
}

static void int8_decode_add(const void *buf, size_t len, size_t n, float alpha, float *acc)
{
    const unsigned char *b = buf;
    uint32_t B = ld32(b);
    size_t nb = nblocks(n, B);
    const int8_t *q = (const int8_t *)(b + 4 + 4 * nb);
    for (size_t k = 0; k < nb; k++) {
        size_t first = k * B, L = n - first < B ? n - first : B;
        float s = ldf(b + 4 + 4 * k);
        for (size_t j = 0; j < L; j++)
            acc[first + j] += alpha * ((float)q[first + j] * s);
    }
}

static void int8_decode(const void *buf, size_t len, size_t n, float *out)
{
    const unsigned char *b = buf;
    uint32_t B = ld32(b);
    size_t nb = nblocks(n, B);
    const int8_t *q = (const int8_t *)(b + 4 + 4 * nb);
    for (size_t k = 0; k < nb; k++) {
        size_t first = k * B, L = n - first < B ? n - first : B;
        float s = ldf(b + 4 + 4 * k);
        for (size_t j = 0; j < L; j++)
            out[first + j] = (float)q[first + j] * s;
    }
}

const zp_codec_ops zp_codec_int8 = {
    .name = "int8",
    .id = ZP_CODEC_INT8,
    .layout = "[u32 B][ceil(n/B) x f32 scale][n x i8 value]",
    .lossless = false,
    .stochastic = true,
    .max_size = int8_size,
    .encode = int8_encode,
    .validate = int8_validate,
    .decode = int8_decode,
    .decode_add = int8_decode_add,
};

/* ------------------------------------------------------------------ */
/* sign: one bit per element and one scale, mean |x| (EF-signSGD)       */

static size_t sign_size(size_t n, const zp_codec_params *p)
{
    return 4 + n / 8 + (n % 8 != 0);
}

/* sum |x| in double: eight independent lanes, so the loop vectorises while
 * the order of additions (and so the result) stays fixed. */
static double sum_abs(const float *x, size_t n)
{
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += (double)fabsf(x[i + l]);
    double s = 0;
    for (; i < n; i++)
        s += (double)fabsf(x[i]);
    for (int l = 0; l < 8; l++)
        s += lane[l];
    return s;
}

static size_t sign_encode(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce,
                          void *out)
{
    unsigned char *o = out;
    float s = n ? (float)(sum_abs(x, n) / (double)n) : 0.0f;
    if (isfinite(s) && !(s >= FLT_MIN))
        s = 0.0f; /* as int8: independent of FTZ/DAZ */
    stf(o, s);
    unsigned char *bits = o + 4;
    size_t full = n / 8;
    /* the unrolled lanes let the vectoriser turn the outer loop into
     * shifts and masks on 8 elements at a time */
    for (size_t j = 0; j < full; j++) {
        uint32_t v = 0;
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++)
            v |= (uint32_t)((int32_t)fbits(x[8 * j + l]) >> 31) & (1u << l);
        bits[j] = (unsigned char)v;
    }
    if (n % 8) {
        uint32_t v = 0;
        for (size_t l = 0; l < n % 8; l++)
            v |= (fbits(x[8 * full + l]) >> 31) << l;
        bits[full] = (unsigned char)v;
    }
    return sign_size(n, p);
}

static int sign_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    const unsigned char *b = buf;
    size_t want = sign_size(n, NULL);
    if (len != want)
        return size_err(&zp_codec_sign, n, want, len, err, errlen);
    float s = ldf(b);
    if (!isfinite(s))
        return zp_seterr(err, errlen, ZEPS_ENONFINITE, "sign: scale is %g", (double)s);
    if (!(s >= 0.0f))
        return zp_seterr(err, errlen, ZEPS_EPROTO, "sign: scale is negative (%g)", (double)s);
    if (n % 8 && (b[len - 1] >> (n % 8)) != 0)
        return zp_seterr(err, errlen, ZEPS_EPROTO,
                         "sign: bits past element %zu in the last byte must be zero", n - 1);
    return 0;
}

/* out[i] = (bit i set ? -s : s) for the bits of a sign payload, as float
 * bits sb ^ sign; acc[i] += that when `add`. Shared by decode and
 * decode_add; the inline expansion with a constant `add` keeps both loops
 * branch-free. */
static inline void sign_expand(const unsigned char *bits, size_t n, uint32_t sb, float *out,
                               bool add)
{
    size_t full = n / 8;
    for (size_t j = 0; j < full; j++) {
        uint32_t byte = bits[j];
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) {
            float v = bitsf(sb ^ ((byte & (1u << l)) ? 0x80000000u : 0u));
            out[8 * j + l] = add ? out[8 * j + l] + v : v;
        }
    }
    for (size_t i = 8 * full; i < n; i++) {
        float v = bitsf(sb ^ ((((uint32_t)bits[full] >> (i % 8)) & 1u) << 31));
        out[i] = add ? out[i] + v : v;
    }
}

static void sign_decode_add(const void *buf, size_t len, size_t n, float alpha, float *acc)
{
    const unsigned char *b = buf;
    sign_expand(b + 4, n, fbits(alpha * ldf(b)), acc, true);
}

static void sign_decode(const void *buf, size_t len, size_t n, float *out)
{
    const unsigned char *b = buf;
    sign_expand(b + 4, n, fbits(ldf(b)), out, false);
}

const zp_codec_ops zp_codec_sign = {
    .name = "sign",
    .id = ZP_CODEC_SIGN,
    .layout = "[f32 scale][ceil(n/8) bytes, bit i%8 of byte i/8 = sign bit of x_i]",
    .lossless = false,
    .stochastic = false,
    .max_size = sign_size,
    .encode = sign_encode,
    .validate = sign_validate,
    .decode = sign_decode,
    .decode_add = sign_decode_add,
};

/* ------------------------------------------------------------------ */
/* topk / randk: [u32 k][k x u32 index][k x f32 value]                  */

size_t zp_codec_k(size_t n, const zp_codec_params *p)
{
    if (n == 0)
        return 0;
    if (p->count > 0)
        return p->count < n ? (size_t)p->count : n;
    double k = ceil(p->fraction * (double)n);
    if (!(k >= 1.0)) /* also NaN */
        return 1;
    return k < (double)n ? (size_t)k : n;
}

static size_t sparse_size(size_t n, const zp_codec_params *p)
{
    return 4 + 8 * zp_codec_k(n, p);
}

static int sparse_validate(const zp_codec_ops *c, const void *buf, size_t len, size_t n, char *err,
                           size_t errlen)
{
    const unsigned char *b = buf;
    if (len < 4)
        return zp_seterr(err, errlen, ZEPS_ESIZE,
                         "%s payload of %zu bytes is shorter than its 4-byte k", c->name, len);
    uint32_t k = ld32(b);
    if (k > n)
        return zp_seterr(err, errlen, ZEPS_EPROTO, "%s: k = %u exceeds n = %zu", c->name, k, n);
    if (len != 4 + 8 * (size_t)k)
        return zp_seterr(err, errlen, ZEPS_ESIZE,
                         "%s payload with k = %u must be %zu bytes, got %zu", c->name, k,
                         4 + 8 * (size_t)k, len);
    const unsigned char *idx = b + 4;
    uint32_t prev = 0;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t i = ld32(idx + 4 * (size_t)j);
        if (i >= n)
            return zp_seterr(err, errlen, ZEPS_ERANGE, "%s: index[%u] = %u is not below n = %zu",
                             c->name, j, i, n);
        if (j > 0 && i <= prev)
            return zp_seterr(err, errlen, ZEPS_EPROTO,
                             "%s: indices must be strictly increasing, index[%u] = %u %s %u",
                             c->name, j, i, i == prev ? "duplicates" : "follows", prev);
        prev = i;
    }
    size_t j = first_nonfinite_f32(idx + 4 * (size_t)k, k);
    if (j < k)
        return zp_seterr(err, errlen, ZEPS_ENONFINITE, "%s: value %zu (index %u) is NaN or Inf",
                         c->name, j, ld32(idx + 4 * j));
    return 0;
}

static void sparse_decode_add(const void *buf, size_t len, size_t n, float alpha, float *acc)
{
    const unsigned char *b = buf;
    size_t k = ld32(b);
    const unsigned char *idx = b + 4, *val = b + 4 + 4 * k;
    for (size_t j = 0; j < k; j++)
        acc[ld32(idx + 4 * j)] += alpha * ldf(val + 4 * j);
}

static void sparse_decode(const void *buf, size_t len, size_t n, float *out)
{
    const unsigned char *b = buf;
    size_t k = ld32(b);
    const unsigned char *idx = b + 4, *val = b + 4 + 4 * k;
    if (n > 0)
        memset(out, 0, n * sizeof(float));
    for (size_t j = 0; j < k; j++)
        out[ld32(idx + 4 * j)] = ldf(val + 4 * j);
}

/* The bits of |x|: for non-negative floats, integer order is numeric order. */
static inline uint32_t mag(float x)
{
    return fbits(x) & 0x7fffffffu;
}

/* Radix select of the k-th largest magnitude, on digits of 11, 11 and 10
 * bits. Returns (through *prefix, *shift, *ties) the rule "send x_i if
 * mag >> shift > prefix, or if it equals prefix and fewer than `ties` such
 * elements were sent": exactly k elements, the ties broken by lowest index.
 * Stops early when a whole bucket is taken. Three O(n) passes at most,
 * no scratch memory, no sort. Requires 0 < k < n. */
static void radix_select(const float *x, size_t n, size_t k, uint32_t *prefix, int *shift,
                         size_t *ties)
{
    static const int sh[3] = {21, 10, 0}, width[3] = {11, 11, 10};
    size_t hist[2048];
    uint32_t pre = 0;
    size_t need = k;
    for (int lv = 0; lv < 3; lv++) {
        size_t nbins = (size_t)1 << width[lv], mask = nbins - 1;
        memset(hist, 0, nbins * sizeof(hist[0]));
        if (lv == 0) {
            for (size_t i = 0; i < n; i++)
                hist[mag(x[i]) >> 21]++;
        } else {
            int up = sh[lv] + width[lv];
            for (size_t i = 0; i < n; i++) {
                uint32_t m = mag(x[i]);
                if ((m >> up) == pre)
                    hist[(m >> sh[lv]) & mask]++;
            }
        }
        size_t b = nbins, above = 0;
        while (b > 0) {
            b--;
            if (above + hist[b] >= need)
                break;
            above += hist[b];
        }
        need -= above;
        pre = (pre << width[lv]) | (uint32_t)b;
        *shift = sh[lv];
        if (hist[b] == need)
            break; /* the whole bucket is sent: no ties to break */
    }
    *prefix = pre;
    *ties = need;
}

static size_t topk_encode(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce,
                          void *out)
{
    unsigned char *o = out;
    size_t k = zp_codec_k(n, p);
    assert(n <= UINT32_MAX);
    st32(o, (uint32_t)k);
    unsigned char *idx = o + 4, *val = o + 4 + 4 * k;
    if (k == n) {
        for (size_t i = 0; i < n; i++) {
            st32(idx + 4 * i, (uint32_t)i);
            stf(val + 4 * i, x[i]);
        }
        return 4 + 8 * k;
    }
    if (k == 0)
        return 4;
    uint32_t pre;
    int shift;
    size_t ties;
    radix_select(x, n, k, &pre, &shift, &ties);
    size_t j = 0;
    for (size_t i = 0; i < n && j < k; i++) {
        uint32_t m = mag(x[i]) >> shift;
        if (m > pre || (m == pre && ties > 0)) {
            ties -= m == pre;
            st32(idx + 4 * j, (uint32_t)i);
            stf(val + 4 * j, x[i]);
            j++;
        }
    }
    assert(j == k);
    return 4 + 8 * k;
}

static int topk_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    return sparse_validate(&zp_codec_topk, buf, len, n, err, errlen);
}

const zp_codec_ops zp_codec_topk = {
    .name = "topk",
    .id = ZP_CODEC_TOPK,
    .layout = "[u32 k][k x u32 index, strictly increasing][k x f32 value]",
    .lossless = false,
    .stochastic = false,
    .max_size = sparse_size,
    .encode = topk_encode,
    .validate = topk_validate,
    .decode = sparse_decode,
    .decode_add = sparse_decode_add,
};

/* k indices uniformly without replacement by selection sampling: element i
 * is taken with probability (still needed) / (still left), which yields
 * every k-subset with equal probability and the indices in order. Values
 * are scaled by n/k, so E[decoded] = x (up to the rounding of n/k, and
 * except for |x| > FLT_MAX k/n, which saturates). */
static size_t randk_encode(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce,
                           void *out)
{
    unsigned char *o = out;
    size_t k = zp_codec_k(n, p);
    assert(n <= UINT32_MAX);
    st32(o, (uint32_t)k);
    if (k == 0)
        return 4;
    unsigned char *idx = o + 4, *val = o + 4 + 4 * k;
    float scale = (float)((double)n / (double)k);
    zp_rng r;
    zp_rng_seed(&r, p->seed, nonce, ZP_CODEC_RANDK);
    size_t need = k, j = 0;
    for (size_t i = 0; need > 0; i++) {
        size_t left = n - i;
        if (need == left || zp_rng_below(&r, (uint32_t)left) < need) {
            st32(idx + 4 * j, (uint32_t)i);
            float v = x[i] * scale;
            /* finite in, finite out: saturate as fp16/bf16 do (NaN stays NaN) */
            v = v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : v;
            stf(val + 4 * j, v);
            j++;
            need--;
        }
    }
    return 4 + 8 * k;
}

static int randk_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    return sparse_validate(&zp_codec_randk, buf, len, n, err, errlen);
}

const zp_codec_ops zp_codec_randk = {
    .name = "randk",
    .id = ZP_CODEC_RANDK,
    .layout = "[u32 k][k x u32 index, strictly increasing][k x f32 value * n/k]",
    .lossless = false,
    .stochastic = true,
    .max_size = sparse_size,
    .encode = randk_encode,
    .validate = randk_validate,
    .decode = sparse_decode,
    .decode_add = sparse_decode_add,
};

/* ------------------------------------------------------------------ */
/* registry, parameters, error feedback                                 */

/* In id order: codecs[i].id == i. */
static const zp_codec_ops *const codecs[] = {
    &zp_codec_none, &zp_codec_fp16, &zp_codec_bf16,  &zp_codec_int8,
    &zp_codec_sign, &zp_codec_topk, &zp_codec_randk,
};

#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

const zp_codec_ops *zp_codec_at(size_t i)
{
    return i < NCODECS ? codecs[i] : NULL;
}

const zp_codec_ops *zp_codec_by_id(uint32_t id)
{
    return id < NCODECS ? codecs[id] : NULL;
}

const zp_codec_ops *zp_codec_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < NCODECS; i++)
        if (strcmp(codecs[i]->name, name) == 0)
            return codecs[i];
    return NULL;
}

void zp_codec_params_init(zp_codec_params *p)
{
    *p = (zp_codec_params){
        .count = 0,
        .fraction = ZP_CODEC_FRACTION_DEFAULT,
        .block = ZP_CODEC_INT8_BLOCK_DEFAULT,
        .seed = 0,
    };
}

int zp_codec_params_check(const zp_codec_ops *c, const zp_codec_params *p, char *err, size_t errlen)
{
    if (c->id == ZP_CODEC_TOPK || c->id == ZP_CODEC_RANDK) {
        if (p->count == 0 && !(p->fraction > 0.0 && p->fraction <= 1.0))
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "%s: fraction = %g must be in (0, 1] (or set a count)", c->name,
                             p->fraction);
    }
    if (c->id == ZP_CODEC_INT8 && p->block > ZP_CODEC_INT8_BLOCK_MAX)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "int8: block = %u must be in 1..%u", p->block,
                         ZP_CODEC_INT8_BLOCK_MAX);
    return 0;
}

size_t zp_ef_encode(const zp_codec_ops *c, const zp_codec_params *p, float *residual,
                    const float *g, size_t n, uint64_t nonce, void *out)
{
    for (size_t i = 0; i < n; i++)
        residual[i] += g[i];
    size_t len = c->encode(residual, n, p, nonce, out);
    /* r - D(c) computed as r + (-1) * D(c), which is the same float: no
     * dense scratch copy of D(c), and O(k) for the sparse codecs. */
    c->decode_add(out, len, n, -1.0f, residual);
    return len;
}
