/*
 * xport_zmq.c - the transport of every ZeroMQ endpoint (tcp://, ipc://):
 * a request goes on the shard's DEALER, its payload as a frame sent without
 * copying; nothing to place, resolve or let go. See xport.h.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "client.h"
#include "errors.h"
#include "log.h"
#include "req.h"
#include "shard.h"
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

static void release_payload(void *data, void *hint)
{
    (void)data;
    zp_req *r = hint;
    atomic_fetch_sub_explicit(&r->zrefs, 1, memory_order_release);
}

static void dealer_send(zp_shard *sh, zp_req_sub *s, const Zeps__Header *h, int frame)
{
    if (zp_wire_send_header(sh->sock, h, (frame ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) != 0) {
        zp_debug("send to shard %d failed: %s", s->shard, zmq_strerror(zmq_errno()));
        return;
    }
    if (frame) {
        atomic_fetch_add_explicit(&s->req->zrefs, 1, memory_order_relaxed);
        if (zp_wire_send_data(sh->sock, s->data, s->data_len, release_payload, s->req,
                              ZMQ_DONTWAIT) != 0)
            zp_debug("payload send to shard %d failed: %s", s->shard, zmq_strerror(zmq_errno()));
    }
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
    .send = dealer_send,
    .done = nothing,
    .close = let_go,
};
