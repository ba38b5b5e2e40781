/*
 * clock.c - the workers' clocks: CLOCK, BARRIER, and lost workers.
 *
 * A worker's clock advances with CLOCK (or a PUSH with ZP_FLAG_CLOCK); the
 * slowest and fastest live clocks (state/workers.c) are what ssp and bsp's
 * sparse pulls wait on, and a table kind may age its contents by them
 * (sparse TTL). The barrier lives on shard 0 and is released once every
 * live worker waits in it. The lost-worker timer is here too: a worker
 * declared lost under on_lost_worker = continue changes the quorum, so the
 * policy may close rounds (recorded and snapshotted as a push's would be),
 * and the waits it blocked are served; a replicated primary logs it for its
 * backups, which run no timer (a CLOCK with ZP_FLAG_LOST). Whenever the bounds move, the policy
 * may close a sparse table's held rounds (zp_clock_bounds), whose merges a replicated primary
 * hands to its log (repl/rbatch.h).
 */
#include <inttypes.h>
#include <stdlib.h>

#include "handover.h"
#include "log.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "zeps_errors.h"

void zp_clock_bounds(zp_server *s)
{
    zp_workers_update_bounds(&s->workers, s->cfg.lost_continue);
    bool moved = false;
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (t->rows && s->move) /* a move's source: rows a round's close changes are sent again */
            zp_handover_note(s, t, s->workers.min_clock);
        if (t->rows && s->cons->bounds_moved(s, t))
            moved = true;
        /* a replicated primary: the merges applied go to the round batch */
        if (t->rows && s->repl.on)
            zp_rnote_round_rows(s, t->id, t->rows->dim, &t->rows->held);
    }
    if (moved)
        zp_persist_on_round(s);
}

void zp_clock_advance(zp_server *s, zp_worker *w, int64_t finished)
{
    if (finished + 1 <= w->clock)
        return;
    w->clock = finished + 1;
    zp_clock_bounds(s);
    for (uint32_t i = 0; i < s->ntables; i++)
        s->tables[i]->kind->clock(s->tables[i], s->workers.max_clock);
}

/* A replication entry (ZP_FLAG_LOST, from the primary's log only): the
 * primary's timer declared worker h->rank lost (a backup runs none), and
 * what follows from it follows here too. */
static void on_lost(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->rank >= (uint32_t)s->nworkers) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANK,
                       "rank %u is outside the cluster of %d workers", h->rank, s->nworkers);
        return;
    }
    zp_worker *w = &s->workers.w[h->rank];
    if (w->joined && !w->left && !w->lost) {
        w->lost = true;
        w->lost_count++;
        s->lost_total++;
        zp_warn("worker %u declared lost by the primary", h->rank);
        if (s->cfg.lost_continue)
            zp_clock_quorum_changed(s);
    }
    zp_reply_ok(s, r->identity, h, 0);
}

void zp_clock_on_clock(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->flags & ZP_FLAG_LOST) {
        on_lost(s, r);
        return;
    }
    zp_worker *w = zp_request_worker(s, r);
    if (!w)
        return;
    if (zp_workers_seen(w, h->seq)) {
        w->duplicates++;
        zp_reply_ok(s, r->identity, h, ZP_FLAG_DUPLICATE);
        return;
    }
    if (zp_request_clock(s, r) != 0)
        return;
    if (h->clock < w->clock - 1) { /* w->clock >= 0: no overflow either way */
        zp_reply_error(s, r->identity, h, ZEPS_ECLOCK,
                       "worker %u clock goes backwards: finished %" PRId64 " after %" PRId64,
                       h->rank, h->clock, w->clock - 1);
        return;
    }
    zp_workers_record(w, h->seq);
    zp_clock_advance(s, w, h->clock);
    zp_rnote_round_clock(s); /* logged with the pushes of an open bsp round, if any */
    if ((h->flags & ZP_FLAG_MAP) && h->slot_epoch < zp_slotmap_epoch(s->slots)) {
        Zeps__Header rep; /* the sender's map is older: the reply brings this one */
        zp_reply_init(s, h, &rep);
        zp_owner_send_with_map(s, r->identity, &rep);
    } else {
        zp_reply_ok(s, r->identity, h, 0);
    }
    zp_pull_serve_all(s);
}

/* Release the barrier once every live worker waits in it. Counted from the
 * workers' state, not from arrivals: a worker that restarted (its HELLO
 * dropped its wait) or was declared lost must not be counted. */
