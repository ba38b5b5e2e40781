/*
 * sparse.c - one sparse table's rows on this shard (see sparse.h).
 *
 * Storage. A row is one fixed-size record: a 32-byte header (id, last_clock,
 * version, freq, flags, free-list link), then `dim` values, then
 * state_per_value * dim optimizer floats, rounded up to 8 bytes. Records live
 * in chunks of a power-of-two number of rows (at most 64k rows and about
 * 4 MiB per chunk, less under a small memory budget), allocated as the table
 * grows, so a row number maps to its record with a shift and a mask and no
 * row is ever malloc'ed on its own. Evicted records go on a free list and are
 * reused before the table takes a fresh one.
 *
 * Index. One open-addressing table of 8-byte slots {row number, low 32 bits
 * of the id's hash}, power-of-two capacity, linear probing, doubled when the
 * load would pass 0.7, backward-shift deletion (no tombstones, so probe
 * lengths do not degrade under churn). The stored hash bits give an entry's
 * home slot without touching its row, which keeps growth and deletion inside
 * the index; they also filter probes before the row's id is compared.
 *
 * Admission. admit_count k > 1 is counted in a count-min sketch of
 * SKETCH_DEPTH x 2^SKETCH_WIDTH_LOG2 saturating u16 counters with
 * conservative update (only the smallest counters are raised, which keeps
 * the over-count small); ids that already have a row are not counted.
 * admit_prob p < 1 draws from a generator seeded from the table seed. When
 * both are set, an id must reach k and then pass the draw.
 *
 * Eviction. TTL: zp_sparse_expire scans all records at most every
 * max(1, ttl/4) clocks, so a row untouched for ttl clocks is gone at most
 * max(1, ttl/4) - 1 clocks later. Capacity and memory budget: before a new
 * row would pass either, the least recently (lru: smallest last_clock, then
 * smallest freq) or least frequently (lfu: smallest freq, then oldest clock)
 * touched of SAMPLE_SIZE randomly drawn rows is evicted. The budget is
 * checked against the bytes the table would hold after the insert (a new
 * chunk, a doubled index), so the held bytes never pass it.
 *
 * Optimizers compute in double from the stored floats (rows are short, the
 * cost is in the lookups) and store float; see the per-row ops below.
 * Out of memory aborts (zp_xmalloc): bound a table with capacity_rows or
 * memory_budget.
 */
#include "sparse.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

#define HDR_BYTES          32
#define ROW_NONE           UINT32_MAX
#define MAX_ROWS           ((uint64_t)1 << 31) /* row numbers are u32; index <= 2^32 slots */
#define CHUNK_MAX_ROWS     ((uint32_t)1 << 16)
#define CHUNK_TARGET_BYTES ((size_t)4 << 20)
#define INDEX_MIN_CAP      64
#define SKETCH_DEPTH       4
#define SKETCH_WIDTH_LOG2  18
#define SAMPLE_SIZE        16
#define INIT_HASH_SEED     0x7a6570735f696e69ull /* "zeps_ini" */
#define FLAG_LIVE          1u

/* The record header; values and state follow it. */
typedef struct rowhdr {
    uint64_t id;
    int64_t last_clock;
    uint32_t version;
    uint32_t freq;
    uint32_t flags;
    uint32_t next_free; /* free-list link while not live */
} rowhdr;

_Static_assert(sizeof(rowhdr) == HDR_BYTES, "row header is 32 bytes");

typedef struct slot {
    uint32_t row;  /* ROW_NONE = empty */
    uint32_t hash; /* low 32 bits of zp_id_hash(id, t->index_seed) */
} slot;

struct zp_sparse {
    uint32_t dim;
    int spv;
    const zp_optim_ops *optim;
    zp_hyper h; /* defaults applied; the row kernels widen it to double */
    zp_init_kind init;
    double init_scale;
    uint64_t seed;
    uint32_t admit_count;
    double admit_prob;
    uint64_t ttl;
    uint64_t capacity;
    uint64_t budget;
    zp_evict_policy evict;

