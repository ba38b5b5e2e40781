/*
 * codec_bits.h - what the codec files share: unaligned little-endian loads
 * and stores, float <-> bits, a mask select, and the two checks every
 * validate() starts with (exact size, finite f32 values).
 *
 * Everything here is static inline so that each codec's loops still see the
 * helpers' bodies and vectorise as they did when the codecs lived in one
 * file. Payload bytes are read and written with memcpy: network buffers carry
 * no alignment promise, and memcpy of a fixed small size compiles to a plain
 * (vectorisable) load or store. Internal to common/codec/; not installed.
 */
#ifndef ZP_CODEC_BITS_H
#define ZP_CODEC_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec.h"
#include "errors.h"
#include "zeps_errors.h"

/* Payloads are little-endian and read by memcpy: zeps supports only
 * little-endian hosts, like the rest of its wire format. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "zeps codecs assume little-endian");

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
static inline int size_err(const zp_codec_ops *c, size_t n, size_t want, size_t len, char *err,
                    size_t errlen)
{
    return zp_errors_set(err, errlen, ZEPS_ESIZE,
                         "%s payload for %zu values must be %zu bytes, got %zu", c->name, n, want,
                         len);
}

/* First element of an f32 array (unaligned) that is NaN or Inf; n if none.
 * Branch-free OR-reduction first, since payloads are almost always clean. */
static inline size_t first_nonfinite_f32(const unsigned char *p, size_t n)
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

#endif
