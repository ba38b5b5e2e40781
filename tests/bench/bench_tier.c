/*
 * bench_tier.c - the cold tier (docs/sparse.md, "Cold tier") beside its
 * references, in one run on real shards:
 *
 *  1. Zipf(1.1) training steps (pull then push of a batch) over N ids on a
 *     shard holding a tenth of them hot, the rest in RocksDB, against the
 *     same steps on a shard holding all of them in RAM: rows/s of each,
 *     their ratio, and the tiered table's hit rate over the steps.
 *  2. Uniform pulls (nearly all cold) on the tiered shard, against
 *     RocksDB's own MultiGet of uniform ids, in batches of the same size,
 *     from as many threads as the machine has cores, on the same database
 *     (opened read-only beside the running shard): rows/s of each and
 *     their ratio.
 *  3. The p99 of pulls of hot ids while another client pulls uniform (cold)
 *     ids on the same shard, against the same with the cold tier idle.
 * Parts 1-3 alternate their two sides in WINDOWS windows each, so that the
 * machine's load falls on both.
 *  4. Bounded memory: a shard whose tiered table has a memory_budget of a
 *     tenth of its rows (--budget-mb), filled and trained: its RSS over
 *     its idle RSS against the budget.
 *
 * Usage: bench_tier [--ids N (2000000)] [--dim D (16)] [--batch B (10000)]
 *                   [--seconds S (3)] [--evict lru|lfu (lru)] [--budget-mb M]
 *                   [--part 1|4] (that part alone) [--warmup S] (S seconds of
 *                   untimed Zipf steps on both shards before part 1: the hot
 *                   tier's steady state).
 * Needs ZEPS_BINDIR.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rocksdb/c.h>

#include "alloc.h"
#include "harness.h"
#include "now.h"
#include "rng.h"
#include "rocks.h"
#include "scratch.h"
#include "zeps.h"

static uint64_t N = 2000000, B = 10000;
static uint32_t D = 16;
static double SECS = 3;
static const char *EVICT = "lru";
static uint64_t BUDGET_MB; /* part 4's memory_budget (0: a tenth of the rows, 192 bytes each) */
static double ran_s;       /* how long the last run() ran */
static int PART;           /* --part 1 or 4: that part alone (0: all) */
static double WARMUP;      /* --warmup S: seconds of Zipf steps on both shards before part 1 */

static uint64_t id_of(uint64_t rank)
{
    return zp_rng_mix64(rank + 1);
}

static uint64_t zipf_rank(zp_rng *r)
{
    double u = zp_rng_uniform(r), a = 1.0 - 1.1;
    uint64_t k = (uint64_t)pow((pow((double)N, a) - 1.0) * u + 1.0, 1.0 / a) - 1;
    return k >= N ? N - 1 : k;
}

static zeps_sparse_spec spec(int tier)
{
    zeps_sparse_spec s = {.name = "emb",
                          .dim = D,
                          .optimizer = "adagrad",
                          .lr = 0.01,
                          .init = "uniform",
                          .init_scale = 0.01,
                          .seed = 1,
                          .tier = tier,
                          .capacity_rows = tier ? N / 10 : 0,
                          .evict = EVICT};
    return s;
}

/* Hits and promotions of the table so far (shard 0). */
static void tier_counts(zeps_client *c, uint64_t *hits, uint64_t *prom)
{
    Zeps__ShardStats *st = zt_stats(c, 0);
    *hits = *prom = 0;
    for (size_t i = 0; st && i < st->n_tables; i++) {
        *hits += st->tables[i]->tier_hits;
        *prom += st->tables[i]->tier_promotions;
    }
    if (st)
        zeps__shard_stats__free_unpacked(st, NULL);
}

/* Touch all N ids once (rows created; on the tiered shard 90% demoted). */
static void fill(zeps_client *c, uint32_t t)
{
    uint64_t *ids = zp_alloc(B * sizeof(uint64_t));
    float *rows = zp_alloc(B * D * sizeof(float));
    for (uint64_t k = 0; k < N; k += B) {
        size_t n = N - k < B ? N - k : B;
        for (size_t i = 0; i < n; i++)
            ids[i] = id_of(k + i);
        if (zeps_spull(c, t, ids, n, rows, 0) != 0)
            fprintf(stderr, "fill: %s\n", zeps_last_error(c));
    }
    free(ids);
    free(rows);
}

