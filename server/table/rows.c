/*
 * rows.c - the sparse kind of table: a zp_rows (the row store of sparse.c,
 * the declaration, the request scratch) behind zp_rows_kind. It creates and
 * checks declarations, reports the store's counters, expires rows as the
 * clock moves, and writes and reads the rows of snapshot records. See
 * rows.h; docs/sparse.md has the design.
 */
#include "rows.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "evict.h"
#include "init.h"
#include "log.h"
#include "rng.h"
#include "sparse_hash.h"
#include "table.h"
#include "tier.h"
#include "zeps_errors.h"

/* A pull's or push's ids as aligned u64: in place when the frame is
 * 8-aligned (ZeroMQ gives a large message a buffer of its own, which
 * malloc aligns), else copied into the table's scratch (a small frame may
 * sit at any offset inside ZeroMQ's receive buffer). */
const uint64_t *zp_rows_ids(zp_rows *t, const void *data, size_t n)
{
    if (((uintptr_t)data & 7u) == 0)
        return data;
    if (n > t->ids_cap) {
        free(t->ids);
        t->ids_cap = n < 1024 ? 1024 : n;
        t->ids = zp_alloc(t->ids_cap * sizeof(uint64_t));
    }
    memcpy(t->ids, data, n * sizeof(uint64_t));
    return t->ids;
}

/* The repeated-id set with room for n ids (capacity >= 2n, a power of two)
 * and a fresh stamp; returns its mask. */
static size_t set_reset(zp_rows *t, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    if (cap > t->set_cap) {
        free(t->set);
        free(t->set_home);
        t->set_cap = cap;
        t->set = zp_alloc_zeroed(cap, sizeof(*t->set));
        t->set_home = zp_alloc(cap / 2 * sizeof(uint32_t));
        t->set_stamp = 0;
    }
    if (++t->set_stamp == 0) { /* wrapped: clear once every 2^32 pushes */
        memset(t->set, 0, t->set_cap * sizeof(*t->set));
        t->set_stamp = 1;
    }
    if (!t->set_seed)
        t->set_seed = zp_rng_random64() | 1u;
    return cap - 1;
}

/* Index of the second occurrence of a repeated id among the ids at
 * positions pos[0..k) (ascending; pos NULL: positions 0..k), or -1: an
 * open-addressing set over the table's scratch, cleared by generation
 * stamps, hashed with XXH3 under a seed drawn at random per table (ids come
 * from the network: a public hash would let a client make every id
 * collide, and the check quadratic). A slot holds the stamp and the
 * position of the id it took, so the set is 8 bytes a slot; every home slot
 * is computed first and prefetched AHEAD ids before its probe, so the
 * probes' cache misses overlap instead of following one another. */
static ptrdiff_t repeated_at(zp_rows *t, const uint64_t *ids, const uint32_t *pos, size_t k)
{
    enum { AHEAD = 16 };
    size_t mask = set_reset(t, k);
    zp_rows_slot *set = t->set;
    uint32_t *home = t->set_home, stamp = t->set_stamp;
    for (size_t j = 0; j < k; j++)
        home[j] = (uint32_t)(zp_sparse_hash_id(ids[pos ? pos[j] : j], t->set_seed) & mask);
    for (size_t j = 0; j < k && j < AHEAD; j++)
        __builtin_prefetch(&set[home[j]], 1);
    for (size_t j = 0; j < k; j++) {
        if (j + AHEAD < k)
            __builtin_prefetch(&set[home[j + AHEAD]], 1);
        size_t i = pos ? pos[j] : j, s = home[j];
        while (set[s].stamp == stamp) {
            if (ids[set[s].pos] == ids[i])
                return (ptrdiff_t)i;
            s = (s + 1) & mask;
        }
        set[s] = (zp_rows_slot){.stamp = stamp, .pos = (uint32_t)i};
    }
    return -1;
}

ptrdiff_t zp_rows_repeated(zp_rows *t, const uint64_t *ids, size_t n)
{
    return repeated_at(t, ids, NULL, n);
}

