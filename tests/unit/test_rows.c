/*
 * test_rows.c - server/table/rows.c's request scratch: the repeated-id
 * check (exact: the first repeat found, whatever the ids, across calls that
 * reuse the set and across a wrapped stamp) and the ids and row versions a
 * request is read from (in place when aligned, else an exact copy in a
 * scratch that, outgrown, is replaced and not kept beside the new one); the
 * check of a push's ids through the store's index (zp_rows_check_push):
 * the same answers as the set, and candidates that lead each id to its own
 * row, also for ids whose hashes share the 32 bits an index slot keeps;
 * the store's probe reading no id past the last (ids that end at an
 * unmapped page).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check_main.h"
#include "heap.h"
#include "rng.h"
#include "rows.h"
#include "sparse_hash.h"
#include "sparse_int.h" /* the index seed, to build colliding ids */

static void rows_fini(zp_rows *r)
{
    zp_rows_scratch_free(r);
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

/* A copy that outgrows the scratch replaces it: 2,000 misaligned requests,
 * each one id longer than the last (so each grows the scratch, 8-24 KB),
 * leave one scratch on the heap, not 2,000 (32 MB). */
START_TEST(test_ids_copy_grows_in_place)
{
    enum { BASE = 1025, GROWS = 2000 };
    zp_rows r = {0};
    unsigned char *raw = malloc((BASE + GROWS) * sizeof(uint64_t) + 8);
    for (size_t i = 0; i < (BASE + GROWS) * sizeof(uint64_t) + 8; i++)
        raw[i] = (unsigned char)(i * 7);
    size_t before = zt_heap_used();
    for (size_t n = BASE; n < BASE + GROWS; n++) {
        const uint64_t *ids = zp_rows_ids(&r, raw + 4, n);
        ck_assert_int_eq(((uintptr_t)ids & 7u), 0);
        ck_assert_int_eq(memcmp(ids, raw + 4, n * sizeof(uint64_t)), 0);
    }
    size_t grown = zt_heap_used() - before;
    ck_assert_msg(grown < (BASE + GROWS) * sizeof(uint64_t) * 4,
                  "%zu bytes kept after %d growths of the scratch", grown, GROWS);
    rows_fini(&r);
    free(raw);
}
END_TEST

/* ---------------------------------------------------------------- a push's ids */

static zp_rows store_rows(void)
{
    zp_sparse_opts o = {.dim = 2, .optimizer = "adagrad", .lr = 0.1f, .init = ZP_INIT_ZEROS};
    zp_rows r = {.dim = 2};
    char err[256];
    ck_assert_int_eq(zp_sparse_new(&r.store, &o, err, sizeof(err)), 0);
    return r;
}

/* Rows for ids[0..n). */
static void create(zp_rows *r, const uint64_t *ids, size_t n)
{
    float *out = malloc(n * 2 * sizeof(float));
    zp_sparse_pull(r->store, ids, n, 0, out, NULL);
    free(out);
}

static uint32_t version_of(zp_rows *r, uint64_t id)
{
    zp_sparse_row row;
    ck_assert(zp_sparse_get(r->store, id, &row));
    return row.version;
}

/* The index vouches for ids it found and leaves the rest to the set: a
 * repeat among rows, among new ids, or none, is answered as the set alone
 * answers it, at the same position. */
START_TEST(test_check_push_exact)
{
    enum { N = 5000, FOUND = 3000 };
    zp_rows r = store_rows();
    uint64_t *ids = malloc(N * sizeof(uint64_t));
    distinct_ids(ids, N, 11);
    create(&r, ids, FOUND);
    ck_assert_int_eq(zp_rows_check_push(&r, ids, N), -1);
    const size_t at[][2] = {
        {10, 300}, {0, FOUND - 1}, {FOUND, N - 1}, {FOUND + 5, FOUND + 6}, {7, N - 2}};
    for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
        uint64_t saved = ids[at[k][1]];
        ids[at[k][1]] = ids[at[k][0]];
        ck_assert_int_eq(zp_rows_check_push(&r, ids, N), zp_rows_repeated(&r, ids, N));
        ck_assert_int_eq(zp_rows_check_push(&r, ids, N), (ptrdiff_t)at[k][1]);
        ids[at[k][1]] = saved;
    }
    /* the candidates left are each id's row: a push through them */
    float *g = calloc(N * 2, sizeof(float));
    ck_assert_int_eq(zp_rows_check_push(&r, ids, N), -1);
    ck_assert_uint_eq(zp_sparse_push_probed(r.store, ids, N, r.cand, g, 1.0f, 1, NULL, NULL, NULL),
                      N);
    for (size_t i = 0; i < N; i++)
        ck_assert_uint_eq(version_of(&r, ids[i]), 1);
    free(g);
    free(ids);
    zp_sparse_destroy(&r.store);
    rows_fini(&r);
}
END_TEST