/* Steps of a Zipf batch (pull, push) or of a uniform batch (pull only)
 * for secs: distinct rows moved per second. */
static double run(zeps_client *c, uint32_t t, int zipf, int push, uint64_t seed, double secs)
{
    uint64_t *ids = zp_alloc(B * sizeof(uint64_t));
    float *rows = zp_alloc(B * D * sizeof(float));
    zp_rng r;
    zp_rng_seed(&r, seed, 1, 2);
    uint64_t moved = 0;
    double t0 = zp_now_s(), t1;
    do {
        for (size_t i = 0; i < B; i++)
            ids[i] = id_of(zipf ? zipf_rank(&r) : zp_rng_next(&r) % N);
        zeps_sbatch *b;
        if (zeps_sbatch_new(c, t, ids, B, &b) != 0 || zeps_sbatch_pull(b, rows, 0) != 0 ||
            (push && zeps_sbatch_push(b, rows, 0) != 0))
            fprintf(stderr, "run: %s\n", zeps_last_error(c));
        moved += zeps_sbatch_unique(b);
        zeps_sbatch_free(&b);
        t1 = zp_now_s();
    } while (t1 - t0 < secs);
    free(ids);
    free(rows);
    ran_s = t1 - t0;
    return (double)moved / (t1 - t0);
}

/* Part 3: a client pulling uniform ids until told to stop. */
typedef struct cold_load {
    const zt_cluster *cl;
    atomic_int stop;
    atomic_int active; /* pulling now (else paused) */
    atomic_int paused; /* it saw active 0 between two pulls */
} cold_load;

