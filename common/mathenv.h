/*
 * mathenv.h - the floating-point environment of a zeps process that does
 * math (servers, workers, and the tests that compute references).
 *
 * Two things, both found by profiling on real machines:
 *
 * - Denormals are flushed to zero (FTZ/DAZ). Momentum and Adam state of
 *   parameters that stop receiving gradient decay geometrically into
 *   subnormal floats, and x86 arithmetic on subnormals is ~50x slower:
 *   measured here, one sscal+saxpy over 100k floats took 880-2080 us with
 *   subnormals and 20-24 us with FTZ/DAZ. Values below 1.2e-38 become 0.
 *
 * - OpenBLAS chooses its kernels from CPUID when the library loads. On some
 *   virtual CPUs (seen: a KVM "Intel Xeon Processor" with AVX-512) it does
 *   not recognise the model and falls back to Prescott (SSE3) kernels: sgemm
 *   64x784x256 ran at 24 GFLOP/s instead of 129. If that happened, the CPU
 *   has AVX-512 or AVX2, and OPENBLAS_CORETYPE is not set, the process
 *   re-executes itself once with OPENBLAS_CORETYPE=SkylakeX (or Haswell).
 *   A user's own OPENBLAS_CORETYPE is always respected.
 *
 * It also pins OpenBLAS to one thread: a zeps process's cores belong to its
 * event loop and ZeroMQ's I/O thread, and BLAS threads would not inherit
 * FTZ/DAZ.
 */
#ifndef ZP_MATHENV_H
#define ZP_MATHENV_H

/* Call first thing in main(), with main's argv. May not return (re-exec). */
void zp_mathenv_setup(char **argv);

/* The OpenBLAS kernel set in use ("SkylakeX"), for logs. */
const char *zp_mathenv_blas_core(void);

#endif
