/*
 * test_idset.c - the set of ids a live move sends again (server/move/
 * idset.c): adding, membership, taking the whole set, growth, the ids
 * 0 and UINT64_MAX, reuse after a take; ids that differ only in high
 * bits spread over the table.
 */
#include <check.h>
#include <stdlib.h>

#include "check_main.h"
#include "idset.h"

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

START_TEST(test_add_take)
{
    zp_idset s;
    zp_idset_init(&s);
    uint64_t *ids;
    size_t n;
    zp_idset_take(&s, &ids, &n); /* empty, nothing allocated */
    ck_assert_ptr_null(ids);
    ck_assert_uint_eq(n, 0);
    /* 0 and UINT64_MAX are ids like any */
    for (uint64_t i = 0; i < 10000; i++)
        zp_idset_add(&s, i * 7);
    zp_idset_add(&s, UINT64_MAX);
    zp_idset_add(&s, UINT64_MAX);
    for (uint64_t i = 0; i < 10000; i += 3)
        zp_idset_add(&s, i * 7); /* again: no change */
    ck_assert_uint_eq(zp_idset_size(&s), 10001);
    ck_assert(zp_idset_has(&s, 0) && zp_idset_has(&s, 69993) && zp_idset_has(&s, UINT64_MAX));
    ck_assert(!zp_idset_has(&s, 1) && !zp_idset_has(&s, 70000) &&
              !zp_idset_has(&s, UINT64_MAX - 1));
    zp_idset_take(&s, &ids, &n);
    ck_assert_uint_eq(n, 10001);
    qsort(ids, n, sizeof(uint64_t), cmp);
    for (uint64_t i = 0; i < 10000; i++)
        ck_assert_uint_eq(ids[i], i * 7);
    ck_assert_uint_eq(ids[10000], UINT64_MAX);
    free(ids);
    /* taken whole: empty, and it fills again */
    ck_assert_uint_eq(zp_idset_size(&s), 0);
    ck_assert(!zp_idset_has(&s, 7) && !zp_idset_has(&s, UINT64_MAX));
    zp_idset_add(&s, 7);
    ck_assert(zp_idset_has(&s, 7));
    zp_idset_take(&s, &ids, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(ids[0], 7);
    free(ids);
    zp_idset_fini(&s);
    zp_idset_fini(&s); /* twice is harmless */
}
END_TEST

/* x with x ^= x >> s undone: the y that x ^ (x >> s) maps to it. */
static uint64_t unshift(uint64_t x, int s)
{
    uint64_t y = x;
    for (int k = s; k < 64; k += s)
        y ^= x >> k;
    return y;
}

/* The hash mixes every bit of an id into the slot: 4,096 ids whose keys
 * the finalizer's two xorshifts alone map to j << 48 (they differ only in
 * bits 48-60 there, which a hash without the multiply between the
 * xorshifts never brings down to the low bits) spread over the table:
 * no run of occupied slots near the 4,096 a single cluster would make. */
START_TEST(test_high_bits_spread)
{
    enum { N = 4096 };
    zp_idset s;
    zp_idset_init(&s);
    for (uint64_t j = 1; j <= N; j++)
        zp_idset_add(&s, unshift(unshift(j << 48, 27), 30) - 1); /* a slot holds id + 1 */
    ck_assert_uint_eq(zp_idset_size(&s), N);
    for (uint64_t j = 1; j <= N; j++)
        ck_assert(zp_idset_has(&s, unshift(unshift(j << 48, 27), 30) - 1));
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < 2 * s.cap; i++) { /* twice round: a run may wrap */
        run = s.keys[i & (s.cap - 1)] != 0 ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    ck_assert_msg(longest < 256, "a run of %zu occupied slots of %zu", longest, s.cap);
    zp_idset_fini(&s);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("idset");
    TCase *tc = tcase_create("idset");
    tcase_add_test(tc, test_add_take);
    tcase_add_test(tc, test_high_bits_spread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
