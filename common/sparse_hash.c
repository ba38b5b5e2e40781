/*
 * sparse_hash.c - the id hash (see sparse_hash.h), from libxxhash.
 */
#include "sparse_hash.h"

#include <string.h>

#include <xxhash.h>

uint64_t zp_sparse_hash_id(uint64_t id, uint64_t seed)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(id >> (8 * i));
    return (uint64_t)XXH3_64bits_withSeed(b, sizeof(b), (XXH64_hash_t)seed);
}
