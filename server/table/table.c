/*
 * table.c - a table on this shard: creation from a declaration through its
 * kind, the declaration check, and the dense kind itself (a slice: updates
 * with copy-on-write of the parameter buffer, its snapshot record). See
 * table.h; the sparse kind is rows.c.
 */
#include "table.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "init.h"
#include "log.h"
#include "segments.h"
#include "zeps_errors.h"

/* The largest dense table: 2^36 elements (256 GiB of f32) is beyond any one
 * machine; the bound keeps size arithmetic far from overflow. */
#define ZP_TABLE_MAX_LENGTH (1ull << 36)

/* The slice's buffers (own_params below copies on write with it). */
static zp_buf *buf_new(size_t n)
{
    return zp_buf_new(n);
}

/* Release the values kept for a past clock (table.h `past`), if any. */
static void drop_past(zp_table *t)
{
    if (t->past)
        zp_buf_release(t->past->data, t->past);
    t->past = NULL;
}

static int valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 63)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
            return 0;
    return 1;
}

static void hyper_from_spec(zp_hyper *h, const Zeps__TableSpec *spec)
{
    h->lr = (float)spec->lr;
    h->momentum = (float)spec->momentum;
    h->beta1 = (float)spec->beta1;
    h->beta2 = (float)spec->beta2;
    h->eps = (float)spec->eps;
    h->weight_decay = (float)spec->weight_decay;
    zp_hyper_defaults(h);
}

/* The checks every kind shares: the name and the kind. */
static int check_common(const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    if (!spec->name || !valid_name(spec->name)) {
        snprintf(err, errlen, "table name '%s' must be 1-63 characters of [A-Za-z0-9_.-]",
                 spec->name ? spec->name : "");
        return ZEPS_EINVAL;
    }
    if (spec->kind != ZP_TABLE_DENSE && spec->kind != ZP_TABLE_SPARSE) {
        snprintf(err, errlen, "table '%s': kind %u is not supported (0 = dense, 1 = sparse)",
                 spec->name, spec->kind);
        return ZEPS_EINVAL;
    }
    if (spec->kind == ZP_TABLE_SPARSE && spec->n_segments) {
        snprintf(err, errlen, "table '%s': init segments are for dense tables", spec->name);
        return ZEPS_EINVAL;
    }
    return 0;
}

/* A dense declaration: length, initializer, optimizer. */
static int check_dense(const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    if (spec->length == 0 || spec->length > ZP_TABLE_MAX_LENGTH) {
        snprintf(err, errlen, "table '%s': length %llu must be in [1, 2^36]", spec->name,
                 (unsigned long long)spec->length);
        return ZEPS_EINVAL;
    }
    if (zp_init_from_name(spec->init) < 0) {
        snprintf(err, errlen,
                 "table '%s': unknown initializer '%s' (zeros, constant, uniform, normal)",
                 spec->name, spec->init);
        return ZEPS_EINVAL;
    }
    if (!isfinite(spec->init_scale)) {
        snprintf(err, errlen, "table '%s': init_scale must be finite", spec->name);
        return ZEPS_EINVAL;
    }
    int rc = zp_segments_check(spec, err, errlen);
    if (rc != 0)
        return rc;
    zp_hyper h;
    hyper_from_spec(&h, spec);
    char oerr[200];
    if (zp_optim_validate(spec->optimizer, &h, oerr, sizeof(oerr)) != 0) {
        snprintf(err, errlen, "table '%s': %s", spec->name, oerr);
        return ZEPS_EOPTIM;
    }
    return 0;
}

const zp_table_kind *zp_table_kind_for(uint32_t kind)
{
    static const zp_table_kind *const kinds[] = {
        [ZP_TABLE_DENSE] = &zp_table_dense, [ZP_TABLE_SPARSE] = &zp_rows_kind};
    return kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[kind] : NULL;
}

