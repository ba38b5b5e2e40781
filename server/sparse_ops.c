/*
 * sparse_ops.c - PULL and PUSH of sparse tables on a shard.
 *
 * Frames (docs/protocol.md, "Sparse tables"): a PULL carries `count` ids as
 * little-endian u64; its reply carries count * dim f32 values (row i for id i)
 * followed by count u32 row versions. A PUSH carries the ids, then count *
 * dim f32 gradients, then, with ZP_FLAG_ROW_VERSIONS, the u32 row versions
 * the gradients were computed from (so tau is measured per row). Ids must
 * belong to this shard (zp_sparse_shard_of) and be distinct within a push
 * (the client library sums repeated ids first); gradients must be finite.
 * Everything is checked before any row is touched.
 *
 * When: sparse pushes are applied as they arrive in every consistency mode
 * (under `weighted`, each row scaled by the weight of its own staleness);
 * pulls wait as dense pulls do (ssp, weighted bound), and in bsp until every
 * live worker finished the previous clock (min_clock >= clock), which is
 * ssp with bound 0. See docs/sparse.md for why sparse tables do not collect
 * whole rounds.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "log.h"
#include "server.h"
#include "sparse_hash.h"
#include "sparse_ops.h"
#include "util.h"
#include "zeps_errors.h"

/* A pull's or push's ids, copied out of the frame (which may sit at any
 * alignment inside ZeroMQ's receive buffer) into the table's scratch. */
static const uint64_t *copy_ids(zp_table *t, const void *data, size_t n)
{
    if (n > t->ids_cap) {
        free(t->ids);
        t->ids_cap = n < 1024 ? 1024 : n;
        t->ids = zp_xmalloc(t->ids_cap * sizeof(uint64_t));
    }
    memcpy(t->ids, data, n * sizeof(uint64_t));
    return t->ids;
}

/* Index of an id that does not belong to this shard, or -1. */
static ptrdiff_t foreign_id(const zp_server *s, const uint64_t *ids, size_t n)
{
    if (s->nshards == 1)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (zp_sparse_shard_of(ids[i], s->nshards) != s->shard)
            return (ptrdiff_t)i;
    return -1;
}

/* Index of the second occurrence of a repeated id, or -1: an open-addressing
 * set over the table's scratch, cleared by generation stamps, hashed with
 * XXH3 under a seed drawn at random per table (ids come from the network:
 * a public hash would let a client make every id collide, and the check
 * quadratic). */
static ptrdiff_t repeated_id(zp_table *t, const uint64_t *ids, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    if (cap > t->set_cap) {
        free(t->set_keys);
        free(t->set_gen);
        t->set_cap = cap;
        t->set_keys = zp_xmalloc(cap * sizeof(uint64_t));
        t->set_gen = zp_xcalloc(cap, sizeof(uint32_t));
        t->set_stamp = 0;
    }
    if (++t->set_stamp == 0) { /* wrapped: clear once every 2^32 pushes */
        memset(t->set_gen, 0, t->set_cap * sizeof(uint32_t));
        t->set_stamp = 1;
    }
    if (!t->set_seed)
        t->set_seed = zp_random64() | 1u;
    size_t mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        size_t j = (size_t)zp_id_hash(ids[i], t->set_seed) & mask;
        while (t->set_gen[j] == t->set_stamp) {
            if (t->set_keys[j] == ids[i])
                return (ptrdiff_t)i;
            j = (j + 1) & mask;
        }
        t->set_gen[j] = t->set_stamp;
        t->set_keys[j] = ids[i];
    }
    return -1;
}

bool zp_sparse_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    if (s->cons == &zp_consistency_bsp)
        return s->min_clock >= clock;
    return s->cons->pull_ready(s, t, rank, clock);
}

static void free_reply(void *data, void *hint)
{
    (void)hint;
    free(data);
}

