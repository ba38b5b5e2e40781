/*
 * handlers.c - what a shard does with each op, and how it replies.
 *
 * Each handler's path is linear: check the request (rank, table, range,
 * sizes, values) before touching anything, then act, then reply. Every
 * request gets exactly one reply, an ERROR one when it is wrong; nothing that
 * arrives from the network is asserted. Retried requests are recognised by
 * (rank, incarnation, seq) and never applied twice.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "log.h"
#include "server.h"
#include "sparse_ops.h"
#include "util.h"
#include "zeps_errors.h"

#define ERRLEN 512

void zp_reply_init(const zp_server *s, const Zeps__Header *req, Zeps__Header *rep)
{
    zeps__header__init(rep);
    rep->version = ZP_PROTOCOL_VERSION;
    rep->incarnation = s->incarnation;
    rep->shard = (uint32_t)s->shard;
    if (req) {
        rep->op = req->op;
        rep->req_id = req->req_id;
        rep->table = req->table;
        rep->seq = req->seq;
    }
}

void zp_reply_send(zp_server *s, zmq_msg_t *identity, const Zeps__Header *rep, const void *data,
                   size_t len, zmq_free_fn *ffn, void *hint)
{
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, identity);
    int more = data ? ZMQ_SNDMORE : 0;
    if (zmq_msg_send(&id, s->sock, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zp_debug("reply to a gone peer dropped: %s", zmq_strerror(zmq_errno()));
        zmq_msg_close(&id);
        if (ffn)
            ffn((void *)data, hint);
        return;
    }
    if (zp_header_send(s->sock, rep, more | ZMQ_DONTWAIT) < 0) {
        zp_warn("sending a %s reply failed: %s", zp_op_name(rep->op), zmq_strerror(zmq_errno()));
        if (ffn)
            ffn((void *)data, hint);
        return;
    }
    s->bytes_out += zeps__header__get_packed_size(rep);
    if (data) {
        if (zp_data_send(s->sock, data, len, ffn, hint, ZMQ_DONTWAIT) < 0)
            zp_warn("sending %zu payload bytes failed: %s", len, zmq_strerror(zmq_errno()));
        else
            s->bytes_out += len;
    }
}

void zp_reply_error(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, int code,
                    const char *fmt, ...)
{
    char text[ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.error = code;
    rep.error_text = text;
    s->errors++;
    zp_info("%s from rank %d refused (%s): %s", req ? zp_op_name(req->op) : "message",
            req ? (int)req->rank : -1, zeps_errname(code), text);
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}

static void reply_ok(zp_server *s, zp_request *r, uint32_t flags)
{
    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.flags = flags;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

uint32_t zp_server_staleness(const zp_server *s, const zp_table *t)
{
    return t->has_staleness ? t->staleness : (uint32_t)s->cfg.staleness;
}

void zp_server_record_push(zp_server *s, zp_table *t, const zp_push *p, zp_trace_kind kind,
                           uint64_t version_applied, double weight, int applied)
{
    zp_worker *w = p->rank < (uint32_t)s->nworkers ? &s->workers.w[p->rank] : NULL;
    uint64_t tau = version_applied - p->data_version;
    int64_t gap = s->max_clock - p->clock;
    if (gap < 0)
        gap = 0;
    if (applied) {
        zp_hist_add_linear(&t->tau, tau);
        zp_hist_add_linear(&t->clock_gap, (uint64_t)gap);
        if (w)
            zp_hist_add_linear(&w->tau, tau);
    }
    if (kind == ZP_TRACE_DROP) {
        t->dropped++;
        if (w)
            w->dropped++;
    } else if (kind == ZP_TRACE_LATE) {
        t->late++;
        if (w)
            w->late++;
    }
    if (s->trace) {
        zp_trace_row row = {.kind = kind, .worker = p->rank, .table = t->id, .clock = p->clock,
                            .version_read = p->data_version, .version_applied = version_applied,
                            .tau = tau, .clock_gap = gap, .weight = weight, .applied = applied};
        zp_trace_write(s->trace, &row);
    }
}

/* DC-ASGD needs, per worker, the parameters it last pulled: keep a reference
 * to the buffer the reply is sent from (copy-on-write keeps it unchanged). */
static void remember_pulled(zp_server *s, zp_table *t, uint32_t rank, zp_buf *b)
{
    if (s->cfg.consistency != ZP_CONSISTENCY_WEIGHTED || s->cfg.dc_lambda <= 0 ||
        rank >= (uint32_t)t->nworkers)
        return;
    if (!t->pulled)
        t->pulled = zp_xcalloc((size_t)t->nworkers, sizeof(zp_buf *));
    if (t->pulled[rank] == b)
        return;
    if (t->pulled[rank])
        zp_buf_release(t->pulled[rank]->data, t->pulled[rank]);
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    t->pulled[rank] = b;
}

