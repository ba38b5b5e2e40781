/*
 * sparse_int.h - the layout of a sparse table's store, private to the files
 * that make it up: sparse.c (records, rows, pull/push, snapshots),
 * rowindex.c (the id -> row index), admit.c (admission) and evict.c (TTL and
 * capacity eviction). Nothing else includes it; everyone else sees the
 * opaque zp_sparse of sparse.h.
 *
 * The struct body lives here rather than in sparse.c because the per-row
 * hot paths (a pull or push touches every id through the index and the
 * record lookup) must stay static inline across the split: an out-of-line
 * call per row would cost more than the lookup itself. For the same reason
 * the short macro names below are kept; they are visible only to those
 * four files.
 *
 * Records. A row is one fixed-size record: a 24-byte header (id,
 * last_clock, version, freq; a free record is marked by last_clock ==
 * CLOCK_FREE and keeps its free-list link in freq), then `dim` values, then
 * state_per_value * dim optimizer floats, rounded up to 8 bytes. Records
 * live in chunks of a power-of-two number of rows, so a row number maps to
 * its record with a shift and a mask.
 *
 * Threading: the shard's loop thread only, like the table.
 */
#ifndef ZP_SPARSE_INT_H
#define ZP_SPARSE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "optim.h"
#include "sparse.h"

#define HDR_BYTES  24
#define ROW_NONE   UINT32_MAX
#define MAX_ROWS   ((uint64_t)1 << 31) /* row numbers are u32; index <= 2^32 slots */
#define CLOCK_FREE INT64_MIN           /* last_clock of a free record */

/* The record header; values and state follow it. */
typedef struct rowhdr {
    uint64_t id;
    int64_t last_clock; /* CLOCK_FREE: the record is free */
    uint32_t version;
    uint32_t freq; /* the free-list link while the record is free */
} rowhdr;

_Static_assert(sizeof(rowhdr) == HDR_BYTES, "row header is 24 bytes");

static inline bool zp_sparse_rec_live(const rowhdr *h)
{
    return h->last_clock != CLOCK_FREE;
}

/* A touch clock a live row may hold (CLOCK_FREE marks free records). */
static inline int64_t zp_sparse_live_clock(int64_t clock)
{
    return clock == CLOCK_FREE ? CLOCK_FREE + 1 : clock;
}

/* One index slot (rowindex.c). */
typedef struct slot {
    uint32_t row;  /* ROW_NONE = empty */
    uint32_t hash; /* low 32 bits of zp_sparse_hash_id(id, t->index_seed) */
} slot;

struct zp_sparse {
    uint32_t dim;
    int spv;
    const zp_optim_ops *optim;
    zp_hyper h; /* defaults applied; the row kernels widen it to double */
    zp_init_kind init;
    double init_scale;
    uint32_t lead;   /* lead columns (zp_sparse_opts.lead_cols) */
    zp_hyper lead_h; /* h with the lead columns' lr */
    float lr0, lead_lr0; /* lr and lead_lr as declared (zp_sparse_set_lr scales from them) */
    zp_init_kind lead_init;
    double lead_init_scale;
    uint64_t seed;
    uint32_t admit_count;
    double admit_prob;
    uint64_t ttl;
    uint64_t capacity;
    uint64_t budget;
    zp_evict_policy evict;

    size_t rec;          /* bytes per record */
    uint32_t chunk_log2; /* rows per chunk = 1 << chunk_log2 */
    zp_arena arena;          /* the chunks' memory, back to back in huge pages */
    unsigned char **chunks;
    size_t nchunks, chunks_cap;
    uint32_t nalloc;    /* records ever handed out (high-water mark) */
    uint32_t free_head; /* ROW_NONE if empty */

    slot *index;         /* rowindex.c */
    uint64_t icap;       /* power of two */
    uint64_t index_seed; /* id_hash: random per table */

    uint16_t *sketch; /* admit.c: NULL unless admit_count > 1 */
    uint64_t sketch_seed;

    uint64_t *marks;   /* zp_sparse_probe: 2 bits per record, all clear between calls */
    size_t mark_words; /* records covered / 64 */
    uint32_t *cand;    /* a pull's candidates, or a push's given none (sparse.c) */
    size_t cand_cap;

    zp_rng rng_admit, rng_sample;
    int64_t next_scan; /* evict.c: the next TTL scan */
    int64_t last_scan; /* ... and the clock of the last one (a cold row's TTL) */
    bool scanned;