void zp_sparse_send_pull(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                         int64_t clock, const uint64_t *ids, size_t n, double wait_us)
{
    zp_hist_add_log2(&t->pull_wait_us, (uint64_t)wait_us);
    size_t dim = t->dim;
    size_t len = n * (dim + 1) * sizeof(float);
    float *buf = malloc(len);
    if (!buf) {
        Zeps__Header req;
        zeps__header__init(&req);
        req.op = ZEPS__OP__PULL;
        req.req_id = req_id;
        req.table = t->id;
        zp_reply_error(s, identity, &req, ZEPS_ENOMEM, "cannot allocate %zu bytes for %zu rows",
                       len, n);
        return;
    }
    zp_sparse_pull(t->sparse, ids, n, clock, buf, (uint32_t *)(buf + n * dim));
    Zeps__Header rep;
    zp_reply_init(s, NULL, &rep);
    rep.op = ZEPS__OP__PULL;
    rep.req_id = req_id;
    rep.table = t->id;
    rep.count = n;
    rep.clock = s->min_clock;
    t->pulls++;
    t->keys_pulled += n;
    zp_reply_send(s, identity, &rep, buf, len, free_reply, NULL);
}

/* Checks shared by PULL and PUSH: one payload frame of `bytes` (or, with
 * `at_least`, more than that), 1 to ZP_SPARSE_MAX_KEYS ids, all of this
 * shard. Returns the ids or NULL after replying with an error. */
static const uint64_t *checked_ids(zp_server *s, zp_request *r, zp_table *t, size_t bytes,
                                   bool at_least)
{
    const Zeps__Header *h = r->h;
    const char *op = zp_op_name(h->op);
    if (r->npayload != 1) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "%s of sparse table '%s' must carry exactly one frame, got %d", op,
                       t->name, r->npayload);
        return NULL;
    }
    if (h->count == 0 || h->count > ZP_SPARSE_MAX_KEYS) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "%s of sparse table '%s' names %" PRIu64 " ids; 1 to %d per request", op,
                       t->name, h->count, ZP_SPARSE_MAX_KEYS);
        return NULL;
    }
    size_t len = zmq_msg_size(r->payload);
    if (at_least ? len <= bytes : len != bytes) {
        zp_reply_error(s, r->identity, h, ZEPS_ESIZE,
                       "%s of %" PRIu64 " ids to sparse table '%s' (dim %u) carries %zu bytes, "
                       "expected %s%zu",
                       op, h->count, t->name, t->dim, len, at_least ? "more than " : "", bytes);
        return NULL;
    }
    const uint64_t *ids = copy_ids(t, zmq_msg_data(r->payload), (size_t)h->count);
    ptrdiff_t bad = foreign_id(s, ids, (size_t)h->count);
    if (bad >= 0) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "%s of sparse table '%s': id %" PRIu64 " (position %td) belongs to shard "
                       "%d, not shard %d",
                       op, t->name, ids[bad], bad, zp_sparse_shard_of(ids[bad], s->nshards),
                       s->shard);
        return NULL;
    }
    return ids;
}

/* Whether `bytes` of rows (a pull's reply, a compressed push decoded) fit
 * max_message_mb; replies ETOOBIG if not. Ids are small, rows need not be:
 * without this, 8 bytes of id could ask for 16 KiB of rows (dim 4096). */
static bool rows_fit(zp_server *s, zp_request *r, const zp_table *t, uint64_t bytes)
{
    if (bytes <= s->cfg.max_message_bytes)
        return true;
    zp_reply_error(s, r->identity, r->h, ZEPS_ETOOBIG,
                   "%s of %" PRIu64 " rows of sparse table '%s' (dim %u) is %" PRIu64
                   " bytes of rows, over max_message_mb (%" PRIu64 " bytes); use smaller batches",
                   zp_op_name(r->h->op), r->h->count, t->name, t->dim, bytes,
                   s->cfg.max_message_bytes);
    return false;
}

