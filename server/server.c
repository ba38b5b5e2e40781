/*
 * server.c - a shard's event loop: libuv around one ZeroMQ ROUTER socket,
 * its timers and signals, and the zp_server's lifecycle. Each received
 * message goes to dispatch.c; the housekeeping timer drives the snapshot
 * writers (state/persist.c) and the lost-worker check (op/clock.c).
 *
 * ZMQ_FD is edge-triggered and only ever signals "something changed", so the
 * loop never trusts it alone: the poll callback drains while ZMQ_EVENTS says
 * POLLIN, at most DRAIN_BATCH messages per turn (so timers and signals still
 * run under load); a uv_check handle re-reads ZMQ_EVENTS after every loop
 * turn, because any send we made may have consumed the edge, and starts a
 * uv_idle handle while messages remain so the loop does not block on a
 * readiness edge that already passed. A 100 ms timer is the last safety net.
 *
 * Sends use ZMQ_DONTWAIT with unlimited high-water marks: a reply is bounded
 * by the requests a client has in flight, so the queue cannot grow without
 * bound, and ROUTER_MANDATORY makes a reply to a vanished peer fail at once
 * instead of vanishing silently.
 */
#include "restore.h"
#include "server.h"

#include "dispatch.h"
#include "metrics.h"
#include "move.h"
#include "ops.h"
#include "registry.h"
#include "tier.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "curve.h"
#include "errors.h"
#include "exitcode.h"
#include "log.h"
#include "mathenv.h"
#include "now.h"
#include "rng.h"
#include "zeps_errors.h"

#define DRAIN_BATCH 256

static int zmq_has_input(zp_server *s)
{
    int events = 0;
    size_t len = sizeof(events);
    if (zmq_getsockopt(s->sock, ZMQ_EVENTS, &events, &len) != 0)
        return 0;
    return (events & ZMQ_POLLIN) != 0;
}

/* Handle up to DRAIN_BATCH messages; returns 1 if more are waiting. */
static int drain(zp_server *s)
{
    for (int i = 0; i < DRAIN_BATCH; i++) {
        zp_frames m;
        if (zp_wire_frames_recv(s->sock, &m, ZMQ_DONTWAIT) != 0) {
            if (zmq_errno() != EAGAIN && zmq_errno() != EINTR)
                zp_warn("receive failed: %s", zmq_strerror(zmq_errno()));
            return zmq_has_input(s);
        }
        /* what a client sent on its attach connection before this message
         * is handled first (xport/shmhost.h) */
        if (s->shm.nconns)
            zp_shmhost_drain(&s->shm);
        zp_dispatch(s, &m);
        zp_wire_frames_close(&m);
    }
    return zmq_has_input(s);
}

/* Both sockets: the workers' (and backups') ROUTER, and a backup's link
 * to its primary; then the replication log's sends and releases. */
static void on_rwake(uv_timer_t *h)
{
    zp_server_kick(h->data);
}

/* The ROUTER (unless `router` is false), a backup's link, the log. */
static int drain_some(zp_server *s, bool router)
{
    int more = router ? drain(s) : 0;
    more |= zp_follow_check(s);
    zp_rlog_pump(s);
    if (s->repl.wake_s >= 0 && s->has_loop && !s->stopping)
        uv_timer_start(&s->rwake, on_rwake, (uint64_t)(s->repl.wake_s * 1000) + 1, 0);
    return more;
}

/* From timers, the idle handle and the ROUTER's poll handle: a backup's
 * link may hold what arrived after the follower's last receive, with no
 * new edge and, from a timer or the idle handle, no check handle before
 * the loop blocks in poll; so its ZMQ_EVENTS is read here (kick_follow,
 * from the link's own poll handle, leaves that to on_check). */
static int drain_all(zp_server *s)
{
    return drain_some(s, true) || zp_follow_pending(s);
}

static void on_idle(uv_idle_t *h)
{
    zp_server *s = h->data;
    if (!drain_all(s))
        uv_idle_stop(&s->idle);
}