static void free_payload(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Send the answer to a compressed pull: a delta against the worker's view,
 * or the full values when its view is unknown. Counts the bytes both ways. */
static void send_compressed_pull(zp_server *s, zmq_msg_t *identity, Zeps__Header *rep, zp_table *t,
                                 uint32_t rank, const zp_cpull_req *cp)
{
    zp_cpull_reply out;
    char err[ERRLEN];
    int rc = zp_cpull_prepare(t, rank, cp, s->incarnation, &out, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, identity, rep, rc, "%s", err);
        return;
    }
    zp_worker *w = &s->workers.w[rank];
    uint64_t raw = rep->count * sizeof(float);
    rep->view_id = out.view_id;
    t->pulls++;
    t->pull_bytes_raw += raw;
    w->pull_bytes_raw += raw;
    if (out.full) {
        rep->flags = ZP_FLAG_PULL_FULL;
        if (cp->codec->id != ZP_CODEC_NONE)
            w->pull_resyncs++;
        t->pull_bytes_wire += raw;
        w->pull_bytes_wire += raw;
        zp_buf *b = zp_table_params_ref(t);
        remember_pulled(s, t, rank, b);
        zp_reply_send(s, identity, rep, b->data, raw, zp_buf_release, b);
        return;
    }
    rep->flags = ZP_FLAG_PULL_DELTA;
    rep->codec = out.codec;
    t->pull_bytes_wire += out.len;
    w->pull_bytes_wire += out.len;
    zp_reply_send(s, identity, rep, out.buf, out.len, free_payload, NULL);
}

void zp_server_send_pull_cp(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                            uint32_t rank, int64_t clock, uint64_t offset, uint64_t count,
                            double wait_us, const zp_cpull_req *cp)
{
    zp_hist_add_log2(&t->pull_wait_us, (uint64_t)wait_us);
    if (s->trace) {
        zp_trace_row row = {.kind = ZP_TRACE_PULL, .worker = rank, .table = t->id,
                            .clock = clock, .version_read = t->version,
                            .version_applied = t->version, .clock_gap = clock - s->min_clock,
                            .weight = 1.0, .wait_us = wait_us};
        zp_trace_write(s->trace, &row);
    }
    Zeps__Header rep;
    zp_reply_init(s, NULL, &rep);
    rep.op = ZEPS__OP__PULL;
    rep.req_id = req_id;
    rep.table = t->id;
    rep.offset = offset;
    rep.count = count;
    rep.data_version = t->version;
    rep.clock = t->round;
    if (cp && cp->codec) {
        send_compressed_pull(s, identity, &rep, t, rank, cp);
        return;
    }
    zp_buf *b = zp_table_params_ref(t);
    remember_pulled(s, t, rank, b);
    t->pulls++;
    t->pull_bytes_wire += count * sizeof(float);
    t->pull_bytes_raw += count * sizeof(float);
    if (rank < (uint32_t)s->nworkers) {
        s->workers.w[rank].pull_bytes_wire += count * sizeof(float);
        s->workers.w[rank].pull_bytes_raw += count * sizeof(float);
    }
    zp_reply_send(s, identity, &rep, b->data + (offset - t->begin), count * sizeof(float),
                  zp_buf_release, b);
}

void zp_server_send_pull(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                         uint32_t rank, int64_t clock, uint64_t offset, uint64_t count,
                         double wait_us)
{
    zp_server_send_pull_cp(s, identity, req_id, t, rank, clock, offset, count, wait_us, NULL);
}

void zp_server_serve_parked(zp_server *s, zp_table *t)
{
    zp_parked **pp = &t->parked;
    while (*pp) {
        zp_parked *p = *pp;
        bool ready = t->sparse ? zp_sparse_pull_ready(s, t, p->rank, p->clock)
                               : s->cons->pull_ready(s, t, p->rank, p->clock);
        if (!ready) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        if (t->parked_tail == &p->next)
            t->parked_tail = pp;
        t->nparked--;
        if (t->sparse)
            zp_sparse_serve_parked(s, t, p);
        else
            zp_server_send_pull_cp(s, &p->identity, p->req_id, t, p->rank, p->clock, p->offset,
                                   p->count, (zp_now_s() - p->since_s) * 1e6, &p->cp);
        zp_parked_free(p);
    }
}

/* --- checks shared by the handlers --- */

/* The worker a request comes from, if it is a registered worker of this
 * incarnation; otherwise replies with an error and returns NULL. */
/* An ERROR reply with ERESTARTED: this shard's state came from a snapshot
 * (a restart, or a bsp rollback) since the worker last said HELLO. It
 * carries the cut to resume from (docs/faults.md). */
static void reply_restarted(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req,
                            uint64_t req_id, int64_t cut, uint64_t set)
{
    char text[ERRLEN];
    snprintf(text, sizeof(text),
             "shard %d was restored from snapshot set %016" PRIx64 " (clock %lld): say HELLO "
             "again and resume from there",
             s->shard, set, (long long)cut);
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    if (!req) {
        rep.req_id = req_id;
        rep.op = ZEPS__OP__ERROR;
    }
    rep.op = ZEPS__OP__ERROR;
    rep.error = ZEPS_ERESTARTED;
    rep.error_text = text;
    rep.cut = cut;
    rep.cut_set = set;
    s->errors++;
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}

/* The cut a worker resumes from after a restore: the bsp cut, or the
 * restored clock in other modes. */
static int64_t resume_cut(const zp_server *s)
{
    int64_t c = zp_server_cut(s);
    return c >= 0 ? c : s->restored_clock;
}

/* The worker a request comes from, if it is a registered worker of this
 * incarnation; otherwise replies with an error and returns NULL. */
static zp_worker *worker_of(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->rank >= (uint32_t)s->nworkers) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANK, "rank %u is outside the cluster of %d workers",
                       h->rank, s->nworkers);
        return NULL;
    }
    zp_worker *w = &s->workers.w[h->rank];
    if (!w->joined || w->incarnation != h->incarnation) {
        if (s->epoch > 0) {
            reply_restarted(s, r->identity, h, 0, resume_cut(s), s->restored_set);
            return NULL;
        }
        zp_reply_error(s, r->identity, h, ZEPS_ESTATE,
                       "worker %u incarnation %" PRIx64 " has not said HELLO to shard %d", h->rank,
                       h->incarnation, s->shard);
        return NULL;
    }
    if (w->lost) {
        w->lost = false;
        zp_warn("worker %u, declared lost, is heard from again (after %.1f s)", h->rank,
                zp_now_s() - w->last_seen_s);
        zp_server_update_clock_bounds(s);
    }
    w->last_seen_s = zp_now_s();
    return w;
}