    size_t rec;          /* bytes per record */
    uint32_t chunk_log2; /* rows per chunk = 1 << chunk_log2 */
    unsigned char **chunks;
    size_t nchunks, chunks_cap;
    uint32_t nalloc;    /* records ever handed out (high-water mark) */
    uint32_t free_head; /* ROW_NONE if empty */

    slot *index;
    uint64_t icap; /* power of two */

    uint16_t *sketch; /* SKETCH_DEPTH rows of 2^SKETCH_WIDTH_LOG2, or NULL */
    uint64_t sketch_seed;
    uint64_t index_seed;   /* id_hash: random per table */

    zp_rng rng_admit, rng_sample;
    int64_t next_scan;
    bool scanned;

    zp_sparse_counters c;
};

/* ---------------------------------------------------------------- names */

int zp_evict_from_name(const char *name)
{
    if (name == NULL || *name == '\0' || strcmp(name, "lru") == 0)
        return ZP_EVICT_LRU;
    if (strcmp(name, "lfu") == 0)
        return ZP_EVICT_LFU;
    return -1;
}

const char *zp_evict_name(zp_evict_policy p)
{
    return p == ZP_EVICT_LFU ? "lfu" : p == ZP_EVICT_LRU ? "lru" : "?";
}

/* ---------------------------------------------------------------- validation */

/* 0 if x is finite and ok, else `code` with "<field> = <x> must be <range>". */
static int check(int code, const char *field, double x, int ok, const char *range, char *err,
                 size_t errlen)
{
    if (isfinite(x) && ok)
        return 0;
    return zp_seterr(err, errlen, code, "sparse table: %s = %g must be %s", field, x,
                     isfinite(x) ? range : "finite");
}

/* Records per chunk as a power of two: about CHUNK_TARGET_BYTES (or 1/16 of a
 * memory budget, so chunk granularity does not eat the budget), at most 64k. */
static uint32_t chunk_log2_for(size_t rec, uint64_t budget)
{
    size_t target = CHUNK_TARGET_BYTES;
    uint32_t lg = 0;

    if (budget != 0 && budget / 16 < target)
        target = (size_t)(budget / 16);
    while (lg < 16 && ((size_t)2 << lg) * rec <= target)
        lg++;
    return lg;
}

/* One record: header, values and state, rounded up to 8 bytes so every
 * header's u64 fields stay aligned. */
static size_t rec_bytes(uint32_t dim, int spv)
{
    return HDR_BYTES + ((size_t)dim * 4 * (1 + (size_t)spv) + 7) / 8 * 8;
}

static size_t sketch_bytes_for(uint32_t admit_count)
{
    return admit_count > 1 ? (size_t)SKETCH_DEPTH * sizeof(uint16_t) << SKETCH_WIDTH_LOG2 : 0;
}

