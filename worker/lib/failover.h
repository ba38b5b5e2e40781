/*
 * failover.h - libzeps: finding and following each shard's primary in a
 * replicated cluster (cluster.replicas >= 2, docs/replication.md).
 * Internal to libzeps.
 *
 * The engine (req.c) tells the failover what it saw on shard k: an
 * ENOTPRIMARY reply, a connection lost or refused (the shard's monitor), a
 * request unanswered for the request timeout. The failover answers whether
 * shard k moved to another replica: its socket then points there
 * (zp_shard_move) and the shard's `moved` flag is set; what that means for
 * the requests outstanding (HELLO there first, then resend them with their
 * sequence numbers) stays in req.c. In between it asks every replica of
 * the shard who is primary (a HELLO as a tool, which changes nothing on a
 * shard) until one serves or names a primary it can believe, and keeps
 * what each said for the error when none is found.
 *
 * With one replica per shard there is no failover object (c->fo is NULL)
 * and none of this runs. Every function runs on the client's thread.
 */
#ifndef ZP_FAILOVER_H
#define ZP_FAILOVER_H

#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "zeps.h"
#include "zeps.pb-c.h"

typedef struct zp_failover zp_failover;

/* The poll slots a failover needs in the client's set: one per replica of
 * each shard, for its probe. */
int zp_failover_npoll(int nshards, int replicas);

/* Failover state for client c, whose shards have `replicas` (2 ..
 * ZP_MAX_REPLICAS) endpoints each: eps[k * replicas + r] is replica r of
 * shard k (copied). Shard sockets start at replica 0. `items` are the
 * zp_failover_npoll() slots of the client's poll set: the failover fills
 * them while it probes (borrowed; the client owns the array). The client
 * owns the result and frees it with zp_failover_destroy before it
 * terminates its ZeroMQ context. */
zp_failover *zp_failover_new(zeps_client *c, const char *const *eps, int replicas,
                             zmq_pollitem_t *items);

/* Close the probes and free the state; sets *fp to NULL (NULL is fine). */
void zp_failover_destroy(zp_failover **fp);

/* Shard k's current replica answered ENOTPRIMARY (h, read during the call).
 * Returns 1 if the shard moved to the primary h names, 0 if it names none
 * that can be believed (then the failover asks every replica). */
int zp_failover_on_notprimary(zeps_client *c, int k, const Zeps__Header *h);

/* Shard k's monitor saw `event`: ZMQ_EVENT_DISCONNECTED (the connection
 * closed: a process killed, or heartbeats unanswered) or
 * ZMQ_EVENT_CONNECT_RETRIED (refused). Starts asking the replicas. */
void zp_failover_on_lost(zeps_client *c, int k, uint16_t event);

/* A request to shard k went unanswered for the request timeout. Starts
 * asking the replicas (the current one may still answer as primary). */
void zp_failover_on_timeout(zeps_client *c, int k);

/* Read the probes' answers and send the probes that are due. Writes the
 * shards that moved to moved[] (room for every shard) and returns how many. */
int zp_failover_poll(zeps_client *c, int *moved);

/* When the next probe is due (zp_now_ns clock); UINT64_MAX if none. */
uint64_t zp_failover_next_ns(const zeps_client *c);

/* Why shard k has no primary, for a request that gives up on it: when the
 * replicas were asked since its primary was last found, writes how long
 * and what each replica said to buf (len bytes, terminated) and returns
 * ZEPS_ENOTPRIMARY (some replica answered that it is not primary) or
 * ZEPS_ETIMEDOUT (none answered); otherwise returns 0 and writes nothing. */
int zp_failover_why(const zeps_client *c, int k, char *buf, size_t len);

#endif