/* The index's probe (sparse.h) narrows the ids that may repeat to a few
 * positions, which the exact set then checks: the answer and its position
 * are the set's over all ids, as every repeated id has all of its
 * positions among them. */
ptrdiff_t zp_rows_check_push(zp_rows *t, const uint64_t *ids, size_t n)
{
    if (n > t->cand_cap) {
        free(t->cand);
        free(t->unsure);
        t->cand_cap = n < 1024 ? 1024 : n;
        t->cand = zp_alloc(t->cand_cap * sizeof(uint32_t));
        t->unsure = zp_alloc(t->cand_cap * sizeof(uint32_t));
    }
    size_t k = zp_sparse_probe(t->store, ids, n, t->cand, t->unsure);
    return k > 1 ? repeated_at(t, ids, t->unsure, k) : -1;
}

/* Room for n floats in the table's gradient scratch, or NULL if that
 * cannot be allocated. */
float *zp_rows_grads(zp_rows *t, size_t nvals)
{
    if (nvals > t->grad_cap) {
        free(t->grads);
        t->grad_cap = 0;
        t->grads = malloc(nvals * sizeof(float));
        if (!t->grads)
            return NULL;
        t->grad_cap = nvals;
    }
    return t->grads;
}

int zp_rows_keep_versions(zp_rows *r, uint32_t keep, char *err, size_t errlen)
{
    if (r->kept.hist)
        return 0;
    return zp_rowvers_init(&r->kept, keep, r->dim, err, errlen);
}

/* A large scratch is not kept for the next (usually small) push. */
void zp_rows_trim(zp_rows *t)
{
    if (t->cand_cap * 2 * sizeof(uint32_t) > ((size_t)16 << 20)) {
        free(t->cand);
        free(t->unsure);
        t->cand = t->unsure = NULL;
        t->cand_cap = 0;
    }
    if (t->grad_cap * sizeof(float) > ((size_t)64 << 20)) {
        free(t->grads);
        t->grads = NULL;
        t->grad_cap = 0;
    }
}

/* A push's row versions as aligned u32: in place when the frame allows,
 * else copied into the scratch. */
const uint32_t *zp_rows_versions(zp_rows *t, const void *data, size_t n)
{
    if (((uintptr_t)data & 3u) == 0)
        return data;
    if (n > t->ver_cap) {
        free(t->vers);
        t->ver_cap = n;
        t->vers = zp_alloc(n * sizeof(uint32_t));
    }
    memcpy(t->vers, data, n * sizeof(uint32_t));
    return t->vers;
}

static void sparse_opts_from_spec(zp_sparse_opts *o, const Zeps__TableSpec *spec)
{
    memset(o, 0, sizeof(*o));
    o->dim = spec->dim;
    o->optimizer = spec->optimizer;
    o->lr = (float)spec->lr;
    o->beta1 = (float)spec->beta1;
    o->beta2 = (float)spec->beta2;
    o->eps = (float)spec->eps;
    o->weight_decay = (float)spec->weight_decay;
    o->l1 = (float)spec->l1;
    o->l2 = (float)spec->l2;
    o->ftrl_beta = (float)spec->ftrl_beta;
    o->init = (zp_init_kind)zp_init_from_name(spec->init);
    o->init_scale = spec->init_scale;
    o->seed = spec->seed;
    o->admit_count = spec->admit_count;
    o->admit_prob = spec->admit_prob;
    o->ttl_clocks = spec->ttl_clocks;
    o->capacity_rows = spec->capacity_rows;
    /* a tiered table's budget covers its cold tier's store too: the hot
     * rows get what the store's share leaves (tier.h, zp_tier_share) */
    o->memory_budget = spec->memory_budget - (spec->tier ? zp_tier_share(spec->memory_budget) : 0);
    o->evict = (zp_evict_policy)zp_evict_from_name(spec->evict);
    o->lead_cols = spec->lead_cols;
    o->lead_lr = (float)spec->lead_lr;
    o->lead_init = (zp_init_kind)zp_init_from_name(spec->lead_init);
    o->lead_init_scale = spec->lead_init_scale;
}

