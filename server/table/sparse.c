/*
 * sparse.c - one sparse table's rows on this shard (see sparse.h): the
 * table's lifecycle and options, its row records, and the pull/push/snapshot
 * paths over them. The record layout and the struct are in sparse_int.h;
 * the id index is rowindex.c, admission admit.c, TTL and capacity eviction
 * evict.c.
 *
 * Storage. Records (sparse_int.h) live in chunks of a power-of-two number of
 * rows (at most 64k rows and about 4 MiB per chunk, less under a small
 * memory budget), allocated as the table grows, so a row number maps to its
 * record with a shift and a mask and no row is ever malloc'ed on its own.
 * Evicted records go on a free list and are reused before the table takes a
 * fresh one.
 *
 * Optimizers compute in double from the stored floats (rows are short, the
 * cost is in the lookups) and store float; see the per-row ops in optim/.
 * Out of memory aborts (zp_alloc): bound a table with capacity_rows or
 * memory_budget; the shard refuses requests that would create rows past
 * its own limits before they get here (state/quota.c).
 */
#include "sparse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "evict.h"
#include "alloc.h"
#include "errors.h"
#include "optim.h"
#include "rowcopy.h"
#include "rowindex.h"
#include "sparse_hash.h"
#include "sparse_int.h"
#include "tier.h"
#include "zeps_errors.h"

_Static_assert(ZP_SPARSE_NO_ROW == ROW_NONE, "sparse.h's no-row is the store's");

#define INIT_HASH_SEED 0x7a6570735f696e69ull /* "zeps_ini" */

/* ---------------------------------------------------------------- lifecycle */

int zp_sparse_new(zp_sparse **out, const zp_sparse_opts *o, char *err, size_t errlen)
{
    const zp_optim_ops *optim = NULL;
    int rc = zp_sparse_opts_check(o, &optim, err, errlen);
    if (rc != 0)
        return rc;

    zp_sparse *t = zp_alloc_zeroed(1, sizeof *t);
    t->dim = o->dim;
    t->optim = optim;
    t->spv = optim->state_per_param;
    t->h = (zp_hyper){
        .lr = o->lr,
        .beta1 = o->beta1,
        .beta2 = o->beta2,
        .eps = o->eps,
        .weight_decay = o->weight_decay,
        .l1 = o->l1,
        .l2 = o->l2,
        .ftrl_beta = o->ftrl_beta != 0 ? o->ftrl_beta : 1.0f,
    };
    zp_hyper_defaults(&t->h);
    t->init = o->init;
    t->init_scale = o->init_scale;
    t->lead = o->lead_cols;
    t->lead_h = t->h;
    t->lead_h.lr = o->lead_lr;
    t->lr0 = t->h.lr;
    t->lead_lr0 = o->lead_lr;
    t->lead_init = o->lead_init;
    t->lead_init_scale = o->lead_init_scale;
    t->seed = o->seed;
    t->admit_count = o->admit_count;
    t->admit_prob = o->admit_prob == 0 ? 1.0 : o->admit_prob;
    t->ttl = o->ttl_clocks;
    t->capacity = o->capacity_rows;
    t->budget = o->memory_budget;
    t->evict = o->evict;

    t->rec = zp_sparse_opts_rec_bytes(t->dim, t->spv);
    t->chunk_log2 = zp_sparse_opts_chunk_log2(t->rec, t->budget);
    t->free_head = ROW_NONE;
    zp_rowindex_init(t);
    zp_admit_init(t);
    zp_evict_init(t);
    t->c.bytes = t->icap * sizeof(slot) + zp_admit_sketch_bytes(t->admit_count);
    t->c.bytes_per_row = t->rec;
    *out = t;
    return 0;
}

