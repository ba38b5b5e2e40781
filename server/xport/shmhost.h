/*
 * shmhost.h - the shard's side of the shared-memory data path (shmhost.c):
 * the unix socket co-located clients attach their segments at, the
 * segments attached, and the two places the request path meets them: a
 * request's descriptor made into its payload frame (dispatch.c), a reply's
 * payload written into the client's reply area (reply.c).
 * docs/protocol.md, "Shared memory", has the protocol.
 *
 * Nothing here replies or calls back into the shard: each function says
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

/* "shm" if worker `rank` has a segment attached here, else "tcp" (STATS). */
const char *zp_shmhost_transport(const zp_shmhost *x, uint32_t rank);

#endif