static zp_table *table_of(zp_server *s, zp_request *r)
{
    if (r->h->table >= s->ntables) {
        zp_reply_error(s, r->identity, r->h, ZEPS_ETABLE,
                       "no table with id %u on shard %d (%u declared)", r->h->table, s->shard,
                       s->ntables);
        return NULL;
    }
    return s->tables[r->h->table];
}

/* [offset, offset + count) must lie inside t's slice on this shard. */
static int check_range(zp_server *s, zp_request *r, const zp_table *t)
{
    uint64_t off = r->h->offset, cnt = r->h->count;
    if (cnt == 0 || off < t->begin || off > t->end || cnt > t->end - off) {
        zp_reply_error(s, r->identity, r->h, ZEPS_ERANGE,
                       "%s of table '%s' elements [%" PRIu64 ", %" PRIu64 "+%" PRIu64
                       ") is outside shard %d's slice [%" PRIu64 ", %" PRIu64 ")",
                       zp_op_name(r->h->op), t->name, off, off, cnt, s->shard, t->begin, t->end);
        return -1;
    }
    return 0;
}

/* --- the ops --- */

/* A worker came back with a new incarnation: under bsp it redoes its
 * current clock, so what it had pushed for rounds still open is dropped. */
static void forget_pending(zp_server *s, uint32_t rank)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (!t->have || !t->have[rank])
            continue;
        zmq_msg_close(&t->pending[rank]);
        t->have[rank] = false;
        t->npending--;
    }
}

static void on_hello(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    int64_t resume = 0;
    uint32_t flags = 0;
    if (h->rank != 0xffffffffu) {
        if (h->rank >= (uint32_t)s->nworkers) {
            zp_reply_error(s, r->identity, h, ZEPS_ERANK,
                           "rank %u is outside the cluster of %d workers", h->rank, s->nworkers);
            return;
        }
        zp_worker *w = &s->workers.w[h->rank];
        bool known = w->joined || w->rehello, lost = w->lost;
        if (zp_worker_hello(w, h->incarnation)) {
            zp_info("worker %u %s (incarnation %" PRIx64 "), resumes at clock %lld", h->rank,
                    known ? "rejoined with a new incarnation" : "joined", h->incarnation,
                    (long long)w->clock);
            if (known) {
                forget_pending(s, h->rank);
                flags |= ZP_FLAG_REJOINED;
            }
        }
        if (lost)
            zp_server_update_clock_bounds(s);
        w->last_seen_s = zp_now_s();
        /* where it resumes: its own clock, or the bsp cut if the rounds went
         * on without it (on_lost_worker = continue) or closed with its push */
        int64_t cut = zp_server_cut(s);
        resume = w->clock > cut ? w->clock : cut;
    }
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.num_shards = (uint32_t)s->nshards;
    rep.num_workers = (uint32_t)s->nworkers;
    rep.consistency = (char *)s->cons->name;
    rep.caps = s->cons->caps;
    rep.clock = resume;
    rep.flags = flags;
    rep.cut = resume_cut(s);
    rep.cut_set = s->restored_set;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

/* ROLLBACK (bsp recovery): put this shard back to the cut the client names. */
static void on_rollback(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = worker_of(s, r);
    if (!w)
        return;
    char err[ERRLEN];
    int rc = zp_persist_rollback(s, h->clock, h->cut_set, h->rank, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    zp_worker_record(w, h->seq);
    zp_server_update_clock_bounds(s);
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.cut = zp_server_cut(s);
    rep.cut_set = s->restored_set;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

/* SNAPSHOT on request (zepsctl snapshot take). */
static void on_snapshot(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    char err[ERRLEN];
    int rc = zp_persist_request(s, h->clock, h->cut_set, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.cut = zp_server_cut(s);
    rep.clock = h->clock;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

void zp_server_abort_waiting(zp_server *s, int64_t cut, uint64_t set)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        while (t->parked) {
            zp_parked *p = t->parked;
            t->parked = p->next;
            reply_restarted(s, &p->identity, NULL, p->req_id, cut, set);
            zp_parked_free(p);
        }
        t->parked_tail = &t->parked;
        t->nparked = 0;
    }
    for (int i = 0; i < s->nworkers; i++) {
        zp_worker *x = &s->workers.w[i];
        if (!x->barrier_gen)
            continue;
        reply_restarted(s, &x->barrier_identity, NULL, x->barrier_req, cut, set);
        zmq_msg_close(&x->barrier_identity);
        x->barrier_gen = 0;
    }
    s->barrier_count = 0;
}

static void on_declare(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->rank != 0xffffffffu && !worker_of(s, r))
        return;
    if (!h->spec) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO, "DECLARE without a table spec");
        return;
    }
    char err[ERRLEN];
    for (uint32_t i = 0; i < s->ntables; i++) {
        if (strcmp(s->tables[i]->name, h->spec->name) != 0)
            continue;
        int rc = zp_table_check_same(s->tables[i], h->spec, err, sizeof(err));
        if (rc != 0) {
            zp_reply_error(s, r->identity, h, rc, "%s", err);
            return;
        }
        Zeps__Header rep;
        zp_reply_init(s, h, &rep);
        rep.table = i;
        rep.offset = s->tables[i]->begin;
        rep.count = s->tables[i]->n;
        zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
        return;
    }
    zp_table *t;
    int rc = zp_table_new(&t, s->ntables, h->spec, s->shard, s->nshards, s->nworkers, err,
                          sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    if (s->ntables == s->cap_tables) {
        s->cap_tables = s->cap_tables ? 2 * s->cap_tables : 8;
        s->tables = zp_xrealloc(s->tables, s->cap_tables * sizeof(*s->tables));
    }
    s->tables[s->ntables++] = t;
    if (t->sparse)
        zp_info("sparse table '%s' declared: dim %u, optimizer %s, lr %g, init %s", t->name,
                t->dim, t->optimizer, h->spec->lr, zp_init_name(t->init));
    else
        zp_info("table '%s' declared: %" PRIu64 " elements, slice [%" PRIu64 ", %" PRIu64
                "), optimizer %s, lr %g, init %s",
                t->name, t->length, t->begin, t->end, t->optimizer, (double)t->hyper.lr,
                zp_init_name(t->init));
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.table = t->id;
    rep.offset = t->begin;
    rep.count = t->n;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

static bool is_parked(const zp_table *t, uint32_t rank, uint64_t seq)
{
    for (const zp_parked *p = t->parked; p; p = p->next)
        if (p->rank == rank && p->seq == seq)
            return true;
    return false;
}

/* A compressed pull: a known codec with valid parameters, over the whole
 * slice (the worker's view is of the slice). Returns 0, or -1 after
 * replying with an error. */
static int parse_compressed_pull(zp_server *s, zp_request *r, const zp_table *t, zp_cpull_req *cp)
{
    const Zeps__Header *h = r->h;
    char err[ERRLEN];
    int rc = zp_cpull_parse(h, cp, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s of table '%s' from worker %u", err, t->name,
                       h->rank);
        return -1;
    }
    if (s->cfg.consistency == ZP_CONSISTENCY_WEIGHTED && s->cfg.dc_lambda > 0) {
        /* DC-ASGD compensates against the buffer a worker pulled; a worker
         * pulling deltas holds its view, which no buffer records */
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "compressed PULL of table '%s': not available with DC-ASGD (dc_lambda > 0)",
                       t->name);
        return -1;
    }
    if (h->offset != t->begin || h->count != t->n) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "a compressed PULL of table '%s' must cover shard %d's whole slice [%" PRIu64
                       ", %" PRIu64 "), not [%" PRIu64 ", %" PRIu64 "+%" PRIu64 ")",
                       t->name, s->shard, t->begin, t->end, h->offset, h->offset, h->count);
        return -1;
    }
    return 0;
}