void zp_server_kick(zp_server *s)
{
    if (s->stopping)
        return;
    if (drain_all(s))
        uv_idle_start(&s->idle, on_idle);
}

/* A backup's link to its primary woke the loop (an entry arrived): the
 * link and the log, not the ROUTER, which a backup's clients seldom use
 * and whose ZMQ_EVENTS on_check reads at the end of this loop turn as
 * after every turn (its own poll handle fires on its edge too). Draining
 * it here cost four system calls an entry on the replicated push's
 * critical path (docs/performance.md, "Where a replicated push waits"). */
static void kick_follow(zp_server *s)
{
    if (s->stopping)
        return;
    if (drain_some(s, false))
        uv_idle_start(&s->idle, on_idle);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    zp_server *s = h->data;
    if (status < 0) {
        zp_error("poll on the ZeroMQ socket failed: %s", uv_strerror(status));
        zp_server_stop(s);
        return;
    }
    zp_server_kick(s);
}

static void on_check(uv_check_t *h)
{
    zp_server *s = h->data;
    if (!s->stopping)
        zp_zap_pump(&s->zap);
    if (!s->stopping && (zmq_has_input(s) || zp_follow_pending(s)))
        uv_idle_start(&s->idle, on_idle);
}

static void on_tick(uv_timer_t *h)
{
    zp_server *s = h->data;
    if (s->role.start_failed) {
        zp_error("no coordination session within connect_timeout_ms = %d ms: exiting (status "
                 "%d); start ZooKeeper at %s, or check the address",
                 s->cfg.coord_connect_timeout_ms, ZP_EXIT_NOCOORD, s->cfg.coord_zookeeper);
        s->exit_status = ZP_EXIT_NOCOORD;
        zp_server_stop(s);
        return;
    }
    zp_server_kick(s);
    zp_trace_flush(s->trace);
    /* a backup snapshots nothing: its primary does (docs/replication.md) */
    if (zp_role_serves(&s->role))
        zp_persist_tick(s);
    else
        zp_persist_reap(s, 0);
    if (zp_role_serves(&s->role)) /* a backup's workers are the primary's to judge */
        zp_clock_check_lost(s);
    zp_waits_check(s);
    zp_pull_turns_check(s);
    /* the map in ZooKeeper asked first; without it, the target */
    if (zp_move_op_due(s) && !zp_zkmap_fence(s) && !zp_move_ask(s))
        zp_move_op_end_by_time(s);
}

