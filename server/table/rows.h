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

#include "rowpast.h"
#include "rowvers.h"
#include "rround.h"
#include "sparse.h"
#include "zeps.pb-c.h"

/* A slot of the repeated-id set: taken by this check when stamp is the
 * set's current stamp; pos is the position of the id that took it. */
typedef struct zp_rows_slot {
    uint32_t stamp, pos;
} zp_rows_slot;

typedef struct zp_rows {
    zp_sparse *store;
    uint32_t dim;
    Zeps__TableSpec *spec; /* the declaration, to check re-declarations */
    uint64_t *ids;         /* scratch: a request's misaligned ids, copied */
    size_t ids_cap;
    struct zp_rows_slot *set; /* scratch: the repeated-id check (zp_rows_repeated) */
    uint32_t *set_home;       /* each id's home slot, hashed ahead of the probes */
    uint32_t set_stamp;
    size_t set_cap;
    uint64_t set_seed; /* its hash seed, random */
    uint32_t *cand;    /* scratch: a push's candidate rows (zp_rows_check_push) */
    uint32_t *unsure;  /* scratch: positions of its ids that may repeat */
    size_t cand_cap;
    float *grads; /* scratch: misaligned or decoded gradients */
    size_t grad_cap;
    uint32_t *vers; /* scratch: row versions read */
    size_t ver_cap;
    zp_rowvers kept; /* cluster.inject: the rows' last versions (kept.hist NULL: none) */
    zp_rround held;  /* bsp: the pushes of the clocks not closed yet (rround.c) */
    zp_rowpast past; /* bsp: the rows the last round applied to, as they were (rowpast.c) */
    struct zp_tier *tier; /* the cold tier (tiered.c opens it), or NULL; owned */
    uint64_t fetches;     /* cold reads started off the loop (op/sparse_ops.c) */
    uint64_t fetch_floor; /* ... those up to this one read a tier since replaced (rollback) */
    uint64_t cold_parked; /* pulls that waited for one */
} zp_rows;

struct zp_table_kind;
extern const struct zp_table_kind zp_rows_kind;

/* n ids at `data` (any alignment) as aligned u64: `data` itself when it is
 * aligned, else a copy in the scratch (valid until the next call). */
const uint64_t *zp_rows_ids(zp_rows *r, const void *data, size_t n);

/* Index of the second occurrence of a repeated id in ids[0..n), or -1. */
ptrdiff_t zp_rows_repeated(zp_rows *r, const uint64_t *ids, size_t n);

/* The same answer for a push's ids, found mostly by the store's index
 * (zp_sparse_probe), which also leaves each id's candidate row in r->cand
 * for the zp_sparse_push_probed of these ids (valid until the next call
 * of this or zp_rows_trim). */
ptrdiff_t zp_rows_check_push(zp_rows *r, const uint64_t *ids, size_t n);

/* Room for n floats of gradient scratch, or NULL if it cannot be made. */
float *zp_rows_grads(zp_rows *r, size_t n);

/* n row versions at `data` as aligned u32: `data` itself when aligned,
 * else a copy in the scratch. */
const uint32_t *zp_rows_versions(zp_rows *r, const void *data, size_t n);

/* Keep the last `keep` versions of every row pushed from now on (staleness
 * on demand); nothing if they are kept already. Returns 0, or ZEPS_EINVAL
 * with a message in err when rows of this dim cannot keep that many. */
int zp_rows_keep_versions(zp_rows *r, uint32_t keep, char *err, size_t errlen);

/* --- SCAN and PUT (op/scan.c): rows as records of the snapshot's row
 * layout (ZP_SNAP_ROW_LEN(dim, state floats per value) bytes: u64 id, u32
 * version, u32 touches, i64 last clock, the values, the optimizer state;
 * docs/snapshots.md), which snapshots write with the same function. --- */

/* Pack `row` as a record at `at` (any alignment). */
void zp_rows_record_pack(uint8_t *at, const zp_sparse_row *row, uint32_t dim, uint32_t spp);

/* Up to `max` rows, in storage order from record *cursor on (0: the
 * first), packed as records into out (room for max records). Sets *cursor
 * to where the next page starts, or to 0 when no row follows. A row keeps
 * its record while it lives, so a row present for a whole scan is in
 * exactly one page; rows made during it appear at most once each, evicted
 * ones at most once. Returns the rows written. */
uint64_t zp_rows_scan(const zp_rows *r, uint64_t *cursor, uint64_t max, uint8_t *out);

/* The ids of n records at `records` (any alignment), copied into the
 * scratch (valid until the next call of this or zp_rows_ids). */
const uint64_t *zp_rows_record_ids(zp_rows *r, const uint8_t *records, size_t n);

/* Put n checked records (ids of this shard, distinct, values and state
 * finite) into the store as they are, making missing rows (no admission;
 * a table at its capacity evicts to make room). */
void zp_rows_put(zp_rows *r, const uint8_t *records, uint64_t n);

/* Free the scratch (the store and the declaration stay). */
void zp_rows_scratch_free(zp_rows *r);

/* After a push: a large gradient or candidate scratch is not kept for the
 * next (usually small) one. */
void zp_rows_trim(zp_rows *r);

#endif
