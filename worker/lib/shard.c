/*
 * shard.c - libzeps: one DEALER socket per shard, the bottom of the library.
 *
 * A shard's socket has no send or receive limits (the engine bounds what is
 * in flight), linger 0 and a reconnect interval of 100 ms to 2 s. With CURVE
 * keys the socket authenticates to the shard, and a monitor (an inproc PAIR
 * fed by zmq_socket_monitor) reports failed handshakes: a shard that refuses
 * the key answers nothing else, and the engine (req.c) wants to say so at
 * once instead of timing out. This file only opens, closes and reads; what a
 * handshake failure means for requests is decided by req.c.
 *
 * In a replicated cluster (c->replicas >= 2) the same monitor also reports
 * a connection that closes or is refused (ZMQ_EVENT_DISCONNECTED,
 * ZMQ_EVENT_CONNECT_RETRIED), and ZMTP heartbeats close a connection whose
 * peer stopped answering without closing it (a machine gone): a dead
 * primary is then noticed in about a second, not after a request timeout
 * (failover.c decides what follows). With one replica per shard neither is
 * set up: no monitor without CURVE, no heartbeats.
 */
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "client.h"
#include "curve.h"
#include "log.h"
#include "shard.h"

/* ZMTP heartbeats on a replicated shard's socket: a PING every interval; no
 * traffic at all for the timeout closes the connection. Generous against a
 * busy peer (any message received counts as an answer, and libzmq answers
 * PINGs on its I/O thread even while the shard's loop is busy), short
 * against a machine that vanished. */
#define HEARTBEAT_IVL_MS     500
#define HEARTBEAT_TIMEOUT_MS 1500

/* Whether shard sockets have a monitor: CURVE, or a replicated cluster. */
static int monitored(const zeps_client *c)
{
    return c->curve || c->replicas >= 2;
}

/* Watch shard k's socket: failed handshakes (CURVE), lost and refused
 * connections (replicated clusters). */
static int monitor_open(zeps_client *c, int k)
{
    zp_shard *sh = &c->shards[k];
    char ep[96];
    snprintf(ep, sizeof(ep), "inproc://zeps-monitor-%p-%d-%u", (void *)c, k, ++c->monitor_gen);
    int zero = 0, events = 0;
    if (c->curve)
        events |= ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                  ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    if (c->replicas >= 2)
        events |= ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED;
    if (zmq_socket_monitor(sh->sock, ep, events) != 0)
        return -1;
    sh->monitor = zmq_socket(c->zctx, ZMQ_PAIR);
    if (!sh->monitor)
        return -1;
    zmq_setsockopt(sh->monitor, ZMQ_LINGER, &zero, sizeof(zero));
    if (zmq_connect(sh->monitor, ep) != 0) {
        zmq_close(sh->monitor);
        sh->monitor = NULL;
        return -1;
    }
    c->items[c->nshards + k].socket = sh->monitor;
    c->items[c->nshards + k].events = ZMQ_POLLIN;
    return 0;
}

static void monitor_close(zeps_client *c, int k)
{
    if (c->shards[k].monitor)
        zmq_close(c->shards[k].monitor);
    c->shards[k].monitor = NULL;
    if (monitored(c)) {
        c->items[c->nshards + k].socket = NULL;
        c->items[c->nshards + k].fd = -1; /* not stdin: zmq_poll polls fd 0 */
    }
}

int zp_shard_open(zeps_client *c, int k)
{
    zp_shard *sh = &c->shards[k];
    sh->sock = zmq_socket(c->zctx, ZMQ_DEALER);
    if (!sh->sock)
        return -1;
    int zero = 0;
    int64_t nolimit = -1;
    int reconnect = 100, reconnect_max = 2000;
    zmq_setsockopt(sh->sock, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(sh->sock, ZMQ_SNDHWM, &zero, sizeof(zero));
    zmq_setsockopt(sh->sock, ZMQ_RCVHWM, &zero, sizeof(zero));
    zmq_setsockopt(sh->sock, ZMQ_MAXMSGSIZE, &nolimit, sizeof(nolimit));
    zmq_setsockopt(sh->sock, ZMQ_RECONNECT_IVL, &reconnect, sizeof(reconnect));
    zmq_setsockopt(sh->sock, ZMQ_RECONNECT_IVL_MAX, &reconnect_max, sizeof(reconnect_max));
    if (c->replicas >= 2) {
        int ivl = HEARTBEAT_IVL_MS, timeout = HEARTBEAT_TIMEOUT_MS;
        zmq_setsockopt(sh->sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof(ivl));
        zmq_setsockopt(sh->sock, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof(timeout));
    }
    if (sh->route_len) /* the shard's route for a reply that is not a packet */
        zmq_setsockopt(sh->sock, ZMQ_ROUTING_ID, sh->route, sh->route_len);
    if ((c->curve &&
         zp_curve_apply_client(sh->sock, c->curve_server, c->curve_public, c->curve_secret) != 0) ||
        (monitored(c) && monitor_open(c, k) != 0)) {
        zmq_close(sh->sock);
        sh->sock = NULL;
        return -1;
    }
    if (zmq_connect(sh->sock, sh->fast[0] ? sh->fast : sh->endpoint) != 0) {
        monitor_close(c, k);
        zmq_close(sh->sock);
        sh->sock = NULL;
        return -1;
    }
    c->items[k].socket = sh->sock;
    c->items[k].events = ZMQ_POLLIN;
    return 0;
}

void zp_shard_close(zeps_client *c, int k)
{
    monitor_close(c, k);
    if (c->shards[k].sock)
        zmq_close(c->shards[k].sock);
    c->shards[k].sock = NULL;
}

void zp_shard_reset(zeps_client *c, int k)
{
    zp_shard_close(c, k);
    if (zp_shard_open(c, k) != 0)
        zp_warn("cannot reconnect to shard %d at %s: %s", k, c->shards[k].endpoint,
                zmq_strerror(zmq_errno()));
}

void zp_shard_move(zeps_client *c, int k, const char *endpoint)
{
    snprintf(c->shards[k].endpoint, sizeof(c->shards[k].endpoint), "%s", endpoint);
    zp_shard_reset(c, k);
}

void *zp_shard_probe_open(zeps_client *c, const char *endpoint)
{
    void *s = zmq_socket(c->zctx, ZMQ_DEALER);
    if (!s)
        return NULL;
    int zero = 0, reconnect = 100;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &reconnect, sizeof(reconnect));
    if ((c->curve &&
         zp_curve_apply_client(s, c->curve_server, c->curve_public, c->curve_secret) != 0) ||
        zmq_connect(s, endpoint) != 0) {
        zmq_close(s);
        return NULL;
    }
    return s;
}

int zp_shard_monitor_read(zeps_client *c, int k, uint16_t *event, uint32_t *value)
{
    zp_shard *sh = &c->shards[k];
    zmq_msg_t ev, addr;
    if (!sh->monitor)
        return 0;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, sh->monitor, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return 0;
    }
    *event = 0;
    *value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), 2);
        memcpy(value, (char *)zmq_msg_data(&ev) + 2, 4);
    }
    int more = zmq_msg_more(&ev);
    zmq_msg_close(&ev);
    if (more) {
        zmq_msg_init(&addr);
        zmq_msg_recv(&addr, sh->monitor, ZMQ_DONTWAIT);
        zmq_msg_close(&addr);
    }
    return 1;
}
