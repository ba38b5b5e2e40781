/*
 * sparse_ops.h - what a shard does with PULL and PUSH of a sparse table
 * (sparse_ops.c). Called from handlers.c once the worker, the table and the
 * duplicate window are checked.
 */
#ifndef ZP_SPARSE_OPS_H
#define ZP_SPARSE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

/* Most ids one request may name (16 Mi: 128 MiB of ids). */
#define ZP_SPARSE_MAX_KEYS (1 << 24)

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;
typedef struct zp_request zp_request;
typedef struct zp_worker zp_worker;
typedef struct zp_parked zp_parked;

/* May a pull of sparse table t by `rank` at `clock` be answered now? */
bool zp_sparse_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock);

/* Check and answer (or park) a PULL of a sparse table; always replies. */
void zp_sparse_on_pull(zp_server *s, zp_request *r, zp_worker *w, zp_table *t);

/* Check and apply a PUSH of a sparse table. Returns 0 when applied (the
 * caller acknowledges it with *reply_flags: ZP_FLAG_DROPPED if weighted
 * mode dropped rows as too stale), or -1 after replying with an error
 * (nothing applied). */
int zp_sparse_on_push(zp_server *s, zp_request *r, zp_worker *w, zp_table *t,
                      uint32_t *reply_flags);

/* Answer a parked sparse pull that became ready (p is not freed). */
void zp_sparse_serve_parked(zp_server *s, zp_table *t, zp_parked *p);

/* Send the rows of ids[0..n) to `identity` as the reply to req_id. */
void zp_sparse_send_pull(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                         int64_t clock, const uint64_t *ids, size_t n, double wait_us);

#endif