static int validate(const zp_sparse_opts *o, const zp_optim_ops **optim, char *err, size_t errlen)
{
    const int O = ZEPS_EOPTIM, I = ZEPS_EINVAL;
    int rc;

    if (o->dim < 1 || o->dim > 4096)
        return zp_seterr(err, errlen, I, "sparse table: dim = %u must be in 1..4096", o->dim);
    *optim = zp_optim_find(o->optimizer);
    if (*optim == NULL || (*optim)->apply_row == NULL) {
        char known[128];
        zp_optim_names(ZP_OPTIM_ROW, known, sizeof known);
        *optim = NULL;
        return zp_seterr(err, errlen, O, "sparse table: optimizer = '%s' unknown (known: %s)",
                         o->optimizer ? o->optimizer : "(null)", known);
    }
    if ((rc = check(O, "lr", o->lr, o->lr > 0, "> 0", err, errlen)) ||
        (rc = check(O, "weight_decay", o->weight_decay, o->weight_decay >= 0, ">= 0", err,
                    errlen)) ||
        (rc = check(O, "beta1", o->beta1, o->beta1 >= 0 && o->beta1 < 1, "in [0, 1)", err,
                    errlen)) ||
        (rc = check(O, "beta2", o->beta2, o->beta2 >= 0 && o->beta2 < 1, "in [0, 1)", err,
                    errlen)) ||
        (rc = check(O, "eps", o->eps, o->eps >= 0, "> 0 (0 = default 1e-8)", err, errlen)) ||
        (rc = check(O, "l1", o->l1, o->l1 >= 0, ">= 0", err, errlen)) ||
        (rc = check(O, "l2", o->l2, o->l2 >= 0, ">= 0", err, errlen)) ||
        (rc = check(O, "ftrl_beta", o->ftrl_beta, o->ftrl_beta >= 0, ">= 0 (0 = default 1)", err,
                    errlen)))
        return rc;
    if ((unsigned)o->init > ZP_INIT_NORMAL)
        return zp_seterr(err, errlen, I, "sparse table: init = %d unknown", (int)o->init);
    if ((rc = check(I, "init_scale", o->init_scale, 1, "", err, errlen)) ||
        (rc = check(I, "admit_prob", o->admit_prob, o->admit_prob >= 0 && o->admit_prob <= 1,
                    "in [0, 1] (0 = always)", err, errlen)))
        return rc;
    if (o->admit_count > UINT16_MAX)
        return zp_seterr(err, errlen, I, "sparse table: admit_count = %u must be at most %u",
                         o->admit_count, (unsigned)UINT16_MAX);
    if (o->capacity_rows > MAX_ROWS)
        return zp_seterr(err, errlen, I, "sparse table: capacity_rows = %llu must be at most %llu",
                         (unsigned long long)o->capacity_rows, (unsigned long long)MAX_ROWS);
    if ((unsigned)o->evict > ZP_EVICT_LFU)
        return zp_seterr(err, errlen, I, "sparse table: evict = %d unknown", (int)o->evict);
    if (o->ttl_clocks > INT64_MAX)
        return zp_seterr(err, errlen, I, "sparse table: ttl_clocks = %llu too large",
                         (unsigned long long)o->ttl_clocks);
    if (o->memory_budget != 0) {
        size_t rec = rec_bytes(o->dim, (*optim)->state_per_param);
        uint64_t fixed = sketch_bytes_for(o->admit_count) + INDEX_MIN_CAP * sizeof(slot) +
                         (rec << chunk_log2_for(rec, o->memory_budget));
        if (o->memory_budget < fixed)
            return zp_seterr(err, errlen, I,
                             "sparse table: memory_budget = %llu bytes is below the table's "
                             "minimum of %llu bytes (sketch, index, one chunk of rows)",
                             (unsigned long long)o->memory_budget, (unsigned long long)fixed);
    }
    return 0;
}

/* ---------------------------------------------------------------- lifecycle */

int zp_sparse_new(zp_sparse **out, const zp_sparse_opts *o, char *err, size_t errlen)
{
    const zp_optim_ops *optim = NULL;
    int rc = validate(o, &optim, err, errlen);
    if (rc != 0)
        return rc;

    zp_sparse *t = zp_xcalloc(1, sizeof *t);
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
    t->seed = o->seed;
    t->admit_count = o->admit_count;
    t->admit_prob = o->admit_prob == 0 ? 1.0 : o->admit_prob;
    t->ttl = o->ttl_clocks;
    t->capacity = o->capacity_rows;
    t->budget = o->memory_budget;
    t->evict = o->evict;

    t->rec = rec_bytes(t->dim, t->spv);
    t->chunk_log2 = chunk_log2_for(t->rec, t->budget);
    t->free_head = ROW_NONE;
    t->icap = INDEX_MIN_CAP;
    t->index = zp_xmalloc(t->icap * sizeof(slot));
    memset(t->index, 0xff, t->icap * sizeof(slot));
    if (t->admit_count > 1) {
        t->sketch = zp_xcalloc(sketch_bytes_for(t->admit_count), 1);
        t->sketch_seed = zp_mix64(t->seed ^ 0x736b65746368ull);
    }
    t->index_seed = zp_random64();
    zp_rng_seed(&t->rng_admit, t->seed, 0x61646d6974ull, 0);
    zp_rng_seed(&t->rng_sample, t->seed, 0x65766963ull, 1);
    t->c.bytes = t->icap * sizeof(slot) + sketch_bytes_for(t->admit_count);
    t->c.bytes_per_row = t->rec;
    *out = t;
    return 0;
}

