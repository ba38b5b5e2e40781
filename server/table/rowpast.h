/*
 * rowpast.h - under bsp, the rows of a sparse table as the last applied
 * round found them (its pre-images), so a pull at that round's clock can be
 * answered as it was before the round: a worker killed after its push and
 * clock of round c reached one shard, and not another, redoes round c, and
 * the first shard, which closed the round without waiting for it, answers
 * its pull with round c's values (docs/faults.md, "A bsp worker killed
 * between its shards' pushes"). The dense counterpart is table.h `past`.
 *
 * Kept: the merged rows of the last round applied, each row's values and
 * version as they were (a row that did not exist: its initial values and
 * version 0, what a pull of it answered). Every other row is unchanged
 * since that round began, so a pull of it reads the store. Memory: the
 * rows of one round (ids, values, versions and a hash index), replaced at
 * every round; nothing for tables whose rounds change no row.
 *
 * Ownership: a zp_rowpast owns its arrays; it reads the table's store and
 * never changes it. Threading: the shard's loop thread only.
 */
#ifndef ZP_ROWPAST_H
#define ZP_ROWPAST_H

#include <stddef.h>
#include <stdint.h>

#include "sparse.h"

typedef struct zp_rowpast {
    int64_t clock; /* the round whose pre-images are kept; -1: none */
    uint32_t dim;
    size_t n, cap;   /* rows kept, room */
    uint64_t *ids;   /* cap */
    float *vals;     /* cap * dim */
    uint32_t *vers;  /* cap */
    uint32_t *slots; /* nslots: 1 + index into ids, 0 empty */
    size_t nslots;   /* a power of two >= 2 * cap, or 0 */
} zp_rowpast;

/* An empty zp_rowpast for rows of dim floats (keeps nothing). */
void zp_rowpast_init(zp_rowpast *p, uint32_t dim);

/* Free what p holds; it keeps nothing after (init again to reuse). */
void zp_rowpast_fini(zp_rowpast *p);

/* Keep nothing (the table's history is gone: a restore, a rollback). */
void zp_rowpast_clear(zp_rowpast *p);

/* Round `clock` is about to apply to ids[0..n) (distinct): keep those rows
 * as `store` holds them now, replacing what was kept. 0, or ZEPS_ENOMEM
 * (then nothing is kept). */
int zp_rowpast_keep(zp_rowpast *p, const zp_sparse *store, const uint64_t *ids, size_t n,
                    int64_t clock);

/* Round `clock` closed without changing a row: the rows a pull at that
 * clock reads are the store's (nothing to overwrite). */
void zp_rowpast_none(zp_rowpast *p, int64_t clock);

/* A pull at `clock` read out[n * dim] and versions[n] (may be NULL) for
 * ids[0..n) from the store: if the kept round is `clock`, overwrite the
 * rows kept with their pre-images. Returns the rows overwritten. */
size_t zp_rowpast_serve(const zp_rowpast *p, int64_t clock, const uint64_t *ids, size_t n,
                        float *out, uint32_t *versions);

/* Whether a pull at `clock` is one zp_rowpast_serve answers. */
int zp_rowpast_has(const zp_rowpast *p, int64_t clock);

#endif
