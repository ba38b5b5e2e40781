/*
 * bench_sparse_loop.c - the C side of zeps.torch's per-step overhead
 * benchmark (worker/python/bench/bench_torch_step.py): for `seconds`, step
 * through the batches of an ids file (STEPS batches of N u64 ids, repeats
 * allowed), each step doing what a CTR worker's embedding step asks of the
 * client library: make the batch (ids deduplicated once, in C), pull its
 * rows, push a gradient for every position (summed per row by the library),
 * free the batch. Prints the mean time of one step in microseconds, wall
 * clock and this process's CPU (all its threads: ZeroMQ's I/O thread too).
 *
 *   bench_sparse_loop IDS_FILE STEPS N DIM SECONDS endpoint...
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zeps.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t *read_ids(const char *path, size_t count)
{
    FILE *f = fopen(path, "rb");
    uint64_t *ids = malloc(count * sizeof(uint64_t));
    if (!f || !ids || fread(ids, sizeof(uint64_t), count, f) != count) {
        fprintf(stderr, "bench_sparse_loop: cannot read %zu ids from %s\n", count, path);
        exit(1);
    }
    fclose(f);
    return ids;
}

/* One step of batch `ids`: 0, or the first error. */
static int step(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n, float *rows,
                const float *g)
{
    zeps_sbatch *b;
    int rc = zeps_sbatch_new(c, t, ids, n, &b);
    if (rc == 0)
        rc = zeps_sbatch_pull(b, rows, 0);
    if (rc == 0)
        rc = zeps_sbatch_push(b, g, 0);
    zeps_sbatch_free(&b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: bench_sparse_loop IDS_FILE STEPS N DIM SECONDS endpoint...\n");
        return 2;
    }
    size_t steps = (size_t)atol(argv[2]), n = (size_t)atol(argv[3]);
    uint32_t dim = (uint32_t)atol(argv[4]);
    double seconds = atof(argv[5]);
    uint64_t *ids = read_ids(argv[1], steps * n);
    zeps_client *c;
    zeps_options opt = {.request_timeout_ms = 10000};
    if (zeps_client_new_endpoints(&c, (const char *const *)argv + 6, argc - 6, 0, &opt) != 0)
        return 1;
    zeps_sparse_spec spec = {.name = "bench-emb", .dim = dim, .optimizer = "adagrad", .lr = 1e-3};
    uint32_t t;
    float *rows = calloc(n * dim, sizeof(float)), *g = calloc(n * dim, sizeof(float));
    if (!rows || !g || zeps_declare_sparse(c, &spec, &t) != 0)
        return 1;
    for (size_t i = 0; i < n * dim; i++)
        g[i] = 1e-3f;
    for (size_t s = 0; s < steps && s < 20; s++) /* warm: rows made, arrays kept */
        if (step(c, t, ids + s * n, n, rows, g) != 0)
            return 1;
    size_t iters = 0;
    double t0 = clock_s(CLOCK_MONOTONIC), cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), el;
    do {
        if (step(c, t, ids + (iters % steps) * n, n, rows, g) != 0)
            return 1;
        iters++;
    } while ((el = clock_s(CLOCK_MONOTONIC) - t0) < seconds);
    double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    printf("%.2f %.2f\n", el / (double)iters * 1e6, cpu / (double)iters * 1e6);
    zeps_client_destroy(&c);
    free(ids);
    free(rows);
    free(g);
    return 0;
}
