/*
 * sparse_hash.h - where a sparse row lives.
 *
 * Row `id` of every sparse table lives on shard hash(id) mod S, hash being
 * xxHash's XXH3 (64-bit) of the id's 8 little-endian bytes with a fixed seed.
 * Servers, clients and the resharding tool all use this one function, so
 * they always agree. Hash tables over ids (a shard's index, the checks and
 * deduplication of a request's ids) use XXH3 with another seed — a random
 * one wherever the ids come from the network, so they cannot be crafted to
 * collide — so the ids of one shard (all equal mod S) still spread.
 */
#ifndef ZP_SPARSE_HASH_H
#define ZP_SPARSE_HASH_H

#include <stdint.h>

#define ZP_SHARD_HASH_SEED 0x7a6570735f736864ull /* "zeps_shd" */
#define ZP_INDEX_HASH_SEED 0x7a6570735f696478ull /* "zeps_idx": tables of trusted ids */

/* xxHash XXH3-64 of the id's little-endian bytes with `seed`. */
uint64_t zp_sparse_hash_id(uint64_t id, uint64_t seed);

/* The shard of row `id` among `nshards` (> 0). */
static inline int zp_sparse_shard_of(uint64_t id, int nshards)
{
    return (int)(zp_sparse_hash_id(id, ZP_SHARD_HASH_SEED) % (uint64_t)nshards);
}

#endif