    struct zp_tier *cold;    /* borrowed: the table's cold tier (tier/tier.h), or NULL */
    unsigned char *cold_rec; /* one record read from it */
    /* rows made hot for a pull that waits for them (zp_sparse_install), not
     * touched yet: eviction passes them over while it can (1 bit per record) */
    uint64_t *pins;
    size_t pin_words;
    uint64_t npinned;
    /* hot rows whose record the cold tier still holds, out of date: a
     * promotion does not delete it (the row's next demotion overwrites
     * it), so a row dropped for good (TTL) deletes it (1 bit per record) */
    uint64_t *copies;
    size_t copy_words;
    /* ids a read off the loop found in neither tier (zp_sparse_hint_absent),
     * each used by its first touch, which then needs no read: an open-
     * addressing set, state 0 empty, 1 held, 2 used */
    uint64_t *hint;
    unsigned char *hint_state;
    size_t hint_cap, nhint;

    zp_sparse_counters c;
};

/* sparse_opts.c: check o (0, or ZEPS_EINVAL / ZEPS_EOPTIM naming the
 * field in err; *optim its optimizer); the bytes of one record; records per
 * chunk as a power of two (about 4 MiB, or 1/16 of a memory budget, at
 * most 64k). */
int zp_sparse_opts_check(const zp_sparse_opts *o, const zp_optim_ops **optim, char *err,
                         size_t errlen);
size_t zp_sparse_opts_rec_bytes(uint32_t dim, int spv);
uint32_t zp_sparse_opts_chunk_log2(size_t rec, uint64_t budget);

/* The record of row number r. */
static inline rowhdr *zp_sparse_rec_at(const zp_sparse *t, uint32_t r)
{
    uint32_t mask = ((uint32_t)1 << t->chunk_log2) - 1;
    return (rowhdr *)(t->chunks[r >> t->chunk_log2] + (size_t)(r & mask) * t->rec);
}

static inline float *zp_sparse_rec_values(rowhdr *h)
{
    return (float *)(h + 1);
}

static inline float *zp_sparse_rec_state(const zp_sparse *t, rowhdr *h)
{
    return (float *)(h + 1) + t->dim;
}

/* Whether record r is pinned (made hot for a waiting pull, untouched). */
static inline bool zp_sparse_pinned(const zp_sparse *t, uint32_t r)
{
    return t->npinned != 0 && (size_t)(r >> 6) < t->pin_words && (t->pins[r >> 6] >> (r & 63) & 1);
}

/* Record r touched or dropped: no longer pinned. */
static inline void zp_sparse_unpin(zp_sparse *t, uint32_t r)
{
    if (zp_sparse_pinned(t, r)) {
        t->pins[r >> 6] &= ~((uint64_t)1 << (r & 63));
        t->npinned--;
    }
}

/* Whether hot record r has an out-of-date copy in the cold tier. */
static inline bool zp_sparse_has_copy(const zp_sparse *t, uint32_t r)
{
    return (size_t)(r >> 6) < t->copy_words && (t->copies[r >> 6] >> (r & 63) & 1);
}

/* Record r dropped, or its copy deleted: it has none. */
static inline void zp_sparse_copy_gone(zp_sparse *t, uint32_t r)
{
    if ((size_t)(r >> 6) < t->copy_words)
        t->copies[r >> 6] &= ~((uint64_t)1 << (r & 63));
}

/* pins.c: record r (hot) has an out-of-date copy in the cold tier. */
void zp_pins_copy_kept(zp_sparse *t, uint32_t r);

/* pins.c: pin record r (eviction passes it over until it is touched);
 * hold ids[0..n) as known to be in neither tier (dropping what was held;
 * n = 0: just drop it); whether id is held (used up: its first touch makes
 * its row without a read). */
void zp_pins_pin(zp_sparse *t, uint32_t r);
void zp_pins_hint(zp_sparse *t, const uint64_t *ids, size_t n);
bool zp_pins_take_hint(zp_sparse *t, uint64_t id);

/* Would taking one more record need a new chunk? */
static inline bool zp_sparse_need_chunk(const zp_sparse *t)
{
    return t->free_head == ROW_NONE && (uint64_t)t->nalloc == (uint64_t)t->nchunks << t->chunk_log2;
}

#endif