static void on_pull(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = worker_of(s, r);
    zp_table *t = w ? table_of(s, r) : NULL;
    if (t && t->sparse) {
        if (zp_worker_seen(w, h->seq) && is_parked(t, h->rank, h->seq))
            reply_ok(s, r, ZP_FLAG_PARKED);
        else
            zp_sparse_on_pull(s, r, w, t);
        return;
    }
    if (!t || check_range(s, r, t) != 0)
        return;
    if (r->npayload) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO, "PULL carries %d payload frame(s); it takes none",
                       r->npayload);
        return;
    }
    zp_cpull_req cp = {0};
    if ((h->flags & ZP_FLAG_PULL_DELTA) && parse_compressed_pull(s, r, t, &cp) != 0)
        return;
    if (zp_worker_seen(w, h->seq) && is_parked(t, h->rank, h->seq)) {
        reply_ok(s, r, ZP_FLAG_PARKED); /* a retry of a pull still waiting: keep-alive */
        return;
    }
    zp_worker_record(w, h->seq);
    w->pulls++;
    if (s->cons->pull_ready(s, t, h->rank, h->clock)) {
        zp_server_send_pull_cp(s, r->identity, h->req_id, t, h->rank, h->clock, h->offset, h->count,
                               0.0, &cp);
        return;
    }
    zp_parked *p = zp_xcalloc(1, sizeof(*p));
    zmq_msg_init(&p->identity);
    zmq_msg_copy(&p->identity, r->identity);
    p->req_id = h->req_id;
    p->rank = h->rank;
    p->seq = h->seq;
    p->offset = h->offset;
    p->count = h->count;
    p->clock = h->clock;
    p->since_s = zp_now_s();
    p->cp = cp;
    zp_table_park(t, p);
}

/* A payload frame's floats, 4-byte aligned: ZeroMQ may hand small frames
 * inside its receive buffer at any offset; those are copied to a frame of
 * their own (rare and small), large ones are read in place. */
static const float *aligned_values(zmq_msg_t *frame)
{
    if (((uintptr_t)zmq_msg_data(frame) & 3u) == 0)
        return zmq_msg_data(frame);
    zmq_msg_t copy;
    zmq_msg_init_size(&copy, zmq_msg_size(frame));
    memcpy(zmq_msg_data(&copy), zmq_msg_data(frame), zmq_msg_size(frame));
    zmq_msg_close(frame);
    zmq_msg_init(frame);
    zmq_msg_move(frame, &copy);
    return zmq_msg_data(frame);
}

/* The slowest and fastest clocks over live workers (those that have not
 * said BYE, nor been declared lost under on_lost_worker = continue; a
 * worker that has not joined yet counts with clock 0). */
