/*
 * rround.h - a sparse table's held BSP rounds: the sparse pushes of the
 * clocks not closed yet, copied as they arrive, and, when a clock closes,
 * its pushes merged into one batch of distinct rows: in rank order, each
 * rank's pushes in the order they arrived, repeated rows summed in that
 * order. The merged batch is bit-for-bit the same whatever order the ranks'
 * pushes arrived in, so a round applied once from it is reproducible.
 *
 * This module stores and merges; it decides nothing. policy/bsp.c decides
 * what is held and when a clock closes (every live worker finished it); the
 * count of closed clocks is the table's round.closed, kept in snapshots.
 *
 * Replicated (docs/replication.md, "Replication after aggregation"): a
 * primary keeps a copy of each merge it applies (zp_rround_keep), which its
 * log carries in the round's entry; a backup is given that merge
 * (zp_rround_give) and holds the round's pushes without their rows (n 0),
 * so its merge of the clock is the primary's, bit for bit.
 */
#ifndef ZP_RROUND_H
#define ZP_RROUND_H

#include <stddef.h>
#include <stdint.h>

/* One held push: n ids, n * dim gradients, n row versions read or none. */
typedef struct zp_rround_push {
    int64_t clock;
    uint32_t rank;
    size_t n;
    uint64_t *ids; /* one allocation: ids, then the gradients, then versions */
    float *g;
    uint32_t *vers; /* NULL: the push carried none */
    size_t held_bytes;
} zp_rround_push;

/* A merged round handed over: kept by a replicated primary, or given to a
 * backup. One allocation: ids, then n * dim gradients, then n versions
 * (vers NULL unless vers_ok). */
typedef struct zp_rround_done {
    int64_t clock;
    size_t n;
    int vers_ok;
    uint64_t *ids;
    float *g;
    uint32_t *vers;
} zp_rround_done;

typedef struct zp_rround {
    zp_rround_push *held; /* in arrival order */
    size_t nheld, cap;
    uint64_t bytes; /* of the held pushes */
    /* the last merged clock (zp_rround_merge), valid until the next merge */
    uint64_t *ids;
    float *g;
    uint32_t *vers; /* the versions read; meaningful only with vers_ok */
    int vers_ok;    /* every merged push carried versions */
    size_t n, mcap, mdim;
    size_t *order;        /* scratch: the merged pushes' positions in held */
    uint32_t *slots;      /* scratch: id -> merged position + 1 (0: empty) */
    size_t nslots;        /* a power of two, >= 2 * n */
    uint64_t seed;        /* the slots' hash seed, random: ids come from the wire */
    int nranks;           /* ranks in the last merge */
    zp_rround_done *kept; /* primary: the merges applied since the log took them */
    size_t nkept, capkept;
    zp_rround_done *given; /* backup: the primary's merges of clocks not closed here yet */
    size_t ngiven, capgiven;
} zp_rround;

/* An empty state (nothing allocated until the first push). */
void zp_rround_init(zp_rround *rr);

/* Free what is held and the merge buffers; rr is left zeroed (its bytes 0,
 * a second fini frees nothing). */
void zp_rround_fini(zp_rround *rr);

/* Hold a copy of rank's push for `clock`: ids[0..n), g[0..n*dim), and
 * vers[0..n) or NULL. Nothing is kept of the caller's arrays. n 0 (ids
 * NULL) holds the push without rows: a backup's, whose round is given.
 * Returns 0, or ZEPS_ENOMEM when the copy cannot be made (nothing held). */
int zp_rround_hold(zp_rround *rr, uint32_t rank, int64_t clock, const uint64_t *ids, size_t n,
                   const float *g, size_t dim, const uint32_t *vers);

/* Merge and drop the held pushes of `clock` (see the top of this file);
 * a merge given for `clock` (zp_rround_give) is taken instead.
 * Returns the number of distinct rows, in rr->ids / rr->g / rr->vers
 * (vers: the version the first push naming the row read; meaningful only
 * when rr->vers_ok, every merged push carried them); rr->nranks says how
 * many ranks pushed. 0 when
 * nothing was held for `clock`. Returns (size_t)-1 when the merge buffers
 * cannot be made (nothing dropped). */
size_t zp_rround_merge(zp_rround *rr, int64_t clock, size_t dim);

/* Drop rank's held pushes for clocks >= from (it rejoined and redoes
 * them). */
void zp_rround_forget(zp_rround *rr, uint32_t rank, int64_t from);

/* Drop every held push, kept and given merge (rollback, restore). */
void zp_rround_clear(zp_rround *rr);

/* Primary: keep a copy of the last merge (of `clock`, rows of dim floats)
 * for the log. 0, or ZEPS_ENOMEM (nothing kept). */
int zp_rround_keep(zp_rround *rr, int64_t clock, size_t dim);

/* The merges kept (*n of them, in the order applied), valid until
 * zp_rround_kept_clear, which frees them. */
const zp_rround_done *zp_rround_kept(const zp_rround *rr, size_t *n);
void zp_rround_kept_clear(zp_rround *rr);

/* Backup: the primary's merge of `clock` (ids[0..n), g[0..n*dim), vers or
 * NULL; copied), taken by the next zp_rround_merge of that clock. 0, or
 * ZEPS_ENOMEM. */
int zp_rround_give(zp_rround *rr, int64_t clock, const uint64_t *ids, size_t n, const float *g,
                   size_t dim, const uint32_t *vers);

/* Drop the given merges not taken; returns how many there were. */
size_t zp_rround_given_clear(zp_rround *rr);

/* Move the rows of the held pushes whose ids `pick` chooses (pick(id,
 * arg) nonzero) into `into`: each push's chosen rows become one push of
 * `into` with its rank and clock, in the order held, and its other rows
 * stay in rr in its place (a push left with no row goes). So each rank's
 * pushes keep their order on either side, and a merge of either sums
 * their rows as a merge of rr would have (a live move hands a bsp
 * round's pushes of its slots to the target: docs/elastic.md). A push
 * that cannot be split for want of memory stays whole. Returns the rows
 * moved. */
size_t zp_rround_split(zp_rround *rr, zp_rround *into, int (*pick)(uint64_t id, void *arg),
                       void *arg, size_t dim);

/* The lowest clock a push is held for, or -1. */
int64_t zp_rround_first_clock(const zp_rround *rr);

/* True if a push is held, or a merge given, for a clock below `clock`. */
int zp_rround_holds_before(const zp_rround *rr, int64_t clock);

/* Bytes held and of the merge buffers. */
uint64_t zp_rround_bytes(const zp_rround *rr);

#endif