/* A sparse table: rows in a zp_sparse; the dense fields stay empty. */
static int rows_create(zp_table *t, const Zeps__TableSpec *spec, uint64_t begin, uint64_t end,
                       char *err, size_t errlen)
{
    (void)begin;
    (void)end; /* every shard holds the rows of its ids' slots (no slice) */
    if (zp_init_from_name(spec->init) < 0)
        return zp_errors_set(
            err, errlen, ZEPS_EINVAL,
            "table '%s': unknown initializer '%s' (zeros, constant, uniform, normal)", spec->name,
            spec->init);
    if (zp_init_from_name(spec->lead_init) < 0)
        return zp_errors_set(
            err, errlen, ZEPS_EINVAL,
            "table '%s': unknown lead_init '%s' (zeros, constant, uniform, normal)", spec->name,
            spec->lead_init);
    if (zp_evict_from_name(spec->evict) < 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "table '%s': unknown eviction policy '%s' (lru, lfu)", spec->name,
                             spec->evict);
    zp_sparse_opts o;
    sparse_opts_from_spec(&o, spec);
    char serr[300];
    zp_rows *r = zp_alloc_zeroed(1, sizeof(*r));
    t->rows = r;
    zp_rround_init(&r->held);
    zp_rowpast_init(&r->past, spec->dim);
    int rc = zp_sparse_new(&r->store, &o, serr, sizeof(serr));
    if (rc != 0)
        return zp_errors_set(err, errlen, rc, "table '%s': %s", spec->name, serr);
    r->dim = spec->dim;
    /* kept to compare re-declarations field by field */
    size_t len = zeps__table_spec__get_packed_size(spec);
    uint8_t *buf = zp_alloc(len ? len : 1);
    zeps__table_spec__pack(spec, buf);
    r->spec = zeps__table_spec__unpack(NULL, len, buf);
    free(buf);
    if (!r->spec)
        abort(); /* we just packed it */
    return 0;
}

void zp_rows_scratch_free(zp_rows *r)
{
    free(r->ids);
    free(r->set);
    free(r->set_home);
    free(r->cand);
    free(r->unsure);
    free(r->grads);
    free(r->vers);
    r->ids = NULL, r->set = NULL, r->set_home = NULL, r->cand = NULL, r->unsure = NULL;
    r->grads = NULL, r->vers = NULL;
    r->ids_cap = r->set_cap = r->cand_cap = r->grad_cap = r->ver_cap = 0;
}

static void rows_destroy(zp_table *t)
{
    zp_rows *r = t->rows;
    if (!r)
        return;
    zp_sparse_destroy(&r->store);
    zp_tier_close(&r->tier); /* after the store, which borrowed it */
    zp_rows_scratch_free(r);
    zp_rround_fini(&r->held);
    zp_rowpast_fini(&r->past);
    zp_rowvers_fini(&r->kept);
    if (r->spec)
        zeps__table_spec__free_unpacked(r->spec, NULL);
    free(r);
    t->rows = NULL;
}

#define SAME_S(field, fmt, label)                                                                  \
    do {                                                                                           \
        if (spec->field != d->field)                                                               \
            return zp_errors_set(err, errlen, ZEPS_ECONFLICT,                                      \
                                 "table '%s' already declared with %s = " fmt ", not " fmt,        \
                                 t->name, label, d->field, spec->field);                           \
    } while (0)

static const char *str_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

