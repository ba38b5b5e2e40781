/*
 * test_inject_cluster.c - staleness on demand (cluster.inject) with real servers
 * and worker processes: the tau every applied push really had, as the
 * shards measure it, is the injected one; uniform{0..s} passes a
 * chi-square test on a real run's histogram; the same seed gives the same
 * run bit for bit (every worker hashes every parameter vector it was
 * served), another seed another run; under bsp rounds make tau exact
 * without turns; a sparse table's rows are each served exactly tau of
 * their own updates old, with steps that visit one shard only.
 */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "sparse_hash.h"
#include "zeps.h"

#define LEN 64
#define NW  4

static const zeps_table_spec spec = {.name = "x", .length = LEN, .optimizer = "sgd", .lr = 0.05};

/* FNV-1a over the bytes of a pulled vector, chained. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#define NIDS           32 /* the sparse worker's rows */
#define DIM            4
#define NSHARDS_SPARSE 2

/* The sparse worker's batches: every id (0), the ids of shard 0 only (1),
 * of shard 1 only (2); rank r uses batch (r + k) % 3 at step k, so some
 * steps visit one shard and not the other. */
static void sparse_ids(uint64_t *all, uint64_t part[2][NIDS], size_t npart[2])
{
    npart[0] = npart[1] = 0;
    for (int i = 0; i < NIDS; i++) {
        all[i] = 1000u + (uint64_t)i * 7919u;
        int k = zp_sparse_shard_of(all[i], NSHARDS_SPARSE);
        part[k][npart[k]++] = all[i];
    }
}

static const zeps_sparse_spec sspec = {
    .name = "e", .dim = DIM, .optimizer = "sgd", .lr = 0.05, .init = "uniform", .init_scale = 0.5};

/* One step of a dense worker: pull at clock k, hash, push a gradient that
 * depends on the rank (so the order of the pushes shows in the bits). */
static int dense_step(zeps_client *c, uint32_t t, zeps_sbatch *const *b, int r, int64_t k,
                      uint64_t *h)
{
    (void)b;
    float w[LEN], g[LEN];
    if (zeps_pull(c, t, w, 0, LEN, k) != 0)
        return 12;
    *h = fnv(*h, w, sizeof(w));
    for (int i = 0; i < LEN; i++)
        g[i] = 0.1f * w[i] + 0.01f * (float)(r + 1) * (float)(i % 7);
    return zeps_push(c, t, g, 0, LEN, k) != 0 ? 13 : 0;
}

/* The same over rows of a sparse table, batch (r + k) % 3 (the batch
 * sends the row versions its pull saw, so each row's tau is measured). */
static int sparse_step(zeps_client *c, uint32_t t, zeps_sbatch *const *b, int r, int64_t k,
                       uint64_t *h)
{
    (void)c;
    (void)t;
    zeps_sbatch *s = b[(r + k) % 3];
    size_t n = zeps_sbatch_size(s) * DIM;
    float w[NIDS * DIM], g[NIDS * DIM];
    if (zeps_sbatch_pull(s, w, k) != 0)
        return 12;
    *h = fnv(*h, w, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        g[i] = 0.1f * w[i] + 0.01f * (float)(r + 1) * (float)(i % 7);
    return zeps_sbatch_push(s, g, k) != 0 ? 13 : 0;
}

/* Rows pushed in all by NW sparse workers over `steps` steps. */
static uint64_t sparse_rows_pushed(int steps)
{
    uint64_t all[NIDS], part[2][NIDS], total = 0;
    size_t npart[2];
    sparse_ids(all, part, npart);
    for (int r = 0; r < NW; r++)
        for (int k = 0; k < steps; k++)
            total += (r + k) % 3 == 0 ? NIDS : npart[(r + k) % 3 - 1];
    return total;
}

/* A worker: `steps` steps of its table (dense, or sparse), then the final
 * barrier; writes the hash of everything it pulled to <dir>/pulls-<r>. */
static void worker(const zt_cluster *cl, int r, int steps, bool sparse)
{
    zeps_client *c = zt_client(cl, (uint32_t)r);
    uint32_t t;
    if (!c || (sparse ? zeps_declare_sparse(c, &sspec, &t) : zeps_declare(c, &spec, &t)) != 0)
        _exit(11);
    zeps_sbatch *b[3] = {NULL, NULL, NULL};
    uint64_t all[NIDS], part[2][NIDS];
    size_t npart[2];
    sparse_ids(all, part, npart);
    if (sparse && (zeps_sbatch_new(c, t, all, NIDS, &b[0]) != 0 ||
                   zeps_sbatch_new(c, t, part[0], npart[0], &b[1]) != 0 ||
                   zeps_sbatch_new(c, t, part[1], npart[1], &b[2]) != 0))
        _exit(11);
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t k = 0; k < steps; k++) {
        int rc = (sparse ? sparse_step : dense_step)(c, t, b, r, k, &h);
        if (rc != 0)
            _exit(rc);
        if (zeps_clock(c, k) != 0)
            _exit(13);
    }
    if (zeps_barrier(c) != 0) /* as zeps-worker ends: wait for the others */
        _exit(15);
    char path[400];
    snprintf(path, sizeof(path), "%s/pulls-%d", cl->dir, r);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%016" PRIx64 "\n", h) < 0 || fclose(f) != 0)
        _exit(14);
    for (int i = 0; i < 3; i++)
        zeps_sbatch_free(&b[i]);
    zeps_client_destroy(&c);
    _exit(0);
}

