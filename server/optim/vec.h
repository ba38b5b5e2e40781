/*
 * vec.h - the vector steps of the slice kernels, with the same bits for an
 * element wherever it sits in a vector and on every x86-64 CPU.
 *
 * OpenBLAS's saxpy does not promise that: on some CPUs (seen on AMD EPYC
 * with its Haswell/Zen kernels) the vector body uses fused multiply-adds and
 * the tail a separate multiply and add, so an element's result depended on
 * where a shard's slice began. Here every element is y = fma(a, x, y),
 * which IEEE 754 defines as one rounding: an FMA instruction where the CPU
 * has one (a function clone chosen at load time, clones.h), glibc's exact
 * fmaf elsewhere. Both give the bits OpenBLAS's AVX-512 kernels gave on the
 * CPUs where it was consistent, so results did not change there.
 */
#ifndef ZP_VEC_H
#define ZP_VEC_H

#include <stdbool.h>
#include <stddef.h>

/* y[i] = fma(a, x[i], y[i]) for i < n. x and y must not overlap. */
void zp_vec_axpy(size_t n, float a, const float *x, float *y);

/* x[i] *= a for i < n (one rounded multiply per element). */
void zp_vec_scal(size_t n, float a, float *x);

/* The sgd step from a gradient the caller gives up, in one pass:
 * y[i] = fma(a, x[i], d * y[i]) (without the multiply when `decay` is
 * false), and x[i] = the old y[i]. Returns true if every x[i] was finite
 * (not NaN or Inf); y is then updated exactly as zp_vec_scal(d) then
 * zp_vec_axpy(a) would have. On false the caller puts y back from x
 * (zp_vec_restore). x and y must not overlap. */
bool zp_vec_axpy_keep(size_t n, float a, float d, bool decay, float *x, float *y);

/* y[i] = x[i] for i < n, bit for bit (undo of zp_vec_axpy_keep). */
void zp_vec_restore(size_t n, const float *x, float *y);

#endif