void zp_sparse_destroy(zp_sparse **tp)
{
    if (tp == NULL || *tp == NULL)
        return;
    zp_sparse *t = *tp;
    zp_arena_fini(&t->arena); /* the chunks */
    free(t->chunks);
    zp_alloc_huge_free(t->index, t->icap * sizeof(slot));
    free(t->sketch);
    free(t->marks);
    free(t->cand);
    free(t->cold_rec);
    free(t->pins);
    free(t->copies);
    free(t->hint);
    free(t->hint_state);
    free(t);
    *tp = NULL;
}

uint32_t zp_sparse_dim(const zp_sparse *t)
{
    return t->dim;
}

int zp_sparse_state_per_value(const zp_sparse *t)
{
    return t->spv;
}

void zp_sparse_get_counters(const zp_sparse *t, zp_sparse_counters *out)
{
    *out = t->c;
}

void zp_sparse_set_lr(zp_sparse *t, float lr)
{
    t->h.lr = lr;
    t->lead_h.lr = (float)((double)t->lead_lr0 * lr / t->lr0);
}

void zp_sparse_set_history(zp_sparse *t, const zp_sparse_counters *c)
{
    t->c.created = c->created;
    t->c.not_admitted = c->not_admitted;
    t->c.pushes_skipped = c->pushes_skipped;
    t->c.evicted_ttl = c->evicted_ttl;
    t->c.evicted_capacity = c->evicted_capacity;
}

/* ---------------------------------------------------------------- records */

/* A record number for a new row (free list first, then the high-water mark,
 * then a new chunk). */
static uint32_t rec_take(zp_sparse *t)
{
    if (t->free_head != ROW_NONE) {
        uint32_t r = t->free_head;
        t->free_head = zp_sparse_rec_at(t, r)->freq; /* the link of a free record */
        return r;
    }
    if (zp_sparse_need_chunk(t)) {
        if (t->nchunks == t->chunks_cap) {
            t->chunks_cap = t->chunks_cap ? 2 * t->chunks_cap : 8;
            t->chunks = zp_alloc_resize(t->chunks, t->chunks_cap * sizeof *t->chunks);
        }
        size_t bytes = t->rec << t->chunk_log2;
        /* Records past the high-water mark are never read (iteration and
         * sampling stop at nalloc), so the chunk needs no clearing. */
        t->chunks[t->nchunks++] = zp_arena_take(&t->arena, bytes);
        t->c.bytes += bytes;
    }
    return t->nalloc++;
}

void zp_sparse_init_row(const zp_sparse *t, uint64_t id, float *out)
{
    /* A per-row seed, then elements 0..dim-1 of the counter-based
     * initialiser: no id * dim product that could overflow or collide. */
    uint64_t rs = zp_rng_mix64(t->seed ^ zp_sparse_hash_id(id, INIT_HASH_SEED));
    uint32_t a = t->lead;
    if (a > 0)
        zp_init_fill(out, 0, a, t->lead_init, t->lead_init_scale, rs);
    zp_init_fill(out + a, a, t->dim - a, t->init, t->init_scale, rs);
}

/* One row's update: the lead columns with their step, then the rest. */
static inline void apply_row(const zp_sparse *t, rowhdr *hd, const float *g, float scale)
{
    float *w = zp_sparse_rec_values(hd), *s = zp_sparse_rec_state(t, hd);
    uint32_t a = t->lead;
    if (a > 0)
        t->optim->apply_row(&t->lead_h, a, t->dim, w, s, g, scale, hd->version);
    if (a < t->dim)
        t->optim->apply_row(&t->h, t->dim - a, t->dim, w + a, s + a, g + a, scale, hd->version);
}

/* Create row `id` (not present; hash h) with header fields as given and
 * values/state left to the caller. NULL if no room. */
static rowhdr *row_create(zp_sparse *t, uint64_t id, uint64_t h)
{
    if (!zp_evict_make_room(t))
        return NULL;
    if (zp_rowindex_needs_grow(t))
        zp_rowindex_grow(t);
    uint32_t r = rec_take(t);
    rowhdr *hd = zp_sparse_rec_at(t, r);
    memset(hd, 0, HDR_BYTES); /* last_clock 0: live */
    hd->id = id;
    zp_rowindex_put(t->index, t->icap - 1, (slot){.row = r, .hash = (uint32_t)h});
    t->c.rows++;
    return hd;
}

