/*
 * sparse.h - one sparse table's rows on this shard.
 *
 * A sparse table maps u64 ids from an unbounded space to rows of `dim` f32
 * values. Row `id` lives on shard zp_sparse_shard_of(id, S) (common/
 * sparse_hash.h). Rows are created on first touch with the table's
 * initializer, seeded by (seed, id) only, so an id starts from the same values
 * whatever the shard count. Each row keeps its optimizer state beside its
 * values, a version (updates applied to that row) and the clock it was last
 * touched at.
 *
 * Memory: rows live in slabs (large chunks of fixed-size row records, freed
 * rows reused from a free list), found through one open-addressing index
 * (linear probing, backward-shift deletion) of 4-byte row numbers with their
 * hash beside them; no allocation per row.
 *
 * Admission: with admit_count k > 1 an unknown id gets a row only once it
 * was touched k times, counted in a count-min sketch (fixed memory, may only
 * over-count); with admit_prob p < 1 each touch of an unknown id admits it
 * with probability p (a seeded generator). An id not admitted has no row: a
 * pull returns its initial values, a push of it is counted and skipped.
 *
 * Eviction: rows untouched for ttl_clocks clocks are dropped when the clock
 * advances; with a row capacity or memory budget, inserting past it evicts
 * the least recently (lru) or least frequently (lfu) touched row among a
 * random sample (the Redis approximation; exact order would cost a list or
 * heap per row).
 *
 * The store is split by concept: sparse.c (records, pull/push, snapshots),
 * rowindex.c (the index), admit.c (admission), evict.c (eviction); their
 * shared layout is sparse_int.h.
 *
 * Threading: the shard's loop thread only. Not copy-on-write: a pull copies
 * rows into its reply.
 */
#ifndef ZP_SPARSE_H
#define ZP_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "evict.h" /* zp_evict_policy */
#include "hist.h"
#include "init.h"
#include "rng.h"

typedef struct zp_sparse_opts {
    uint32_t dim;             /* 1..4096 */
    const char *optimizer;    /* "sgd" | "adagrad" | "adam" | "ftrl" */
    float lr;                 /* sgd/adagrad/adam step; ftrl alpha */
    float beta1, beta2;       /* adam (0.9, 0.999 if 0) */
    float eps;                /* adagrad/adam (1e-8 if 0) */
    float weight_decay;       /* L2 added to the gradient (sgd/adagrad/adam) */
    float l1, l2;             /* ftrl regularisation (>= 0) */
    float ftrl_beta;          /* ftrl beta (1 if 0) */
    zp_init_kind init;
    double init_scale;
    uint64_t seed;
    uint32_t admit_count;     /* 0 or 1: admit on first touch */
    double admit_prob;        /* 0 or 1: always (when admit_count <= 1) */
    uint64_t ttl_clocks;      /* 0 = no TTL */
    uint64_t capacity_rows;   /* 0 = unbounded */
    uint64_t memory_budget;   /* bytes of rows + state + index; 0 = unbounded */
    zp_evict_policy evict;
    /* Lead columns: values [0, lead_cols) of every row take their own step
     * and initializer (e.g. a per-id bias kept in the row of its
     * embedding); 0 = none. The other hyper-parameters are the table's. */
    uint32_t lead_cols; /* 0..dim */
    float lead_lr;      /* > 0 when lead_cols > 0 */
    zp_init_kind lead_init;
    double lead_init_scale;
} zp_sparse_opts;

typedef struct zp_sparse_counters {
    uint64_t rows;            /* held now */
    uint64_t created;         /* rows created (admitted) */
    uint64_t not_admitted;    /* touches of unknown ids that did not (yet) admit them */
    uint64_t pushes_skipped;  /* row gradients dropped because the id has no row */
    uint64_t evicted_ttl;
    uint64_t evicted_capacity; /* by capacity or memory budget */
    uint64_t bytes;           /* rows + state + index + sketch, as allocated */
    uint64_t bytes_per_row;   /* one row record: header + values + state */
    uint64_t hits;            /* touches of rows found in this (the hot) tier */
} zp_sparse_counters;

