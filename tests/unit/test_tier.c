/*
 * test_tier.c - a sparse table's cold tier (server/tier/, RocksDB, real
 * files): rows evicted under a capacity are demoted and promoted back
 * exactly, so a tiered store and an all-in-RAM one given the same requests
 * answer the same bits at every step and end with the same rows, optimizer
 * state, versions and touch counts; a tier folder that is missing, takes
 * no file, holds something else or another table's tier is refused; a
 * tier's rows scan in id order, each once; a promoted row's record left in
 * the tier goes when the row is dropped for good; a record read off the
 * loop is not installed over a row made hot meanwhile (at index slot 0 too);
 * ids never given to the tier are not read.
 */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "scratch.h"
#include "seen.h"
#include "rowindex.h" /* the slot an id sits at */
#include "sparse.h"
#include "sparse_fixture.h"
#include "tier.h"
#include "zeps_errors.h"

#define NIDS  2000
#define BATCH 64

static zp_tier_where where_of(const char *dir, const char *name, const zp_sparse *t)
{
    zp_tier_where w = {.dir = dir,
                       .table = name,
                       .shard = 0,
                       .nshards = 1,
                       .dim = zp_sparse_dim(t),
                       .spv = (uint32_t)zp_sparse_state_per_value(t),
                       .rec = zp_sparse_record_bytes(t)};
    return w;
}

static size_t warm_rows; /* the tiers' buffers of unwritten rows (0: their default) */

static zp_tier *open_tier(const char *dir, const char *name, zp_sparse *t)
{
    char err[2048] = "";
    zp_tier *tier = NULL;
    zp_tier_where w = where_of(dir, name, t);
    w.warm_rows = warm_rows;
    ck_assert_msg(zp_tier_open(&tier, &w, err, sizeof err) == 0, "zp_tier_open: %s", err);
    return tier;
}

/* Row `id` of a tiered store, hot or cold (values into rec), or false. */
static bool find_row(zp_sparse *t, zp_tier *tier, uint64_t id, void *rec, zp_sparse_row *row)
{
    if (zp_sparse_get(t, id, row))
        return true;
    if (tier == NULL || zp_tier_fetch(tier, id, rec) != 1)
        return false;
    zp_sparse_record_row(t, rec, row);
    return true;
}

/* A batch of distinct ids, skewed to small ones (hot), from state x. */
static size_t draw(uint64_t *x, uint64_t *ids)
{
    size_t n = 0;
    while (n < BATCH) {
        *x = *x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(*x >> 11) / 9007199254740992.0;
        uint64_t id = (uint64_t)(pow(u, 3.0) * NIDS) * 7919 + 3;
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = ids[i] == id;
        if (!dup)
            ids[n++] = id;
    }
    return n;
}

/* The same requests to a store all in RAM and to one holding a tenth of
 * the ids hot: equal pulls at every step, equal rows at the end. */