static void *cold_puller(void *arg)
{
    cold_load *L = arg;
    zeps_client *c = zt_client(L->cl, 1);
    uint32_t t;
    zeps_sparse_spec s = spec(1);
    zeps_declare_sparse(c, &s, &t);
    zp_rng r;
    zp_rng_seed(&r, 77, 0, 0);
    uint64_t ids[1000];
    static float rows[1000 * 64];
    while (!atomic_load(&L->stop)) {
        if (!atomic_load(&L->active)) {
            atomic_store(&L->paused, 1);
            usleep(1000);
            continue;
        }
        atomic_store(&L->paused, 0);
        for (size_t i = 0; i < 1000; i++)
            ids[i] = id_of(zp_rng_next(&r) % N);
        zeps_spull(c, t, ids, 1000, rows, 0);
    }
    zeps_client_destroy(&c);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Latencies in us of pulls of 100 of the hottest ids for secs, appended
 * to lat (at most cap, *n so far). */
static void hot_lat(zeps_client *c, uint32_t t, double secs, double *lat, size_t cap, size_t *n)
{
    uint64_t ids[100];
    float rows[100 * 64];
    for (size_t i = 0; i < 100; i++)
        ids[i] = id_of(i);
    double t0 = zp_now_s(), t1;
    do {
        double a = zp_now_s();
        zeps_spull(c, t, ids, 100, rows, 0);
        t1 = zp_now_s();
        if (*n < cap)
            lat[(*n)++] = (t1 - a) * 1e6;
    } while (t1 - t0 < secs);
}

static double p99(double *lat, size_t n)
{
    qsort(lat, n, sizeof(double), cmp_d);
    return n ? lat[(size_t)(0.99 * (double)(n - 1))] : 0;
}

/* RocksDB's own MultiGet over uniform ids of a tier's database, opened
 * read-only beside the running shard with the tier's own settings
 * (rocks.h), read in batched MultiGet calls of the size the tier's store
 * makes, batches of B ids. */
typedef struct mg {
    zp_rocks_settings set;
    rocksdb_t *db;
    rocksdb_column_family_handle_t *cf;
    zp_rng r;
} mg;

static int mg_open(mg *m, const char *path)
{
    zp_rocks_settings_init(&m->set, 0);
    char *err = NULL;
    const char *names[1] = {"default"};
    const rocksdb_options_t *cfo[1] = {m->set.opts};
    m->db = rocksdb_open_for_read_only_column_families(m->set.opts, path, 1, names, cfo, &m->cf, 0,
                                                       &err);
    zp_rng_seed(&m->r, 5, 0, 0);
    if (err) {
        fprintf(stderr, "multiget: %s\n", err);
        free(err);
        zp_rocks_settings_fini(&m->set);
        return -1;
    }
    return 0;
}

static void mg_close(mg *m)
{
    rocksdb_column_family_handle_destroy(m->cf);
    rocksdb_close(m->db);
    zp_rocks_settings_fini(&m->set);
}

/* One reading thread of mg_run: batches of B uniform ids for secs. */
typedef struct mg_reader {
    mg *m;
    zp_rng r;
    double secs;
    uint64_t found;
} mg_reader;

static void *mg_read(void *arg)
{
    mg_reader *rd = arg;
    mg *m = rd->m;
    char(*keys)[8] = zp_alloc(B * 8);
    const char **kl = zp_alloc(B * sizeof(char *));
    size_t *ks = zp_alloc(B * sizeof(size_t));
    rocksdb_pinnableslice_t **vl = zp_alloc(B * sizeof(*vl));
    char **errs = zp_alloc(B * sizeof(char *));
    double t0 = zp_now_s();
    do {
        for (size_t i = 0; i < B; i++) {
            uint64_t id = id_of(zp_rng_next(&rd->r) % N);
            for (int j = 0; j < 8; j++)
                keys[i][j] = (char)(id >> (56 - 8 * j));
            kl[i] = keys[i];
            ks[i] = 8;
        }
        for (size_t at = 0; at < B; at += ZP_ROCKS_BATCH) { /* the tier's store's calls */
            size_t k = B - at < ZP_ROCKS_BATCH ? B - at : ZP_ROCKS_BATCH;
            rocksdb_batched_multi_get_cf(m->db, m->set.read, m->cf, k, kl + at, ks + at, vl + at,
                                         errs + at, false);
        }
        for (size_t i = 0; i < B; i++) {
            rd->found += vl[i] != NULL;
            rocksdb_pinnableslice_destroy(vl[i]);
            free(errs[i]);
        }
    } while (zp_now_s() - t0 < rd->secs);
    free(keys), free(kl), free(ks), free(vl), free(errs);
    return NULL;
}

/* Rows found per second over secs (ran_s set), read by as many threads
 * as the machine has cores (the tier reads its pieces on libuv's pool,
 * several at once): RocksDB's ceiling here. */
static double mg_run(mg *m, double secs)
{
    enum { MAXT = 16 };
    long nc = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = nc < 1 ? 1 : nc > MAXT ? MAXT : (int)nc;
    mg_reader rd[MAXT];
    pthread_t th[MAXT];
    double t0 = zp_now_s();
    uint64_t found = 0;
    for (int i = 0; i < nt; i++) {
        rd[i] = (mg_reader){.m = m, .secs = secs};
        zp_rng_seed(&rd[i].r, zp_rng_next(&m->r), (uint64_t)i, 0);
        pthread_create(&th[i], NULL, mg_read, &rd[i]);
    }
    for (int i = 0; i < nt; i++) {
        pthread_join(th[i], NULL);
        found += rd[i].found;
    }
    ran_s = zp_now_s() - t0;
    return (double)found / ran_s;
}

/* CPU seconds process pid has used (all its threads), 0 if unknown. */
static double cpu_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long ut = 0, st = 0;
    if (f != NULL) {
        /* after the command's ")": state and 10 fields, then utime, stime */
        if (fscanf(f, "%*[^)]) %*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lu %lu", &ut, &st) != 2)
            ut = st = 0;
        fclose(f);
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* MiB of process pid's status field `what` ("VmRSS:", "VmHWM:"), 0 if
 * unknown. */
static double status_mib(pid_t pid, const char *what)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    double kb = 0;
    while (f != NULL && fgets(line, sizeof line, f))
        if (strncmp(line, what, strlen(what)) == 0)
            kb = atof(line + strlen(what));
    if (f != NULL)
        fclose(f);
    return kb / 1024.0;
}

static double rss_mib(pid_t pid)
{
    return status_mib(pid, "VmRSS:");
}

/* Part 4: a shard of its own whose tiered table is bounded by bytes
 * (memory_budget, the hot tenth of the rows) instead of rows: its RSS
 * over that of the same shard with the table declared and empty, after
 * the fill and SECS of Zipf steps, against the budget. */
static void bounded_memory(const char *dir)
{
    char extra[800];
    snprintf(extra, sizeof extra, "  tier_dir = \"%s\"; max_message_mb = 512;", dir);
    zt_cluster mc;
    if (zt_cluster_start(&mc, 1, 2, "async", extra, NULL) != 0) {
        fprintf(stderr, "bench_tier: cannot start the shard of part 4\n");
        return;
    }
    zeps_client *c = zt_client(&mc, 0);
    zeps_sparse_spec s = spec(1);
    s.capacity_rows = 0;
    s.memory_budget = BUDGET_MB << 20;
    uint32_t t;
    if (zeps_declare_sparse(c, &s, &t) != 0) {
        fprintf(stderr, "bench_tier: DECLARE (part 4): %s\n", zeps_last_error(c));
        zeps_client_destroy(&c);
        zt_cluster_stop(&mc);
        return;
    }
    double base = rss_mib(mc.pids[0]);
    fill(c, t);
    run(c, t, 1, 1, 13, SECS);
    double rss = rss_mib(mc.pids[0]), peak = status_mib(mc.pids[0], "VmHWM:");
    printf("4. memory_budget %llu MiB (%llu ids, about %.0fx the rows it holds hot): shard RSS "
           "over its idle RSS (%.0f MiB) after the fill and Zipf steps %.0f MiB (peak %.0f MiB), "
           "%.2fx the budget (bar 1.15)\n",
           (unsigned long long)BUDGET_MB, (unsigned long long)N,
           (double)N * 192.0 / (double)(BUDGET_MB << 20), base, rss - base, peak - base,
           (rss - base) / (double)BUDGET_MB);
    Zeps__ShardStats *st = zt_stats(c, 0);
    for (size_t i = 0; st && i < st->n_tables; i++)
        if (st->tables[i]->tiered)
            printf("   the budget's split: hot rows %.1f MiB (%llu rows); the cold tier's share "
                   "%.1f MiB: write buffers %.1f, index and filters outside the cache %.1f, "
                   "block cache %.1f MiB (STATS)\n",
                   (double)(st->tables[i]->rows * st->tables[i]->bytes_per_row) / 1048576.0,
                   (unsigned long long)st->tables[i]->rows,
                   (double)st->tables[i]->tier_mem_share / 1048576.0,
                   (double)st->tables[i]->tier_mem_write_buffers / 1048576.0,
                   (double)st->tables[i]->tier_mem_table_readers / 1048576.0,
                   (double)st->tables[i]->tier_mem_block_cache / 1048576.0);
    if (st)
        zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_destroy(&c);
    zt_cluster_stop(&mc);
}

/* Each side-by-side figure is measured in WINDOWS windows of SECS /
 * WINDOWS, the two sides alternated, so that the machine's load, which
 * moves by tens of percent from second to second here, falls on both. */
#define WINDOWS 5

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The hit rate, counted as the tier counts it (a pull and a push touch
 * each distinct id of a batch; the push finds it hot), of a hot tier that
 * held exactly the N / 10 most frequent ids: over 50 batches drawn as the
 * steps draw them (untimed), (U + H) / 2U for U distinct ids a batch of
 * which H are among those. */
static double ideal_hit(void)
{
    uint64_t *rk = zp_alloc(B * sizeof(uint64_t)), u = 0, h = 0;
    zp_rng r;
    zp_rng_seed(&r, 3, 1, 2);
    for (int b = 0; b < 50; b++) {
        for (size_t i = 0; i < B; i++)
            rk[i] = zipf_rank(&r);
        qsort(rk, B, sizeof(uint64_t), cmp_u64);
        for (size_t i = 0; i < B; i++)
            if (i == 0 || rk[i] != rk[i - 1]) {
                u++;
                h += rk[i] < N / 10;
            }
    }
    free(rk);
    return (double)(u + h) / (double)(2 * u);
}

/* Part 1: Zipf steps, tiered and all in RAM. */
static void part_zipf(const zt_cluster *tc, const zt_cluster *rc, zeps_client *ct, zeps_client *cr,
                      uint32_t tt, uint32_t tr)
{
    uint64_t h0, p0, h1, p1;
    tier_counts(ct, &h0, &p0);
    double mt = 0, st = 0, mr = 0, sr = 0, ct_s = 0, cr_s = 0;
    for (int w = 0; w < WINDOWS; w++) {
        double c0 = cpu_s(tc->pids[0]);
        mt += run(ct, tt, 1, 1, 9 + (uint64_t)w, SECS / WINDOWS) * ran_s;
        st += ran_s;
        double c1 = cpu_s(tc->pids[0]), c2 = cpu_s(rc->pids[0]);
        mr += run(cr, tr, 1, 1, 9 + (uint64_t)w, SECS / WINDOWS) * ran_s;
        sr += ran_s;
        ct_s += c1 - c0;
        cr_s += cpu_s(rc->pids[0]) - c2;
    }
    tier_counts(ct, &h1, &p1);
    double hit = (double)(h1 - h0) / (double)(h1 - h0 + p1 - p0);
    printf("1. Zipf(1.1) pull+push: tiered %.0f rows/s, all in RAM %.0f rows/s, ratio %.2f "
           "(bar 0.5); hit rate %.4f (a hot tier of the N / 10 most frequent ids: %.4f)\n",
           mt / st, mr / sr, (mt / st) / (mr / sr), hit, ideal_hit());
    printf("   shard CPU per row moved: tiered %.2f us, all in RAM %.2f us\n", ct_s * 1e6 / mt,
           cr_s * 1e6 / mr);
    printf("   shard RSS: tiered %.0f MiB, all in RAM %.0f MiB\n", rss_mib(tc->pids[0]),
           rss_mib(rc->pids[0]));
}

/* Part 2: uniform pulls of the tiered shard and RocksDB's MultiGet of the
 * tier's database (opened beside it: the rows not yet written, a few
 * percent, are not in it, and its misses cost it less than a read). */
static void part_uniform(zeps_client *ct, uint32_t tt, const char *path)
{
    mg m;
    if (mg_open(&m, path) != 0)
        return;
    double mt = 0, st = 0, mm = 0, sm = 0;
    for (int w = 0; w < WINDOWS; w++) {
        mt += run(ct, tt, 0, 0, 11 + (uint64_t)w, SECS / WINDOWS) * ran_s;
        st += ran_s;
        mm += mg_run(&m, SECS / WINDOWS) * ran_s;
        sm += ran_s;
    }
    mg_close(&m);
    printf("2. uniform pulls: tiered %.0f rows/s, RocksDB MultiGet on the same data %.0f rows/s, "
           "ratio %.2f (bar 0.7)\n",
           mt / st, mm / sm, (mt / st) / (mm / sm));
}

/* Part 3: hot pulls' p99 with the cold tier idle and while another
 * client pulls uniform ids, the two alternated. */
static void part_hot(const zt_cluster *tc, zeps_client *ct, uint32_t tt)
{
    size_t cap = 1 << 20, ni = 0, nb = 0;
    double *idle = zp_alloc(cap * sizeof(double)), *busy = zp_alloc(cap * sizeof(double));
    cold_load L = {.cl = tc};
    pthread_t th;
    pthread_create(&th, NULL, cold_puller, &L);
    for (int w = 0; w < WINDOWS; w++) {
        atomic_store(&L.active, 0);
        for (int i = 0; i < 10000 && !atomic_load(&L.paused); i++)
            usleep(1000); /* its pull in flight ends */
        hot_lat(ct, tt, SECS / WINDOWS, idle, cap, &ni);
        atomic_store(&L.active, 1);
        usleep(20000);
        hot_lat(ct, tt, SECS / WINDOWS, busy, cap, &nb);
    }
    atomic_store(&L.stop, 1);
    pthread_join(th, NULL);
    double pi = p99(idle, ni), pb = p99(busy, nb);
    printf("3. hot pulls (100 ids) p99: cold tier idle %.0f us, while another client pulls "
           "uniform ids %.0f us, ratio %.2f (bar 2)\n",
           pi, pb, pb / pi);
    free(idle);
    free(busy);
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--ids") == 0)
            N = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--dim") == 0)
            D = (uint32_t)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--batch") == 0)
            B = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0)
            SECS = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--evict") == 0)
            EVICT = argv[i + 1];
        else if (strcmp(argv[i], "--part") == 0)
            PART = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--warmup") == 0)
            WARMUP = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--budget-mb") == 0)
            BUDGET_MB = strtoull(argv[i + 1], NULL, 10);
    }
    if (BUDGET_MB == 0)
        BUDGET_MB = (N / 10 * 192 + (1 << 20) - 1) >> 20;
    if (D > 64 || N < 1000 || B < 1 || B > N) {
        fprintf(stderr, "bench_tier: --dim <= 64, --ids >= 1000, 1 <= --batch <= --ids\n");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    char dir[512], extra[800];
    zt_scratch_begin();
    if (PART == 4) {
        zt_scratch_dir(dir, sizeof dir, "bench-tier-mem");
        bounded_memory(dir);
        zt_scratch_end();
        return 0;
    }
    zt_scratch_dir(dir, sizeof dir, "bench-tier");
    snprintf(extra, sizeof extra, "  tier_dir = \"%s\"; max_message_mb = 512;", dir);
    zt_cluster tc, rc;
    if (zt_cluster_start(&tc, 1, 2, "async", extra, NULL) != 0 ||
        zt_cluster_start(&rc, 1, 2, "async", "  max_message_mb = 512;", NULL) != 0) {
        fprintf(stderr, "bench_tier: cannot start the shards (is ZEPS_BINDIR set?)\n");
        return 1;
    }
    zeps_client *ct = zt_client(&tc, 0), *cr = zt_client(&rc, 0);
    zeps_sparse_spec st = spec(1), sr = spec(0);
    uint32_t tt, tr;
    if (zeps_declare_sparse(ct, &st, &tt) != 0 || zeps_declare_sparse(cr, &sr, &tr) != 0) {
        fprintf(stderr, "bench_tier: DECLARE: %s %s\n", zeps_last_error(ct), zeps_last_error(cr));
        return 1;
    }
    double f0 = zp_now_s();
    fill(ct, tt);
    double f1 = zp_now_s();
    fill(cr, tr);
    printf("ids %llu, dim %u (adagrad), batch %llu, hot budget %llu rows (%s); filled in %.1f s "
           "(tiered) and %.1f s (RAM)\n",
           (unsigned long long)N, D, (unsigned long long)B, (unsigned long long)(N / 10), EVICT,
           f1 - f0, zp_now_s() - f1);
    if (WARMUP > 0) { /* the hot tier's steady state: untimed steps, both shards */
        run(ct, tt, 1, 1, 7, WARMUP);
        run(cr, tr, 1, 1, 7, WARMUP);
        printf("warm-up: %.0f s of Zipf steps on each shard before part 1\n", WARMUP);
    }
    part_zipf(&tc, &rc, ct, cr, tt, tr);
    char path[700];
    snprintf(path, sizeof path, "%s/tier-emb-shard-0", dir);
    if (PART != 1) {
        part_uniform(ct, tt, path);
        part_hot(&tc, ct, tt);
    }
    zeps_client_destroy(&ct);
    zeps_client_destroy(&cr);
    zt_cluster_stop(&tc);
    zt_cluster_stop(&rc);
    char mdir[512];
    zt_scratch_dir(mdir, sizeof mdir, "bench-tier-mem");
    if (PART != 1)
        bounded_memory(mdir);
    zt_scratch_end();
    return 0;
}
