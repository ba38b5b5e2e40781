/*
 * rowindex.h - a sparse table's index from id to row number (rowindex.c),
 * private to the store (sparse_int.h). Lookup, insertion and the load check
 * are static inline: the store calls them for every id of every pull and
 * push. Growth and deletion, which move many slots or run only on eviction,
 * are out of line.
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_ROWINDEX_H
#define ZP_ROWINDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "sparse_hash.h"
#include "sparse_int.h"

#define ZP_ROWINDEX_MIN_CAP 64

/* The index's hash: XXH3 with a seed drawn at random per table, so ids
 * from the network cannot be crafted to collide (linear probing would then
 * cost O(n) per lookup); nothing outside this table depends on it. */
static inline uint64_t zp_rowindex_hash(const zp_sparse *t, uint64_t id)
{
    return zp_sparse_hash_id(id, t->index_seed);
}

/* The slot holding `id` (hash h), or -1. */
static inline int64_t zp_rowindex_find(const zp_sparse *t, uint64_t id, uint64_t h)
{
    uint64_t mask = t->icap - 1, i = h & mask;
    uint32_t h32 = (uint32_t)h;

    for (;;) {
        const slot *s = &t->index[i];
        if (s->row == ROW_NONE)
            return -1;
        if (s->hash == h32 && zp_sparse_rec_at(t, s->row)->id == id)
            return (int64_t)i;
        i = (i + 1) & mask;
    }
}

/* Store e in the first free slot from its home (the caller knows its id is
 * not present and that the index has room). */
static inline void zp_rowindex_put(slot *index, uint64_t mask, slot e)
{
    uint64_t i = e.hash & mask;
    while (index[i].row != ROW_NONE)
        i = (i + 1) & mask;
    index[i] = e;
}

/* Would one more row push the index past its load limit of 0.7? */
static inline bool zp_rowindex_needs_grow(const zp_sparse *t)
{
    return (t->c.rows + 1) * 10 > t->icap * 7;
}

/* Allocate t's empty index of ZP_ROWINDEX_MIN_CAP slots and draw its hash
 * seed. t owns the index (freed by zp_sparse_destroy). */
void zp_rowindex_init(zp_sparse *t);

/* Double the index, re-placing every entry; counts the bytes. */
void zp_rowindex_grow(zp_sparse *t);

/* Remove the entry at slot i (backward-shift, no tombstones). */
void zp_rowindex_delete(zp_sparse *t, uint64_t i);

#endif
