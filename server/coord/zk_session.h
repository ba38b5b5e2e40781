/*
 * zk_session.h - one ZooKeeper session driven by a libuv loop, with the
 * single-threaded C client (libzookeeper_st): zookeeper_interest says which
 * socket, which events and how long; a uv_poll and a uv_timer wait for
 * them; zookeeper_process runs the client, and with it every completion
 * and watcher, on the loop thread. When the service says the session
 * expired, the handle is closed and a new session begun.
 *
 * This layer knows sessions, not zeps's nodes: zk.c (the coordination
 * backend) sits on it and hears what happened through one callback.
 */
#ifndef ZP_ZK_SESSION_H
#define ZP_ZK_SESSION_H

#include <stdint.h>

#include <uv.h>
#include <zookeeper/zookeeper.h>

#include "coord.h"

typedef struct zp_zk_session zp_zk_session;

/* What the session tells its owner, on the loop thread, never from inside
 * a zp_zk_session_* call. `why` is valid during the call. On EXPIRED the
 * old handle is already unusable (requests on it fail); a new one exists
 * once the callback returns. */
typedef void (*zp_zk_session_event)(void *arg, zp_coord_session ev, const char *why);

/* Begin a session with `hosts` (strings copied). Returns 0, or ZEPS_EINVAL
 * / ZEPS_EIO with a message (the client refused the host list). */
int zp_zk_session_new(zp_zk_session **out, uv_loop_t *loop, const char *hosts, int timeout_ms,
                      int connect_timeout_ms, zp_zk_session_event ev, void *arg, char *err,
                      size_t errlen);

/* The client handle, for requests (zoo_a*); valid until the next EXPIRED
 * event or zp_zk_session_close. */
zhandle_t *zp_zk_session_handle(zp_zk_session *s);

/* After queuing requests outside a completion or watcher: let the loop
 * send them now. */
void zp_zk_session_kick(zp_zk_session *s);

/* This session's id (0 before it is connected). */
int64_t zp_zk_session_id(zp_zk_session *s);

/* The session timeout the service granted (0 before it is connected). */
int zp_zk_session_timeout(zp_zk_session *s);

void zp_zk_session_stats(zp_zk_session *s, zp_coord_stats *st);

/* Close the session (its ephemeral nodes go at once) and the handles. The
 * client calls every pending completion (with ZCLOSING) before this
 * returns; no event follows. `closed(arg)` runs once the loop freed
 * everything. */
void zp_zk_session_close(zp_zk_session **sp, void (*closed)(void *arg), void *arg);

#endif
