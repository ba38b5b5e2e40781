/*
 * dense.c - libzeps: pulls and pushes of a range of a dense table.
 *
 * A range is cut into one sub-request per piece it touches: the default
 * slices of the cluster file's shards, or the pieces the client's map
 * places the table in (docs/elastic.md, "Dense tables by range"; a shard
 * may hold several, each a sub-request of its own). Pushes go out from
 * the caller's buffer without copying, or encoded per sub-request with the
 * table's push codec (and its error-feedback residual); a pull of the whole
 * table with a pull codec is a compressed pull of the delta to the view the
 * caller's buffer holds. What a reply must update (the pulled version, the
 * view id) is named in the sub-request for the engine (req.c) to fill.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "alloc.h"
#include "client.h"
#include "codec.h"
#include "now.h"
#include "push_clock.h"
#include "req.h"
#include "tables.h"
#include "wire.h"
#include "zeps.h"

/* Compress a push sub-request's values x (elements [lo, lo + count) of the
 * table) into a buffer the sub owns, with error feedback if configured. The
 * sequence number is the nonce: a resend carries the same bytes. */
static void encode_sub(zeps_client *c, zp_table *ti, zp_req_sub *s, const float *x, uint64_t lo)
{
    uint64_t t0 = zp_now_ns();
    size_t n = (size_t)s->count;
    s->encoded = zp_alloc(ti->codec->max_size(n, &ti->cparams) + 1);
    if (ti->residual)
        s->data_len = zp_codec_ef_encode(ti->codec, &ti->cparams, ti->residual + lo, x, n, s->seq,
                                         s->encoded);
    else
        s->data_len = ti->codec->encode(x, n, &ti->cparams, s->seq, s->encoded);
    s->data = s->encoded;
    s->codec = (uint32_t)ti->codec->id;
    c->stats.encode_s += (double)(zp_now_ns() - t0) * 1e-9;
}

/* Split [offset, offset + count) of a table over the shards and start one
 * sub-request per shard touched; a push's to shard k carries the clock if
 * clock_on[k] (push_clock.h). */
static int start_ranged(zeps_client *c, int op, uint32_t table, float *dst, const float *src,
                        uint64_t offset, uint64_t count, int64_t clock, const uint8_t *clock_on,
                        zp_req **req)
{
    if (!c || !req || (op == ZEPS__OP__PUSH && !src))
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (count == 0 || offset > ti->length || count > ti->length - offset)
        return zp_fail(c, ZEPS_ERANGE,
                       "elements [%" PRIu64 ", %" PRIu64 "+%" PRIu64
                       ") are outside table '%s' of %" PRIu64,
                       offset, offset, count, ti->name, ti->length);
    zp_dense_piece *pc;
    size_t np = zp_tables_pieces(c, ti, &pc);
    /* The servers drop messages over max_message_bytes (and the connection
     * with them): refuse such a request here, with a reason, instead. */
    uint64_t limit = c->opt.max_message_bytes;
    for (size_t i = 0; limit && op == ZEPS__OP__PUSH && i < np; i++) {
        uint64_t lo = offset > pc[i].lo ? offset : pc[i].lo;
        uint64_t hi = offset + count < pc[i].hi ? offset + count : pc[i].hi;
        if (lo < hi && (hi - lo) * sizeof(float) + 1024 > limit) {
            int owner = pc[i].owner; /* named after pc is freed */
            free(pc);
            return zp_fail(c, ZEPS_ETOOBIG,
                           "a push of %" PRIu64 " bytes to shard %d of table '%s' exceeds "
                           "max_message_mb (%" PRIu64 " bytes)",
                           (hi - lo) * (uint64_t)sizeof(float), owner, ti->name, limit);
        }
    }
    /* a compressed pull is of the whole table into a buffer that holds the
     * last one (zeps_set_pull_codec); any other pull is plain */
    int compressed = op == ZEPS__OP__PULL && dst && ti->pcodec && offset == 0 &&
                     count == ti->length &&
                     !zp_densemap_names(zp_slotmap_dense(c->slots), ti->name);
    uint8_t clocked[ZP_MAX_SHARDS] = {0};
    zp_req *r = zp_req_new(c, op, (int)np);
    r->clock = clock;
    for (size_t i = 0; i < np; i++) {
        int k = pc[i].owner;
        uint64_t lo = offset > pc[i].lo ? offset : pc[i].lo;
        uint64_t hi = offset + count < pc[i].hi ? offset + count : pc[i].hi;
        if (lo >= hi)
            continue;
        zp_req_sub *s = zp_req_add(r, k);
        s->table = ti->ids[k];
        s->resend = (zp_req_resend){
            .table_ids = ti->ids, .versions = ti->version, .dense = 1, .handle = table};
        s->offset = lo;
        s->count = hi - lo;
        if (op == ZEPS__OP__PUSH) {
            s->data = src + (lo - offset);
            s->data_len = s->count * sizeof(float);
            s->data_version = ti->version[k];
            if (clock_on && clock_on[k] && !clocked[k]++) /* once a shard */
                s->flags |= ZP_FLAG_CLOCK;
            if (ti->codec)
                encode_sub(c, ti, s, src + (lo - offset), lo);
            else /* an EMOVED sends it again from the caller's buffer (redirect.c) */
                s->resend.raw = s->data;
            c->stats.bytes_out += s->data_len;
            c->stats.bytes_out_raw += s->count * sizeof(float);
        } else {
            s->dst = dst ? dst + (lo - offset) : NULL; /* NULL: a view */
            s->version_out = &ti->version[k];
            if (compressed) {
                s->flags |= ZP_FLAG_PULL_DELTA;
                s->codec = (uint32_t)ti->pcodec->id;
                s->compressed = 1;
                s->cparams = ti->pparams;
                s->view_id = ti->view_id[k];
                s->view_id_out = &ti->view_id[k];
            }
        }
        zp_req_send(r, s);
    }
    free(pc);
    *req = r;
    return 0;
}

int zeps_pull_start(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
                    int64_t clock, zp_req **req)
{
    if (!dst)
        return ZEPS_EINVAL;
    return start_ranged(c, ZEPS__OP__PULL, table, dst, NULL, offset, count, clock, NULL, req);
}

int zeps_pull_view_start(zeps_client *c, uint32_t table, uint64_t offset, uint64_t count,
                         int64_t clock, zp_req **req)
{
    int rc = start_ranged(c, ZEPS__OP__PULL, table, NULL, NULL, offset, count, clock, NULL, req);
    if (rc == 0)
        (*req)->view = 1;
    return rc;
}

int zeps_push_start(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                    uint64_t count, int64_t clock, zp_req **req)
{
    return start_ranged(c, ZEPS__OP__PUSH, table, NULL, grad, offset, count, clock, NULL, req);
}

int zp_dense_push_start_clocked(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                                uint64_t count, int64_t clock, const uint8_t *clock_on,
                                zp_req **req)
{
    return start_ranged(c, ZEPS__OP__PUSH, table, NULL, grad, offset, count, clock, clock_on, req);
}

int zeps_pull(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
              int64_t clock)
{
    zp_req *r;
    int rc = zeps_pull_start(c, table, dst, offset, count, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int zeps_push(zeps_client *c, uint32_t table, const float *grad, uint64_t offset, uint64_t count,
              int64_t clock)
{
    zp_req *r;
    int rc = zeps_push_start(c, table, grad, offset, count, clock, &r);
    return rc ? rc : zeps_wait(&r);
}