static void on_signal(uv_signal_t *h, int signum)
{
    zp_server *s = h->data;
    zp_info("%s received: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    s->leave.signalled = true; /* a primary records its clean exit (repl/leave.c) */
    zp_server_stop(s);
}

static void on_sighup(uv_signal_t *h, int signum)
{
    (void)signum;
    zp_server *s = h->data;
    char err[512];
    if (!s->zap.enabled)
        zp_info("SIGHUP received: CURVE is off, nothing to reload");
    else if (zp_zap_reload(&s->zap, err, sizeof(err)) != 0)
        zp_error("SIGHUP: keeping the old allow-list: %s", err);
}

static void on_closed(uv_handle_t *h)
{
    zp_server *s = h->data;
    s->open_handles--;
}

static void on_http_closed(void *arg)
{
    zp_server *s = arg;
    s->open_handles--;
}

void zp_server_stop(zp_server *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    zp_follow_stop(s);
    if (!s->has_loop) {
        zp_role_stop(&s->role);
        return;
    }
    zp_shmhost_stop(&s->shm);
    uv_handle_t *handles[] = {
        (uv_handle_t *)&s->poll,     (uv_handle_t *)&s->idle,   (uv_handle_t *)&s->check,
        (uv_handle_t *)&s->tick,     (uv_handle_t *)&s->rwake,  (uv_handle_t *)&s->sigterm,
        (uv_handle_t *)&s->sigint,   (uv_handle_t *)&s->sighup, (uv_handle_t *)&s->zap.poll,
        (uv_handle_t *)&s->map_late,
    };
    for (size_t i = 0; i < sizeof(handles) / sizeof(handles[0]); i++)
        if ((handles[i] != (uv_handle_t *)&s->zap.poll || s->zap.enabled) &&
            !uv_is_closing(handles[i]))
            uv_close(handles[i], on_closed);
    if (s->http)
        zp_endpoint_stop(s, on_http_closed, s);
    /* requests stopped: a primary writes its final snapshot and the
     * clean-exit record before its session ends; otherwise the nodes go
     * now and a backup takes over at once */
    if (!zp_leave_start(s))
        zp_role_stop(&s->role);
}

/* The public key file of the servers, when named, must belong to the
 * secret key this server uses: otherwise every client would fail its
 * handshake with no reply, which is far harder to diagnose than this. */
static int check_server_public(const zp_config *cfg, const char *secret, char *err, size_t errlen)
{
    char pub[ZP_CURVE_KEY_LEN + 1], derived[ZP_CURVE_KEY_LEN + 1];
    int rc = zp_curve_read_key(cfg->curve_server_public, false, pub, err, errlen);
    if (rc != 0)
        return rc;
    if (zmq_curve_public(derived, secret) != 0 || strcmp(derived, pub) != 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "public key file %s does not belong to secret key file %s",
                             cfg->curve_server_public, cfg->curve_server_secret);
    return 0;
}

/* How long a shard waits for an address in use before it gives up. */
#define BIND_WAIT_S 5.0

/* Bind the shard's socket to bind_ep (ep as configured), waiting up to
 * BIND_WAIT_S while the address is in use: a shard restarted at once after
 * a SIGKILL may find its address still held by its predecessor's snapshot
 * writer, forked just before the kill and not yet run to the point where it
 * closes what it inherited (state/persist.c); it lets go as soon as it
 * runs. A second shard on the address fails after the wait, as before. */
static int bind_waiting(zp_server *s, const char *bind_ep, const char *ep, char *err, size_t errlen)
{
    double until = zp_now_s() + BIND_WAIT_S;
    bool waited = false;
    while (zmq_bind(s->sock, bind_ep) != 0) {
        int e = zmq_errno();
        if (e != EADDRINUSE || zp_now_s() >= until) {
            snprintf(err, errlen, "cannot bind shard %d to %s: %s%s", s->shard, ep, zmq_strerror(e),
                     waited ? " (waited for it)" : "");
            return ZEPS_ETRANSPORT;
        }
        if (!waited)
            zp_warn("%s is in use: waiting up to %.0f s for it (a process of a shard that "
                    "died may still hold it)",
                    ep, BIND_WAIT_S);
        waited = true;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    if (waited)
        zp_info("%s is free: bound", ep);
    return 0;
}

static int setup_socket(zp_server *s, char *err, size_t errlen)
{
    s->zctx = zmq_ctx_new();
    if (!s->zctx) {
        snprintf(err, errlen, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
        return ZEPS_ETRANSPORT;
    }
    const char *bind = zp_config_bind(&s->cfg, s->shard, s->replica);
    const char *ep = bind[0] ? bind : zp_config_endpoint(&s->cfg, s->shard, s->replica);
    int rc = zp_curve_check_server(&s->cfg, ep, err, errlen);
    if (rc != 0)
        return rc;
    char secret[ZP_CURVE_KEY_LEN + 1] = "";
    if (zp_curve_server_enabled(&s->cfg)) {
        rc = zp_curve_read_key(s->cfg.curve_server_secret, true, secret, err, errlen);
        if (rc == 0 && s->cfg.curve_server_public[0])
            rc = check_server_public(&s->cfg, secret, err, errlen);
        /* The handler must listen before the ROUTER takes a connection. */
        if (rc == 0)
            rc = zp_zap_open(&s->zap, s->zctx, s->cfg.curve_allow_dir, err, errlen);
        char pub[ZP_CURVE_KEY_LEN + 1];
        /* the servers' own key speaks as a tool: backups follow their primary
         * with it, and a move's source asks its target (op/move_ask.c) */
        if (rc == 0 && zmq_curve_public(pub, secret) == 0)
            zp_zap_allow_peer(&s->zap, pub);
        if (rc != 0) {
            explicit_bzero(secret, sizeof(secret));
            return rc;
        }
    }
    s->sock = zmq_socket(s->zctx, ZMQ_ROUTER);
    if (secret[0]) {
        int on = 1;
        rc = zmq_setsockopt(s->sock, ZMQ_CURVE_SERVER, &on, sizeof(on)) |
             zmq_setsockopt(s->sock, ZMQ_CURVE_SECRETKEY, secret, sizeof(secret)) |
             zmq_setsockopt(s->sock, ZMQ_ZAP_DOMAIN, "zeps", 4);
        explicit_bzero(secret, sizeof(secret));
        if (rc != 0) {
            snprintf(err, errlen, "cannot turn CURVE on: %s", zmq_strerror(zmq_errno()));
            return ZEPS_ETRANSPORT;
        }
    }
    int zero = 0, one = 1, linger = 1000;
    int64_t maxmsg = (int64_t)s->cfg.max_message_bytes;
    zmq_setsockopt(s->sock, ZMQ_SNDHWM, &zero, sizeof(zero));
    zmq_setsockopt(s->sock, ZMQ_RCVHWM, &zero, sizeof(zero));
    zmq_setsockopt(s->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof(one));
    /* a co-located client's DEALER names itself after its segment (common/bell.h):
     * its reconnect takes the route over from the connection it replaces */
    zmq_setsockopt(s->sock, ZMQ_ROUTER_HANDOVER, &one, sizeof(one));
    zmq_setsockopt(s->sock, ZMQ_LINGER, &linger, sizeof(linger));
    zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
    snprintf(s->endpoint, sizeof(s->endpoint), "%s", ep);
    char bind_ep[ZP_ENDPOINT_MAX + 16];
    zp_wire_canonical_endpoint(ep, bind_ep, sizeof(bind_ep));
    return bind_waiting(s, bind_ep, ep, err, errlen);
}

/* A request read on an attach connection: handled as a ROUTER message. */
static void on_bell(void *server, zp_frames *m)
{
    zp_dispatch(server, m);
}

/* A packet there that is not a message: an ERROR reply says why. */
static void on_bell_bad(void *server, zmq_msg_t *identity, int code, const char *text)
{
    zp_server *s = server;
    s->requests++;
    s->op_requests[0]++;
    zp_reply_error(s, identity, NULL, code, "%s", text);
}

/* Offer shared memory to co-located clients where the cluster file
 * allows it (transport = "auto"); a replicated shard does not (its log
 * forwards requests' frames to backups on other hosts). Without it the
 * shard serves over ZeroMQ alone. */
static void start_shm(zp_server *s)
{
    char why[256];
    if (strcmp(s->cfg.transport, "auto") != 0 || s->cfg.replicas > 1)
        return;
    if (zp_shmhost_start(&s->shm, &s->loop, s->shard, s->incarnation, why, sizeof(why)) != 0) {
        zp_warn("shared memory not offered: %s", why);
        return;
    }
    /* a co-located client's headers go over a unix socket too (not with CURVE: its
     * clients keep the endpoints of the cluster file) */
    char ep[sizeof(s->shm.zmq_name)];
    snprintf(ep, sizeof(ep), "ipc://@zeps-zmq-%016" PRIx64 "-%d", s->incarnation, s->shard);
    if (!s->zap.enabled && zmq_bind(s->sock, ep) == 0)
        snprintf(s->shm.zmq_name, sizeof(s->shm.zmq_name), "%s", ep);
    /* and, without CURVE, the requests themselves on the attach connection:
     * no packet there carries a CURVE key to check the rank against */
    s->shm.bell = !s->zap.enabled;
    s->shm.deliver = on_bell;
    s->shm.refuse = on_bell_bad;
    s->shm.arg = s;
}

static int setup_loop(zp_server *s, char *err, size_t errlen)
{
    int fd;
    size_t len = sizeof(fd);
    if (zmq_getsockopt(s->sock, ZMQ_FD, &fd, &len) != 0) {
        snprintf(err, errlen, "ZMQ_FD: %s", zmq_strerror(zmq_errno()));
        return ZEPS_ETRANSPORT;
    }
    int rc = uv_loop_init(&s->loop);
    if (rc != 0) {
        snprintf(err, errlen, "uv_loop_init: %s", uv_strerror(rc));
        return ZEPS_EINTERNAL;
    }
    s->has_loop = true;
    uv_poll_init(&s->loop, &s->poll, fd);
    uv_idle_init(&s->loop, &s->idle);
    uv_check_init(&s->loop, &s->check);
    uv_timer_init(&s->loop, &s->tick);
    uv_timer_init(&s->loop, &s->rwake);
    uv_timer_init(&s->loop, &s->map_late);
    uv_signal_init(&s->loop, &s->sigterm);
    uv_signal_init(&s->loop, &s->sigint);
    uv_signal_init(&s->loop, &s->sighup);
    s->open_handles = 9;
    s->poll.data = s->idle.data = s->check.data = s->tick.data = s->rwake.data = s;
    s->map_late.data = s;
    const char *late = getenv("ZEPS_FAULT_MAP_LATE_MS"); /* a test's fault hook (op/zkmap.c) */
    s->map_late_ms = late ? (unsigned)strtoul(late, NULL, 10) : 0;
    s->sigterm.data = s->sigint.data = s->sighup.data = s;
    if (s->zap.enabled) {
        if ((rc = zp_zap_start(&s->zap, &s->loop, err, errlen)) != 0)
            return rc;
        s->zap.poll.data = s;
        s->open_handles++;
    }
    uv_poll_start(&s->poll, UV_READABLE, on_poll);
    uv_check_start(&s->check, on_check);
    uv_timer_start(&s->tick, on_tick, 100, 100);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sighup, on_sighup, SIGHUP);
    if (s->cfg.metrics_listen[0]) {
        if ((rc = zp_endpoint_start(s, s->cfg.metrics_listen, err, errlen)) != 0)
            return rc;
        s->open_handles++; /* the listener, closed as one in zp_server_stop */
    }
    start_shm(s); /* last: nothing after it can fail and leave it open */
    return 0;
}

/* Free what zp_server_new_core made, and the socket if any. */
static void free_core(zp_server *s)
{
    zp_rlog_fini(&s->repl);
    zp_trace_close(&s->trace);
    zp_inject_fini(&s->inject);
    for (uint32_t i = 0; i < s->ntables; i++)
        zp_table_destroy(&s->tables[i]);
    free(s->tables);
    if (s->sock)
        zmq_close(s->sock);
    zp_zap_close(&s->zap);
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    zp_workers_fini(&s->workers);
    zp_move_end(s); /* a move in progress ends with the shard; its peer's lease aborts it */
    zp_slotmap_destroy(&s->slots);
    zp_slotmap_destroy(&s->fenced);
    free(s);
}

/* Whether a shard may join at run time (zeps-server --join) in this
 * cluster; if not, why into err (docs/elastic.md, "Adding a shard"). */
static bool join_refused(const zp_config *cfg, char *err, size_t errlen)
{
    const char *why = cfg->replicas > 1      ? "replicas > 1 (the map is not replicated)"
                      : cfg->snapshot_dir[0] ? "snapshot_dir (a set has the file's shards)"
                                             : NULL;
    if (why)
        snprintf(err, errlen,
                 "--join %s: a shard joining at run time is not built with %s (docs/elastic.md, "
                 "\"Adding a shard\")",
                 cfg->join, why);
    return why != NULL;
}

int zp_server_new_core(zp_server **out, const zp_config *cfg, int shard, zp_reply_sink sink,
                       char *err, size_t errlen)
{
    if (shard < 0 || (shard >= cfg->num_shards && !cfg->join[0]) || shard >= ZP_MAX_SHARDS) {
        snprintf(err, errlen, "shard %d is outside the cluster's %d shards (servers list of %s)",
                 shard, cfg->num_shards, cfg->path);
        return ZEPS_EINVAL;
    }
    const zp_consistency_ops *cons = zp_registry_find(cfg->consistency);
    if (!cons) {
        snprintf(err, errlen, "consistency '%s' is not available in this build", cfg->consistency);
        return ZEPS_ECONFIG;
    }
    if (shard >= cfg->num_shards && join_refused(cfg, err, errlen))
        return ZEPS_ECONFIG;
    zp_server *s = zp_alloc_zeroed(1, sizeof(*s));
    s->cfg = *cfg;
    s->shard = shard;
    s->nshards = cfg->num_shards;
    s->nworkers = cfg->num_workers;
    s->cons = cons;
    s->sink = sink;
    zp_role_init(&s->role, cfg, shard, 0);
    zp_rlog_init(&s->repl, cfg);
    s->follow.apply = zp_dispatch_entry;
    zp_xfer_in_init(&s->follow.xin);
    s->follow.kick = kick_follow;
    s->barrier_gen = 1;
    s->start_s = zp_now_s();
    s->persist.requested_cut = -1;
    s->restored_clock = -1;
    /* A new incarnation per start: time and pid mixed, so a restarted shard
     * is told apart from the one before it. */
    s->incarnation = zp_rng_mix64(zp_now_ns() ^ ((uint64_t)getpid() << 32)) | 1u;
    zp_quota_init(&s->quota, cfg);
    zp_ratelimit_init(&s->logs.refused, "refused", 10, 1.0);
    zp_ratelimit_init(&s->logs.joined, "HELLOs", 10, 1.0);
    zp_ratelimit_init(&s->logs.left, "BYEs", 10, 1.0);
    zp_ratelimit_init(&s->logs.send, "failed sends", 10, 1.0);
    zp_workers_init(&s->workers, s->nworkers);
    int rc = zp_slotmap_start(&s->slots, cfg->slot_map, cfg->num_shards, err, errlen);
    if (rc == 0 && cfg->trace_dir[0])
        rc = zp_trace_open(&s->trace, cfg->trace_dir, shard, err, errlen);
    if (rc == 0)
        rc = zp_inject_init(&s->inject, cfg, err, errlen);
    if (rc == 0 && cfg->tier_dir[0]) /* never made: a missing one is a disk not mounted */
        rc = zp_tier_dir_check(cfg->tier_dir, err, errlen);
    if (rc != 0) {
        free_core(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* A loop whose set-up failed part way: close what it holds (the handles
 * initialised so far, a metrics listener already closing) and the loop. */
static void close_loop(zp_server *s)
{
    uv_walk(&s->loop, close_handle, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    s->has_loop = false;
}

/* The replication log's base after a restore at start: a bsp cut's set
 * (every replica's file of one cut holds the same bits), else the restored
 * file's own identity (set, writer, creation time). Replicas that restored
 * different states (a point-in-time set of one writer, an older set,
 * nothing) then never follow one another's log without a whole-state
 * transfer. */
static uint64_t restored_base(const zp_server *s)
{
    if (s->restored_clock >= 0)
        return s->restored_set + 1;
    uint64_t id = zp_rng_mix64(s->restored_by ^ zp_rng_mix64(s->restored_created_ns));
    return zp_rng_mix64(s->restored_set ^ id) | 1u;
}

/* The role's in-sync rule is the replication log's. */
static bool in_sync(void *arg, const char *member, bool in_set)
{
    return zp_rlog_in_sync(arg, member, in_set);
}

int zp_server_new(zp_server **out, const zp_config *cfg, int shard, int replica, char *err,
                  size_t errlen)
{
    if (replica < 0 || replica >= cfg->replicas) {
        snprintf(err, errlen, "replica %d is outside the %d replica(s) of each shard in %s",
                 replica, cfg->replicas, cfg->path);
        return ZEPS_EINVAL;
    }
    zp_server *s;
    int rc = zp_server_new_core(&s, cfg, shard, (zp_reply_sink){0}, err, errlen);
    if (rc != 0)
        return rc;
    s->replica = replica;
    zp_role_init(&s->role, cfg, shard, replica);
    if (s->repl.on) {
        s->role.in_sync = in_sync;
        s->role.in_sync_arg = s;
        s->role.slots_heard = zp_zkmap_heard; /* the map in ZooKeeper (op/zkmap.c) */
        s->role.slots_arg = s;
    }
    char host[128];
    int port;
    /* a bad metrics_listen is refused before anything is restored or bound */
    rc = s->cfg.metrics_listen[0] ? zp_http_parse_listen(s->cfg.metrics_listen, "metrics_listen",
                                                         host, sizeof(host), &port, err, errlen)
                                  : 0;
    if (rc == 0)
        rc = zp_restore_newest(s, err, errlen);
    if (rc == 0 && s->restored_by)
        s->repl.base = restored_base(s); /* the log starts from that state */
    if (rc == 0)
        rc = setup_socket(s, err, errlen);
    if (rc == 0) {
        s->sink = (zp_reply_sink){.send = zp_reply_socket_send, .arg = s};
        rc = setup_loop(s, err, errlen);
    }
    char restored[ZP_COORD_SNAP_MAX] = ""; /* what the member node advertises */
    if (rc == 0 && s->restored_by)
        zp_coord_snapshot_name(restored, sizeof(restored), s->restored_set, s->restored_by,
                               s->restored_created_ns);
    if (rc == 0)
        rc = zp_role_start(&s->role, &s->loop, &s->cfg,
                           zp_config_endpoint(&s->cfg, s->shard, s->replica), s->incarnation,
                           restored, err, errlen);
    if (rc != 0) {
        if (s->has_loop) /* setup_loop failed after the loop began (the metrics port taken) */
            close_loop(s);
        free_core(s);
        return rc;
    }
    *out = s;
    return 0;
}

int zp_server_run(zp_server *s)
{
    zp_info("shard %d/%d%s serving on %s: %s, %d workers, incarnation %" PRIx64 ", BLAS %s",
            s->shard, s->nshards, s->cfg.replicas > 1 ? " (replicated)" : "", s->endpoint,
            s->cons->name, s->nworkers, s->incarnation, zp_mathenv_blas_core());
    zp_info("limits: %u tables, %" PRIu64 " rows, %" PRIu64 " MiB (max_tables, max_rows, "
            "max_memory_mb; memory %" PRIu64 " MiB from %s)",
            s->quota.max_tables, s->quota.max_rows, s->quota.max_bytes >> 20, s->quota.memory >> 20,
            s->quota.memory_from);
    zp_server_kick(s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    if (s->exit_status)
        return s->exit_status;
    if (s->leave.final_done) /* written before the session ended (repl/leave.c) */
        return s->leave.final_rc == 0 ? ZP_EXIT_OK : ZP_EXIT_FAILED;
    if (!zp_role_serves(&s->role))
        return ZP_EXIT_OK; /* a backup writes no final snapshot */
    return zp_persist_final(s) == 0 ? ZP_EXIT_OK : ZP_EXIT_FAILED;
}

void zp_server_destroy(zp_server **sp)
{
    zp_server *s = *sp;
    if (!s)
        return;
    if (s->has_loop) {
        if (!s->stopping)
            zp_server_stop(s);
        while (s->open_handles > 0)
            uv_run(&s->loop, UV_RUN_ONCE);
        uv_run(&s->loop, UV_RUN_DEFAULT); /* the coordination session's handles close */
        uv_loop_close(&s->loop);
    }
    free_core(s);
    *sp = NULL;
}
