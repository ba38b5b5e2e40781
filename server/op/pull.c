/*
 * pull.c - PULL of a dense table, and the parked pulls of every table.
 *
 * A pull is checked (worker, table, range, compressed-pull parameters),
 * then answered at once or parked (table/parked.c) until the policy's
 * pull_ready allows it; parked pulls are re-checked after every applied
 * update and every clock. A reply references the parameter buffer without
 * copying (copy-on-write, table.h), or carries a compressed delta against
 * the worker's view (table/cpull.c). A sparse table's pull goes to
 * sparse_ops.c, which parks with its own answer path. Under
 * cluster.inject the version served and the turns are turns.c's. Once a
 * worker said FINISH (op/admin.c), every other worker's pull, parked or
 * new, dense or sparse, is answered EFINISHED: the job reached its target.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "now.h"
#include "ops.h"
#include "server.h"
#include "waitfor.h"
#include "zeps_errors.h"

#define ERRLEN 512

static void free_payload(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Send the answer to a compressed pull of values b (a reference this
 * call takes): a delta against the worker's view, or the full values when
 * its view is unknown. Counts the bytes both ways. */
static void send_compressed(zp_server *s, zmq_msg_t *identity, Zeps__Header *rep, zp_table *t,
                            uint32_t rank, const zp_cpull_req *cp, zp_buf *b)
{
    zp_cpull_reply out;
    char err[ERRLEN];
    int rc = zp_cpull_prepare(t, rank, cp, b->data, s->incarnation, &out, err, sizeof(err));
    if (rc != 0) {
        zp_buf_release(b->data, b);
        zp_reply_error(s, identity, rep, rc, "%s", err);
        return;
    }
    zp_worker *w = &s->workers.w[rank];
    uint64_t raw = rep->count * sizeof(float);
    rep->view_id = out.view_id;
    t->stats.pulls++;
    t->stats.pull_bytes_raw += raw;
    w->pull_bytes_raw += raw;
    if (out.full) {
        rep->flags = ZP_FLAG_PULL_FULL;
        if (cp->codec->id != ZP_CODEC_NONE)
            w->pull_resyncs++;
        t->stats.pull_bytes_wire += raw;
        w->pull_bytes_wire += raw;
        s->cons->pulled(s, t, rank, b);
        /* the sink takes our reference on b */
        zp_reply_send(s, identity, rep, b->data, raw, zp_buf_release, b);
        return;
    }
    rep->flags = ZP_FLAG_PULL_DELTA;
    rep->codec = out.codec;
    t->stats.pull_bytes_wire += out.len;
    w->pull_bytes_wire += out.len;
    zp_buf_release(b->data, b);
    zp_reply_send(s, identity, rep, out.buf, out.len, free_payload, NULL); /* takes out.buf */
}

void zp_pull_turns_check(zp_server *s)
{
    /* the holder may have changed by a BYE, a lost worker or the barrier,
     * none of which looks at parked pulls */
    if (zp_turns_on(s))
        zp_pull_serve_all(s);
}

/* Answer a pull by `rank` at `clock` of [offset, offset + count) from t
 * now; it waited `wait_us` parked. cp NULL or cp->codec NULL: plain. */
static void send_pull(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                      uint32_t rank, int64_t clock, uint64_t offset, uint64_t count, double wait_us,
                      const zp_cpull_req *cp)
{
    Zeps__Header rep;
    zp_reply_init(s, NULL, &rep);
    rep.op = ZEPS__OP__PULL;
    rep.req_id = req_id;
    rep.table = t->id;
    rep.offset = offset;
    rep.count = count;
    rep.data_version = t->version;
    rep.clock = t->round.closed;
    zp_turns_take(s, t, rank);
    /* a past clock's values (bsp: a worker redoing a round), or the newest */
    zp_buf *b = s->cons->past ? s->cons->past(s, t, clock, &rep.data_version) : NULL;
    if (cp && cp->codec) {
        if (!b)
            b = zp_table_params_ref(t);
        zp_record_pull(s, t, rank, clock, wait_us, rep.data_version);
        send_compressed(s, identity, &rep, t, rank, cp, b);
        return;
    }
    if (!b)
        b = zp_turns_dense_params(s, t, rank, &rep.data_version);
    zp_record_pull(s, t, rank, clock, wait_us, rep.data_version);
    s->cons->pulled(s, t, rank, b);
    t->stats.pulls++;
    t->stats.pull_bytes_wire += count * sizeof(float);
    t->stats.pull_bytes_raw += count * sizeof(float);
    if (rank < (uint32_t)s->nworkers) {
        s->workers.w[rank].pull_bytes_wire += count * sizeof(float);
        s->workers.w[rank].pull_bytes_raw += count * sizeof(float);
    }
    /* the sink takes our reference on b */
    zp_reply_send(s, identity, &rep, b->data + (offset - t->begin), count * sizeof(float),
                  zp_buf_release, b);
}

static bool dense_ready(const zp_server *s, const zp_table *t, const zp_parked *p)
{
    return s->cons->pull_ready(s, t, p->rank, p->clock) && zp_turns_mine(s, t, p->rank);
}

static void dense_serve(zp_server *s, zp_table *t, zp_parked *p)
{
    send_pull(s, &p->identity, p->req_id, t, p->rank, p->clock, p->offset, p->count,
              (zp_now_s() - p->since_s) * 1e6, &p->cp);
}

static const zp_parked_path dense_path = {.ready = dense_ready, .serve = dense_serve};

