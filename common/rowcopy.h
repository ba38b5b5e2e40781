/*
 * rowcopy.h - copy one short row of floats (a sparse row: a few to a few
 * dozen values) without a call.
 *
 * Scattering pulled rows to their positions and gathering gradients copy
 * one row per position; memcpy with a size known only at run time is a
 * library call each time, which costs more than the copy for rows of 4 to
 * 64 bytes. Here every memcpy has a constant size, so the compiler makes
 * each one a plain (unaligned) load and store. src and dst may be
 * unaligned and must not overlap.
 */
#ifndef ZP_ROWCOPY_H
#define ZP_ROWCOPY_H

#include <stddef.h>
#include <string.h>

static inline void zp_rowcopy(void *dst, const void *src, size_t nfloats)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t n = nfloats * sizeof(float), i = 0;
    for (; i + 16 <= n; i += 16)
        memcpy(d + i, s + i, 16);
    for (; i < n; i += 4)
        memcpy(d + i, s + i, 4);
}

#endif
