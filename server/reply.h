/*
 * reply.h - how a shard answers (reply.c): reply headers, sending through
 * the shard's sink, ERROR and ERESTARTED replies.
 *
 * Every reply goes through one sink: the ROUTER socket in a running shard,
 * a capture in the in-process tests, so an op handler can be driven with a
 * message in and its replies read out without sockets.
 */
#ifndef ZP_REPLY_H
#define ZP_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "zeps.pb-c.h"

typedef struct zp_server zp_server;

/* Deliver one reply: [identity][rep] and, if data != NULL, a payload frame
 * of len bytes. The sink owns `data` from the call on: it calls ffn(data,
 * hint) when done with it (ffn may be NULL: data is borrowed and must be
 * copied before the call returns). Returns bytes delivered (0 if the peer
 * is gone). */
typedef size_t (*zp_reply_send_fn)(void *arg, zmq_msg_t *identity, const Zeps__Header *rep,
                                   const void *data, size_t len, zmq_free_fn *ffn, void *hint);

typedef struct zp_reply_sink {
    zp_reply_send_fn send;
    void *arg;
} zp_reply_sink;

/* The sink of the shard's ROUTER socket (arg = the zp_server): ZMQ_DONTWAIT,
 * a reply to a gone peer logged at debug level, other failures to send
 * logged (rate-limited, s->logs.send) and otherwise ignored: the client
 * will retry. */
size_t zp_reply_socket_send(void *server, zmq_msg_t *identity, const Zeps__Header *rep,
                            const void *data, size_t len, zmq_free_fn *ffn, void *hint);

/* A reply header with version, op, req_id, incarnation and table filled. */
void zp_reply_init(const zp_server *s, const Zeps__Header *req, Zeps__Header *rep);

/* Send a reply through the shard's sink and count its bytes out. The
 * payload is handed over as zp_reply_send_fn says. */
void zp_reply_send(zp_server *s, zmq_msg_t *identity, const Zeps__Header *rep, const void *data,
                   size_t len, zmq_free_fn *ffn, void *hint);

/* An empty reply to `req` with `flags`. */
void zp_reply_ok(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, uint32_t flags);

/* Count an ERROR reply to op `op` with zeps_err `code`: STATS errors and
 * the metrics' errors by op and code (reply.c's senders call it; so does a
 * handler that builds its ERROR header itself). */
void zp_reply_count_error(zp_server *s, unsigned op, int code);

/* Send an ERROR reply for request header `req` (may be NULL when the header
 * could not be read) with a printf-style message; counts it. */
void zp_reply_error(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, int code,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* An ERROR reply to a request the shard held (its header is gone): `op`
 * names it in the log (a warning), req_id matches it at the client. */
void zp_reply_error_to(zp_server *s, zmq_msg_t *identity, int op, uint64_t req_id, int code,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* An ERROR reply with ERESTARTED: this shard's state came from a snapshot
 * (a restart, or a bsp rollback) since the worker last said HELLO. It
 * carries the cut to resume from (docs/faults.md). With req NULL, req_id
 * names the request answered. */
void zp_reply_restarted(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, uint64_t req_id,
                        int64_t cut, uint64_t set);

/* Refuse `req` with ENOTPRIMARY: this replica does not serve workers; the
 * reply names the primary (endpoint, replica, epoch) when one is known. */
void zp_reply_not_primary(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req);

#endif
