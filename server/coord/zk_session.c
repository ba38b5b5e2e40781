/*
 * zk_session.c - a ZooKeeper session on a libuv loop; see zk_session.h.
 *
 * After every call into the client (zookeeper_process, or requests queued
 * from outside it) `pump` asks zookeeper_interest again and re-arms the
 * poll and the timer. The client may close its socket and open a new one
 * with the same number between two calls (a reconnect), so the poll is
 * stopped and started each time: libuv then registers the descriptor
 * afresh instead of trusting a registration the kernel dropped at close.
 * A descriptor with another number gets a new poll handle.
 *
 * The client's own log lines go to zp_debug (it logs every failed connect
 * while the service is down); this file says what matters at info/warn:
 * connected, lost, expired, unreachable for how long.
 */
#include "zk_session.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "now.h"
#include "zeps_errors.h"

struct zp_zk_session {
    uv_loop_t *loop;
    char *hosts;
    int timeout_ms, connect_timeout_ms;
    zhandle_t *zh;
    uv_poll_t *poll; /* on the client's socket, or NULL */
    int poll_fd;
    uv_timer_t timer;    /* the client's next deadline (pings, reconnects, timeouts) */
    uv_timer_t deadline; /* UNREACHABLE after connect_timeout_ms without a session */
    int open_handles;
    bool in_process, expired, closing;
    bool had_session; /* this handle was connected once: a new CONNECTED is a resume */
    bool connected, unreachable_said;
    double down_since; /* when the outage began (or the session was started) */
    zp_coord_stats st;
    zp_zk_session_event ev;
    void *arg;
    void (*closed)(void *arg);
    void *closed_arg;
};

static void pump(zp_zk_session *s);
static void arm_deadline(zp_zk_session *s);

static void log_line(const char *message)
{
    zp_debug("zookeeper client: %s", message);
}

static void on_handle_closed(uv_handle_t *h)
{
    zp_zk_session *s = h->data;
    if (h != (uv_handle_t *)&s->timer && h != (uv_handle_t *)&s->deadline)
        free(h); /* a poll handle */
    if (--s->open_handles > 0)
        return;
    void (*closed)(void *) = s->closed;
    void *arg = s->closed_arg;
    free(s->hosts);
    free(s);
    if (closed)
        closed(arg);
}

static void drop_poll(zp_zk_session *s)
{
    if (!s->poll)
        return;
    uv_close((uv_handle_t *)s->poll, on_handle_closed);
    s->poll = NULL;
    s->poll_fd = -1;
}

static void emit(zp_zk_session *s, zp_coord_session ev, const char *why)
{
    if (!s->closing)
        s->ev(s->arg, ev, why);
}

/* The global watcher: session state changes only (node watches have
 * their own watcher functions). Runs inside zookeeper_process. */
static void on_state(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)path;
    zp_zk_session *s = ctx;
    if (type != ZOO_SESSION_EVENT || s->closing)
        return;
    char why[160];
    if (state == ZOO_CONNECTED_STATE) {
        bool resumed = s->had_session;
        double down = zp_now_s() - s->down_since;
        s->had_session = s->connected = true;
        s->unreachable_said = false;
        uv_timer_stop(&s->deadline);
        snprintf(why, sizeof(why), "session %llx, timeout %d ms, after %.2f s",
                 (unsigned long long)zoo_client_id(s->zh)->client_id, zoo_recv_timeout(s->zh),
                 down);
        if (!resumed)
            s->st.sessions++;
        zp_info("ZooKeeper %s: %s", resumed ? "session resumed" : "connected", why);
        emit(s, resumed ? ZP_COORD_RESUMED : ZP_COORD_CONNECTED, why);
    } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
        if (!s->connected)
            return;
        s->connected = false;
        s->st.suspensions++;
        arm_deadline(s);
        snprintf(why, sizeof(why),
                 "connection to %s lost; the session expires unless it is back within %d ms",
                 s->hosts, s->timeout_ms);
        zp_warn("ZooKeeper: %s", why);
        emit(s, ZP_COORD_SUSPENDED, why);
    } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        s->expired = true;
        s->connected = false;
        s->st.expirations++;
        snprintf(why, sizeof(why), "%s",
                 state == ZOO_AUTH_FAILED_STATE ? "authentication failed"
                                                : "the session expired: its nodes are gone");
        zp_warn("ZooKeeper: %s; starting a new session", why);
        emit(s, ZP_COORD_EXPIRED, why);
    }
}

static void on_deadline(uv_timer_t *t)
{
    zp_zk_session *s = t->data;
    if (s->connected || s->unreachable_said)
        return;
    s->unreachable_said = true;
    char why[200];
    snprintf(why, sizeof(why), "no session with ZooKeeper at %s for %.1f s (connect timeout %d ms)",
             s->hosts, zp_now_s() - s->down_since, s->connect_timeout_ms);
    zp_warn("%s; no failover until it answers", why);
    emit(s, ZP_COORD_UNREACHABLE, why);
}

static void arm_deadline(zp_zk_session *s)
{
    s->down_since = zp_now_s();
    s->unreachable_said = false;
    uv_timer_start(&s->deadline, on_deadline, (uint64_t)s->connect_timeout_ms, 0);
}

