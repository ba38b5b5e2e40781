/*
 * tables.c - libzeps: the tables a client declared.
 *
 * Declaring dense and sparse tables on every shard (a dense table must get
 * the slices the client computes, a sparse one has none) and keeping them
 * by handle with what each transfer needs: per-shard ids and versions, the
 * push codec and its residuals, the pull codec and its views. The transfers
 * themselves are dense.c and sparse.c; the requests go through req.c.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "client.h"
#include "codec.h"
#include "req.h"
#include "tables.h"
#include "wire.h"
#include "zeps.h"

/* Most init segments a declaration may name (the shards' limit too). */
#define MAX_SEGMENTS 4096

uint64_t zp_tables_slice_begin(uint64_t length, int k, int nshards)
{
    if (k >= nshards) /* a shard that joined at run time holds no dense slice */
        return length;
    return length * (uint64_t)k / (uint64_t)nshards;
}

size_t zp_tables_pieces(const zeps_client *c, const zp_table *ti, zp_dense_piece **out)
{
    size_t n = zp_slotmap_dense_pieces(c->slots, ti->name, ti->length, NULL, 0);
    *out = zp_alloc((n ? n : 1) * sizeof(**out));
    zp_slotmap_dense_pieces(c->slots, ti->name, ti->length, *out, n);
    return n;
}

bool zp_tables_touches(const zeps_client *c, const zp_table *ti, int k, uint64_t offset,
                       uint64_t count)
{
    zp_dense_piece *p;
    size_t n = zp_tables_pieces(c, ti, &p);
    bool on = false;
    for (size_t i = 0; i < n && !on; i++)
        on = p[i].owner == k && offset < p[i].hi && offset + count > p[i].lo;
    free(p);
    return on;
}

zp_table *zp_tables_get(zeps_client *c, uint32_t table)
{
    if (table >= c->ntables) {
        zp_fail(c, ZEPS_ETABLE, "no table with handle %u (declare it first)", table);
        return NULL;
    }
    return &c->tables[table];
}

void zp_tables_free(zeps_client *c)
{
    for (uint32_t i = 0; i < c->ntables; i++) {
        free(c->tables[i].ids);
        free(c->tables[i].version);
        free(c->tables[i].residual);
        zp_rowres_free(&c->tables[i].row_residual);
        free(c->tables[i].view_id);
        free(c->tables[i].spec);
    }
    free(c->tables);
    c->tables = NULL;
    c->ntables = c->cap_tables = 0;
}

/* Elements of dense table ts the client's map gives shard k. */
static uint64_t holds(const zeps_client *c, const Zeps__TableSpec *ts, int k)
{
    return zp_densemap_held(zp_slotmap_dense(c->slots), ts->name, ts->length,
                            zp_slotmap_base(c->slots), k);
}

/* Whether shard k's DECLARE answer (its first piece's begin and the
 * elements it holds) is what the client's map says. */
static bool slice_as_expected(const zeps_client *c, const Zeps__TableSpec *ts, int k,
                              const zp_req_sub *s)
{
    if (k >= c->ndense || zp_densemap_names(zp_slotmap_dense(c->slots), ts->name))
        return s->count == holds(c, ts, k);
    uint64_t b = zp_tables_slice_begin(ts->length, k, c->ndense);
    uint64_t e = zp_tables_slice_begin(ts->length, k + 1, c->ndense);
    return s->offset == b && s->count == e - b;
}

/* Declare ts on every shard and record it (or find it, if this client
 * declared it before). A dense table must get the slices the client
 * computes; a sparse one has no slices. */
