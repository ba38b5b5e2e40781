/*
 * follow.h - a backup following its primary (docs/replication.md): a
 * DEALER socket to the primary's endpoint, a FOLLOW naming the last entry
 * applied, then every entry the primary streams applied in LSN order
 * through the shard's own handlers (replies discarded); the last entry
 * waiting is acknowledged just before it is applied (follow.c). The role
 * says whom to follow; a new primary or epoch means a new link.
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_REPL_FOLLOW_H
#define ZP_REPL_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>
#include <zmq.h>

#include "config.h"
#include "xfer.h"

typedef struct zp_server zp_server;

/* Apply a log entry, the request of frames f[0..n) (set by the shard:
 * dispatch.c's zp_dispatch_entry). */
typedef void (*zp_follow_apply_fn)(zp_server *s, zmq_msg_t *f, int n);

typedef struct zp_follow {
    zp_follow_apply_fn apply;
    void (*kick)(zp_server *s); /* the shard drains its sockets (entries arrived) */
    void *sock;                 /* DEALER to the primary; NULL when not following */
    uv_poll_t *poll;            /* on its ZMQ_FD (freed by its close callback) */
    char endpoint[ZP_ENDPOINT_MAX];
    uint64_t epoch;   /* of the primary followed */
    char member[64];  /* this replica's member node when it asked (a new session: ask anew) */
    double asked_s;   /* when FOLLOW was last sent */
    bool accepted;    /* the primary answered the FOLLOW */
    uint64_t acked;   /* the last LSN acknowledged to the primary */
    uint64_t refused; /* entries refused: another epoch, a gap, a stranger */
    zp_xfer_in xin;   /* the primary's whole state, being received */
    char why[256];    /* the primary's last refusal */
} zp_follow;

/* Follow, stop following or follow another primary as the role now says,
 * then apply what arrived (a batch at most) and acknowledge it. Returns 1
 * if the batch was full (more is waiting); what arrives after its last
 * receive its caller finds (zp_follow_pending: server.c's drain_all, or
 * the check handle after the link's own wake-up).
 * From the shard's kicks: the link's poll handle, the loop's idle handle
 * and timers. */
int zp_follow_check(zp_server *s);

/* Whether entries are waiting on the link (ZMQ_EVENTS: its FD is an edge). */
int zp_follow_pending(zp_server *s);

/* Stop following and close the link (zp_server_stop). */
void zp_follow_stop(zp_server *s);

#endif
