/*
 * test_rowpast.c - server/table/rowpast.c: the rows a bsp round changed,
 * kept as they were, and a pull at that round's clock answered with them.
 *
 * Against a real store: rows read before a round, kept, changed by a
 * push, must come back bit for bit (values and versions) at the kept
 * clock and only there; a row that did not exist comes back as its
 * initial values at version 0; rows the round did not name are left as
 * the store read them; clear and none keep nothing to overwrite; and a
 * thousand rows through the hash index, repeated ids in the pull too.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "rowpast.h"
#include "sparse.h"
#include "sparse_fixture.h"

#define DIM 4

/* A store with rows 0..n-1 made by a pull at clock 0. */
static zp_sparse *store_with(size_t n)
{
    zp_sparse_opts o = base_opts("adagrad", DIM);
    zp_sparse *st = make(&o);
    uint64_t *ids = malloc(n * sizeof(*ids));
    float *rows = malloc(n * DIM * sizeof(float));
    for (size_t i = 0; i < n; i++)
        ids[i] = i;
    zp_sparse_pull(st, ids, n, 0, rows, NULL);
    free(ids);
    free(rows);
    return st;
}

/* Push a gradient of 1 to every id of ids[0..n). */
static void push_all(zp_sparse *st, const uint64_t *ids, size_t n, int64_t clock)
{
    float *g = malloc(n * DIM * sizeof(float));
    for (size_t i = 0; i < n * DIM; i++)
        g[i] = 1.0f;
    ck_assert_uint_eq(zp_sparse_push(st, ids, n, g, 1.0f, clock, NULL, NULL, NULL), n);
    free(g);
}

START_TEST(test_kept_rows_come_back)
{
    zp_sparse *st = store_with(8);
    const uint64_t round[] = {1, 3, 100}; /* 100 has no row yet */
    const uint64_t pull[] = {0, 1, 3, 100, 3};
    float before[5 * DIM], now[5 * DIM];
    uint32_t vbefore[5], vnow[5];
    /* as read before the round, without making row 100: its initial values */
    const uint64_t known[] = {0, 1, 3};
    zp_sparse_pull(st, known, 3, 1, before, vbefore);
    memcpy(before + 4 * DIM, before + 2 * DIM, DIM * sizeof(float));
    vbefore[4] = vbefore[2];
    zp_sparse_init_row(st, 100, before + 3 * DIM);
    vbefore[3] = 0;
    zp_sparse_row row;
    ck_assert(!zp_sparse_get(st, 100, &row));
    zp_rowpast p;
    zp_rowpast_init(&p, DIM);
    ck_assert(!zp_rowpast_has(&p, 5));
    ck_assert_int_eq(zp_rowpast_keep(&p, st, round, 3, 5), 0);
    ck_assert(zp_rowpast_has(&p, 5) && !zp_rowpast_has(&p, 4) && !zp_rowpast_has(&p, 6));
    push_all(st, round, 3, 5);
    zp_sparse_pull(st, pull, 5, 6, now, vnow);
    ck_assert(memcmp(now + DIM, before + DIM, DIM * sizeof(float)) != 0);
    ck_assert_uint_eq(vnow[1], vbefore[1] + 1);
    /* at another clock: nothing overwritten */
    ck_assert_uint_eq(zp_rowpast_serve(&p, 6, pull, 5, now, vnow), 0);
    ck_assert_uint_eq(zp_rowpast_serve(&p, 4, pull, 5, now, vnow), 0);
    /* at clock 5: rows 1, 3 (twice) and 100 as they were; row 0 as read */
    ck_assert_uint_eq(zp_rowpast_serve(&p, 5, pull, 5, now, vnow), 4);
    ck_assert(memcmp(now, before, sizeof(before)) == 0);
    for (int i = 0; i < 5; i++)
        ck_assert_uint_eq(vnow[i], vbefore[i]);
    ck_assert_uint_eq(vnow[3], 0); /* 100 did not exist before the round */
    /* NULL versions are allowed */
    ck_assert_uint_eq(zp_rowpast_serve(&p, 5, pull, 5, now, NULL), 4);
    zp_rowpast_clear(&p);
    ck_assert(!zp_rowpast_has(&p, 5));
    ck_assert_uint_eq(zp_rowpast_serve(&p, 5, pull, 5, now, vnow), 0);
    zp_rowpast_none(&p, 7); /* a round that changed no row */
    ck_assert(zp_rowpast_has(&p, 7));
    ck_assert_uint_eq(zp_rowpast_serve(&p, 7, pull, 5, now, vnow), 0);
    zp_rowpast_fini(&p);
    zp_sparse_destroy(&st);
}
END_TEST

/* A round of 1000 rows after one of 10 (the arrays grow, the index is made
 * anew): every row of the pull answered from the kept round. */
START_TEST(test_many_rows)
{
    enum { N = 1000 };
    zp_sparse *st = store_with(N);
    static uint64_t ids[N];
    static float before[N * DIM], now[N * DIM];
    static uint32_t vb[N], vn[N];
    for (size_t i = 0; i < N; i++)
        ids[i] = (uint64_t)(N - 1 - i) * 7919u % N; /* a permutation */
    zp_rowpast p;
    zp_rowpast_init(&p, DIM);
    ck_assert_int_eq(zp_rowpast_keep(&p, st, ids, 10, 1), 0);
    push_all(st, ids, 10, 1);
    zp_sparse_pull(st, ids, N, 2, before, vb);
    ck_assert_int_eq(zp_rowpast_keep(&p, st, ids, N, 2), 0);
    push_all(st, ids, N, 2);
    zp_sparse_pull(st, ids, N, 3, now, vn);
    ck_assert_uint_eq(zp_rowpast_serve(&p, 2, ids, N, now, vn), N);
    ck_assert(memcmp(now, before, sizeof(before)) == 0);
    ck_assert(memcmp(vn, vb, sizeof(vb)) == 0);
    zp_rowpast_fini(&p);
    zp_sparse_destroy(&st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rowpast");
    ZT_SPARSE_ADD(s, test_kept_rows_come_back);
    ZT_SPARSE_ADD(s, test_many_rows);
    return zt_run_suite(s);
}
