/*
 * test_sparse_evict.c - server/table/admit.c and evict.c: which ids a
 * sparse table's store admits and which rows it drops.
 *
 * Admission by count (count-min sketch) and by probability; TTL eviction on
 * a drifting id stream against the same stream without TTL; lru and lfu
 * under a row capacity; a memory budget; pinned rows passed over until
 * touched. The store itself is
 * test_sparse.c.
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

/* ------------------------------------------------------------ admission */

/* All rows as (id, version, values) bytes, to compare table states. */
static size_t snapshot_rows(const zp_sparse *t, unsigned char *buf, size_t cap)
{
    uint64_t cur = 0;
    zp_sparse_row row;
    size_t off = 0, dim = zp_sparse_dim(t);
    while (zp_sparse_next(t, &cur, &row)) {
        size_t need = 16 + dim * 4;
        ck_assert(off + need <= cap);
        memcpy(buf + off, &row.id, 8);
        memcpy(buf + off + 8, &row.version, 4);
        memcpy(buf + off + 12, &row.freq, 4);
        memcpy(buf + off + 16, row.values, dim * 4);
        off += need;
    }
    return off;
}

START_TEST(test_admit_count)
{
    zp_sparse_opts o = base_opts("sgd", 4);
    o.admit_count = 3;
    zp_sparse *t = make(&o);
    float out[4], g[4] = {1, 2, 3, 4}, init[4];
    uint64_t id = 0xabcdef;
    uint32_t v;
    zp_sparse_row row;

    /* Background: 2000 ids touched twice each never get a row. */
    for (uint64_t i = 1; i <= 2000; i++) {
        uint64_t x = i * 0x9e3779b97f4a7c15ull;
        zp_sparse_pull(t, &x, 1, 0, out, NULL);
        zp_sparse_pull(t, &x, 1, 0, out, NULL);
    }
    ck_assert_uint_eq(counters(t).rows, 0);
    ck_assert_uint_eq(counters(t).not_admitted, 4000);
    /* One row the others can be compared against. */
    o.admit_count = 0;
    zp_sparse *plain = make(&o);
    zp_sparse_init_row(t, id, init);

    zp_sparse_pull(t, &id, 1, 1, out, &v); /* touch 1 */
    ck_assert(memcmp(out, init, sizeof out) == 0);
    ck_assert_uint_eq(v, 0);
    ck_assert(!zp_sparse_get(t, id, &row));

    static unsigned char before[1 << 16], after[1 << 16];
    size_t nb = snapshot_rows(t, before, sizeof before);
    ck_assert_uint_eq(zp_sparse_push(t, &id, 1, g, 1.0f, 2, NULL, NULL, NULL), 0); /* touch 2 */
    ck_assert(!zp_sparse_get(t, id, &row));
    ck_assert_uint_eq(counters(t).pushes_skipped, 1);
    ck_assert_uint_eq(counters(t).not_admitted, 4002);
    size_t na = snapshot_rows(t, after, sizeof after);
    ck_assert(nb == na && memcmp(before, after, nb) == 0);

    zp_sparse_pull(t, &id, 1, 3, out, &v); /* touch 3: admitted */
    ck_assert(zp_sparse_get(t, id, &row));
    ck_assert(memcmp(row.values, init, sizeof init) == 0);
    ck_assert_uint_eq(row.version, 0);
    ck_assert_uint_eq(row.freq, 1);
    ck_assert_int_eq(row.last_clock, 3);
    ck_assert_uint_eq(counters(t).created, 1);
    ck_assert_uint_eq(counters(t).rows, 1);
    ck_assert_uint_eq(counters(t).not_admitted, 4002);
    ck_assert_uint_eq(zp_sparse_push(t, &id, 1, g, 1.0f, 4, NULL, NULL, NULL), 1);
    ck_assert(zp_sparse_get(t, id, &row));
    ck_assert_uint_eq(row.version, 1);
    ck_assert_float_eq_tol(row.values[3], init[3] - 0.4f, 1e-6f);

    /* A push can be the admitting touch, and duplicates in one pull count. */
    uint64_t id2 = 77, dup[3] = {id2, id2, id2};
    float out3[12];
    zp_sparse_pull(t, dup, 2, 5, out3, NULL);
    ck_assert(!zp_sparse_get(t, id2, &row));
    ck_assert_uint_eq(zp_sparse_push(t, &id2, 1, g, 1.0f, 6, NULL, NULL, NULL), 1);
    ck_assert(zp_sparse_get(t, id2, &row));
    ck_assert_uint_eq(row.version, 1);
    ck_assert_uint_eq(counters(t).rows, 2);

    /* The sketch is fixed memory, counted in bytes. */
    ck_assert_uint_ge(counters(t).bytes, counters(plain).bytes + ((size_t)1 << 20));
    zp_sparse_destroy(&plain);
    zp_sparse_destroy(&t);
}
END_TEST

