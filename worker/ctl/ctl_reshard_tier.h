/*
 * ctl_reshard_tier.h - `zepsctl snapshot reshard` of the cold tier
 * checkpoints in a set (ctl_reshard_tier.c, over server/tier/rehash.h).
 */
#ifndef ZP_CTL_RESHARD_TIER_H
#define ZP_CTL_RESHARD_TIER_H

#include <stdint.h>

#include "snapshot.h"

/* 0 if every tier-* folder of set `setid` in src_dir is the cold tier
 * checkpoint of one of the set's sparse tables for one of its nsrc
 * shards, and each table has one for all shards or none; else 1, said on
 * stderr. */
int zp_ctl_reshard_tier_check(const char *src_dir, uint64_t setid, const zp_snapshot *const *src,
                              uint32_t nsrc);

/* The cold tier checkpoints of every sparse table of the set that has
 * them, cut again for nout shards into set `setid` of dst_dir (its
 * folder made already, with the shard files); says what it wrote. 0, or
 * 1 said on stderr. */
int zp_ctl_reshard_tier_write(const char *src_dir, const char *dst_dir, uint64_t setid,
                              const zp_snapshot *const *src, uint32_t nsrc, uint32_t nout);

#endif