void zp_sparse_destroy(zp_sparse **tp)
{
    if (tp == NULL || *tp == NULL)
        return;
    zp_sparse *t = *tp;
    for (size_t i = 0; i < t->nchunks; i++)
        free(t->chunks[i]);
    free(t->chunks);
    free(t->index);
    free(t->sketch);
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

void zp_sparse_set_history(zp_sparse *t, const zp_sparse_counters *c)
{
    t->c.created = c->created;
    t->c.not_admitted = c->not_admitted;
    t->c.pushes_skipped = c->pushes_skipped;
    t->c.evicted_ttl = c->evicted_ttl;
    t->c.evicted_capacity = c->evicted_capacity;
}

/* ---------------------------------------------------------------- records */

static inline rowhdr *rec_at(const zp_sparse *t, uint32_t r)
{
    uint32_t mask = ((uint32_t)1 << t->chunk_log2) - 1;
    return (rowhdr *)(t->chunks[r >> t->chunk_log2] + (size_t)(r & mask) * t->rec);
}

static inline float *rec_values(rowhdr *h)
{
    return (float *)(h + 1);
}

static inline float *rec_state(const zp_sparse *t, rowhdr *h)
{
    return (float *)(h + 1) + t->dim;
}

/* Would taking one more record need a new chunk? */
static bool need_chunk(const zp_sparse *t)
{
    return t->free_head == ROW_NONE && (uint64_t)t->nalloc == (uint64_t)t->nchunks << t->chunk_log2;
}

/* A record number for a new row (free list first, then the high-water mark,
 * then a new chunk). */
static uint32_t rec_take(zp_sparse *t)
{
    if (t->free_head != ROW_NONE) {
        uint32_t r = t->free_head;
        t->free_head = rec_at(t, r)->next_free;
        return r;
    }
    if (need_chunk(t)) {
        if (t->nchunks == t->chunks_cap) {
            t->chunks_cap = t->chunks_cap ? 2 * t->chunks_cap : 8;
            t->chunks = zp_xrealloc(t->chunks, t->chunks_cap * sizeof *t->chunks);
        }
        size_t bytes = t->rec << t->chunk_log2;
        /* Records past the high-water mark are never read (iteration and
         * sampling stop at nalloc), so the chunk needs no clearing. */
        t->chunks[t->nchunks++] = zp_xmalloc(bytes);
        t->c.bytes += bytes;
    }
    return t->nalloc++;
}

/* ---------------------------------------------------------------- index */

/* The slot holding `id` (hash h), or -1. */
static int64_t idx_find(const zp_sparse *t, uint64_t id, uint64_t h)
{
    uint64_t mask = t->icap - 1, i = h & mask;
    uint32_t h32 = (uint32_t)h;

    for (;;) {
        const slot *s = &t->index[i];
        if (s->row == ROW_NONE)
            return -1;
        if (s->hash == h32 && rec_at(t, s->row)->id == id)
            return (int64_t)i;
        i = (i + 1) & mask;
    }
}

static void idx_put_raw(slot *index, uint64_t mask, slot e)
{
    uint64_t i = e.hash & mask;
    while (index[i].row != ROW_NONE)
        i = (i + 1) & mask;
    index[i] = e;
}

static void idx_grow(zp_sparse *t)
{
    uint64_t ncap = t->icap * 2;
    slot *ni = zp_xmalloc(ncap * sizeof(slot));

    memset(ni, 0xff, ncap * sizeof(slot));
    for (uint64_t i = 0; i < t->icap; i++)
        if (t->index[i].row != ROW_NONE)
            idx_put_raw(ni, ncap - 1, t->index[i]);
    free(t->index);
    t->c.bytes += (ncap - t->icap) * sizeof(slot);
    t->index = ni;
    t->icap = ncap;
}

/* Would one more row push the index past its load limit of 0.7? */
static bool idx_needs_grow(const zp_sparse *t)
{
    return (t->c.rows + 1) * 10 > t->icap * 7;
}

/* Remove the entry at slot i, shifting later entries of the cluster back so
 * every entry stays reachable from its home slot without tombstones. */
static void idx_delete(zp_sparse *t, uint64_t i)
{
    uint64_t mask = t->icap - 1, j = i;

    for (;;) {
        j = (j + 1) & mask;
        if (t->index[j].row == ROW_NONE)
            break;
        uint64_t home = t->index[j].hash & mask;
        /* The entry at j may move to the hole at i unless its home lies
         * cyclically in (i, j]. */
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            t->index[i] = t->index[j];
            i = j;
        }
    }
    t->index[i].row = ROW_NONE;
}

