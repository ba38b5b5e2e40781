/*
 * test_tier_memory.c - a tiered table's memory_budget covers its cold
 * tier's store too (docs/sparse.md, "Cold tier", "Memory"), on a real
 * zeps-server: a table whose budget is 8 MiB, given about four times the
 * rows its hot tier holds. STATS says the store's share is half the
 * budget, the hot rows stay inside the other half, and RocksDB's own
 * figures (write buffers, index and filter blocks outside the cache,
 * block cache) stay inside the share.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_main.h"
#include "harness.h"
#include "scratch.h"
#include "zeps.h"

#define BUDGET ((uint64_t)8 << 20)
#define NIDS   120000
#define BATCH  10000
#define DIM    16

START_TEST(test_budget_covers_rocksdb)
{
    char dir[512], extra[700];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof dir, "tiers"), 0);
    snprintf(extra, sizeof extra, "  tier_dir = \"%s\"; max_message_mb = 64;", dir);
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", extra, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    zeps_sparse_spec s = {.name = "emb",
                          .dim = DIM,
                          .optimizer = "adagrad",
                          .lr = 0.05,
                          .init = "uniform",
                          .init_scale = 0.1,
                          .seed = 3,
                          .tier = 1,
                          .memory_budget = BUDGET};
    uint32_t t;
    ck_assert_msg(zeps_declare_sparse(c, &s, &t) == 0, "%s", zeps_last_error(c));
    static uint64_t ids[BATCH];
    static float rows[BATCH * DIM];
    for (uint64_t k = 0; k < NIDS; k += BATCH) { /* every id made, most demoted */
        for (uint64_t i = 0; i < BATCH; i++)
            ids[i] = (k + i) * 0x9e3779b97f4a7c15ull;
        ck_assert_msg(zeps_spull(c, t, ids, BATCH, rows, 0) == 0, "%s", zeps_last_error(c));
    }
    Zeps__ShardStats *st = zt_stats(c, 0);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(st->n_tables, 1);
    const Zeps__TableStats *ts = st->tables[0];
    uint64_t share = ts->tier_mem_share, hot = ts->rows * ts->bytes_per_row;
    uint64_t rocks =
        ts->tier_mem_write_buffers + ts->tier_mem_table_readers + ts->tier_mem_block_cache;
    ck_assert_uint_eq(share, BUDGET / 2);
    ck_assert_msg(ts->rows + ts->cold_rows == NIDS && ts->cold_rows > NIDS / 2,
                  "%llu hot rows, %llu cold", (unsigned long long)ts->rows,
                  (unsigned long long)ts->cold_rows);
    ck_assert_msg(hot <= BUDGET - share, "hot rows take %llu bytes, the budget leaves them %llu",
                  (unsigned long long)hot, (unsigned long long)(BUDGET - share));
    ck_assert_msg(rocks <= share,
                  "RocksDB holds %llu bytes (write buffers %llu, index and filters %llu, block "
                  "cache %llu), its share is %llu",
                  (unsigned long long)rocks, (unsigned long long)ts->tier_mem_write_buffers,
                  (unsigned long long)ts->tier_mem_table_readers,
                  (unsigned long long)ts->tier_mem_block_cache, (unsigned long long)share);
    ck_assert_msg(ts->tier_mem_write_buffers > 0 || ts->tier_mem_block_cache > 0,
                  "RocksDB's figures are not read");
    zeps__shard_stats__free_unpacked(st, NULL);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tier_memory");
    TCase *tc = tcase_create("tier_memory");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_budget_covers_rocksdb);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
