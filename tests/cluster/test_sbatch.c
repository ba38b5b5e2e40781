/*
 * test_sbatch.c - the client library's batch builder (zeps_sbatch_new)
 * counting distinct ids exactly at scale: a million ids, where probes pass
 * many slots taken by other ids (a probe that took a slot's hash bits or
 * position for its id would merge some), with repeats at known positions;
 * and over 70,000 calls that reuse the client's scratch, small batches
 * after table-filling ones. Through a real zeps-server (1 shard), which the
 * batch needs for its table; the pulls check that repeated positions get
 * their id's row.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "rng.h"
#include "zeps.h"

#define DIM 2

static uint32_t declare(zeps_client *c)
{
    uint32_t t;
    zeps_sparse_spec spec = {.name = "emb",
                             .dim = DIM,
                             .optimizer = "sgd",
                             .lr = 0.1,
                             .init = "uniform",
                             .init_scale = 0.1,
                             .seed = 3};
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    return t;
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

static Suite *suite(void)
{
    Suite *s = suite_create("sbatch");
    TCase *tc = tcase_create("dedup");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_million_distinct);
    tcase_add_test(tc, test_scratch_reused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
