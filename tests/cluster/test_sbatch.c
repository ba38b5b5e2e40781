/*
 * test_sbatch.c - the client library's batch builder (zeps_sbatch_new)
 * counting distinct ids exactly at scale: a million ids, where probes pass
 * many slots taken by other ids (a probe that took a slot's hash bits or
 * position for its id would merge some), with repeats at known positions;
 * and over 70,000 calls that reuse the client's scratch, small batches
 * after table-filling ones, after batches that each grow the kept one. Through a real zeps-server
 * (1 shard), which the batch needs for its table; the pulls check that repeated positions get their
 * id's row. The distinct-row calls (zeps_sbatch_positions, zeps_sbatch_pull_unique,
 * zeps_sbatch_push_unique, zeps_sbatch_new_pull_unique) on 1 and 3 shards: positions in the order
 * the ids first appear (the same on both), every distinct row pulled to
 * its place and nothing past the last, every row's gradient applied to
 * that row exactly once, and the one-call form equal to its two calls.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "rng.h"
#include "rowres.h"
#include "zeps.h"

#define DIM 2

/* A sparse sgd table with uniform initial rows. */
static uint32_t declare_table(zeps_client *c, const char *name, uint32_t dim, double lr,
                              double scale, uint64_t seed)
{
    uint32_t t;
    zeps_sparse_spec spec = {.name = name,
                             .dim = dim,
                             .optimizer = "sgd",
                             .lr = lr,
                             .init = "uniform",
                             .init_scale = scale,
                             .seed = seed};
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    return t;
}