/* A parked pull answered: its rank has one fewer waiting; free it. */
static void unpark(zp_server *s, zp_parked *p)
{
    if (p->rank < (uint32_t)s->nworkers && s->workers.w[p->rank].parked > 0)
        s->workers.w[p->rank].parked--;
    zp_parked_free(p);
}

void zp_pull_serve_parked(zp_server *s, zp_table *t)
{
    zp_parked *p;
    while ((p = zp_parked_take_ready(&t->parked, s, t))) {
        p->path->serve(s, t, p);
        unpark(s, p);
    }
}

void zp_pull_serve_all(zp_server *s)
{
    for (uint32_t i = 0; i < s->ntables; i++)
        zp_pull_serve_parked(s, s->tables[i]);
}

void zp_pull_abort_parked(zp_server *s, int64_t cut, uint64_t set)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_parked *p;
        while ((p = zp_parked_pop(&s->tables[i]->parked))) {
            zp_reply_restarted(s, &p->identity, NULL, p->req_id, cut, set);
            unpark(s, p);
        }
    }
}

/* A compressed pull: a known codec with valid parameters, over the whole
 * slice (the worker's view is of the slice), allowed by the policy.
 * Returns 0, or -1 after replying with an error. */
static int parse_compressed(zp_server *s, zp_request *r, const zp_table *t, zp_cpull_req *cp)
{
    const Zeps__Header *h = r->h;
    char err[ERRLEN];
    int rc = zp_cpull_parse(h, cp, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s of table '%s' from worker %u", err, t->name,
                       h->rank);
        return -1;
    }
    if (s->inject.ops) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "compressed PULL of table '%s': not available under cluster.inject "
                       "(staleness on demand serves plain pulls)",
                       t->name);
        return -1;
    }
    if (!s->cons->cpull_ok(s)) {
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

static void park(zp_table *t, zp_request *r, const zp_cpull_req *cp)
{
    const Zeps__Header *h = r->h;
    zp_parked *p = zp_parked_new(r->identity);
    p->path = &dense_path;
    p->req_id = h->req_id;
    p->rank = h->rank;
    p->seq = h->seq;
    p->offset = h->offset;
    p->count = h->count;
    p->clock = h->clock;
    p->since_s = zp_now_s();
    p->cp = *cp;
    zp_parked_push(&t->parked, p); /* the queue takes p */
}

/* After FINISH a pull of any worker but the finisher is over: its job is. */
static bool finished_for(const zp_server *s, uint32_t rank)
{
    return s->finished.on && rank != s->finished.by;
}

/* Answer rank's pull EFINISHED: req the request, or NULL and req_id a
 * parked one's. */
static void reply_finished(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req,
                           uint64_t req_id, uint32_t rank)
{
    char text[ERRLEN];
    snprintf(text, sizeof(text),
             "worker %u reached the job's target at clock %lld (FINISH): worker %u's training "
             "is over",
             s->finished.by, (long long)s->finished.clock, rank);
    if (req)
        zp_reply_error(s, identity, req, ZEPS_EFINISHED, "%s", text);
    else
        zp_reply_error_to(s, identity, ZEPS__OP__PULL, req_id, ZEPS_EFINISHED, "%s", text);
}

void zp_pull_finish_parked(zp_server *s)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_parked_queue keep;
        zp_parked_init(&keep);
        zp_parked *p;
        while ((p = zp_parked_pop(&s->tables[i]->parked))) {
            if (finished_for(s, p->rank)) {
                reply_finished(s, &p->identity, NULL, p->req_id, p->rank);
                unpark(s, p);
            } else {
                zp_parked_push(&keep, p); /* the finisher's own, kept in order */
            }
        }
        while ((p = zp_parked_pop(&keep)))
            zp_parked_push(&s->tables[i]->parked, p);
    }
}

void zp_pull_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = zp_request_worker(s, r);
    if (w && finished_for(s, h->rank)) {
        reply_finished(s, r->identity, h, 0, h->rank);
        return;
    }
    zp_table *t = w ? zp_request_table(s, r) : NULL;
    if (t && t->rows) {
        const zp_parked *p =
            zp_workers_seen(w, h->seq) ? zp_parked_find(&t->parked, h->rank, h->seq) : NULL;
        if (p)
            zp_waitfor_reply_parked(s, r->identity, h, t, p);
        else
            zp_sparse_ops_on_pull(s, r, w, t);
        return;
    }
    if (!t || zp_request_range(s, r, &t) != 0)
        return;
    if (r->npayload) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "PULL carries %d payload frame(s); it takes none", r->npayload);
        return;
    }
    zp_cpull_req cp = {0};
    if ((h->flags & ZP_FLAG_PULL_DELTA) && parse_compressed(s, r, t, &cp) != 0)
        return;
    const zp_parked *p =
        zp_workers_seen(w, h->seq) ? zp_parked_find(&t->parked, h->rank, h->seq) : NULL;
    if (p) { /* a retry of a pull still waiting */
        zp_waitfor_reply_parked(s, r->identity, h, t, p);
        return;
    }
    bool ready = s->cons->pull_ready(s, t, h->rank, h->clock) && zp_turns_mine(s, t, h->rank);
    if (!ready && zp_request_may_park(s, r, w) != 0)
        return;
    zp_workers_record(w, h->seq);
    w->pulls++;
    if (ready) {
        send_pull(s, r->identity, h->req_id, t, h->rank, h->clock, h->offset, h->count, 0.0, &cp);
    } else {
        park(t, r, &cp);
        w->parked++;
    }
}
