/*
 * payload.c - libzeps: a reply's payload delivered where its sub-request
 * says (zp_req_sub): a dense pull's values into its destination (or, for a
 * compressed pull, its delta added there), a sparse pull's rows scattered
 * to their positions, a view's or a SCAN page's frame kept. The request
 * engine (req.c) calls in here; nothing here calls back.
 */
#include "payload.h"

#include <inttypes.h>
#include <string.h>

#include "client.h"
#include "codec.h"
#include "fail.h"
#include "now.h"
#include "rowcopy.h"
#include "wire.h"
#include "zeps.h"

/* The answer to a compressed pull: full values (the server resynced the
 * view) or a delta that is validated and added to what dst holds, exactly as
 * the server added it to its record of dst. */
static int apply_compressed_pull(zeps_client *c, zp_req_sub *s, const Zeps__Header *h,
                                 zmq_msg_t *frame)
{
    const void *buf = zmq_msg_data(frame);
    size_t len = zmq_msg_size(frame);
    uint64_t t0 = zp_now_ns();
    if (h->flags & ZP_FLAG_PULL_FULL) {
        if (len != s->count * sizeof(float))
            return zp_fail(c, ZEPS_EPROTO,
                           "shard %d answered a compressed PULL of %" PRIu64
                           " elements with %zu bytes of full values",
                           s->shard, s->count, len);
        memcpy(s->dst, buf, len);
    } else if (h->flags & ZP_FLAG_PULL_DELTA) {
        const zp_codec_ops *codec = zp_codec_by_id(h->codec);
        char err[256];
        if (!codec)
            return zp_fail(c, ZEPS_EPROTO, "shard %d answered a compressed PULL with codec %u",
                           s->shard, h->codec);
        int rc = codec->validate(buf, len, (size_t)s->count, err, sizeof(err));
        if (rc != 0)
            return zp_fail(c, rc, "shard %d: compressed PULL reply: %s", s->shard, err);
        codec->decode_add(buf, len, (size_t)s->count, 1.0f, s->dst);
    } else {
        return zp_fail(c, ZEPS_EPROTO,
                       "shard %d answered a compressed PULL with neither delta nor full values",
                       s->shard);
    }
    if (s->view_id_out)
        *s->view_id_out = h->view_id;
    c->stats.decode_s += (double)(zp_now_ns() - t0) * 1e-9;
    c->stats.bytes_in += len;
    c->stats.bytes_in_raw += s->count * sizeof(float);
    return 0;
}

/* The answer to a redirect's piece of a sparse pull (redirect.c): row i
 * is row jmap[i] of the sub it answers for, and goes where that one's
 * would have. */
static int scatter_piece(zeps_client *c, const zp_req_scatter *sc, const unsigned char *rows,
                         size_t cnt, size_t len)
{
    size_t dim = sc->dim;
    const unsigned char *vers = rows + cnt * dim * sizeof(float);
    for (size_t i = 0; i < cnt; i++) {
        size_t j = sc->jmap[i];
        const float *row = (const float *)(rows + i * dim * sizeof(float));
        memcpy(&sc->versions[j], vers + i * sizeof(uint32_t), sizeof(uint32_t));
        if (sc->in_order)
            zp_rowcopy(sc->rows + j * dim, row, dim);
        else if (sc->perm)
            zp_rowcopy(sc->rows + (size_t)sc->perm[j] * dim, row, dim);
        else
            for (size_t q = sc->pbegin[j]; q < sc->pbegin[j + 1]; q++)
                zp_rowcopy(sc->rows + (size_t)sc->plist[q] * dim, row, dim);
    }
    c->stats.bytes_in += len;
    return 0;
}

/* The answer to a sparse pull: s->count rows, then their versions, each
 * row copied to every position of its id (zp_req_scatter; in order: one copy). */
