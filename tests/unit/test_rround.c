/*
 * test_rround.c - server/table/rround.c, a sparse table's held bsp rounds:
 * the merge of a clock is the same bits whatever order the ranks' pushes
 * were held in (rank order, each rank's pushes in arrival order, repeated
 * rows summed in that order), leaves the other clocks held, and names the
 * version the first push read; forget drops a rank's redone clocks only;
 * clear drops everything; the byte count follows; fini leaves it empty
 * (a second fini frees nothing); a merge kept on a
 * primary and given to a backup holding the pushes without rows is merged
 * there bit for bit.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "rng.h"
#include "rround.h"

enum { DIM = 3, P = 6, N = 40 };

/* P pushes of N ids from 0..29 (repeats within and across pushes) by ranks
 * {2, 0, 1, 0, 2, 1}, all for clock 4, with versions. */
static uint64_t ids[P][N];
static float g[P][N * DIM];
static uint32_t vers[P][N];
static const uint32_t rank_of[P] = {2, 0, 1, 0, 2, 1};

static void make_pushes(void)
{
    zp_rng r;
    zp_rng_seed(&r, 5, 0, 0);
    for (int p = 0; p < P; p++)
        for (int i = 0; i < N; i++) {
            ids[p][i] = zp_rng_below(&r, 30) * 0x9e3779b97f4a7c15ull;
            vers[p][i] = 100 * (uint32_t)p + (uint32_t)i;
            for (int d = 0; d < DIM; d++)
                g[p][i * DIM + d] = (float)(zp_rng_uniform(&r) - 0.5) * (float)(p + 1);
        }
}

/* Hold the pushes in the order `order` (a permutation of 0..P-1 that keeps
 * each rank's pushes in their order), merge clock 4 into out. */
static size_t held_merge(const int *order, uint64_t *out_ids, float *out_g, uint32_t *out_v)
{
    zp_rround rr;
    zp_rround_init(&rr);
    ck_assert_int_eq(zp_rround_hold(&rr, 0, 5, ids[0], 3, g[0], DIM, NULL), 0); /* clock 5 */
    for (int k = 0; k < P; k++) {
        int p = order[k];
        ck_assert_int_eq(zp_rround_hold(&rr, rank_of[p], 4, ids[p], N, g[p], DIM, vers[p]), 0);
    }
    size_t n = zp_rround_merge(&rr, 4, DIM);
    ck_assert_uint_gt(n, 0);
    ck_assert_int_eq(rr.nranks, 3);
    ck_assert(rr.vers_ok);
    memcpy(out_ids, rr.ids, n * sizeof(uint64_t));
    memcpy(out_g, rr.g, n * DIM * sizeof(float));
    memcpy(out_v, rr.vers, n * sizeof(uint32_t));
    ck_assert_uint_eq(rr.nheld, 1); /* clock 5's push stays */
    ck_assert(zp_rround_holds_before(&rr, 6) && !zp_rround_holds_before(&rr, 5));
    ck_assert_uint_eq(zp_rround_merge(&rr, 4, DIM), 0); /* merged clocks are gone */
    zp_rround_fini(&rr);
    return n;
}

START_TEST(test_merge_any_arrival_order)
{
    make_pushes();
    static const int arrival[] = {0, 1, 2, 3, 4, 5}, other[] = {1, 3, 2, 5, 0, 4};
    uint64_t ia[P * N], ib[P * N];
    float ga[P * N * DIM], gb[P * N * DIM];
    uint32_t va[P * N], vb[P * N];
    size_t na = held_merge(arrival, ia, ga, va), nb = held_merge(other, ib, gb, vb);
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(ia, ib, na * sizeof(uint64_t)) == 0);
    ck_assert(memcmp(ga, gb, na * DIM * sizeof(float)) == 0);
    ck_assert(memcmp(va, vb, na * sizeof(uint32_t)) == 0);
    /* the reference: rank order 0, 1, 2; within a rank, arrival order */
    static const int ref_order[] = {1, 3, 2, 5, 0, 4};
    size_t m = 0;
    uint64_t rid[P * N];
    float rg[P * N * DIM] = {0};
    uint32_t rv[P * N];
    for (int k = 0; k < P; k++) {
        int p = ref_order[k];
        for (int i = 0; i < N; i++) {
            size_t j = 0;
            while (j < m && rid[j] != ids[p][i])
                j++;
            if (j == m) {
                rid[m] = ids[p][i];
                rv[m++] = vers[p][i];
            }
            for (int d = 0; d < DIM; d++)
                rg[j * DIM + d] += g[p][i * DIM + d];
        }
    }
    ck_assert_uint_eq(na, m);
    ck_assert(memcmp(ia, rid, m * sizeof(uint64_t)) == 0);
    ck_assert(memcmp(ga, rg, m * DIM * sizeof(float)) == 0);
    ck_assert(memcmp(va, rv, m * sizeof(uint32_t)) == 0);
}
END_TEST

