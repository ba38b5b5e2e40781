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
#include <string.h>

/* XXH3 of 8 bytes is a few multiplies: inlined (xxHash's own header-only
 * mode), it costs less than the call into libxxhash did, and every pull and
 * push hashes each id. */
#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#define ZP_SHARD_HASH_SEED 0x7a6570735f736864ull /* "zeps_shd" */
#define ZP_INDEX_HASH_SEED 0x7a6570735f696478ull /* "zeps_idx": tables of trusted ids */

/* xxHash XXH3-64 of the id's little-endian bytes with `seed`. */
static inline uint64_t zp_sparse_hash_id(uint64_t id, uint64_t seed)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return (uint64_t)XXH3_64bits_withSeed(&id, sizeof(id), (XXH64_hash_t)seed);
#else
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(id >> (8 * i));
    return (uint64_t)XXH3_64bits_withSeed(b, sizeof(b), (XXH64_hash_t)seed);
#endif
}

/* The same, out of line. */
uint64_t zp_sparse_hash_id_fn(uint64_t id, uint64_t seed);

/* The shard of row `id` among `nshards` (> 0). */
static inline int zp_sparse_shard_of(uint64_t id, int nshards)
{
    return (int)(zp_sparse_hash_id(id, ZP_SHARD_HASH_SEED) % (uint64_t)nshards);
}

#endif