static void exact_run(const char *optim, zp_evict_policy ev, uint64_t ttl)
{
    zp_sparse_opts o = base_opts(optim, 8);
    o.lead_cols = 1;
    o.lead_lr = 0.05f;
    o.ttl_clocks = ttl;
    zp_sparse *ram = make(&o);
    o.capacity_rows = NIDS / 10;
    o.evict = ev;
    zp_sparse *hot = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "tier"), 0);
    zp_tier *tier = open_tier(dir, "emb", hot);
    zp_sparse_set_cold(hot, tier);

    uint64_t ids[BATCH], x = 12345;
    float a[BATCH * 8], b[BATCH * 8], g[BATCH * 8];
    uint32_t va[BATCH], vb[BATCH];
    for (int64_t step = 0; step < 300; step++) {
        size_t n = draw(&x, ids);
        zp_sparse_pull(ram, ids, n, step, a, va);
        zp_sparse_pull(hot, ids, n, step, b, vb);
        ck_assert_msg(memcmp(a, b, sizeof a) == 0 && memcmp(va, vb, sizeof va) == 0,
                      "step %lld: the tiered store pulled other bits", (long long)step);
        for (size_t i = 0; i < n * 8; i++)
            g[i] = 0.5f * a[i] + (float)((ids[i / 8] + i) % 7) * 0.01f - 0.03f;
        zp_sparse_push(ram, ids, n, g, 1.0f, step, NULL, NULL, NULL);
        zp_sparse_push(hot, ids, n, g, 1.0f, step, NULL, NULL, NULL);
        zp_sparse_expire(ram, step);
        zp_sparse_expire(hot, step);
    }
    zp_tier_counters tc;
    zp_tier_get_counters(tier, &tc);
    ck_assert_uint_gt(tc.demotions, 1000);
    ck_assert_uint_gt(tc.promotions, 500);
    ck_assert_uint_le(counters(hot).rows, NIDS / 10);
    if (ttl == 0)
        ck_assert_uint_eq(counters(hot).rows + tc.rows, counters(ram).rows);

    size_t rec = zp_sparse_record_bytes(hot),
           vals = 8 * (1 + (size_t)zp_sparse_state_per_value(hot));
    void *buf = aligned_alloc(8, (rec + 7) / 8 * 8);
    size_t held = 0;
    for (uint64_t k = 0; k < NIDS; k++) {
        uint64_t id = k * 7919 + 3;
        zp_sparse_row r1, r2;
        bool in1 = zp_sparse_get(ram, id, &r1), in2 = find_row(hot, tier, id, buf, &r2);
        /* a cold row past its TTL stays on disk until touched: the scans
         * ran at steps 0, ttl/4, ..., the last at 290 */
        if (ttl && !in1 && in2 && 290 - r2.last_clock >= (int64_t)ttl)
            continue;
        ck_assert_msg(in1 == in2, "id %llu: in RAM %d, tiered %d", (unsigned long long)id, in1,
                      in2);
        if (!in1)
            continue;
        held++;
        ck_assert_uint_eq(r1.version, r2.version);
        ck_assert_uint_eq(r1.freq, r2.freq);
        ck_assert_int_eq(r1.last_clock, r2.last_clock);
        ck_assert_msg(memcmp(r1.values, r2.values, 8 * 4) == 0 &&
                          memcmp(r1.state, r2.state, (vals - 8) * 4) == 0,
                      "id %llu: other values or optimizer state", (unsigned long long)id);
    }
    ck_assert_uint_gt(held, NIDS / 4);
    free(buf);
    zp_sparse_destroy(&hot);
    zp_tier_close(&tier);
    zp_sparse_destroy(&ram);
}

START_TEST(test_exact_adagrad_lru)
{
    exact_run("adagrad", ZP_EVICT_LRU, 0);
}
END_TEST

START_TEST(test_exact_adam_lfu)
{
    exact_run("adam", ZP_EVICT_LFU, 0);
}
END_TEST

/* With a TTL, a cold row is dropped when touched after the scan that
 * would have dropped it in RAM: the same ids restart from their init. */
START_TEST(test_exact_ftrl_ttl)
{
    exact_run("ftrl", ZP_EVICT_LRU, 40);
}
END_TEST

/* Buffers of 16 unwritten rows (warm.h): the writer thread writes a
 * batch every 16 demotions or forgets, while rows come back from the
 * buffers, from a batch being written and from the store. */
START_TEST(test_exact_small_buffers)
{
    warm_rows = 16;
    exact_run("adagrad", ZP_EVICT_LRU, 0);
    exact_run("ftrl", ZP_EVICT_LFU, 40);
    warm_rows = 0;
}
END_TEST

/* A row demoted is held unwritten (and read from there) until its batch
 * is written; the newest write of an id wins wherever it is (a buffer
 * being written, the one filling, the store); a forget held is "not in
 * the tier"; a scan sees every write. */