/* ---------------------------------------------------------------- tiers */

void zp_sparse_set_cold(zp_sparse *t, struct zp_tier *cold)
{
    t->cold = cold;
    if (cold != NULL && t->cold_rec == NULL)
        t->cold_rec = zp_alloc(t->rec);
}

size_t zp_sparse_record_bytes(const zp_sparse *t)
{
    return t->rec;
}

/* Would the TTL scan that ran last have dropped a row touched at `lc`? */
static bool ttl_passed(const zp_sparse *t, int64_t lc)
{
    return t->ttl != 0 && t->scanned && t->last_scan >= lc &&
           (uint64_t)t->last_scan - (uint64_t)lc >= t->ttl;
}

/* Row `id` (hash h, hot now) has an out-of-date record in the cold tier,
 * which a drop for good must delete (evict.c). */
static void copy_kept(zp_sparse *t, uint64_t id, uint64_t h)
{
    zp_pins_copy_kept(t, t->index[zp_rowindex_find(t, id, h)].row);
}

/* Row `id` (hash h; not hot) made hot from `src`, a record of the cold
 * tier that holds it, untouched: 1 and *out; 0 if the record is past its
 * TTL (dropped from the tier); -1 if the tier failed or no hot record can
 * be had. The record stays in the tier (not deleted: the row's next
 * demotion overwrites it). */
static int install(zp_sparse *t, uint64_t id, uint64_t h, const void *src, rowhdr **out)
{
    if (ttl_passed(t, ((const rowhdr *)src)->last_clock)) {
        t->c.evicted_ttl++;
        return zp_tier_forget(t->cold, id, true) == 0 ? 0 : -1;
    }
    rowhdr *hd = row_create(t, id, h);
    if (hd == NULL)
        return -1;
    memcpy(hd, src, t->rec);
    zp_tier_promoted(t->cold, true);
    copy_kept(t, id, h);
    *out = hd;
    return 1;
}

void zp_sparse_hint_absent(zp_sparse *t, const uint64_t *ids, size_t n)
{
    zp_pins_hint(t, ids, n);
}

int zp_sparse_install(zp_sparse *t, uint64_t id, const void *rec)
{
    uint64_t h = zp_rowindex_hash(t, id);
    rowhdr *hd;
    if (t->cold == NULL || zp_rowindex_find(t, id, h) >= 0)
        return 0; /* touched on the loop since: hot already */
    if (install(t, id, h, rec, &hd) <= 0)
        return 0;
    /* pinned until touched, so that the rows made hot for one pull do not
     * evict one another before it is served */
    zp_pins_pin(t, t->index[zp_rowindex_find(t, id, h)].row);
    return 1;
}

bool zp_sparse_mark_copy(zp_sparse *t, uint64_t id)
{
    int64_t at = zp_rowindex_find(t, id, zp_rowindex_hash(t, id));
    if (at >= 0)
        zp_pins_copy_kept(t, t->index[at].row);
    return at >= 0;
}

bool zp_sparse_pin(zp_sparse *t, uint64_t id)
{
    int64_t at = zp_rowindex_find(t, id, zp_rowindex_hash(t, id));
    if (at < 0)
        return false;
    zp_pins_pin(t, t->index[at].row);
    return true;
}

/* Take row `id` (hash h; not in the hot tier) back from the cold tier,
 * read on the loop's thread, touched at `clock`: 1 and *out, 0 if the
 * tier does not hold it (or held it past its TTL: dropped now), -1 if the
 * tier failed or no hot record can be had (the id gets no row). */