static void wait_workers(const pid_t *pids, int nw)
{
    for (int r = 0; r < nw; r++) {
        int st = zt_wait(pids[r], 120);
        ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "worker %d failed (status %d)", r, st);
    }
}

static void run_workers(const zt_cluster *cl, int nw, int steps, bool sparse)
{
    pid_t pids[NW];
    for (int r = 0; r < nw; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            worker(cl, r, steps, sparse);
    }
    wait_workers(pids, nw);
}

/* One run (dense, or sparse: each push counts NIDS rows): the tau
 * histogram of table 0 on each shard (counts summed over shards into
 * tau[64]) and the workers' pull hashes. */
typedef struct run_out {
    uint64_t tau[64];
    uint64_t pushes;
    char hashes[NW][24];
} run_out;

static void run_as(const char *mode, const char *inject, int nservers, int nw, int steps,
                   bool sparse, run_out *out)
{
    memset(out, 0, sizeof(*out));
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, nservers, nw, mode, inject, NULL), 0);
    run_workers(&cl, nw, steps, sparse);
    zeps_client *tool = zt_client(&cl, ZEPS_RANK_TOOL);
    ck_assert_ptr_nonnull(tool);
    for (int k = 0; k < nservers; k++) {
        Zeps__ShardStats *st = zt_stats(tool, k);
        ck_assert_ptr_nonnull(st);
        ck_assert_uint_eq(st->n_tables, 1);
        const Zeps__Histogram *h = st->tables[0]->tau;
        if (!sparse) /* every push applied (a sparse one counts its rows on this shard) */
            ck_assert_uint_eq(h->n, (uint64_t)nw * (uint64_t)steps);
        for (size_t i = 0; i < h->n_counts && i < 64; i++)
            out->tau[i] += h->counts[i];
        out->pushes += h->n;
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    zeps_client_destroy(&tool);
    for (int r = 0; r < nw; r++) {
        char path[400];
        snprintf(path, sizeof(path), "%s/pulls-%d", cl.dir, r);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(out->hashes[r], sizeof(out->hashes[r]), f));
        fclose(f);
    }
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

static void run(const char *mode, const char *inject, int nservers, int steps, run_out *out)
{
    run_as(mode, inject, nservers, NW, steps, false, out);
}

/* async, fixed tau 3, turns, 2 shards: every push is exactly 3 versions
 * old but the first three (versions 0..2 have nothing older); the run is
 * the same bits twice. */
START_TEST(test_fixed_exact)
{
    const char *inj = "inject = { schedule = \"fixed\"; tau = 3; };";
    run_out a, b;
    run("async", inj, 2, 25, &a);
    /* summed over the two shards, which see the same pushes */
    ck_assert_uint_eq(a.tau[3], 2 * (NW * 25 - 3));
    ck_assert_uint_eq(a.tau[0], 2);
    ck_assert_uint_eq(a.tau[1], 2);
    ck_assert_uint_eq(a.tau[2], 2);
    run("async", inj, 2, 25, &b);
    ck_assert_mem_eq(a.hashes, b.hashes, sizeof(a.hashes));
    ck_assert_mem_eq(a.tau, b.tau, sizeof(a.tau));
}
END_TEST