static int rows_check_same(const zp_table *t, const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    const Zeps__TableSpec *d = t->rows->spec;
    if (spec->kind == ZP_TABLE_DENSE)
        return zp_errors_set(err, errlen, ZEPS_ECONFLICT,
                             "table '%s' already declared as sparse, not dense", t->name);
    if (spec->kind != ZP_TABLE_SPARSE)
        return zp_errors_set(err, errlen, ZEPS_ECONFLICT,
                             "table '%s' already declared as sparse, not kind %u", t->name,
                             spec->kind);
    SAME_S(dim, "%u", "dim"); /* the shape first: the other fields follow from it */
    if (strcmp(str_or(spec->optimizer, ""), str_or(d->optimizer, "")) != 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFLICT,
                             "table '%s' already declared with optimizer '%s', not '%s'", t->name,
                             str_or(d->optimizer, ""), str_or(spec->optimizer, ""));
    if (strcmp(str_or(spec->init, "zeros"), str_or(d->init, "zeros")) != 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFLICT,
                             "table '%s' already declared with init '%s', not '%s'", t->name,
                             str_or(d->init, "zeros"), str_or(spec->init, "zeros"));
    if (strcmp(str_or(spec->lead_init, "zeros"), str_or(d->lead_init, "zeros")) != 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFLICT,
                             "table '%s' already declared with lead_init '%s', not '%s'", t->name,
                             str_or(d->lead_init, "zeros"), str_or(spec->lead_init, "zeros"));
    if (strcmp(str_or(spec->evict, "lru"), str_or(d->evict, "lru")) != 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFLICT,
                             "table '%s' already declared with evict '%s', not '%s'", t->name,
                             str_or(d->evict, "lru"), str_or(spec->evict, "lru"));
    SAME_S(lr, "%g", "lr");
    SAME_S(beta1, "%g", "beta1");
    SAME_S(beta2, "%g", "beta2");
    SAME_S(eps, "%g", "eps");
    SAME_S(weight_decay, "%g", "weight_decay");
    SAME_S(l1, "%g", "l1");
    SAME_S(l2, "%g", "l2");
    SAME_S(ftrl_beta, "%g", "ftrl_beta");
    SAME_S(init_scale, "%g", "init_scale");
    SAME_S(seed, "%" PRIu64, "seed");
    SAME_S(admit_count, "%u", "admit_count");
    SAME_S(admit_prob, "%g", "admit_prob");
    SAME_S(ttl_clocks, "%" PRIu64, "ttl_clocks");
    SAME_S(capacity_rows, "%" PRIu64, "capacity_rows");
    SAME_S(memory_budget, "%" PRIu64, "memory_budget");
    SAME_S(lead_cols, "%u", "lead_cols");
    SAME_S(lead_lr, "%g", "lead_lr");
    SAME_S(lead_init_scale, "%g", "lead_init_scale");
    SAME_S(tier, "%d", "tier");
    if (spec->has_staleness != d->has_staleness ||
        (d->has_staleness && spec->staleness != d->staleness))
        return zp_errors_set(err, errlen, ZEPS_ECONFLICT,
                             "table '%s' already declared with another staleness bound", t->name);
    return 0;
}

static uint64_t rows_bytes(const zp_table *t)
{
    zp_sparse_counters c;
    zp_sparse_get_counters(t->rows->store, &c);
    return c.bytes + zp_rround_bytes(&t->rows->held);
}

static void rows_clock(zp_table *t, int64_t clock)
{
    zp_sparse_expire(t->rows->store, clock);
}

static void rows_stats(const zp_table *t, Zeps__TableStats *ts)
{
    zp_sparse_counters sc;
    zp_sparse_get_counters(t->rows->store, &sc);
    ts->kind = ZP_TABLE_SPARSE;
    ts->dim = t->rows->dim;
    ts->rows = sc.rows;
    ts->rows_created = sc.created;
    ts->not_admitted = sc.not_admitted;
    ts->pushes_skipped = sc.pushes_skipped;
    ts->evicted_ttl = sc.evicted_ttl;
    ts->evicted_capacity = sc.evicted_capacity;
    ts->bytes_per_row = sc.bytes_per_row;
    ts->keys_pulled = t->stats.keys_pulled;
    ts->keys_pushed = t->stats.keys_pushed;
    if (t->rows->tier != NULL) {
        zp_tier_counters tc;
        zp_tier_get_counters(t->rows->tier, &tc);
        ts->tiered = true;
        ts->tier_hits = sc.hits;
        ts->tier_promotions = tc.promotions;
        ts->tier_demotions = tc.demotions;
        ts->cold_rows = tc.rows;
        ts->cold_bytes = tc.bytes;
        ts->tier_fetched = tc.fetched;
        ts->tier_sync_reads = tc.sync_reads;
        ts->tier_parked = t->rows->cold_parked;
        ts->tier_mem_share = tc.mem_share;
        ts->tier_mem_write_buffers = tc.mem_write_buffers;
        ts->tier_mem_table_readers = tc.mem_table_readers;
        ts->tier_mem_block_cache = tc.mem_block_cache;
    }
}