typedef struct zp_sparse zp_sparse;
struct zp_tier;

/* Validate o and create an empty table. On error returns ZEPS_EINVAL or
 * ZEPS_EOPTIM with a message in err (naming the field). */
int zp_sparse_new(zp_sparse **out, const zp_sparse_opts *o, char *err, size_t errlen);
void zp_sparse_destroy(zp_sparse **tp);

uint32_t zp_sparse_dim(const zp_sparse *t);
int zp_sparse_state_per_value(const zp_sparse *t); /* floats of state per value */

/* The initial values of row `id` (dim floats): depend only on
 * (init, init_scale, lead columns, seed, id). */
void zp_sparse_init_row(const zp_sparse *t, uint64_t id, float *out);

/* Read n ids (distinct or not) into out[n * dim] and, if versions is not
 * NULL, each row's version into versions[n] (0 for an id with no row).
 * A pull is a touch: unknown ids go through admission and may be created;
 * known rows get last_clock = clock. */
void zp_sparse_pull(zp_sparse *t, const uint64_t *ids, size_t n, int64_t clock, float *out,
                    uint32_t *versions);

/* Apply gradients g[n * dim] (row i for ids[i]; ids distinct) scaled by
 * `scale`, each row with its own optimizer state and step count (its
 * version). Unknown ids go through admission first; a gradient for an id
 * that gets no row is skipped and counted. If read_versions is not NULL,
 * tau = row version before the update - read_versions[i] is added to `tau`
 * and to tau_by_freq in the row's frequency bucket (zp_freq_bucket of its
 * touches, this push's included; both given or nothing is recorded) for every
 * applied row. Returns the number of rows applied. The caller has checked
 * that g is finite. */
size_t zp_sparse_push(zp_sparse *t, const uint64_t *ids, size_t n, const float *g, float scale,
                      int64_t clock, const uint32_t *read_versions, zp_hist *tau,
                      zp_freq_hist *tau_by_freq);

/* The first half of a push, touching no row: look up ids[0..n) in the
 * index (no touch, no admission, no creation) and write each id's
 * candidate row to cand[i] (ZP_SPARSE_NO_ROW when it has none yet) for the
 * zp_sparse_push_probed that follows. Also narrow the check for repeated
 * ids: returns k and the positions unsure[0..k), ascending, outside of
 * which no id repeats, and inside which every repeated id has all of its
 * positions (ids without a row, and ids whose candidate another position
 * shares: a repeat, or two ids whose hashes share the 32 bits an index
 * slot keeps). cand and unsure hold n entries each and stay the caller's. */
#define ZP_SPARSE_NO_ROW UINT32_MAX
size_t zp_sparse_probe(zp_sparse *t, const uint64_t *ids, size_t n, uint32_t *cand,
                       uint32_t *unsure);

/* zp_sparse_push with the candidates a zp_sparse_probe of the same ids
 * wrote (borrowed for the call). Rows created or evicted since the probe
 * are allowed: each candidate is checked against its id before use. */
size_t zp_sparse_push_probed(zp_sparse *t, const uint64_t *ids, size_t n, const uint32_t *cand,
                             const float *g, float scale, int64_t clock,
                             const uint32_t *read_versions, zp_hist *tau,
                             zp_freq_hist *tau_by_freq);

/* Keep the rows evicted under capacity or budget in `cold` (borrowed: it
 * stays open while t lives) and take them back, exactly, when touched;
 * NULL: evicted rows are dropped. A cold row past the TTL is dropped when
 * next touched (as the TTL scan that passed it would have). After a
 * failure of the tier (zp_tier_error) no row moves between tiers any
 * more: an id that needs one gets no row. */
void zp_sparse_set_cold(zp_sparse *t, struct zp_tier *cold);

/* Make row `id` hot again from `rec`, its record as the cold tier holds
 * it (read off the loop, fetch.h), without touching it: the request that
 * asked for it touches it when served. Nothing if the row is hot already
 * or no longer in the tier's keeping (past its TTL: dropped). Returns
 * whether it was made hot. */
