/*
 * int8.c - the int8 codec: per-block scale max|x|/127 and stochastic
 * rounding to [-127, 127]; see codec.h for the layout and
 * docs/compression.md for the rules.
 *
 * Quantisation runs in branch-free loops the compiler vectorises at baseline
 * x86-64. The stochastic rounding therefore uses a counter-based generator,
 * a 32-bit hash of (element, block key), instead of a stateful one: the
 * random number of element j of block b depends only on (seed, nonce, b, j),
 * which is what makes it both vectorisable and deterministic.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "codec.h"
#include "codec_bits.h"
#include "errors.h"
#include "rng.h"

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
 * multiplies. Together with a per-block key from zp_rng_mix64 it is the
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
    uint64_t base =
        zp_rng_mix64((p ? p->seed : 0) ^ zp_rng_mix64(nonce ^ 0x696e7438ull /* "int8" */));
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
            int8_quantise(x + first, L, s, (uint32_t)zp_rng_mix64(base + b), q + first);
        }
        stf(scales + 4 * b, s);
    }
    return 4 + 4 * nb + n;
}

static int int8_validate(const void *buf, size_t len, size_t n, char *err, size_t errlen)
{
    const unsigned char *b = buf;
    if (len < 4)
        return zp_errors_set(err, errlen, ZEPS_ESIZE,
                             "int8 payload of %zu bytes is shorter than its 4-byte block size",
                             len);
    uint32_t B = ld32(b);
    if (B == 0 || B > ZP_CODEC_INT8_BLOCK_MAX)
        return zp_errors_set(err, errlen, ZEPS_EPROTO, "int8: block size %u outside 1..%u", B,
                             ZP_CODEC_INT8_BLOCK_MAX);
    /* n <= len first, so the sum below cannot overflow for any real buffer */
    size_t nb = nblocks(n, B);
    if (n > len || len != 4 + 4 * nb + n)
        return size_err(&zp_int8_ops, n, 4 + 4 * nblocks(n, B) + n, len, err, errlen);
    for (size_t i = 0; i < nb; i++) {
        float s = ldf(b + 4 + 4 * i);
        if (!isfinite(s))
            return zp_errors_set(err, errlen, ZEPS_ENONFINITE, "int8: scale of block %zu is %g", i,
                                 (double)s);
        if (!(s >= 0.0f))
            return zp_errors_set(err, errlen, ZEPS_EPROTO,
                                 "int8: scale of block %zu is negative (%g)", i, (double)s);
        /* the encoder keeps 127 s finite; a larger scale would decode to Inf */
        if (!isfinite(127.0f * s))
            return zp_errors_set(
                err, errlen, ZEPS_EPROTO,
                "int8: scale of block %zu is %g, too large (127 x scale overflows)", i, (double)s);
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
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "int8: value %zu is -128 (allowed: -127..127)", i);
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

const zp_codec_ops zp_int8_ops = {
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