static void barrier_release_if_complete(zp_server *s)
{
    int waiting = 0;
    for (int i = 0; i < s->nworkers; i++) {
        const zp_worker *x = &s->workers.w[i];
        if (x->barrier_gen == s->barrier_gen && !((x->lost || x->left) && s->cfg.lost_continue))
            waiting++;
    }
    if (waiting == 0 || waiting < zp_workers_live(&s->workers, s->cfg.lost_continue))
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

/* Worker w waits in the barrier: keep a copy of its identity to answer. */
static void barrier_wait(zp_worker *w, zp_request *r, bool retry)
{
    if (retry)
        zmq_msg_close(&w->barrier_identity);
    zmq_msg_init(&w->barrier_identity);
    zmq_msg_copy(&w->barrier_identity, r->identity);
    w->barrier_req = r->h->req_id;
}

void zp_clock_on_barrier(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = zp_request_worker(s, r);
    if (!w)
        return;
    if (w->barrier_gen == s->barrier_gen) {
        /* already waiting: a retry; take its identity and say we are alive */
        barrier_wait(w, r, true);
        zp_reply_ok(s, r->identity, h, ZP_FLAG_PARKED);
        return;
    }
    if (zp_workers_seen(w, h->seq)) {
        zp_reply_ok(s, r->identity, h, ZP_FLAG_DUPLICATE); /* this barrier was already released */
        return;
    }
    zp_workers_record(w, h->seq);
    w->barrier_gen = s->barrier_gen;
    barrier_wait(w, r, false);
    s->barrier_count++;
    barrier_release_if_complete(s);
}

void zp_clock_barrier_abort(zp_server *s, int64_t cut, uint64_t set)
{
    for (int i = 0; i < s->nworkers; i++) {
        zp_worker *x = &s->workers.w[i];
        if (!x->barrier_gen)
            continue;
        zp_reply_restarted(s, &x->barrier_identity, NULL, x->barrier_req, cut, set);
        zmq_msg_close(&x->barrier_identity);
        x->barrier_gen = 0;
    }
    s->barrier_count = 0;
}

double zp_clock_lost_timeout(const zp_server *s)
{
    if (s->cfg.lost_worker_timeout_s >= 0)
        return s->cfg.lost_worker_timeout_s;
    double t = 10.0, req = 5.0 * s->cfg.request_timeout_ms / 1000.0, seen = 4.0 * s->max_silence_s;
    t = req > t ? req : t;
    return seen > t ? seen : t;
}

double zp_clock_lease(const zp_server *s)
{
    double t = zp_clock_lost_timeout(s);
    if (t > 0)
        return t;
    t = 5.0 * s->cfg.request_timeout_ms / 1000.0;
    return t > 10.0 ? t : 10.0;
}

double zp_clock_lost_wait(const zp_server *s)
{
    if (s->cfg.lost_worker_wait_s >= 0)
        return s->cfg.lost_worker_wait_s;
    double t = 2.0 * zp_clock_lost_timeout(s);
    return t > 10.0 ? t : 10.0;
}

void zp_clock_check_lost(zp_server *s)
{
    double timeout = zp_clock_lost_timeout(s);
    if (timeout <= 0 || s->stopping)
        return;
    bool was[ZP_MAX_WORKERS];
    for (int i = 0; i < s->nworkers; i++)
        was[i] = s->workers.w[i].lost;
    int newly = zp_workers_check_lost(&s->workers, timeout, s->cfg.lost_continue, zp_now_s());
    s->lost_total += (uint64_t)newly;
    /* a replicated primary logs it: its backups run no timer (repl/rlog.h) */
    for (int i = 0; newly && i < s->nworkers; i++)
        if (s->workers.w[i].lost && !was[i])
            zp_rlog_lost(s, (uint32_t)i);
    if (newly && s->cfg.lost_continue)
        zp_clock_quorum_changed(s);
}

void zp_clock_quorum_changed(zp_server *s)
{
    zp_clock_bounds(s);
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_push_result res = {0};
        if (!s->cons->quorum_changed(s, s->tables[i], &res))
            continue;
        zp_record_result(s, s->tables[i], NULL, &res);
        free(res.sum); /* closed outside a push: the round's pushes were logged one by one */
        zp_persist_on_round(s);
    }
    zp_pull_serve_all(s);
    if (s->nshards && s->shard == 0)
        barrier_release_if_complete(s); /* the barrier lives on shard 0 */
}
