/*
 * tiered.h - a sparse table with a cold tier (tier/tier.h): opening it
 * for a declared table, its statistics, and the cold half of a SCAN. The
 * rows move between the tiers inside the store (sparse.c, evict.c); this
 * is what the op layer sees of it (rows.c reads the tier's counters
 * itself: it is called from here, so it does not call back).
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_TIERED_H
#define ZP_TIERED_H

#include <stddef.h>
#include <stdint.h>

#include "rows.h"
#include "zeps.pb-c.h"

/* SCAN cursors at or past this are positions in the cold tier (a hot
 * cursor is a record number, below 2^31). */
#define ZP_TIERED_CURSOR ((uint64_t)1 << 40)

/* Give sparse table `table` of shard `shard` (r, declared with tier) its
 * cold tier under `dir` (cluster.tier_dir; "" refuses). r owns the tier
 * from then on. Returns 0, or ZEPS_ECONFIG / ZEPS_EIO naming the folder
 * and what is wrong. */
int zp_tiered_open(zp_rows *r, const char *dir, const char *table, int shard, int nshards,
                   char *err, size_t errlen);

/* Snapshots: the folder of table `table`'s cold tier checkpoint in set
 * `setid` of snapshot_dir `snapdir`, beside the set's shard files:
 * <snapdir>/set-<setid:016x>/tier-<table>-shard-<i>-of-<S>. */
int zp_tiered_checkpoint_path(char *buf, size_t len, const char *snapdir, uint64_t setid,
                              const char *table, int shard, int nshards);

/* Take r's checkpoint for set `setid` (the set's folder made if missing):
 * on the loop's thread, at the instant the snapshot's record is made, so
 * both tiers are of the same cut. 0, or ZEPS_EIO naming what failed. */
int zp_tiered_checkpoint(zp_rows *r, const char *snapdir, uint64_t setid, const char *table,
                         int shard, int nshards, char *err, size_t errlen);

/* Give restored table r (declared with tier; its hot rows loaded, or
 * loaded after: a hot row loaded then that the table has no room for is
 * demoted, and its out-of-date copy marked as it loads) its cold tier
 * from set `setid`'s checkpoint: r owns the tier from then on. 0, or
 * ZEPS_EDATA (no checkpoint), ZEPS_ECONFIG, ZEPS_EIO. */
int zp_tiered_restore(zp_rows *r, const char *tier_dir, const char *snapdir, uint64_t setid,
                      const char *table, int shard, int nshards, char *err, size_t errlen);

/* After a rollback of r's hot rows to set `setid` (zp_table_reset): its
 * cold tier too, from the set's checkpoint; reads in flight of the tier
 * replaced are not used. 0 or as zp_tiered_restore; on failure r has no
 * tier and refuses requests (zp_tiered_error). */
int zp_tiered_rollback(zp_rows *r, const char *tier_dir, const char *snapdir, uint64_t setid,
                       const char *table, int shard, int nshards, char *err, size_t errlen);

/* The failure that stopped r's cold tier, or NULL (also without one);
 * a table declared with tier whose tier is not open has failed too. */
const char *zp_tiered_error(const zp_rows *r);

/* Rows in r's cold tier now (0 without one). */
uint64_t zp_tiered_cold_rows(const zp_rows *r);

/* Up to `max` cold rows from cold cursor *cursor (ZP_TIERED_CURSOR + a
 * position), packed as SCAN records into out; *cursor moves on, or to 0
 * after the last. Returns the rows written, or -1 (the tier failed:
 * zp_tiered_error). */
int64_t zp_tiered_scan(zp_rows *r, uint64_t *cursor, uint64_t max, uint8_t *out);

#endif
