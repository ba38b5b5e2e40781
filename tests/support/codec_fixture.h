/*
 * codec_fixture.h - what the codec tests share (test_codec: the rounding
 * rules; test_codec_validate: validation, decode_add, error feedback, edge
 * cases): random inputs, default parameters, encoding into a buffer of
 * exactly max_size bytes, round trips, and check_payload, which runs
 * validate() on an exact-size heap copy so that under ASan an out-of-bounds
 * read fails the test. Static inline helpers that assert with Check: call
 * them from a test.
 */
#ifndef ZT_CODEC_FIXTURE_H
#define ZT_CODEC_FIXTURE_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "codec.h"
#include "rng.h"
#include "zeps_errors.h"

static inline float *randn(size_t n, uint64_t seed, double scale)
{
    zp_rng r;
    zp_rng_seed(&r, seed, 0, 0);
    float *x = zp_alloc(n * sizeof(float) + 1);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(scale * zp_rng_normal(&r));
    return x;
}

static inline zp_codec_params params(void)
{
    zp_codec_params p;
    zp_codec_params_init(&p);
    p.seed = 1234;
    return p;
}

/* Encode into a buffer of exactly max_size bytes; checks encode's length. */
static inline unsigned char *enc(const zp_codec_ops *c, const float *x, size_t n, const zp_codec_params *p,
                          uint64_t nonce, size_t *len)
{
    size_t want = c->max_size(n, p);
    unsigned char *buf = zp_alloc(want);
    *len = c->encode(x, n, p, nonce, buf);
    ck_assert_uint_eq(*len, want);
    return buf;
}

/* Encode, validate and decode: the dense result, freshly allocated. */
static inline float *roundtrip(const zp_codec_ops *c, const float *x, size_t n, const zp_codec_params *p,
                        uint64_t nonce)
{
    size_t len;
    unsigned char *buf = enc(c, x, n, p, nonce, &len);
    char err[256] = "";
    int rc = c->validate(buf, len, n, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: own payload rejected: %s", c->name, err);
    float *out = zp_alloc(n * sizeof(float) + 1);
    c->decode(buf, len, n, out);
    free(buf);
    return out;
}

/* validate() on an exact-size heap copy of buf[0..len): returns its code and
 * checks that a failure comes with a message containing `want` (if set). */
static inline int check_payload(const zp_codec_ops *c, const void *buf, size_t len, size_t n, int want_rc,
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

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t enc1_16(const zp_codec_ops *c, float x)
{
    unsigned char b[2];
    zp_codec_params p = params();
    c->encode(&x, 1, &p, 0, b);
    return (uint16_t)(b[0] | b[1] << 8);
}

#endif
