/*
 * bench_sparse.c - sparse pull/push throughput against the dense path, and
 * memory per row, on a real 2-shard cluster (async).
 *
 * For D in {8, 64}, batches of 1k, 10k and 100k ids drawn uniformly or
 * Zipf-distributed (s = 1.1) from 10M ids: keys/s (ids named, repeats
 * included), rows/s (distinct rows moved) and MB/s of rows, for zeps_sbatch
 * pull and push (batch construction included: dedup and grouping are part
 * of the cost); then a dense pull/push of the same number of bytes (rows x
 * D floats). Finally the shards' bytes per row: the table's allocated
 * memory (slabs, index, admission sketch) over its rows, beside the raw
 * payload D x 4 bytes + optimizer state.
 *
 * Usage: bench_sparse [seconds per figure (0.5)]. Needs ZEPS_BINDIR.
 * bench_sparse --ref ...: zeps against a reference sparse server instead
 * (bench_sparse_ref.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "harness.h"
#include "now.h"
#include "rng.h"
#include "zeps.h"

#define VOCAB 10000000ull

/* Zipf-like ranks by inverting the continuous power law on [1, VOCAB]. */
static uint64_t zipf_rank(zp_rng *r, double s)
{
    double u = zp_rng_uniform(r);
    double a = 1.0 - s;
    double x = pow((pow((double)VOCAB, a) - 1.0) * u + 1.0, 1.0 / a);
    uint64_t k = (uint64_t)x;
    return k >= VOCAB ? VOCAB - 1 : k;
}

static void make_ids(uint64_t *ids, size_t n, int zipf, uint64_t seed)
{
    zp_rng r;
    zp_rng_seed(&r, seed, (uint64_t)n, (uint64_t)zipf);
    for (size_t i = 0; i < n; i++) {
        uint64_t rank = zipf ? zipf_rank(&r, 1.1) : zp_rng_next(&r) % VOCAB;
        ids[i] = zp_rng_mix64(rank + 1); /* ids spread over u64, as hashed features are */
    }
}

typedef struct fig {
    double keys_s, rows_s, mb_s;
} fig;

/* Repeat pulls (push = 0) or pushes of one batch for `secs`. */
static int run_sparse(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n, uint32_t dim,
                      int push, double secs, fig *out)
{
    float *buf = zp_alloc_zeroed(n * dim, sizeof(float));
    for (size_t i = 0; push && i < n * dim; i++)
        buf[i] = 1e-6f;
    size_t nu = 0, reps = 0;
    double t0 = zp_now_s(), t1;
    int rc = 0;
    do {
        zeps_sbatch *b;
        rc = zeps_sbatch_new(c, t, ids, n, &b);
        if (rc == 0)
            rc = push ? zeps_sbatch_push(b, buf, 0) : zeps_sbatch_pull(b, buf, 0);
        nu = zeps_sbatch_unique(b);
        zeps_sbatch_free(&b);
        reps++;
        t1 = zp_now_s();
    } while (rc == 0 && t1 - t0 < secs);
    free(buf);
    double dt = t1 - t0;
    out->keys_s = (double)(n * reps) / dt;
    out->rows_s = (double)(nu * reps) / dt;
    out->mb_s = (double)(nu * reps * dim * sizeof(float)) / dt / 1e6;
    return rc;
}

static int run_dense(zeps_client *c, uint32_t t, uint64_t count, int push, double secs,
                     double *mb_s)
{
    float *buf = zp_alloc_zeroed(count, sizeof(float));
    size_t reps = 0;
    double t0 = zp_now_s(), t1;
    int rc = 0;
    do {
        rc = push ? zeps_push(c, t, buf, 0, count, 0) : zeps_pull(c, t, buf, 0, count, 0);
        reps++;
        t1 = zp_now_s();
    } while (rc == 0 && t1 - t0 < secs);
    free(buf);
    *mb_s = (double)(count * reps * sizeof(float)) / (t1 - t0) / 1e6;
    return rc;
}

