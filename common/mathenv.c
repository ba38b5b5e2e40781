/*
 * mathenv.c - see mathenv.h.
 */
#include "mathenv.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

/* The kernel set OpenBLAS would pick for this CPU, when its own detection
 * fell back to the generic one; NULL when nothing needs to change. */
static const char *better_core(void)
{
#if defined(__x86_64__)
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "Prescott") != 0)
        return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

void zp_mathenv_setup(char **argv)
{
    if (!getenv("OPENBLAS_CORETYPE") && argv && argv[0]) {
        const char *core = better_core();
        if (core) {
            setenv("OPENBLAS_CORETYPE", core, 1);
            execv("/proc/self/exe", argv);
            /* exec failed: carry on with what we have */
        }
    }
    openblas_set_num_threads(1);
#ifdef HAVE_MXCSR
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) | DAZ (bit 6) */
#endif
}

const char *zp_mathenv_blas_core(void)
{
    const char *core = openblas_get_corename();
    return core ? core : "unknown";
}