START_TEST(test_held_rows)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "held"), 0);
    warm_rows = 4;
    zp_tier *tier = open_tier(dir, "h", t);
    warm_rows = 0;
    size_t rec = zp_sparse_record_bytes(t);
    uint8_t *one = calloc(1, rec), *got = calloc(1, rec);
    for (uint64_t k = 0; k < 64; k++) { /* id 7 written at k = 7 and 12, 8 deleted at 13 */
        uint64_t id = k == 12 ? 7 : k, v = 1000 + k;
        memcpy(one, &v, 8);
        if (k == 13)
            ck_assert_int_eq(zp_tier_forget(tier, 8, true), 0);
        else
            ck_assert_int_eq(zp_tier_demote(tier, id, one), 0);
    }
    memcpy(one, &(uint64_t){1063}, 8);
    ck_assert_int_eq(zp_tier_held(tier, 63, got), 1); /* the buffer filling */
    ck_assert_int_eq(memcmp(got, one, rec), 0);
    ck_assert_int_eq(zp_tier_held(tier, 3, got), 0); /* written long ago */
    for (uint64_t id = 0; id < 64; id++) {
        uint64_t want = id == 7 ? 1012 : 1000 + id;
        memset(got, 0, rec);
        int r = zp_tier_fetch(tier, id, got);
        if (id == 8 || id == 12 || id == 13) {
            ck_assert_msg(r == 0, "id %llu: %d", (unsigned long long)id, r);
            continue;
        }
        ck_assert_msg(r == 1 && memcmp(got, &want, 8) == 0, "id %llu: %d, %llu",
                      (unsigned long long)id, r, (unsigned long long)*(uint64_t *)got);
    }
    uint64_t pos = 0, n = 0;
    uint8_t *all = calloc(64, rec);
    ck_assert_int_eq(zp_tier_scan(tier, &pos, 64, all), 61);
    for (uint64_t i = 0; i < 61; i++) {
        uint64_t v;
        memcpy(&v, all + i * rec, 8);
        n += v == 1012;
    }
    ck_assert_uint_eq(n, 1); /* id 7 once, its newest record */
    free(all);
    free(one);
    free(got);
    zp_tier_close(&tier);
    zp_sparse_destroy(&t);
}
END_TEST

/* Ids the tier was never given are not read (its filter of the ids given,
 * seen.h: counted as unseen), across filters as it grows (200,000 ids:
 * three of them), while every id given is still found, from the buffers
 * and from RocksDB; with a memory_budget there is no filter (every id
 * may be there: RocksDB's filters decide). */
START_TEST(test_new_ids_unseen)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "unseen"), 0);
    zp_tier *tier = open_tier(dir, "u", t);
    size_t rec = zp_sparse_record_bytes(t);
    uint8_t *one = calloc(1, rec), *got = calloc(1, rec);
    enum { GIVEN = 200000, NEW = 20000 };
    for (uint64_t id = 1; id <= GIVEN; id++) {
        memcpy(one, &id, 8);
        ck_assert_int_eq(zp_tier_demote(tier, id * 7919, one), 0);
    }
    for (uint64_t id = 1; id <= GIVEN; id += 97) {
        ck_assert_msg(zp_tier_fetch(tier, id * 7919, got) == 1, "id %llu lost",
                      (unsigned long long)id);
        ck_assert_int_eq(memcmp(got, &id, 8), 0);
    }
    zp_tier_counters c0, c1;
    zp_tier_get_counters(tier, &c0);
    int may = 0;
    for (uint64_t k = 0; k < NEW; k++) {
        ck_assert_int_eq(zp_tier_fetch(tier, k * 7919 + 1, got), 0);
        may += zp_tier_may_hold(tier, k * 7919 + 1);
    }
    zp_tier_get_counters(tier, &c1);
    printf("tier filter: %d of %d new ids not ruled out (3 filters, %d ids given)\n", may, NEW,
           GIVEN);
    ck_assert_msg(may < NEW / 20, "%d of %d new ids may be there", may, NEW);
    ck_assert_uint_ge(c1.unseen - c0.unseen, NEW - NEW / 20);
    zp_tier_close(&tier);

    zp_tier_where w = where_of(dir, "b", t);
    w.mem = 16 << 20; /* a memory_budget's share */
    char err[2048] = "";
    ck_assert_msg(zp_tier_open(&tier, &w, err, sizeof err) == 0, "%s", err);
    ck_assert(zp_tier_may_hold(tier, 12345));
    zp_tier_close(&tier);
    free(one);
    free(got);
    zp_sparse_destroy(&t);
}
END_TEST

/* The filter of ids given grows with the ids, not with how often each is
 * given (a row demoted again and again): 100,000 ids given 20 times take
 * what they take given once. */
START_TEST(test_seen_grows_with_ids)
{
    zp_seen *s;
    zp_seen_new(&s);
    for (uint64_t id = 0; id < 100000; id++)
        zp_seen_add(s, id * 31);
    uint64_t once = zp_seen_bytes(s);
    for (int round = 0; round < 20; round++)
        for (uint64_t id = 0; id < 100000; id++)
            zp_seen_add(s, id * 31);
    ck_assert_uint_eq(zp_seen_bytes(s), once);
    for (uint64_t id = 0; id < 100000; id++)
        ck_assert(zp_seen_may(s, id * 31));
    zp_seen_free(&s);
    ck_assert_ptr_null(s);
}
END_TEST