static void rows_log_declared(const zp_table *t, const Zeps__TableSpec *spec)
{
    char lead[96] = "";
    if (spec->lead_cols > 0)
        snprintf(lead, sizeof lead, "; lead columns %u: lr %g, init %s", spec->lead_cols,
                 spec->lead_lr, zp_init_name((zp_init_kind)zp_init_from_name(spec->lead_init)));
    zp_info("sparse table '%s' declared: dim %u, optimizer %s, lr %g, init %s%s", t->name,
            t->rows->dim, t->optimizer, spec->lr, zp_init_name(t->init), lead);
}

void zp_rows_record_pack(uint8_t *at, const zp_sparse_row *row, uint32_t dim, uint32_t spp)
{
    memcpy(at, &row->id, 8);
    memcpy(at + 8, &row->version, 4);
    memcpy(at + 12, &row->freq, 4);
    memcpy(at + 16, &row->last_clock, 8);
    memcpy(at + 24, row->values, (size_t)dim * 4);
    if (spp)
        memcpy(at + 24 + (size_t)dim * 4, row->state, (size_t)dim * spp * 4);
}

/* n records at `at` (the snapshot's row layout, any alignment) put into
 * `store` as they are: values, optimizer state, version, touches, last
 * clock. */
static void put_records(zp_sparse *store, const uint8_t *at, uint64_t n, uint32_t dim, uint32_t spp)
{
    uint64_t rec = ZP_SNAP_ROW_LEN(dim, spp);
    float *vals = zp_alloc((size_t)dim * (1 + spp) * sizeof(float));
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *r = at + i * rec;
        zp_sparse_row row = {.values = vals, .state = vals + dim};
        memcpy(&row.id, r, 8);
        memcpy(&row.version, r + 8, 4);
        memcpy(&row.freq, r + 12, 4);
        memcpy(&row.last_clock, r + 16, 8);
        memcpy(vals, r + 24, (size_t)dim * (1 + spp) * sizeof(float)); /* aligned copy */
        zp_sparse_put(store, &row);
    }
    free(vals);
}

uint64_t zp_rows_scan(const zp_rows *r, uint64_t *cursor, uint64_t max, uint8_t *out)
{
    uint32_t spp = (uint32_t)zp_sparse_state_per_value(r->store);
    uint64_t rec = ZP_SNAP_ROW_LEN(r->dim, spp), n = 0, at = *cursor;
    zp_sparse_row row;
    while (n < max && zp_sparse_next(r->store, &at, &row)) {
        zp_rows_record_pack(out + n * rec, &row, r->dim, spp);
        n++;
    }
    /* 0 when no live row follows: the scan is over */
    uint64_t peek = at;
    *cursor = zp_sparse_next(r->store, &peek, &row) ? at : 0;
    return n;
}

const uint64_t *zp_rows_record_ids(zp_rows *r, const uint8_t *records, size_t n)
{
    uint64_t rec = ZP_SNAP_ROW_LEN(r->dim, zp_sparse_state_per_value(r->store));
    if (n > r->ids_cap) {
        free(r->ids);
        r->ids_cap = n < 1024 ? 1024 : n;
        r->ids = zp_alloc(r->ids_cap * sizeof(uint64_t));
    }
    for (size_t i = 0; i < n; i++)
        memcpy(&r->ids[i], records + i * rec, 8);
    return r->ids;
}

