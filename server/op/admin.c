/*
 * admin.c - SNAPSHOT (zepsctl snapshot take), ROLLBACK (bsp recovery) and
 * BYE. state/persist.c does the snapshot work and says what it did; this
 * file replies and, after a rollback, answers everything that waited with
 * ERESTARTED: nothing computed before the cut may finish. EVICT (an
 * operator) releases a rank held by a live incarnation. FINISH (a worker
 * that reached the job's target) ends the job for the others: their pulls
 * are answered EFINISHED from then on, so they stop at once instead of
 * running out their step budget.
 */
#include <inttypes.h>

#include "log.h"
#include "now.h"
#include "ops.h"
#include "restore.h"
#include "server.h"
#include "zeps_errors.h"

#define ERRLEN 512

void zp_admin_on_rollback(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = zp_request_worker(s, r);
    if (!w)
        return;
    char err[ERRLEN];
    bool rolled = false;
    int rc = zp_restore_rollback(s, h->clock, h->cut_set, h->recovery, h->rank, &rolled, err,
                                 sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    if (rolled) {
        zp_pull_abort_parked(s, h->clock, h->cut_set);
        zp_clock_barrier_abort(s, h->clock, h->cut_set);
    }
    zp_workers_record(w, h->seq);
    zp_clock_bounds(s);
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.cut = s->cons->cut(s);
    rep.cut_set = s->restored_set;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

void zp_admin_on_snapshot(zp_server *s, zp_request *r)
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
    rep.cut = s->cons->cut(s);
    rep.clock = h->clock;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

void zp_admin_on_evict(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->rank != 0xffffffffu) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANK,
                       "EVICT is for tools (zepsctl evict), not worker %u", h->rank);
        return;
    }
    if (h->evict_rank >= (uint32_t)s->nworkers) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANK,
                       "EVICT of rank %u: outside the cluster of %d workers", h->evict_rank,
                       s->nworkers);
        return;
    }
    zp_worker *w = &s->workers.w[h->evict_rank];
    w->evicted = true;
    zp_warn("worker %u released by an operator (zepsctl evict): the next HELLO of a new "
            "incarnation takes the rank from incarnation %" PRIx64,
            h->evict_rank, w->incarnation);
    zp_reply_ok(s, r->identity, h, 0);
}

void zp_admin_on_bye(zp_server *s, zp_request *r)
{
    zp_worker *w = zp_request_worker(s, r);
    if (!w)
        return;
    char note[96];
    bool done = (r->h->flags & ZP_FLAG_DONE) != 0;
    if (!w->left && zp_ratelimit_due(&s->logs.left, zp_now_s(), note, sizeof(note)))
        zp_info("worker %u left%s%s", r->h->rank, done ? " after all its steps" : "", note);
    w->left = true;
    w->done = done; /* rounds it will never join fail at the next tick (op/waits.c) */
    for (uint32_t i = 0; i < s->ntables; i++)
        zp_cpull_forget(s->tables[i], r->h->rank); /* a view is only worth its memory in use */
    zp_reply_ok(s, r->identity, r->h, 0);
    /* the slowest may move on; under continue the rounds stop counting it */
    zp_clock_quorum_changed(s);
}

void zp_admin_on_finish(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (!zp_request_worker(s, r))
        return;
    if (s->cfg.target_accuracy <= 0 && s->cfg.target_rel_distance <= 0) {
        /* a job without a target cannot reach one: one worker (or a peer
         * that took a free rank) must not end everyone's training */
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "FINISH from worker %u refused: this shard's cluster file sets no "
                       "training.target_accuracy or target_rel_distance, so no target can "
                       "have been reached",
                       h->rank);
        return;
    }
    if (!s->finished.on) {
        /* the first finisher's: a second one changes nothing */
        s->finished.on = true;
        s->finished.by = h->rank;
        s->finished.clock = h->clock;
        zp_info("worker %u reached the job's target at clock %lld: the other workers' pulls "
                "are answered EFINISHED from now on",
                h->rank, (long long)h->clock);
    }
    zp_reply_ok(s, r->identity, h, 0);
    zp_pull_finish_parked(s);
}