static void expect_refused(const char *dir, const char *what)
{
    char err[2048] = "";
    int rc = zp_tier_dir_check(dir, err, sizeof err);
    ck_assert_int_eq(rc, ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "tier_dir") && strstr(err, what), "%s", err);
}

START_TEST(test_dir_checked)
{
    char dir[512], file[512], missing[600];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "tierdir"), 0);
    ck_assert_int_eq(zp_tier_dir_check(dir, NULL, 0), 0);
    snprintf(missing, sizeof missing, "%s/not-mounted", dir);
    expect_refused(missing, "No such file");
    ck_assert_int_ne(access(missing, F_OK), 0); /* never made */
    ck_assert_int_eq(zt_scratch_file(file, sizeof file, "tierfile"), 0);
    expect_refused(file, "not a folder");
    expect_refused("/proc", "takes no file"); /* no file is made there, even by root */
}
END_TEST

START_TEST(test_foreign_refused)
{
    zp_sparse_opts o = base_opts("adagrad", 4);
    o.capacity_rows = 64;
    zp_sparse *t = make(&o);
    char dir[512], path[700], err[2048] = "";
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "foreign"), 0);
    zp_tier *tier = NULL;
    zp_tier_where w = where_of(dir, "emb", t);

    /* a folder of something else, under the tier's name: left alone */
    snprintf(path, sizeof path, "%s/tier-emb-shard-0", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/tier-emb-shard-0/precious", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    ck_assert_int_eq(zp_tier_open(&tier, &w, err, sizeof err), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "not a zeps cold tier"), "%s", err);
    ck_assert_int_eq(access(path, F_OK), 0);

    /* another table's tier moved under this one's name */
    w.table = "other";
    tier = open_tier(dir, "other", t);
    static const char zero[4096];
    ck_assert_int_eq(zp_tier_demote(tier, 7, zero), 0);
    zp_tier_close(&tier);
    char from[700], to[700];
    snprintf(from, sizeof from, "%s/tier-other-shard-0", dir);
    snprintf(to, sizeof to, "%s/tier-emb2-shard-0", dir);
    ck_assert_int_eq(rename(from, to), 0);
    w.table = "emb2";
    ck_assert_int_eq(zp_tier_open(&tier, &w, err, sizeof err), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "table other") && strstr(err, "'emb2'"), "%s", err);

    /* this table's own leftover (no snapshot restored it): emptied */
    ck_assert_int_eq(rename(to, from), 0);
    tier = open_tier(dir, "other", t);
    char rec[4096];
    ck_assert_int_eq(zp_tier_fetch(tier, 7, rec), 0);
    zp_tier_close(&tier);
    zp_sparse_destroy(&t);
}
END_TEST

START_TEST(test_scan_pages)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "scan"), 0);
    zp_tier *tier = open_tier(dir, "s", t);
    size_t rec = zp_sparse_record_bytes(t);
    uint8_t *one = calloc(1, rec), *page = calloc(100, rec);
    for (uint64_t k = 0; k < 1000; k++) {
        uint64_t id = (k * 0x9e3779b97f4a7c15ull) | 1;
        memcpy(one, &id, 8);
        ck_assert_int_eq(zp_tier_demote(tier, id, one), 0);
    }
    uint64_t pos = 0, last = 0, seen = 0;
    while (pos != UINT64_MAX) {
        int64_t n = zp_tier_scan(tier, &pos, 100, page);
        ck_assert_int_ge(n, 0);
        for (int64_t i = 0; i < n; i++) {
            uint64_t id;
            memcpy(&id, page + (size_t)i * rec, 8);
            ck_assert_msg(seen == 0 || id > last, "ids out of order or repeated");
            last = id;
            seen++;
        }
    }
    ck_assert_uint_eq(seen, 1000);
    pos = 950; /* a position not continued: from the start, skipped to it */
    ck_assert_int_eq(zp_tier_scan(tier, &pos, 100, page), 50);
    ck_assert_uint_eq(pos, UINT64_MAX);
    free(one);
    free(page);
    zp_tier_close(&tier);
    zp_sparse_destroy(&t);
}
END_TEST

