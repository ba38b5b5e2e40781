/*
 * idset.h - a set of u64 row ids, taken whole (idset.c).
 *
 * A live move (move.c, docs/elastic.md) records the ids of the moving
 * slots that requests changed since they were last sent: a set, since a
 * row pushed a thousand times is sent once per round. A round takes the
 * whole set at once (zp_idset_take) and sends those rows while the set
 * fills again with what changes meanwhile, so no id needs to leave the
 * set one by one: open addressing with linear probing and no deletion.
 *
 * Threading: one thread (the shard's loop) per set.
 */
#ifndef ZP_IDSET_H
#define ZP_IDSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct zp_idset {
    uint64_t *keys; /* cap slots; a slot holds id + 1 (0: empty), so id UINT64_MAX is
                       kept aside in has_max */
    size_t cap, n;  /* cap a power of two (0: nothing allocated) */
    int has_max;
} zp_idset;

/* An empty set (no allocation until the first insert). */
void zp_idset_init(zp_idset *s);

/* Free what the set holds; it is empty and may be used again. */
void zp_idset_fini(zp_idset *s);

/* Add id; nothing if present. The table grows at 1/2 load (allocation
 * failure aborts, as every small allocation: common/alloc.h). */
void zp_idset_add(zp_idset *s, uint64_t id);

/* Whether id is in the set. */
int zp_idset_has(const zp_idset *s, uint64_t id);

/* Ids in the set. */
size_t zp_idset_size(const zp_idset *s);

/* Take every id: *ids becomes a new array of them (the caller frees it;
 * NULL when the set is empty) in no particular order, *n their count;
 * the set is left empty, its table kept for what follows. */
void zp_idset_take(zp_idset *s, uint64_t **ids, size_t *n);

#endif
