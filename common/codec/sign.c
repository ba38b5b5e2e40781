/*
 * sign.c - the sign codec (EF-signSGD): one bit per element and one scale,
 * mean |x|; see codec.h for the layout and docs/compression.md for the rules.
 *
 * Packing and expanding the bits are unrolled over 8 lanes so the
 * vectoriser turns them into shifts and masks; the scale is a sum in double
 * over eight fixed lanes, so the result does not depend on vector width.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "codec.h"
#include "codec_bits.h"
#include "errors.h"

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
        return size_err(&zp_sign_ops, n, want, len, err, errlen);
    float s = ldf(b);
    if (!isfinite(s))
        return zp_errors_set(err, errlen, ZEPS_ENONFINITE, "sign: scale is %g", (double)s);
    if (!(s >= 0.0f))
        return zp_errors_set(err, errlen, ZEPS_EPROTO, "sign: scale is negative (%g)", (double)s);
    if (n % 8 && (b[len - 1] >> (n % 8)) != 0)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
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

const zp_codec_ops zp_sign_ops = {
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
