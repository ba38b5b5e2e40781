/*
 * float.c - the codecs that send every value as a float: none (raw f32),
 * fp16 (IEEE binary16) and bf16 (bfloat16); see codec.h for the layouts and
 * docs/compression.md for the rounding rules.
 *
 * The conversions are integer bit manipulation in branch-free loops the
 * compiler vectorises at baseline x86-64 (SSE2: no F16C), with no call per
 * element. fp16 and bf16 share the size and the validation (2 bytes a value,
 * no all-ones exponent), so they live together.
 */
#include <math.h>
#include <string.h>

#include "codec.h"
#include "codec_bits.h"
#include "errors.h"

/* ------------------------------------------------------------------ */
/* none: raw f32                                                      */

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
        return size_err(&zp_float_none_ops, n, 4 * n, len, err, errlen);
    size_t i = first_nonfinite_f32(buf, n);
    if (i < n)
        return zp_errors_set(err, errlen, ZEPS_ENONFINITE, "none: value %zu is NaN or Inf", i);
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

const zp_codec_ops zp_float_none_ops = {
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
/* fp16: IEEE binary16, round to nearest even, finite values saturate */

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
    return zp_errors_set(err, errlen, ZEPS_ENONFINITE, "%s: value %zu is NaN or Inf", c->name, i);
}

static int fp16_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    return half_validate(&zp_float_fp16_ops, 0x7c00u, buf, len, n, err, errlen);
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

const zp_codec_ops zp_float_fp16_ops = {
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
/* bf16: the top half of an f32, round to nearest even                */

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
    return half_validate(&zp_float_bf16_ops, 0x7f80u, buf, len, n, err, errlen);
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

const zp_codec_ops zp_float_bf16_ops = {
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
