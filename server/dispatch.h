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

#endif
