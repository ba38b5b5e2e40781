/*
 * rmsg.h - the messages replicas send each other (FOLLOW, REPLICATE; docs/
 * replication.md): their common header, and a send to a peer through the
 * shard's ROUTER socket. Used by the log (rlog.c), the follower (follow.c)
 * and the whole-state transfer (xfer.c).
 */
#ifndef ZP_RMSG_H
#define ZP_RMSG_H

#include <stdbool.h>
#include <stdint.h>

#include <zmq.h>

#include "zeps.pb-c.h"

typedef struct zp_server zp_server;

/* A replication message's header from this replica: version, op, tool
 * rank, shard, incarnation, replica, `epoch` and the log's position (lsn,
 * lsn_epoch) and base; the caller sets the rest. */
void zp_rmsg_header(const zp_server *s, Zeps__Header *h, Zeps__Op op, uint64_t epoch);

/* Send [identity][h] (more frames follow when `more`) on the shard's
 * ROUTER; -1 if the peer is gone or the send failed. */
int zp_rmsg_send_to(zp_server *s, zmq_msg_t *identity, const Zeps__Header *h, bool more);

#endif
