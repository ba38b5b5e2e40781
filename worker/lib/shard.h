/*
 * shard.h - the connection to one shard (shard.c): its DEALER socket, the
 * monitor beside it (CURVE, replicated clusters), and what the engine
 * (req.c) keeps per shard.
 * Internal to libzeps.
 */
#ifndef ZP_SHARD_H
#define ZP_SHARD_H

#include <stdint.h>

#include "config.h"
#include "zeps.h"

typedef struct zp_req_sub zp_req_sub;
typedef struct zp_xport_ops zp_xport_ops;

typedef struct zp_shard {
    /* shard.c */
    void *sock;
    void *monitor;                  /* CURVE or replicas >= 2: PAIR receiving the socket's events */
    char endpoint[ZP_ENDPOINT_MAX]; /* the replica it is connected to (failover.c moves it) */
    /* xport_*.c: how payloads travel (xport.h); NULL = ZeroMQ frames */
    const zp_xport_ops *xp;
    void *xs;      /* the transport's state */
    char fast[96]; /* its ipc:// endpoint the socket connects to instead, or "" */
    /* the routing id the socket takes (route_len bytes; 0: ZeroMQ picks one):
     * while requests go on the attach connection, the shard's route for a
     * reply that does not go as a packet (common/bell.h) */
    uint8_t route[16];
    size_t route_len;
    int routed; /* a request under this route was answered: the shard knows it */
    /* req.c */
    char handshake[96]; /* CURVE: the last handshake failure seen, for messages */
    char held[384];     /* HELLO refused: the rank is held by a live incarnation (why) */
    uint64_t next_seq;
    uint64_t incarnation; /* the server's, from HELLO */
    /* Sub-requests sent and not yet answered, oldest first: every resend
     * (a timeout, a HELLO again after a restart or a failover) keeps the
     * order they were sent in, so a bsp CLOCK is never resent ahead of a
     * push of its clock (it would close a sparse round without it). */
    zp_req_sub *out;
    int nout;
    int64_t hello_clock; /* HELLO reply: the clock this worker resumes at on this shard */
    int need_hello;      /* the shard answered ERESTARTED: say HELLO again */
    int rejoined;        /* HELLO reply: the shard knew this rank under another incarnation */
    int moved;           /* failover.c: the socket now points at another replica, which has not
                            heard HELLO yet; req.c sends only HELLO there until one is answered */
    int maps;            /* HELLO reply: ZP_CAP_MAPS, its CLOCK answers bring a newer map */
} zp_shard;

/* Open shard k's socket (and, with CURVE or replicas >= 2, its monitor) and connect it to
 * c->shards[k].endpoint; registers both in c->items. Returns 0, or -1 with
 * zmq_errno() set and nothing left open. */
int zp_shard_open(zeps_client *c, int k);

/* Close shard k's socket and monitor (linger 0: ZeroMQ drops and releases
 * what it still queued). Safe on a shard that is not open. */
void zp_shard_close(zeps_client *c, int k);

/* Close and reopen shard k's socket. A failure to reopen is logged; the
 * engine's retries then time out. */
void zp_shard_reset(zeps_client *c, int k);

/* Point shard k at another replica's endpoint: its socket (and monitor)
 * are closed, dropping what ZeroMQ still queued, and opened to `endpoint`
 * (copied). A failure to reopen is logged, as in zp_shard_reset. */
void zp_shard_move(zeps_client *c, int k, const char *endpoint);

/* A DEALER connected to `endpoint` with the shard sockets' CURVE keys and
 * linger 0, for short questions to one replica (failover.c's probes); the
 * caller owns it and closes it with zmq_close. NULL on failure. */
void *zp_shard_probe_open(zeps_client *c, const char *endpoint);

/* Read one event from shard k's monitor without blocking: 1 and *event,
 * *value (ZMQ_EVENT_*), or 0 when there is none. */
int zp_shard_monitor_read(zeps_client *c, int k, uint16_t *event, uint32_t *value);

#endif