void zp_server_update_clock_bounds(zp_server *s)
{
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < s->nworkers; i++) {
        const zp_worker *w = &s->workers.w[i];
        if (w->left || (w->lost && s->cfg.lost_continue))
            continue;
        if (w->clock < lo)
            lo = w->clock;
        if (w->clock > hi)
            hi = w->clock;
    }
    s->min_clock = lo == INT64_MAX ? hi : lo;
    if (hi > s->max_clock)
        s->max_clock = hi;
}

static void serve_all_parked(zp_server *s)
{
    for (uint32_t i = 0; i < s->ntables; i++)
        zp_server_serve_parked(s, s->tables[i]);
}

/* A compressed push's codec, after checking the payload against its rules
 * (nothing reads it before). Returns NULL after replying with an error. */
static const zp_codec_ops *check_push_payload(zp_server *s, zp_request *r, zp_table *t)
{
    const Zeps__Header *h = r->h;
    const zp_codec_ops *codec = zp_codec_by_id(h->codec);
    if (!codec) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO, "unknown codec %u in a PUSH to table '%s'",
                       h->codec, t->name);
        return NULL;
    }
    char err[ERRLEN];
    int rc = codec->validate(zmq_msg_data(r->payload), zmq_msg_size(r->payload), (size_t)h->count,
                             err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s push to table '%s' from worker %u: %s",
                       codec->name, t->name, h->rank, err);
        return NULL;
    }
    return codec;
}

/* A compressed push under bsp, which keeps each push's frame until its
 * round closes: replace the frame with the decoded f32 values, so the rest
 * of the path sees plain floats. Returns 0, or -1 after replying with an
 * error. */
static int decode_push(zp_server *s, zp_request *r, zp_table *t)
{
    const Zeps__Header *h = r->h;
    double t0 = zp_now_s();
    const zp_codec_ops *codec = check_push_payload(s, r, t);
    if (!codec)
        return -1;
    zmq_msg_t dec;
    if (zmq_msg_init_size(&dec, h->count * sizeof(float)) != 0) {
        zp_reply_error(s, r->identity, h, ZEPS_ENOMEM, "cannot decode %" PRIu64 " elements",
                       h->count);
        return -1;
    }
    codec->decode(zmq_msg_data(r->payload), zmq_msg_size(r->payload), (size_t)h->count,
                  zmq_msg_data(&dec));
    zmq_msg_close(r->payload);
    zmq_msg_init(r->payload);
    zmq_msg_move(r->payload, &dec);
    t->decode_s += zp_now_s() - t0;
    return 0;
}

/* A compressed push under async/ssp/weighted, applied before the next
 * message is read: a topk/randk payload goes to the update as it is where
 * the optimizer allows (p->sparse_codec, O(k)); any other is decoded into
 * the table's scratch (p->g), with no allocation per push. Returns 0, or -1
 * after replying with an error. */
static int decode_push_in_place(zp_server *s, zp_request *r, zp_table *t, zp_push *p)
{
    const Zeps__Header *h = r->h;
    double t0 = zp_now_s();
    const zp_codec_ops *codec = check_push_payload(s, r, t);
    if (!codec)
        return -1;
    const void *buf = zmq_msg_data(r->payload);
    size_t len = zmq_msg_size(r->payload);
    bool dc = s->cfg.consistency == ZP_CONSISTENCY_WEIGHTED && s->cfg.dc_lambda > 0;
    if ((codec->id == ZP_CODEC_TOPK || codec->id == ZP_CODEC_RANDK) && !dc &&
        zp_table_sparse_ok(t)) {
        p->sparse_codec = codec;
        p->sparse_buf = buf;
        p->sparse_len = len;
    } else {
        if (!t->push_scratch && !(t->push_scratch = malloc((t->n ? t->n : 1) * sizeof(float)))) {
            zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                           "no memory to decode pushes to table '%s'", t->name);
            return -1;
        }
        codec->decode(buf, len, (size_t)h->count, t->push_scratch);
        p->g = t->push_scratch;
    }
    t->decode_s += zp_now_s() - t0;
    return 0;
}

static void advance_clock(zp_server *s, zp_worker *w, int64_t finished)
{
    if (finished + 1 > w->clock) {
        w->clock = finished + 1;
        zp_server_update_clock_bounds(s);
        for (uint32_t i = 0; i < s->ntables; i++)
            if (s->tables[i]->sparse)
                zp_sparse_expire(s->tables[i]->sparse, s->max_clock);
    }
}

