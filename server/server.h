/*
 * server.h - one zeps shard: a libuv loop around a ZeroMQ ROUTER socket.
 *
 * zp_server is the context every server function takes; there are no
 * globals. The struct body is here, not opaque, because it is shared by the
 * few files of server/ (server.c runs the loop, handlers.c answers each op,
 * consistency.c decides when); nothing outside server/ includes this header
 * except the server's unit tests.
 *
 * Threading: everything runs on the loop's thread. ZeroMQ's I/O thread only
 * calls zp_buf_release when it is done with a zero-copy reply.
 */
#ifndef ZP_SERVER_H
#define ZP_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>
#include <zmq.h>

#include "config.h"
#include "persist.h"
#include "consistency.h"
#include "stats.h"
#include "table.h"
#include "wire.h"
#include "workers.h"
#include "zap.h"

typedef struct zp_server {
    zp_config cfg;
    int shard, nshards, nworkers;
    uint64_t incarnation;
    double start_s;

    uv_loop_t loop;
    uv_poll_t poll;      /* readable edge of ZMQ_FD */
    uv_idle_t idle;      /* keeps draining while messages remain */
    uv_check_t check;    /* re-checks ZMQ_EVENTS every loop turn */
    uv_timer_t tick;     /* housekeeping, and a safety net for lost edges */
    uv_signal_t sigterm, sigint;
    uv_signal_t sighup;  /* reloads the CURVE allow-list */
    int open_handles;

    void *zctx;
    void *sock;
    char endpoint[ZP_ENDPOINT_MAX];
    zp_zap zap;          /* CURVE allow-list (zap.enabled = CURVE on) */

    zp_table **tables;
    uint32_t ntables, cap_tables;
    zp_workers workers;
    const zp_consistency_ops *cons;

    int64_t min_clock;     /* slowest live worker's clock (never-joined count as 0) */
    int64_t max_clock;     /* most advanced worker's clock */
    zp_trace *trace;       /* per-update trace, or NULL */
    zp_persist persist;    /* snapshots */

    /* recovery (docs/faults.md) */
    uint64_t epoch;        /* restores + rollbacks: > 0 once state came from a snapshot */
    int64_t restored_clock; /* clock of the set restored or rolled back to, -1 = none */
    uint64_t restored_set;
    uint64_t rollbacks, lost_total;

    uint64_t barrier_gen;  /* generation being collected, from 1 */
    int barrier_count;

    uint64_t bytes_in, bytes_out, requests, errors;
    bool stopping;
} zp_server;

/* One request being handled: borrowed views into the received frames. */
typedef struct zp_request {
    zmq_msg_t *identity;
    const Zeps__Header *h;
    zmq_msg_t *payload;    /* first payload frame or NULL */
    int npayload;
} zp_request;

/* Create shard `shard` from a loaded config: bind the socket, set up the
 * loop. On error returns a zeps_err with a message in err; nothing is left
 * open. On success *out owns the server. */
int zp_server_new(zp_server **out, const zp_config *cfg, int shard, char *err, size_t errlen);

/* Run until SIGTERM/SIGINT or zp_server_stop(). Returns 0 on a clean stop. */
int zp_server_run(zp_server *s);

/* Ask the loop to stop (from the loop thread). */
void zp_server_stop(zp_server *s);

void zp_server_destroy(zp_server **sp);

/* Handle one received message (frames[0] is the identity). */
void zp_server_handle(zp_server *s, zp_frames *m);

/* --- replies (handlers.c) --- */

/* A reply header with version, op, req_id, incarnation and table filled. */
void zp_reply_init(const zp_server *s, const Zeps__Header *req, Zeps__Header *rep);

/* Send [identity][rep] and, if data != NULL, a payload frame of len bytes
 * (zero-copy with ffn/hint as in zp_data_send). Counts bytes out. Failures
 * to send (peer gone) are logged at debug level and otherwise ignored: the
 * client will retry. */
void zp_reply_send(zp_server *s, zmq_msg_t *identity, const Zeps__Header *rep, const void *data,
                   size_t len, zmq_free_fn *ffn, void *hint);

/* Send an ERROR reply for request header `req` (may be NULL when the header
 * could not be read) with a printf-style message. */
void zp_reply_error(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, int code,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Answer every parked pull of t that its policy now allows. */
void zp_server_serve_parked(zp_server *s, zp_table *t);

/* Answer a pull by `rank` at `clock` of [offset, offset + count) from
 * table t now; it waited `wait_us` parked. Records it (stats, trace). */
void zp_server_send_pull(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                         uint32_t rank, int64_t clock, uint64_t offset, uint64_t count,
                         double wait_us);

/* The same for a compressed pull (cp->codec != NULL; the range is the whole
 * slice): answers with a delta against the worker's view or the full values
 * (cpull.h). cp NULL or cp->codec NULL: a plain pull. */
void zp_server_send_pull_cp(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                            uint32_t rank, int64_t clock, uint64_t offset, uint64_t count,
                            double wait_us, const zp_cpull_req *cp);

/* Record a push that was applied (kind PUSH, or LATE applied), dropped or
 * late: histograms of the table and the worker, counters, trace. */
void zp_server_record_push(zp_server *s, zp_table *t, const zp_push *p, zp_trace_kind kind,
                           uint64_t version_applied, double weight, int applied);

/* The clock every table of this shard has closed under bsp when they
 * agree (a consistent cut), else -1. */
int64_t zp_server_cut(const zp_server *s);

/* Answer every parked pull and waiting barrier with ERESTARTED (cut `cut`
 * of set `set`): after a rollback nothing computed before it may finish. */
void zp_server_abort_waiting(zp_server *s, int64_t cut, uint64_t set);

/* Timer: declare workers silent past lost_worker_timeout_s lost and, with
 * on_lost_worker = continue, close the bsp rounds that waited for them. */
void zp_server_check_lost(zp_server *s);

/* Recompute min_clock/max_clock over live workers. */
void zp_server_update_clock_bounds(zp_server *s);

/* Workers a bsp round needs before it closes: the live ones (not left, not
 * lost under on_lost_worker = continue) minus backup_workers, at least 1. */
int zp_server_round_quorum(const zp_server *s);

/* The ssp bound in force for table t. */
uint32_t zp_server_staleness(const zp_server *s, const zp_table *t);

#endif
