/*
 * rehash.h - a snapshot set's cold tier checkpoints of one sparse table,
 * cut again for another shard count: every cold row read from the
 * checkpoints of the old shards and written to the checkpoint of the new
 * shard its id hashes to (zp_sparse_shard_of, the default map: hash mod
 * S'). `zepsctl snapshot reshard` does it beside the shard files
 * (common/snapshot/reshard.c, which moves the hot rows the same way);
 * docs/snapshots.md.
 *
 * A checkpoint is read without being changed (opened read-only) and the
 * new ones are written under a temporary name, read back and counted,
 * then renamed: a checkpoint under its final name is complete.
 *
 * Threading: any one thread (an offline tool).
 */
#ifndef ZP_REHASH_H
#define ZP_REHASH_H

#include <stddef.h>
#include <stdint.h>

/* The folder of table `table`'s cold tier checkpoint for shard `shard` of
 * `nshards` in set `setid` of snapshot_dir `snapdir`:
 * <snapdir>/set-<setid>/tier-<table>-shard-<i>-of-<S>. 0, or -1 if it
 * does not fit in len. */
int zp_rehash_checkpoint_path(char *buf, size_t len, const char *snapdir, uint64_t setid,
                              const char *table, uint32_t shard, uint32_t nshards);

/* What to cut again. */
typedef struct zp_rehash_job {
    const char *src_dir, *dst_dir; /* snapshot_dirs: the set read, the set written */
    uint64_t setid;                /* the set's id (the same in both) */
    const char *table;
    uint32_t nsrc, ndst; /* shard counts: old, new */
    /* the ids of the table's hot rows in the set (its shard files), sorted:
     * a checkpoint's record of one of them is an out-of-date copy (a
     * promotion leaves its record in the tier) and is not carried */
    const uint64_t *hot;
    size_t nhot;
} zp_rehash_job;

typedef struct zp_rehash_counts {
    uint64_t read;    /* records read from the old checkpoints */
    uint64_t written; /* cold rows written to the new ones */
    uint64_t copies;  /* out-of-date copies of hot rows left out */
} zp_rehash_counts;

/* Whether set r->setid of r->src_dir holds cold tier checkpoints of
 * r->table: 0 (none), 1 (one for each of the r->nsrc shards), or
 * ZEPS_EDATA naming the shard whose checkpoint is missing. */
int zp_rehash_present(const zp_rehash_job *r, char *err, size_t errlen);

/* Write the r->ndst checkpoints of r->table into set r->setid of
 * r->dst_dir (its set folder must exist) from the r->nsrc of r->src_dir.
 * Returns 0 with the counts, or ZEPS_EDATA (a checkpoint missing or
 * damaged: it does not open, a record is not a row record of the table)
 * or ZEPS_EIO (writing), naming the folder; on error no new checkpoint of
 * this call is left under its final name. */
int zp_rehash_write(const zp_rehash_job *r, zp_rehash_counts *counts, char *err, size_t errlen);

#endif
