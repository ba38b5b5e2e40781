/*
 * tier.h - the cold tier of one sparse table on this shard: the rows its
 * hot tier (table/sparse.c) evicts, kept on disk in a store (cold.h)
 * instead of being dropped, and given back exactly when their id is
 * touched again.
 *
 * A tier is one database per table and shard, in
 * <tier_dir>/tier-<table>-shard-<i>, beside a file ZEPS-TIER that says
 * whose it is (table, shard, row layout). Opening checks it: a folder that
 * holds anything else, or the tier of another table or layout, is refused,
 * never reused or wiped. A tier of this very table found at a fresh
 * declaration is what a previous process left (no snapshot restored it):
 * without its hot rows it is not a state of the table, so it is emptied,
 * with a warning.
 *
 * Values are the hot tier's row records, byte for byte (`rec` bytes); the
 * tier does not read them. A failed write or read is kept (zp_tier_error):
 * from then on the table refuses requests with it instead of losing rows.
 *
 * Threading: the shard's loop thread only (the tier's writer thread,
 * warm.h, and reads off the loop, fetch.c, are its own).
 */
#ifndef ZP_TIER_H
#define ZP_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zp_tier zp_tier;

/* Whose tier, and of what rows. */
typedef struct zp_tier_where {
    const char *dir;   /* cluster.tier_dir */
    const char *table; /* the table's name */
    int shard, nshards;
    uint32_t dim, spv; /* the row layout: values and state floats per value */
    size_t rec;        /* bytes of one row record */
    uint64_t mem;      /* what the store may hold in memory: zp_tier_share of the
                        * table's memory_budget; 0 without one (unbounded) */
    size_t warm_rows;  /* rows of each buffer of unwritten rows (warm.h); 0: from mem
                        * (tier.c, WARM_BYTES) */
} zp_tier_where;

/* The share of a tiered table's memory_budget its cold tier's store is
 * given (half: write buffers, a block cache holding the index and filter
 * blocks, and what RocksDB holds beside them, rocks.c); the hot rows get
 * the other half. 0 for 0 (no budget). */
uint64_t zp_tier_share(uint64_t memory_budget);

typedef struct zp_tier_counters {
    uint64_t promotions; /* cold rows taken back into the hot tier */
    uint64_t demotions;  /* hot rows written to the cold tier */
    uint64_t sync_reads; /* rows read on the loop's thread (a touch that found no fetched row) */
    uint64_t fetched;    /* ids read off the loop (zp_tier_read_many, fetch.c) */
    uint64_t unseen;     /* ids found never given to the tier, so not read (zp_tier_may_hold) */
    uint64_t rows;       /* rows in the cold tier now (not hot: out-of-date copies of hot
                          * rows are not counted) */
    uint64_t bytes;      /* bytes the store takes (disk and write buffers) */
    uint64_t mem_share;  /* what the store may hold in memory (0: unbounded) */
    /* what it holds now (mem_table_readers: RocksDB's index and filters
     * outside its cache, and the tier's filter of ids given, seen.h) */
    uint64_t mem_write_buffers, mem_table_readers, mem_block_cache;
} zp_tier_counters;

/* Open the tier of w with the rows of checkpoint `from` (a snapshot's,
 * zp_tier_checkpoint): whatever the tier's folder held is replaced by a
 * copy of it. Returns 0, ZEPS_EDATA (no checkpoint there) or ZEPS_EIO /
 * ZEPS_ECONFIG as zp_tier_open. */
int zp_tier_restore(zp_tier **out, const zp_tier_where *w, const char *from, char *err,
                    size_t errlen);

/* A consistent copy of the tier as it is now in folder `dir` (replaced if
 * it exists), which zp_tier_restore opens; RocksDB flushes its write
 * buffer first (the log is off) and links its files. Loop thread. 0 or
 * ZEPS_EIO naming what failed. */
int zp_tier_checkpoint(zp_tier *t, const char *dir, char *err, size_t errlen);

/* Check at start that tier_dir `dir` exists, is a folder and takes a file.
 * It is never created: a missing folder usually is a disk not mounted,
 * and a cold tier written to the root disk instead would fill it. Returns
 * 0 or ZEPS_ECONFIG naming the key, the folder and the reason. */
int zp_tier_dir_check(const char *dir, char *err, size_t errlen);