/* A dense slice: parameters, optimizer state and the round state. */
static int dense_create(zp_table *t, const Zeps__TableSpec *spec, uint64_t begin, uint64_t end,
                        char *err, size_t errlen)
{
    int rc = check_dense(spec, err, errlen);
    if (rc != 0)
        return rc;
    if (begin > end || end > spec->length)
        return zp_errors_set(err, errlen, ZEPS_ERANGE,
                             "table '%s': a piece [%" PRIu64 ", %" PRIu64 ") of %" PRIu64
                             " elements",
                             t->name, begin, end, spec->length);
    t->length = spec->length;
    t->begin = begin;
    t->end = end;
    t->n = (size_t)(t->end - t->begin);
    hyper_from_spec(&t->hyper, spec);
    t->opt = zp_optim_find(spec->optimizer);
    size_t nstate = (size_t)t->opt->state_per_param * t->n;
    t->params = buf_new(t->n);
    t->state = nstate ? calloc(nstate, sizeof(float)) : NULL;
    if (!t->params || (nstate && !t->state) || zp_round_init(&t->round, t->nworkers, t->n) != 0) {
        snprintf(err, errlen, "table '%s': cannot allocate %llu bytes for its slice", t->name,
                 (unsigned long long)((2 + t->opt->state_per_param) * t->n * sizeof(float)));
        return ZEPS_ENOMEM;
    }
    if (spec->n_segments)
        zp_segments_fill(spec, t->params->data, t->begin, t->n);
    else
        zp_init_fill(t->params->data, t->begin, t->n, t->init, t->init_scale, t->seed);
    t->init_digest = zp_segments_digest(spec);
    t->init_known = true;
    return 0;
}

static void dense_destroy(zp_table *t)
{
    zp_versions_fini(&t->versions);
    drop_past(t);
    zp_round_fini(&t->round);
    if (t->params)
        zp_buf_release(t->params->data, t->params);
    zp_dc_fini(&t->dc, t->nworkers);
    free(t->push_scratch);
    zp_cpull_free(t);
    free(t->state);
}

int zp_table_new(zp_table **out, uint32_t id, const Zeps__TableSpec *spec, int shard, int nshards,
                 int nworkers, char *err, size_t errlen)
{
    uint64_t len = spec && spec->kind != ZP_TABLE_SPARSE ? spec->length : 0;
    return zp_table_new_piece(out, id, spec, len * (uint64_t)shard / (uint64_t)nshards,
                              len * (uint64_t)(shard + 1) / (uint64_t)nshards, nworkers, err,
                              errlen);
}

int zp_table_new_piece(zp_table **out, uint32_t id, const Zeps__TableSpec *spec, uint64_t begin,
                       uint64_t end, int nworkers, char *err, size_t errlen)
{
    int rc = check_common(spec, err, errlen);
    if (rc != 0)
        return rc;
    zp_table *t = zp_alloc_zeroed(1, sizeof(*t));
    t->id = id;
    t->kind = zp_table_kind_for(spec->kind);
    snprintf(t->name, sizeof(t->name), "%s", spec->name);
    snprintf(t->optimizer, sizeof(t->optimizer), "%s", spec->optimizer ? spec->optimizer : "");
    t->init = (zp_init_kind)zp_init_from_name(spec->init);
    t->init_scale = spec->init_scale;
    t->seed = spec->seed;
    t->has_staleness = spec->has_staleness;
    t->staleness = spec->staleness;
    t->nworkers = nworkers;
    zp_parked_init(&t->parked);
    rc = t->kind->create(t, spec, begin, end, err, errlen);
    if (rc != 0) {
        zp_table_destroy(&t);
        return rc;
    }
    t->lr_declared = t->lr_now = (float)spec->lr;
    *out = t;
    return 0;
}

bool zp_table_empty_slice(const zp_table *t)
{
    return !t->rows && t->n == 0;
}

int zp_table_set_lr(zp_table *t, double lr, char *err, size_t errlen)
{
    float f = (float)lr;
    if (!(isfinite(f) && f > 0))
        return zp_errors_set(err, errlen, ZEPS_EOPTIM,
                             "table '%s': lr %g must be finite and > 0 (it stays %g)", t->name, lr,
                             (double)t->lr_now);
    t->lr_now = f;
    t->kind->set_lr(t, f);
    return 0;
}

void zp_table_describe(const zp_table *t, zp_snap_table *st)
{
    st->kind = t->kind->id;
    t->kind->describe(t, st);
    st->lr_now = t->lr_now != t->lr_declared ? t->lr_now : 0;
}

