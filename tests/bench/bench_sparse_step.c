/*
 * bench_sparse_step.c - the C side of zeps.torch's per-step overhead
 * benchmark (worker/python/bench/bench_torch_step.py): a shared library the
 * benchmark loads into its own process and calls once per step, step by
 * step beside the same step from Python, so load from elsewhere on the
 * machine falls on both alike. A step makes the calls zeps.torch makes for
 * one embedding step (and the benchmark's binding loop with it, so the two
 * do the same work): make the batch (ids deduplicated once, in C), pull its
 * distinct rows, push one gradient row per distinct row (autograd summed
 * the repeats), free the batch.
 */
#include <stddef.h>
#include <stdint.h>

#include "zeps.h"

int zp_bench_sparse_step(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n, float *urows,
                         const float *ugrads);

/* One step of batch ids[n] of sparse table t on client c (the caller's,
 * borrowed): its distinct rows pulled into urows, ugrads pushed (both
 * unique x dim floats, the caller's). Returns 0 or the first error. Called
 * from the thread that owns c. */
int zp_bench_sparse_step(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n, float *urows,
                         const float *ugrads)
{
    zeps_sbatch *b;
    zeps_req *r;
    int rc = zeps_sbatch_new(c, t, ids, n, &b);
    if (rc == 0)
        rc = zeps_sbatch_pull_unique_start(b, urows, 0, &r);
    if (rc == 0)
        rc = zeps_wait(&r);
    if (rc == 0)
        rc = zeps_sbatch_push_unique_start(b, ugrads, 0, &r);
    if (rc == 0)
        rc = zeps_wait(&r);
    zeps_sbatch_free(&b);
    return rc;
}