void zp_rows_put(zp_rows *r, const uint8_t *records, uint64_t n)
{
    put_records(r->store, records, n, r->dim, (uint32_t)zp_sparse_state_per_value(r->store));
}

/* A sparse table's meta and declaration; its rows are packed later, by
 * rows_pack, in the writer (the forked child), so the shard does not pause
 * to copy them. */
static void rows_describe(const zp_table *t, zp_snap_table *st)
{
    const Zeps__TableSpec *d = t->rows->spec;
    snprintf(st->name, sizeof(st->name), "%s", t->name);
    st->kind = 1;
    st->length = t->rows->dim;
    snprintf(st->optimizer, sizeof(st->optimizer), "%s", d->optimizer ? d->optimizer : "");
    int init = zp_init_from_name(d->init);
    st->init = init < 0 ? 0 : (uint32_t)init;
    st->init_scale = d->init_scale;
    st->seed = d->seed;
    st->version = t->version;
    st->round = t->round.closed;
    st->state_per_param = (uint32_t)zp_sparse_state_per_value(t->rows->store);
    size_t len = zeps__table_spec__get_packed_size(d);
    uint8_t *spec = zp_alloc(len ? len : 1);
    zeps__table_spec__pack(d, spec);
    st->owned_bytes = spec; /* freed with the record; rows_pack replaces it */
    st->spec = spec;
    st->spec_len = len;
}

/* Serialise t's rows into st (declaration and rows in one owned buffer).
 * Runs in the writer: the forked child (glibc's malloc is usable after
 * fork), or in-process at exit. */
static void rows_pack(const zp_table *t, zp_snap_table *st)
{
    const zp_sparse *store = t->rows->store;
    zp_sparse_counters c;
    zp_sparse_get_counters(store, &c);
    uint32_t dim = t->rows->dim, spp = st->state_per_param;
    uint64_t rec = ZP_SNAP_ROW_LEN(dim, spp), n = 0;
    size_t len = ZP_SNAP_ROWS_HDR + (size_t)(c.rows * rec);
    uint8_t *mem = zp_alloc(st->spec_len + len);
    memcpy(mem, st->spec, st->spec_len);
    uint8_t *rows = mem + st->spec_len, *at = rows + ZP_SNAP_ROWS_HDR;
    uint64_t cursor = 0;
    zp_sparse_row row;
    while (n < c.rows && zp_sparse_next(store, &cursor, &row)) {
        zp_rows_record_pack(at, &row, dim, spp);
        at += rec;
        n++;
    }
    /* little-endian host (snapshot.c asserts it) */
    uint64_t hdr[8] = {n,
                       (uint64_t)dim | (uint64_t)spp << 32,
                       c.created,
                       c.not_admitted,
                       c.pushes_skipped,
                       c.evicted_ttl,
                       c.evicted_capacity,
                       0};
    memcpy(rows, hdr, sizeof(hdr));
    free(st->owned_bytes);
    st->owned_bytes = mem;
    st->spec = mem;
    st->rows = rows;
    st->rows_len = ZP_SNAP_ROWS_HDR + n * rec;
}

/* The recorded declaration of a sparse record. */
static int rows_snap_spec(const zp_snap_table *st, Zeps__TableSpec **out, char *err, size_t errlen)
{
    Zeps__TableSpec *spec = zeps__table_spec__unpack(NULL, (size_t)st->spec_len, st->spec);
    if (!spec || spec->kind != ZP_TABLE_SPARSE || strcmp(spec->name, st->name) != 0) {
        if (spec)
            zeps__table_spec__free_unpacked(spec, NULL);
        return zp_errors_set(err, errlen, ZEPS_EDATA,
                             "sparse table '%s': the recorded declaration does not decode",
                             st->name);
    }
    *out = spec;
    return 0;
}

/* Every row of st put back into `store` as it was (values, optimizer
 * state, version, touches, last clock), and the store's history. */
