/*
 * sparse_hash.c - the id hash (see sparse_hash.h): inline in the header
 * (xxHash's XXH_INLINE_ALL); this out-of-line copy serves callers that
 * need its address.
 */
#include "sparse_hash.h"

uint64_t zp_sparse_hash_id_fn(uint64_t id, uint64_t seed)
{
    return zp_sparse_hash_id(id, seed);
}