static void on_push(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = worker_of(s, r);
    zp_table *t = w ? table_of(s, r) : NULL;
    if (!t || (!t->sparse && check_range(s, r, t) != 0))
        return;
    if (zp_worker_seen(w, h->seq)) {
        w->duplicates++;
        reply_ok(s, r, ZP_FLAG_DUPLICATE);
        return;
    }
    if (t->sparse) {
        uint32_t flags;
        if (zp_sparse_on_push(s, r, w, t, &flags) != 0)
            return;
        if (h->flags & ZP_FLAG_CLOCK)
            advance_clock(s, w, h->clock);
        reply_ok(s, r, flags);
        if (h->flags & ZP_FLAG_CLOCK)
            serve_all_parked(s);
        else
            zp_server_serve_parked(s, t);
        return;
    }
    if (r->npayload != 1) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "PUSH must carry exactly one values frame, got %d", r->npayload);
        return;
    }
    size_t wire_bytes = zmq_msg_size(r->payload);
    zp_push p = {.rank = h->rank,
                 .clock = h->clock,
                 .data_version = h->data_version,
                 .off = h->offset - t->begin,
                 .count = h->count,
                 .frame = r->payload};
    bool in_place = h->codec != 0 && s->cfg.consistency != ZP_CONSISTENCY_BSP;
    if (in_place ? decode_push_in_place(s, r, t, &p) != 0
                 : h->codec != 0 && decode_push(s, r, t) != 0)
        return;
    size_t bytes = zmq_msg_size(r->payload);
    if (!in_place && bytes != h->count * sizeof(float)) {
        zp_reply_error(s, r->identity, h, ZEPS_ESIZE,
                       "PUSH of %" PRIu64 " elements to table '%s' carries %zu bytes, expected %" PRIu64,
                       h->count, t->name, bytes, h->count * (uint64_t)sizeof(float));
        return;
    }
    uint64_t data_version = h->data_version;
    if (data_version > t->version && s->epoch > 0)
        data_version = t->version; /* read before a restore took the slice back: tau 0 */
    if (data_version > t->version) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "PUSH to table '%s' claims it was computed from version %" PRIu64
                       ", but shard %d's slice is only at version %" PRIu64,
                       t->name, h->data_version, s->shard, t->version);
        return;
    }
    if (h->clock < 0) {
        zp_reply_error(s, r->identity, h, ZEPS_ECLOCK, "PUSH with negative clock %" PRId64,
                       h->clock);
        return;
    }
    if (!in_place)
        p.g = aligned_values(r->payload);
    /* a validated payload is finite already: validate checked every value
     * and scale it carries */
    if (s->cfg.reject_nonfinite && !in_place && !zp_all_finite(p.g, h->count)) {
        zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                       "PUSH to table '%s' from worker %u contains NaN or Inf; nothing applied",
                       t->name, h->rank);
        return;
    }
    char err[ERRLEN];
    p.data_version = data_version;
    int rc = s->cons->push(s, t, &p, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    zp_worker_record(w, h->seq);
    w->pushes++;
    t->pushes++;
    t->push_bytes_wire += wire_bytes;
    t->push_bytes_raw += h->count * sizeof(float);
    w->push_bytes_wire += wire_bytes;
    w->push_bytes_raw += h->count * sizeof(float);
    if (h->flags & ZP_FLAG_CLOCK)
        advance_clock(s, w, h->clock);
    reply_ok(s, r, p.reply_flags);
    if (h->flags & ZP_FLAG_CLOCK)
        serve_all_parked(s);
    else
        zp_server_serve_parked(s, t);
}

static void on_clock(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = worker_of(s, r);
    if (!w)
        return;
    if (zp_worker_seen(w, h->seq)) {
        w->duplicates++;
        reply_ok(s, r, ZP_FLAG_DUPLICATE);
        return;
    }
    if (h->clock < 0 || h->clock + 1 < w->clock) {
        zp_reply_error(s, r->identity, h, ZEPS_ECLOCK,
                       "worker %u clock goes backwards: finished %" PRId64 " after %" PRId64,
                       h->rank, h->clock, w->clock - 1);
        return;
    }
    zp_worker_record(w, h->seq);
    advance_clock(s, w, h->clock);
    reply_ok(s, r, 0);
    serve_all_parked(s);
}

/* Workers a barrier waits for: all, but those declared lost under
 * on_lost_worker = continue. */
static int live_workers(const zp_server *s)
{
    int n = s->nworkers;
    for (int i = 0; s->cfg.lost_continue && i < s->nworkers; i++)
        if (s->workers.w[i].lost)
            n--;
    return n;
}

static void barrier_release_if_complete(zp_server *s);

static void on_barrier(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = worker_of(s, r);
    if (!w)
        return;
    if (w->barrier_gen == s->barrier_gen) {
        /* already waiting: a retry; take its identity and say we are alive */
        zmq_msg_close(&w->barrier_identity);
        zmq_msg_init(&w->barrier_identity);
        zmq_msg_copy(&w->barrier_identity, r->identity);
        w->barrier_req = h->req_id;
        reply_ok(s, r, ZP_FLAG_PARKED);
        return;
    }
    if (zp_worker_seen(w, h->seq)) {
        reply_ok(s, r, ZP_FLAG_DUPLICATE); /* this barrier was already released */
        return;
    }
    zp_worker_record(w, h->seq);
    w->barrier_gen = s->barrier_gen;
    zmq_msg_init(&w->barrier_identity);
    zmq_msg_copy(&w->barrier_identity, r->identity);
    w->barrier_req = h->req_id;
    s->barrier_count++;
    barrier_release_if_complete(s);
}

/* Release the barrier once every live worker waits in it. Counted from the
 * workers' state, not from arrivals: a worker that restarted (its HELLO
 * dropped its wait) or was declared lost must not be counted. */
static void barrier_release_if_complete(zp_server *s)
{
    int waiting = 0;
    for (int i = 0; i < s->nworkers; i++) {
        const zp_worker *x = &s->workers.w[i];
        if (x->barrier_gen == s->barrier_gen && !(x->lost && s->cfg.lost_continue))
            waiting++;
    }
    if (waiting == 0 || waiting < live_workers(s))
        return;
    for (int i = 0; i < s->nworkers; i++) {
        zp_worker *x = &s->workers.w[i];
        if (x->barrier_gen != s->barrier_gen)
            continue;
        Zeps__Header rep;
        zp_reply_init(s, NULL, &rep);
        rep.op = ZEPS__OP__BARRIER;
        rep.req_id = x->barrier_req;
        zp_reply_send(s, &x->barrier_identity, &rep, NULL, 0, NULL, NULL);
        zmq_msg_close(&x->barrier_identity);
        x->barrier_gen = 0;
    }
    s->barrier_gen++;
    s->barrier_count = 0;
}

