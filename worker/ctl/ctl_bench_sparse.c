/*
 * ctl_bench_sparse.c - `zepsctl bench --replicas 2`: sparse pushes to the
 * plain shard and to the replicated one, side by side. The pattern is the
 * one tests/bench/bench_sparse.c times (docs/sparse.md): a batch of
 * SPARSE_BATCH ids drawn uniformly from SPARSE_VOCAB, pushed again and
 * again through zeps_sbatch (made, pushed, freed each time: the client's
 * dedup and grouping are part of the cost), one request at a time, into an
 * Adagrad table of D = 8 and one of D = 64. rows/s counts the distinct rows
 * pushed. Each repetition runs r=1 then r=2 for each D, so noise falls on
 * both alike; the medians are kept.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "ctl_bench.h"
#include "now.h"
#include "rng.h"

static const uint32_t dims[NSPARSE] = SPARSE_DIMS;

int zp_ctl_bench_sparse_declare(zeps_side *z)
{
    int rc = 0;
    for (int d = 0; d < NSPARSE && rc == 0; d++) {
        char name[32];
        snprintf(name, sizeof name, "sparse_%u", dims[d]);
        zeps_sparse_spec spec = {.name = name,
                                 .dim = dims[d],
                                 .optimizer = "adagrad",
                                 .lr = 0.01,
                                 .init = "uniform",
                                 .init_scale = 0.01,
                                 .seed = 1};
        rc = zeps_declare_sparse(z->c, &spec, &z->sparse[d]);
        if (rc != 0)
            fprintf(stderr, "bench: declare %s: %s\n", name, zeps_last_error(z->c));
    }
    return rc;
}

/* Push the batch `ids` of rows into table t again and again for `seconds`
 * (at least MIN_TIMED times) after one pull that makes the rows; *rows_s:
 * distinct rows pushed per second. */
static int push_rows(zeps_side *z, uint32_t t, const uint64_t *ids, size_t n, const float *grad,
                     float *rows, double seconds, double *rows_s)
{
    size_t unique = 0;
    long reps = 0;
    int rc = zeps_spull(z->c, t, ids, n, rows, 0);
    double t0 = zp_now_s(), t1 = t0;
    while (rc == 0 && (reps < MIN_TIMED || t1 - t0 < seconds)) {
        zeps_sbatch *sb = NULL;
        if (zp_ctl_bench_stop)
            rc = ZEPS_ECLOSED;
        if (rc == 0)
            rc = zeps_sbatch_new(z->c, t, ids, n, &sb);
        if (rc == 0)
            rc = zeps_sbatch_push(sb, grad, 0);
        unique = sb ? zeps_sbatch_unique(sb) : 0;
        zeps_sbatch_free(&sb);
        reps++;
        t1 = zp_now_s();
    }
    if (rc != 0)
        fprintf(stderr, "bench: sparse push: %s\n", zeps_last_error(z->c));
    *rows_s = (double)unique * (double)reps / (t1 - t0);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int zp_ctl_bench_sparse_measure(bench *b)
{
    zeps_side *side[2] = {&b->z, &b->zr};
    size_t n = SPARSE_BATCH;
    uint64_t *ids = zp_alloc(n * sizeof(uint64_t));
    float *grad = buf_new(n * dims[NSPARSE - 1] * sizeof(float), 1e-6f);
    float *rows = buf_new(n * dims[NSPARSE - 1] * sizeof(float), 0.0f);
    double *v = zp_alloc_zeroed((size_t)b->o.reps * NSPARSE * 2, sizeof(double));
    zp_rng rng;
    zp_rng_seed(&rng, 42, n, 0);
    for (size_t i = 0; i < n; i++) /* spread over u64, as hashed features are */
        ids[i] = zp_rng_mix64(zp_rng_next(&rng) % SPARSE_VOCAB + 1);
    int rc = 0;
    for (int rep = 0; rep < b->o.reps && rc == 0; rep++)
        for (int d = 0; d < NSPARSE && rc == 0; d++)
            for (int s = 0; s < 2 && rc == 0; s++) {
                double *out = &v[((size_t)d * 2 + (size_t)s) * (size_t)b->o.reps + (size_t)rep];
                rc = push_rows(side[s], side[s]->sparse[d], ids, n, grad, rows, b->o.seconds, out);
                if (rc == 0)
                    fprintf(stderr, "bench: sparse push D=%u %s ... %.0f rows/s (rep %d/%d)\n",
                            dims[d], s ? "zeps r=2" : "zeps", *out, rep + 1, b->o.reps);
            }
    for (int d = 0; d < NSPARSE && rc == 0; d++)
        for (int s = 0; s < 2; s++)
            b->sparse[d][s] =
                median(&v[((size_t)d * 2 + (size_t)s) * (size_t)b->o.reps], b->o.reps);
    free(v);
    free(rows);
    free(grad);
    free(ids);
    return rc;
}

void zp_ctl_bench_sparse_print(const bench *b)
{
    printf("\nsparse push rows/s, %d uniform ids a request, one request at a time "
           "(aim: r=2 / r=1 >= %.2f):\n",
           SPARSE_BATCH, REPL_PUSH_AIM);
    for (int d = 0; d < NSPARSE; d++) {
        double q = ratio(b->sparse[d][1], b->sparse[d][0]);
        printf("  D=%-3u | r=1 %9.0f | r=2 %9.0f | ratio %.3f (%s)\n", dims[d], b->sparse[d][0],
               b->sparse[d][1], q, q >= REPL_PUSH_AIM ? "met" : "missed");
    }
}

void zp_ctl_bench_sparse_json(const bench *b, FILE *f)
{
    fprintf(f, "  \"sparse_push\": {\"batch\": %d, \"rows_per_s\": [", SPARSE_BATCH);
    for (int d = 0; d < NSPARSE; d++)
        fprintf(f, "%s{\"dim\": %u, \"zeps\": %.0f, \"zeps_r2\": %.0f, \"ratio_r2\": %.3f}",
                d ? ", " : "", dims[d], b->sparse[d][0], b->sparse[d][1],
                ratio(b->sparse[d][1], b->sparse[d][0]));
    fprintf(f, "]},\n");
}
