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
#include "rowindex.h"
#include "sparse_hash.h"
#include "sparse_int.h"
#include "zeps_errors.h"

#define CHUNK_MAX_ROWS     ((uint32_t)1 << 16)
#define CHUNK_TARGET_BYTES ((size_t)4 << 20)
#define INIT_HASH_SEED     0x7a6570735f696e69ull /* "zeps_ini" */

/* ---------------------------------------------------------------- validation */

/* 0 if x is finite and ok, else `code` with "<field> = <x> must be <range>". */
static int check(int code, const char *field, double x, int ok, const char *range, char *err,
                 size_t errlen)
{
    if (isfinite(x) && ok)
        return 0;
    return zp_errors_set(err, errlen, code, "sparse table: %s = %g must be %s", field, x,
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

static int validate(const zp_sparse_opts *o, const zp_optim_ops **optim, char *err, size_t errlen)
{
    const int O = ZEPS_EOPTIM, I = ZEPS_EINVAL;
    int rc;

    if (o->dim < 1 || o->dim > 4096)
        return zp_errors_set(err, errlen, I, "sparse table: dim = %u must be in 1..4096", o->dim);
    *optim = zp_optim_find(o->optimizer);
    if (*optim == NULL || (*optim)->apply_row == NULL) {
        char known[128];
        zp_optim_names(ZP_OPTIM_ROW, known, sizeof known);
        *optim = NULL;
        return zp_errors_set(err, errlen, O, "sparse table: optimizer = '%s' unknown (known: %s)",
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
        return zp_errors_set(err, errlen, I, "sparse table: init = %d unknown", (int)o->init);
    if ((rc = check(I, "init_scale", o->init_scale, 1, "", err, errlen)) ||
        (rc = check(I, "admit_prob", o->admit_prob, o->admit_prob >= 0 && o->admit_prob <= 1,
                    "in [0, 1] (0 = always)", err, errlen)))
        return rc;
    if (o->admit_count > UINT16_MAX)
        return zp_errors_set(err, errlen, I, "sparse table: admit_count = %u must be at most %u",
                         o->admit_count, (unsigned)UINT16_MAX);
    if (o->capacity_rows > MAX_ROWS)
        return zp_errors_set(err, errlen, I, "sparse table: capacity_rows = %llu must be at most %llu",
                         (unsigned long long)o->capacity_rows, (unsigned long long)MAX_ROWS);
    if ((unsigned)o->evict > ZP_EVICT_LFU)
        return zp_errors_set(err, errlen, I, "sparse table: evict = %d unknown", (int)o->evict);
    if (o->ttl_clocks > INT64_MAX)
        return zp_errors_set(err, errlen, I, "sparse table: ttl_clocks = %llu too large",
                         (unsigned long long)o->ttl_clocks);
    if (o->memory_budget != 0) {
        size_t rec = rec_bytes(o->dim, (*optim)->state_per_param);
        uint64_t fixed = zp_admit_sketch_bytes(o->admit_count) +
                         ZP_ROWINDEX_MIN_CAP * sizeof(slot) +
                         (rec << chunk_log2_for(rec, o->memory_budget));
        if (o->memory_budget < fixed)
            return zp_errors_set(err, errlen, I,
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

/* A record number for a new row (free list first, then the high-water mark,
 * then a new chunk). */
static uint32_t rec_take(zp_sparse *t)
{
    if (t->free_head != ROW_NONE) {
        uint32_t r = t->free_head;
        t->free_head = zp_sparse_rec_at(t, r)->next_free;
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
        t->chunks[t->nchunks++] = zp_alloc(bytes);
        t->c.bytes += bytes;
    }
    return t->nalloc++;
}

void zp_sparse_init_row(const zp_sparse *t, uint64_t id, float *out)
{
    /* A per-row seed, then elements 0..dim-1 of the counter-based
     * initialiser: no id * dim product that could overflow or collide. */
    uint64_t rs = zp_rng_mix64(t->seed ^ zp_sparse_hash_id(id, INIT_HASH_SEED));
    zp_init_fill(out, 0, t->dim, t->init, t->init_scale, rs);
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
    memset(hd, 0, HDR_BYTES);
    hd->id = id;
    hd->flags = FLAG_LIVE;
    zp_rowindex_put(t->index, t->icap - 1, (slot){.row = r, .hash = (uint32_t)h});
    t->c.rows++;
    return hd;
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
        return hd;
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

void zp_sparse_pull(zp_sparse *t, const uint64_t *ids, size_t n, int64_t clock, float *out,
                    uint32_t *versions)
{
    for (size_t i = 0; i < n; i++) {
        float *dst = out + i * t->dim;
        rowhdr *hd = touch(t, ids[i], clock);
        if (hd != NULL)
            memcpy(dst, zp_sparse_rec_values(hd), t->dim * sizeof(float));
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
        t->optim->apply_row(&t->h, t->dim, zp_sparse_rec_values(hd), zp_sparse_rec_state(t, hd),
                            g + i * t->dim, scale, hd->version);
        if (hd->version != UINT32_MAX)
            hd->version++;
        applied++;
    }
    return applied;
}

/* The TTL scan is eviction's (evict.c); the API stays the table's. */
size_t zp_sparse_expire(zp_sparse *t, int64_t clock)
{
    return zp_evict_expire(t, clock);
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

bool zp_sparse_next(const zp_sparse *t, uint64_t *cursor, zp_sparse_row *row)
{
    for (uint64_t r = *cursor; r < t->nalloc; r++) {
        rowhdr *hd = zp_sparse_rec_at(t, (uint32_t)r);
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
    hd->version = row->version;
    hd->freq = row->freq;
    hd->last_clock = row->last_clock;
    /* memmove: the source may be this very row (a get, then a put). */
    memmove(zp_sparse_rec_values(hd), row->values, t->dim * sizeof(float));
    if (t->spv > 0)
        memmove(zp_sparse_rec_state(t, hd), row->state, (size_t)t->spv * t->dim * sizeof(float));
}
