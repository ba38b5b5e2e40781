/*
 * dispatch.h - from received frames to an op handler (dispatch.c).
 */
#ifndef ZP_DISPATCH_H
#define ZP_DISPATCH_H

#include "wire.h"

typedef struct zp_server zp_server;

/* Handle one received message (frames[0] is the identity): decode the
 * header, check what every op shares, and call the op's handler, which
 * replies exactly once. The frames stay the caller's (a handler may move a
 * payload frame's bytes out). */
void zp_dispatch(zp_server *s, zp_frames *m);

/* A backup applies a log entry: the request of frames f[0..n) (its
 * header first), through the same checks and handlers as from a worker
 * but for the role's refusal, its replies discarded. The frames stay the
 * caller's. */
void zp_dispatch_entry(zp_server *s, zmq_msg_t *f, int n);

#endif