static int promote(zp_sparse *t, uint64_t id, uint64_t h, int64_t clock, rowhdr **out)
{
    int got = zp_tier_fetch(t->cold, id, t->cold_rec);
    if (got <= 0)
        return got;
    rowhdr *hd = NULL;
    int rc = install(t, id, h, t->cold_rec, &hd);
    if (rc <= 0)
        return rc;
    hd->freq += hd->freq != UINT32_MAX;
    hd->last_clock = clock;
    *out = hd;
    return 1;
}

/* ---------------------------------------------------------------- touch */

/* Touch row `id` at `clock`: the existing row, a new one if admitted (with
 * initial values and zero state), or NULL. */
static rowhdr *touch(zp_sparse *t, uint64_t id, int64_t clock)
{
    uint64_t h = zp_rowindex_hash(t, id);
    int64_t at = zp_rowindex_find(t, id, h);
    rowhdr *hd;

    if (at >= 0) {
        hd = zp_sparse_rec_at(t, t->index[at].row);
        if (hd->freq != UINT32_MAX)
            hd->freq++;
        hd->last_clock = clock;
        t->c.hits++;
        zp_sparse_unpin(t, t->index[at].row);
        return hd;
    }
    if (t->cold != NULL && !zp_pins_take_hint(t, id)) {
        int p = promote(t, id, h, clock, &hd);
        if (p != 0)
            return p > 0 ? hd : NULL;
    }
    if (!zp_admit_touch(t, h) || (hd = row_create(t, id, h)) == NULL) {
        t->c.not_admitted++;
        return NULL;
    }
    hd->freq = 1;
    hd->last_clock = clock;
    zp_sparse_init_row(t, id, zp_sparse_rec_values(hd));
    memset(zp_sparse_rec_state(t, hd), 0, (size_t)t->spv * t->dim * sizeof(float));
    t->c.created++;
    return hd;
}

/* ------------------------------------------------------- candidates
 *
 * Pulls and pushes find an id's row in two steps: its candidate from the
 * index alone, then the candidate's record checked against the id. */

/* The first slot from h's home that is empty or holds h's 32 bits: the
 * row there, or ROW_NONE. */
static inline uint32_t candidate(const zp_sparse *t, uint64_t h)
{
    const uint64_t mask = t->icap - 1;
    const uint32_t h32 = (uint32_t)h;
    for (uint64_t i = h & mask;; i = (i + 1) & mask) {
        slot e = t->index[i];
        if (e.row == ROW_NONE || e.hash == h32)
            return e.row;
    }
}

/* The record of candidate row r if it holds `id` (a candidate is only a
 * guess: another id with the same 32 hash bits, or a record evicted since
 * it was found, free now or retaken), touched at `clock`; else NULL, for
 * the one-at-a-time path to decide. */
static inline rowhdr *hit(const zp_sparse *t, uint32_t r, uint64_t id, int64_t clock)
{
    if (r == ROW_NONE)
        return NULL;
    rowhdr *hd = zp_sparse_rec_at(t, r);
    if (hd->id != id || !zp_sparse_rec_live(hd))
        return NULL;
    hd->freq += hd->freq != UINT32_MAX;
    hd->last_clock = clock;
    return hd;
}

/* always_inline: gcc finds a void function of prefetches free of side
 * effects and deletes calls to it that are not inlined yet. */
static inline __attribute__((always_inline)) void prefetch_rec(const zp_sparse *t, uint32_t r)
{
    if (r == ROW_NONE)
        return;
    const char *rec = (const char *)zp_sparse_rec_at(t, r);
    __builtin_prefetch(rec, 1);
    if (t->rec > 64)
        __builtin_prefetch(rec + 64, 1);
}

