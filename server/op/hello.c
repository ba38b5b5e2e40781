/*
 * hello.c - HELLO: a worker registers its incarnation (a tool says HELLO as
 * rank 0xffffffff to learn the cluster's shape). A worker back with a new
 * incarnation redoes its clock, so the policy forgets what it had pushed
 * and not yet applied. The reply tells the client what it needs of the
 * mode (its name and capability bits) and where to resume.
 */
#include <inttypes.h>

#include "log.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "zeps_errors.h"

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
    bool known = w->joined || w->rehello, lost = w->lost;
    if (zp_workers_hello(w, h->incarnation)) {
        char note[96];
        if (zp_ratelimit_due(&s->logs.joined, zp_now_s(), note, sizeof(note)))
            zp_info("worker %u %s (incarnation %" PRIx64 "), resumes at clock %lld%s", h->rank,
                    known ? "rejoined with a new incarnation" : "joined", h->incarnation,
                    (long long)w->clock, note);
        if (known) {
            for (uint32_t i = 0; i < s->ntables; i++)
                s->cons->forget(s, s->tables[i], h->rank);
            *flags |= ZP_FLAG_REJOINED;
        }
    }
    /* HELLO sets where this incarnation's numbers stand: after a restore the
     * shard's record is older than the client's count (docs/protocol.md) */
    zp_workers_note_seq(w, h->seq);
    if (lost)
        zp_workers_update_bounds(&s->workers, s->cfg.lost_continue);
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
    rep.caps = s->cons->caps;
    rep.clock = resume;
    rep.flags = flags;
    rep.cut = zp_request_resume_cut(s);
    rep.cut_set = s->restored_set;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}