void zp_sparse_on_pull(zp_server *s, zp_request *r, zp_worker *w, zp_table *t)
{
    const Zeps__Header *h = r->h;
    size_t n = (size_t)h->count;
    const uint64_t *ids = checked_ids(s, r, t, n * sizeof(uint64_t), false);
    if (!ids || !rows_fit(s, r, t, (uint64_t)n * (t->dim + 1) * sizeof(float)))
        return;
    zp_worker_record(w, h->seq);
    w->pulls++;
    if (zp_sparse_pull_ready(s, t, h->rank, h->clock)) {
        zp_sparse_send_pull(s, r->identity, h->req_id, t, h->clock, ids, n, 0.0);
        return;
    }
    zp_parked *p = zp_xcalloc(1, sizeof(*p));
    zmq_msg_init(&p->identity);
    zmq_msg_copy(&p->identity, r->identity);
    zmq_msg_init(&p->keys);
    zmq_msg_copy(&p->keys, r->payload);
    p->has_keys = true;
    p->req_id = h->req_id;
    p->rank = h->rank;
    p->seq = h->seq;
    p->count = h->count;
    p->clock = h->clock;
    p->since_s = zp_now_s();
    zp_table_park(t, p);
}

void zp_sparse_serve_parked(zp_server *s, zp_table *t, zp_parked *p)
{
    const uint64_t *ids = copy_ids(t, zmq_msg_data(&p->keys), (size_t)p->count);
    zp_sparse_send_pull(s, &p->identity, p->req_id, t, p->clock, ids, (size_t)p->count,
                        (zp_now_s() - p->since_s) * 1e6);
}

/* Room for n floats in the table's gradient scratch, or NULL if that
 * cannot be allocated. */
static float *grad_scratch(zp_table *t, size_t nvals)
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

/* A large scratch is not kept for the next (usually small) push. */
static void trim_scratch(zp_table *t)
{
    if (t->grad_cap * sizeof(float) > ((size_t)64 << 20)) {
        free(t->grads);
        t->grads = NULL;
        t->grad_cap = 0;
    }
}

/* The gradients as aligned floats: in place when the frame allows it. */
static const float *aligned_grads(zp_table *t, const unsigned char *data, size_t nvals)
{
    if (((uintptr_t)data & 3u) == 0)
        return (const float *)data;
    float *g = grad_scratch(t, nvals);
    if (g)
        memcpy(g, data, nvals * sizeof(float));
    return g;
}

/* A compressed push's rows, validated against their codec and decoded into
 * the table's scratch; NULL after replying with an error. */
static const float *decoded_grads(zp_server *s, zp_request *r, zp_table *t, const void *buf,
                                  size_t len)
{
    const Zeps__Header *h = r->h;
    size_t nvals = (size_t)h->count * t->dim;
    const zp_codec_ops *codec = zp_codec_by_id(h->codec);
    if (!codec) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "unknown codec %u in a PUSH to sparse table '%s'", h->codec, t->name);
        return NULL;
    }
    double t0 = zp_now_s();
    char err[300];
    int rc = codec->validate(buf, len, nvals, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s push to sparse table '%s' from worker %u: %s",
                       codec->name, t->name, h->rank, err);
        return NULL;
    }
    if (!rows_fit(s, r, t, (uint64_t)nvals * sizeof(float)))
        return NULL;
    float *g = grad_scratch(t, nvals);
    if (!g) {
        zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                       "cannot allocate %zu bytes to decode a push to sparse table '%s'",
                       nvals * sizeof(float), t->name);
        return NULL;
    }
    codec->decode(buf, len, nvals, g);
    t->decode_s += zp_now_s() - t0;
    return g;
}

/* weighted mode: each row scaled by w(tau of that row), rows staler than
 * max_staleness dropped. Returns the rows dropped. */