/* async, tau ~ U{0..6}: the real run's histogram against 1/7 each (6
 * degrees of freedom, 22.46 is the 0.1% point; the first six pushes are
 * clamped to their version); seed 11 twice gives the same bits, seed 12
 * another run. */
START_TEST(test_uniform_seeded)
{
    const char *fmt = "inject = { schedule = \"uniform\"; max_tau = 6; seed = %d; };";
    char inj[128];
    snprintf(inj, sizeof(inj), fmt, 11);
    run_out a, b, c;
    run("async", inj, 1, 150, &a);
    double x = 0, e = (double)a.pushes / 7;
    for (int k = 0; k < 7; k++)
        x += (a.tau[k] - e) * (a.tau[k] - e) / e;
    uint64_t beyond = 0;
    for (int k = 7; k < 64; k++)
        beyond += a.tau[k];
    ck_assert_uint_eq(beyond, 0);
    ck_assert_msg(x < 22.46, "chi-square %.2f of %" PRIu64 " pushes", x, a.pushes);
    run("async", inj, 1, 150, &b);
    ck_assert_mem_eq(a.hashes, b.hashes, sizeof(a.hashes));
    ck_assert_mem_eq(a.tau, b.tau, sizeof(a.tau));
    snprintf(inj, sizeof(inj), fmt, 12);
    run("async", inj, 1, 150, &c);
    ck_assert(memcmp(a.hashes, c.hashes, sizeof(a.hashes)) != 0);
}
END_TEST

/* A sparse table, async, fixed tau 3, 4 workers, 2 shards, steps that
 * visit one shard only (batches by shard): the turns by round never hold
 * (the run ends), every row of every push is exactly 3 of its own updates
 * old but for each row's first three (it has nothing older), the run is
 * the same bits twice, and another tau another run. */
START_TEST(test_sparse_fixed_exact)
{
    const char *inj = "inject = { schedule = \"fixed\"; tau = 3; };";
    run_out a, b, c;
    uint64_t rows = sparse_rows_pushed(20);
    run_as("async", inj, NSHARDS_SPARSE, NW, 20, true, &a);
    ck_assert_uint_eq(a.pushes, rows);
    ck_assert_uint_eq(a.tau[0], NIDS);
    ck_assert_uint_eq(a.tau[1], NIDS);
    ck_assert_uint_eq(a.tau[2], NIDS);
    ck_assert_uint_eq(a.tau[3], rows - 3 * NIDS);
    run_as("async", inj, NSHARDS_SPARSE, NW, 20, true, &b);
    ck_assert_mem_eq(a.hashes, b.hashes, sizeof(a.hashes));
    ck_assert_mem_eq(a.tau, b.tau, sizeof(a.tau));
    run_as("async", "inject = { schedule = \"fixed\"; tau = 1; };", NSHARDS_SPARSE, NW, 20, true,
           &c);
    ck_assert_uint_eq(c.tau[1], rows - NIDS);
    ck_assert(memcmp(a.hashes, c.hashes, sizeof(a.hashes)) != 0);
}
END_TEST

/* bsp, fixed tau 2: a round's pushes all meet one version, so without
 * turns every push of round c >= 2 is exactly 2 old. */
START_TEST(test_bsp_fixed)
{
    run_out a;
    run("bsp", "inject = { schedule = \"fixed\"; tau = 2; };", 2, 10, &a);
    ck_assert_uint_eq(a.tau[0], 2 * NW);
    ck_assert_uint_eq(a.tau[1], 2 * NW);
    ck_assert_uint_eq(a.tau[2], 2 * NW * 8);
}
END_TEST

/* Unequal step counts (rank 3 stops after 4 steps and waits in the final
 * barrier, which lives on shard 0 alone): shard 0 skips it at once, shard 1
 * once it is declared lost (the automatic lost-worker timeout); the run
 * ends instead of holding for ever, and every push stays exactly tau old. */
