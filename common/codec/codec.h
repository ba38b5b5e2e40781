/*
 * codec.h - gradient compression codecs, as an ops table per codec, and
 * error feedback on top of them.
 *
 * A codec turns n f32 values into a byte payload and back. Each has a small
 * numeric id that is meant to travel in Header.codec (0 = raw f32, which
 * version 1 of the protocol already sends) and a name for configuration.
 * Pushes carry a codec's payload from the client (worker/lib/dense.c, sparse.c) to the
 * shard (server/op/push.c); compressed pulls carry one back (server/table/cpull.c).
 *
 * The split of work follows who trusts what:
 *   - the client encodes (zp_codec_ef_encode: with error feedback, into a buffer it
 *     then sends); encoding trusts its input, which must be finite;
 *   - the server calls validate() on a payload from the network, which checks
 *     everything decode() relies on (exact length for n, ranges, ordering,
 *     finite numbers) without ever reading outside [buf, buf + len), and only
 *     then decode() (dense) or decode_add() (acc += alpha * decoded, O(k) for
 *     the sparse codecs). decode on an unvalidated payload is undefined.
 *
 * Payloads are self-describing given (codec id, n): whatever encode-time
 * parameter the decoder needs (int8's block size, topk/randk's k) is in the
 * payload, so the server needs no per-client codec parameters. All numbers
 * are little-endian; payloads need no alignment.
 *
 * Wire layouts (n = element count, nb = ceil(n / B)):
 *   none   (0)  [n x f32]
 *   fp16   (1)  [n x IEEE binary16]
 *   bf16   (2)  [n x bfloat16]
 *   int8   (3)  [u32 B][nb x f32 scale][n x i8 value]   value in [-127, 127]
 *   sign   (4)  [f32 scale][ceil(n/8) bytes bitmap]     bit i = sign of x_i
 *   topk   (5)  [u32 k][k x u32 index][k x f32 value]   indices increasing
 *   randk  (6)  [u32 k][k x u32 index][k x f32 value*n/k] indices increasing
 * docs/compression.md gives the rounding rules and the reasons.
 *
 * Every function here is pure (no state, no allocation, no globals): any
 * thread may call any of them at any time.
 */
#ifndef ZP_CODEC_H
#define ZP_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Header.codec values. A number is never reused for another codec. */
typedef enum zp_codec_id {
    ZP_CODEC_NONE = 0,
    ZP_CODEC_FP16 = 1,
    ZP_CODEC_BF16 = 2,
    ZP_CODEC_INT8 = 3,
    ZP_CODEC_SIGN = 4,
    ZP_CODEC_TOPK = 5,
    ZP_CODEC_RANDK = 6,
} zp_codec_id;

#define ZP_CODEC_INT8_BLOCK_DEFAULT 256u
#define ZP_CODEC_INT8_BLOCK_MAX     (1u << 20)
#define ZP_CODEC_FRACTION_DEFAULT   0.01

/* Encode-time parameters. Codecs read only the fields they use. */
typedef struct zp_codec_params {
    uint64_t count;  /* topk/randk: k = min(count, n); 0 = use fraction */
    double fraction; /* topk/randk when count == 0: k = ceil(fraction * n), >= 1 if n > 0 */
    uint32_t block;  /* int8: elements per scale, 1..ZP_CODEC_INT8_BLOCK_MAX; 0 = default */
    uint64_t seed;   /* int8 stochastic rounding, randk index choice */
} zp_codec_params;

