/*
 * rocks.h - the settings of the cold tier's RocksDB databases (rocks.c),
 * for a program that opens one of them beside the tier: bench_tier reads
 * a tier's database with RocksDB's own MultiGet as the reference, with
 * exactly the options and batches the tier reads it with.
 */
#ifndef ZP_ROCKS_H
#define ZP_ROCKS_H

#include <stdint.h>

#include <rocksdb/c.h>

/* Keys per batched MultiGet call of the store (RocksDB works through
 * them 32 at a time). */
#define ZP_ROCKS_BATCH 256

typedef struct zp_rocks_settings {
    rocksdb_options_t *opts;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_readoptions_t *read; /* point reads (MultiGet) */
} zp_rocks_settings;

/* Make the settings the tier opens its databases with; the caller owns
 * them (zp_rocks_settings_fini, after closing what it opened with them).
 * `mem` is what RocksDB may hold in memory (write buffers, and a block
 * cache holding the index and filter blocks), 0 for the unbounded
 * settings of a table without a memory_budget (rocks.c says both). */
void zp_rocks_settings_init(zp_rocks_settings *s, uint64_t mem);
void zp_rocks_settings_fini(zp_rocks_settings *s);

#endif