int zp_sparse_install(zp_sparse *t, uint64_t id, const void *rec);

/* The ids[0..n) a read off the loop found in neither tier, with nothing
 * run on the loop since: each one's next touch creates its row (through
 * admission) without reading the cold tier again. Valid only until the
 * loop does something else: zp_sparse_hint_absent(t, NULL, 0) drops
 * what is left. */
void zp_sparse_hint_absent(zp_sparse *t, const uint64_t *ids, size_t n);

/* If row `id` is hot: note that the cold tier holds an out-of-date
 * record of it (deleted if the row is dropped for good) and return true;
 * false if it is not hot (the tier's record is the row). A restore marks
 * the rows its checkpoint holds this way. */
bool zp_sparse_mark_copy(zp_sparse *t, uint64_t id);

/* Whether row `id` is in the hot tier (no touch). */
bool zp_sparse_has(const zp_sparse *t, uint64_t id);

/* zp_sparse_has, and if so pin the row: eviction passes it over (while
 * it has unpinned rows to choose from) until the row is next touched. For
 * the hot rows of a pull that waits for its cold ones (zp_sparse_install
 * pins those). */
bool zp_sparse_pin(zp_sparse *t, uint64_t id);

/* Bytes of one row record as the tier stores it. */
size_t zp_sparse_record_bytes(const zp_sparse *t);

/* Drop rows untouched for ttl_clocks as of `clock` (cheap when nothing is
 * due: a full scan runs at most every max(1, ttl/4) clocks). Returns rows
 * evicted. */
size_t zp_sparse_expire(zp_sparse *t, int64_t clock);

/* Drop every hot row whose id pred(id, arg) accepts (a live move's
 * rows, after its commit at the source or its abort at the target:
 * server/move/move.c); counted in no eviction counter. Returns rows
 * dropped. */
size_t zp_sparse_drop_where(zp_sparse *t, bool (*pred)(uint64_t id, void *arg), void *arg);

void zp_sparse_get_counters(const zp_sparse *t, zp_sparse_counters *out);

/* --- for snapshots and tests --- */

/* One row as stored. values and state point into the table (valid until the
 * next call that may create or evict rows). */
typedef struct zp_sparse_row {
    uint64_t id;
    uint32_t version;
    uint32_t freq;            /* touches, saturating */
    int64_t last_clock;
    float *values;            /* dim */
    float *state;             /* state_per_value * dim, block k at state[k * dim] */
} zp_sparse_row;

/* Iterate over rows in storage order: *cursor starts at 0; returns false at
 * the end. */
bool zp_sparse_next(const zp_sparse *t, uint64_t *cursor, zp_sparse_row *row);

/* Records handed out so far (the storage order's end: a zp_sparse_next
 * cursor is at most this). It never shrinks while the store lives. */
uint64_t zp_sparse_records(const zp_sparse *t);

/* Find a row without touching it (no admission, no clock update). */
bool zp_sparse_get(const zp_sparse *t, uint64_t id, zp_sparse_row *row);

/* Set the event counters (created, not_admitted, pushes_skipped,
 * evicted_ttl, evicted_capacity) from c, as a snapshot recorded them; rows
 * and bytes stay what the store holds. */
void zp_sparse_set_history(zp_sparse *t, const zp_sparse_counters *c);

/* Make lr (finite, > 0: the caller checked) the rows' learning rate; the
 * lead columns take lead_lr x lr / the declared lr. */
void zp_sparse_set_lr(zp_sparse *t, float lr);

/* Insert or overwrite a row exactly as given (restore from a snapshot):
 * bypasses admission, may evict under capacity. */
void zp_sparse_put(zp_sparse *t, const zp_sparse_row *row);

/* A row record of the tier (zp_sparse_record_bytes, 8-aligned) as a row:
 * values and state point into rec. */
void zp_sparse_record_row(const zp_sparse *t, const void *rec, zp_sparse_row *row);

#endif
