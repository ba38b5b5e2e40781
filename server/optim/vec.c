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

__attribute__((target_clones("fma", "default"))) void
zp_vec_axpy(size_t n, float a, const float *restrict x, float *restrict y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

void zp_vec_scal(size_t n, float a, float *x)
{
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}