/* The probe leaves to the set only what may repeat: a push of 100,000 ids
 * that all have rows (past the marks' first 65,536 records) hands on only
 * the few whose 32 hash bits another shares, the same few when probed
 * again (the marks were cleared), and with new ids and a repeat added,
 * every new id and both positions of the repeat. */
START_TEST(test_probe_narrows)
{
    enum { N = 100000, NEW = 1000, M = N + NEW };
    zp_rows r = store_rows();
    uint64_t *ids = malloc(M * sizeof(uint64_t));
    uint32_t *cand = malloc(M * sizeof(uint32_t)), *unsure = malloc(M * sizeof(uint32_t));
    distinct_ids(ids, M, 5);
    create(&r, ids, N);
    size_t k = zp_sparse_probe(r.store, ids, N, cand, unsure);
    ck_assert_uint_lt(k, 100); /* n^2 / 2^33: about one pair */
    ck_assert_uint_eq(zp_sparse_probe(r.store, ids, N, cand, unsure), k);
    ids[N - 1] = ids[12345];
    size_t k2 = zp_sparse_probe(r.store, ids, M, cand, unsure);
    ck_assert_uint_lt(k2, NEW + 2 + 100);
    int seen_first = 0, seen_second = 0;
    size_t news = 0;
    for (size_t j = 0; j < k2; j++) {
        ck_assert(j == 0 || unsure[j] > unsure[j - 1]);
        seen_first |= unsure[j] == 12345;
        seen_second |= unsure[j] == N - 1;
        news += unsure[j] >= N;
    }
    ck_assert(seen_first && seen_second);
    ck_assert_uint_eq(news, NEW);
    free(cand);
    free(unsure);
    free(ids);
    zp_sparse_destroy(&r.store);
    rows_fini(&r);
}
END_TEST

/* Rows expired between the probe and the push: their records are free
 * (their ids still in them), and the push must make new rows, not update
 * the free records. */
START_TEST(test_check_push_expired)
{
    zp_sparse_opts o = {
        .dim = 2, .optimizer = "adagrad", .lr = 0.1f, .init = ZP_INIT_ZEROS, .ttl_clocks = 1};
    zp_rows r = {.dim = 2};
    char err[256];
    ck_assert_int_eq(zp_sparse_new(&r.store, &o, err, sizeof(err)), 0);
    uint64_t ids[2] = {41, 42};
    create(&r, ids, 2);
    ck_assert_int_eq(zp_rows_check_push(&r, ids, 2), -1);
    ck_assert_uint_eq(zp_sparse_expire(r.store, 10), 2);
    float g[4] = {1, 1, 1, 1};
    ck_assert_uint_eq(zp_sparse_push_probed(r.store, ids, 2, r.cand, g, 1.0f, 10, NULL, NULL, NULL),
                      2);
    ck_assert_uint_eq(version_of(&r, 41), 1);
    ck_assert_uint_eq(version_of(&r, 42), 1);
    zp_sparse_counters c;
    zp_sparse_get_counters(r.store, &c);
    ck_assert_uint_eq(c.rows, 2);
    ck_assert_uint_eq(c.created, 4);
    zp_sparse_destroy(&r.store);
    rows_fini(&r);
}
END_TEST

