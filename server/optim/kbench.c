/*
 * kbench.c - how fast the dense kernels run on this machine, measured in
 * the server binary itself (`zeps-server --bench-apply`), so the figures
 * are those of the clones the server really dispatches to.
 *
 * For each size, each repetition times one call of every kernel in turn on
 * the same pre-faulted buffers - saxpy (OpenBLAS cblas_saxpy, the
 * reference), zp_vec_axpy, then sgd, momentum, adagrad and adam `apply` -
 * so load from other processes falls on all alike; the figure printed per
 * kernel is the best (shortest) over repetitions - other processes only
 * ever add time, and on a loaded 2-core machine a median of a few calls
 * still caught stalls (one kernel 5x slower than the next in one run) -
 * and its ratio is saxpy's best time over its own (a "time-rate": 1.0 = as fast as saxpy on the same n;
 * Adam moves 7 float streams to saxpy's 3, so memory allows it 3/7).
 * The fused check-and-apply path (zp_optim_apply_checked) is timed too,
 * beside the two passes it replaces (zp_finite_all, then apply). The
 * weights and state must end finite (all start so, and the bench's
 * gradient is small): a kernel that met NaN or Inf ran its slow path.
 */
#include "kbench.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "finite.h"
#include "now.h"
#include "optim.h"
#include "vec.h"

enum {
    K_SAXPY,
    K_AXPY,
    K_SGD,
    K_MOMENTUM,
    K_ADAGRAD,
    K_ADAM,
    K_SGD_2PASS,
    K_SGD_FUSED,
    K_ADAM_2PASS,
    K_ADAM_FUSED,
    NK
};

static const char *const knames[NK] = {
    "saxpy (OpenBLAS)", "zp_vec_axpy",          "sgd apply",          "momentum apply",
    "adagrad apply",    "adam apply",           "sgd finite+apply",   "sgd fused check",
    "adam finite+apply", "adam fused check",
};

#define MAX_REPS 99

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double best(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[0];
}

/* Seconds of one call of kernel k over n floats. */
static double time_one(int k, size_t n, float *w, float *st, float *g, float *gk,
                       const zp_hyper *h, uint64_t step)
{
    if (k == K_SGD_FUSED || k == K_ADAM_FUSED)
        memcpy(gk, g, n * sizeof(float)); /* the kernel consumes its copy; untimed */
    uint64_t t0 = zp_now_ns();
    switch (k) {
    case K_SAXPY:
        cblas_saxpy((int)n, -1e-7f, g, 1, w, 1);
        break;
    case K_AXPY:
        zp_vec_axpy(n, -1e-7f, g, w);
        break;
    case K_SGD:
        zp_sgd_ops.apply(w, NULL, g, n, n, h, step, 1.0f);
        break;
    case K_MOMENTUM:
        zp_momentum_ops.apply(w, st, g, n, n, h, step, 1.0f);
        break;
    case K_ADAGRAD:
        zp_adagrad_ops.apply(w, st, g, n, n, h, step, 1.0f);
        break;
    case K_ADAM:
        zp_adam_ops.apply(w, st, g, n, n, h, step, 1.0f);
        break;
    case K_SGD_2PASS:
    case K_ADAM_2PASS: {
        const zp_optim_ops *o = k == K_SGD_2PASS ? &zp_sgd_ops : &zp_adam_ops;
        if (zp_finite_all(g, n))
            o->apply(w, st, g, n, n, h, step, 1.0f);
        break;
    }
    case K_SGD_FUSED:
    case K_ADAM_FUSED: {
        const zp_optim_ops *o = k == K_SGD_FUSED ? &zp_sgd_ops : &zp_adam_ops;
        if (!zp_optim_apply_checked(o, w, st, gk, gk, n, n, h, step, 1.0f))
            abort(); /* the bench's gradient is finite */
        break;
    }
    }
    return (double)(zp_now_ns() - t0) * 1e-9;
}

int zp_kbench_run(FILE *out, const size_t *sizes, int nsizes, int reps)
{
    if (reps < 1 || reps > MAX_REPS)
        reps = reps < 1 ? 1 : MAX_REPS;
    int rc = 0;
    zp_hyper h = {.lr = 1e-3f, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    fprintf(out,
            "dense kernels, one call each, best of %d; ratio = saxpy time / kernel time\n"
            "(saxpy moves 3 float streams, momentum and adagrad 5, adam 7: memory alone\n"
            "allows momentum/adagrad 0.60 and adam 0.43)\n",
            reps);
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        float *w = zp_alloc(n * sizeof(float)), *g = zp_alloc(n * sizeof(float));
        float *st = zp_alloc(2 * n * sizeof(float)), *gk = zp_alloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            w[i] = 0.5f;
            g[i] = (float)((i % 13) + 1) * 1e-3f;
            st[i] = 0.0f;
            st[n + i] = 0.0f;
            gk[i] = 0.0f;
        }
        double t[NK][MAX_REPS];
        for (int k = 0; k < NK; k++) /* warm-up: every page touched, every clone resolved */
            time_one(k, n, w, st, g, gk, &h, 0);
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < NK; k++)
                t[k][r] = time_one(k, n, w, st, g, gk, &h, (uint64_t)r + 1);
        double med[NK];
        for (int k = 0; k < NK; k++)
            med[k] = best(t[k], reps);
        fprintf(out, "\n%zu floats (%zu MB)      ms      GB/s(g)  ratio vs saxpy\n", n,
                n * sizeof(float) >> 20);
        for (int k = 0; k < NK; k++)
            fprintf(out, "  %-18s %8.3f %8.2f %8.3f\n", knames[k], med[k] * 1e3,
                    (double)n * sizeof(float) / med[k] / 1e9, med[K_SAXPY] / med[k]);
        fprintf(out, "  apply/saxpy %zuM: momentum %.3f adagrad %.3f adam %.3f\n", n >> 20,
                med[K_SAXPY] / med[K_MOMENTUM], med[K_SAXPY] / med[K_ADAGRAD],
                med[K_SAXPY] / med[K_ADAM]);
        /* a NaN or Inf in the weights or state would have timed the
         * kernels' slow paths on it, not their work on numbers */
        if (!zp_finite_all(w, n) || !zp_finite_all(st, 2 * n)) {
            fprintf(out, "error: weights or state not finite after the runs on %zu floats: "
                         "the figures above are not the kernels' on numbers\n", n);
            rc = 1;
        }
        free(w);
        free(g);
        free(st);
        free(gk);
    }
    fflush(out);
    return rc;
}