/* Open the tier of w (creating it, or emptying this table's leftover as
 * above). *out is the caller's (zp_tier_close). Returns 0, ZEPS_ECONFIG
 * (a folder of something else, another table's tier) or ZEPS_EIO (the
 * store), with the path in err. */
int zp_tier_open(zp_tier **out, const zp_tier_where *w, char *err, size_t errlen);

/* Close the tier (waiting for reads on other threads to finish); reads
 * still to come back to the loop find it closed (their rows are not
 * used), and the last frees it. *tp NULL afterwards. */
void zp_tier_close(zp_tier **tp);

/* The tier's path (for messages). */
const char *zp_tier_path(const zp_tier *t);

/* Write row `id`'s record (rec bytes) to the tier. Writes (and forgets)
 * are held in RAM by id (warm.h) and written by the tier's writer thread
 * in one sorted batch per buffer; until written they are read from there
 * (zp_tier_held, zp_tier_fetch). A failure to write a batch (-1 from then
 * on, zp_tier_error) comes at a later call, and loses the rows of the
 * batch, which had left the hot tier; the table then refuses every
 * request. 0, or -1 once the tier failed. */
int zp_tier_demote(zp_tier *t, uint64_t id, const void *rec);

/* Row `id`'s record into rec if the tier holds it: 1 (found), 0 (not
 * there), -1 (failed). */
int zp_tier_fetch(zp_tier *t, uint64_t id, void *rec);

/* Whether the tier may hold row `id`: false only for an id never demoted
 * to it (nor restored into it), which no read need look for; a table
 * without memory_budget keeps a filter of the ids given (seen.h), one with
 * it answers true (RocksDB's own filters, inside its share, rule new ids
 * out at the read). Counts the ids ruled out (unseen). Loop thread. */
bool zp_tier_may_hold(zp_tier *t, uint64_t id);

/* Row `id`'s record into rec if it is held unwritten (no read): 1; -1 if
 * its newest write is a delete (the tier does not hold it); 0 if it is
 * not held (then the store has its newest record, or none). */
int zp_tier_held(zp_tier *t, uint64_t id, void *rec);

/* A row the tier held is hot again (`counted`: a promotion, else a row
 * put over it). Its record stays in the tier, out of date: the row's next
 * demotion overwrites it, and a row dropped for good deletes it
 * (zp_tier_forget); nothing is written now. */
void zp_tier_promoted(zp_tier *t, bool counted);

/* Delete row `id`'s record: a cold row (`cold`: counted out of the
 * tier's rows) or the out-of-date copy of a hot row, dropped for good.
 * 0 or -1 (failed). */
int zp_tier_forget(zp_tier *t, uint64_t id, bool cold);

/* --- reads off the loop's thread (fetch.c) --- */

/* A read of other threads begins (of ids not held unwritten,
 * zp_tier_held: the store has their newest records; the tier notes every
 * id it writes or deletes from now on) or ends, having read `ids` ids (the last one: the notes are
 * dropped). Loop thread. */
void zp_tier_read_begin(zp_tier *t);
void zp_tier_read_end(zp_tier *t, size_t ids);

/* Whether id was written or deleted since the oldest read in flight
 * began: a record read for it then may be stale. Loop thread. */
bool zp_tier_touched(const zp_tier *t, uint64_t id);

/* The records of ids[0..n) into recs (rec bytes each), found[i] whether
 * id i is there. Any thread, between zp_tier_read_begin and _end (the
 * store is then open); writes from the loop may run meanwhile. 0, or a
 * zeps_err with the store's message in err. */
int zp_tier_read_many(zp_tier *t, const uint64_t *ids, size_t n, void *recs, bool *found, char *err,
                      size_t errlen);

/* Record bytes of the tier. */
size_t zp_tier_record_bytes(const zp_tier *t);

/* The first failure's message, or NULL while the tier works. */
const char *zp_tier_error(const zp_tier *t);

void zp_tier_get_counters(const zp_tier *t, zp_tier_counters *out);

/* Up to `max` records in id order from cold position *pos (0: the first)
 * into out (rec bytes each); *pos moves past them, to UINT64_MAX at the
 * end. A scan that goes on from where the last one stopped continues the
 * same iteration; any other position starts one over and skips to it.
 * Returns the records written, or -1 (failed). */
int64_t zp_tier_scan(zp_tier *t, uint64_t *pos, uint64_t max, uint8_t *out);

#endif