static int by_low32(const void *a, const void *b)
{
    uint32_t x = (uint32_t)((const uint64_t *)a)[0], y = (uint32_t)((const uint64_t *)b)[0];
    return x < y ? -1 : x > y;
}

/* Two ids whose index hashes share their low 32 bits (the bits a slot
 * keeps), found with the store's private seed as a client cannot. */
static void colliding(const zp_sparse *t, uint64_t *x, uint64_t *y)
{
    enum { M = 400000 };
    uint64_t(*p)[2] = malloc(M * sizeof(*p));
    for (;;) {
        uint64_t base = zp_rng_random64();
        for (size_t i = 0; i < M; i++) {
            p[i][1] = base + i;
            p[i][0] = (uint32_t)zp_sparse_hash_id(p[i][1], t->index_seed);
        }
        qsort(p, M, sizeof(*p), by_low32);
        for (size_t i = 1; i < M; i++)
            if (p[i][0] == p[i - 1][0]) {
                *x = p[i][1];
                *y = p[i - 1][1];
                free(p);
                return;
            }
    }
}

/* Ids with equal 32 hash bits share a candidate: no repeat is reported, and
 * each id's gradient reaches its own row, whether the other one has a row
 * yet or not. */
START_TEST(test_check_push_collision)
{
    zp_rows r = store_rows();
    uint64_t ids[2];
    colliding(r.store, &ids[0], &ids[1]);
    create(&r, &ids[1], 1); /* the first id's probe now stops at this row */
    float g[4] = {1, 1, 1, 1};
    for (int round = 1; round <= 2; round++) {
        ck_assert_int_eq(zp_rows_check_push(&r, ids, 2), -1);
        ck_assert_uint_eq(
            zp_sparse_push_probed(r.store, ids, 2, r.cand, g, 1.0f, round, NULL, NULL, NULL), 2);
        ck_assert_uint_eq(version_of(&r, ids[0]), round); /* created in round 1 */
        ck_assert_uint_eq(version_of(&r, ids[1]), round);
    }
    zp_sparse_destroy(&r.store);
    rows_fini(&r);
}
END_TEST

/* The probe hashes ids ahead of the one it looks up, and never one past
 * the last: ids that end where an unmapped page begins are read by pull,
 * probe and push without a fault. */
START_TEST(test_ids_end_at_page)
{
    enum { NIDS = 20 };
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *mem =
        mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert(mem != MAP_FAILED);
    ck_assert_int_eq(mprotect(mem + page, (size_t)page, PROT_NONE), 0);
    uint64_t *ids = (uint64_t *)(mem + page) - NIDS;
    distinct_ids(ids, NIDS, 3);
    zp_rows r = store_rows();
    float out[NIDS * 2], g[NIDS * 2];
    for (size_t i = 0; i < NIDS * 2; i++)
        g[i] = 1.0f;
    zp_sparse_pull(r.store, ids, NIDS, 0, out, NULL);
    uint32_t cand[NIDS], unsure[NIDS];
    zp_sparse_probe(r.store, ids, NIDS, cand, unsure);
    ck_assert_uint_eq(zp_sparse_push(r.store, ids, NIDS, g, 1.0f, 0, NULL, NULL, NULL), NIDS);
    for (size_t i = 0; i < NIDS; i++)
        ck_assert_uint_eq(version_of(&r, ids[i]), 1);
    zp_sparse_destroy(&r.store);
    rows_fini(&r);
    munmap(mem, 2 * (size_t)page);
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
    tcase_add_test(tc, test_ids_copy_grows_in_place);
    suite_add_tcase(s, tc);
    tc = tcase_create("push");
    tcase_add_test(tc, test_check_push_exact);
    tcase_add_test(tc, test_check_push_collision);
    tcase_add_test(tc, test_probe_narrows);
    tcase_add_test(tc, test_check_push_expired);
    tcase_add_test(tc, test_ids_end_at_page);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