/* ------------------------------------------------------- pulls and pushes
 *
 * A pull or push runs in two passes, each streaming through the ids with
 * the cache misses of the next AHEAD ids prefetched: the probe hashes every
 * id and reads its index slots, comparing only the 32 hash bits a slot
 * holds, and gives each id a candidate row; the second pass reads each
 * candidate's record, checks it (hit) and copies or updates the row. An id
 * whose candidate is not its row takes the one-at-a-time path (touch),
 * which may create a row (a pull's repeated and new ids take it too).
 * Results and their order are those of touching the ids one by one.
 *
 * zp_sparse_probe also narrows the check for repeated ids, at the cost of
 * two bits per record: equal ids probe the same slots, so they get the same
 * candidate. A found row is marked "seen" the first time and "twice" the
 * next; only positions whose candidate is no row or a row marked twice can
 * hold a repeat, and only they are left to the caller's exact check. Ids
 * with no row are new, and two distinct ids share a candidate when their
 * hashes share the 32 bits a slot keeps (about n^2 / 2^33 pairs in a push
 * of n ids: one in a push of 100k): in a trained table both are few. */
#define AHEAD 16

/* The marks cover every record handed out: for each 64 records, a word of
 * "seen" bits, then a word of "twice" bits. */
static void marks_fit(zp_sparse *t)
{
    size_t words = ((size_t)t->nalloc + 63) / 64;
    if (words <= t->mark_words)
        return;
    size_t nw = words < 1024 ? 1024 : words + words / 2;
    t->marks = zp_alloc_resize(t->marks, 2 * nw * sizeof(uint64_t));
    memset(t->marks + 2 * t->mark_words, 0, 2 * (nw - t->mark_words) * sizeof(uint64_t));
    t->mark_words = nw;
}

/* cand[i] for every id; with `marks`, each found row marked as above.
 * Returns whether a row was marked twice. */
static bool probe(const zp_sparse *t, const uint64_t *ids, size_t n, uint32_t *cand,
                  uint64_t *marks)
{
    const uint64_t mask = t->icap - 1;
    uint64_t ring[AHEAD];
    bool shared = false;
    for (size_t i = 0; i < n && i < AHEAD; i++) {
        ring[i] = zp_rowindex_hash(t, ids[i]);
        __builtin_prefetch(&t->index[ring[i] & mask]);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t h = ring[i % AHEAD];
        if (i + AHEAD < n) {
            uint64_t ahead = zp_rowindex_hash(t, ids[i + AHEAD]);
            ring[i % AHEAD] = ahead;
            __builtin_prefetch(&t->index[ahead & mask]);
        }
        uint32_t r = cand[i] = candidate(t, h);
        if (marks == NULL || r == ROW_NONE)
            continue;
        uint64_t bit = (uint64_t)1 << (r & 63), *w = &marks[2 * (size_t)(r >> 6)];
        if (w[0] & bit) {
            w[1] |= bit;
            shared = true;
        }
        w[0] |= bit;
    }
    return shared;
}

size_t zp_sparse_probe(zp_sparse *t, const uint64_t *ids, size_t n, uint32_t *cand,
                       uint32_t *unsure)
{
    marks_fit(t);
    uint64_t *marks = t->marks;
    bool shared = probe(t, ids, n, cand, marks);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = cand[i];
        if (r == ROW_NONE || (shared && (marks[2 * (size_t)(r >> 6) + 1] >> (r & 63) & 1)))
            unsure[k++] = (uint32_t)i;
    }
    for (size_t i = 0; i < n; i++) /* every mark set was one of these rows' */
        if (cand[i] != ROW_NONE)
            marks[2 * (size_t)(cand[i] >> 6)] = marks[2 * (size_t)(cand[i] >> 6) + 1] = 0;
    return k;
}

/* The store's own candidates for n ids (a pull, or a push given none). */
static uint32_t *own_cands(zp_sparse *t, size_t n)
{
    if (n > t->cand_cap) {
        t->cand_cap = n < 1024 ? 1024 : n;
        t->cand = zp_alloc_resize(t->cand, t->cand_cap * sizeof(uint32_t));
    }
    return t->cand;
}

