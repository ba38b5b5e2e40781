/*
 * evict.h - which rows a sparse table's store drops (evict.c): the
 * eviction policy's names, used by the table declaration (rows.c) and by
 * zp_sparse_opts, and the store's TTL scan and make-room step, private to
 * the store (sparse_int.h).
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_EVICT_H
#define ZP_EVICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum zp_evict_policy {
    ZP_EVICT_LRU = 0,
    ZP_EVICT_LFU = 1,
} zp_evict_policy;

/* "lru" | "lfu" (NULL or "" = lru); -1 if unknown. */
int zp_evict_from_name(const char *name);
/* The policy's name ("?" if p is none of them); a static string. */
const char *zp_evict_name(zp_evict_policy p);

typedef struct zp_sparse zp_sparse;

/* Seed t's eviction sampling from the table seed. */
void zp_evict_init(zp_sparse *t);

/* Evict sampled rows until one more row fits under t's capacity, memory
 * budget and row limit. false if it cannot (no row left to evict). */
bool zp_evict_make_room(zp_sparse *t);

/* zp_sparse_expire (sparse.h): drop rows untouched for ttl clocks as of
 * `clock`, scanning at most every max(1, ttl/4) clocks. Returns rows
 * evicted. */
size_t zp_evict_expire(zp_sparse *t, int64_t clock);

/* zp_sparse_drop_where (sparse.h): drop every hot row whose id pred
 * accepts. Returns rows dropped. */
size_t zp_evict_drop_where(zp_sparse *t, bool (*pred)(uint64_t id, void *arg), void *arg);

#endif
