/*
 * fuzz_codec.c - libFuzzer target: every codec's validate, then decode and
 * decode_add of what validate accepted (common/codec/).
 *
 * Input: a byte picking the codec (zp_codec_at, modulo their number), a
 * u32 element count n (modulo 2^16, so a payload that claims a large n
 * still fits in memory) and the payload (the rest). A payload validate
 * accepts must decode without reading outside it (ASan) and decode_add with
 * alpha 1 onto zeros must give what decode gave, element by element; a
 * difference aborts.
 */
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t codec_count(void)
{
    size_t n = 0;
    while (zp_codec_at(n))
        n++;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zf_cursor c = {data, size};
    const zp_codec_ops *codec = zp_codec_at(zf_byte(&c) % codec_count());
    size_t n = zf_u32(&c) % (1u << 16);
    /* the payload in a buffer of its own, so ASan sees a read past its end */
    uint8_t *buf = malloc(c.left ? c.left : 1);
    memcpy(buf, c.p, c.left);
    char err[256];
    if (codec->validate(buf, c.left, n, err, sizeof(err)) == 0) {
        float *out = malloc((n ? n : 1) * sizeof(float));
        float *acc = calloc(n ? n : 1, sizeof(float));
        codec->decode(buf, c.left, n, out);
        codec->decode_add(buf, c.left, n, 1.0f, acc);
        for (size_t i = 0; i < n; i++)
            if (!(out[i] == acc[i]))
                abort(); /* decode_add disagrees with decode */
        free(out);
        free(acc);
    }
    free(buf);
    return 0;
}
