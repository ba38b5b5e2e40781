/*
 * sparsify.c - the sparsifying codecs topk and randk, [u32 k][k x u32 index]
 * [k x f32 value], and zp_sparsify_k, the k both send; see codec.h for the
 * layouts and docs/compression.md for the rules.
 *
 * Neither sorts, and both emit indices already in increasing order: topk
 * finds the k-th largest magnitude by a three-pass radix select on the f32
 * bit patterns, randk draws its indices from zp_rng (selection sampling,
 * Knuth's algorithm S). They share the size, the validation and the decoders.
 */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "codec.h"
#include "codec_bits.h"
#include "errors.h"
#include "rng.h"

size_t zp_sparsify_k(size_t n, const zp_codec_params *p)
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
    return 4 + 8 * zp_sparsify_k(n, p);
}

static int sparse_validate(const zp_codec_ops *c, const void *buf, size_t len, size_t n, char *err,
                           size_t errlen)
{
    const unsigned char *b = buf;
    if (len < 4)
        return zp_errors_set(err, errlen, ZEPS_ESIZE,
                             "%s payload of %zu bytes is shorter than its 4-byte k", c->name, len);
    uint32_t k = ld32(b);
    if (k > n)
        return zp_errors_set(err, errlen, ZEPS_EPROTO, "%s: k = %u exceeds n = %zu", c->name, k, n);
    if (len != 4 + 8 * (size_t)k)
        return zp_errors_set(err, errlen, ZEPS_ESIZE,
                             "%s payload with k = %u must be %zu bytes, got %zu", c->name, k,
                             4 + 8 * (size_t)k, len);
    const unsigned char *idx = b + 4;
    uint32_t prev = 0;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t i = ld32(idx + 4 * (size_t)j);
        if (i >= n)
            return zp_errors_set(err, errlen, ZEPS_ERANGE,
                                 "%s: index[%u] = %u is not below n = %zu", c->name, j, i, n);
        if (j > 0 && i <= prev)
            return zp_errors_set(err, errlen, ZEPS_EPROTO,
                                 "%s: indices must be strictly increasing, index[%u] = %u %s %u",
                                 c->name, j, i, i == prev ? "duplicates" : "follows", prev);
        prev = i;
    }
    size_t j = first_nonfinite_f32(idx + 4 * (size_t)k, k);
    if (j < k)
        return zp_errors_set(err, errlen, ZEPS_ENONFINITE, "%s: value %zu (index %u) is NaN or Inf",
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
    size_t k = zp_sparsify_k(n, p);
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
    return sparse_validate(&zp_sparsify_topk_ops, buf, len, n, err, errlen);
}

const zp_codec_ops zp_sparsify_topk_ops = {
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
    size_t k = zp_sparsify_k(n, p);
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
    return sparse_validate(&zp_sparsify_randk_ops, buf, len, n, err, errlen);
}

const zp_codec_ops zp_sparsify_randk_ops = {
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
