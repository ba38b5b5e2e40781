/*
 * server.h - one zeps shard: the context every server function takes.
 *
 * zp_server holds the shard's parts; there are no globals. The struct body
 * is here, not opaque, because the rooms of server/ each read their part
 * (op/ answers requests, policy/ decides when, table/ and state/ keep what
 * the shard holds); nothing outside server/ includes this header except
 * the server's tests. server.c owns the loop, the socket, the timers and
 * the signals, and the struct's lifecycle.
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
#include "consistency.h"
#include "hist.h"
#include "http.h"
#include "inject.h"
#include "quota.h"
#include "persist.h"
#include "ratelimit.h"
#include "slotmap.h"
#include "reply.h"
#include "follow.h"
#include "rlog.h"
#include "shmhost.h"
#include "role.h"
#include "leave.h"
#include "table.h"
#include "trace.h"
#include "wire.h"
#include "workers.h"
#include "zap.h"

#define ZP_SERVER_OPS      21 /* Zeps__Op values 0..20 */
#define ZP_SERVER_CODES    41 /* zeps_err values below this */
#define ZP_RECOVERIES_KEPT 8  /* rollbacks remembered, so a late ROLLBACK repeats none */

struct zp_server {
    zp_config cfg;
    int shard, nshards, nworkers;
    zp_slotmap *slots; /* where sparse ids live (common/slotmap.h): the cluster file's
                          slot_map, or the default map of nshards; owned */
    int replica;       /* this process's replica of the shard (0 with replicas = 1) */
    zp_role role;      /* primary or backup, the coordination session (repl/role.h) */
    zp_repl repl;      /* the replication log (repl/rlog.h): replicas >= 2 */
    zp_leave leave;    /* a primary's clean exit on a signal (repl/leave.h) */
    zp_follow follow;  /* a backup's link to its primary (repl/follow.h) */
    bool applying;     /* a backup applies a log entry: the role does not refuse it */
    int exit_status;   /* non-zero: what zp_server_run returns (the coordination service
                          unreachable at start-up) */

    struct zp_move *move; /* this shard's part of a live move of slots, or NULL
                             (move/move.h); owned */
    /* the map of a move whose target part this shard ended when the source
     * asked (op/move_ask.c): a SLOTS of it is refused until the next move
     * begins here; owned, NULL if none */
    zp_slotmap *fenced;
    int fenced_source;
    uint64_t incarnation;
    double start_s;

    uv_loop_t loop;
    uv_poll_t poll;       /* readable edge of ZMQ_FD */
    uv_idle_t idle;       /* keeps draining while messages remain */
    uv_check_t check;     /* re-checks ZMQ_EVENTS every loop turn */
    uv_timer_t tick;      /* housekeeping, and a safety net for lost edges */
    uv_timer_t rwake;     /* the replication log asked to be pumped again (rlog.h wake_s) */
    uv_timer_t map_late;  /* fault hook ZEPS_FAULT_MAP_LATE_MS (op/zkmap.c) */
    unsigned map_late_ms; /* ... a move's target takes the node's map this late; 0: at once */
    uv_signal_t sigterm, sigint;
    uv_signal_t sighup; /* reloads the CURVE allow-list */
    int open_handles;
    bool has_loop; /* false for a shard made by zp_server_new_core */

    void *zctx;
    void *sock;
    char endpoint[ZP_ENDPOINT_MAX];
    zp_zap zap;         /* CURVE allow-list (zap.enabled = CURVE on) */
    zp_reply_sink sink; /* where replies go: the socket, or a test's capture */
    zp_shmhost shm;     /* co-located clients' shared-memory segments (xport/shmhost.h) */

    zp_table **tables;
    uint32_t ntables, cap_tables;
    zp_quota quota;                 /* tables, rows and bytes peers may make it hold */
    zp_workers workers;             /* ranks, clocks (min_clock, max_clock), quorum */
    const zp_consistency_ops *cons; /* the mode: every mode decision goes through it */