static void on_stats(zp_server *s, zp_request *r)
{
    double now = zp_now_s();
    Zeps__ShardStats st;
    zeps__shard_stats__init(&st);
    st.shard = (uint32_t)s->shard;
    st.num_shards = (uint32_t)s->nshards;
    st.num_workers = (uint32_t)s->nworkers;
    st.incarnation = s->incarnation;
    st.consistency = (char *)s->cons->name;
    st.caps = s->cons->caps;
    st.uptime_s = now - s->start_s;
    st.bytes_in = s->bytes_in;
    st.bytes_out = s->bytes_out;
    st.requests = s->requests;
    st.errors = s->errors;
    st.lost_workers = s->lost_total;
    st.rollbacks = s->rollbacks;
    st.snapshots_written = s->persist.written;
    st.last_snapshot_set = s->persist.last_setid;
    st.last_snapshot_s = s->persist.last_duration_s;
    st.restored_clock = s->restored_clock;
    st.curve = s->zap.enabled;
    st.curve_accepted = s->zap.accepted;
    st.curve_refused = s->zap.refused;

    Zeps__TableStats *ts = zp_xcalloc(s->ntables ? s->ntables : 1, sizeof(*ts));
    Zeps__Histogram *th = zp_xcalloc(3 * (s->ntables ? s->ntables : 1), sizeof(*th));
    Zeps__TableStats **tsp = zp_xcalloc(s->ntables ? s->ntables : 1, sizeof(*tsp));
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        zeps__table_stats__init(&ts[i]);
        ts[i].id = t->id;
        ts[i].name = (char *)t->name;
        ts[i].length = t->length;
        ts[i].slice_begin = t->begin;
        ts[i].slice_end = t->end;
        ts[i].version = t->version;
        ts[i].pushes = t->pushes;
        ts[i].pulls = t->pulls;
        ts[i].bytes_param = zp_table_bytes(t);
        ts[i].optimizer = (char *)t->optimizer;
        ts[i].rounds = (uint64_t)t->round;
        ts[i].parked = t->nparked;
        zp_hist_to_pb(&t->tau, &th[3 * i]);
        zp_hist_to_pb(&t->clock_gap, &th[3 * i + 1]);
        zp_hist_to_pb(&t->pull_wait_us, &th[3 * i + 2]);
        ts[i].tau = &th[3 * i];
        ts[i].clock_gap = &th[3 * i + 1];
        ts[i].pull_wait_us = &th[3 * i + 2];
        ts[i].dropped = t->dropped;
        ts[i].late = t->late;
        ts[i].staleness = zp_server_staleness(s, t);
        ts[i].push_bytes_wire = t->push_bytes_wire;
        ts[i].push_bytes_raw = t->push_bytes_raw;
        ts[i].decode_s = t->decode_s;
        if (t->sparse) {
            zp_sparse_counters sc;
            zp_sparse_get_counters(t->sparse, &sc);
            ts[i].kind = t->kind;
            ts[i].dim = t->dim;
            ts[i].rows = sc.rows;
            ts[i].rows_created = sc.created;
            ts[i].not_admitted = sc.not_admitted;
            ts[i].pushes_skipped = sc.pushes_skipped;
            ts[i].evicted_ttl = sc.evicted_ttl;
            ts[i].evicted_capacity = sc.evicted_capacity;
            ts[i].bytes_per_row = sc.bytes_per_row;
            ts[i].keys_pulled = t->keys_pulled;
            ts[i].keys_pushed = t->keys_pushed;
        }
        ts[i].pull_bytes_wire = t->pull_bytes_wire;
        ts[i].pull_bytes_raw = t->pull_bytes_raw;
        ts[i].encode_s = t->encode_s;
        ts[i].pull_resyncs = t->pull_resyncs;
        ts[i].pull_view_bytes = zp_cpull_bytes(t);
        tsp[i] = &ts[i];
    }
    st.n_tables = s->ntables;
    st.tables = tsp;

    int nw = s->nworkers;
    Zeps__WorkerStats *ws = zp_xcalloc((size_t)nw, sizeof(*ws));
    Zeps__Histogram *wh = zp_xcalloc((size_t)nw, sizeof(*wh));
    Zeps__WorkerStats **wsp = zp_xcalloc((size_t)nw, sizeof(*wsp));
    size_t k = 0;
    for (int i = 0; i < nw; i++) {
        const zp_worker *w = &s->workers.w[i];
        if (!w->joined && !w->rehello)
            continue;
        zeps__worker_stats__init(&ws[k]);
        ws[k].rank = (uint32_t)i;
        ws[k].clock = w->clock;
        ws[k].incarnation = w->incarnation;
        ws[k].pushes = w->pushes;
        ws[k].pulls = w->pulls;
        ws[k].duplicates = w->duplicates;
        ws[k].last_seen_s = now - w->last_seen_s;
        zp_hist_to_pb(&w->tau, &wh[k]);
        ws[k].tau = &wh[k];
        ws[k].dropped = w->dropped;
        ws[k].late = w->late;
        ws[k].push_bytes_wire = w->push_bytes_wire;
        ws[k].push_bytes_raw = w->push_bytes_raw;
        ws[k].lost = w->lost;
        ws[k].lost_count = w->lost_count;
        ws[k].pull_bytes_wire = w->pull_bytes_wire;
        ws[k].pull_bytes_raw = w->pull_bytes_raw;
        ws[k].pull_resyncs = w->pull_resyncs;
        wsp[k] = &ws[k];
        k++;
    }
    st.n_workers = k;
    st.workers = wsp;

    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.stats = &st;
    rep.num_shards = (uint32_t)s->nshards;
    rep.num_workers = (uint32_t)s->nworkers;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
    free(ts);
    free(th);
    free(tsp);
    free(ws);
    free(wh);
    free(wsp);
}