/* A checkpoint taken with rows still in RocksDB's write buffer holds them
 * all; a restore from it replaces what the tier's folder held. */
START_TEST(test_checkpoint_restore)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    char dir[512], cp[700];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "ckpt"), 0);
    snprintf(cp, sizeof cp, "%s/checkpoint", dir);
    zp_tier *tier = open_tier(dir, "c", t);
    size_t rec = zp_sparse_record_bytes(t);
    uint8_t *one = calloc(1, rec);
    for (uint64_t id = 1; id <= 500; id++) {
        memcpy(one, &id, 8);
        ck_assert_int_eq(zp_tier_demote(tier, id, one), 0);
    }
    char err[2048] = "";
    ck_assert_msg(zp_tier_checkpoint(tier, cp, err, sizeof err) == 0, "%s", err);
    for (uint64_t id = 501; id <= 600; id++) { /* after the cut: not restored */
        memcpy(one, &id, 8);
        ck_assert_int_eq(zp_tier_demote(tier, id, one), 0);
    }
    zp_tier_close(&tier);
    zp_tier_where w = where_of(dir, "c", t);
    ck_assert_msg(zp_tier_restore(&tier, &w, cp, err, sizeof err) == 0, "%s", err);
    zp_tier_counters c;
    zp_tier_get_counters(tier, &c);
    ck_assert_uint_eq(c.rows, 500);
    ck_assert_int_eq(zp_tier_fetch(tier, 500, one), 1);
    ck_assert_int_eq(zp_tier_fetch(tier, 501, one), 0);
    zp_tier_close(&tier);
    free(one);
    zp_sparse_destroy(&t);
}
END_TEST

/* A promotion leaves the row's record in the tier (out of date, not
 * deleted); when the hot row is then dropped for good (TTL), that copy
 * goes too: the id is in neither tier, the tier counts no row for it, and
 * its next touch makes a new row. */
START_TEST(test_ttl_drops_copy)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    o.capacity_rows = 1;
    o.ttl_clocks = 4;
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "copy"), 0);
    zp_tier *tier = open_tier(dir, "copy", t);
    zp_sparse_set_cold(t, tier);
    uint64_t a = 11, b = 22;
    float out[2];
    zp_sparse_pull(t, &a, 1, 0, out, NULL);
    zp_sparse_pull(t, &b, 1, 0, out, NULL); /* a demoted */
    zp_sparse_pull(t, &a, 1, 1, out, NULL); /* a promoted (its record kept), b demoted */
    zp_tier_counters c;
    zp_tier_get_counters(tier, &c);
    ck_assert_uint_eq(c.promotions, 1);
    ck_assert_uint_eq(c.rows, 1); /* b; a's old record is no cold row */
    ck_assert(zp_sparse_has(t, a));
    zp_sparse_expire(t, 10); /* a, hot, untouched for 9 clocks: dropped with its copy */
    ck_assert(!zp_sparse_has(t, a));
    size_t rec = zp_sparse_record_bytes(t);
    void *buf = aligned_alloc(8, (rec + 7) / 8 * 8);
    ck_assert_int_eq(zp_tier_fetch(tier, a, buf), 0);
    ck_assert_int_eq(zp_tier_fetch(tier, b, buf), 1);
    zp_tier_get_counters(tier, &c);
    ck_assert_uint_eq(c.rows, 1);
    uint64_t ttl_before = counters(t).evicted_ttl;
    zp_sparse_pull(t, &a, 1, 11, out, NULL); /* a new row: no second TTL drop */
    ck_assert_uint_eq(counters(t).evicted_ttl, ttl_before);
    ck_assert_uint_eq(counters(t).created, 3);
    free(buf);
    zp_sparse_destroy(&t);
    zp_tier_close(&tier);
}
END_TEST

/* While reads run off the loop, every id written or deleted is noted
 * (the set grows past its first 1,024 slots, ids colliding in it), the
 * ids noted and only those are touched, and the last read's end forgets
 * them: a record read meanwhile is not handed out stale. */
