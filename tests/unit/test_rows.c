/*
 * test_rows.c - server/table/rows.c's request scratch: the repeated-id
 * check (exact: the first repeat found, whatever the ids, across calls that
 * reuse the set and across a wrapped stamp) and the ids and row versions a
 * request is read from (in place when aligned, else an exact copy).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "rng.h"
#include "rows.h"
#include "sparse_hash.h"

static void rows_fini(zp_rows *r)
{
    free(r->set);
    free(r->set_home);
    free(r->ids);
    free(r->vers);
}

/* n distinct ids: a random odd multiplier keeps them distinct. */
static void distinct_ids(uint64_t *ids, size_t n, uint64_t salt)
{
    uint64_t mul = zp_rng_mix64(salt) | 1u;
    for (size_t i = 0; i < n; i++)
        ids[i] = (i + salt) * mul;
}

START_TEST(test_repeated_exact)
{
    enum { N = 100000 };
    zp_rows r = {0};
    uint64_t *ids = malloc(N * sizeof(uint64_t));
    distinct_ids(ids, N, 7);
    ck_assert_int_eq(zp_rows_repeated(&r, ids, N), -1);
    ck_assert_int_eq(zp_rows_repeated(&r, ids, N), -1); /* the set starts clean again */
    /* a repeat anywhere is found at its second occurrence, nothing earlier */
    const size_t at[][2] = {{0, 1}, {0, N - 1}, {N - 2, N - 1}, {123, 45678}, {N / 2, N / 2 + 17}};
    for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
        uint64_t saved = ids[at[k][1]];
        ids[at[k][1]] = ids[at[k][0]];
        ck_assert_int_eq(zp_rows_repeated(&r, ids, N), (ptrdiff_t)at[k][1]);
        ids[at[k][1]] = saved;
    }
    /* two repeats: the first second occurrence */
    ids[500] = ids[10];
    ids[300] = ids[20];
    ck_assert_int_eq(zp_rows_repeated(&r, ids, N), 300);
    /* small requests after a large one, and the same id all over */
    uint64_t same[5] = {9, 9, 9, 9, 9};
    ck_assert_int_eq(zp_rows_repeated(&r, same, 1), -1);
    ck_assert_int_eq(zp_rows_repeated(&r, same, 5), 1);
    free(ids);
    rows_fini(&r);
}
END_TEST

/* Ids that all share one home slot (the seed is known here, as it is not
 * to a client): probing is exact, repeats are still found. */
START_TEST(test_repeated_one_slot)
{
    enum { N = 200, CAP = 512 };
    zp_rows r = {.set_seed = 12345};
    uint64_t ids[N];
    size_t k = 0;
    uint64_t home = zp_sparse_hash_id(1, r.set_seed) & (CAP - 1);
    for (uint64_t id = 1; k < N; id++)
        if ((zp_sparse_hash_id(id, r.set_seed) & (CAP - 1)) == home)
            ids[k++] = id;
    ck_assert_int_eq(zp_rows_repeated(&r, ids, N), -1);
    ids[N - 1] = ids[N / 2];
    ck_assert_int_eq(zp_rows_repeated(&r, ids, N), N - 1);
    rows_fini(&r);
}
END_TEST

/* The stamp wraps: the set is cleared, not read as taken. */
START_TEST(test_repeated_stamp_wraps)
{
    zp_rows r = {0};
    uint64_t ids[64];
    distinct_ids(ids, 64, 3);
    ck_assert_int_eq(zp_rows_repeated(&r, ids, 64), -1);
    r.set_stamp = UINT32_MAX; /* the next check wraps to 0 */
    ck_assert_int_eq(zp_rows_repeated(&r, ids, 64), -1);
    ck_assert_uint_eq(r.set_stamp, 1);
    r.set_stamp = UINT32_MAX - 1; /* slots stamped UINT32_MAX stay from before */
    ck_assert_int_eq(zp_rows_repeated(&r, ids, 64), -1);
    r.set_stamp = UINT32_MAX;
    ck_assert_int_eq(zp_rows_repeated(&r, ids, 64), -1);
    rows_fini(&r);
}
END_TEST

START_TEST(test_ids_in_place)
{
    zp_rows r = {0};
    uint64_t buf[9];
    for (int i = 0; i < 9; i++)
        buf[i] = 0x0102030405060708ull * (uint64_t)(i + 1);
    ck_assert_ptr_eq(zp_rows_ids(&r, buf, 8), buf);
    unsigned char raw[80];
    memcpy(raw + 4, buf, 64); /* a frame at a 4-byte offset */
    const uint64_t *ids = zp_rows_ids(&r, raw + 4, 8);
    ck_assert_ptr_ne(ids, (const void *)(raw + 4));
    ck_assert_int_eq(((uintptr_t)ids & 7u), 0);
    ck_assert_int_eq(memcmp(ids, buf, 64), 0);
    uint32_t v[4] = {1, 2, 3, 4};
    ck_assert_ptr_eq(zp_rows_versions(&r, v, 4), v);
    memcpy(raw + 1, v, sizeof(v));
    const uint32_t *vs = zp_rows_versions(&r, raw + 1, 4);
    ck_assert_int_eq(((uintptr_t)vs & 3u), 0);
    ck_assert_int_eq(memcmp(vs, v, sizeof(v)), 0);
    rows_fini(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rows");
    TCase *tc = tcase_create("scratch");
    tcase_add_test(tc, test_repeated_exact);
    tcase_add_test(tc, test_repeated_one_slot);
    tcase_add_test(tc, test_repeated_stamp_wraps);
    tcase_add_test(tc, test_ids_in_place);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
