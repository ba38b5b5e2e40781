/*
 * ctl_tier.c - a sparse table's cold tier in `zepsctl stats` (ctl_tier.h).
 */
#include "ctl_tier.h"

#include <inttypes.h>
#include <stdio.h>

double zp_ctl_tier_hit_rate(const Zeps__TableStats *t)
{
    uint64_t all = t->tier_hits + t->tier_promotions;
    return all ? (double)t->tier_hits / (double)all : 1.0;
}

void zp_ctl_tier_print(const Zeps__TableStats *t)
{
    printf("         cold tier: hit rate %.4f, promotions %" PRIu64 " (%" PRIu64
           " read on the loop), demotions %" PRIu64 ", cold rows %" PRIu64 " (%.1f MiB)\n",
           zp_ctl_tier_hit_rate(t), t->tier_promotions, t->tier_sync_reads, t->tier_demotions,
           t->cold_rows, (double)t->cold_bytes / 1048576.0);
    printf("         cold tier memory: write buffers %.1f MiB, index and filters %.1f MiB, "
           "block cache %.1f MiB",
           (double)t->tier_mem_write_buffers / 1048576.0,
           (double)t->tier_mem_table_readers / 1048576.0,
           (double)t->tier_mem_block_cache / 1048576.0);
    if (t->tier_mem_share != 0)
        printf(" (share of the budget %.1f MiB)\n", (double)t->tier_mem_share / 1048576.0);
    else
        printf(" (no memory_budget: unbounded)\n");
}

void zp_ctl_tier_json(const Zeps__TableStats *t)
{
    printf(", \"tier_hit_rate\": %.6f, \"tier_hits\": %" PRIu64 ", \"tier_promotions\": %" PRIu64
           ", \"tier_sync_reads\": %" PRIu64 ", \"tier_fetched\": %" PRIu64
           ", \"tier_parked\": %" PRIu64 ", \"tier_demotions\": %" PRIu64
           ", \"cold_rows\": %" PRIu64 ", \"cold_bytes\": %" PRIu64,
           zp_ctl_tier_hit_rate(t), t->tier_hits, t->tier_promotions, t->tier_sync_reads,
           t->tier_fetched, t->tier_parked, t->tier_demotions, t->cold_rows, t->cold_bytes);
    printf(", \"tier_mem_share\": %" PRIu64 ", \"tier_mem_write_buffers\": %" PRIu64
           ", \"tier_mem_table_readers\": %" PRIu64 ", \"tier_mem_block_cache\": %" PRIu64,
           t->tier_mem_share, t->tier_mem_write_buffers, t->tier_mem_table_readers,
           t->tier_mem_block_cache);
}
