/*
 * bench_sparse_ref.c - `bench_sparse --ref`: zeps against the reference
 * sparse server (sparse_ref.c), interleaved in one run.
 *
 * Both servers are separate processes on ipc:// endpoints of this machine:
 * a real zeps-server (1 shard, async) and the forked reference. This
 * process is the only client of both, blocking, one request at a time. For
 * each table size N (rows made before timing by pulling ids 0..N-1) and
 * dimension D, requests of 100k ids drawn uniformly or Zipf(1.1) over the
 * N ids are pushed (Adagrad) and pulled; a zeps request counts the client's
 * batch building (zeps_sbatch_new, the push's summing, zeps_sbatch_free),
 * as an application pays it per batch. Each repetition runs the zeps cell
 * then the reference cell, so load on the machine hits both alike; medians
 * are printed. rows/s counts the ids a request names (repeats included, the
 * same requests for both). Memory: each server's resident set over the
 * rows it holds, after the fill.
 *
 * Usage: bench_sparse --ref [--seconds S] [--reps R] [--dims 1,8,64]
 *        [--rows 1M,10M] [--batch N] [--naive] [--big] [--profile push|pull]
 *        [--store]
 * D = 64 runs at 10M rows only with --big (the two servers then hold
 * ~11 GB). --naive runs the reference's one-id-at-a-time map instead.
 * --profile push|pull runs only zeps' cells of that op on uniform ids (the
 * reference is filled but not timed): a run to hold a profiler to.
 * --store compares the two stores alone, in this process (below).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "harness.h"
#include "now.h"
#include "rng.h"
#include "rows.h"
#include "sparse_ref.h"
#include "zeps.h"

int zt_bench_sparse_ref(int argc, char **argv);

typedef struct ropts {
    double secs;
    int reps, ndims, nsizes, naive, big, store;
    int profile; /* 'p' (push) or 'l' (pull): zeps' uniform cells of that op only */
    uint32_t dims[8];
    uint64_t sizes[8];
    size_t batch;
} ropts;

static uint64_t parse_count(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*end == 'M' || *end == 'm')
        v *= 1e6;
    else if (*end == 'k' || *end == 'K')
        v *= 1e3;
    return (uint64_t)v;
}

static int parse_list(const char *s, uint64_t *out, int max)
{
    int n = 0;
    char *copy = zp_alloc_strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
        out[n++] = parse_count(t);
    free(copy);
    return n;
}

static uint64_t id_of(uint64_t rank)
{
    return zp_rng_mix64(rank + 1); /* ids spread over u64, as hashed features are */
}

/* Zipf(s) ranks in [0, n) by inverting the continuous power law. */
static uint64_t zipf_rank(zp_rng *r, double s, uint64_t n)
{
    double u = zp_rng_uniform(r), a = 1.0 - s;
    double x = pow((pow((double)n, a) - 1.0) * u + 1.0, 1.0 / a) - 1.0;
    uint64_t k = (uint64_t)x;
    return k >= n ? n - 1 : k;
}

static void make_ids(uint64_t *ids, size_t n, uint64_t rows, int zipf)
{
    zp_rng r;
    zp_rng_seed(&r, 42, rows, (uint64_t)zipf);
    for (size_t i = 0; i < n; i++)
        ids[i] = id_of(zipf ? zipf_rank(&r, 1.1, rows) : zp_rng_next(&r) % rows);
}

static uint64_t rss_of(pid_t pid)
{
    char path[64], line[256];
    unsigned long kb = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}

typedef struct side {
    zeps_client *c;
    uint32_t table;
    zt_sref *ref;
} side;

/* One request of side z (zeps) or r (reference). */
static int one(const side *s, int zeps, int push, uint32_t dim, const uint64_t *ids, size_t n,
               float *buf)
{
    if (!zeps)
        return push ? zt_sref_push(s->ref, dim, ids, n, buf) : zt_sref_pull(s->ref, dim, ids, n, buf);
    zeps_sbatch *b;
    int rc = zeps_sbatch_new(s->c, s->table, ids, n, &b);
    if (rc == 0)
        rc = push ? zeps_sbatch_push(b, buf, 0) : zeps_sbatch_pull(b, buf, 0);
    zeps_sbatch_free(&b);
    return rc;
}

