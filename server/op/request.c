/*
 * request.c - the checks every op shares; see request.h.
 */
#include "request.h"

#include <inttypes.h>
#include <string.h>

#include "log.h"
#include "move.h"
#include "ops.h"
#include "now.h"
#include "server.h"
#include "zeps_errors.h"

int64_t zp_request_resume_cut(const zp_server *s)
{
    int64_t c = s->cons->cut(s);
    return c >= 0 ? c : s->restored_clock;
}

/* A request whose seq jumps past the window (workers.h): refused with
 * EPROTO and not recorded, so it cannot move the duplicate window; the
 * first of an incarnation is logged at WARN, the rest only counted. */
static void refuse_jump(zp_server *s, zp_request *r, zp_worker *w)
{
    const Zeps__Header *h = r->h;
    w->seq_jumps++;
    if (!w->jump_logged)
        zp_warn("worker %u incarnation %" PRIx64 ": %s with seq %" PRIu64 " jumps %" PRIu64
                " past the highest seen (%" PRIu64 "); refused, and further jumps of this "
                "incarnation are counted (STATS seq_jumps) but not logged",
                h->rank, h->incarnation, zp_wire_op_name(h->op), h->seq, h->seq - w->seq_hi,
                w->seq_hi);
    w->jump_logged = true;
    zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                   "seq %" PRIu64 " is %" PRIu64
                   " past the highest this worker sent to shard %d (%" PRIu64
                   "); at most %d ahead is accepted (a client that gave up requests says HELLO "
                   "again)",
                   h->seq, h->seq - w->seq_hi, s->shard, w->seq_hi, ZP_SEQ_WINDOW);
}

/* A request sent before the worker's latest HELLO (bsp: it has since gone
 * back to a cut and given up what it had in flight) that arrived after it,
 * on the connection the worker closed: answered ERESTARTED, as a request
 * from before the HELLO would have been, and not applied. The first of
 * each HELLO is logged. */
static void refuse_fenced(zp_server *s, zp_request *r, zp_worker *w)
{
    const Zeps__Header *h = r->h;
    if (!w->fence_logged)
        zp_info("worker %u: %s with seq %" PRIu64 " was sent before its HELLO (seq %" PRIu64
                "), from the clocks it went back from: not applied",
                h->rank, zp_wire_op_name(h->op), h->seq, w->fence);
    w->fence_logged = true;
    zp_reply_restarted(s, r->identity, h, 0, zp_request_resume_cut(s), s->restored_set);
}

/* A request of an incarnation that has not said HELLO to this shard, which
 * restored nothing: ESTATE. When the rank never said HELLO to this process
 * at all, the likeliest cause is a shard restarted with no snapshot to
 * restore (killed before its first one, or snapshots off): the message says
 * so, since the worker cannot go on (the tables it used are gone here). */
static void refuse_unknown(zp_server *s, zp_request *r, const zp_worker *w)
{
    const Zeps__Header *h = r->h;
    if (w->joined || w->incarnation != 0) {
        zp_reply_error(s, r->identity, h, ZEPS_ESTATE,
                       "worker %u incarnation %" PRIx64 " has not said HELLO to shard %d", h->rank,
                       h->incarnation, s->shard);
        return;
    }
    zp_reply_error(s, r->identity, h, ZEPS_ESTATE,
                   "worker %u incarnation %" PRIx64 " has not said HELLO to shard %d, which "
                   "started %.1f s ago with nothing restored: if it was restarted, the "
                   "parameters it held are lost (%s); restart the job",
                   h->rank, h->incarnation, s->shard, zp_now_s() - s->start_s,
                   s->cfg.snapshot_dir[0] ? "it had no complete snapshot set to restore"
                                          : "snapshots are off: set snapshot_dir");
}

zp_worker *zp_request_worker(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->rank >= (uint32_t)s->nworkers) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANK,
                       "rank %u is outside the cluster of %d workers", h->rank, s->nworkers);
        return NULL;
    }
    zp_worker *w = &s->workers.w[h->rank];
    if (!w->joined || w->incarnation != h->incarnation) {
        if (s->epoch > 0) {
            zp_reply_restarted(s, r->identity, h, 0, zp_request_resume_cut(s), s->restored_set);
            return NULL;
        }
        refuse_unknown(s, r, w);
        return NULL;
    }
    if (zp_workers_fenced(w, h->seq)) {
        refuse_fenced(s, r, w);
        return NULL;
    }
    if (!s->applying && zp_workers_seq_jump(w, h->seq)) { /* the primary judged it */
        refuse_jump(s, r, w);
        return NULL;
    }
    zp_workers_note_seq(w, h->seq);
    if (w->lost) {
        w->lost = false;
        zp_warn("worker %u, declared lost, is heard from again (after %.1f s)", h->rank,
                zp_now_s() - w->last_seen_s);
        /* counted again: the slowest clock can only go down, so nothing
         * closes (zp_clock_bounds is for bounds that may move up) */
        zp_workers_update_bounds(&s->workers, s->cfg.lost_continue);
    }
    double now = zp_now_s();
    /* sizes the auto lost-worker timeout: steps only, not the start-up
     * barrier (which only shard 0 hears the worker wait in) */
    if (!w->left && w->clock > 0 && now - w->last_seen_s > s->max_silence_s)
        s->max_silence_s = now - w->last_seen_s;
    w->last_seen_s = now;
    return w;
}

