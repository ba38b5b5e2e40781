/*
 * join.h - libzeps: reaching the shards that joined the cluster at run time
 * (join.c; docs/elastic.md, "Adding a shard"). Internal to libzeps.
 */
#ifndef ZP_JOIN_H
#define ZP_JOIN_H

#include "slotmap.h"
#include "zeps.h"
#include "zeps.pb-c.h"

/* Connect c to every shard `map` names past the ones c knows (shards that
 * joined at run time, with their endpoints in the map), in index order:
 * open its socket (the cluster's CURVE keys, as for the others), say
 * HELLO there and declare every sparse table c declared, each answer
 * awaited on that socket alone. Returns 0 when c knows every shard of the
 * map (c->nshards is its shard count), else the error with c->err saying
 * why; a shard that failed is closed again and the ones before it stay.
 * map stays the caller's. Called by the engine's thread (redirect.c). */
int zp_join_map(zeps_client *c, const zp_slotmap *map);

/* Take shard k's answer h to HELLO (a shard of the file, by the engine, or
 * one that joined): its incarnation, the clock this worker resumes at,
 * the cluster's mode, and shared memory if offered. 0, or ZEPS_ECONFIG
 * (c->err) if it answered as another shard or of another cluster. h stays
 * the caller's. */
int zp_join_hello(zeps_client *c, int k, const Zeps__Header *h);

#endif
