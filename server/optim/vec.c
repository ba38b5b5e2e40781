/*
 * vec.c - position-independent BLAS-1 steps for the slice kernels (vec.h).
 *
 * The loops are built twice (target_clones): for CPUs with FMA the compiler
 * vectorises fmaf into vfmadd instructions; the default clone calls glibc's
 * fmaf, which is exact too, only slower. This file is compiled with
 * -ffp-contract=off (server/CMakeLists.txt) so that no other multiply and
 * add is ever fused behind our back.
 */
#include "vec.h"

#include <math.h>

/* clang 14 (the fuzz build, tests/fuzz) names the dispatcher of a
 * target_clones function "f.ifunc", so callers do not link: there, one
 * build; fmaf is exact either way, so the bits do not change. */
#if defined(__clang__) && __clang_major__ < 15
#define CLONES
#else
#define CLONES __attribute__((target_clones("fma", "default")))
#endif

CLONES void zp_vec_axpy(size_t n, float a, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

void zp_vec_scal(size_t n, float a, float *x)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}
