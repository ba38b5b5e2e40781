/*
 * test_sparse.c - server/table/sparse.c and rowindex.c: the shard-local
 * store of a sparse table.
 *
 * Initial rows as a function of (seed, id) only; every per-row optimizer
 * against a double-precision reference written here from the textbook
 * formulas; tau from read versions; the hash index (insert, backward-shift
 * delete, lookup) against a reference; a million rows and the record size;
 * snapshot round trips; and bad options named in their errors. Admission
 * and eviction are test_sparse_evict.c.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "evict.h"
#include "sparse.h"
#include "sparse_fixture.h"
#include "zeps_errors.h"

/* ------------------------------------------------------------ init */

START_TEST(test_init_rows)
{
    const uint64_t ids[] = {0, 1, 2, 12345, (uint64_t)1 << 63, UINT64_MAX, UINT64_MAX - 1};
    const size_t n = sizeof ids / sizeof ids[0];
    const uint32_t dim = 16;
    zp_sparse_opts o = base_opts("adagrad", dim);
    zp_sparse *t[3];
    float a[16], b[16];

    for (int k = 0; k < 3; k++)
        t[k] = make(&o);
    for (size_t i = 0; i < n; i++) {
        zp_sparse_init_row(t[0], ids[i], a);
        for (int k = 1; k < 3; k++) {
            zp_sparse_init_row(t[k], ids[i], b);
            ck_assert_msg(memcmp(a, b, sizeof a) == 0, "id %llu differs between tables",
                          (unsigned long long)ids[i]);
        }
        /* A pull creates the row from the same values. */
        float p[16];
        uint32_t v = 99;
        zp_sparse_pull(t[(int)(i % 3)], &ids[i], 1, 0, p, &v);
        ck_assert(memcmp(a, p, sizeof a) == 0);
        ck_assert_uint_eq(v, 0);
        for (uint32_t j = 0; j < dim; j++) {
            ck_assert(fabsf(a[j]) <= 0.05f);
            for (uint32_t k = 0; k < j; k++)
                ck_assert_msg(a[j] != a[k], "id %llu: elements %u and %u equal",
                              (unsigned long long)ids[i], j, k);
        }
        for (size_t m = 0; m < i; m++) {
            zp_sparse_init_row(t[0], ids[m], b);
            ck_assert_msg(memcmp(a, b, sizeof a) != 0, "ids %llu and %llu start equal",
                          (unsigned long long)ids[i], (unsigned long long)ids[m]);
        }
    }
    /* A different seed gives other rows. */
    o.seed = 43;
    zp_sparse *u = make(&o);
    zp_sparse_init_row(t[0], 7, a);
    zp_sparse_init_row(u, 7, b);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    zp_sparse_destroy(&u);

    /* Normal: mean about 0, stddev about scale, over many ids. */
    o.init = ZP_INIT_NORMAL;
    o.init_scale = 2.0;
    u = make(&o);
    double s = 0, s2 = 0;
    for (uint64_t id = 0; id < 4000; id++) {
        zp_sparse_init_row(u, id * 0x9e3779b97f4a7c15ull, a);
        for (uint32_t j = 0; j < dim; j++)
            s += a[j], s2 += (double)a[j] * a[j];
    }
    double cnt = 4000.0 * dim, mean = s / cnt, sd = sqrt(s2 / cnt - mean * mean);
    ck_assert_msg(fabs(mean) < 0.05 && fabs(sd - 2.0) < 0.05, "normal: mean %g sd %g", mean, sd);
    zp_sparse_destroy(&u);

    o.init = ZP_INIT_CONSTANT;
    o.init_scale = 0.25;
    u = make(&o);
    zp_sparse_init_row(u, UINT64_MAX, a);
    for (uint32_t j = 0; j < dim; j++)
        ck_assert_float_eq(a[j], 0.25f);
    zp_sparse_destroy(&u);
    for (int k = 0; k < 3; k++)
        zp_sparse_destroy(&t[k]);
    ck_assert_ptr_null(t[0]);
    zp_sparse_destroy(&t[0]); /* NULL is fine */
}
END_TEST

/* ------------------------------------------------------------ optimizers */

#define POOL  40
#define DIM   8
#define STEPS 200
#define BATCH 12