static size_t push_weighted(zp_server *s, zp_table *t, const uint64_t *ids, size_t n,
                            const float *g, int64_t clock, const uint32_t *rv)
{
    size_t dropped = 0;
    for (size_t i = 0; i < n; i++) {
        zp_sparse_row row;
        uint64_t tau = 0;
        if (zp_sparse_get(t->sparse, ids[i], &row) && row.version > rv[i])
            tau = row.version - rv[i];
        if (s->cfg.max_staleness >= 0 && tau > (uint64_t)s->cfg.max_staleness) {
            dropped++;
            continue;
        }
        float wt = (float)zp_weight(s->cfg.weight_fn, s->cfg.weight_lambda, tau);
        zp_sparse_push(t->sparse, &ids[i], 1, g + i * t->dim, wt, clock, &rv[i], &t->tau);
    }
    return dropped;
}

int zp_sparse_on_push(zp_server *s, zp_request *r, zp_worker *w, zp_table *t,
                      uint32_t *reply_flags)
{
    const Zeps__Header *h = r->h;
    size_t n = (size_t)h->count, dim = t->dim;
    bool versions = (h->flags & ZP_FLAG_ROW_VERSIONS) != 0;
    size_t vbytes = versions ? n * sizeof(uint32_t) : 0;
    /* raw: ids, rows, versions exactly; compressed: ids, a payload, versions */
    size_t fixed = n * sizeof(uint64_t) + vbytes;
    const uint64_t *ids = h->codec ? checked_ids(s, r, t, fixed, true)
                                   : checked_ids(s, r, t, fixed + n * dim * sizeof(float), false);
    if (!ids)
        return -1;
    ptrdiff_t rep = repeated_id(t, ids, n);
    if (rep >= 0) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "PUSH to sparse table '%s' names id %" PRIu64 " twice (position %td); "
                       "sum repeated ids first",
                       t->name, ids[rep], rep);
        return -1;
    }
    const unsigned char *data = zmq_msg_data(r->payload);
    size_t len = zmq_msg_size(r->payload);
    const unsigned char *rows = data + n * sizeof(uint64_t);
    size_t rows_len = len - fixed;
    const float *g = h->codec ? decoded_grads(s, r, t, rows, rows_len)
                              : aligned_grads(t, rows, n * dim);
    if (!g) {
        if (!h->codec) /* a misaligned raw frame we could not copy */
            zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                           "cannot allocate %zu bytes for a push to sparse table '%s'",
                           n * dim * sizeof(float), t->name);
        return -1;
    }
    if (s->cfg.reject_nonfinite && !zp_all_finite(g, n * dim)) {
        zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                       "PUSH to sparse table '%s' from worker %u contains NaN or Inf; nothing "
                       "applied",
                       t->name, h->rank);
        return -1;
    }
    if (h->clock < 0) {
        zp_reply_error(s, r->identity, h, ZEPS_ECLOCK, "PUSH with negative clock %" PRId64,
                       h->clock);
        return -1;
    }
    const uint32_t *rv = NULL;
    if (versions) {
        if (n > t->ver_cap) {
            free(t->vers);
            t->ver_cap = n;
            t->vers = zp_xmalloc(n * sizeof(uint32_t));
        }
        memcpy(t->vers, rows + rows_len, n * sizeof(uint32_t));
        rv = t->vers;
    }
    zp_worker_record(w, h->seq);
    *reply_flags = 0;
    if (rv && s->cons == &zp_consistency_weighted) {
        size_t dropped = push_weighted(s, t, ids, n, g, h->clock, rv);
        t->dropped += dropped;
        w->dropped += dropped;
        if (dropped)
            *reply_flags = ZP_FLAG_DROPPED;
    } else {
        zp_sparse_push(t->sparse, ids, n, g, 1.0f, h->clock, rv, &t->tau);
    }
    trim_scratch(t);
    t->version++;
    t->pushes++;
    t->keys_pushed += n;
    w->pushes++;
    size_t raw = fixed + n * dim * sizeof(float);
    t->push_bytes_wire += len;
    t->push_bytes_raw += raw;
    w->push_bytes_wire += len;
    w->push_bytes_raw += raw;
    return 0;
}
