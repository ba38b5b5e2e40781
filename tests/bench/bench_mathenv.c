/*
 * bench_mathenv.c - the two measurements behind common/mathenv.c, as a
 * program anyone can rerun: what subnormal optimizer state costs with and
 * without flush-to-zero, and the sgemm rate of the OpenBLAS kernels in use.
 *
 *   build/bin/bench_mathenv            # as zeps processes run (mathenv set up)
 *   build/bin/bench_mathenv --raw      # without zp_mathenv_setup
 *
 * Not a test: it prints figures and asserts nothing.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mathenv.h"
#include "now.h"

/* Microseconds per (sscal + saxpy) over n floats, the momentum update. */
static double momentum_pass_us(float fill)
{
    const int n = 100000, reps = 50;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) {
        x[i] = fill;
        y[i] = fill;
    }
    uint64_t t0 = zp_now_ns();
    for (int r = 0; r < reps; r++) {
        cblas_sscal(n, 0.9f, y, 1);
        cblas_saxpy(n, 0.5f, x, 1, y, 1);
    }
    double us = (double)(zp_now_ns() - t0) / 1e3 / reps;
    free(x);
    free(y);
    return us;
}

static double sgemm_gflops(void)
{
    const int m = 64, k = 784, n = 256, reps = 200;
    float *a = calloc((size_t)m * k, sizeof(float)), *b = calloc((size_t)k * n, sizeof(float));
    float *c = calloc((size_t)m * n, sizeof(float));
    for (int i = 0; i < m * k; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (int i = 0; i < k * n; i++)
        b[i] = (float)(i % 5) * 0.1f;
    uint64_t t0 = zp_now_ns();
    for (int r = 0; r < reps; r++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f,
                    c, n);
    double s = (double)(zp_now_ns() - t0) * 1e-9 / reps;
    free(a);
    free(b);
    free(c);
    return 2.0 * m * n * k / s / 1e9;
}

int main(int argc, char **argv)
{
    int raw = argc > 1 && strcmp(argv[1], "--raw") == 0;
    if (!raw)
        zp_mathenv_setup(argv);
    else
        openblas_set_num_threads(1);
    printf("OpenBLAS kernels: %s; flush-to-zero: %s\n", zp_mathenv_blas_core(),
           raw ? "off" : "on");
    printf("sscal+saxpy over 100k floats, normal values:    %8.1f us\n", momentum_pass_us(1.0f));
    printf("sscal+saxpy over 100k floats, subnormal values: %8.1f us\n", momentum_pass_us(1e-39f));
    printf("sgemm 64x784x256:                               %8.1f GFLOP/s\n", sgemm_gflops());
    return 0;
}