typedef struct ref {
    double w[POOL][DIM], s1[POOL][DIM], s2[POOL][DIM];
    uint32_t steps[POOL];
    bool live[POOL];
} ref;

/* One row's update in double, straight from the formulas. With f32 set the
 * row is then stored as the table stores it, in float (weights and state
 * rounded after each step); without, everything stays in double. */
static void ref_update(const char *name, const zp_sparse_opts *o, ref *r, int k, const float *g,
                       double scale, bool f32)
{
    double lr = o->lr, wd = o->weight_decay;
    double b1 = o->beta1 ? o->beta1 : 0.9, b2 = o->beta2 ? o->beta2 : 0.999;
    double eps = o->eps ? o->eps : 1e-8;
    for (int j = 0; j < DIM; j++) {
        double *w = &r->w[k][j], *s1 = &r->s1[k][j], *s2 = &r->s2[k][j];
        if (strcmp(name, "ftrl") == 0) {
            double gj = scale * g[j], alpha = lr, beta = o->ftrl_beta ? o->ftrl_beta : 1.0;
            double sigma = (sqrt(*s2 + gj * gj) - sqrt(*s2)) / alpha;
            *s1 += gj - sigma * *w;
            *s2 += gj * gj;
            if (fabs(*s1) <= o->l1)
                *w = 0;
            else
                *w = -(*s1 - (*s1 > 0 ? o->l1 : -o->l1)) / ((beta + sqrt(*s2)) / alpha + o->l2);
            continue;
        }
        double gj = scale * g[j] + wd * *w;
        if (strcmp(name, "sgd") == 0) {
            *w -= lr * gj;
        } else if (strcmp(name, "adagrad") == 0) {
            *s1 += gj * gj;
            *w -= lr * gj / (sqrt(*s1) + eps);
        } else {
            double t = r->steps[k] + 1.0;
            *s1 = b1 * *s1 + (1 - b1) * gj;
            *s2 = b2 * *s2 + (1 - b2) * gj * gj;
            *w -= lr * (*s1 / (1 - pow(b1, t))) / (sqrt(*s2 / (1 - pow(b2, t))) + eps);
        }
    }
    for (int j = 0; j < DIM && f32; j++) {
        r->w[k][j] = (float)r->w[k][j];
        r->s1[k][j] = (float)r->s1[k][j];
        r->s2[k][j] = (float)r->s2[k][j];
    }
    r->steps[k]++;
}

static void expect_close(const char *what, uint64_t id, int j, float got, double want, double rel,
                         double abs)
{
    double tol = rel * fabs(want) + abs;
    ck_assert_msg(fabs((double)got - want) <= tol,
                  "%s of id %llu [%d] = %.9g, reference %.9g (tol %.2g)", what,
                  (unsigned long long)id, j, (double)got, want, tol);
}

/* Compare every row with reference r: values, state and version. */
static void compare_ref(const zp_sparse *t, const ref *r, const uint64_t *pool, double rel,
                        double abs, int *zeros, int *nonzero)
{
    int spv = zp_sparse_state_per_value(t);
    for (int k = 0; k < POOL; k++) {
        zp_sparse_row row;
        ck_assert(zp_sparse_get(t, pool[k], &row) == r->live[k]);
        if (!r->live[k])
            continue;
        ck_assert_uint_eq(row.version, r->steps[k]);
        for (int j = 0; j < DIM; j++) {
            expect_close("w", pool[k], j, row.values[j], r->w[k][j], rel, abs);
            if (spv >= 1)
                expect_close("state0", pool[k], j, row.state[j], r->s1[k][j], rel, abs);
            if (spv >= 2)
                expect_close("state1", pool[k], j, row.state[DIM + j], r->s2[k][j], rel, abs);
            if (r->w[k][j] == 0.0) {
                ck_assert_float_eq(row.values[j], 0.0f);
                (*zeros)++;
            } else {
                (*nonzero)++;
            }
        }
    }
}