int zp_table_reset(zp_table *t, const zp_snap_table *st, char *err, size_t errlen)
{
    int rc = t->kind->reset(t, st, err, errlen);
    if (rc == 0) /* the lr in force at the cut: the steps redone tune it again */
        rc = zp_table_set_lr(t, st->lr_now > 0 ? st->lr_now : t->lr_declared, err, errlen);
    return rc;
}

bool zp_table_holds_pushes(const zp_table *t)
{
    return t->round.npending > 0 || (t->rows && t->rows->held.nheld > 0);
}

void zp_table_destroy(zp_table **tp)
{
    zp_table *t = *tp;
    if (!t)
        return;
    zp_parked_fini(&t->parked);
    t->kind->destroy(t);
    free(t);
    *tp = NULL;
}

int zp_table_declared_from_snap(zp_table **out, uint32_t id, const zp_snap_table *st, int nworkers,
                                char *err, size_t errlen)
{
    const zp_table_kind *kind = zp_table_kind_for(st->kind);
    if (!kind)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "table '%s': unknown kind %u in the snapshot",
                             st->name, st->kind);
    Zeps__TableSpec *spec;
    int rc = kind->snap_spec(st, &spec, err, errlen);
    if (rc != 0)
        return rc;
    /* the record's own slice: the default one, or a piece the file's map
     * gave the shard (checked as the file was read; sparse: [0, 0)) */
    rc = zp_table_new_piece(out, id, spec, st->begin, st->end, nworkers, err, errlen);
    zeps__table_spec__free_unpacked(spec, NULL);
    return rc;
}

int zp_table_load_snap(zp_table *t, const zp_snap_table *st, char *err, size_t errlen)
{
    t->init_known = false; /* the record keeps values, not init segments */
    int rc = t->kind->load(t, st, err, errlen);
    if (rc == 0 && st->lr_now > 0)
        rc = zp_table_set_lr(t, st->lr_now, err, errlen);
    return rc;
}

int zp_table_from_snap(zp_table **out, uint32_t id, const zp_snap_table *st, int nworkers,
                       char *err, size_t errlen)
{
    zp_table *t;
    int rc = zp_table_declared_from_snap(&t, id, st, nworkers, err, errlen);
    if (rc != 0)
        return rc;
    rc = zp_table_load_snap(t, st, err, errlen);
    if (rc != 0) {
        zp_table_destroy(&t);
        return rc;
    }
    *out = t;
    return 0;
}

void zp_table_append(zp_table ***tables, uint32_t *n, uint32_t *cap, zp_table *t)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *tables = zp_alloc_resize(*tables, *cap * sizeof(**tables));
    }
    (*tables)[(*n)++] = t;
}

int zp_table_check_same(const zp_table *t, const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    return t->kind->check_same(t, spec, err, errlen);
}

#define SAME_D(field, label)                                                                       \
    do {                                                                                           \
        zp_hyper h_;                                                                               \
        hyper_from_spec(&h_, spec);                                                                \
        if (h_.field != t->hyper.field) {                                                          \
            snprintf(err, errlen, "table '%s' already declared with %s = %g, not %g", t->name,     \
                     label, (double)t->hyper.field, (double)h_.field);                             \
            return ZEPS_ECONFLICT;                                                                 \
        }                                                                                          \
    } while (0)

