/*
 * test_row_freq.c - a sparse table's per-row tau by row frequency
 * (TableStats.tau_by_freq) through real zeps-server processes, where it is
 * exactly predictable.
 *
 * Two async workers alternate on a hot row H; each step A also pulls and
 * pushes a fresh cold row. Step s: A pulls {H, cold s}, B pulls {H}, B
 * pushes {H}, A pushes {H, cold s}. H had 4s touches before: B's push is
 * its touch 4s + 3 with tau 0, A's its touch 4s + 4 with tau 1 (B's push
 * came between A's read and A's push); a cold row is pushed at its 2nd
 * touch with tau 0. The shards' histograms by frequency bucket must be
 * exactly that, and zepsctl stats --plot and --json must show it.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "zeps.h"

#define DIM 4
#define S   2  /* shards */
#define N   40 /* steps */
#define FB  16 /* frequency buckets */
#define TB  8  /* tau buckets compared */

typedef struct freq_tau {
    uint64_t by[FB][TB]; /* rows per (frequency bucket, tau) */
    uint64_t n[FB];      /* rows per frequency bucket */
} freq_tau;

/* floor(log2(f)), the frequency bucket of a row touched f times (f < 2^15) */
static int log2_floor(unsigned f)
{
    int b = 0;
    while (f >>= 1)
        b++;
    return b;
}

/* Run the N steps; *want gets what the shards must have counted. */
static void run_steps(zeps_client *a, zeps_client *b, freq_tau *want)
{
    uint32_t ta, tb;
    zeps_sparse_spec spec = {.name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 0.1,
                             .init = "uniform", .init_scale = 0.1, .seed = 7};
    ck_assert_int_eq(zeps_declare_sparse(a, &spec, &ta), 0);
    ck_assert_int_eq(zeps_declare_sparse(b, &spec, &tb), 0);
    const uint64_t hot = 5;
    float rows[2 * DIM], g[2 * DIM];
    for (int i = 0; i < 2 * DIM; i++)
        g[i] = 0.01f;
    memset(want, 0, sizeof(*want));
    for (int64_t s = 0; s < N; s++) {
        uint64_t ids_a[2] = {hot, 1000 + (uint64_t)s};
        zeps_sbatch *ba, *bb;
        ck_assert_int_eq(zeps_sbatch_new(a, ta, ids_a, 2, &ba), 0);
        ck_assert_int_eq(zeps_sbatch_new(b, tb, &hot, 1, &bb), 0);
        ck_assert_int_eq(zeps_sbatch_pull(ba, rows, s), 0);
        ck_assert_int_eq(zeps_sbatch_pull(bb, rows, s), 0);
        ck_assert_int_eq(zeps_sbatch_push(bb, g, s), 0);
        ck_assert_int_eq(zeps_sbatch_push(ba, g, s), 0);
        zeps_sbatch_free(&ba);
        zeps_sbatch_free(&bb);
        int fb = log2_floor(4 * (unsigned)s + 3), fa = log2_floor(4 * (unsigned)s + 4);
        want->by[fb][0]++, want->n[fb]++; /* B on H */
        want->by[fa][1]++, want->n[fa]++; /* A on H */
        want->by[1][0]++, want->n[1]++;   /* A on its cold row */
    }
}

/* The table's histograms by frequency, summed over the shards. */
static void read_stats(zeps_client *c, freq_tau *got)
{
    memset(got, 0, sizeof(*got));
    for (int k = 0; k < S; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        const Zeps__TableStats *t = st->tables[0];
        ck_assert_uint_le(t->n_tau_by_freq, FB);
        for (size_t b = 0; b < t->n_tau_by_freq; b++) {
            const Zeps__Histogram *h = t->tau_by_freq[b];
            got->n[b] += h->n;
            for (size_t i = 0; i < h->n_counts && i < TB; i++)
                got->by[b][i] += h->counts[i];
        }
        zeps__shard_stats__free_unpacked(st, NULL);
    }
}

/* tau_by_freq.dat ("bucket touches rows mean p50 p90 p99 max" per
 * non-empty bucket) agrees with want; returns the buckets listed. */
static int check_dat(const char *dir, const freq_tau *want)
{
    char path[400], line[256];
    snprintf(path, sizeof(path), "%s/tau_by_freq.dat", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int seen = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned fb, p50, p90, p99, mx;
        char touches[32];
        unsigned long long cnt;
        double mean;
        if (line[0] == '#' || sscanf(line, "%u %31s %llu %lf %u %u %u %u", &fb, touches, &cnt,
                                     &mean, &p50, &p90, &p99, &mx) != 8)
            continue;
        ck_assert_uint_lt(fb, FB);
        ck_assert_uint_eq(cnt, want->n[fb]);
        ck_assert_double_eq_tol(mean, (double)want->by[fb][1] / (double)want->n[fb], 1e-4);
        ck_assert_uint_eq(mx, want->by[fb][1] ? 1 : 0);
        seen++;
    }
    fclose(f);
    return seen;
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

static bool file_has(const char *path, const char *needle)
{
    static char text[1 << 16];
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f)
        fclose(f);
    text[got] = '\0';
    return strstr(text, needle) != NULL;
}

/* zepsctl stats --plot, --json and the text report on the live cluster. */
static void check_zepsctl(const zt_cluster *cl, const freq_tau *want)
{
    const char *bin = getenv("ZEPS_BINDIR");
    char dir[300], cmd[2400], path[400];
    snprintf(dir, sizeof(dir), "%s/plots", cl->dir);
    snprintf(cmd, sizeof(cmd),
             "%s/zepsctl stats --config %s --plot %s > %s/stats.txt 2>&1 && "
             "%s/zepsctl stats --config %s --json > %s/stats.json 2>&1",
             bin, cl->conf, dir, cl->dir, bin, cl->conf, cl->dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(check_dat(dir, want), 7); /* buckets 1..7 */
    ck_assert_msg(is_png(dir, "tau_by_freq.png"), "%s/tau_by_freq.png is not a PNG", dir);
    snprintf(path, sizeof(path), "%s/stats.json", cl->dir);
    ck_assert_msg(file_has(path, "\"tau_by_freq\": [{\"n\": "), "no tau_by_freq in --json");
    snprintf(path, sizeof(path), "%s/stats.txt", cl->dir);
    ck_assert_msg(file_has(path, "tau by row frequency"), "no tau by row frequency block");
}

START_TEST(test_tau_by_row_frequency)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, S, 2, "async", NULL, NULL), 0);
    zeps_client *a = zt_client(&cl, 0), *b = zt_client(&cl, 1);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    freq_tau want, got;
    run_steps(a, b, &want);
    read_stats(a, &got);
    for (int fb = 0; fb < FB; fb++) {
        for (int i = 0; i < TB; i++)
            ck_assert_msg(got.by[fb][i] == want.by[fb][i],
                          "frequency bucket %d, tau %d: %llu rows, expected %llu", fb, i,
                          (unsigned long long)got.by[fb][i], (unsigned long long)want.by[fb][i]);
        ck_assert_uint_eq(got.n[fb], want.n[fb]);
    }
    /* touches 128..160 (bucket 7): B's at s = 32..39, A's at s = 31..39 */
    ck_assert_uint_eq(got.n[7], 8 + 9);
    ck_assert_uint_eq(got.n[8], 0);
    check_zepsctl(&cl, &want);
    zeps_client_destroy(&a);
    zeps_client_destroy(&b);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("row_freq");
    TCase *tc = tcase_create("runs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tau_by_row_frequency);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