START_TEST(test_unequal_steps)
{
    zt_cluster cl;
    ck_assert_int_eq(
        zt_cluster_start(&cl, 2, NW, "async", "inject = { schedule = \"fixed\"; tau = 3; };", NULL),
        0);
    pid_t pids[NW];
    for (int r = 0; r < NW; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            worker(&cl, r, r == NW - 1 ? 4 : 12, false);
    }
    wait_workers(pids, NW);
    zeps_client *tool = zt_client(&cl, ZEPS_RANK_TOOL);
    for (int k = 0; k < 2; k++) {
        Zeps__ShardStats *st = zt_stats(tool, k);
        ck_assert_ptr_nonnull(st);
        const Zeps__Histogram *h = st->tables[0]->tau;
        ck_assert_uint_eq(h->n, 3 * 12 + 4);
        ck_assert_uint_eq(h->counts[3], h->n - 3);
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    zeps_client_destroy(&tool);
    ck_assert(zt_wait_log(&cl, 1, "worker 3 declared lost")); /* shard 1 has no barrier */
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Count in name.dat (zepsctl stats --plot) at bucket row `bucket`, column
 * `col` (1: the first series); -1 if absent. */
static long long dat_cell(const char *dir, const char *name, const char *bucket, int col)
{
    char path[400], line[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long long v = -1;
    while (v < 0 && fgets(line, sizeof(line), f)) {
        char *tok = strtok(line, " \n");
        if (!tok || strcmp(tok, bucket) != 0)
            continue;
        for (int c = 0; c < col && tok; c++)
            tok = strtok(NULL, " \n");
        v = tok ? atoll(tok) : -1;
    }
    fclose(f);
    return v;
}

static bool is_png(const char *dir, const char *name)
{
    char path[400];
    unsigned char magic[8] = {0};
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(magic, 1, 8, f) : 0;
    if (f)
        fclose(f);
    return n == 8 && memcmp(magic, "\x89PNG\r\n\x1a\n", 8) == 0;
}

/* zepsctl stats --plot on a run with fixed tau 3: the data summed over both
 * shards has the single bar the shards recorded (per table and per rank),
 * and gnuplot made the five PNGs. */
START_TEST(test_stats_plot)
{
    zt_cluster cl;
    ck_assert_int_eq(
        zt_cluster_start(&cl, 2, NW, "async", "inject = { schedule = \"fixed\"; tau = 3; };", NULL),
        0);
    run_workers(&cl, NW, 10, false);
    char dir[300], cmd[1200];
    snprintf(dir, sizeof(dir), "%s/plots/new", cl.dir); /* made with parents */
    snprintf(cmd, sizeof(cmd), "%s/zepsctl stats --config %s --plot %s > %s/plot.log 2>&1",
             getenv("ZEPS_BINDIR"), cl.conf, dir, cl.dir);
    ck_assert_int_eq(system(cmd), 0);
    /* table x: 2 x (40 - 3) pushes at tau 3, 2 at each of 0, 1, 2 */
    ck_assert_int_eq(dat_cell(dir, "tau.dat", "3", 1), 2 * (NW * 10 - 3));
    ck_assert_int_eq(dat_cell(dir, "tau.dat", "0", 1), 2);
    ck_assert_int_eq(dat_cell(dir, "tau.dat", "4", 1), -1); /* no row past the last count */
    /* every rank's pushes after the first round are 3 old: rank 3's 10 */
    ck_assert_int_eq(dat_cell(dir, "tau_ranks.dat", "3", NW), 2 * 10);
    ck_assert_int_eq(dat_cell(dir, "clock_gap.dat", "0", 1) >= 0, 1);
    /* tau_by_freq.png: "no data" (no sparse table) */
    static const char *const png[] = {"tau.png", "tau_ranks.png", "clock_gap.png", "pull_wait.png",
                                      "tau_by_freq.png"};
    for (int i = 0; i < 5; i++)
        ck_assert_msg(is_png(dir, png[i]), "%s/%s is not a PNG", dir, png[i]);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("inject_cluster");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fixed_exact);
    tcase_add_test(tc, test_uniform_seeded);
    tcase_add_test(tc, test_bsp_fixed);
    tcase_add_test(tc, test_sparse_fixed_exact);
    tcase_add_test(tc, test_unequal_steps);
    tcase_add_test(tc, test_stats_plot);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
