/*
 * admit.h - admission of unknown ids into a sparse table's store
 * (admit.c), private to the store (sparse_int.h). zp_admit_touch is static
 * inline: the store asks it for every touch of an id without a row, and a
 * table without a sketch or a draw must not pay a call for it.
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_ADMIT_H
#define ZP_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sparse_int.h"

#define ZP_ADMIT_SKETCH_DEPTH      4
#define ZP_ADMIT_SKETCH_WIDTH_LOG2 18

/* Bytes of the count-min sketch a table with this admit_count holds (0 when
 * every id is admitted on its first touch). */
static inline size_t zp_admit_sketch_bytes(uint32_t admit_count)
{
    return admit_count > 1
               ? (size_t)ZP_ADMIT_SKETCH_DEPTH * sizeof(uint16_t) << ZP_ADMIT_SKETCH_WIDTH_LOG2
               : 0;
}

/* Allocate t's sketch (if admit_count > 1) and seed its admission draws
 * from the table seed. t owns the sketch (freed by zp_sparse_destroy). */
void zp_admit_init(zp_sparse *t);

/* Count one touch of an unknown id (index hash h) in the sketch and return
 * its estimated count. */
uint32_t zp_admit_sketch_touch(zp_sparse *t, uint64_t h);

/* The touch of an unknown id (index hash h): true if it gets a row now. */
static inline bool zp_admit_touch(zp_sparse *t, uint64_t h)
{
    if (t->sketch != NULL && zp_admit_sketch_touch(t, h) < t->admit_count)
        return false;
    if (t->admit_prob < 1.0 && zp_rng_uniform(&t->rng_admit) >= t->admit_prob)
        return false;
    return true;
}

#endif