static void run_optimizer(const char *name, zp_sparse_opts o)
{
    zp_sparse *t = make(&o);
    ref *r = calloc(1, sizeof *r), *rd = calloc(1, sizeof *rd);
    uint64_t pool[POOL];
    zp_rng rng;
    const double scale = 0.5;

    zp_rng_seed(&rng, 7, 1, 2);
    for (int k = 0; k < POOL; k++)
        pool[k] = k < 3 ? (uint64_t[]){0, UINT64_MAX, (uint64_t)1 << 63}[k] : zp_rng_next(&rng);
    for (int step = 0; step < STEPS; step++) {
        /* BATCH distinct ids, many of them seen in earlier steps. */
        uint32_t perm[POOL];
        for (uint32_t k = 0; k < POOL; k++)
            perm[k] = k;
        zp_rng_shuffle(&rng, perm, POOL);
        uint64_t ids[BATCH];
        float g[BATCH * DIM];
        for (int i = 0; i < BATCH; i++) {
            int k = (int)perm[i];
            ids[i] = pool[k];
            for (int j = 0; j < DIM; j++)
                g[i * DIM + j] = (float)(zp_rng_normal(&rng) * (1 + k % 3));
            if (!r->live[k]) {
                float w0[DIM];
                zp_sparse_init_row(t, pool[k], w0);
                for (int j = 0; j < DIM; j++)
                    r->w[k][j] = rd->w[k][j] = w0[j];
                r->live[k] = rd->live[k] = true;
            }
            ref_update(name, &o, r, k, g + i * DIM, scale, true);
            ref_update(name, &o, rd, k, g + i * DIM, scale, false);
        }
        ck_assert_uint_eq(
            zp_sparse_push(t, ids, BATCH, g, (float)scale, step, NULL, NULL, NULL), BATCH);
    }
    /* Against the reference that stores float as the table does: 1e-6. */
    int zeros = 0, nonzero = 0;
    compare_ref(t, r, pool, 1e-6, 1e-7, &zeros, &nonzero);
    /* Against pure double: float storage rounds each of ~60 steps per row
     * (relative 6e-8 each), amplified where sums cancel; 2e-5 bounds it. */
    int z2 = 0, nz2 = 0;
    compare_ref(t, rd, pool, 2e-5, 2e-6, &z2, &nz2);
    if (strcmp(name, "ftrl") == 0)
        ck_assert_msg(zeros > 10 && nonzero > 10, "ftrl: %d zero and %d non-zero weights", zeros,
                      nonzero);
    free(r);
    free(rd);
    zp_sparse_destroy(&t);
}

START_TEST(test_optim_sgd)
{
    zp_sparse_opts o = base_opts("sgd", DIM);
    o.weight_decay = 0.01f;
    run_optimizer("sgd", o);
}
END_TEST

START_TEST(test_optim_adagrad)
{
    zp_sparse_opts o = base_opts("adagrad", DIM);
    o.weight_decay = 0.01f;
    o.eps = 1e-6f;
    run_optimizer("adagrad", o);
}
END_TEST

START_TEST(test_optim_adam)
{
    zp_sparse_opts o = base_opts("adam", DIM);
    o.lr = 0.01f;
    o.weight_decay = 0.01f;
    o.beta2 = 0.99f;
    run_optimizer("adam", o);
}
END_TEST

START_TEST(test_optim_ftrl)
{
    zp_sparse_opts o = base_opts("ftrl", DIM);
    o.init = ZP_INIT_ZEROS;
    o.lr = 0.2f;
    o.l1 = 1.5f;
    o.l2 = 0.3f;
    o.ftrl_beta = 0.5f;
    run_optimizer("ftrl", o);
    /* From non-zero initial weights, and the default beta. */
    o.init = ZP_INIT_UNIFORM;
    o.ftrl_beta = 0;
    run_optimizer("ftrl", o);
}
END_TEST

/* ------------------------------------------------------------ tau */