START_TEST(test_touched_while_read)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "touched"), 0);
    zp_tier *tier = open_tier(dir, "n", t);
    uint8_t *one = calloc(1, zp_sparse_record_bytes(t));
    ck_assert_int_eq(zp_tier_demote(tier, 1, one), 0); /* no read in flight: not noted */
    zp_tier_read_begin(tier);
    zp_tier_read_begin(tier);
    ck_assert(!zp_tier_touched(tier, 1));
    for (uint64_t id = 1000; id < 3000; id += 2) {
        memcpy(one, &id, 8);
        ck_assert_int_eq(zp_tier_demote(tier, id, one), 0);
    }
    ck_assert_int_eq(zp_tier_forget(tier, 1000, true), 0);
    ck_assert_int_eq(zp_tier_demote(tier, 1000, one), 0); /* noted twice: once in the set */
    for (uint64_t id = 998; id < 3002; id++)
        ck_assert_msg(zp_tier_touched(tier, id) == (id % 2 == 0 && id >= 1000 && id < 3000),
                      "id %llu", (unsigned long long)id);
    ck_assert(!zp_tier_touched(tier, 1));
    zp_tier_read_end(tier, 3);
    ck_assert(zp_tier_touched(tier, 2000)); /* one read still runs */
    zp_tier_read_end(tier, 3);
    ck_assert(!zp_tier_touched(tier, 2000));
    zp_tier_counters c;
    zp_tier_get_counters(tier, &c);
    ck_assert_uint_eq(c.fetched, 6);
    /* closed while a read runs: that read fails, and its end frees the tier */
    zp_tier_read_begin(tier);
    zp_tier *running = tier;
    zp_tier_close(&tier);
    ck_assert_ptr_null(tier);
    uint64_t id = 2000;
    bool found = true;
    char err[256] = "";
    ck_assert_int_eq(zp_tier_read_many(running, &id, 1, one, &found, err, sizeof err),
                     ZEPS_ECLOSED);
    ck_assert_msg(strstr(err, "closed"), "%s", err);
    zp_tier_read_end(running, 1);
    free(one);
    zp_sparse_destroy(&t);
}
END_TEST

/* A cold record read off the loop is installed only if its row is not hot
 * meanwhile, wherever the hot row sits in the index (slot 0 too): a hot
 * row keeps its values and stays one row; an id not hot takes the record. */
START_TEST(test_install_hot_at_slot_zero)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "install"), 0);
    zp_tier *tier = open_tier(dir, "install", t);
    zp_sparse_set_cold(t, tier);
    uint64_t id = 1, other = 0;
    while ((zp_rowindex_hash(t, id) & (t->icap - 1)) != 0)
        id++;
    float hot[2], out[2];
    zp_sparse_pull(t, &id, 1, 1, hot, NULL);
    ck_assert_int_eq(zp_rowindex_find(t, id, zp_rowindex_hash(t, id)), 0);
    size_t bytes = zp_sparse_record_bytes(t);
    void *rec = aligned_alloc(8, (bytes + 7) / 8 * 8);
    memset(rec, 0, bytes);
    memcpy(rec, &id, 8);
    zp_sparse_row r;
    zp_sparse_record_row(t, rec, &r);
    r.values[0] = r.values[1] = 100.0f;
    ck_assert_int_eq(zp_sparse_install(t, id, rec), 0);
    ck_assert_uint_eq(counters(t).rows, 1);
    zp_sparse_pull(t, &id, 1, 2, out, NULL);
    ck_assert_mem_eq(out, hot, sizeof hot);
    ck_assert_uint_eq(counters(t).rows, 1);
    other = id + 1; /* not hot: made hot from the record */
    memcpy(rec, &other, 8);
    ck_assert_int_eq(zp_sparse_install(t, other, rec), 1);
    zp_sparse_pull(t, &other, 1, 2, out, NULL);
    ck_assert(out[0] == 100.0f && out[1] == 100.0f);
    ck_assert_uint_eq(counters(t).rows, 2);
    free(rec);
    zp_sparse_destroy(&t);
    zp_tier_close(&tier);
}
END_TEST

/* A full disk (a tmpfs, root only; skipped otherwise): with less free
 * than a tier keeps free it is refused at DECLARE; on 100 MiB, demotions
 * go on until the free room falls under it, then the tier stops before
 * RocksDB meets a full disk (which aborts Debian's build), naming its
 * folder and the room, and no row leaves the hot tier any more. */