/* ---------------------------------------------------------------- rows */

/* The index's hash: XXH3 with a seed drawn at random per table, so ids
 * from the network cannot be crafted to collide (linear probing would then
 * cost O(n) per lookup); nothing outside this table depends on it. */
static inline uint64_t id_hash(const zp_sparse *t, uint64_t id)
{
    return zp_id_hash(id, t->index_seed);
}

void zp_sparse_init_row(const zp_sparse *t, uint64_t id, float *out)
{
    /* A per-row seed, then elements 0..dim-1 of the counter-based
     * initialiser: no id * dim product that could overflow or collide. */
    uint64_t rs = zp_mix64(t->seed ^ zp_id_hash(id, INIT_HASH_SEED));
    zp_init_fill(out, 0, t->dim, t->init, t->init_scale, rs);
}

/* Drop row r (held in index slot `at`, or -1 to look it up). */
static void row_drop(zp_sparse *t, uint32_t r, int64_t at)
{
    rowhdr *h = rec_at(t, r);
    if (at < 0)
        at = idx_find(t, h->id, id_hash(t, h->id));
    idx_delete(t, (uint64_t)at);
    h->flags = 0;
    h->next_free = t->free_head;
    t->free_head = r;
    t->c.rows--;
}

/* Is a worse eviction candidate than b (i.e. evict a first)? */
static bool colder(const zp_sparse *t, const rowhdr *a, const rowhdr *b)
{
    if (t->evict == ZP_EVICT_LFU)
        return a->freq != b->freq ? a->freq < b->freq : a->last_clock < b->last_clock;
    return a->last_clock != b->last_clock ? a->last_clock < b->last_clock : a->freq < b->freq;
}

/* Evict the coldest of SAMPLE_SIZE random live rows. false if no row. */
static bool evict_one(zp_sparse *t)
{
    uint32_t best = ROW_NONE;
    int found = 0;

    if (t->c.rows == 0)
        return false;
    /* Random record numbers, skipping free records; bounded tries, then a
     * scan, so a table with many free records still finds a victim. */
    for (int tries = 0; tries < 8 * SAMPLE_SIZE && found < SAMPLE_SIZE; tries++) {
        uint32_t r = (uint32_t)(zp_rng_next(&t->rng_sample) % t->nalloc);
        rowhdr *h = rec_at(t, r);
        if (!(h->flags & FLAG_LIVE))
            continue;
        found++;
        if (best == ROW_NONE || colder(t, h, rec_at(t, best)))
            best = r;
    }
    if (best == ROW_NONE) {
        uint32_t start = (uint32_t)(zp_rng_next(&t->rng_sample) % t->nalloc);
        for (uint32_t k = 0; k < t->nalloc && best == ROW_NONE; k++) {
            uint32_t r = (start + k) % t->nalloc;
            if (rec_at(t, r)->flags & FLAG_LIVE)
                best = r;
        }
    }
    row_drop(t, best, -1);
    t->c.evicted_capacity++;
    return true;
}

