/*
 * test_pins.c - what a tiered sparse store keeps for the pulls that waited
 * for their cold rows (server/table/pins.c): the ids a read off the loop
 * found in neither tier are made at their next touch without a look in
 * the cold tier (RocksDB, real files), one id as well as several, and an
 * id not named is looked for; a record read off the loop whose row the TTL
 * scan has passed since is not installed. Pinned rows and eviction:
 * test_sparse_evict.c.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "scratch.h"
#include "sparse.h"
#include "sparse_fixture.h"
#include "tier.h"

static zp_tier *open_tier(const char *dir, zp_sparse *t)
{
    zp_tier_where w = {.dir = dir,
                       .table = "hint",
                       .shard = 0,
                       .nshards = 1,
                       .dim = zp_sparse_dim(t),
                       .spv = (uint32_t)zp_sparse_state_per_value(t),
                       .rec = zp_sparse_record_bytes(t)};
    char err[2048] = "";
    zp_tier *tier = NULL;
    ck_assert_msg(zp_tier_open(&tier, &w, err, sizeof err) == 0, "zp_tier_open: %s", err);
    return tier;
}

/* Ids a read off the loop found in neither tier (zp_sparse_hint_absent)
 * get their rows at their next touch without a look in the tier, a
 * single id as well as several; an id not named is looked for (the
 * tier's filter of ids given rules it out: counted unseen). */
START_TEST(test_hint_absent_not_read)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "hint"), 0);
    zp_tier *tier = open_tier(dir, t);
    zp_sparse_set_cold(t, tier);
    uint8_t *one = calloc(1, zp_sparse_record_bytes(t));
    uint64_t given = 5; /* a tier holding no row is never read: give it one */
    memcpy(one, &given, 8);
    ck_assert_int_eq(zp_tier_demote(tier, given, one), 0);
    float out[3 * 2];
    for (size_t n = 1; n <= 3; n++) {
        uint64_t ids[3] = {1000 * n, 1000 * n + 1, 1000 * n + 2};
        zp_tier_counters c0, c1;
        zp_tier_get_counters(tier, &c0);
        zp_sparse_hint_absent(t, ids, n);
        zp_sparse_pull(t, ids, n, 1, out, NULL);
        zp_tier_get_counters(tier, &c1);
        ck_assert_msg(c1.unseen == c0.unseen && c1.sync_reads == c0.sync_reads,
                      "%zu hinted ids looked for in the tier", n);
        for (size_t i = 0; i < n; i++)
            ck_assert(zp_sparse_has(t, ids[i]));
    }
    zp_sparse_hint_absent(t, NULL, 0);
    uint64_t other = 7777;
    zp_tier_counters c0, c1;
    zp_tier_get_counters(tier, &c0);
    zp_sparse_pull(t, &other, 1, 2, out, NULL);
    zp_tier_get_counters(tier, &c1);
    ck_assert_uint_eq(c1.unseen, c0.unseen + 1);
    ck_assert(zp_sparse_has(t, other));
    free(one);
    zp_sparse_destroy(&t);
    zp_tier_close(&tier);
}
END_TEST

/* A cold record read off the loop whose row the TTL scan has since
 * passed is not installed: install answers 0, the row does not turn hot,
 * and it counts as dropped by TTL (the tier forgets it). */
START_TEST(test_install_past_ttl)
{
    zp_sparse_opts o = base_opts("sgd", 2);
    o.capacity_rows = 1;
    o.ttl_clocks = 4;
    zp_sparse *t = make(&o);
    char dir[512];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "pastttl"), 0);
    zp_tier *tier = open_tier(dir, t);
    zp_sparse_set_cold(t, tier);
    uint64_t a = 11, b = 22;
    float out[2];
    zp_sparse_pull(t, &a, 1, 0, out, NULL);
    zp_sparse_pull(t, &b, 1, 0, out, NULL); /* a demoted, last touched at 0 */
    size_t rec = zp_sparse_record_bytes(t);
    void *buf = aligned_alloc(8, (rec + 7) / 8 * 8);
    ck_assert_int_eq(zp_tier_fetch(tier, a, buf), 1); /* the read off the loop */
    zp_sparse_expire(t, 10);                          /* the scan passes clock 0 + 4 */
    uint64_t ttl_before = counters(t).evicted_ttl;
    ck_assert_int_eq(zp_sparse_install(t, a, buf), 0);
    ck_assert(!zp_sparse_has(t, a));
    ck_assert_uint_eq(counters(t).evicted_ttl, ttl_before + 1);
    free(buf);
    zp_sparse_destroy(&t);
    zp_tier_close(&tier);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pins");
    ZT_SPARSE_ADD(s, test_hint_absent_not_read);
    ZT_SPARSE_ADD(s, test_install_past_ttl);
    return zt_run_suite(s);
}
