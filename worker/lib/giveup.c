/*
 * giveup.c - libzeps: what a request that does not end says: why it gave
 * up after its retries (see giveup.h): a refused HELLO, no primary found
 * among a replicated shard's replicas (failover.c says what each said), or
 * a shard that did not answer, with a CURVE hint; and, while its shard
 * holds it parked, what the shard says it waits for. Its own file so that the request engine
 * (req.c) reads as the request's path.
 */
#include <stdio.h>

#include "client.h"
#include "fail.h"
#include "failover.h"
#include "giveup.h"
#include "log.h"
#include "now.h"
#include "wire.h"
#include "zeps.h"

int zp_giveup_error(zeps_client *c, int k, const zp_req_sub *s)
{
    zp_shard *sh = &c->shards[k];
    double secs = (double)(s->retries + 1) * c->opt.request_timeout_ms / 1000.0;
    if (s->req->op == ZEPS__OP__HELLO && sh->held[0]) /* refused, not silent */
        return zp_fail(c, ZEPS_ERANK, "shard %d refused HELLO: %s", k, sh->held);
    char why[768];
    int code = c->fo ? zp_failover_why(c, k, why, sizeof(why)) : 0;
    if (code)
        return zp_fail(c, code,
                       "shard %d: %s found no primary to answer it after %d retries "
                       "(%.1f s): %s",
                       k, zp_wire_op_name(s->req->op), s->retries, secs, why);
    return zp_fail(
        c, ZEPS_ETIMEDOUT, "shard %d at %s did not answer %s after %d retries (%.1f s)%s%s", k,
        sh->endpoint, zp_wire_op_name(s->req->op), s->retries, secs, sh->handshake[0] ? ": " : "",
        sh->handshake[0] ? sh->handshake
        : c->curve       ? ": no reply; with CURVE, check that this worker's key is "
                           "in the server's allow-list (curve_allow_dir) and that "
                           "curve_server_public is the servers' key"
                         : "");
}

/* Its shard's words are in this worker's own log after PARKED_SAY_S of
 * waiting, then every PARKED_AGAIN_S per request: a job that waits for a
 * worker that never came says so where its user looks, not only in the
 * shard's log. */
#define PARKED_SAY_S   10
#define PARKED_AGAIN_S 60
void zp_giveup_parked(zeps_client *c, zp_req_sub *s, int k, const Zeps__Header *h)
{
    uint64_t now = zp_now_ns();
    s->retries = 0; /* alive and holding it: the retries start over */
    s->deadline_ns = now + (uint64_t)c->opt.request_timeout_ms * 1000000ull;
    if (!h->error_text || !h->error_text[0] || !s->sent_ns ||
        now - s->sent_ns < PARKED_SAY_S * 1000000000ull ||
        (s->req->said_ns && now - s->req->said_ns < PARKED_AGAIN_S * 1000000000ull))
        return;
    s->req->said_ns = now; /* one line for the request, whichever shard answered */
    zp_warn("%s to shard %d has waited %.0f s: %s", zp_wire_op_name(s->req->op), k,
            (double)(now - s->sent_ns) / 1e9, h->error_text);
}
