/*
 * ctl_probe.c - `zepsctl status` without libzeps' HELLO: STATS sent straight
 * to each shard on its own DEALER socket, so a probe of shard i waits on no
 * other shard and a failure names every shard that did not answer. With
 * CURVE each socket has a monitor: a shard that refuses our key sends
 * nothing but the handshake error, and the monitor says so at once instead
 * of the probe waiting out its timeout.
 */
#include "ctl_probe.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "alloc.h"
#include "ctl_mover.h"
#include "now.h"
#include "wire.h"
#include "zeps.h"
#include "zeps.pb-c.h"

/* Keep the packed ShardStats of shard `i`'s STATS reply `h` in *a, after
 * checking it is the shard the cluster file says. */
static void take_reply(const zp_config *cfg, int i, const Zeps__Header *h, answer *a)
{
    if (h->op == ZEPS__OP__ERROR) {
        snprintf(a->why, sizeof(a->why), "answered with an error: %s",
                 h->error_text && *h->error_text ? h->error_text : zeps_strerror(h->error));
    } else if (h->op != ZEPS__OP__STATS || !h->stats) {
        snprintf(a->why, sizeof(a->why), "answered STATS with %s and no statistics",
                 zp_wire_op_name(h->op));
    } else if (h->stats->shard != (uint32_t)i ||
               h->stats->num_shards != (uint32_t)cfg->num_shards) {
        snprintf(a->why, sizeof(a->why), "answered as shard %u of %u, not %d of %d",
                 h->stats->shard, h->stats->num_shards, i, cfg->num_shards);
    } else {
        a->len = zeps__shard_stats__get_packed_size(h->stats);
        a->buf = zp_alloc(a->len ? a->len : 1);
        zeps__shard_stats__pack(h->stats, a->buf);
    }
}

/* With CURVE, a PAIR socket fed by a monitor of `s` that reports refused
 * handshakes (NULL without keys or on failure: the probe then times out). */
static void *monitor_open(void *ctx, void *s, int k)
{
    char ep[64];
    snprintf(ep, sizeof(ep), "inproc://zepsctl-probe-%d", k);
    int zero = 0;
    void *m = NULL;
    if (zmq_socket_monitor(s, ep, ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) == 0 &&
        (m = zmq_socket(ctx, ZMQ_PAIR)) != NULL) {
        zmq_setsockopt(m, ZMQ_LINGER, &zero, sizeof(zero));
        if (zmq_connect(m, ep) != 0) {
            zmq_close(m);
            m = NULL;
        }
    }
    return m;
}

/* Read a monitor event: true (and why in *a) if the shard refused our key. */
static bool probe_refused(void *mon, answer *a)
{
    zmq_msg_t ev;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0)
        return zmq_msg_close(&ev), false;
    uint16_t event = 0;
    uint32_t value = 0;
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(&event, zmq_msg_data(&ev), 2);
        memcpy(&value, (char *)zmq_msg_data(&ev) + 2, 4);
    }
    while (zmq_msg_more(&ev) && zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) >= 0)
        ; /* the address frame */
    zmq_msg_close(&ev);
    if (event != ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return false;
    snprintf(a->why, sizeof(a->why),
             "refused our key (ZAP status %u): add its .pub file to the server's "
             "curve_allow_dir",
             value);
    a->refused = true;
    return true;
}

/* A DEALER to `endpoint` that has sent STATS; *mon its monitor (CURVE). */
static void *probe_open(void *ctx, const char *endpoint, const zp_curve_client_keys *keys, int k,
                        void **mon)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    *mon = NULL;
    if (!s)
        return NULL;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    if (keys->server_public[0] &&
        (zp_curve_apply_client(s, keys->server_public, keys->client_public, keys->client_secret) ||
         !(*mon = monitor_open(ctx, s, k)))) {
        zmq_close(s);
        return NULL;
    }
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__STATS;
    h.req_id = 1;
    h.rank = ZEPS_RANK_TOOL;
    if (zmq_connect(s, endpoint) != 0 || zp_wire_send_header(s, &h, ZMQ_DONTWAIT) != 0) {
        if (*mon)
            zmq_close(*mon);
        *mon = NULL;
        zmq_close(s);
        return NULL;
    }
    return s;
}

/* Close shard k's probe socket and its monitor (items[n + k]). */
static void probe_close(zmq_pollitem_t *items, int n, int k)
{
    zmq_close(items[k].socket);
    if (items[n + k].socket)
        zmq_close(items[n + k].socket);
    items[k].socket = items[n + k].socket = NULL;
}