    zp_trace *trace;    /* per-update trace, or NULL */
    zp_inject inject;   /* staleness on demand (state/inject.h); off unless configured */
    zp_persist persist; /* snapshots */

    /* recovery (docs/faults.md) */
    uint64_t epoch;         /* restores + rollbacks: > 0 once state came from a snapshot */
    int64_t restored_clock; /* clock of the set restored or rolled back to, -1 = none */
    uint64_t restored_set;
    uint64_t restored_by, restored_created_ns; /* the restored file's writer incarnation and
                                                  creation time (0: nothing restored) */
    uint64_t recovery; /* the recovery this state comes from: the incarnation of the shard
                          that restarted (0 = none); ERESTARTED replies carry it */
    struct {
        uint64_t id;
        int64_t clock;
    } recoveries[ZP_RECOVERIES_KEPT]; /* the last recoveries taken part in, and their cuts */
    uint64_t rollbacks, lost_total;
    double max_silence_s;   /* longest a worker went unheard after its first clock */
    double waits_logged_s;  /* when op/waits.c last logged the held requests */
    uint64_t waits_failed;  /* held requests failed: they waited for a worker gone for good */
    uint64_t hello_refused; /* HELLOs refused: the rank is held by a live incarnation */
    uint64_t key_refused;   /* requests refused: the CURVE key may not speak as that rank */

    /* FINISH (op/admin.c): a worker reached the job's target; every other
     * worker's pulls are answered EFINISHED from then on */
    struct {
        bool on;
        uint32_t by;   /* the rank that said so: its own pulls are still served */
        int64_t clock; /* the clock it stopped at */
    } finished;

    /* BARRIER (op/clock.c): the generation being collected, from 1 */
    uint64_t barrier_gen;
    int barrier_count;

    uint64_t bytes_in, bytes_out, requests, errors;
    bool stopping;

    /* observability (server/metrics.c): by op (index = Zeps__Op; 0 = the
     * header could not be read or named no op), handling time in log2 us
     * (hist.h), errors by op and zeps_err code (0 = a code beyond the table) */
    uint64_t op_requests[ZP_SERVER_OPS];
    zp_hist op_handle_us[ZP_SERVER_OPS];
    uint64_t errors_by[ZP_SERVER_OPS][ZP_SERVER_CODES]; /* [op][code] */
    zp_http *http; /* the metrics listener, or NULL (metrics_listen = "") */
    int http_port;
    /* Log lines a peer can cause once per request, each kind limited the
     * same way (common/ratelimit.h); STATS log_suppressed sums what they
     * (and zap's) left out. */
    struct {
        zp_ratelimit refused; /* a request answered with ERROR */
        zp_ratelimit joined;  /* a HELLO registering or rejoining a rank */
        zp_ratelimit left;    /* a BYE */
        zp_ratelimit send;    /* a reply that could not be sent */
    } logs;
};

/* Drain what waits on the shard's sockets now, and keep draining from
 * the idle handle while more remains. */
void zp_server_kick(zp_server *s);

/* Create replica `replica` of shard `shard` from a loaded config: restore
 * its snapshot, bind the socket, set up the loop, and with replicas >= 2
 * start its coordination session. On error returns a zeps_err with a
 * message in err; nothing is left open. On success *out owns the server. */
int zp_server_new(zp_server **out, const zp_config *cfg, int shard, int replica, char *err,
                  size_t errlen);

/* The shard without loop, socket or restore (in-process tests): replies go
 * to `sink`. Same ownership as zp_server_new. */
int zp_server_new_core(zp_server **out, const zp_config *cfg, int shard, zp_reply_sink sink,
                       char *err, size_t errlen);

/* Run until SIGTERM/SIGINT or zp_server_stop(). Returns the exit status
 * (common/exitcode.h): 0 on a clean stop, ZP_EXIT_FAILED if the final
 * snapshot failed, ZP_EXIT_NOCOORD if no coordination session could be
 * made at start-up. */
int zp_server_run(zp_server *s);

/* Ask the loop to stop (from the loop thread). */
void zp_server_stop(zp_server *s);

void zp_server_destroy(zp_server **sp);

#endif
