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
 */
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "client.h"
#include "curve.h"
#include "log.h"
#include "shard.h"

/* Watch shard k's socket for failed handshakes (CURVE only). */
static int monitor_open(zeps_client *c, int k)
{
    zp_shard *sh = &c->shards[k];
    char ep[96];
    snprintf(ep, sizeof(ep), "inproc://zeps-monitor-%p-%d-%u", (void *)c, k, ++c->monitor_gen);
    int zero = 0;
    if (zmq_socket_monitor(sh->sock, ep,
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0)
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
    if (c->curve)
        c->items[c->nshards + k].socket = NULL;
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
    if (c->curve &&
        (zp_curve_apply_client(sh->sock, c->curve_server, c->curve_public, c->curve_secret) != 0 ||
         monitor_open(c, k) != 0)) {
        zmq_close(sh->sock);
        sh->sock = NULL;
        return -1;
    }
    if (zmq_connect(sh->sock, sh->endpoint) != 0) {
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