void zp_ctl_probe(const zp_config *cfg, const zp_curve_client_keys *keys, int first, int n,
                  int replica, double deadline, int timeout_ms, answer *a)
{
    void *ctx = zmq_ctx_new();
    zmq_pollitem_t *items = zp_alloc_zeroed(2 * (size_t)n, sizeof(*items));
    for (int k = 0; k < n; k++) {
        const char *ep = zp_config_endpoint(cfg, first + k, replica);
        items[k].socket = ctx ? probe_open(ctx, ep, keys, k, &items[n + k].socket) : NULL;
        items[k].events = items[n + k].events = ZMQ_POLLIN;
        if (!items[k].socket)
            snprintf(a[k].why, sizeof(a[k].why), "cannot connect: %s", zmq_strerror(zmq_errno()));
    }
    for (int left = n; left > 0 && zp_now_s() < deadline;) {
        long ms = (long)((deadline - zp_now_s()) * 1e3) + 1;
        if (zmq_poll(items, 2 * n, ms > 0 ? ms : 0) < 0)
            break;
        for (int k = 0; k < n; k++) {
            zp_frames m;
            if (items[n + k].socket && (items[n + k].revents & ZMQ_POLLIN) &&
                probe_refused(items[n + k].socket, &a[k])) {
                probe_close(items, n, k);
                left--;
            }
            if (!items[k].socket || !(items[k].revents & ZMQ_POLLIN) ||
                zp_wire_frames_recv(items[k].socket, &m, ZMQ_DONTWAIT) != 0)
                continue;
            Zeps__Header *h = m.n >= 1 ? zp_wire_unpack_header(&m.f[0]) : NULL;
            if (h)
                take_reply(cfg, first + k, h, &a[k]);
            else
                snprintf(a[k].why, sizeof(a[k].why), "sent a reply that is not a zeps header");
            zeps__header__free_unpacked(h, NULL);
            zp_wire_frames_close(&m);
            probe_close(items, n, k);
            left--;
        }
    }
    for (int k = 0; k < n; k++) {
        if (items[k].socket) {
            snprintf(a[k].why, sizeof(a[k].why), "did not answer within %.1f s", timeout_ms / 1e3);
            probe_close(items, n, k);
        }
    }
    free(items);
    if (ctx)
        zmq_ctx_term(ctx);
}

/* STATS to joined shard k of mover m, into *a. */
static void ask_joined(zp_mover *m, int k, answer *a)
{
    snprintf(a->ep, sizeof(a->ep), "%s", zp_ctl_mover_endpoint(m, k));
    Zeps__Header h, *rep;
    zeps__header__init(&h);
    h.op = ZEPS__OP__STATS;
    if (zp_ctl_mover_rpc(m, k, &h, NULL, 0, &rep, NULL) != 0) {
        snprintf(a->why, sizeof(a->why), "%s", zp_ctl_mover_err(m));
        return;
    }
    if (!rep->stats)
        snprintf(a->why, sizeof(a->why), "answered STATS with no statistics");
    else if (rep->stats->shard != (uint32_t)k)
        snprintf(a->why, sizeof(a->why), "answered as shard %u, not %d", rep->stats->shard, k);
    else {
        a->len = zeps__shard_stats__get_packed_size(rep->stats);
        a->buf = zp_alloc(a->len ? a->len : 1);
        zeps__shard_stats__pack(rep->stats, a->buf);
    }
    zeps__header__free_unpacked(rep, NULL);
}

int zp_ctl_probe_joined(const char *conf, int timeout_ms, answer *file, int nfile, answer *a,
                        int max)
{
    zp_mv_opts o;
    zp_ctl_mover_opts_default(&o); /* .joined: the mover learns them */
    o.conf = conf;
    o.timeout_ms = timeout_ms;
    zp_mover *m = NULL;
    char err[1024];
    if (zp_ctl_mover_new(&m, &o, err, sizeof(err)) != 0)
        return 0; /* the file's shards' own answers say what is wrong */
    int base = zp_ctl_mover_base(m), n = zp_ctl_mover_shards(m) - base;
    n = n < max ? n : max;
    for (int k = 0; k < nfile && k < base; k++)
        file[k].retired = zp_ctl_mover_retired(m, k);
    for (int j = 0; j < n; j++) {
        a[j].retired = zp_ctl_mover_retired(m, base + j);
        if (a[j].retired) /* it may be stopped for good: not asked */
            snprintf(a[j].ep, sizeof(a[j].ep), "%s", zp_ctl_mover_endpoint(m, base + j));
        else
            ask_joined(m, base + j, &a[j]);
    }
    zp_ctl_mover_destroy(&m);
    return n;
}