START_TEST(test_forget_clear_bytes)
{
    make_pushes();
    zp_rround rr, other;
    zp_rround_init(&rr);
    zp_rround_init(&other); /* the merge index's seed is random: ids come from the wire */
    ck_assert(rr.seed != 0 && rr.seed != other.seed);
    zp_rround_fini(&other);
    ck_assert_uint_eq(rr.bytes, 0);
    ck_assert_int_eq(zp_rround_hold(&rr, 1, 3, ids[0], N, g[0], DIM, vers[0]), 0);
    ck_assert_int_eq(zp_rround_hold(&rr, 1, 4, ids[1], N, g[1], DIM, NULL), 0);
    ck_assert_int_eq(zp_rround_hold(&rr, 2, 4, ids[2], N, g[2], DIM, vers[2]), 0);
    uint64_t one_v = N * (8 + 4 * DIM + 4), one = N * (8 + 4 * DIM);
    ck_assert_uint_eq(rr.bytes, 2 * one_v + one);
    zp_rround_forget(&rr, 1, 4); /* rank 1 redoes clock 4: its clock 3 stays */
    ck_assert_uint_eq(rr.nheld, 2);
    ck_assert_uint_eq(rr.bytes, 2 * one_v);
    ck_assert_uint_eq(zp_rround_merge(&rr, 4, DIM) > 0, 1);
    ck_assert_int_eq(rr.nranks, 1);
    ck_assert_uint_eq(rr.nheld, 1);
    /* what it holds: one push, and the merge buffers for N rows of DIM */
    ck_assert_uint_eq(zp_rround_bytes(&rr), one_v + N * (8 + 4 + 4 * DIM) + 4 * rr.nslots);
    ck_assert_int_eq(zp_rround_hold(&rr, 1, 4, ids[1], N, g[1], DIM, NULL), 0);
    ck_assert_int_eq(zp_rround_hold(&rr, 2, 4, ids[2], N, g[2], DIM, vers[2]), 0);
    ck_assert(zp_rround_merge(&rr, 4, DIM) > 0);
    ck_assert(!rr.vers_ok); /* one of the pushes carried no versions */
    zp_rround_clear(&rr);
    ck_assert_uint_eq(rr.nheld, 0);
    ck_assert_uint_eq(rr.bytes, 0);
    ck_assert(!zp_rround_holds_before(&rr, INT64_MAX));
    zp_rround_fini(&rr);
    /* fini leaves it empty: nothing counted, nothing to free again */
    ck_assert_ptr_null(rr.held);
    ck_assert_ptr_null(rr.ids);
    ck_assert_uint_eq(zp_rround_bytes(&rr), 0);
    zp_rround_fini(&rr);
}
END_TEST

/* A replicated primary keeps each merge; a backup holding the same pushes
 * without rows, given the kept merge, merges the same bits, and drops
 * what is held for that clock. */
START_TEST(test_keep_and_give)
{
    make_pushes();
    zp_rround primary, backup;
    zp_rround_init(&primary);
    zp_rround_init(&backup);
    for (int k = 0; k < P; k++) {
        ck_assert_int_eq(zp_rround_hold(&primary, rank_of[k], 4, ids[k], N, g[k], DIM, vers[k]), 0);
        ck_assert_int_eq(zp_rround_hold(&backup, rank_of[k], 4, NULL, 0, NULL, DIM, NULL), 0);
    }
    ck_assert(zp_rround_holds_before(&backup, 5));
    size_t n = zp_rround_merge(&primary, 4, DIM);
    ck_assert_uint_gt(n, 0);
    ck_assert_int_eq(zp_rround_keep(&primary, 4, DIM), 0);
    size_t nk;
    const zp_rround_done *d = zp_rround_kept(&primary, &nk);
    ck_assert_uint_eq(nk, 1);
    ck_assert_uint_eq(d->n, n);
    ck_assert(d->vers_ok && d->clock == 4);
    /* a backup without the merge merges its rowless pushes into nothing */
    zp_rround other;
    zp_rround_init(&other);
    ck_assert_int_eq(zp_rround_hold(&other, 0, 4, NULL, 0, NULL, DIM, NULL), 0);
    ck_assert_uint_eq(zp_rround_merge(&other, 4, DIM), 0);
    zp_rround_fini(&other);
    /* given: the same ids, gradients and versions, the held pushes gone */
    ck_assert_int_eq(zp_rround_give(&backup, 4, d->ids, d->n, d->g, DIM, d->vers), 0);
    ck_assert_int_eq(zp_rround_give(&backup, 7, d->ids, 1, d->g, DIM, NULL), 0);
    ck_assert_uint_eq(zp_rround_merge(&backup, 4, DIM), n);
    ck_assert_int_eq(backup.nranks, 3);
    ck_assert(backup.vers_ok);
    ck_assert(memcmp(backup.ids, primary.ids, n * sizeof(uint64_t)) == 0);
    ck_assert(memcmp(backup.g, primary.g, n * DIM * sizeof(float)) == 0);
    ck_assert(memcmp(backup.vers, primary.vers, n * sizeof(uint32_t)) == 0);
    ck_assert_uint_eq(backup.nheld, 0);
    /* clock 7's merge waits: it holds rounds before 8, until dropped */
    ck_assert(zp_rround_holds_before(&backup, 8) && !zp_rround_holds_before(&backup, 7));
    ck_assert_uint_eq(zp_rround_given_clear(&backup), 1);
    ck_assert(!zp_rround_holds_before(&backup, INT64_MAX));
    zp_rround_kept_clear(&primary);
    zp_rround_kept(&primary, &nk);
    ck_assert_uint_eq(nk, 0);
    zp_rround_fini(&primary);
    zp_rround_fini(&backup);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rround");
    TCase *tc = tcase_create("rround");
    tcase_add_test(tc, test_merge_any_arrival_order);
    tcase_add_test(tc, test_forget_clear_bytes);
    tcase_add_test(tc, test_keep_and_give);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