static uint32_t declare(zeps_client *c)
{
    return declare_table(c, "emb", DIM, 0.1, 0.1, 3);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Distinct ids of ids[0..n), counted by sorting a copy. */
static size_t distinct(const uint64_t *ids, size_t n)
{
    uint64_t *c = malloc(n * sizeof(uint64_t));
    memcpy(c, ids, n * sizeof(uint64_t));
    qsort(c, n, sizeof(uint64_t), cmp_u64);
    size_t k = n > 0;
    for (size_t i = 1; i < n; i++)
        k += c[i] != c[i - 1];
    free(c);
    return k;
}

START_TEST(test_million_distinct)
{
    enum { N = 1000000, REP = 1000 };
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", "max_message_mb = 256;", NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = declare(c);
    uint64_t *ids = malloc(N * sizeof(uint64_t));
    for (size_t i = 0; i < N; i++)
        ids[i] = zp_rng_mix64(i + 1); /* distinct: mix64 is a bijection */
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_uint_eq(zeps_sbatch_unique(b), N);
    zeps_sbatch_free(&b);
    for (size_t k = 0; k < REP; k++) /* REP later positions repeat earlier ids */
        ids[N / 2 + k * 499] = ids[k * 491];
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_uint_eq(zeps_sbatch_unique(b), N - REP);
    ck_assert_uint_eq(distinct(ids, N), N - REP);
    zeps_sbatch_free(&b);
    /* a repeated position reads its id's row */
    float *rows = malloc((size_t)N * DIM * sizeof(float));
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), 0);
    for (size_t k = 0; k < REP; k++)
        ck_assert_mem_eq(rows + (N / 2 + k * 499) * DIM, rows + k * 491 * DIM, DIM * sizeof(float));
    zeps_sbatch_free(&b);
    free(rows);
    free(ids);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_scratch_reused)
{
    enum { CALLS = 70000, BIG = 4096 };
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = declare(c);
    uint64_t big[BIG];
    for (size_t i = 0; i < BIG; i++)
        big[i] = zp_rng_mix64(i + 77);
    /* each batch larger than the one kept: the kept arrays grow, every one
     * freed first (a lost one is a leak, which LeakSanitizer reports) */
    for (size_t n = 1; n <= BIG; n *= 4) {
        zeps_sbatch *b;
        ck_assert_int_eq(zeps_sbatch_new(c, t, big, n, &b), 0);
        ck_assert_uint_eq(zeps_sbatch_unique(b), n);
        zeps_sbatch_free(&b);
    }
    for (uint64_t k = 0; k < CALLS; k++) {
        zeps_sbatch *b;
        uint64_t ids[5] = {k, k + 1, k, 7 + k * 3, k + 1};
        int many = k % 4096 == 0; /* now and then a table-filling batch */
        ck_assert_int_eq(zeps_sbatch_new(c, t, many ? big : ids, many ? BIG : 5, &b), 0);
        ck_assert_uint_eq(zeps_sbatch_unique(b), many ? BIG : 3);
        zeps_sbatch_free(&b);
    }
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* ---------------------------------------------- the distinct-row calls */

enum { UN = 3000, UPOOL = 400, UDIM = 3 };

/* ids[UN] drawn from UPOOL distinct ids (mix64 of 1..UPOOL: spread over any
 * shard count), each of them at least once, repeats scattered. */
static void unique_ids(uint64_t *ids)
{
    for (size_t i = 0; i < UN; i++)
        ids[i] = zp_rng_mix64(1 + (i < UPOOL ? (UPOOL - 1 - i) : zp_rng_mix64(i) % UPOOL));
    for (size_t i = UN - 1; i > 0; i--) { /* shuffle: repeats before first uses too */
        size_t j = zp_rng_mix64(i * 7919) % (i + 1);
        uint64_t x = ids[i];
        ids[i] = ids[j];
        ids[j] = x;
    }
}

static uint32_t declare_sgd(zeps_client *c)
{
    return declare_table(c, "uemb", UDIM, 1.0, 0.5, 5);
}

/* positions[i] is the index of ids[i]'s first appearance among first
 * appearances: checked by brute force. */
static void check_positions(const uint64_t *ids, const uint32_t *pos, size_t nu)
{
    size_t next = 0;
    for (size_t i = 0; i < UN; i++) {
        size_t j = 0;
        while (ids[j] != ids[i])
            j++;
        if (j == i)
            ck_assert_msg(pos[i] == next++, "position %zu: %u, first appearance %zu", i, pos[i],
                          next - 1);
        else
            ck_assert_msg(pos[i] == pos[j], "position %zu: %u, its id's first %u", i, pos[i],
                          pos[j]);
    }
    ck_assert_uint_eq(next, nu);
}

/* One shard count's run: positions (copied to pos_out), pull_unique against
 * the per-position pull, push_unique applied exactly once per row, and
 * new_pull_unique (blocking and not) against the two calls. */
static void unique_calls(int nshards, uint32_t *pos_out)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, nshards, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = declare_sgd(c);
    static uint64_t ids[UN];
    static float rows[UN * UDIM], u0[(UPOOL + 1) * UDIM], u1[(UPOOL + 1) * UDIM], g[UPOOL * UDIM],
        u2[UN * UDIM];
    unique_ids(ids);
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, UN, &b), 0);
    size_t nu = zeps_sbatch_unique(b);
    ck_assert_uint_eq(nu, UPOOL);
    ck_assert_uint_eq(distinct(ids, UN), UPOOL);
    const uint32_t *pos = zeps_sbatch_positions(b);
    check_positions(ids, pos, nu);
    memcpy(pos_out, pos, sizeof(uint32_t) * UN);

    /* every distinct row lands at its place; the row past the last is left */
    for (size_t k = 0; k < (UPOOL + 1) * UDIM; k++)
        u0[k] = -7.0f;
    ck_assert_int_eq(zeps_sbatch_pull_unique(b, u0, 0), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), 0);
    for (size_t i = 0; i < UN; i++)
        ck_assert_msg(
            memcmp(u0 + (size_t)pos[i] * UDIM, rows + i * UDIM, sizeof(float) * UDIM) == 0,
            "%d shards: position %zu's row is not its distinct row %u", nshards, i, pos[i]);
    for (size_t d = 0; d < UDIM; d++)
        ck_assert(u0[UPOOL * UDIM + d] == -7.0f);

    /* row u's gradient is u + 1 (and a column step): sgd at lr 1 moves it
     * by exactly that, once, whatever shard it is on */
    for (size_t u = 0; u < nu; u++)
        for (size_t d = 0; d < UDIM; d++)
            g[u * UDIM + d] = (float)(u + 1) / 64.0f + (float)d / 8.0f;
    ck_assert_int_eq(zeps_sbatch_push_unique(b, g, 0), 0);
    ck_assert_int_eq(zeps_sbatch_pull_unique(b, u1, 0), 0);
    for (size_t u = 0; u < nu; u++)
        for (size_t d = 0; d < UDIM; d++)
            ck_assert_msg(fabsf(u1[u * UDIM + d] - (u0[u * UDIM + d] - g[u * UDIM + d])) < 1e-5f,
                          "%d shards: row %zu col %zu moved by %g, its gradient is %g", nshards, u,
                          d, (double)(u0[u * UDIM + d] - u1[u * UDIM + d]),
                          (double)g[u * UDIM + d]);
    zeps_sbatch_free(&b);

    /* the one-call form, waiting and not, gives the same batch and rows */
    for (int wait = 0; wait < 2; wait++) {
        zeps_req *r = NULL;
        memset(u2, 0, sizeof u2);
        ck_assert_int_eq(zeps_sbatch_new_pull_unique(c, t, ids, UN, u2, 0, &b, wait ? NULL : &r),
                         0);
        if (!wait)
            ck_assert_int_eq(zeps_wait(&r), 0);
        ck_assert_uint_eq(zeps_sbatch_unique(b), nu);
        ck_assert_mem_eq(zeps_sbatch_positions(b), pos_out, sizeof(uint32_t) * UN);
        ck_assert_mem_eq(u2, u1, sizeof(float) * nu * UDIM);
        zeps_sbatch_free(&b);
    }
    /* errors leave no batch and do not write *out */
    zeps_sbatch *keep = (zeps_sbatch *)&keep;
    ck_assert_int_eq(zeps_sbatch_new_pull_unique(c, 999, ids, UN, u2, 0, &keep, NULL), ZEPS_ETABLE);
    ck_assert_int_eq(zeps_sbatch_new_pull_unique(c, t, ids, UN, NULL, 0, &keep, NULL), ZEPS_EINVAL);
    ck_assert_ptr_eq(keep, (zeps_sbatch *)&keep);
    ck_assert_int_eq(zeps_sbatch_new_pull_unique(c, t, ids, 0, NULL, 0, &b, NULL), 0);
    ck_assert_uint_eq(zeps_sbatch_unique(b), 0);
    zeps_sbatch_free(&b);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_unique_calls)
{
    static uint32_t one[UN], three[UN];
    unique_calls(1, one);
    unique_calls(3, three);
    ck_assert_mem_eq(one, three, sizeof one); /* the same order on any shard count */
}
END_TEST