START_TEST(test_admit_prob)
{
    zp_sparse_opts o = base_opts("sgd", 4);
    o.admit_prob = 0.25;
    zp_sparse *t = make(&o);
    float out[4];
    const uint64_t n = 10000;

    for (uint64_t i = 0; i < n; i++)
        zp_sparse_pull(t, &i, 1, 0, out, NULL);
    zp_sparse_counters c = counters(t);
    /* Binomial(10000, 0.25): mean 2500, sd 43.3; +-5 sd. */
    ck_assert_msg(c.created >= 2283 && c.created <= 2717, "admitted %llu of 10000",
                  (unsigned long long)c.created);
    ck_assert_uint_eq(c.rows, c.created);
    ck_assert_uint_eq(c.not_admitted, n - c.created);
    /* Pushes of ids without rows are skipped or admitted at the same rate. */
    uint64_t before = c.created, applied = 0;
    float g[4] = {1, 1, 1, 1};
    for (uint64_t i = n; i < 2 * n; i++)
        applied += zp_sparse_push(t, &i, 1, g, 1.0f, 1, NULL, NULL, NULL);
    c = counters(t);
    ck_assert_uint_eq(applied, c.created - before);
    ck_assert_uint_eq(c.pushes_skipped, n - applied);
    ck_assert(applied >= 2283 && applied <= 2717);
    zp_sparse_destroy(&t);
}
END_TEST

/* ------------------------------------------------------------ TTL */

#define W_IDS   100 /* ids per clock */
#define W_SHIFT 50  /* the window slides by this much per clock */
#define CLOCKS  120

/* Each clock touches ids [c * W_SHIFT, c * W_SHIFT + W_IDS). Returns the
 * most rows held after any clock. */
static uint64_t drift(zp_sparse *t, uint64_t ttl, uint64_t *rows_mid)
{
    uint64_t ids[W_IDS], max_rows = 0;
    float out[W_IDS * 4], g[W_IDS * 4];
    uint64_t period = ttl / 4 > 1 ? ttl / 4 : 1;

    for (size_t i = 0; i < W_IDS * 4; i++)
        g[i] = 0.01f;
    for (int64_t c = 0; c < CLOCKS; c++) {
        for (int i = 0; i < W_IDS; i++)
            ids[i] = (uint64_t)c * W_SHIFT + (uint64_t)i;
        zp_sparse_pull(t, ids, W_IDS, c, out, NULL);
        zp_sparse_push(t, ids, W_IDS, g, 1.0f, c, NULL, NULL, NULL);
        size_t ev = zp_sparse_expire(t, c);
        zp_sparse_counters k = counters(t);
        if (k.rows > max_rows)
            max_rows = k.rows;
        if (ttl != 0) {
            /* Scans at clocks 0, period, 2 period, ...: right after one,
             * exactly the ids last touched in the last ttl clocks are held. */
            if (c % (int64_t)period == 0 && c >= (int64_t)ttl)
                ck_assert_uint_eq(k.rows, (ttl - 1) * W_SHIFT + W_IDS);
            if (c % (int64_t)period != 0)
                ck_assert_uint_eq(ev, 0);
        }
        ck_assert_uint_eq(k.created, (uint64_t)c * W_SHIFT + W_IDS);
        ck_assert_uint_eq(k.rows, k.created - k.evicted_ttl);
        if (c == CLOCKS / 2)
            *rows_mid = k.rows;
    }
    return max_rows;
}

START_TEST(test_ttl_drift)
{
    const uint64_t ttls[] = {8, 3, 20};
    for (size_t i = 0; i < 3; i++) {
        uint64_t ttl = ttls[i], period = ttl / 4 > 1 ? ttl / 4 : 1, mid;
        zp_sparse_opts o = base_opts("adagrad", 4);
        o.ttl_clocks = ttl;
        zp_sparse *t = make(&o);
        uint64_t max_rows = drift(t, ttl, &mid);
        /* Between scans at most period - 1 more clocks' worth of ids. */
        uint64_t bound = (ttl + period - 2) * W_SHIFT + W_IDS;
        ck_assert_msg(max_rows <= bound, "ttl %llu: %llu rows > bound %llu",
                      (unsigned long long)ttl, (unsigned long long)max_rows,
                      (unsigned long long)bound);
        zp_sparse_counters c = counters(t);
        ck_assert_uint_gt(c.evicted_ttl, (CLOCKS - ttl - period) * W_SHIFT);
        ck_assert_uint_eq(c.evicted_capacity, 0);
        /* An evicted id comes back from its initial values. */
        zp_sparse_row row;
        float init[4], out[4];
        uint64_t id0 = 0;
        ck_assert(!zp_sparse_get(t, id0, &row));
        zp_sparse_pull(t, &id0, 1, CLOCKS, out, NULL);
        zp_sparse_init_row(t, id0, init);
        ck_assert(memcmp(out, init, sizeof out) == 0);
        zp_sparse_destroy(&t);
    }
    /* Without TTL the row count only grows. */
    zp_sparse_opts o = base_opts("adagrad", 4);
    zp_sparse *t = make(&o);
    uint64_t mid, max_rows = drift(t, 0, &mid);
    zp_sparse_counters c = counters(t);
    ck_assert_uint_eq(c.rows, (CLOCKS - 1) * W_SHIFT + W_IDS);
    ck_assert_uint_eq(max_rows, c.rows);
    ck_assert_uint_eq(mid, (CLOCKS / 2) * W_SHIFT + W_IDS);
    ck_assert_uint_eq(c.evicted_ttl, 0);
    ck_assert_uint_eq(zp_sparse_expire(t, 1000000), 0);
    zp_sparse_destroy(&t);
}
END_TEST