static int dense_check_same(const zp_table *t, const Zeps__TableSpec *spec, char *err,
                            size_t errlen)
{
    if (spec->kind != 0) {
        if (spec->kind == ZP_TABLE_SPARSE)
            snprintf(err, errlen, "table '%s' already declared as dense, not sparse", t->name);
        else
            snprintf(err, errlen, "table '%s' already declared as dense, not kind %u", t->name,
                     spec->kind);
        return ZEPS_ECONFLICT;
    }
    if (spec->length != t->length) {
        snprintf(err, errlen, "table '%s' already declared with length %llu, not %llu", t->name,
                 (unsigned long long)t->length, (unsigned long long)spec->length);
        return ZEPS_ECONFLICT;
    }
    if (strcmp(spec->optimizer ? spec->optimizer : "", t->optimizer) != 0) {
        snprintf(err, errlen, "table '%s' already declared with optimizer '%s', not '%s'", t->name,
                 t->optimizer, spec->optimizer ? spec->optimizer : "");
        return ZEPS_ECONFLICT;
    }
    if ((float)spec->lr != t->lr_declared) { /* as declared: TUNE may have changed lr_now */
        snprintf(err, errlen, "table '%s' already declared with lr = %g, not %g", t->name,
                 (double)t->lr_declared, (double)(float)spec->lr);
        return ZEPS_ECONFLICT;
    }
    SAME_D(momentum, "momentum");
    SAME_D(beta1, "beta1");
    SAME_D(beta2, "beta2");
    SAME_D(eps, "eps");
    SAME_D(weight_decay, "weight_decay");
    if (spec->has_staleness != t->has_staleness ||
        (t->has_staleness && spec->staleness != t->staleness)) {
        snprintf(err, errlen, "table '%s' already declared with %s, not %s", t->name,
                 t->has_staleness ? "its own staleness bound" : "the cluster's staleness bound",
                 spec->has_staleness ? "its own" : "the cluster's");
        return ZEPS_ECONFLICT;
    }
    if (t->init_known && zp_segments_digest(spec) != t->init_digest) {
        snprintf(err, errlen, "table '%s' already declared with other init segments", t->name);
        return ZEPS_ECONFLICT;
    }
    if (zp_init_from_name(spec->init) != (int)t->init || spec->init_scale != t->init_scale ||
        spec->seed != t->seed) {
        snprintf(err, errlen,
                 "table '%s' already declared with init %s(scale %g, seed %llu), not %s(scale %g, "
                 "seed %llu)",
                 t->name, zp_init_name(t->init), t->init_scale, (unsigned long long)t->seed,
                 spec->init && *spec->init ? spec->init : "zeros", spec->init_scale,
                 (unsigned long long)spec->seed);
        return ZEPS_ECONFLICT;
    }
    return 0;
}

/* Before an update: a reply still reading the current bytes gets to keep
 * them, the update goes into a copy. */
static void own_params(zp_table *t)
{
    if (atomic_load_explicit(&t->params->refs, memory_order_acquire) > 1) {
        /* A reply still reads the current bytes: write into a copy. */
        zp_buf *fresh = buf_new(t->n);
        if (!fresh) {
            fprintf(stderr, "zeps: out of memory copying table '%s'\n", t->name);
            abort();
        }
        memcpy(fresh->data, t->params->data, t->n * sizeof(float));
        zp_buf_release(t->params->data, t->params);
        t->params = fresh;
    }
}

/* After an update: the slice is one version further (kept if asked). */
static void bump_version(zp_table *t)
{
    t->version++;
    if (t->versions.cap)
        zp_versions_note(&t->versions, t->params, t->version);
}

void zp_table_apply(zp_table *t, const float *g, size_t off, size_t count, float scale)
{
    own_params(t);
    t->opt->apply(t->params->data + off, t->state ? t->state + off : NULL, g, count, t->n,
                  &t->hyper, t->version, scale);
    bump_version(t);
}

bool zp_table_apply_checked(zp_table *t, const float *g, float *g_own, size_t off, size_t count,
                            float scale)
{
    own_params(t);
    if (!zp_optim_apply_checked(t->opt, t->params->data + off, t->state ? t->state + off : NULL, g,
                                g_own, count, t->n, &t->hyper, t->version, scale))
        return false;
    bump_version(t);
    return true;
}

void zp_table_read(const zp_table *t, size_t off, size_t n, float *out)
{
    memcpy(out, t->params->data + off, n * sizeof(float));
    for (int k = 0; k < t->opt->state_per_param; k++)
        memcpy(out + (size_t)(k + 1) * n, t->state + (size_t)k * t->n + off, n * sizeof(float));
}

void zp_table_write(zp_table *t, size_t off, size_t n, const float *in)
{
    own_params(t);
    memcpy(t->params->data + off, in, n * sizeof(float));
    for (int k = 0; k < t->opt->state_per_param; k++)
        memcpy(t->state + (size_t)k * t->n + off, in + (size_t)(k + 1) * n, n * sizeof(float));
}

void zp_table_after_put(zp_table *t, uint64_t at_least)
{
    uint64_t v = t->version + 1 > at_least ? t->version + 1 : at_least;
    if (t->rows) {
        t->version = v;
        return;
    }
    t->version = v - 1; /* bump_version counts the one update and notes it */
    bump_version(t);
}