/* The bytes held after adding one row now. */
static uint64_t bytes_after_insert(const zp_sparse *t)
{
    uint64_t b = t->c.bytes;
    if (need_chunk(t))
        b += t->rec << t->chunk_log2;
    if (idx_needs_grow(t))
        b += t->icap * sizeof(slot);
    return b;
}

/* Make room for one more row under capacity and budget. false if there is
 * no way (the table cannot hold another row). */
static bool make_room(zp_sparse *t)
{
    while ((t->capacity != 0 && t->c.rows >= t->capacity) ||
           (t->budget != 0 && bytes_after_insert(t) > t->budget) || t->c.rows >= MAX_ROWS) {
        if (!evict_one(t))
            return false;
    }
    return true;
}

/* Create row `id` (not present; hash h) with header fields as given and
 * values/state left to the caller. NULL if no room. */
static rowhdr *row_create(zp_sparse *t, uint64_t id, uint64_t h)
{
    if (!make_room(t))
        return NULL;
    if (idx_needs_grow(t))
        idx_grow(t);
    uint32_t r = rec_take(t);
    rowhdr *hd = rec_at(t, r);
    memset(hd, 0, HDR_BYTES);
    hd->id = id;
    hd->flags = FLAG_LIVE;
    idx_put_raw(t->index, t->icap - 1, (slot){.row = r, .hash = (uint32_t)h});
    t->c.rows++;
    return hd;
}

/* ---------------------------------------------------------------- admission */

/* Count one touch of an unknown id in the sketch (conservative update) and
 * return its estimated count. */
static uint32_t sketch_touch(zp_sparse *t, uint64_t h)
{
    uint64_t a = zp_mix64(h ^ t->sketch_seed), b = zp_mix64(a) | 1;
    const uint64_t width = (uint64_t)1 << SKETCH_WIDTH_LOG2;
    uint16_t *cell[SKETCH_DEPTH];
    uint32_t min = UINT16_MAX;

    for (int d = 0; d < SKETCH_DEPTH; d++) {
        uint64_t col = (a + (uint64_t)d * b) >> (64 - SKETCH_WIDTH_LOG2);
        cell[d] = &t->sketch[(uint64_t)d * width + col];
        if (*cell[d] < min)
            min = *cell[d];
    }
    if (min == UINT16_MAX)
        return min;
    for (int d = 0; d < SKETCH_DEPTH; d++)
        if (*cell[d] == min)
            (*cell[d])++;
    return min + 1;
}

/* The touch of an unknown id: true if it gets a row now. */
static bool admit(zp_sparse *t, uint64_t h)
{
    if (t->sketch != NULL && sketch_touch(t, h) < t->admit_count)
        return false;
    if (t->admit_prob < 1.0 && zp_rng_uniform(&t->rng_admit) >= t->admit_prob)
        return false;
    return true;
}

/* Touch row `id` at `clock`: the existing row, a new one if admitted (with
 * initial values and zero state), or NULL. */
static rowhdr *touch(zp_sparse *t, uint64_t id, int64_t clock)
{
    uint64_t h = id_hash(t, id);
    int64_t at = idx_find(t, id, h);
    rowhdr *hd;

    if (at >= 0) {
        hd = rec_at(t, t->index[at].row);
        if (hd->freq != UINT32_MAX)
            hd->freq++;
        hd->last_clock = clock;
        return hd;
    }
    if (!admit(t, h) || (hd = row_create(t, id, h)) == NULL) {
        t->c.not_admitted++;
        return NULL;
    }
    hd->freq = 1;
    hd->last_clock = clock;
    zp_sparse_init_row(t, id, rec_values(hd));
    memset(rec_state(t, hd), 0, (size_t)t->spv * t->dim * sizeof(float));
    t->c.created++;
    return hd;
}

void zp_sparse_pull(zp_sparse *t, const uint64_t *ids, size_t n, int64_t clock, float *out,
                    uint32_t *versions)
{
    for (size_t i = 0; i < n; i++) {
        float *dst = out + i * t->dim;
        rowhdr *hd = touch(t, ids[i], clock);
        if (hd != NULL)
            memcpy(dst, rec_values(hd), t->dim * sizeof(float));
        else
            zp_sparse_init_row(t, ids[i], dst);
        if (versions != NULL)
            versions[i] = hd != NULL ? hd->version : 0;
    }
}