/* ------------------------------------------------------------ capacity */

#define CAP  1000
#define HOT  200
#define COLD 50

/* Present ids among [first, first + n). */
static int present(const zp_sparse *t, uint64_t first, int n)
{
    zp_sparse_row row;
    int k = 0;
    for (int i = 0; i < n; i++)
        k += zp_sparse_get(t, first + (uint64_t)i, &row);
    return k;
}

/* Hot ids 0..HOT-1: touched every clock (recent set) in phase "recent", or
 * 20 times in the first 20 clocks only (frequent set) otherwise; then a
 * stream of COLD new ids per clock, each touched once. */
static zp_sparse *capacity_run(zp_evict_policy pol, bool recent, int clocks)
{
    zp_sparse_opts o = base_opts("sgd", 4);
    o.capacity_rows = CAP;
    o.evict = pol;
    zp_sparse *t = make(&o);
    uint64_t ids[HOT];
    float out[HOT * 4];
    uint64_t next_cold = 1000000;

    for (int i = 0; i < HOT; i++)
        ids[i] = (uint64_t)i;
    for (int c = 0; c < clocks; c++) {
        if (recent || c < 20)
            zp_sparse_pull(t, ids, HOT, c, out, NULL);
        if (c >= 20 || recent) {
            uint64_t cold[COLD];
            for (int i = 0; i < COLD; i++)
                cold[i] = next_cold++;
            zp_sparse_pull(t, cold, COLD, c, out, NULL);
        }
        zp_sparse_counters k = counters(t);
        ck_assert_uint_le(k.rows, CAP);
        ck_assert_uint_eq(k.rows, k.created - k.evicted_capacity);
    }
    ck_assert_uint_eq(counters(t).rows, CAP);
    ck_assert_uint_gt(counters(t).evicted_capacity, 0);
    return t;
}

START_TEST(test_capacity_lru_lfu)
{
    /* lru: the set touched every clock survives. */
    zp_sparse *t = capacity_run(ZP_EVICT_LRU, true, 200);
    int survived = 0;
    zp_sparse_row row;
    for (uint64_t i = 0; i < HOT; i++)
        survived += zp_sparse_get(t, i, &row) && row.freq == 200;
    ck_assert_msg(survived >= HOT * 95 / 100, "lru: %d of %d hot rows never evicted", survived,
                  HOT);
    zp_sparse_destroy(&t);

    /* lfu: the set touched 20 times long ago survives a stream of
     * once-touched ids five times the capacity... */
    t = capacity_run(ZP_EVICT_LFU, false, 120);
    survived = present(t, 0, HOT);
    ck_assert_msg(survived >= HOT * 95 / 100, "lfu: %d of %d frequent rows kept", survived, HOT);
    ck_assert_uint_eq(counters(t).created, HOT + 100 * COLD);
    zp_sparse_destroy(&t);
    /* ...which lru, by design, evicts. */
    t = capacity_run(ZP_EVICT_LRU, false, 120);
    survived = present(t, 0, HOT);
    ck_assert_msg(survived <= HOT / 10, "lru: %d of %d stale frequent rows kept", survived, HOT);
    zp_sparse_destroy(&t);

    /* put (restore) respects the capacity too. */
    zp_sparse_opts o = base_opts("adam", 4);
    o.capacity_rows = 10;
    t = make(&o);
    float v[4] = {1, 2, 3, 4}, s[8] = {0};
    for (uint64_t id = 0; id < 100; id++) {
        zp_sparse_row r = {
            .id = id, .version = 1, .freq = 1, .last_clock = (int64_t)id, .values = v, .state = s};
        zp_sparse_put(t, &r);
        ck_assert_uint_le(counters(t).rows, 10);
    }
    ck_assert_uint_eq(counters(t).rows, 10);
    ck_assert_uint_eq(counters(t).evicted_capacity, 90);
    zp_sparse_destroy(&t);
}
END_TEST

