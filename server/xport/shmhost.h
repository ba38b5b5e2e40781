/*
 * shmhost.h - the shard's side of the shared-memory data path (shmhost.c):
 * the unix socket co-located clients attach their segments at, the
 * segments attached, and the two places the request path meets them: a
 * request's descriptor made into its payload frame (dispatch.c), a reply's
 * payload written into the client's reply area (reply.c).
 * docs/protocol.md, "Shared memory", has the protocol.
 *
 * Without CURVE the attach connection also carries the client's requests
 * and the shard's replies, one packet each (common/bell.h): a request read
 * there is handed to `deliver` as a ROUTER message would be, under an
 * identity that names the connection (zp_shmhost_is_conn), and reply.c
 * sends the reply to such an identity back with zp_shmhost_send. Those two
 * hooks are the only calls out of this file; otherwise each function says
 * what happened and the caller acts. Everything runs on the loop's thread
 * but the frames' release, which may run in ZeroMQ's I/O thread.
 */
#ifndef ZP_SHMHOST_H
#define ZP_SHMHOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>
#include <zmq.h>

#include "wire.h"
#include "zeps.pb-c.h"

typedef struct zp_shmconn zp_shmconn;

/* What the owner does with a message read on an attach connection: m->f[0]
 * is the connection's identity, then the header and payload frames; the
 * frames stay the caller's (zp_dispatch's contract). */
typedef void (*zp_shmhost_deliver_fn)(void *arg, zp_frames *m);
/* ... and with a packet that is not a message: answer it ERROR `code`. */
typedef void (*zp_shmhost_refuse_fn)(void *arg, zmq_msg_t *identity, int code, const char *text);

typedef struct zp_shmhost {
    bool on;           /* offered in HELLO replies */
    int lfd;           /* the listening socket (abstract unix namespace), -1 if none */
    uv_poll_t lpoll;   /* its readable edge */
    char name[64];     /* "@zeps-shm-...": the HELLO replies' shm_endpoint */
    char zmq_name[80]; /* the ROUTER's ipc:// endpoint for co-located clients, or "" */
    uint64_t key;      /* tokens are derived from it (zp_shmhost_token) */
    uv_loop_t *loop;
    zp_shmconn **conns; /* attached or attaching clients */
    int nconns, cap;
    uint64_t attached, refused, released; /* segments attached, attaches refused, detached */
    /* headers on the attach connections (set by the owner after start; bell
     * false: a packet after the attach closes the connection, as before) */
    bool bell;
    zp_shmhost_deliver_fn deliver;
    zp_shmhost_refuse_fn refuse;
    void *arg;
    uint8_t *rbuf;                           /* one packet being read (ZP_BELL_MAX + 1 bytes) */
    uint64_t serial;                         /* the last connection's number (its identity) */
    uint64_t bell_in, bell_bad, bell_resent; /* packets read, refused, replies sent RESEND */
} zp_shmhost;

/* Listen for attaches of shard `shard` of incarnation `inc` on `loop`.
 * Returns 0, or a zeps_err with a message in err (the caller goes on
 * without shared memory). */
int zp_shmhost_start(zp_shmhost *x, uv_loop_t *loop, int shard, uint64_t inc, char *err,
                     size_t errlen);

/* Stop listening and detach every client: their unix sockets closed, their
 * segments unmapped once the last frame on them is released. */
void zp_shmhost_stop(zp_shmhost *x);

/* The token a HELLO reply gives (rank, incarnation) for its attach. */
uint64_t zp_shmhost_token(const zp_shmhost *x, uint32_t rank, uint64_t incarnation);

/* A request's payload from its segment: if h names a segment (shm_segment)
 * the sender's identity is noted for replies; if it carries a descriptor
 * (shm_length > 0) the buffer is taken and appended to m as its payload
 * frame, which holds the buffer and the segment until it is closed (by the
 * caller, or by whoever moved it out). Returns 0 (also when h names no
 * segment, or one this shard does not know: the request then has no
 * payload), or ESHM/EPROTO with the reason in err: nothing was taken. */
int zp_shmhost_resolve(zp_shmhost *x, const zmq_msg_t *identity, const Zeps__Header *h,
                       zp_frames *m, char *err, size_t errlen);

/* A reply's payload for the client at `identity`: copied into its
 * segment's reply area, rep's descriptor fields set. true if placed (the
 * caller sends rep without a payload frame and still owns data), false to
 * send it as a frame (no segment, or no room). */
bool zp_shmhost_place(zp_shmhost *x, const zmq_msg_t *identity, Zeps__Header *rep, const void *data,
                      size_t len);

/* Whether `identity` names an attach connection (9 bytes, a zero first:
 * no ROUTER identity looks so: ZeroMQ's own are 5 bytes, a peer's chosen
 * ones may not start with a zero). */
bool zp_shmhost_is_conn(const zmq_msg_t *identity);

/* How zp_shmhost_send left a reply. */
typedef struct zp_shmhost_out {
    size_t bytes; /* sent as a packet: its bytes; 0: not sent */
    /* not sent as a packet but to go on the ROUTER (too big for one, or the
     * connection is full): to `dealer`, the client's DEALER routing id
     * (zp_bell_route; the caller closes it), header `rep` (its payload in
     * the segment if it fit there), data as a frame if `payload` */
    bool route;
    bool too_big; /* why: larger than a packet (else: the connection was full) */
    bool payload;
    zmq_msg_t dealer;
    Zeps__Header rep;
} zp_shmhost_out;

/* Send reply `rep` and its payload (data, len; data NULL: none) to the
 * attach connection `identity` names: the payload in its segment where it
 * fits, else in the packet. A reply that does not go as a packet (larger
 * than ZP_BELL_MAX, or the connection is full) is handed back in *out to
 * go on the ROUTER to the client's DEALER (its routing id named after the
 * segment, docs/protocol.md), so it is that request's answer and nothing
 * is served twice. data stays the caller's. Nothing sent and out->route
 * false: the connection is gone (the client resends at its timeout). */
void zp_shmhost_send(zp_shmhost *x, const zmq_msg_t *identity, const Zeps__Header *rep,
                     const void *data, size_t len, zp_shmhost_out *out);

/* The ROUTER had no route to out->dealer (the client's DEALER is not
 * connected yet, or reconnecting): a reply too big for a packet is
 * answered RESEND on the connection (the client asks again over ZeroMQ);
 * one that met a full connection is dropped (the client resends at its
 * timeout). Closes out->dealer. */
void zp_shmhost_unrouted(zp_shmhost *x, const zmq_msg_t *identity, zp_shmhost_out *out);

/* Read and deliver every packet waiting on every attach connection: a
 * request sent there before one that came over ZeroMQ is handled first
 * (server.c calls it before handing over a ZeroMQ message). */
void zp_shmhost_drain(zp_shmhost *x);

/* Requests worker `rank` sent on its attach connection (STATS). */
uint64_t zp_shmhost_requests(const zp_shmhost *x, uint32_t rank);

/* "shm" if worker `rank` has a segment attached here, else "tcp" (STATS). */
const char *zp_shmhost_transport(const zp_shmhost *x, uint32_t rank);

#endif
