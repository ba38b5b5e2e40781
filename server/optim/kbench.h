/*
 * kbench.h - the dense kernels' speed on this machine (`zeps-server
 * --bench-apply`, printed again by `zepsctl bench --apply`).
 */
#ifndef ZP_KBENCH_H
#define ZP_KBENCH_H

#include <stddef.h>
#include <stdio.h>

/* Time saxpy and every dense kernel on each of the nsizes sizes (floats),
 * interleaved, `reps` times (1..99), and print the best times and ratios
 * to out. Allocates 5 floats per element of the largest size. Returns 0;
 * 1 (with a line "error: ...") if a size's weights or optimizer state are
 * not all finite after its runs. Call from a process with zp_mathenv_setup
 * done (one BLAS thread, FTZ). */
int zp_kbench_run(FILE *out, const size_t *sizes, int nsizes, int reps);

#endif