/* The residual rows of a compressed sparse push (rowres.c): 3,000 ids, past
 * the index's first growths, each keep the row written for it. */
START_TEST(test_rowres_keeps_rows)
{
    enum { N = 3000, RD = 3 };
    zp_rowres *r = zp_rowres_new(RD);
    for (uint64_t i = 0; i < N; i++) {
        float *row = zp_rowres_get(r, zp_rng_mix64(i + 9));
        for (int j = 0; j < RD; j++)
            row[j] = (float)(i * RD + j);
    }
    for (uint64_t i = 0; i < N; i++) {
        const float *row = zp_rowres_get(r, zp_rng_mix64(i + 9));
        for (int j = 0; j < RD; j++)
            ck_assert_float_eq(row[j], (float)(i * RD + j));
    }
    zp_rowres_free(&r);
    ck_assert_ptr_null(r);
}
END_TEST

/* A pull whose interrupt flag is set while it waits fails ZEPS_ECLOSED and
 * says so in zeps_last_error. */
START_TEST(test_interrupted_pull)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = declare(c);
    uint64_t ids[4] = {1, 2, 3, 4};
    float rows[4 * DIM];
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, 4, &b), 0);
    volatile int stop = 1;
    zeps_client_set_interrupt(c, &stop);
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), ZEPS_ECLOSED);
    ck_assert_msg(strstr(zeps_last_error(c), "interrupted while waiting for"), "%s",
                  zeps_last_error(c));
    stop = 0;
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), 0); /* the client goes on */
    zeps_sbatch_free(&b);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("sbatch");
    TCase *tc = tcase_create("dedup");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_million_distinct);
    tcase_add_test(tc, test_scratch_reused);
    tcase_add_test(tc, test_unique_calls);
    tcase_add_test(tc, test_rowres_keeps_rows);
    tcase_add_test(tc, test_interrupted_pull);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