bool zp_table_sparse_ok(const zp_table *t)
{
    /* a linear optimizer without a weight-decay term: w -= lr * scale * g */
    return t->opt->linear && t->hyper.weight_decay == 0.0f;
}

void zp_table_apply_sparse(zp_table *t, const zp_codec_ops *codec, const void *buf, size_t len,
                           size_t off, size_t count, float scale)
{
    own_params(t);
    /* the same alpha as the linear optimizer's w += (-lr * scale) * g */
    codec->decode_add(buf, len, count, -t->hyper.lr * scale, t->params->data + off);
    bump_version(t);
}

float *zp_table_push_scratch(zp_table *t)
{
    if (!t->push_scratch)
        t->push_scratch = malloc((t->n ? t->n : 1) * sizeof(float));
    return t->push_scratch;
}

zp_buf *zp_table_params_ref(zp_table *t)
{
    return zp_buf_ref(t->params);
}

void zp_table_keep_versions(zp_table *t, uint32_t keep)
{
    if (t->versions.cap || t->rows)
        return;
    zp_versions_init(&t->versions, keep);
    zp_versions_note(&t->versions, t->params, t->version);
}

void zp_table_keep_past(zp_table *t, int64_t clock)
{
    drop_past(t);
    t->past = zp_buf_ref(t->params);
    t->past_clock = clock;
    t->past_version = t->version;
}

zp_buf *zp_table_past(zp_table *t, int64_t clock, uint64_t *version)
{
    if (!t->past || clock != t->past_clock)
        return NULL;
    *version = t->past_version;
    return zp_buf_ref(t->past);
}

zp_buf *zp_table_params_at(zp_table *t, uint64_t want, uint64_t *got)
{
    zp_buf *b = t->versions.cap ? zp_versions_find(&t->versions, want, got) : NULL;
    if (!b) {
        *got = t->version;
        b = t->params;
    }
    return zp_buf_ref(b);
}

void zp_table_reset_to(zp_table *t, const float *params, const float *state, uint64_t version,
                       int64_t round)
{
    if (atomic_load_explicit(&t->params->refs, memory_order_acquire) > 1) {
        zp_buf *fresh = buf_new(t->n);
        if (!fresh) {
            fprintf(stderr, "zeps: out of memory resetting table '%s'\n", t->name);
            abort();
        }
        zp_buf_release(t->params->data, t->params);
        t->params = fresh;
    }
    memcpy(t->params->data, params, t->n * sizeof(float));
    if (t->state)
        memcpy(t->state, state, (size_t)t->opt->state_per_param * t->n * sizeof(float));
    t->version = version;
    zp_round_reset(&t->round, round);
    drop_past(t); /* of a history that is gone */
    if (t->versions.cap) {
        /* the kept versions belong to a history that is gone */
        zp_versions_clear(&t->versions);
        zp_versions_note(&t->versions, t->params, t->version);
    }
}

uint64_t zp_table_bytes(const zp_table *t)
{
    return t->kind->bytes(t);
}

uint64_t zp_table_estimate_bytes(const Zeps__TableSpec *spec, int shard, int nshards)
{
    if (spec->kind != ZP_TABLE_DENSE || spec->length > ZP_TABLE_MAX_LENGTH)
        return 0;
    const zp_optim_ops *opt = zp_optim_find(spec->optimizer);
    if (!opt)
        return 0;
    uint64_t n = spec->length * (uint64_t)(shard + 1) / (uint64_t)nshards -
                 spec->length * (uint64_t)shard / (uint64_t)nshards;
    return n * (2u + (unsigned)opt->state_per_param) * sizeof(float);
}

static uint64_t dense_bytes(const zp_table *t)
{
    uint64_t floats = (uint64_t)t->n * (1u + (unsigned)t->opt->state_per_param);
    if (t->push_scratch)
        floats += t->n;
    return floats * sizeof(float) + zp_round_bytes(&t->round) + zp_dc_bytes(&t->dc, t->n);
}

static void dense_clock(zp_table *t, int64_t clock)
{
    (void)t;
    (void)clock; /* a slice does not age */
}

static void dense_stats(const zp_table *t, Zeps__TableStats *ts)
{
    (void)t;
    (void)ts; /* the common fields say everything */
}

