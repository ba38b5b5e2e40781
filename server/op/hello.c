/*
 * hello.c - HELLO: a worker registers its incarnation (a tool says HELLO as
 * rank 0xffffffff to learn the cluster's shape). A worker back with a new
 * incarnation redoes its clock, so the policy forgets what it had pushed
 * and not yet applied. The reply tells the client what it needs of the
 * mode (its name and capability bits) and where to resume. A new
 * incarnation of a rank whose current one is alive (heard from within its
 * lease) is refused: a forged HELLO, or a second process started with the
 * rank, must not evict a worker that is training (docs/faults.md). Where
 * the mode rolls back (bsp), a HELLO is also a fence: the requests the
 * worker sent before it are refused (op/request.c).
 */
#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "zeps_errors.h"

/* The rank is held by a live incarnation: refuse with ERANK naming both,
 * flagged PARKED (the client asks again until its hello_timeout_ms: a
 * restarted process gets in once the old one's lease ran out). */
static void refuse_held(zp_server *s, zp_request *r, zp_worker *w, double lease)
{
    const Zeps__Header *h = r->h;
    double now = zp_now_s();
    char text[512];
    snprintf(text, sizeof(text),
             "worker %u is held by incarnation %" PRIx64 ", heard from %.1f s ago (within its "
             "lease of %.0f s); HELLO from incarnation %" PRIx64 " refused: two processes with "
             "one rank? Stop one, wait until the old one is silent for the lease, or release the "
             "rank with 'zepsctl evict %u'",
             h->rank, w->incarnation, now - w->last_seen_s, lease, h->incarnation, h->rank);
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.error = ZEPS_ERANK;
    rep.error_text = text;
    rep.flags = ZP_FLAG_PARKED;
    zp_reply_count_error(s, ZEPS__OP__HELLO, ZEPS_ERANK);
    s->hello_refused++;
    if (now - w->held_warn_s >= 5.0) { /* a retrying or hostile peer: not a line per try */
        w->held_warn_s = now;
        zp_warn("%s", text);
    }
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

/* Register rank h->rank; returns the clock it resumes at and sets *flags,
 * or -1 after replying with an error. */
static int64_t hello_worker(zp_server *s, zp_request *r, uint32_t *flags)
{
    const Zeps__Header *h = r->h;
    if (h->rank >= (uint32_t)s->nworkers) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANK,
                       "rank %u is outside the cluster of %d workers", h->rank, s->nworkers);
        return -1;
    }
    zp_worker *w = &s->workers.w[h->rank];
    double lease = zp_clock_lease(s);
    /* a backup applying the primary's log takes the primary's decision: the
     * lease is a matter of time, which only the primary judges */
    if (!s->applying && zp_workers_held(w, h->incarnation, lease, zp_now_s())) {
        refuse_held(s, r, w, lease);
        return -1;
    }
    bool known = w->joined || w->rehello, lost = w->lost, left = w->left;
    if (zp_workers_hello(w, h->incarnation)) {
        char note[96];
        if (zp_ratelimit_due(&s->logs.joined, zp_now_s(), note, sizeof(note)))
            zp_info("worker %u %s (incarnation %" PRIx64 "), resumes at clock %lld%s", h->rank,
                    known ? "rejoined with a new incarnation" : "joined", h->incarnation,
                    (long long)w->clock, note);
        /* what a crashed incarnation pushed for open rounds is redone by the
         * new one; one that said BYE finished what it pushed: keep it */
        if (known && !left) {
            for (uint32_t i = 0; i < s->ntables; i++)
                s->cons->forget(s, s->tables[i], h->rank);
            *flags |= ZP_FLAG_REJOINED;
        }
    }
    /* HELLO sets where this incarnation's numbers stand: after a restore the
     * shard's record is older than the client's count (docs/protocol.md) */
    zp_workers_note_seq(w, h->seq);
    /* where a mode rolls back, a HELLO starts the worker over from a cut:
     * nothing it sent before may be applied after it (docs/faults.md) */
    if ((s->cons->caps & ZP_CAP_ROLLBACK) && !(h->flags & ZP_FLAG_RESUME))
        zp_workers_fence(w, h->seq); /* not when it resends what it had outstanding */
    if (lost)
        zp_clock_bounds(s);
    w->last_seen_s = zp_now_s();
    /* where it resumes: its own clock, or the cut if the rounds went on
     * without it (on_lost_worker = continue) or closed with its push */
    int64_t cut = s->cons->cut(s);
    return w->clock > cut ? w->clock : cut;
}

void zp_hello_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    int64_t resume = 0;
    uint32_t flags = 0;
    if (h->rank != 0xffffffffu && (resume = hello_worker(s, r, &flags)) < 0)
        return;
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.num_shards = (uint32_t)s->nshards;
    rep.num_workers = (uint32_t)s->nworkers;
    rep.consistency = (char *)s->cons->name;
    rep.caps = s->cons->caps | ZP_CAP_MAPS;
    rep.clock = resume;
    rep.flags = flags;
    rep.cut = zp_request_resume_cut(s);
    rep.cut_set = s->restored_set;
    if (s->shm.on) { /* a co-located client may attach a segment (xport/shmhost.h) */
        rep.shm_endpoint = s->shm.name;
        rep.shm_token = zp_shmhost_token(&s->shm, h->rank, h->incarnation);
        rep.shm_zmq_endpoint = s->shm.zmq_name;
    }
    if (zp_slotmap_epoch(s->slots) > 0) /* not the default map: the client learns it now */
        zp_owner_send_with_map(s, r->identity, &rep);
    else
        zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}
