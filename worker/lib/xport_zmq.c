/*
 * xport_zmq.c - the transport of every ZeroMQ endpoint (tcp://, ipc://):
 * payloads travel as frames of the message, sent without copying by the
 * engine (req.c); nothing to place, resolve or let go. See xport.h.
 */
#include <stdio.h>

#include "errors.h"
#include "xport.h"
#include "zeps_errors.h"

static int place(zp_shard *sh, zp_req_sub *s, Zeps__Header *h)
{
    (void)sh;
    (void)s;
    (void)h;
    return 0;
}

static int resolve(zp_shard *sh, const Zeps__Header *h, zp_frames *m, char *err, size_t errlen)
{
    (void)sh;
    (void)m;
    if (h->shm_length)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a reply names a shared-memory payload, but no segment is attached");
    return 0;
}

static void nothing(zp_shard *sh, zp_req_sub *s)
{
    (void)sh;
    (void)s;
}

static void let_go(zp_shard *sh)
{
    (void)sh;
}

const zp_xport_ops zp_xport_zmq = {
    .name = "tcp",
    .place = place,
    .resolve = resolve,
    .done = nothing,
    .close = let_go,
};