size_t zp_sparse_push(zp_sparse *t, const uint64_t *ids, size_t n, const float *g, float scale,
                      int64_t clock, const uint32_t *read_versions, zp_hist *tau)
{
    size_t applied = 0;

    for (size_t i = 0; i < n; i++) {
        rowhdr *hd = touch(t, ids[i], clock);
        if (hd == NULL) {
            t->c.pushes_skipped++;
            continue;
        }
        if (read_versions != NULL && tau != NULL)
            /* A row evicted and re-created since the read restarts at
             * version 0: count that as tau 0, not a wrapped difference. */
            zp_hist_add_linear(tau, hd->version >= read_versions[i]
                                        ? (uint64_t)(hd->version - read_versions[i])
                                        : 0);
        t->optim->apply_row(&t->h, t->dim, rec_values(hd), rec_state(t, hd), g + i * t->dim, scale,
                        hd->version);
        if (hd->version != UINT32_MAX)
            hd->version++;
        applied++;
    }
    return applied;
}

size_t zp_sparse_expire(zp_sparse *t, int64_t clock)
{
    size_t n = 0;

    if (t->ttl == 0 || (t->scanned && clock < t->next_scan))
        return 0;
    uint64_t period = t->ttl / 4 > 1 ? t->ttl / 4 : 1;
    t->scanned = true;
    t->next_scan = clock > INT64_MAX - (int64_t)period ? INT64_MAX : clock + (int64_t)period;
    for (uint32_t r = 0; r < t->nalloc; r++) {
        rowhdr *hd = rec_at(t, r);
        /* clock - last_clock in u64: a row touched "in the future" (clock
         * went back, e.g. a restore) is not old. */
        if ((hd->flags & FLAG_LIVE) && clock >= hd->last_clock &&
            (uint64_t)clock - (uint64_t)hd->last_clock >= t->ttl) {
            row_drop(t, r, -1);
            n++;
        }
    }
    t->c.evicted_ttl += n;
    return n;
}

/* ---------------------------------------------------------------- snapshots */

static void fill_row(const zp_sparse *t, rowhdr *hd, zp_sparse_row *row)
{
    row->id = hd->id;
    row->version = hd->version;
    row->freq = hd->freq;
    row->last_clock = hd->last_clock;
    row->values = rec_values(hd);
    row->state = rec_state(t, hd);
}

bool zp_sparse_next(const zp_sparse *t, uint64_t *cursor, zp_sparse_row *row)
{
    for (uint64_t r = *cursor; r < t->nalloc; r++) {
        rowhdr *hd = rec_at(t, (uint32_t)r);
        if (hd->flags & FLAG_LIVE) {
            fill_row(t, hd, row);
            *cursor = r + 1;
            return true;
        }
    }
    *cursor = t->nalloc;
    return false;
}

bool zp_sparse_get(const zp_sparse *t, uint64_t id, zp_sparse_row *row)
{
    int64_t at = idx_find(t, id, id_hash(t, id));
    if (at < 0)
        return false;
    fill_row(t, rec_at(t, t->index[at].row), row);
    return true;
}

void zp_sparse_put(zp_sparse *t, const zp_sparse_row *row)
{
    uint64_t h = id_hash(t, row->id);
    int64_t at = idx_find(t, row->id, h);
    rowhdr *hd;

    if (at >= 0)
        hd = rec_at(t, t->index[at].row);
    else if ((hd = row_create(t, row->id, h)) == NULL)
        return; /* only when the table cannot hold a single row */
    hd->version = row->version;
    hd->freq = row->freq;
    hd->last_clock = row->last_clock;
    /* memmove: the source may be this very row (a get, then a put). */
    memmove(rec_values(hd), row->values, t->dim * sizeof(float));
    if (t->spv > 0)
        memmove(rec_state(t, hd), row->state, (size_t)t->spv * t->dim * sizeof(float));
}