START_TEST(test_tau)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    zp_hist tau;
    zp_freq_hist by_freq;
    float g[4] = {1, 1, 1, 1}, out[4];
    uint64_t ids[2] = {7, 8};
    uint32_t vers[2];

    memset(&tau, 0, sizeof tau);
    memset(&by_freq, 0, sizeof by_freq);
    for (int i = 0; i < 5; i++)
        zp_sparse_push(t, ids, 1, g, 1.0f, i, NULL, NULL, NULL); /* id 7 at version 5 */
    zp_sparse_pull(t, ids, 2, 5, out, vers);
    ck_assert_uint_eq(vers[0], 5);
    ck_assert_uint_eq(vers[1], 0);
    uint32_t read[2] = {2, 0};
    /* Without the by-frequency histograms nothing is recorded. */
    ck_assert_uint_eq(zp_sparse_push(t, ids, 2, g, 1.0f, 6, read, &tau, NULL), 2);
    ck_assert_uint_eq(tau.n, 0);
    read[0] = 4; /* id 7 is at version 6 now: tau 2 below */
    /* id 7: 5 pushes, 1 pull, 1 push, now the 8th touch (bucket 3, 8..15);
     * id 8: created by the pull, 1 push, now the 3rd touch (bucket 1, 2..3) */
    ck_assert_uint_eq(zp_sparse_push(t, ids, 2, g, 1.0f, 6, read, &tau, &by_freq), 2);
    ck_assert_uint_eq(tau.n, 2);
    ck_assert_uint_eq(tau.counts[2], 1); /* 6 - 4 */
    ck_assert_uint_eq(tau.counts[1], 1); /* 1 - 0 */
    ck_assert_uint_eq(tau.sum, 3);
    Zeps__Histogram pb;
    zp_hist_freq_to_pb(&by_freq, 3, &pb);
    ck_assert_uint_eq(pb.n, 1);
    ck_assert_uint_eq(pb.n_counts, 3);
    ck_assert_uint_eq(pb.counts[2], 1);
    ck_assert_uint_eq(pb.sum, 2);
    ck_assert_uint_eq(pb.max, 2);
    zp_hist_freq_to_pb(&by_freq, 1, &pb);
    ck_assert_uint_eq(pb.n, 1);
    ck_assert_uint_eq(pb.counts[1], 1);
    zp_hist_freq_to_pb(&by_freq, 0, &pb);
    ck_assert_uint_eq(pb.n + pb.n_counts, 0);
    zp_hist_freq_to_pb(&by_freq, 2, &pb);
    ck_assert_uint_eq(pb.n, 0);
    ck_assert_uint_eq(zp_hist_freq_used(&by_freq), 4);
    /* A read version ahead of the row (row re-created) counts as 0. */
    read[0] = 100;
    zp_sparse_push(t, ids, 1, g, 1.0f, 7, read, &tau, &by_freq);
    ck_assert_uint_eq(tau.counts[0], 1);
    ck_assert_uint_eq(by_freq.counts[3][0], 1); /* 9th touch */
    zp_sparse_row row;
    ck_assert(zp_sparse_get(t, 7, &row));
    ck_assert_uint_eq(row.version, 8);
    ck_assert_uint_eq(row.freq, 9);
    zp_sparse_destroy(&t);
}
END_TEST

/* Frequency buckets are floor(log2(touches)), the last open-ended; a row's
 * tau goes to its bucket's histogram only, exported with n, sum and max
 * derived from the counts (tau 63 or more as 63). */
