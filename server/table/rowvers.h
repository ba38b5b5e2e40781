/*
 * rowvers.h - the last versions of a sparse table's rows, kept for
 * staleness on demand (cluster.inject, state/inject.h): a pull can be
 * served each row as it was tau updates of that row ago.
 *
 * A row's version counts the updates applied to it (sparse.h), so "tau
 * updates ago" is per row: the row at version v - tau. Before a push
 * updates a row at version u, the row's values (its pre-image) are noted
 * in ring slot u mod keep of the row's history. The histories are
 * themselves rows of a side store (sparse.h: sgd, no admission or
 * eviction) of keep * (dim + 1) floats: keep version tags (u + 1, 0 for
 * an empty slot), then keep slots of dim values. So one lookup finds all
 * of a row's kept versions, and nothing is kept for a row nobody pushes.
 *
 * Memory: one history of keep * (dim + 1) floats (plus the store's 24-byte
 * header and index slot) for every row a push found already there since
 * the ring was set up (a push that creates a row notes nothing: version 0
 * is the row's initial values, made again when served), counted by
 * zp_rowvers_bytes() and nowhere else (not in STATS, not against the
 * shard's limits); keep * (dim + 1) is at most 4096, the store's largest
 * row. A row that is evicted keeps its history, so the histories grow with
 * every such row ever pushed; when a row comes back
 * its versions start again from 0 and each push overwrites the slot it
 * reuses, so a version served is always the row's own.
 *
 * Ownership: a zp_rowvers owns its side store; it reads the table's store
 * and never changes it. Threading: the shard's loop thread only.
 */
#ifndef ZP_ROWVERS_H
#define ZP_ROWVERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sparse.h"

#define ZP_ROWVERS_MAX_FLOATS 4096 /* keep * (dim + 1): the store's largest row */

typedef struct zp_rowvers {
    zp_sparse *hist; /* NULL: nothing kept */
    uint32_t keep, dim;
    float *scratch; /* keep * (dim + 1) floats: a new history */
} zp_rowvers;

/* Whether rows of dim floats can keep `keep` versions each. */
bool zp_rowvers_fits(uint32_t keep, uint32_t dim);

/* Keep up to `keep` versions of each row of dim floats. Returns 0, or
 * ZEPS_EINVAL (see zp_rowvers_fits) with a message in err; *v then holds
 * nothing to free. */
int zp_rowvers_init(zp_rowvers *v, uint32_t keep, uint32_t dim, char *err, size_t errlen);

/* Free every kept version; tolerates a zeroed *v. */
void zp_rowvers_fini(zp_rowvers *v);

/* Before a push of ids[0..n) (distinct) to `store`: note each row the store
 * holds as it is now, at its version (a row not there yet starts from its
 * initial values, version 0, which serve makes again). */
void zp_rowvers_note(zp_rowvers *v, const zp_sparse *store, const uint64_t *ids, size_t n);

/* After a pull read rows[n * dim] and their versions[n] from `store`:
 * serve each row as it was tau of its updates ago (version v - tau, or
 * the oldest kept after it if that one is not), rewriting its values and
 * version in place. Returns the rows served older than they are. */
size_t zp_rowvers_serve(const zp_rowvers *v, const zp_sparse *store, const uint64_t *ids, size_t n,
                        uint32_t tau, float *rows, uint32_t *versions);

/* Bytes the histories take (records and index, as allocated). */
uint64_t zp_rowvers_bytes(const zp_rowvers *v);

#endif