/* A large scratch is not kept for the next (usually small) request. */
static void own_cands_trim(zp_sparse *t)
{
    if (t->cand_cap * sizeof(uint32_t) > ((size_t)16 << 20)) {
        free(t->cand);
        t->cand = NULL;
        t->cand_cap = 0;
    }
}

/* The second pass over candidates: start it (the first AHEAD records
 * asked for; always_inline as prefetch_rec is), then row i, touched at
 * `clock` (hit, else the one-at-a-time path), with the record AHEAD ids on
 * asked for. */
static inline __attribute__((always_inline)) void pass_start(const zp_sparse *t,
                                                             const uint32_t *cand, size_t n)
{
    for (size_t i = 0; i < n && i < AHEAD; i++)
        prefetch_rec(t, cand[i]);
}

static inline rowhdr *pass_row(zp_sparse *t, const uint64_t *ids, const uint32_t *cand, size_t n,
                               size_t i, int64_t clock)
{
    if (i + AHEAD < n)
        prefetch_rec(t, cand[i + AHEAD]);
    rowhdr *hd = hit(t, cand[i], ids[i], clock);
    if (hd == NULL)
        return touch(t, ids[i], clock);
    t->c.hits++;
    if (t->npinned != 0)
        zp_sparse_unpin(t, cand[i]);
    return hd;
}

void zp_sparse_pull(zp_sparse *t, const uint64_t *ids, size_t n, int64_t clock, float *out,
                    uint32_t *versions)
{
    const size_t dim = t->dim;
    uint32_t *cand = own_cands(t, n);
    probe(t, ids, n, cand, NULL);
    clock = zp_sparse_live_clock(clock);
    pass_start(t, cand, n);
    for (size_t i = 0; i < n; i++) {
        rowhdr *hd = pass_row(t, ids, cand, n, i, clock);
        if (hd != NULL)
            zp_rowcopy(out + i * dim, zp_sparse_rec_values(hd), dim);
        else
            zp_sparse_init_row(t, ids[i], out + i * dim);
        if (versions != NULL)
            versions[i] = hd != NULL ? hd->version : 0;
    }
    own_cands_trim(t);
}

/* Apply g's rows to the rows of ids[0..n) (candidates cand): the
 * optimizer's step, the version bump and, when `tau` is given, each row's
 * staleness, also by the row's frequency bucket (its touches, this push's
 * included) into by_freq. */
static size_t push_rows(zp_sparse *t, const uint64_t *ids, size_t n, const uint32_t *cand,
                        const float *grad, float scale, int64_t clock,
                        const uint32_t *read_versions, zp_hist *tau, zp_freq_hist *by_freq)
{
    const size_t dim = t->dim;
    size_t applied = 0;
    clock = zp_sparse_live_clock(clock);
    pass_start(t, cand, n);
    for (size_t i = 0; i < n; i++) {
        rowhdr *hd = pass_row(t, ids, cand, n, i, clock);
        if (hd == NULL) {
            t->c.pushes_skipped++;
            continue;
        }
        if (tau != NULL) {
            /* A row evicted and re-created since the read restarts at
             * version 0: count that as tau 0, not a wrapped difference. */
            uint64_t rt =
                hd->version >= read_versions[i] ? (uint64_t)(hd->version - read_versions[i]) : 0;
            zp_hist_add_linear(tau, rt);
            zp_freq_hist_add(by_freq, hd->freq, rt);
        }
        apply_row(t, hd, grad + i * dim, scale);
        hd->version += hd->version != UINT32_MAX;
        applied++;
    }
    return applied;
}

size_t zp_sparse_push_probed(zp_sparse *t, const uint64_t *ids, size_t n, const uint32_t *cand,
                             const float *g, float scale, int64_t clock,
                             const uint32_t *read_versions, zp_hist *tau, zp_freq_hist *tau_by_freq)
{
    /* the per-row staleness record is decided once per request */
    bool rec = read_versions != NULL && tau != NULL && tau_by_freq != NULL;
    return push_rows(t, ids, n, cand, g, scale, clock, read_versions, rec ? tau : NULL,
                     rec ? tau_by_freq : NULL);
}

