/*
 * zap.h - the shard's ZAP handler: which CURVE clients may connect.
 *
 * ZeroMQ asks a ZAP handler (RFC 27) about every CURVE handshake on a socket
 * with ZMQ_CURVE_SERVER set, over an inproc REP socket bound at
 * inproc://zeromq.zap.01 in the same context. The handler here answers
 * 200 for exactly the public keys of the allow-list (the .pub files of
 * cluster.curve_allow_dir, read at start and again on SIGHUP) and 400 for any
 * other, logging the refused key's prefix and the peer's address and counting
 * refusals for STATS. An accepted connection's ZAP User-Id is its key (Z85),
 * which ZeroMQ attaches to every message it carries: the dispatcher finds
 * the key's binding (NAME.id beside NAME.pub, state/bind.h) and refuses a
 * request whose rank the key may not speak as. It runs on the shard's loop
 * thread: a uv_poll on the REP socket's ZMQ_FD, drained fully on every edge
 * and re-checked each loop turn (zp_zap_pump), by the edge-triggered rules
 * the ROUTER follows in server.c.
 */
#ifndef ZP_ZAP_H
#define ZP_ZAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ratelimit.h"
#include "bind.h"

/* An allowed client key and what it may speak as. */
typedef struct zp_zap_key {
    uint8_t key[32]; /* first: the list is sorted and searched by it */
    zp_bind bind;
} zp_zap_key;

typedef struct zp_zap {
    bool enabled;
    void *sock;       /* REP at inproc://zeromq.zap.01 */
    uv_poll_t poll;   /* readable edge of its ZMQ_FD */
    zp_zap_key *keys; /* allowed client public keys, sorted */
    size_t nkeys;
    bool bound; /* the keys carry identity bindings (NAME.id files) */
    char allow_dir[1024];
    uint64_t accepted, refused;
    /* the servers' own public key, for a replicated shard's backups
     * following their primary (repl/follow.c): allowed, as a tool only */
    bool has_peer;
    uint8_t peer[32];
    zp_bind peer_bind;
    zp_ratelimit log; /* refusals are logged at most once a second (common/ratelimit.h) */
    char note[64];    /* " (N more refused since the last message)" or "" */
} zp_zap;

/* Read the allow-list from allow_dir (every *.pub file in it; a bad file or
 * an empty list is an error) and bind the handler's socket in zctx. Must run
 * before any CURVE server socket of zctx accepts a connection. Returns 0 or
 * ZEPS_ECONFIG / ZEPS_EIO / ZEPS_ETRANSPORT with a message; on error nothing
 * is left open. */
int zp_zap_open(zp_zap *z, void *zctx, const char *allow_dir, char *err, size_t errlen);

/* Allow the servers' own public key (Z85) as well: the key a replicated
 * shard's backups follow their primary with. It may speak as a tool only.
 * Kept across reloads. */
void zp_zap_allow_peer(zp_zap *z, const char *public_z85);

/* Start serving from `loop` (the loop thread). z->poll.data is left for the
 * caller's close accounting; the poll callback finds z by container. */
int zp_zap_start(zp_zap *z, uv_loop_t *loop, char *err, size_t errlen);

/* Answer every waiting request (loop thread). Call once per loop turn: a
 * send or ZMQ_EVENTS call elsewhere may have consumed the fd's edge. */
void zp_zap_pump(zp_zap *z);

/* Read the allow-list again; on error the old list stays and the error is
 * returned with a message. Loop thread. */
int zp_zap_reload(zp_zap *z, char *err, size_t errlen);

/* The binding of the key a message came with (its "User-Id" property, the
 * key as Z85), or NULL if that key is not (or no longer) allowed. */
const zp_bind *zp_zap_binding(const zp_zap *z, const char *user_id);

/* Close the socket and free the list; the poll handle must be closed. */
void zp_zap_close(zp_zap *z);

#endif