static void put_rows(zp_sparse *store, const zp_snap_table *st, uint32_t dim, uint32_t spp)
{
    uint64_t n;
    memcpy(&n, st->rows, 8);
    put_records(store, st->rows + ZP_SNAP_ROWS_HDR, n, dim, spp);
    /* the table's history, as recorded (header: u64 rows, u32 dim, u32
     * state, then created, not_admitted, pushes_skipped, evicted_ttl,
     * evicted_capacity) */
    zp_sparse_counters hist = {0};
    memcpy(&hist.created, st->rows + 16, 8);
    memcpy(&hist.not_admitted, st->rows + 24, 8);
    memcpy(&hist.pushes_skipped, st->rows + 32, 8);
    memcpy(&hist.evicted_ttl, st->rows + 40, 8);
    memcpy(&hist.evicted_capacity, st->rows + 48, 8);
    zp_sparse_set_history(store, &hist);
}

static int rows_load(zp_table *t, const zp_snap_table *st, char *err, size_t errlen)
{
    uint32_t dim = t->rows->dim, spp = (uint32_t)zp_sparse_state_per_value(t->rows->store);
    if (dim != st->length || spp != st->state_per_param)
        return zp_errors_set(err, errlen, ZEPS_EDATA,
                             "sparse table '%s': rows of dim %" PRIu64 " with %u state floats, the "
                             "declaration makes %u and %u",
                             st->name, st->length, st->state_per_param, dim, spp);
    put_rows(t->rows->store, st, dim, spp);
    zp_rround_clear(&t->rows->held); /* pushes of rounds the record is before */
    zp_rowpast_clear(&t->rows->past);
    t->version = st->version;
    t->round.closed = st->round;
    return 0;
}

static void rows_set_lr(zp_table *t, float lr)
{
    zp_sparse_set_lr(t->rows->store, lr);
}

static bool rows_fits(const zp_table *t, const zp_snap_table *st)
{
    return st->kind == ZP_TABLE_SPARSE && st->begin == t->begin && st->end == t->end;
}

/* Rollback: a fresh store from the record replaces the live one (its hot
 * rows; a cold tier is the caller's to put back: tiered.h). */
static int rows_reset(zp_table *t, const zp_snap_table *st, char *err, size_t errlen)
{
    Zeps__TableSpec *spec = NULL; /* set on success; gcc -O3 cannot tell */
    int rc = rows_snap_spec(st, &spec, err, errlen);
    if (rc != 0)
        return rc;
    zp_table fresh = {.rows = NULL};
    snprintf(fresh.name, sizeof(fresh.name), "%s", t->name);
    rc = rows_create(&fresh, spec, 0, 1, err, errlen);
    zeps__table_spec__free_unpacked(spec, NULL);
    if (rc == 0)
        rc = rows_load(&fresh, st, err, errlen);
    if (rc == 0) {
        zp_sparse *old = t->rows->store;
        t->rows->store = fresh.rows->store;
        fresh.rows->store = old;
        zp_rowvers_fini(&t->rows->kept);  /* the kept versions belong to a history that is gone */
        zp_rround_clear(&t->rows->held);  /* and so do the held pushes */
        zp_rowpast_clear(&t->rows->past); /* and the rows of the last round */
        t->version = fresh.version;
        t->round.closed = fresh.round.closed;
    }
    rows_destroy(&fresh);
    return rc;
}

const zp_table_kind zp_rows_kind = {
    .name = "sparse",
    .id = ZP_TABLE_SPARSE,
    .rounds = false,
    .create = rows_create,
    .destroy = rows_destroy,
    .check_same = rows_check_same,
    .bytes = rows_bytes,
    .clock = rows_clock,
    .stats = rows_stats,
    .log_declared = rows_log_declared,
    .set_lr = rows_set_lr,
    .describe = rows_describe,
    .pack = rows_pack,
    .snap_spec = rows_snap_spec,
    .load = rows_load,
    .fits = rows_fits,
    .reset = rows_reset,
};