START_TEST(test_freq_buckets)
{
    static const struct {
        uint32_t freq;
        int bucket;
    } cases[] = {{0, 0},      {1, 0},      {2, 1},      {3, 1},          {4, 2},
                 {7, 2},      {8, 3},      {1023, 9},   {1024, 10},      {32767, 14},
                 {32768, 15}, {65536, 15}, {1u << 31, 15}, {UINT32_MAX, 15}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(zp_freq_bucket(cases[i].freq) == cases[i].bucket, "freq %u: bucket %d not %d",
                      cases[i].freq, zp_freq_bucket(cases[i].freq), cases[i].bucket);
    zp_freq_hist f;
    memset(&f, 0, sizeof f);
    ck_assert_uint_eq(zp_hist_freq_used(&f), 0);
    zp_freq_hist_add(&f, 1, 0);
    zp_freq_hist_add(&f, 5, 3);
    zp_freq_hist_add(&f, 6, 70); /* tau past the last tau bucket */
    zp_freq_hist_add(&f, UINT32_MAX, 1);
    ck_assert_uint_eq(zp_hist_freq_used(&f), ZP_FREQ_BUCKETS);
    Zeps__Histogram pb;
    zp_hist_freq_to_pb(&f, 0, &pb);
    ck_assert_uint_eq(pb.n, 1);
    ck_assert_uint_eq(pb.n_counts, 1);
    ck_assert_uint_eq(pb.counts[0], 1);
    zp_hist_freq_to_pb(&f, 2, &pb);
    ck_assert_uint_eq(pb.n, 2);
    ck_assert_uint_eq(pb.n_counts, ZP_HIST_BUCKETS);
    ck_assert_uint_eq(pb.counts[3], 1);
    ck_assert_uint_eq(pb.counts[ZP_HIST_BUCKETS - 1], 1);
    ck_assert_uint_eq(pb.sum, 3 + 63);
    ck_assert_uint_eq(pb.max, 63);
    zp_hist_freq_to_pb(&f, 15, &pb);
    ck_assert_uint_eq(pb.n, 1);
    ck_assert_uint_eq(pb.counts[1], 1);
    uint64_t n = 0;
    for (size_t b = 0; b < ZP_FREQ_BUCKETS; b++)
        for (size_t t = 0; t < ZP_HIST_BUCKETS; t++)
            n += f.counts[b][t];
    ck_assert_uint_eq(n, 4);
}
END_TEST

/* ------------------------------------------------------------ index */

/* Randomized: ~200k touches of ids from a universe of 30k (some differing
 * in one bit only) with TTL deletion every clock, checked against a plain
 * array of last-touch clocks. */
START_TEST(test_index_random)
{
    enum { U = 30000, PER_CLOCK = 2000, NCLOCK = 100, TTL = 3 };
    zp_sparse_opts o = base_opts("sgd", 2);
    o.ttl_clocks = TTL;
    zp_sparse *t = make(&o);
    uint64_t *uni = malloc(U * sizeof *uni);
    int64_t *last = malloc(U * sizeof *last);
    uint32_t *freq = calloc(U, sizeof *freq);
    zp_rng rng;
    float out[2];

    zp_rng_seed(&rng, 99, 0, 0);
    /* Odd entries random, even ones the previous entry with one bit
     * flipped (distinct, and close in the key space). */
    uni[0] = 0;
    uni[1] = UINT64_MAX;
    for (int i = 0; i < U; i++) {
        if (i >= 2)
            uni[i] = i % 2 ? zp_rng_next(&rng) : uni[i - 1] ^ ((uint64_t)1 << (i % 64));
        last[i] = -1;
    }
    for (int64_t c = 0; c < NCLOCK; c++) {
        /* Touch a skewed random subset: small indices more often. */
        for (int k = 0; k < PER_CLOCK; k++) {
            uint32_t i = zp_rng_below(&rng, 2) ? zp_rng_below(&rng, U / 10) : zp_rng_below(&rng, U);
            zp_sparse_pull(t, &uni[i], 1, c, out, NULL);
            if (last[i] < 0)
                freq[i] = 0;
            last[i] = c;
            freq[i]++;
        }
        zp_sparse_expire(t, c);
        uint64_t live = 0;
        for (int i = 0; i < U; i++) {
            if (last[i] >= 0 && c - last[i] >= TTL)
                last[i] = -1;
            live += last[i] >= 0;
        }
        ck_assert_uint_eq(counters(t).rows, live);
        /* Lookups agree with the reference: every id (present or absent)
         * every 10th clock, 2000 random ones in between. */
        for (int k = 0; k < U; k++) {
            int i = c % 10 == 9 ? k : (int)zp_rng_below(&rng, U);
            if (c % 10 != 9 && k >= 2000)
                break;
            zp_sparse_row row;
            bool got = zp_sparse_get(t, uni[i], &row);
            ck_assert_msg(got == (last[i] >= 0), "clock %lld: id %d present %d, expected %d",
                          (long long)c, i, got, last[i] >= 0);
            if (got) {
                ck_assert_uint_eq(row.id, uni[i]);
                ck_assert_int_eq(row.last_clock, last[i]);
                ck_assert_uint_eq(row.freq, freq[i]);
            }
        }
    }
    /* Iteration yields each live row once. */
    uint64_t cur = 0, n = 0;
    zp_sparse_row row;
    while (zp_sparse_next(t, &cur, &row)) {
        zp_sparse_row again;
        ck_assert(zp_sparse_get(t, row.id, &again) && again.values == row.values);
        n++;
    }
    ck_assert_uint_eq(n, counters(t).rows);
    ck_assert_uint_gt(counters(t).evicted_ttl, 100000);
    free(uni);
    free(last);
    free(freq);
    zp_sparse_destroy(&t);
}
END_TEST

START_TEST(test_million_rows)
{
    zp_sparse_opts o = base_opts("sgd", 8);
    zp_sparse *t = make(&o);
    enum { N = 1000000, B = 10000 };
    static uint64_t ids[B];
    static float out[B * 8];

    for (uint64_t b = 0; b < N / B; b++) {
        for (uint64_t i = 0; i < B; i++)
            ids[i] = zp_rng_mix64(b * B + i); /* distinct: mix64 is a bijection */
        zp_sparse_pull(t, ids, B, 0, out, NULL);
    }
    zp_sparse_counters c = counters(t);
    ck_assert_uint_eq(c.rows, N);
    ck_assert_uint_eq(c.created, N);
    ck_assert_uint_eq(c.bytes_per_row, 24 + 8 * 4);
    /* Slabs (64k rows each) plus an index of 2^21 8-byte slots. */
    uint64_t slabs = (N + 65535) / 65536 * 65536 * c.bytes_per_row;
    ck_assert_uint_eq(c.bytes, slabs + ((uint64_t)8 << 21));
    printf("sparse: 1M rows dim 8 sgd: %llu bytes held, %.1f per row (record %llu, index %.1f, "
           "slack %.1f)\n",
           (unsigned long long)c.bytes, (double)c.bytes / N, (unsigned long long)c.bytes_per_row,
           (double)((uint64_t)8 << 21) / N, (double)(slabs - (uint64_t)N * c.bytes_per_row) / N);
    for (uint64_t i = 0; i < N; i += 997) {
        zp_sparse_row row;
        uint64_t id = zp_rng_mix64(i);
        ck_assert(zp_sparse_get(t, id, &row));
        ck_assert_uint_eq(row.id, id);
    }
    zp_sparse_destroy(&t);

    /* Record sizes: header 24 + dim * 4 * (1 + state), rounded up to 8. */
    const char *names[] = {"sgd", "adagrad", "adam", "ftrl"};
    const int spv[] = {0, 1, 2, 2};
    const uint32_t dims[] = {8, 64, 3};
    for (int k = 0; k < 4; k++)
        for (int d = 0; d < 3; d++) {
            zp_sparse_opts p = base_opts(names[k], dims[d]);
            zp_sparse *u = make(&p);
            uint64_t want = 24 + ((uint64_t)dims[d] * 4 * (1 + (uint64_t)spv[k]) + 7) / 8 * 8;
            ck_assert_int_eq(zp_sparse_state_per_value(u), spv[k]);
            ck_assert_uint_eq(counters(u).bytes_per_row, want);
            zp_sparse_destroy(&u);
        }

    /* What a row costs in all, for D = 8 and 64: 200k rows, every byte
     * held (chunks and index) divided by the rows. */
    enum { M = 200000 };
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 4; k++) {
            zp_sparse_opts p = base_opts(names[k], dims[d]);
            zp_sparse *u = make(&p);
            for (uint64_t b = 0; b < M / B; b++) {
                for (uint64_t i = 0; i < B; i++)
                    ids[i] = zp_rng_mix64(b * B + i);
                for (uint64_t i = 0; i < B; i += B / 10)
                    zp_sparse_pull(u, ids + i, B / 10, 0, out, NULL);
            }
            zp_sparse_counters uc = counters(u);
            ck_assert_uint_eq(uc.rows, M);
            uint64_t index = (uint64_t)8 << 19; /* 2^19 slots: 200k > 0.7 * 2^18 */
            ck_assert_uint_ge(uc.bytes, M * uc.bytes_per_row + index);
            printf("sparse: %-7s D=%-2u: record %4llu B (raw values %4u B), held %7.1f B/row "
                   "(index %.1f, chunk slack %.1f)\n",
                   names[k], dims[d], (unsigned long long)uc.bytes_per_row, dims[d] * 4,
                   (double)uc.bytes / M, (double)index / M,
                   (double)(uc.bytes - index - M * uc.bytes_per_row) / M);
            zp_sparse_destroy(&u);
        }
}
END_TEST