typedef struct zp_codec_ops {
    const char *name;
    zp_codec_id id;
    const char *layout; /* the wire layout above, one line */
    bool lossless;      /* decode(encode(x)) == x for finite x */
    bool stochastic;    /* output depends on (seed, nonce) */

    /* Bytes encode() writes for n values: exact for every codec, so the
     * client can size its send buffer once. */
    size_t (*max_size)(size_t n, const zp_codec_params *p);

    /* Encode x[0..n) into out (max_size(n, p) bytes); returns the bytes
     * written. x must be finite: a NaN or Inf comes out as a payload that
     * validate() rejects. The result depends only on (x, n, p, nonce), so the
     * same (seed, nonce) gives the same bytes; use a fresh nonce per message
     * (e.g. the step) for fresh randomness. topk/randk need n <= UINT32_MAX. */
    size_t (*encode)(const float *x, size_t n, const zp_codec_params *p, uint64_t nonce, void *out);

    /* Check that buf[0..len) is a well-formed payload for n values. Returns
     * 0, or ZEPS_ESIZE (length), ZEPS_ENONFINITE (NaN/Inf), ZEPS_ERANGE (index
     * >= n) or ZEPS_EPROTO (any other rule) with a sentence in err. Reads
     * nothing outside buf[0..len). */
    int (*validate)(const void *buf, size_t len, size_t n, char *err, size_t errlen);

    /* Decode a validated payload into out[0..n) (zeros where a sparse codec
     * sent nothing). */
    void (*decode)(const void *buf, size_t len, size_t n, float *out);

    /* acc[i] += alpha * decoded[i] for a validated payload; touches only the
     * k sent elements for topk/randk. */
    void (*decode_add)(const void *buf, size_t len, size_t n, float alpha, float *acc);
} zp_codec_ops;

/* The codecs, for direct use (e.g. tests) and for the lookups below. */
extern const zp_codec_ops zp_float_none_ops;
extern const zp_codec_ops zp_float_fp16_ops;
extern const zp_codec_ops zp_float_bf16_ops;
extern const zp_codec_ops zp_int8_ops;
extern const zp_codec_ops zp_sign_ops;
extern const zp_codec_ops zp_sparsify_topk_ops;
extern const zp_codec_ops zp_sparsify_randk_ops;

/* Look up by name ("none", "fp16", ...) or by Header.codec value; NULL if
 * unknown. The returned table is static. */
const zp_codec_ops *zp_codec_find(const char *name);
const zp_codec_ops *zp_codec_by_id(uint32_t id);

/* The i-th codec in id order, NULL past the last: iterates the list of
 * names (for help texts and error messages). */
const zp_codec_ops *zp_codec_at(size_t i);

/* Defaults: count 0, fraction ZP_CODEC_FRACTION_DEFAULT, block
 * ZP_CODEC_INT8_BLOCK_DEFAULT, seed 0. */
void zp_codec_params_init(zp_codec_params *p);

/* Check the parameters `c` reads: 0 < fraction <= 1 when count == 0 (topk,
 * randk), block <= ZP_CODEC_INT8_BLOCK_MAX (int8; 0 = default). Returns 0 or
 * ZEPS_EINVAL with a sentence in err. */
int zp_codec_params_check(const zp_codec_ops *c, const zp_codec_params *p, char *err,
                          size_t errlen);

/* k that topk/randk send for n values: min(count, n), or ceil(fraction * n)
 * clamped to [1, n]; 0 if n == 0. */
size_t zp_sparsify_k(size_t n, const zp_codec_params *p);

/* One step of error feedback (EF-SGD, EF-signSGD): r <- r + g; c = C(r);
 * r <- r - D(c). Writes c into out (c->max_size(n, p) bytes) and returns its
 * length. residual and g are n floats and must not overlap; residual starts
 * as zeros and belongs to the caller, who keeps it between steps (one per
 * table slice). Over any number of steps, sum of D(c_t) = sum of g_t - r_T
 * up to float rounding, so nothing the codec drops is lost, only delayed.
 * randk's n/k scaling makes the residual grow when k < n/2 (it is unbiased,
 * not contractive); use randk without error feedback. */
size_t zp_codec_ef_encode(const zp_codec_ops *c, const zp_codec_params *p, float *residual,
                          const float *g, size_t n, uint64_t nonce, void *out);

#endif