START_TEST(test_full_disk)
{
    if (geteuid() != 0) {
        printf("test_full_disk: skipped (mounting a small tmpfs needs root)\n");
        return;
    }
    char dir[512], cmd[1200];
    zt_scratch_path(dir, sizeof dir, "full-disk"); /* full_unmount's */
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=48m tmpfs '%s'", dir);
    if (system(cmd) != 0) {
        printf("test_full_disk: skipped (no tmpfs mount here)\n");
        return;
    }
    zp_sparse_opts o = base_opts("adam", 64);
    o.capacity_rows = 256;
    zp_sparse *t = make(&o);
    /* 48 MiB free, under the 64 MiB a tier keeps free: refused at once */
    char err[2048] = "";
    zp_tier *tier = NULL;
    zp_tier_where w = where_of(dir, "full", t);
    ck_assert_int_eq(zp_tier_open(&tier, &w, err, sizeof err), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "disk is full") && strstr(err, dir), "%s", err);
    snprintf(cmd, sizeof cmd, "mount -o remount,size=100m '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    tier = open_tier(dir, "full", t);
    zp_sparse_set_cold(t, tier);
    float out[64 * 64];
    uint64_t ids[64], made = 0;
    for (uint64_t k = 0; k < 200000 && zp_tier_error(tier) == NULL; k += 64) {
        for (int i = 0; i < 64; i++)
            ids[i] = k + (uint64_t)i;
        zp_sparse_pull(t, ids, 64, 0, out, NULL);
        made = k + 64;
    }
    const char *why = zp_tier_error(tier);
    ck_assert_msg(why != NULL, "no failure after %llu rows on a 100 MiB disk",
                  (unsigned long long)made);
    ck_assert_msg(strstr(why, dir) && strstr(why, "disk is full"), "%s", why);
    zp_tier_counters c;
    zp_tier_get_counters(tier, &c);
    uint64_t hot = counters(t).rows;
    ck_assert_uint_eq(hot + c.rows, counters(t).created); /* every row is somewhere */
    for (int i = 0; i < 64; i++)
        ids[i] = 900000000 + (uint64_t)i;
    zp_sparse_pull(t, ids, 64, 0, out, NULL); /* new ids get no row: none is evicted */
    ck_assert_uint_eq(counters(t).rows, hot);
    zp_sparse_destroy(&t);
    zp_tier_close(&tier);
    snprintf(cmd, sizeof cmd, "umount '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* In the runner's process after test_full_disk, passed or failed (a
 * failed assertion ends the test's child before its umount): the scratch
 * root can then be removed. */
static void full_unmount(void)
{
    char dir[512], cmd[1200];
    zt_scratch_path(dir, sizeof dir, "full-disk");
    snprintf(cmd, sizeof cmd, "umount -l '%s' 2>/dev/null", dir);
    if (system(cmd) != 0) { /* not mounted: nothing to do */
    }
}

int main(void)
{
    Suite *s = suite_create("tier");
    ZT_SPARSE_ADD(s, test_exact_adagrad_lru);
    ZT_SPARSE_ADD(s, test_exact_adam_lfu);
    ZT_SPARSE_ADD(s, test_exact_ftrl_ttl);
    ZT_SPARSE_ADD(s, test_exact_small_buffers);
    ZT_SPARSE_ADD(s, test_held_rows);
    ZT_SPARSE_ADD(s, test_new_ids_unseen);
    ZT_SPARSE_ADD(s, test_seen_grows_with_ids);
    ZT_SPARSE_ADD(s, test_dir_checked);
    ZT_SPARSE_ADD(s, test_foreign_refused);
    ZT_SPARSE_ADD(s, test_scan_pages);
    ZT_SPARSE_ADD(s, test_checkpoint_restore);
    ZT_SPARSE_ADD(s, test_ttl_drops_copy);
    ZT_SPARSE_ADD(s, test_touched_while_read);
    ZT_SPARSE_ADD(s, test_install_hot_at_slot_zero);
    TCase *full = tcase_create("full_disk");
    tcase_set_timeout(full, 120);
    tcase_add_unchecked_fixture(full, NULL, full_unmount);
    tcase_add_test(full, test_full_disk);
    suite_add_tcase(s, full);
    return zt_run_suite(s);
}