/* ------------------------------------------------------------ snapshots */

START_TEST(test_put_get_next)
{
    zp_sparse_opts o = base_opts("adam", 5);
    zp_sparse *a = make(&o), *b = make(&o);
    zp_rng rng;
    zp_rng_seed(&rng, 5, 0, 0);
    for (int step = 0; step < 50; step++) {
        uint64_t ids[8];
        float g[40];
        for (int i = 0; i < 8; i++)
            ids[i] = (uint64_t)(step * 3 + i) * 0x100000001ull;
        for (int i = 0; i < 40; i++)
            g[i] = (float)zp_rng_normal(&rng);
        zp_sparse_push(a, ids, 8, g, 1.0f, step, NULL, NULL, NULL);
    }
    /* b holds some of the ids already, with other contents: put overwrites. */
    float junk[5] = {9, 9, 9, 9, 9}, out[5];
    uint64_t first = 0;
    zp_sparse_push(b, &first, 1, junk, 1.0f, 0, NULL, NULL, NULL);

    uint64_t cur = 0, n = 0;
    zp_sparse_row r;
    while (zp_sparse_next(a, &cur, &r)) {
        zp_sparse_put(b, &r);
        n++;
    }
    ck_assert_uint_eq(n, counters(a).rows);
    ck_assert_uint_eq(counters(b).rows, n);
    cur = 0;
    while (zp_sparse_next(a, &cur, &r)) {
        zp_sparse_row q;
        ck_assert(zp_sparse_get(b, r.id, &q));
        ck_assert_uint_eq(q.id, r.id);
        ck_assert_uint_eq(q.version, r.version);
        ck_assert_uint_eq(q.freq, r.freq);
        ck_assert_int_eq(q.last_clock, r.last_clock);
        ck_assert(memcmp(q.values, r.values, 5 * sizeof(float)) == 0);
        ck_assert(memcmp(q.state, r.state, 10 * sizeof(float)) == 0);
    }
    /* get does not touch: freq and clock unchanged; a pull does. */
    ck_assert(zp_sparse_get(b, first, &r));
    uint32_t f = r.freq;
    ck_assert(zp_sparse_get(b, first, &r));
    ck_assert_uint_eq(r.freq, f);
    zp_sparse_pull(b, &first, 1, 77, out, NULL);
    ck_assert(zp_sparse_get(b, first, &r));
    ck_assert_uint_eq(r.freq, f + 1);
    ck_assert_int_eq(r.last_clock, 77);
    ck_assert(memcmp(out, r.values, sizeof out) == 0);
    /* A put of a row onto itself keeps it. */
    float keep[5];
    memcpy(keep, r.values, sizeof keep);
    zp_sparse_put(b, &r);
    ck_assert(zp_sparse_get(b, first, &r));
    ck_assert(memcmp(keep, r.values, sizeof keep) == 0);
    zp_sparse_destroy(&a);
    zp_sparse_destroy(&b);
}
END_TEST

