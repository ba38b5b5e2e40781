/*
 * fuzz_input.h - how the fuzz targets of tests/fuzz cut libFuzzer's bytes
 * into what they feed the code under test, and how the seed generator
 * (fuzz_seeds.c) writes the same layout from real messages.
 *
 * A byte string is read front to back by a cursor: single bytes (choices),
 * little-endian u32s, and frames (a u16 little-endian length, then that
 * many bytes; the last frame is cut short where the input ends). Reading
 * past the end gives zeros and empty frames, so every input is valid.
 */
#ifndef ZF_INPUT_H
#define ZF_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct zf_cursor {
    const uint8_t *p;
    size_t left;
} zf_cursor;

static inline uint8_t zf_byte(zf_cursor *c)
{
    if (!c->left)
        return 0;
    c->left--;
    return *c->p++;
}

static inline uint32_t zf_u32(zf_cursor *c)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)zf_byte(c) << (8 * i);
    return v;
}

/* The next frame: *len bytes at the returned pointer (borrowed from the
 * input). */
static inline const uint8_t *zf_frame(zf_cursor *c, size_t *len)
{
    size_t n = zf_byte(c);
    n |= (size_t)zf_byte(c) << 8;
    if (n > c->left)
        n = c->left;
    const uint8_t *p = c->p;
    c->p += n;
    c->left -= n;
    *len = n;
    return p;
}

/* Seed writing: append a byte, or a frame, to a buffer of cap bytes at
 * *used (silently cut at cap: seeds are small). */
static inline void zf_put_byte(uint8_t *buf, size_t cap, size_t *used, uint8_t b)
{
    if (*used < cap)
        buf[(*used)++] = b;
}

static inline void zf_put_frame(uint8_t *buf, size_t cap, size_t *used, const void *data,
                                size_t len)
{
    zf_put_byte(buf, cap, used, (uint8_t)(len & 0xff));
    zf_put_byte(buf, cap, used, (uint8_t)(len >> 8));
    for (size_t i = 0; i < len; i++)
        zf_put_byte(buf, cap, used, ((const uint8_t *)data)[i]);
}

#endif