static int open_handle(zp_zk_session *s, char *err, size_t errlen)
{
    s->had_session = false;
    s->expired = false;
    s->zh =
        zookeeper_init2(s->hosts, on_state, s->timeout_ms, NULL, s, ZOO_NO_LOG_CLIENTENV, log_line);
    if (!s->zh) {
        snprintf(err, errlen, "ZooKeeper client refused hosts '%s': %s", s->hosts, strerror(errno));
        return errno == EINVAL ? ZEPS_EINVAL : ZEPS_EIO;
    }
    /* the client would resolve the hosts again at every readiness check, on
     * this loop's thread: a DNS server that stopped answering would stall
     * the shard. Only on connection loss, then. */
    zoo_set_servers_resolution_delay(s->zh, -1);
    return 0;
}

/* The old session is gone: close its handle (its pending completions run
 * now, with an error) and begin a new one. */
static void renew(zp_zk_session *s)
{
    drop_poll(s);
    s->in_process = true; /* the completions it runs may queue nothing on a dead handle */
    zookeeper_close(s->zh);
    s->in_process = false;
    s->zh = NULL;
    char err[256];
    if (open_handle(s, err, sizeof(err)) != 0) {
        zp_error("%s", err); /* hosts were accepted once: only memory can fail here */
        abort();
    }
    arm_deadline(s);
}

static void on_timer(uv_timer_t *t);
static void on_poll(uv_poll_t *h, int status, int events);

static void set_poll(zp_zk_session *s, int fd, int interest)
{
    if (s->poll && fd != s->poll_fd)
        drop_poll(s);
    if (fd < 0)
        return;
    if (!s->poll) {
        s->poll = zp_alloc(sizeof(*s->poll));
        if (uv_poll_init_socket(s->loop, s->poll, fd) != 0) {
            free(s->poll); /* never started: no close needed */
            s->poll = NULL;
            return; /* the timer retries */
        }
        s->poll->data = s;
        s->poll_fd = fd;
        s->open_handles++;
    } else {
        uv_poll_stop(s->poll);
    }
    int ev = ((interest & ZOOKEEPER_READ) ? UV_READABLE : 0) |
             ((interest & ZOOKEEPER_WRITE) ? UV_WRITABLE : 0);
    if (ev)
        uv_poll_start(s->poll, ev, on_poll);
}

static void pump(zp_zk_session *s)
{
    if (s->closing || s->in_process)
        return;
    if (s->expired)
        renew(s);
    int fd = -1, interest = 0;
    struct timeval tv = {0, 0};
    int rc = zookeeper_interest(s->zh, &fd, &interest, &tv);
    if (rc == ZINVALIDSTATE && zoo_state(s->zh) == ZOO_EXPIRED_SESSION_STATE && !s->expired) {
        /* expired without the event reaching us (it comes through process) */
        s->expired = true;
    }
    set_poll(s, rc == ZOK ? fd : -1, interest);
    uint64_t ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)(tv.tv_usec + 999) / 1000;
    /* no socket: the client waits before its next connect; never spin */
    if (fd < 0 && ms < 10)
        ms = 10;
    uv_timer_start(&s->timer, on_timer, ms, 0);
}

static void process(zp_zk_session *s, int events)
{
    s->in_process = true;
    zookeeper_process(s->zh, events);
    s->in_process = false;
    pump(s);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    zp_zk_session *s = h->data;
    int zev = status < 0 ? ZOOKEEPER_READ | ZOOKEEPER_WRITE
                         : ((events & UV_READABLE) ? ZOOKEEPER_READ : 0) |
                               ((events & UV_WRITABLE) ? ZOOKEEPER_WRITE : 0);
    process(s, zev);
}

static void on_timer(uv_timer_t *t)
{
    process(t->data, 0);
}

int zp_zk_session_new(zp_zk_session **out, uv_loop_t *loop, const char *hosts, int timeout_ms,
                      int connect_timeout_ms, zp_zk_session_event ev, void *arg, char *err,
                      size_t errlen)
{
    zp_zk_session *s = zp_alloc_zeroed(1, sizeof(*s));
    s->loop = loop;
    s->hosts = zp_alloc_strdup(hosts);
    s->timeout_ms = timeout_ms;
    s->connect_timeout_ms = connect_timeout_ms;
    s->ev = ev;
    s->arg = arg;
    s->poll_fd = -1;
    int rc = open_handle(s, err, errlen);
    if (rc != 0) {
        free(s->hosts);
        free(s);
        return rc;
    }
    uv_timer_init(loop, &s->timer);
    uv_timer_init(loop, &s->deadline);
    s->timer.data = s->deadline.data = s;
    s->open_handles = 2;
    arm_deadline(s);
    pump(s);
    *out = s;
    return 0;
}

zhandle_t *zp_zk_session_handle(zp_zk_session *s)
{
    return s->zh;
}

void zp_zk_session_kick(zp_zk_session *s)
{
    pump(s);
}

int64_t zp_zk_session_id(zp_zk_session *s)
{
    return s->connected ? zoo_client_id(s->zh)->client_id : 0;
}

int zp_zk_session_timeout(zp_zk_session *s)
{
    return s->connected ? zoo_recv_timeout(s->zh) : 0;
}

void zp_zk_session_stats(zp_zk_session *s, zp_coord_stats *st)
{
    *st = s->st;
    st->connected = s->connected;
    st->disconnected_s = s->connected ? 0 : zp_now_s() - s->down_since;
}

void zp_zk_session_close(zp_zk_session **sp, void (*closed)(void *arg), void *arg)
{
    zp_zk_session *s = *sp;
    if (!s)
        return;
    *sp = NULL;
    s->closing = true;
    s->closed = closed;
    s->closed_arg = arg;
    drop_poll(s);
    /* sends the close request when connected (the service then deletes the
     * session's ephemeral nodes at once) and runs pending completions */
    zookeeper_close(s->zh);
    s->zh = NULL;
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->deadline, on_handle_closed);
}
