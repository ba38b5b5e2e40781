/*
 * clones.h - ZP_CLONES: build a kernel three times (AVX-512, AVX2+FMA, and
 * the x86-64 baseline) and let the loader pick the one this CPU runs.
 *
 * The bits do not depend on the clone: the kernels use only IEEE 754
 * operations that are correctly rounded one by one (+, -, *, /, sqrtf and
 * the explicit fmaf), in a fixed order per element, with contraction off
 * (-ffp-contract=off), so a wider vector computes each element exactly as
 * the scalar loop would. What the clone changes is speed: the baseline
 * clone has no FMA instruction, so fmaf there is glibc's exact software
 * fmaf, a call per element; the v3 and v4 clones inline vfmadd (checked
 * with objdump, docs/performance.md).
 *
 * clang 14 (the fuzz build, tests/fuzz) names the dispatcher of a
 * target_clones function "f.ifunc", so callers do not link: there, one
 * build; the bits are the same either way.
 */
#ifndef ZP_CLONES_H
#define ZP_CLONES_H

#if defined(__clang__) && __clang_major__ < 15
#define ZP_CLONES
#else
#define ZP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

#endif
