/*
 * finite.c - see finite.h.
 */
#include "finite.h"

#include <stdint.h>

bool zp_finite_all(const float *v, size_t n)
{
    /* An f32 is Inf or NaN iff its exponent bits are all ones. OR-reducing a
     * mask test keeps the loop branch-free so it vectorises. */
    const uint32_t *u = (const uint32_t *)v;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= ((u[i] & 0x7f800000u) == 0x7f800000u);
    return bad == 0;
}
