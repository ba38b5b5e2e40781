/*
 * codec.c - the codec registry (lookup by name and by Header.codec id), the
 * encode-time parameters and error feedback; see codec.h and
 * docs/compression.md.
 *
 * Each codec family is its own file, a const zp_codec_ops per codec:
 * float.c (none, fp16, bf16), int8.c, sign.c and sparsify.c (topk, randk).
 * Adding a codec is adding its file and one line in the table below.
 */
#include "codec.h"

#include <string.h>

#include "errors.h"
#include "zeps_errors.h"

/* In id order: codecs[i].id == i. */
static const zp_codec_ops *const codecs[] = {
    &zp_float_none_ops, &zp_float_fp16_ops,    &zp_float_bf16_ops,     &zp_int8_ops,
    &zp_sign_ops,       &zp_sparsify_topk_ops, &zp_sparsify_randk_ops,
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
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "%s: fraction = %g must be in (0, 1] (or set a count)", c->name,
                                 p->fraction);
    }
    if (c->id == ZP_CODEC_INT8 && p->block > ZP_CODEC_INT8_BLOCK_MAX)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "int8: block = %u must be in 1..%u",
                             p->block, ZP_CODEC_INT8_BLOCK_MAX);
    return 0;
}

size_t zp_codec_ef_encode(const zp_codec_ops *c, const zp_codec_params *p, float *residual,
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