static int declare(zeps_client *c, const Zeps__TableSpec *ts, uint32_t *table)
{
    bool sparse = ts->kind == 1;
    /* a dense table is declared on every live shard: the cluster file's
     * hold its slices, a joined one the pieces a move brings it
     * (docs/elastic.md, "Dense tables by range") */
    int on = c->nshards;
    for (int k = 0; !sparse && k < c->ndense; k++)
        if (!zp_client_live(c, k))
            return zp_fail(c, ZEPS_ESTATE,
                           "dense table '%s': shard %d of the cluster file is retired, and a "
                           "dense table is sliced over all of them (docs/elastic.md, \"Retiring "
                           "a removed shard\")",
                           ts->name, k);
    zp_req *r = zp_req_new(c, ZEPS__OP__DECLARE, on);
    r->spec = ts;
    for (int k = 0; k < on; k++)
        if (zp_client_live(c, k))
            zp_req_send(r, zp_req_add(r, k));
    /* zeps_wait frees r: read the per-shard answers first. */
    zp_req_finish(r);
    uint32_t ids[ZP_MAX_SHARDS] = {0};
    int bad = -1;
    uint64_t lead = 0;
    for (int i = 0; i < r->nsub; i++) {
        int k = r->subs[i].shard;
        ids[k] = r->subs[i].table;
        if (!sparse && !r->err && !slice_as_expected(c, ts, k, &r->subs[i]))
            bad = k;
        /* a shard older than lead columns answers 0: it would train them
         * with the table's step and init */
        if (sparse && !r->err && r->subs[i].count != ts->lead_cols && bad < 0)
            bad = k, lead = r->subs[i].count;
    }
    int rc = zeps_wait(&r);
    if (rc != 0)
        return rc;
    if (bad >= 0 && sparse)
        return zp_fail(c, ZEPS_EPROTO,
                       "shard %d keeps %" PRIu64 " lead columns of table '%s', not %u (a "
                       "zeps-server older than lead columns ignores them)",
                       bad, lead, ts->name, ts->lead_cols);
    if (bad >= 0)
        return zp_fail(c, ZEPS_EPROTO,
                       "shard %d holds a different slice of table '%s' than expected", bad,
                       ts->name);
    for (uint32_t i = 0; i < c->ntables; i++) {
        if (strcmp(c->tables[i].name, ts->name) == 0) {
            memcpy(c->tables[i].ids, ids, (size_t)on * sizeof(uint32_t));
            *table = i;
            return 0;
        }
    }
    if (c->ntables == c->cap_tables) {
        c->cap_tables = c->cap_tables ? 2 * c->cap_tables : 8;
        c->tables = zp_alloc_resize(c->tables, c->cap_tables * sizeof(*c->tables));
    }
    zp_table *ti = &c->tables[c->ntables];
    memset(ti, 0, sizeof(*ti));
    snprintf(ti->name, sizeof(ti->name), "%s", ts->name);
    ti->length = ts->length;
    ti->dim = sparse ? ts->dim : 0;
    /* room for shards that join (join.c): requests in flight borrow these */
    ti->ids = zp_alloc_zeroed(ZP_MAX_SHARDS, sizeof(uint32_t));
    ti->version = zp_alloc_zeroed(ZP_MAX_SHARDS, sizeof(uint64_t));
    memcpy(ti->ids, ids, (size_t)on * sizeof(uint32_t));
    { /* declared again on a shard that joins (join.c) */
        ti->spec_len = zeps__table_spec__get_packed_size(ts);
        ti->spec = zp_alloc(ti->spec_len ? ti->spec_len : 1);
        zeps__table_spec__pack(ts, ti->spec);
    }
    *table = c->ntables++;
    return 0;
}

int zeps_declare(zeps_client *c, const zeps_table_spec *spec, uint32_t *table)
{
    if (!c || !spec || !spec->name || !table)
        return ZEPS_EINVAL;
    Zeps__TableSpec ts;
    zeps__table_spec__init(&ts);
    ts.name = (char *)spec->name;
    ts.kind = 0;
    ts.length = spec->length;
    ts.optimizer = (char *)(spec->optimizer ? spec->optimizer : "sgd");
    ts.lr = spec->lr;
    ts.momentum = spec->momentum;
    ts.beta1 = spec->beta1;
    ts.beta2 = spec->beta2;
    ts.eps = spec->eps;
    ts.weight_decay = spec->weight_decay;
    ts.init = (char *)(spec->init ? spec->init : "zeros");
    ts.init_scale = spec->init_scale;
    ts.seed = spec->seed;
    ts.has_staleness = spec->has_staleness != 0;
    ts.staleness = spec->has_staleness ? spec->staleness : 0;
    if (spec->nsegments > MAX_SEGMENTS)
        return zp_fail(c, ZEPS_EINVAL, "table '%s': %zu init segments, at most %d", spec->name,
                       spec->nsegments, MAX_SEGMENTS);
    Zeps__InitSegment *segs = spec->nsegments ? zp_alloc(spec->nsegments * sizeof(*segs)) : NULL;
    Zeps__InitSegment **ptrs = spec->nsegments ? zp_alloc(spec->nsegments * sizeof(*ptrs)) : NULL;
    for (size_t i = 0; i < spec->nsegments; i++) {
        const zeps_init_segment *g = &spec->segments[i];
        zeps__init_segment__init(&segs[i]);
        segs[i].length = g->length;
        segs[i].init = (char *)(g->init ? g->init : "zeros");
        segs[i].init_scale = g->init_scale;
        segs[i].seed = g->seed;
        ptrs[i] = &segs[i];
    }
    ts.n_segments = spec->nsegments;
    ts.segments = ptrs;
    int rc = declare(c, &ts, table);
    free(ptrs);
    free(segs);
    return rc;
}