/* ------------------------------------------------- --store: the stores alone
 *
 * The shard's store and the reference's map in this process, without
 * ZeroMQ, the client or the request's other checks: what each does per id.
 * zeps does what a shard does with a request's ids: a push checks them
 * (zp_rows_check_push) and applies through the candidates, a pull reads
 * rows and versions. Both get the same distinct ids, as a shard gets them
 * from the client library. */

typedef struct stores {
    zp_rows rows; /* .store: zeps' store */
    zt_smap *map;
    float *out;
    uint32_t *vers;
} stores;

static void store_op(stores *st, int zeps, int push, const uint64_t *ids, size_t n, const float *g)
{
    if (!zeps)
        zt_smap_run(st->map, ids, n, push ? NULL : st->out, push ? g : NULL);
    else if (!push)
        zp_sparse_pull(st->rows.store, ids, n, 0, st->out, st->vers);
    else if (zp_rows_check_push(&st->rows, ids, n) < 0)
        zp_sparse_push_probed(st->rows.store, ids, n, st->rows.cand, g, 1.0f, 0, NULL, NULL, NULL);
    else
        abort(); /* the ids are distinct */
}

/* Ids per second of one side over `secs` (at least 3 requests): through
 * the servers (st NULL) or the stores alone. */
static double cell(const side *s, stores *st, int zeps, int push, uint32_t dim, const uint64_t *ids,
                   size_t n, float *buf, double secs)
{
    size_t reps = 0;
    double t0 = zp_now_s(), t1;
    do {
        if (st)
            store_op(st, zeps, push, ids, n, buf);
        else if (one(s, zeps, push, dim, ids, n, buf) != 0)
            return -1;
        reps++;
        t1 = zp_now_s();
    } while (t1 - t0 < secs || reps < 3);
    return (double)(n * reps) / (t1 - t0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Fill both servers with rows 0..rows-1 (pulls of 100k ids). */
static int fill(const side *s, uint32_t dim, uint64_t rows)
{
    enum { CH = 100000 };
    uint64_t *ids = zp_alloc(CH * sizeof(uint64_t));
    float *buf = zp_alloc((size_t)CH * dim * sizeof(float));
    int rc = 0;
    for (uint64_t k = 0; k < rows && rc == 0; k += CH) {
        size_t n = rows - k < CH ? (size_t)(rows - k) : CH;
        for (size_t i = 0; i < n; i++)
            ids[i] = id_of(k + i);
        rc = one(s, 1, 0, dim, ids, n, buf);
        if (rc == 0)
            rc = one(s, 0, 0, dim, ids, n, buf);
    }
    free(ids);
    free(buf);
    return rc;
}

/* One line of the table: o->reps repetitions of zeps' cell, then the
 * reference's (none with --profile), their medians and each ratio. */
static int report_cell(const ropts *o, const side *s, uint32_t dim, uint64_t rows, int zipf,
                       int push, const uint64_t *ids, size_t n, float *buf)
{
    double zv[32], rv[32], ratios[32];
    for (int r = 0; r < o->reps; r++) {
        zv[r] = cell(s, NULL, 1, push, dim, ids, n, buf, o->secs);
        rv[r] = o->profile ? 1 : cell(s, NULL, 0, push, dim, ids, n, buf, o->secs);
        if (zv[r] < 0 || rv[r] < 0)
            return -1;
        ratios[r] = zv[r] / rv[r];
    }
    double zm = median(zv, o->reps), rm = median(rv, o->reps);
    printf("%-3u %-9llu %-8s %-5s | %11.0f ", dim, (unsigned long long)rows,
           zipf ? "zipf1.1" : "uniform", push ? "push" : "pull", zm);
    if (o->profile) {
        printf("%11s |     -\n", "-");
        return 0;
    }
    printf("%11.0f | %5.2f  (", rm, zm / rm);
    for (int r = 0; r < o->reps; r++)
        printf("%s%.2f", r ? " " : "", ratios[r]);
    printf(")\n");
    fflush(stdout);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct ids of ids[0..n) (sorted), in place; returns their number. */
static size_t distinct(uint64_t *ids, size_t n)
{
    size_t k = 0;
    qsort(ids, n, sizeof(uint64_t), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || ids[k - 1] != ids[i])
            ids[k++] = ids[i];
    return k;
}

static void store_config(const ropts *o, uint32_t dim, uint64_t rows)
{
    zp_sparse_opts so = {.dim = dim,
                         .optimizer = "adagrad",
                         .lr = 0.01f,
                         .init = ZP_INIT_UNIFORM,
                         .init_scale = 0.01,
                         .seed = 1};
    char err[256];
    stores st = {.rows = {.dim = dim}, .map = zt_smap_new(dim)};
    if (zp_sparse_new(&st.rows.store, &so, err, sizeof(err)) != 0)
        abort();
    size_t n = o->batch;
    uint64_t *ids = zp_alloc(n * sizeof(uint64_t));
    float *g = zp_alloc(n * dim * sizeof(float));
    st.out = zp_alloc(n * dim * sizeof(float));
    st.vers = zp_alloc(n * sizeof(uint32_t));
    for (uint64_t k = 0; k < rows; k += n) { /* the fill: rows 0..rows-1 */
        size_t m = rows - k < n ? (size_t)(rows - k) : n;
        for (size_t i = 0; i < m; i++)
            ids[i] = id_of(k + i);
        store_op(&st, 1, 0, ids, m, NULL);
        store_op(&st, 0, 0, ids, m, NULL);
    }
    for (size_t i = 0; i < n * dim; i++)
        g[i] = 1e-3f;
    for (int zipf = 0; zipf < 2; zipf++) {
        make_ids(ids, n, rows, zipf);
        size_t nd = distinct(ids, n);
        for (int push = 1; push >= 0; push--) {
            double zv[32], rv[32];
            for (int r = 0; r < o->reps; r++) {
                zv[r] = cell(NULL, &st, 1, push, dim, ids, nd, g, o->secs);
                rv[r] = cell(NULL, &st, 0, push, dim, ids, nd, g, o->secs);
            }
            printf("%-3u %-9llu %-8s %-5s | %11.0f %11.0f | %5.2f\n", dim, (unsigned long long)rows,
                   zipf ? "zipf1.1" : "uniform", push ? "push" : "pull", median(zv, o->reps),
                   median(rv, o->reps), median(zv, o->reps) / median(rv, o->reps));
            fflush(stdout);
        }
    }
    free(ids);
    free(g);
    free(st.out);
    free(st.vers);
    zt_smap_free(&st.map);
    zp_sparse_destroy(&st.rows.store);
    zp_rows_scratch_free(&st.rows);
}

static int store_main(const ropts *o)
{
    printf("the stores alone, in this process: zeps' shard store (check and apply) vs the "
           "reference's map; %zu ids drawn per request, distinct; medians of %d\n",
           o->batch, o->reps);
    printf("%-3s %-9s %-8s %-5s | %11s %11s | %5s\n", "D", "rows", "ids", "op", "zeps rows/s",
           "ref rows/s", "ratio");
    for (int si = 0; si < o->nsizes; si++)
        for (int di = 0; di < o->ndims; di++)
            if (!(o->dims[di] >= 64 && o->sizes[si] > 2000000 && !o->big))
                store_config(o, o->dims[di], o->sizes[si]);
    return 0;
}

static int run_config(const ropts *o, side *s, zt_cluster *cl, uint32_t dim, uint64_t rows)
{
    char name[32];
    snprintf(name, sizeof(name), "emb%u_%llu", dim, (unsigned long long)rows);
    zeps_sparse_spec spec = {.name = name, .dim = dim, .optimizer = "adagrad", .lr = 0.01,
                             .init = "uniform", .init_scale = 0.01, .seed = 1};
    if (zeps_declare_sparse(s->c, &spec, &s->table) != 0 || zt_sref_reset(s->ref) != 0)
        return -1;
    uint64_t z0 = rss_of(cl->pids[0]), r0 = zt_sref_rss(s->ref);
    double t0 = zp_now_s();
    if (fill(s, dim, rows) != 0)
        return -1;
    double tf = zp_now_s() - t0;
    uint64_t z1 = rss_of(cl->pids[0]), r1 = zt_sref_rss(s->ref);
    printf("D=%u rows=%llu: filled in %.1f s; RSS/rows: zeps %.1f B (%.1f B over the empty "
           "server), ref %.1f B (%.1f B); values+state %u B\n",
           dim, (unsigned long long)rows, tf, (double)z1 / (double)rows,
           (double)(z1 - z0) / (double)rows, (double)r1 / (double)rows,
           (double)(r1 - r0) / (double)rows, dim * 8);
    size_t n = o->batch;
    uint64_t *ids = zp_alloc(n * sizeof(uint64_t));
    float *buf = zp_alloc(n * dim * sizeof(float));
    for (int zipf = 0; zipf < 2; zipf++) {
        make_ids(ids, n, rows, zipf);
        for (int push = 1; push >= 0; push--) {
            if (o->profile && (zipf || push != (o->profile == 'p')))
                continue;
            for (size_t i = 0; i < n * dim; i++)
                buf[i] = push ? 1e-3f : 0.0f;
            if (report_cell(o, s, dim, rows, zipf, push, ids, n, buf) != 0) {
                free(ids);
                free(buf);
                return -1;
            }
        }
    }
    free(ids);
    free(buf);
    return 0;
}

int zt_bench_sparse_ref(int argc, char **argv)
{
    ropts o = {.secs = 0.5, .reps = 3, .batch = 100000};
    uint64_t v[8];
    o.ndims = 3;
    o.dims[0] = 1, o.dims[1] = 8, o.dims[2] = 64;
    o.nsizes = 2;
    o.sizes[0] = 1000000, o.sizes[1] = 10000000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *nx = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--ref") == 0)
            continue;
        if (strcmp(a, "--naive") == 0)
            o.naive = 1;
        else if (strcmp(a, "--store") == 0)
            o.store = 1;
        else if (strcmp(a, "--big") == 0)
            o.big = 1;
        else if (nx && strcmp(a, "--profile") == 0 && (!strcmp(nx, "push") || !strcmp(nx, "pull")))
            o.profile = argv[++i][3] == 'h' ? 'p' : 'l';
        else if (nx && strcmp(a, "--seconds") == 0)
            o.secs = atof(argv[++i]);
        else if (nx && strcmp(a, "--reps") == 0)
            o.reps = atoi(argv[++i]);
        else if (nx && strcmp(a, "--batch") == 0)
            o.batch = (size_t)parse_count(argv[++i]);
        else if (nx && strcmp(a, "--dims") == 0) {
            o.ndims = parse_list(argv[++i], v, 8);
            for (int k = 0; k < o.ndims; k++)
                o.dims[k] = (uint32_t)v[k];
        } else if (nx && strcmp(a, "--rows") == 0)
            o.nsizes = parse_list(argv[++i], o.sizes, 8);
        else {
            fprintf(stderr, "usage: bench_sparse --ref [--seconds S] [--reps R] [--dims 1,8,64] "
                            "[--rows 1M,10M] [--batch N] [--naive] [--big] "
                            "[--profile push|pull] [--store]\n");
            return 2;
        }
    }
    if (o.reps < 1 || o.reps > 32 || o.batch < 1)
        return 2;
    if (o.store)
        return store_main(&o);
    zt_sref ref;
    if (zt_sref_start(&ref, o.naive ? REF_MAP_NAIVE : REF_MAP_BATCHED) != 0) {
        fprintf(stderr, "bench_sparse: cannot start the reference server\n");
        return 1;
    }
    printf("zeps (1 shard, async, Adagrad, client batch built per request) vs the reference "
           "(%s map); %zu ids per request, blocking; medians of %d\n",
           o.naive ? "naive" : "batched", o.batch, o.reps);
    printf("%-3s %-9s %-8s %-5s | %11s %11s | %5s  (%s)\n", "D", "rows", "ids", "op",
           "zeps rows/s", "ref rows/s", "ratio", "ratio of each run");
    int rc = 0;
    for (int si = 0; si < o.nsizes && rc == 0; si++) {
        for (int di = 0; di < o.ndims && rc == 0; di++) {
            uint32_t dim = o.dims[di];
            uint64_t rows = o.sizes[si];
            if (dim >= 64 && rows > 2000000 && !o.big)
                continue;
            zt_cluster cl;
            if (zt_cluster_start(&cl, 1, 1, "async", "max_message_mb = 1024;", NULL) != 0) {
                fprintf(stderr, "bench_sparse: cannot start zeps (is ZEPS_BINDIR set?)\n");
                rc = -1;
                break;
            }
            side s = {.c = zt_client(&cl, 0), .ref = &ref};
            rc = s.c ? run_config(&o, &s, &cl, dim, rows) : -1;
            if (rc != 0)
                fprintf(stderr, "bench_sparse: D=%u rows=%llu failed: %s\n", dim,
                        (unsigned long long)rows, s.c ? zeps_last_error(s.c) : "no client");
            zeps_client_destroy(&s.c);
            zt_cluster_stop(&cl);
        }
    }
    zt_sref_reset(&ref);
    zt_sref_stop(&ref);
    return rc ? 1 : 0;
}
