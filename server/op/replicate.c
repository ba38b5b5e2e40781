/*
 * replicate.c - the primary's side of FOLLOW and REPLICATE
 * (docs/replication.md). A backup's FOLLOW is checked (its epoch, that it
 * is a live member of this shard's replica set, that the log still holds
 * what it lacks) and answered; the backup's REPLICATE says how far it has
 * applied and gets no answer (anyone else's REPLICATE gets ERANK). The log itself is repl/rlog.c.
 */
#include <inttypes.h>

#include "ops.h"
#include "server.h"
#include "zeps_errors.h"

void zp_replicate_on_follow(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    char err[512];
    if (!s->repl.on) {
        zp_reply_error(s, r->identity, h, ZEPS_ESTATE,
                       "shard %d is not replicated (cluster.replicas = 1)", s->shard);
        return;
    }
    int rc = zp_rlog_follow(s, r->identity, h, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.lsn = s->repl.lsn;
    rep.epoch = s->role.epoch;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

void zp_replicate_on_ack(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (s->repl.on && h->epoch == s->role.epoch && zp_rlog_acked(s, r->identity, h))
        return; /* a follower's acknowledgement: no reply */
    s->repl.refused++;
    zp_reply_error(s, r->identity, h, ZEPS_ERANK,
                   "shard %d: a REPLICATE (entry %" PRIu64 ", epoch %" PRIu64
                   ") from a peer that does not follow this replica at its epoch %" PRIu64,
                   s->shard, h->lsn, h->epoch, s->role.epoch);
}
