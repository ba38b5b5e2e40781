/*
 * vec.c - position-independent BLAS-1 steps for the slice kernels (vec.h).
 *
 * The loops are built per CPU level (clones.h): for CPUs with FMA the
 * compiler vectorises fmaf into vfmadd instructions; the baseline clone
 * calls glibc's fmaf, which is exact too, only slower. This file is
 * compiled with -ffp-contract=off (server/CMakeLists.txt) so that no other
 * multiply and add is ever fused behind our back.
 */
#include "vec.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "clones.h"

ZP_CLONES void zp_vec_axpy(size_t n, float a, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

ZP_CLONES void zp_vec_scal(size_t n, float a, float *x)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

/* `decay` is a constant in each call below, so each gets a branch-free
 * copy. The finiteness test is finite.c's: all exponent bits set. */
static inline bool axpy_keep(size_t n, float a, float d, bool decay, float *restrict x,
                             float *restrict y)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float xi = x[i], yi = y[i];
        uint32_t u;
        memcpy(&u, &xi, sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
        y[i] = fmaf(a, xi, decay ? yi * d : yi);
        x[i] = yi;
    }
    return bad == 0;
}

ZP_CLONES bool zp_vec_axpy_keep(size_t n, float a, float d, bool decay, float *restrict x,
                                float *restrict y)
{
    return decay ? axpy_keep(n, a, d, true, x, y) : axpy_keep(n, a, d, false, x, y);
}

void zp_vec_restore(size_t n, const float *x, float *y)
{
    memcpy(y, x, n * sizeof(float));
}
