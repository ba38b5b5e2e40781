/*
 * giveup.c - libzeps: why a request gave up after its retries (see
 * giveup.h): a refused HELLO, no primary found among a replicated shard's
 * replicas (failover.c says what each said), or a shard that did not
 * answer, with a CURVE hint. Its own file so that the request engine
 * (req.c) reads as the request's path.
 */
#include <stdio.h>

#include "client.h"
#include "fail.h"
#include "failover.h"
#include "giveup.h"
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
