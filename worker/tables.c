/*
 * tables.c - libzeps: tables and the requests that name them (see zeps.h).
 *
 * Declaring dense and sparse tables on every shard; cutting a range of a
 * dense table into one sub-request per shard it touches; compressed pushes
 * (encoded per sub-request, with error feedback) and compressed pulls (the
 * codec and view a pull of a table uses); the glue sbatch.c uses to send
 * sparse requests. The request engine these build on (sending, replies,
 * retries, waits) is client.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_internal.h"
#include "codec.h"
#include "util.h"
#include "wire.h"
#include "zeps.h"

/* --- tables --- */

static uint64_t slice_begin(uint64_t length, int k, int nshards)
{
    return length * (uint64_t)k / (uint64_t)nshards;
}

/* Declare ts on every shard and record it (or find it, if this client
 * declared it before). A dense table must get the slices the client
 * computes; a sparse one has no slices. */
static int declare(zeps_client *c, const Zeps__TableSpec *ts, uint32_t *table)
{
    bool sparse = ts->kind == 1;
    zeps_req *r = zp_req_new(c, ZEPS__OP__DECLARE, c->nshards);
    r->spec = ts;
    for (int k = 0; k < c->nshards; k++)
        zp_req_send(r, zp_req_add(r, k));
    /* zeps_wait frees r: read the per-shard answers first. */
    zp_req_finish(r);
    uint32_t ids[ZP_MAX_SHARDS];
    int bad = -1;
    for (int k = 0; k < c->nshards; k++) {
        ids[k] = r->subs[k].table;
        uint64_t b = slice_begin(ts->length, k, c->nshards);
        uint64_t e = slice_begin(ts->length, k + 1, c->nshards);
        if (!sparse && !r->err && (r->subs[k].offset != b || r->subs[k].count != e - b))
            bad = k;
    }
    int rc = zeps_wait(&r);
    if (rc != 0)
        return rc;
    if (bad >= 0)
        return zp_fail(c, ZEPS_EPROTO, "shard %d holds a different slice of table '%s' than expected",
                    bad, ts->name);
    for (uint32_t i = 0; i < c->ntables; i++) {
        if (strcmp(c->tables[i].name, ts->name) == 0) {
            memcpy(c->tables[i].ids, ids, (size_t)c->nshards * sizeof(uint32_t));
            *table = i;
            return 0;
        }
    }
    if (c->ntables == c->cap_tables) {
        c->cap_tables = c->cap_tables ? 2 * c->cap_tables : 8;
        c->tables = zp_xrealloc(c->tables, c->cap_tables * sizeof(*c->tables));
    }
    zeps_table_info *ti = &c->tables[c->ntables];
    memset(ti, 0, sizeof(*ti));
    snprintf(ti->name, sizeof(ti->name), "%s", ts->name);
    ti->length = ts->length;
    ti->dim = sparse ? ts->dim : 0;
    ti->ids = zp_xcalloc((size_t)c->nshards, sizeof(uint32_t));
    ti->version = zp_xcalloc((size_t)c->nshards, sizeof(uint64_t));
    memcpy(ti->ids, ids, (size_t)c->nshards * sizeof(uint32_t));
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
    return declare(c, &ts, table);
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

/* Compress a push sub-request's values x (elements [lo, lo + count) of the
 * table) into a buffer the sub owns, with error feedback if configured. The
 * sequence number is the nonce: a resend carries the same bytes. */
static void encode_sub(zeps_client *c, zeps_table_info *ti, zeps_sub *s, const float *x,
                       uint64_t lo)
{
    uint64_t t0 = zp_now_ns();
    size_t n = (size_t)s->count;
    s->encoded = zp_xmalloc(ti->codec->max_size(n, &ti->cparams) + 1);
    if (ti->residual)
        s->data_len = zp_ef_encode(ti->codec, &ti->cparams, ti->residual + lo, x, n, s->seq,
                                   s->encoded);
    else
        s->data_len = ti->codec->encode(x, n, &ti->cparams, s->seq, s->encoded);
    s->data = s->encoded;
    s->codec = (uint32_t)ti->codec->id;
    c->stats.encode_s += (double)(zp_now_ns() - t0) * 1e-9;
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
    zeps_table_info *ti = &c->tables[table];
    free(ti->residual);
    ti->residual = NULL;
    zp_rowres_free(&ti->row_residual);
    ti->codec = codec->id == ZP_CODEC_NONE ? NULL : codec;
    ti->cparams = p;
    ti->row_ef = ti->codec && o->error_feedback && ti->dim; /* sparse: residual per row */
    if (ti->codec && o->error_feedback && !ti->dim)
        ti->residual = zp_xcalloc(ti->length, sizeof(float));
    return 0;
}

int zeps_set_pull_codec(zeps_client *c, uint32_t table, const zeps_codec_opts *o)
{
    if (!c)
        return ZEPS_EINVAL;
    if (table >= c->ntables)
        return zp_fail(c, ZEPS_ETABLE, "no table with handle %u (declare it first)", table);
    zeps_table_info *ti = &c->tables[table];
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
        ti->view_id = zp_xcalloc((size_t)c->nshards, sizeof(uint64_t));
    ti->pcodec = codec;
    ti->pparams = p;
    return 0;
}

int zeps_pull_codec_reset(zeps_client *c, uint32_t table)
{
    if (!c)
        return ZEPS_EINVAL;
    if (table >= c->ntables)
        return zp_fail(c, ZEPS_ETABLE, "no table with handle %u (declare it first)", table);
    if (c->tables[table].view_id)
        memset(c->tables[table].view_id, 0, (size_t)c->nshards * sizeof(uint64_t));
    return 0;
}

/* Split [offset, offset + count) of a table over the shards and start one
 * sub-request per shard touched. */
static int start_ranged(zeps_client *c, int op, uint32_t table, float *dst, const float *src,
                        uint64_t offset, uint64_t count, int64_t clock, zeps_req **req)
{
    if (!c || !req || (op == ZEPS__OP__PUSH && !src))
        return ZEPS_EINVAL;
    if (table >= c->ntables)
        return zp_fail(c, ZEPS_ETABLE, "no table with handle %u (declare it first)", table);
    zeps_table_info *ti = &c->tables[table];
    if (count == 0 || offset > ti->length || count > ti->length - offset)
        return zp_fail(c, ZEPS_ERANGE,
                    "elements [%" PRIu64 ", %" PRIu64 "+%" PRIu64 ") are outside table '%s' of %" PRIu64,
                    offset, offset, count, ti->name, ti->length);
    /* The servers drop messages over max_message_bytes (and the connection
     * with them): refuse such a request here, with a reason, instead. */
    uint64_t limit = c->opt.max_message_bytes;
    for (int k = 0; limit && op == ZEPS__OP__PUSH && k < c->nshards; k++) {
        uint64_t b = slice_begin(ti->length, k, c->nshards);
        uint64_t e = slice_begin(ti->length, k + 1, c->nshards);
        uint64_t lo = offset > b ? offset : b, hi = offset + count < e ? offset + count : e;
        if (lo < hi && (hi - lo) * sizeof(float) + 1024 > limit)
            return zp_fail(c, ZEPS_ETOOBIG,
                        "a push of %" PRIu64 " bytes to shard %d of table '%s' exceeds "
                        "max_message_mb (%" PRIu64 " bytes)",
                        (hi - lo) * (uint64_t)sizeof(float), k, ti->name, limit);
    }
    /* a compressed pull is of the whole table into a buffer that holds the
     * last one (zeps_set_pull_codec); any other pull is plain */
    int compressed =
        op == ZEPS__OP__PULL && dst && ti->pcodec && offset == 0 && count == ti->length;
    zeps_req *r = zp_req_new(c, op, c->nshards);
    r->table = table;
    r->clock = clock;
    for (int k = 0; k < c->nshards; k++) {
        uint64_t b = slice_begin(ti->length, k, c->nshards);
        uint64_t e = slice_begin(ti->length, k + 1, c->nshards);
        uint64_t lo = offset > b ? offset : b, hi = offset + count < e ? offset + count : e;
        if (lo >= hi)
            continue;
        zeps_sub *s = zp_req_add(r, k);
        s->table = ti->ids[k];
        s->offset = lo;
        s->count = hi - lo;
        if (op == ZEPS__OP__PUSH) {
            s->data = src + (lo - offset);
            s->data_len = s->count * sizeof(float);
            s->data_version = ti->version[k];
            if (ti->codec)
                encode_sub(c, ti, s, src + (lo - offset), lo);
            c->stats.bytes_out += s->data_len;
            c->stats.bytes_out_raw += s->count * sizeof(float);
        } else {
            s->dst = dst ? dst + (lo - offset) : NULL; /* NULL: a view */
            if (compressed) {
                s->flags |= ZP_FLAG_PULL_DELTA;
                s->codec = (uint32_t)ti->pcodec->id;
                s->compressed = 1;
                s->cparams = ti->pparams;
                s->view_id = ti->view_id[k];
            }
        }
        zp_req_send(r, s);
    }
    *req = r;
    return 0;
}

int zeps_pull_start(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
                    int64_t clock, zeps_req **req)
{
    if (!dst)
        return ZEPS_EINVAL;
    return start_ranged(c, ZEPS__OP__PULL, table, dst, NULL, offset, count, clock, req);
}

int zeps_pull_view_start(zeps_client *c, uint32_t table, uint64_t offset, uint64_t count,
                         int64_t clock, zeps_req **req)
{
    int rc = start_ranged(c, ZEPS__OP__PULL, table, NULL, NULL, offset, count, clock, req);
    if (rc == 0)
        (*req)->view = 1;
    return rc;
}

int zeps_push_start(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                    uint64_t count, int64_t clock, zeps_req **req)
{
    return start_ranged(c, ZEPS__OP__PUSH, table, NULL, grad, offset, count, clock, req);
}

int zeps_pull(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
              int64_t clock)
{
    zeps_req *r;
    int rc = zeps_pull_start(c, table, dst, offset, count, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int zeps_push(zeps_client *c, uint32_t table, const float *grad, uint64_t offset, uint64_t count,
              int64_t clock)
{
    zeps_req *r;
    int rc = zeps_push_start(c, table, grad, offset, count, clock, &r);
    return rc ? rc : zeps_wait(&r);
}


/* --- sparse requests (sbatch.c builds the payloads) --- */

int zp_client_fail(zeps_client *c, int code, const char *msg)
{
    return zp_fail(c, code, "%s", msg);
}

int zp_client_sparse_table(zeps_client *c, uint32_t table, uint32_t *dim)
{
    if (!c)
        return ZEPS_EINVAL;
    if (table >= c->ntables)
        return zp_fail(c, ZEPS_ETABLE, "no table with handle %u (declare it first)", table);
    if (!c->tables[table].dim)
        return zp_fail(c, ZEPS_EINVAL, "table '%s' is dense; sparse calls need a sparse table",
                    c->tables[table].name);
    *dim = c->tables[table].dim;
    return 0;
}

int zp_client_sparse_start(zeps_client *c, int push, uint32_t table, int64_t clock,
                           zeps_sbatch *b, const zp_sparse_part *parts, int nparts,
                           zeps_req **out)
{
    zeps_table_info *ti = &c->tables[table];
    uint64_t limit = c->opt.max_message_bytes;
    for (int i = 0; limit && i < nparts; i++) {
        /* what the shard must hold: the request, and the rows it sends back
         * (pull) or decodes (compressed push) */
        uint64_t rows = push ? parts[i].raw_len : parts[i].nkeys * (ti->dim + 1) * sizeof(float);
        uint64_t big = parts[i].len > rows ? parts[i].len : rows;
        if (big + 1024 > limit)
            return zp_fail(c, ZEPS_ETOOBIG,
                           "a sparse %s of %" PRIu64 " rows (%" PRIu64 " bytes) to shard %d of "
                           "table '%s' exceeds max_message_mb (%" PRIu64 " bytes); use smaller "
                           "batches",
                           push ? "push" : "pull", parts[i].nkeys, big, parts[i].shard, ti->name,
                           limit);
    }
    zeps_req *r = zp_req_new(c, push ? ZEPS__OP__PUSH : ZEPS__OP__PULL, nparts);
    r->table = table;
    r->clock = clock;
    for (int i = 0; i < nparts; i++) {
        zeps_sub *s = zp_req_add(r, parts[i].shard);
        s->table = ti->ids[parts[i].shard];
        s->count = parts[i].nkeys;
        s->data = parts[i].data;
        s->data_len = parts[i].len;
        s->flags = parts[i].flags;
        s->codec = parts[i].codec;
        s->sb = b;
        if (push) {
            c->stats.bytes_out += parts[i].len;
            c->stats.bytes_out_raw += parts[i].raw_len;
        }
        zp_req_send(r, s);
    }
    *out = r;
    return 0;
}

void zp_client_sparse_codec(zeps_client *c, uint32_t table, const zp_codec_ops **codec,
                            const zp_codec_params **params, zp_rowres ***residual)
{
    zeps_table_info *ti = &c->tables[table];
    *codec = ti->codec;
    *params = &ti->cparams;
    *residual = ti->row_ef ? &ti->row_residual : NULL;
}