zp_table *zp_request_table(zp_server *s, zp_request *r)
{
    if (r->h->table >= s->ntables) {
        zp_reply_error(s, r->identity, r->h, ZEPS_ETABLE,
                       "no table with id %u on shard %d (%u declared)", r->h->table, s->shard,
                       s->ntables);
        return NULL;
    }
    return s->tables[r->h->table];
}

zp_table *zp_request_piece_at(zp_server *s, const zp_table *t, uint64_t at)
{
    if (at >= t->begin && at < t->end)
        return (zp_table *)t;
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *p = s->tables[i];
        if (!p->rows && at >= p->begin && at < p->end && strcmp(p->name, t->name) == 0)
            return p;
    }
    return NULL;
}

zp_table *zp_request_piece_after(zp_server *s, const zp_table *p)
{
    zp_table *next = NULL;
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *q = s->tables[i];
        if (!q->rows && q->begin > p->begin && q->n > 0 && strcmp(q->name, p->name) == 0 &&
            (!next || q->begin < next->begin))
            next = q;
    }
    return next;
}

int zp_request_range(zp_server *s, zp_request *r, zp_table **tp)
{
    uint64_t off = r->h->offset, cnt = r->h->count;
    zp_table *p = zp_request_piece_at(s, *tp, off);
    if (p && cnt > 0 && cnt <= p->end - off && zp_dmove_parks(s, p, (int)r->h->op)) {
        zp_dmove_park(s, r->identity, r->h, p->name); /* answered at the commit or abort */
        return -1;
    }
    if (p && cnt > 0 && cnt <= p->end - off) {
        *tp = p;
        return 0;
    }
    const zp_table *t = *tp;
    zp_dense_piece at;
    if (off < t->length && cnt > 0 && zp_densemap_names(zp_slotmap_dense(s->slots), t->name)) {
        /* cut by an older map: the range begins in another shard's piece,
         * or leaves this one (a piece cut in two) */
        zp_slotmap_dense_find(s->slots, t->name, t->length, off, &at);
        if (at.owner != s->shard || (p && cnt > p->end - off)) {
            zp_owner_refuse_dense(s, r->identity, r->h, t->name, off, &at);
            return -1;
        }
    }
    if (cnt == 0 || off < t->begin || off > t->end || cnt > t->end - off) {
        zp_reply_error(s, r->identity, r->h, ZEPS_ERANGE,
                       "%s of table '%s' elements [%" PRIu64 ", %" PRIu64 "+%" PRIu64
                       ") is outside shard %d's slice [%" PRIu64 ", %" PRIu64 ")",
                       zp_wire_op_name(r->h->op), t->name, off, off, cnt, s->shard, t->begin,
                       t->end);
        return -1;
    }
    return 0;
}

int zp_request_clock(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->clock >= 0 && h->clock < INT64_MAX)
        return 0;
    if (h->clock < 0)
        zp_reply_error(s, r->identity, h, ZEPS_ECLOCK, "%s with negative clock %" PRId64,
                       zp_wire_op_name(h->op), h->clock);
    else /* clock + 1, the clocks finished, must stay representable */
        zp_reply_error(s, r->identity, h, ZEPS_ECLOCK,
                       "%s with clock %" PRId64 " is out of range (at most %" PRId64 ")",
                       zp_wire_op_name(h->op), h->clock, INT64_MAX - 1);
    return -1;
}

int zp_request_may_park(zp_server *s, zp_request *r, const zp_worker *w)
{
    if (w->parked < ZP_PARKED_MAX)
        return 0;
    s->quota.full_refused++;
    zp_reply_error(s, r->identity, r->h, ZEPS_ENOMEM,
                   "worker %u already has %u pulls waiting on shard %d, the most that may wait "
                   "(a client keeps at most 48 requests in flight)",
                   r->h->rank, w->parked, s->shard);
    return -1;
}

void *zp_request_aligned(zmq_msg_t *frame, size_t align)
{
    if (((uintptr_t)zmq_msg_data(frame) & (align - 1)) == 0)
        return zmq_msg_data(frame);
    zmq_msg_t copy;
    zmq_msg_init_size(&copy, zmq_msg_size(frame));
    memcpy(zmq_msg_data(&copy), zmq_msg_data(frame), zmq_msg_size(frame));
    zmq_msg_close(frame);
    zmq_msg_init(frame);
    zmq_msg_move(frame, &copy);
    return zmq_msg_data(frame);
}