/* ------------------------------------------------------------ bad options */

START_TEST(test_bad_opts)
{
    struct bad {
        const char *field;
        int code;
        zp_sparse_opts o;
    } cases[21];
    int n = 0;
    zp_sparse_opts o = base_opts("adam", 8);
#define BAD(fld, c, stmt)                                                                          \
    do {                                                                                           \
        cases[n] = (struct bad){fld, c, o};                                                        \
        zp_sparse_opts *p = &cases[n].o;                                                           \
        stmt;                                                                                      \
        n++;                                                                                       \
    } while (0)
    BAD("dim", ZEPS_EINVAL, p->dim = 0);
    BAD("dim", ZEPS_EINVAL, p->dim = 4097);
    BAD("optimizer", ZEPS_EOPTIM, p->optimizer = "momentum");
    BAD("optimizer", ZEPS_EOPTIM, p->optimizer = NULL);
    BAD("lr", ZEPS_EOPTIM, p->lr = 0);
    BAD("lr", ZEPS_EOPTIM, p->lr = NAN);
    BAD("beta1", ZEPS_EOPTIM, p->beta1 = 1.0f);
    BAD("beta2", ZEPS_EOPTIM, p->beta2 = -0.5f);
    BAD("eps", ZEPS_EOPTIM, p->eps = -1e-8f);
    BAD("weight_decay", ZEPS_EOPTIM, p->weight_decay = INFINITY);
    BAD("l1", ZEPS_EOPTIM, p->l1 = -1);
    BAD("l2", ZEPS_EOPTIM, p->l2 = -0.1f);
    BAD("ftrl_beta", ZEPS_EOPTIM, p->ftrl_beta = -1);
    BAD("admit_prob", ZEPS_EINVAL, p->admit_prob = 1.5);
    BAD("admit_count", ZEPS_EINVAL, p->admit_count = 70000);
    BAD("capacity_rows", ZEPS_EINVAL, p->capacity_rows = (uint64_t)1 << 40);
    BAD("lead_cols", ZEPS_EINVAL, p->lead_cols = 9);
    BAD("lead_lr", ZEPS_EOPTIM, (p->lead_cols = 1, p->lead_lr = 0));
    BAD("lead_init", ZEPS_EINVAL, (p->lead_cols = 1, p->lead_lr = 1, p->lead_init = 7));
    BAD("lead_init_scale", ZEPS_EINVAL,
        (p->lead_cols = 8, p->lead_lr = 1, p->lead_init_scale = INFINITY));
    BAD("lead_lr", ZEPS_EOPTIM, p->lead_lr = NAN); /* unused, but never equal to itself */
#undef BAD
    for (int i = 0; i < n; i++) {
        char err[256] = "";
        zp_sparse *t = (zp_sparse *)&err; /* must stay untouched */
        int rc = zp_sparse_new(&t, &cases[i].o, err, sizeof err);
        ck_assert_msg(rc == cases[i].code, "case %d (%s): rc %d", i, cases[i].field, rc);
        ck_assert_msg(strstr(err, cases[i].field) != NULL, "case %d: '%s' does not name %s", i, err,
                      cases[i].field);
        ck_assert_ptr_eq(t, (zp_sparse *)&err);
    }
    char err[256];
    zp_sparse *t;
    o.init = (zp_init_kind)9;
    ck_assert_int_eq(zp_sparse_new(&t, &o, err, sizeof err), ZEPS_EINVAL);
    ck_assert(strstr(err, "init") != NULL);
    o.init = ZP_INIT_ZEROS;
    o.init_scale = NAN;
    ck_assert_int_eq(zp_sparse_new(&t, &o, err, sizeof err), ZEPS_EINVAL);
    ck_assert(strstr(err, "init_scale") != NULL);
    o.init_scale = 0;
    o.evict = (zp_evict_policy)3;
    ck_assert_int_eq(zp_sparse_new(&t, &o, err, sizeof err), ZEPS_EINVAL);
    ck_assert(strstr(err, "evict") != NULL);

    ck_assert_int_eq(zp_evict_from_name(NULL), ZP_EVICT_LRU);
    ck_assert_int_eq(zp_evict_from_name("lru"), ZP_EVICT_LRU);
    ck_assert_int_eq(zp_evict_from_name("lfu"), ZP_EVICT_LFU);
    ck_assert_int_eq(zp_evict_from_name("arc"), -1);
    ck_assert_str_eq(zp_evict_name(ZP_EVICT_LFU), "lfu");
    ck_assert_str_eq(zp_evict_name(ZP_EVICT_LRU), "lru");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sparse");
    ZT_SPARSE_ADD(s, test_init_rows);
    ZT_SPARSE_ADD(s, test_optim_sgd);
    ZT_SPARSE_ADD(s, test_optim_adagrad);
    ZT_SPARSE_ADD(s, test_optim_adam);
    ZT_SPARSE_ADD(s, test_optim_ftrl);
    ZT_SPARSE_ADD(s, test_tau);
    ZT_SPARSE_ADD(s, test_freq_buckets);
    ZT_SPARSE_ADD(s, test_index_random);
    ZT_SPARSE_ADD(s, test_million_rows);
    ZT_SPARSE_ADD(s, test_put_get_next);
    ZT_SPARSE_ADD(s, test_bad_opts);
    return zt_run_suite(s);
}