static void dense_log_declared(const zp_table *t, const Zeps__TableSpec *spec)
{
    (void)spec;
    zp_info("table '%s' declared: %" PRIu64 " elements, slice [%" PRIu64 ", %" PRIu64
            "), optimizer %s, lr %g, init %s",
            t->name, t->length, t->begin, t->end, t->optimizer, (double)t->hyper.lr,
            zp_init_name(t->init));
}

static void dense_describe(const zp_table *t, zp_snap_table *st)
{
    snprintf(st->name, sizeof(st->name), "%s", t->name);
    st->length = t->length;
    st->begin = t->begin;
    st->end = t->end;
    snprintf(st->optimizer, sizeof(st->optimizer), "%s", t->optimizer);
    st->hyper = t->hyper;
    st->hyper.lr = t->lr_declared; /* the lr in force is recorded apart (zp_table_describe) */
    st->init = (uint32_t)t->init;
    st->init_scale = t->init_scale;
    st->seed = t->seed;
    st->has_staleness = t->has_staleness;
    st->staleness = t->staleness;
    st->version = t->version;
    st->round = t->round.closed;
    st->state_per_param = (uint32_t)t->opt->state_per_param;
    st->params = t->params->data;
    st->state = t->state;
}

static void dense_pack(const zp_table *t, zp_snap_table *st)
{
    (void)t;
    (void)st; /* the parameters are written from live (copy-on-write) memory */
}

/* The declaration a dense record was made from, as a heap spec. */
static int dense_snap_spec(const zp_snap_table *st, Zeps__TableSpec **out, char *err, size_t errlen)
{
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = (char *)st->name;
    spec.kind = st->kind;
    spec.length = st->length;
    spec.optimizer = (char *)st->optimizer;
    spec.lr = st->hyper.lr;
    spec.momentum = st->hyper.momentum;
    spec.beta1 = st->hyper.beta1;
    spec.beta2 = st->hyper.beta2;
    spec.eps = st->hyper.eps;
    spec.weight_decay = st->hyper.weight_decay;
    spec.init = (char *)zp_init_name((zp_init_kind)st->init);
    spec.init_scale = st->init_scale;
    spec.seed = st->seed;
    spec.has_staleness = st->has_staleness;
    spec.staleness = st->staleness;
    size_t len = zeps__table_spec__get_packed_size(&spec);
    uint8_t *buf = zp_alloc(len ? len : 1);
    zeps__table_spec__pack(&spec, buf);
    *out = zeps__table_spec__unpack(NULL, len, buf);
    free(buf);
    if (!*out)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "table '%s': declaration does not encode",
                             st->name);
    return 0;
}

static void dense_set_lr(zp_table *t, float lr)
{
    t->hyper.lr = lr;
}

static bool dense_fits(const zp_table *t, const zp_snap_table *st)
{
    return st->kind == ZP_TABLE_DENSE && st->begin == t->begin && st->end == t->end &&
           st->state_per_param == (uint32_t)t->opt->state_per_param;
}

static int dense_load(zp_table *t, const zp_snap_table *st, char *err, size_t errlen)
{
    if (!dense_fits(t, st))
        return zp_errors_set(err, errlen, ZEPS_EDATA,
                             "table '%s' in the snapshot does not fit this shard's slice",
                             st->name);
    /* the declaration went through float once already: keep the exact values */
    t->hyper = st->hyper;
    memcpy(t->params->data, st->params, t->n * sizeof(float));
    if (t->state)
        memcpy(t->state, st->state, (size_t)st->state_per_param * t->n * sizeof(float));
    t->version = st->version;
    t->round.closed = st->round;
    return 0;
}

static int dense_reset(zp_table *t, const zp_snap_table *st, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    zp_table_reset_to(t, st->params, st->state, st->version, st->round);
    return 0;
}

const zp_table_kind zp_table_dense = {
    .name = "dense",
    .id = ZP_TABLE_DENSE,
    .rounds = true,
    .create = dense_create,
    .destroy = dense_destroy,
    .check_same = dense_check_same,
    .bytes = dense_bytes,
    .clock = dense_clock,
    .stats = dense_stats,
    .log_declared = dense_log_declared,
    .set_lr = dense_set_lr,
    .describe = dense_describe,
    .pack = dense_pack,
    .snap_spec = dense_snap_spec,
    .load = dense_load,
    .fits = dense_fits,
    .reset = dense_reset,
};
