/*
 * slot_ids.h - what the tests of moves and redirects set up by slot
 * (slot_ids.c): an id of a given slot or shard under the default map, and
 * the map that gives the slots of some ids to another shard. Every
 * function asserts with Check: call them from a test.
 */
#ifndef ZT_SLOT_IDS_H
#define ZT_SLOT_IDS_H

#include <stddef.h>
#include <stdint.h>

#include "slotmap.h"

/* The first id after `after` whose slot under the default map of
 * `shards` shards is `slot`. */
uint64_t zt_slot_id_in(int shards, uint32_t slot, uint64_t after);

/* The first id after `after` that the default map of `shards` shards
 * gives shard k, in a slot below `below`. */
uint64_t zt_slot_id_on(int shards, int k, uint32_t below, uint64_t after);

/* The map one epoch past `from` that gives the slots of ids[0..n) to
 * shard `to`, the others as in `from`. The caller owns it (it destroys
 * it with zp_slotmap_destroy). */
zp_slotmap *zt_slot_map_giving(const zp_slotmap *from, const uint64_t *ids, size_t n, int to);

#endif