int zeps_declare_sparse(zeps_client *c, const zeps_sparse_spec *spec, uint32_t *table)
{
    if (!c || !spec || !spec->name || !table)
        return ZEPS_EINVAL;
    Zeps__TableSpec ts;
    zeps__table_spec__init(&ts);
    ts.name = (char *)spec->name;
    ts.kind = 1;
    ts.dim = spec->dim;
    ts.optimizer = (char *)(spec->optimizer ? spec->optimizer : "sgd");
    ts.lr = spec->lr;
    ts.beta1 = spec->beta1;
    ts.beta2 = spec->beta2;
    ts.eps = spec->eps;
    ts.weight_decay = spec->weight_decay;
    ts.l1 = spec->l1;
    ts.l2 = spec->l2;
    ts.ftrl_beta = spec->ftrl_beta;
    ts.init = (char *)(spec->init ? spec->init : "zeros");
    ts.init_scale = spec->init_scale;
    ts.seed = spec->seed;
    ts.admit_count = spec->admit_count;
    ts.admit_prob = spec->admit_prob;
    ts.ttl_clocks = spec->ttl_clocks;
    ts.capacity_rows = spec->capacity_rows;
    ts.memory_budget = spec->memory_budget;
    ts.evict = (char *)(spec->evict ? spec->evict : "lru");
    ts.lead_cols = spec->lead_cols;
    ts.lead_lr = spec->lead_lr;
    ts.lead_init = (char *)(spec->lead_init ? spec->lead_init : "zeros");
    ts.lead_init_scale = spec->lead_init_scale;
    ts.tier = spec->tier != 0;
    return declare(c, &ts, table);
}

uint32_t zeps_table_dim(const zeps_client *c, uint32_t table)
{
    return c && table < c->ntables ? c->tables[table].dim : 0;
}

uint64_t zeps_table_length(const zeps_client *c, uint32_t table)
{
    return c && table < c->ntables ? c->tables[table].length : 0;
}

uint64_t zeps_pulled_version(const zeps_client *c, uint32_t table, int shard)
{
    if (!c || table >= c->ntables || shard < 0 || shard >= c->nshards)
        return 0;
    return c->tables[table].version[shard];
}

int zeps_set_push_codec(zeps_client *c, uint32_t table, const zeps_codec_opts *o)
{
    if (!c || !o)
        return ZEPS_EINVAL;
    if (table >= c->ntables)
        return zp_fail(c, ZEPS_ETABLE, "no table with handle %u (declare it first)", table);
    const zp_codec_ops *codec = zp_codec_find(o->codec ? o->codec : "none");
    if (!codec)
        return zp_fail(c, ZEPS_EINVAL, "unknown codec '%s'", o->codec);
    zp_codec_params p;
    zp_codec_params_init(&p);
    if (o->fraction > 0)
        p.fraction = o->fraction;
    p.count = o->count;
    if (o->block)
        p.block = o->block;
    p.seed = o->seed;
    char err[256];
    if (zp_codec_params_check(codec, &p, err, sizeof(err)) != 0)
        return zp_fail(c, ZEPS_EINVAL, "codec %s: %s", codec->name, err);
    zp_table *ti = &c->tables[table];
    free(ti->residual);
    ti->residual = NULL;
    zp_rowres_free(&ti->row_residual);
    ti->codec = codec->id == ZP_CODEC_NONE ? NULL : codec;
    ti->cparams = p;
    ti->row_ef = ti->codec && o->error_feedback && ti->dim; /* sparse: residual per row */
    if (ti->codec && o->error_feedback && !ti->dim)
        ti->residual = zp_alloc_zeroed(ti->length, sizeof(float));
    return 0;
}

int zeps_set_pull_codec(zeps_client *c, uint32_t table, const zeps_codec_opts *o)
{
    if (!c)
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (!o) {
        ti->pcodec = NULL;
        return 0;
    }
    if (ti->dim)
        return zp_fail(c, ZEPS_EINVAL,
                       "table '%s' is sparse: its pulls move only the rows asked for and are not "
                       "compressed",
                       ti->name);
    const zp_codec_ops *codec = zp_codec_find(o->codec ? o->codec : "none");
    if (!codec)
        return zp_fail(c, ZEPS_EINVAL, "unknown codec '%s'", o->codec);
    if (codec->id == ZP_CODEC_RANDK)
        return zp_fail(c, ZEPS_EINVAL,
                       "randk cannot compress pulls (it is not contractive; use topk)");
    zp_codec_params p;
    zp_codec_params_init(&p);
    if (o->fraction > 0)
        p.fraction = o->fraction;
    p.count = o->count;
    if (o->block)
        p.block = o->block;
    p.seed = o->seed;
    char err[256];
    if (zp_codec_params_check(codec, &p, err, sizeof(err)) != 0)
        return zp_fail(c, ZEPS_EINVAL, "codec %s: %s", codec->name, err);
    if (!ti->view_id)
        ti->view_id = zp_alloc_zeroed(ZP_MAX_SHARDS, sizeof(uint64_t));
    ti->pcodec = codec;
    ti->pparams = p;
    return 0;
}

int zeps_pull_codec_reset(zeps_client *c, uint32_t table)
{
    if (!c)
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (ti->view_id)
        memset(ti->view_id, 0, (size_t)c->nshards * sizeof(uint64_t));
    return 0;
}
