/*
 * test_rround.c - server/table/rround.c, a sparse table's held bsp rounds:
 * the merge of a clock is the same bits whatever order the ranks' pushes
 * were held in (rank order, each rank's pushes in arrival order, repeated
 * rows summed in that order), leaves the other clocks held, and names the
 * version the first push read; forget drops a rank's redone clocks only;
 * clear drops everything; the byte count follows; fini leaves it empty
 * (a second fini frees nothing); a merge kept on a
 * primary and given to a backup holding the pushes without rows is merged
 * there bit for bit; a split (a live move's hand-over, docs/elastic.md)
 * moves the chosen rows of every push in order, and the two halves merge
 * to the whole's bits.
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

static int chosen(uint64_t id, void *arg)
{
    (void)arg;
    return (int)((id >> 20) & 1);
}

static int every(uint64_t id, void *arg)
{
    (void)id, (void)arg;
    return 1;
}

/* Each id of merge (ids, g, v)[0..n) has in the reference (rid, rg,
 * rv)[0..m) the same gradient bits and version; how many were found. */
static size_t same_rows(const zp_rround *rr, size_t n, const uint64_t *rid, const float *rg,
                        const uint32_t *rv, size_t m)
{
    size_t found = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++)
            if (rid[j] == rr->ids[i]) {
                ck_assert(memcmp(rr->g + i * DIM, rg + j * DIM, DIM * sizeof(float)) == 0);
                ck_assert_uint_eq(rr->vers[i], rv[j]);
                found++;
            }
    return found;
}

/* A move's hand-over: the chosen rows of every held push go to another
 * rround (one push each, in order), the rest stay; merged apart they are
 * the merge of the whole, bit for bit; given back, the same again. */
START_TEST(test_split_hands_over)
{
    make_pushes();
    static const int arrival[] = {0, 1, 2, 3, 4, 5};
    uint64_t rid[P * N];
    float rg[P * N * DIM];
    uint32_t rv[P * N];
    size_t m = held_merge(arrival, rid, rg, rv), want = 0;
    zp_rround rr, into;
    zp_rround_init(&rr);
    zp_rround_init(&into);
    ck_assert_int_eq(zp_rround_first_clock(&rr), -1);
    ck_assert_int_eq(zp_rround_hold(&rr, 0, 5, ids[0], 3, g[0], DIM, NULL), 0);
    for (int p = 0; p < P; p++) {
        ck_assert_int_eq(zp_rround_hold(&rr, rank_of[p], 4, ids[p], N, g[p], DIM, vers[p]), 0);
        for (int i = 0; i < N; i++)
            want += (size_t)chosen(ids[p][i], NULL);
    }
    for (int i = 0; i < 3; i++)
        want += (size_t)chosen(ids[0][i], NULL);
    ck_assert_int_eq(zp_rround_first_clock(&rr), 4);
    uint64_t bytes = rr.bytes;
    size_t held = rr.nheld, whole = 0, parts = 0;
    uint32_t order[P + 1]; /* the ranks of the pushes with chosen rows, in order */
    for (size_t i = 0; i < rr.nheld; i++) {
        size_t c = 0;
        for (size_t j = 0; j < rr.held[i].n; j++)
            c += (size_t)chosen(rr.held[i].ids[j], NULL);
        whole += c == rr.held[i].n;
        if (c > 0)
            order[parts++] = rr.held[i].rank;
    }
    ck_assert_uint_eq(zp_rround_split(&rr, &into, chosen, NULL, DIM), want);
    ck_assert_uint_gt(want, 0);
    ck_assert_uint_eq(rr.bytes + into.bytes, bytes);
    ck_assert_uint_eq(rr.nheld, held - whole); /* a push left with no row goes */
    ck_assert_uint_eq(into.nheld, parts);
    for (size_t i = 0; i < into.nheld; i++) /* in the order held */
        ck_assert_uint_eq(into.held[i].rank, order[i]);
    for (size_t i = 0; i < rr.nheld; i++)
        for (size_t j = 0; j < rr.held[i].n; j++)
            ck_assert(!chosen(rr.held[i].ids[j], NULL));
    size_t a = zp_rround_merge(&rr, 4, DIM);
    size_t fa = same_rows(&rr, a, rid, rg, rv, m);
    size_t b = zp_rround_merge(&into, 4, DIM);
    size_t fb = same_rows(&into, b, rid, rg, rv, m);
    ck_assert_uint_eq(fa, a);
    ck_assert_uint_eq(fb, b);
    ck_assert_uint_eq(a + b, m);
    ck_assert_int_eq(zp_rround_first_clock(&into), 5);
    /* given back (an abort): clock 5's chosen rows join the rest again */
    size_t back = 0;
    for (size_t i = 0; i < into.nheld; i++)
        back += into.held[i].n;
    ck_assert_uint_eq(zp_rround_split(&into, &rr, every, NULL, DIM), back);
    ck_assert_uint_eq(into.nheld, 0);
    ck_assert_uint_eq(into.bytes, 0);
    ck_assert_int_eq(zp_rround_first_clock(&rr), 5);
    zp_rround_fini(&rr);
    zp_rround_fini(&into);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rround");
    TCase *tc = tcase_create("rround");
    tcase_add_test(tc, test_merge_any_arrival_order);
    tcase_add_test(tc, test_forget_clear_bytes);
    tcase_add_test(tc, test_keep_and_give);
    tcase_add_test(tc, test_split_hands_over);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