static void on_bye(zp_server *s, zp_request *r)
{
    zp_worker *w = worker_of(s, r);
    if (!w)
        return;
    if (!w->left)
        zp_info("worker %u left", r->h->rank);
    w->left = true;
    for (uint32_t i = 0; i < s->ntables; i++)
        zp_cpull_forget(s->tables[i], r->h->rank); /* a view is only worth its memory in use */
    zp_server_update_clock_bounds(s); /* the slowest clock may have moved on */
    reply_ok(s, r, 0);
    serve_all_parked(s);
}

void zp_server_handle(zp_server *s, zp_frames *m)
{
    s->requests++;
    s->bytes_in += m->bytes;
    zmq_msg_t *identity = &m->f[0];
    if (m->n < 2) {
        zp_reply_error(s, identity, NULL, ZEPS_EPROTO, "message has no header frame");
        return;
    }
    Zeps__Header *h = zp_header_unpack(&m->f[1]);
    if (!h) {
        zp_reply_error(s, identity, NULL, ZEPS_EPROTO,
                       "header frame of %zu bytes is not a valid zeps.Header",
                       zmq_msg_size(&m->f[1]));
        return;
    }
    zp_request r = {
        .identity = identity,
        .h = h,
        .payload = m->n > 2 ? &m->f[2] : NULL,
        .npayload = m->n - 2 + m->dropped,
    };
    if (h->version != ZP_PROTOCOL_VERSION) {
        zp_reply_error(s, identity, h, ZEPS_EVERSION,
                       "protocol version %u is not supported; this server speaks version %d",
                       h->version, ZP_PROTOCOL_VERSION);
    } else if (m->dropped) {
        zp_reply_error(s, identity, h, ZEPS_EPROTO, "message has %d frames; at most %d",
                       m->n + m->dropped, ZP_MAX_FRAMES);
    } else if (s->stopping && h->op != ZEPS__OP__STATS) {
        zp_reply_error(s, identity, h, ZEPS_ECLOSED, "shard %d is shutting down", s->shard);
    } else if (h->rank == 0xffffffffu && h->op != ZEPS__OP__HELLO && h->op != ZEPS__OP__STATS &&
               h->op != ZEPS__OP__DECLARE && h->op != ZEPS__OP__SNAPSHOT) {
        zp_reply_error(s, identity, h, ZEPS_ERANK,
                       "tools may only send HELLO, DECLARE, STATS and SNAPSHOT");
    } else {
        switch (h->op) {
        case ZEPS__OP__HELLO:
            on_hello(s, &r);
            break;
        case ZEPS__OP__DECLARE:
            on_declare(s, &r);
            break;
        case ZEPS__OP__PULL:
            on_pull(s, &r);
            break;
        case ZEPS__OP__PUSH:
            on_push(s, &r);
            break;
        case ZEPS__OP__CLOCK:
            on_clock(s, &r);
            break;
        case ZEPS__OP__BARRIER:
            on_barrier(s, &r);
            break;
        case ZEPS__OP__STATS:
            on_stats(s, &r);
            break;
        case ZEPS__OP__BYE:
            on_bye(s, &r);
            break;
        case ZEPS__OP__ROLLBACK:
            on_rollback(s, &r);
            break;
        case ZEPS__OP__SNAPSHOT:
            on_snapshot(s, &r);
            break;
        default:
            zp_reply_error(s, identity, h, ZEPS_EOP, "unknown or unexpected op %d", (int)h->op);
            break;
        }
    }
    zeps__header__free_unpacked(h, NULL);
}

int zp_server_round_quorum(const zp_server *s)
{
    int live = s->nworkers;
    if (s->cfg.lost_continue)
        for (int i = 0; i < s->nworkers; i++)
            if (s->workers.w[i].lost)
                live--;
    int q = live - s->cfg.backup_workers;
    return q < 1 ? 1 : q;
}

void zp_server_check_lost(zp_server *s)
{
    double timeout = s->cfg.lost_worker_timeout_s;
    if (timeout <= 0 || s->stopping)
        return;
    double now = zp_now_s();
    int newly = 0;
    for (int i = 0; i < s->nworkers; i++) {
        zp_worker *w = &s->workers.w[i];
        if (!w->joined || w->left || w->lost || now - w->last_seen_s < timeout)
            continue;
        w->lost = true;
        w->lost_count++;
        s->lost_total++;
        newly++;
        zp_warn("worker %u declared lost: silent for %.1f s (lost_worker_timeout_s = %g); "
                "on_lost_worker = %s: %s",
                i, now - w->last_seen_s, timeout, s->cfg.lost_continue ? "continue" : "wait",
                s->cfg.lost_continue ? "rounds close without it until it is back"
                                     : "rounds wait for it");
    }
    if (!newly || !s->cfg.lost_continue)
        return;
    zp_server_update_clock_bounds(s);
    for (uint32_t i = 0; i < s->ntables; i++)
        zp_bsp_close_if_ready(s, s->tables[i]);
    serve_all_parked(s);
    if (s->nshards && s->shard == 0)
        barrier_release_if_complete(s); /* the barrier lives on shard 0 */
}