static int scatter_rows(zeps_client *c, zp_req_sub *s, const Zeps__Header *h, zp_frames *m)
{
    const zp_req_scatter *sc = &s->scatter;
    size_t cnt = (size_t)s->count, dim = sc->dim;
    size_t len = m->n == 2 ? zmq_msg_size(&m->f[1]) : 0;
    if (m->n != 2 || h->count != s->count)
        return zp_fail(c, ZEPS_EPROTO,
                       "shard %d answered a sparse PULL of %" PRIu64
                       " ids: wrong frame or id count",
                       s->shard, s->count);
    if (len != cnt * (dim + 1) * sizeof(float))
        return zp_fail(c, ZEPS_EPROTO,
                       "shard %d answered a sparse PULL of %" PRIu64
                       " ids: %zu bytes for %zu rows of dim %zu (expected %zu)",
                       s->shard, s->count, len, cnt, dim, cnt * (dim + 1) * sizeof(float));
    const unsigned char *rows = zmq_msg_data(&m->f[1]);
    if (sc->jmap)
        return scatter_piece(c, sc, rows, cnt, len);
    memcpy(sc->versions, rows + cnt * dim * sizeof(float), cnt * sizeof(uint32_t));
    if (sc->in_order)
        memcpy(sc->rows, rows, cnt * dim * sizeof(float));
    for (size_t j = 0; sc->perm && j < cnt; j++)
        zp_rowcopy(sc->rows + (size_t)sc->perm[j] * dim, rows + j * dim * sizeof(float), dim);
    for (size_t j = 0; !sc->in_order && !sc->perm && j < cnt; j++)
        for (size_t q = sc->pbegin[j]; q < sc->pbegin[j + 1]; q++)
            zp_rowcopy(sc->rows + (size_t)sc->plist[q] * dim, rows + j * dim * sizeof(float), dim);
    if (sc->replied)
        (*sc->replied)++;
    c->stats.bytes_in += len;
    return 0;
}

/* Keep a reply's payload frame in s (a view, a SCAN page); frames ZeroMQ
 * handed us inside its own receive buffer may sit at any offset, so those
 * (small) ones not aligned to `mask` + 1 bytes are copied. */
static void keep_frame(zp_req_sub *s, zmq_msg_t *f, uintptr_t mask)
{
    zmq_msg_init(&s->frame);
    if (((uintptr_t)zmq_msg_data(f) & mask) == 0) {
        zmq_msg_move(&s->frame, f);
    } else {
        zmq_msg_init_size(&s->frame, zmq_msg_size(f));
        memcpy(zmq_msg_data(&s->frame), zmq_msg_data(f), zmq_msg_size(f));
    }
    s->has_frame = 1;
}

int zp_payload_scan(zeps_client *c, zp_req_sub *s, const Zeps__Header *h, zp_frames *m)
{
    if (m->n != 2)
        return zp_fail(c, ZEPS_EPROTO, "shard %d answered a SCAN with %d frame(s), not 2", s->shard,
                       m->n);
    s->offset = h->offset;
    s->count = h->count;
    s->cursor = h->cursor;
    s->data_version = h->data_version;
    s->spv = h->state_per_value;
    keep_frame(s, &m->f[1], 7u);
    c->stats.bytes_in += zmq_msg_size(&m->f[1]);
    return 0;
}

int zp_payload_pull(zeps_client *c, zp_req_sub *s, const Zeps__Header *h, zp_frames *m)
{
    if (s->scatter.rows)
        return scatter_rows(c, s, h, m);
    if (s->compressed && m->n == 2 && h->count == s->count && h->offset == s->offset)
        return apply_compressed_pull(c, s, h, &m->f[1]);
    if (m->n != 2 || h->count != s->count || h->offset != s->offset ||
        zmq_msg_size(&m->f[1]) != s->count * sizeof(float))
        return zp_fail(c, ZEPS_EPROTO,
                       "shard %d answered a PULL of %" PRIu64 " elements at %" PRIu64
                       " with %d frame(s), %" PRIu64 " elements at %" PRIu64,
                       s->shard, s->count, s->offset, m->n, h->count, h->offset);
    if (s->dst)
        memcpy(s->dst, zmq_msg_data(&m->f[1]), s->count * sizeof(float));
    else
        keep_frame(s, &m->f[1], 3u); /* a view */
    c->stats.bytes_in += s->count * sizeof(float);
    c->stats.bytes_in_raw += s->count * sizeof(float);
    return 0;
}

void zp_payload_stats(zp_req *r, const Zeps__Header *h)
{
    if (!h->stats)
        return;
    r->stats_len = zeps__shard_stats__get_packed_size(h->stats);
    r->stats_buf = zp_alloc(r->stats_len);
    zeps__shard_stats__pack(h->stats, r->stats_buf);
}