/* A pinned row (made hot for a pull that waits for its cold rows) is
 * passed over by eviction under a capacity, however cold, until it is
 * touched; then it goes like any other. The first row of the table is
 * pinned first: the pins' bitmap grows from nothing to cover it. */
START_TEST(test_pinned_passed_over)
{
    zp_sparse_opts o = base_opts("sgd", 4);
    o.capacity_rows = 8;
    o.evict = ZP_EVICT_LRU;
    zp_sparse *t = make(&o);
    float out[4];
    uint64_t id = 0;
    for (; id < 8; id++)
        zp_sparse_pull(t, &id, 1, (int64_t)id, out, NULL);
    ck_assert(zp_sparse_pin(t, 0));    /* the coldest row */
    ck_assert(!zp_sparse_pin(t, 999)); /* not hot: nothing pinned */
    int64_t clock = 10;
    for (int i = 0; i < 50; i++, id++)
        zp_sparse_pull(t, &id, 1, clock++, out, NULL);
    ck_assert_uint_eq(counters(t).evicted_capacity, 50);
    ck_assert_msg(zp_sparse_has(t, 0), "a pinned row evicted");
    uint64_t zero = 0;
    zp_sparse_pull(t, &zero, 1, clock++, out, NULL); /* touched: no longer pinned */
    for (int i = 0; i < 50; i++, id++)
        zp_sparse_pull(t, &id, 1, clock++, out, NULL);
    ck_assert_msg(!zp_sparse_has(t, 0), "a touched row kept pinned");
    zp_sparse_destroy(&t);
}
END_TEST

START_TEST(test_memory_budget)
{
    const uint64_t budget = 2u << 20;
    zp_sparse_opts o = base_opts("adam", 16);
    o.memory_budget = budget;
    o.evict = ZP_EVICT_LFU;
    zp_sparse *t = make(&o);
    uint64_t ids[256];
    float out[256 * 16];

    for (uint64_t b = 0; b < 400; b++) {
        for (int i = 0; i < 256; i++)
            ids[i] = b * 256 + (uint64_t)i;
        zp_sparse_pull(t, ids, 256, (int64_t)b, out, NULL);
        zp_sparse_counters c = counters(t);
        ck_assert_msg(c.bytes <= budget, "%llu bytes held over a budget of %llu",
                      (unsigned long long)c.bytes, (unsigned long long)budget);
    }
    zp_sparse_counters c = counters(t);
    ck_assert_uint_eq(c.bytes_per_row, 24 + 16 * 4 * 3);
    /* The budget is used: rows take at least 3/4 of it. */
    ck_assert_msg(c.rows * c.bytes_per_row >= budget * 3 / 4, "only %llu rows in the budget",
                  (unsigned long long)c.rows);
    ck_assert_uint_eq(c.rows, c.created - c.evicted_capacity);
    ck_assert_uint_gt(c.evicted_capacity, 0);
    zp_sparse_destroy(&t);

    /* Many budgets with small rows: somewhere the next index doubling, not
     * the next chunk, is what would cross the budget. */
    for (uint64_t bud = 64u << 10; bud <= 512u << 10; bud += 8u << 10) {
        zp_sparse_opts p = base_opts("sgd", 2);
        p.memory_budget = bud;
        t = make(&p);
        uint64_t n = 2 * bud / 40;
        for (uint64_t id = 0; id < n; id += 64) {
            for (int i = 0; i < 64; i++)
                ids[i] = id + (uint64_t)i;
            zp_sparse_pull(t, ids, 64, (int64_t)id, out, NULL);
            ck_assert_msg(counters(t).bytes <= bud, "%llu bytes held over a budget of %llu",
                          (unsigned long long)counters(t).bytes, (unsigned long long)bud);
        }
        ck_assert_uint_gt(counters(t).evicted_capacity, 0);
        zp_sparse_destroy(&t);
    }

    /* A budget below the fixed overhead is refused, naming the field. */
    char err[256];
    o.memory_budget = 4096;
    o.admit_count = 2;
    ck_assert_int_eq(zp_sparse_new(&t, &o, err, sizeof err), ZEPS_EINVAL);
    ck_assert_msg(strstr(err, "memory_budget") != NULL, "%s", err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sparse_evict");
    ZT_SPARSE_ADD(s, test_admit_count);
    ZT_SPARSE_ADD(s, test_admit_prob);
    ZT_SPARSE_ADD(s, test_ttl_drift);
    ZT_SPARSE_ADD(s, test_capacity_lru_lfu);
    ZT_SPARSE_ADD(s, test_memory_budget);
    ZT_SPARSE_ADD(s, test_pinned_passed_over);
    return zt_run_suite(s);
}