size_t zp_sparse_push(zp_sparse *t, const uint64_t *ids, size_t n, const float *g, float scale,
                      int64_t clock, const uint32_t *read_versions, zp_hist *tau,
                      zp_freq_hist *tau_by_freq)
{
    uint32_t *cand = own_cands(t, n);
    probe(t, ids, n, cand, NULL);
    size_t applied =
        zp_sparse_push_probed(t, ids, n, cand, g, scale, clock, read_versions, tau, tau_by_freq);
    own_cands_trim(t);
    return applied;
}

/* The TTL scan is eviction's (evict.c); the API stays the table's. */
size_t zp_sparse_expire(zp_sparse *t, int64_t clock)
{
    return zp_evict_expire(t, clock);
}

size_t zp_sparse_drop_where(zp_sparse *t, bool (*pred)(uint64_t id, void *arg), void *arg)
{
    return zp_evict_drop_where(t, pred, arg);
}

/* ---------------------------------------------------------------- snapshots */

static void fill_row(const zp_sparse *t, rowhdr *hd, zp_sparse_row *row)
{
    row->id = hd->id;
    row->version = hd->version;
    row->freq = hd->freq;
    row->last_clock = hd->last_clock;
    row->values = zp_sparse_rec_values(hd);
    row->state = zp_sparse_rec_state(t, hd);
}

void zp_sparse_record_row(const zp_sparse *t, const void *rec, zp_sparse_row *row)
{
    fill_row(t, (rowhdr *)rec, row);
}

bool zp_sparse_next(const zp_sparse *t, uint64_t *cursor, zp_sparse_row *row)
{
    for (uint64_t r = *cursor; r < t->nalloc; r++) {
        rowhdr *hd = zp_sparse_rec_at(t, (uint32_t)r);
        if (zp_sparse_rec_live(hd)) {
            fill_row(t, hd, row);
            *cursor = r + 1;
            return true;
        }
    }
    *cursor = t->nalloc;
    return false;
}

uint64_t zp_sparse_records(const zp_sparse *t)
{
    return t->nalloc;
}

bool zp_sparse_has(const zp_sparse *t, uint64_t id)
{
    return zp_rowindex_find(t, id, zp_rowindex_hash(t, id)) >= 0;
}

bool zp_sparse_get(const zp_sparse *t, uint64_t id, zp_sparse_row *row)
{
    int64_t at = zp_rowindex_find(t, id, zp_rowindex_hash(t, id));
    if (at < 0)
        return false;
    fill_row(t, zp_sparse_rec_at(t, t->index[at].row), row);
    return true;
}

void zp_sparse_put(zp_sparse *t, const zp_sparse_row *row)
{
    uint64_t h = zp_rowindex_hash(t, row->id);
    int64_t at = zp_rowindex_find(t, row->id, h);
    rowhdr *hd;

    if (at >= 0)
        hd = zp_sparse_rec_at(t, t->index[at].row);
    else if ((hd = row_create(t, row->id, h)) == NULL)
        return; /* only when the table cannot hold a single row */
    else if (t->cold != NULL && zp_tier_fetch(t->cold, row->id, t->cold_rec) == 1) {
        zp_tier_promoted(t->cold, false); /* the hot row is the one now */
        copy_kept(t, row->id, h);
    }
    hd->version = row->version;
    hd->freq = row->freq;
    hd->last_clock = zp_sparse_live_clock(row->last_clock);
    /* memmove: the source may be this very row (a get, then a put). */
    memmove(zp_sparse_rec_values(hd), row->values, t->dim * sizeof(float));
    if (t->spv > 0)
        memmove(zp_sparse_rec_state(t, hd), row->state, (size_t)t->spv * t->dim * sizeof(float));
}