static int table_memory(zeps_client *c, const char *name, uint64_t *bytes, uint64_t *rows,
                        uint64_t *per_row)
{
    *bytes = *rows = *per_row = 0;
    for (int k = 0; k < zeps_num_shards(c); k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        if (!st)
            return -1;
        for (size_t i = 0; i < st->n_tables; i++) {
            if (strcmp(st->tables[i]->name, name) != 0)
                continue;
            *bytes += st->tables[i]->bytes_param;
            *rows += st->tables[i]->rows;
            *per_row = st->tables[i]->bytes_per_row;
        }
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    return 0;
}

int zt_bench_sparse_ref(int argc, char **argv);

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--ref") == 0)
        return zt_bench_sparse_ref(argc, argv);
    double secs = argc > 1 ? atof(argv[1]) : 0.5;
    zt_cluster cl;
    if (zt_cluster_start(&cl, 2, 1, "async", "max_message_mb = 512;", NULL) != 0) {
        fprintf(stderr, "bench_sparse: cannot start the cluster (is ZEPS_BINDIR set?)\n");
        return 1;
    }
    zeps_client *c = zt_client(&cl, 0);
    static const uint32_t dims[] = {8, 64};
    static const size_t batches[] = {1000, 10000, 100000};
    printf("%-4s %-8s %-7s | %12s %12s %9s | %12s %12s %9s | %9s %9s\n", "D", "ids", "batch",
           "pull keys/s", "pull rows/s", "pull MB/s", "push keys/s", "push rows/s", "push MB/s",
           "dense pull", "dense push");
    int rc = 0;
    for (size_t di = 0; di < 2 && rc == 0; di++) {
        uint32_t dim = dims[di];
        char name[32];
        snprintf(name, sizeof(name), "emb%u", dim);
        zeps_sparse_spec spec = {.name = name, .dim = dim, .optimizer = "adagrad", .lr = 0.01,
                                 .init = "uniform", .init_scale = 0.01, .seed = 1};
        uint32_t st, dt;
        rc = zeps_declare_sparse(c, &spec, &st);
        snprintf(name, sizeof(name), "dense%u", dim);
        zeps_table_spec dspec = {.name = name, .length = 100000ull * dim, .optimizer = "adagrad",
                                 .lr = 0.01};
        if (rc == 0)
            rc = zeps_declare(c, &dspec, &dt);
        for (size_t bi = 0; bi < 3 && rc == 0; bi++) {
            for (int zipf = 0; zipf < 2 && rc == 0; zipf++) {
                size_t n = batches[bi];
                uint64_t *ids = zp_alloc(n * sizeof(uint64_t));
                make_ids(ids, n, zipf, 42);
                fig pull, push;
                double dpull = 0, dpush = 0;
                rc = run_sparse(c, st, ids, n, dim, 0, secs, &pull);
                if (rc == 0)
                    rc = run_sparse(c, st, ids, n, dim, 1, secs, &push);
                /* the dense path moving the rows' bytes */
                uint64_t count = (uint64_t)(pull.rows_s / pull.keys_s * (double)n + 0.5) * dim;
                if (rc == 0)
                    rc = run_dense(c, dt, count, 0, secs, &dpull);
                if (rc == 0)
                    rc = run_dense(c, dt, count, 1, secs, &dpush);
                printf("%-4u %-8s %-7zu | %12.0f %12.0f %9.1f | %12.0f %12.0f %9.1f | %9.1f %9.1f\n",
                       dim, zipf ? "zipf1.1" : "uniform", n, pull.keys_s, pull.rows_s, pull.mb_s,
                       push.keys_s, push.rows_s, push.mb_s, dpull, dpush);
                fflush(stdout);
                free(ids);
            }
        }
        /* memory: fill 1M more rows, then read the shards' accounting */
        enum { FILL = 1000000, CHUNK = 100000 };
        uint64_t *ids = zp_alloc(CHUNK * sizeof(uint64_t));
        float *rows = zp_alloc((size_t)CHUNK * dim * sizeof(float));
        for (uint64_t k = 0; k < FILL / CHUNK && rc == 0; k++) {
            for (uint64_t i = 0; i < CHUNK; i++)
                ids[i] = zp_rng_mix64(0x10000000000ull + k * CHUNK + i);
            rc = zeps_spull(c, st, ids, CHUNK, rows, 0);
        }
        free(ids);
        free(rows);
        uint64_t bytes, nrows, per_row;
        snprintf(name, sizeof(name), "emb%u", dim);
        if (rc == 0 && table_memory(c, name, &bytes, &nrows, &per_row) == 0)
            printf("D=%u adagrad: %llu rows, %.1f bytes/row held (record %llu B; raw payload "
                   "D*4 + state = %u B)\n",
                   dim, (unsigned long long)nrows, (double)bytes / (double)nrows,
                   (unsigned long long)per_row, dim * 4 * 2);
    }
    if (rc != 0)
        fprintf(stderr, "bench_sparse: %s\n", zeps_last_error(c));
    printf("(figures: MB/s of row values; dense columns: MB/s of a dense pull/push of the same "
           "bytes)\n");
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
    return rc ? 1 : 0;
}
