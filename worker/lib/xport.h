/*
 * xport.h - how a shard connection carries payloads: the transport, a
 * strategy of libzeps chosen per shard (docs/protocol.md, "Shared memory").
 * Headers travel on the shard's DEALER socket (connected, once a segment
 * is attached, to the shard's ipc:// endpoint) or, once attached without
 * CURVE, on the attach connection itself (common/bell.h); a payload travels
 * as a ZeroMQ frame (xport_zmq.c) or, for a shard on this host whose HELLO
 * offered it and a cluster file that allows it, in a shared-memory
 * segment of the connection, named in the header by a descriptor
 * (xport_shm.c). The engine (req.c) asks the shard's table; neither it nor
 * the protocol's rules know which transport carried the bytes.
 * Internal to libzeps.
 */
#ifndef ZP_XPORT_H
#define ZP_XPORT_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"
#include "zeps.pb-c.h"

typedef struct zp_shard zp_shard;
typedef struct zp_req_sub zp_req_sub;

typedef struct zp_xport_ops {
    const char *name; /* "tcp" (any ZeroMQ endpoint) or "shm" */
    /* Name the connection in a request header and, if the transport can,
     * put s's payload (s->data, s->data_len) where it carries it, filling
     * h's descriptor: 1, and no payload frame is sent; 0 to send it as a
     * frame. A resend of s names the same buffer. The caller's payload is
     * not kept: it may be reused once this returns 1. */
    int (*place)(zp_shard *sh, zp_req_sub *s, Zeps__Header *h);
    /* A reply whose header names a payload in the transport: that payload
     * appended to m as its frame (holding the buffer until closed). 0 (also
     * when h names none), or a zeps_err with the reason in err. */
    int (*resolve)(zp_shard *sh, const Zeps__Header *h, zp_frames *m, char *err, size_t errlen);
    /* Send s with header h, and its payload (s->data) as a frame if
     * `frame`: on the shard's DEALER (xport_zmq.c: the payload without
     * copying, r->zrefs counting what ZeroMQ holds), or on the attach
     * connection (xport_shm.c: copied), which hands a message too big for a
     * packet, or met with a full connection, to the DEALER (and what
     * follows while it is unanswered, so the shard sees the requests in
     * their order). A failed send is logged; the retry timer resends. */
    void (*send)(zp_shard *sh, zp_req_sub *s, const Zeps__Header *h, int frame);
    /* s is answered or failed: what place gave it may be reused. */
    void (*done)(zp_shard *sh, zp_req_sub *s);
    /* Let go of the connection's transport state (frames out keep what they need). */
    void (*close)(zp_shard *sh);
} zp_xport_ops;

extern const zp_xport_ops zp_xport_zmq; /* xport_zmq.c */
extern const zp_xport_ops zp_xport_shm; /* xport_shm.c */

/* The transport of shard `sh` (a zp_shard *): its own, or ZeroMQ frames. */
#define ZP_XPORT(sh) ((sh)->xp ? (sh)->xp : &zp_xport_zmq)

/* Attach a segment of `area_bytes` per area to shard sh at the unix socket
 * `endpoint` ("@name": abstract) its HELLO reply named, presenting `token`
 * for (rank, incarnation). On success sh uses zp_xport_shm; returns 0 or
 * a zeps_err with the reason in err (sh keeps its transport). */
int zp_xport_shm_attach(zp_shard *sh, const char *endpoint, uint32_t rank, uint64_t incarnation,
                        uint64_t token, uint64_t area_bytes, char *err, size_t errlen);

/* After shard k's HELLO reply h: attach a segment if h offers one at an
 * endpoint other than the one attached (a restarted shard has a new one),
 * the client's options allow it (ZEPS_TRANSPORT_AUTO) and its shards are
 * not replicated; detach one h no longer offers. A failed attach is
 * logged and leaves the shard on ZeroMQ frames. */
typedef struct zeps_client zeps_client;
void zp_xport_shm_hello(zeps_client *c, int k, const Zeps__Header *h);

/* zmq_poll over c->items and the attach connections that carry requests,
 * for up to timeout_ms; c->items' revents are set as by zmq_poll on them,
 * and shard k's ZMQ_POLLIN also when its attach connection is readable.
 * Returns what zmq_poll returns. */
int zp_xport_shm_poll(zeps_client *c, long timeout_ms);

/* The next reply on shard k's attach connection, without waiting: 1 and
 * the reply in m (header first, as from the DEALER; the caller closes it),
 * or 0: nothing (also when the shard closed the connection: it was killed
 * or stopped, and shard k is back on ZeroMQ at the cluster file's
 * endpoint). A reply that does not go as a packet comes on the DEALER
 * (its routing id is the shard's route to it: zp_shard's route); a RESEND
 * packet (the reply did not fit a packet and the DEALER was not connected
 * yet) makes its request due at once, to be resent on the DEALER (req.c's
 * deadlines); a packet that is not a reply is logged and skipped. */
int zp_xport_shm_recv(zeps_client *c, int k, zp_frames *m);

/* sh's segment (borrowed) and its name in requests, or NULL (tests). */
typedef struct zp_shmseg zp_shmseg;
zp_shmseg *zp_xport_shm_segment(const zp_shard *sh, uint64_t *id);

/* sh's attach connection (borrowed), or -1 (tests). */
int zp_xport_shm_socket(const zp_shard *sh);

/* The endpoint sh's segment is attached at, or "" (TCP). */
const char *zp_xport_shm_endpoint(const zp_shard *sh);

#endif
