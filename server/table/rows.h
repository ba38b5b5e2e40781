/*
 * rows.h - a sparse table on this shard: the row store (sparse.c), the
 * declaration it was made from, and the per-request scratch (ids, the
 * repeated-id set, misaligned or decoded gradients, row versions).
 *
 * This is the sparse kind of table (zp_rows_kind, a zp_table_kind): its
 * lifecycle, re-declaration check, statistics and snapshot record. The
 * scratch helpers serve op/sparse_ops.c, which checks and answers sparse
 * PULL and PUSH.
 */
#ifndef ZP_ROWS_H
#define ZP_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "sparse.h"
#include "zeps.pb-c.h"

typedef struct zp_rows {
    zp_sparse *store;
    uint32_t dim;
    Zeps__TableSpec *spec; /* the declaration, to check re-declarations */
    uint64_t *ids;         /* scratch: a request's ids, aligned */
    size_t ids_cap;
    uint64_t *set_keys; /* scratch: the repeated-id check */
    uint32_t *set_gen, set_stamp;
    size_t set_cap;
    uint64_t set_seed; /* its hash seed, random */
    float *grads;      /* scratch: misaligned or decoded gradients */
    size_t grad_cap;
    uint32_t *vers; /* scratch: row versions read */
    size_t ver_cap;
} zp_rows;

struct zp_table_kind;
extern const struct zp_table_kind zp_rows_kind;

/* n ids copied out of `data` (any alignment) into the scratch. */
const uint64_t *zp_rows_ids(zp_rows *r, const void *data, size_t n);

/* Index of the second occurrence of a repeated id in ids[0..n), or -1. */
ptrdiff_t zp_rows_repeated(zp_rows *r, const uint64_t *ids, size_t n);

/* Room for n floats of gradient scratch, or NULL if it cannot be made. */
float *zp_rows_grads(zp_rows *r, size_t n);

/* n row versions copied out of `data` into the scratch. */
const uint32_t *zp_rows_versions(zp_rows *r, const void *data, size_t n);

/* After a push: a large gradient scratch is not kept for the next (usually
 * small) one. */
void zp_rows_trim(zp_rows *r);

#endif
