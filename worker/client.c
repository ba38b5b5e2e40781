/*
 * client.c - libzeps: the client side of the zeps protocol (see zeps.h).
 *
 * One DEALER socket per shard. A request (zeps_req) is cut into one
 * sub-request per shard it touches; all of them are sent at once and
 * collected in zeps_wait(), which polls every shard socket, matches replies
 * by request id, and resends what has been unanswered for the request
 * timeout. Resends go out on the same socket (ZeroMQ reconnects by itself),
 * with the same sequence number, so the server recognises a duplicate and
 * never applies it twice. A pull or barrier the server parks is kept alive
 * by its PARKED answers to those resends, so a long BSP wait is not mistaken
 * for a dead server, while a server that answers nothing fails the request
 * with ZEPS_ETIMEDOUT after max_retries.
 *
 * Push payloads are handed to ZeroMQ without copying; a counter in the
 * request drops as ZeroMQ releases each frame, and zeps_wait() returns only
 * when it is zero, so the caller may reuse its buffer afterwards. When a
 * request fails, the shard's socket is closed (linger 0) and opened again,
 * which makes ZeroMQ drop and release whatever it still queued.
 *
 * With CURVE keys each DEALER authenticates to the shard and encrypts its
 * traffic. A shard that refuses the key answers the handshake with an error
 * and nothing else, so each socket then also has a monitor (an inproc PAIR
 * fed by zmq_socket_monitor) that reports ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
 * the requests waiting on that shard fail at once with ZEPS_ETRANSPORT and a
 * message that says what to fix, instead of timing out after every retry.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "config.h"
#include "curve.h"
#include "log.h"
#include "util.h"
#include "wire.h"
#include "zeps.h"
#include "client_internal.h"


int zp_fail(zeps_client *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    return code;
}

const char *zeps_last_error(const zeps_client *c)
{
    return c ? c->err : "";
}

/* --- sockets --- */

/* Watch shard k's socket for failed handshakes (CURVE only). */
static int monitor_open(zeps_client *c, int k)
{
    zeps_shard *sh = &c->shards[k];
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

static void monitor_close(zeps_client *c, int k);

static int shard_open(zeps_client *c, int k)
{
    zeps_shard *sh = &c->shards[k];
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
        zmq_close(sh->sock);
        sh->sock = NULL;
        return -1;
    }
    c->items[k].socket = sh->sock;
    c->items[k].events = ZMQ_POLLIN;
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

/* Close and reopen shard k's socket: ZeroMQ drops (and releases) whatever
 * it still queued for it. Outstanding subs are sent again by the caller. */
static void shard_reset(zeps_client *c, int k)
{
    monitor_close(c, k);
    zmq_close(c->shards[k].sock);
    c->shards[k].sock = NULL;
    if (shard_open(c, k) != 0)
        zp_warn("cannot reconnect to shard %d at %s: %s", k, c->shards[k].endpoint,
                zmq_strerror(zmq_errno()));
}

static void release_payload(void *data, void *hint)
{
    zeps_req *r = hint;
    atomic_fetch_sub_explicit(&r->zrefs, 1, memory_order_release);
}

static void sub_fill_header(const zeps_client *c, const zeps_sub *s, Zeps__Header *h)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = (Zeps__Op)s->req->op;
    h->req_id = s->req_id;
    h->rank = c->rank;
    h->incarnation = c->incarnation;
    h->seq = s->seq;
    h->table = s->table;
    h->clock = s->req->clock;
    h->data_version = s->data_version;
    h->offset = s->offset;
    h->count = s->count;
    h->flags = s->flags;
    h->codec = s->codec;
    h->spec = (Zeps__TableSpec *)s->req->spec;
    h->cut_set = s->req->cut_set;
    if (s->compressed) {
        h->view_id = s->view_id;
        h->codec_fraction = s->cparams.fraction;
        h->codec_count = s->cparams.count;
        h->codec_block = s->cparams.block;
        h->codec_seed = s->cparams.seed;
    }
}

/* Send (or resend) one sub-request. A failed send is left to the retry timer. */
static void sub_send(zeps_client *c, zeps_sub *s)
{
    zeps_shard *sh = &c->shards[s->shard];
    Zeps__Header h;
    sub_fill_header(c, s, &h);
    int more = s->data ? ZMQ_SNDMORE : 0;
    s->deadline_ns = zp_now_ns() + (uint64_t)c->opt.request_timeout_ms * 1000000ull;
    if (c->drop_sends > 0 && s->req->op != ZEPS__OP__HELLO) {
        c->drop_sends--; /* lost on the wire: only a resend can deliver it */
        zp_debug("fault injection: %s to shard %d dropped", zp_op_name(s->req->op), s->shard);
        return;
    }
    if (zp_header_send(sh->sock, &h, more | ZMQ_DONTWAIT) != 0) {
        zp_debug("send to shard %d failed: %s", s->shard, zmq_strerror(zmq_errno()));
        return;
    }
    if (s->data) {
        atomic_fetch_add_explicit(&s->req->zrefs, 1, memory_order_relaxed);
        if (zp_data_send(sh->sock, s->data, s->data_len, release_payload, s->req,
                         ZMQ_DONTWAIT) != 0)
            zp_debug("payload send to shard %d failed: %s", s->shard, zmq_strerror(zmq_errno()));
    }
}

static void sub_unlink(zeps_client *c, zeps_sub *s)
{
    zeps_shard *sh = &c->shards[s->shard];
    for (zeps_sub **pp = &sh->out; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            sh->nout--;
            return;
        }
    }
}

static void sub_finish(zeps_client *c, zeps_sub *s, int err)
{
    if (s->done)
        return;
    s->done = 1;
    sub_unlink(c, s);
    s->req->ndone++;
    if (err && !s->req->err)
        s->req->err = err;
}

/* --- replies --- */

static zeps_sub *find_sub(zeps_shard *sh, uint64_t req_id)
{
    for (zeps_sub *s = sh->out; s; s = s->next)
        if (s->req_id == req_id)
            return s;
    return NULL;
}

/* The answer to a compressed pull: full values (the server resynced the
 * view) or a delta that is validated and added to what dst holds, exactly as
 * the server added it to its record of dst. */
static int apply_compressed_pull(zeps_client *c, zeps_sub *s, const Zeps__Header *h,
                                 zmq_msg_t *frame)
{
    const void *buf = zmq_msg_data(frame);
    size_t len = zmq_msg_size(frame);
    uint64_t t0 = zp_now_ns();
    if (h->flags & ZP_FLAG_PULL_FULL) {
        if (len != s->count * sizeof(float))
            return zp_fail(c, ZEPS_EPROTO,
                        "shard %d answered a compressed PULL of %" PRIu64
                        " elements with %zu bytes of full values",
                        s->shard, s->count, len);
        memcpy(s->dst, buf, len);
    } else if (h->flags & ZP_FLAG_PULL_DELTA) {
        const zp_codec_ops *codec = zp_codec_by_id(h->codec);
        char err[256];
        if (!codec)
            return zp_fail(c, ZEPS_EPROTO, "shard %d answered a compressed PULL with codec %u",
                        s->shard, h->codec);
        int rc = codec->validate(buf, len, (size_t)s->count, err, sizeof(err));
        if (rc != 0)
            return zp_fail(c, rc, "shard %d: compressed PULL reply: %s", s->shard, err);
        codec->decode_add(buf, len, (size_t)s->count, 1.0f, s->dst);
    } else {
        return zp_fail(c, ZEPS_EPROTO,
                    "shard %d answered a compressed PULL with neither delta nor full values",
                    s->shard);
    }
    zeps_req *r = s->req;
    if (r->table < c->ntables)
        c->tables[r->table].view_id[s->shard] = h->view_id;
    c->stats.decode_s += (double)(zp_now_ns() - t0) * 1e-9;
    c->stats.bytes_in += len;
    c->stats.bytes_in_raw += s->count * sizeof(float);
    return 0;
}

static int check_pull_reply(zeps_client *c, zeps_sub *s, const Zeps__Header *h, zp_frames *m)
{
    if (s->sb) {
        char err[512];
        if (m->n != 2 || h->count != s->count ||
            zp_sbatch_pull_reply(s->sb, s->shard, zmq_msg_data(&m->f[1]), zmq_msg_size(&m->f[1]),
                                 err, sizeof(err)) != 0)
            return zp_fail(c, ZEPS_EPROTO, "shard %d answered a sparse PULL of %" PRIu64 " ids: %s",
                        s->shard, s->count,
                        m->n != 2 || h->count != s->count ? "wrong frame or id count" : err);
        c->stats.bytes_in += zmq_msg_size(&m->f[1]);
        return 0;
    }
    if (s->compressed && m->n == 2 && h->count == s->count && h->offset == s->offset) {
        int rc = apply_compressed_pull(c, s, h, &m->f[1]);
        if (rc == 0 && s->req->table < c->ntables)
            c->tables[s->req->table].version[s->shard] = h->data_version;
        return rc;
    }
    if (m->n != 2 || h->count != s->count || h->offset != s->offset ||
        zmq_msg_size(&m->f[1]) != s->count * sizeof(float))
        return zp_fail(c, ZEPS_EPROTO,
                    "shard %d answered a PULL of %" PRIu64 " elements at %" PRIu64
                    " with %d frame(s), %" PRIu64 " elements at %" PRIu64,
                    s->shard, s->count, s->offset, m->n, h->count, h->offset);
    if (s->dst) {
        memcpy(s->dst, zmq_msg_data(&m->f[1]), s->count * sizeof(float));
    } else {
        /* a view keeps the frame; frames ZeroMQ handed us inside its own
         * receive buffer may sit at any offset, so copy those (small) ones */
        zmq_msg_init(&s->frame);
        if (((uintptr_t)zmq_msg_data(&m->f[1]) & 3u) == 0) {
            zmq_msg_move(&s->frame, &m->f[1]);
        } else {
            zmq_msg_init_size(&s->frame, zmq_msg_size(&m->f[1]));
            memcpy(zmq_msg_data(&s->frame), zmq_msg_data(&m->f[1]), zmq_msg_size(&m->f[1]));
        }
        s->has_frame = 1;
    }
    c->stats.bytes_in += s->count * sizeof(float);
    c->stats.bytes_in_raw += s->count * sizeof(float);
    zeps_req *r = s->req;
    if (r->table < c->ntables)
        c->tables[r->table].version[s->shard] = h->data_version;
    return 0;
}

/* Shard k answered ERESTARTED: it was restored from a snapshot (it
 * restarted, or rolled back under bsp) since this worker last said HELLO.
 * Under bsp the whole job goes back to the cut the reply names, so every
 * outstanding request is failed with ERESTARTED (progress() does it, outside
 * the receive loop) and the caller resumes through zeps_rollback(). In the
 * other modes the library says HELLO again and resends the shard's
 * outstanding requests with their sequence numbers: the shard restored the
 * duplicate window, so what it already holds is not applied twice. Returns
 * nonzero if sub s is to be finished with the error. */
static int on_restarted(zeps_client *c, int k, zeps_sub *s, const Zeps__Header *h)
{
    zeps_shard *sh = &c->shards[k];
    if (!sh->need_hello)
        zp_warn("shard %d was restored from snapshot set %016" PRIx64 " (clock %lld)%s", k,
                h->cut_set, (long long)h->cut,
                strcmp(c->consistency, "bsp") == 0 ? ": resuming the job from that cut"
                                                   : ": saying HELLO again");
    sh->need_hello = 1;
    c->stats.restarts++;
    if (strcmp(c->consistency, "bsp") == 0) {
        c->resume_clock = h->cut;
        c->resume_set = h->cut_set;
        c->abort_all = 1;
        zp_fail(c, ZEPS_ERESTARTED,
             "shard %d was restored from snapshot set %016" PRIx64 ": resume from clock %lld", k,
             h->cut_set, (long long)h->cut);
        return 1;
    }
    s->deadline_ns = UINT64_MAX; /* resent after the HELLO (progress) */
    return 0;
}

static void on_reply(zeps_client *c, int k, zp_frames *m)
{
    zeps_shard *sh = &c->shards[k];
    Zeps__Header *h = m->n >= 1 ? zp_header_unpack(&m->f[0]) : NULL;
    if (!h) {
        zp_warn("shard %d sent a reply that is not a zeps header; ignored", k);
        return;
    }
    zeps_sub *s = find_sub(sh, h->req_id);
    if (!s) {
        zeps__header__free_unpacked(h, NULL); /* a late answer to a resend: already done */
        return;
    }
    int err = 0;
    zeps_req *r = s->req;
    if (h->op == ZEPS__OP__ERROR && h->error == ZEPS_ERESTARTED && c->rank != ZEPS_RANK_TOOL &&
        r->op != ZEPS__OP__HELLO) {
        int stop = on_restarted(c, k, s, h);
        zeps__header__free_unpacked(h, NULL);
        if (stop)
            sub_finish(c, s, ZEPS_ERESTARTED);
        return;
    }
    if (h->op == ZEPS__OP__ERROR) {
        err = h->error ? h->error : ZEPS_EINTERNAL;
        zp_fail(c, err, "shard %d: %s", k, h->error_text ? h->error_text : zeps_strerror(err));
    } else if (h->flags & ZP_FLAG_PARKED) {
        /* alive and holding our request: wait on, retries start over */
        s->retries = 0;
        s->deadline_ns = zp_now_ns() + (uint64_t)c->opt.request_timeout_ms * 1000000ull;
        zeps__header__free_unpacked(h, NULL);
        return;
    } else if (h->version != ZP_PROTOCOL_VERSION || (int)h->op != r->op) {
        err = zp_fail(c, ZEPS_EPROTO, "shard %d answered %s with %s (protocol %u)", k,
                   zp_op_name(r->op), zp_op_name(h->op), h->version);
    } else {
        switch (r->op) {
        case ZEPS__OP__PULL:
            err = check_pull_reply(c, s, h, m);
            break;
        case ZEPS__OP__HELLO:
            if (sh->incarnation && sh->incarnation != h->incarnation)
                zp_info("shard %d has a new incarnation %" PRIx64 " (was %" PRIx64
                        "): it restarted",
                        k, h->incarnation, sh->incarnation);
            sh->incarnation = h->incarnation;
            sh->hello_clock = h->clock;
            sh->need_hello = 0;
            sh->rejoined = (h->flags & ZP_FLAG_REJOINED) != 0;
            if (h->shard != (uint32_t)k || h->num_shards != (uint32_t)c->nshards)
                err = zp_fail(c, ZEPS_ECONFIG,
                           "%s answered as shard %u of %u, but the cluster lists it as shard %d "
                           "of %d",
                           sh->endpoint, h->shard, h->num_shards, k, c->nshards);
            c->nworkers = (int)h->num_workers;
            snprintf(c->consistency, sizeof(c->consistency), "%s",
                     h->consistency ? h->consistency : "");
            break;
        case ZEPS__OP__DECLARE:
            s->table = h->table;
            s->offset = h->offset;
            s->count = h->count;
            break;
        case ZEPS__OP__PUSH:
            if (h->flags & ZP_FLAG_DROPPED)
                c->stats.dropped++;
            break;
        case ZEPS__OP__STATS:
            if (h->stats) {
                r->stats_len = zeps__shard_stats__get_packed_size(h->stats);
                r->stats_buf = zp_xmalloc(r->stats_len);
                zeps__shard_stats__pack(h->stats, r->stats_buf);
            }
            break;
        default:
            break;
        }
    }
    zeps__header__free_unpacked(h, NULL);
    sub_finish(c, s, err);
}

/* Receive everything waiting on shard k. */
static void drain_shard(zeps_client *c, int k)
{
    for (;;) {
        zp_frames m;
        if (zp_frames_recv(c->shards[k].sock, &m, ZMQ_DONTWAIT) != 0)
            return;
        on_reply(c, k, &m);
        zp_frames_close(&m);
    }
}

/* Resend or fail every outstanding sub past its deadline. */
static void check_deadlines(zeps_client *c)
{
    uint64_t now = zp_now_ns();
    for (int k = 0; k < c->nshards; k++) {
        zeps_shard *sh = &c->shards[k];
        int failed = 0;
        for (zeps_sub *s = sh->out, *next; s; s = next) {
            next = s->next;
            if (s->deadline_ns > now)
                continue;
            if (s->retries >= s->max_retries) {
                zp_fail(c, ZEPS_ETIMEDOUT,
                     "shard %d at %s did not answer %s after %d retries (%.1f s)%s%s", k,
                     sh->endpoint, zp_op_name(s->req->op), s->retries,
                     (double)(s->retries + 1) * c->opt.request_timeout_ms / 1000.0,
                     sh->handshake[0] ? ": " : "",
                     sh->handshake[0] ? sh->handshake
                     : c->curve       ? ": no reply; with CURVE, check that this worker's key is "
                                        "in the server's allow-list (curve_allow_dir) and that "
                                        "curve_server_public is the servers' key"
                                      : "");
                sub_finish(c, s, ZEPS_ETIMEDOUT);
                failed = 1;
                continue;
            }
            s->retries++;
            c->stats.retries++;
            if (s->req->op == ZEPS__OP__HELLO)
                zp_info("waiting for shard %d at %s (attempt %d of %d)", k, sh->endpoint,
                        s->retries + 1, s->max_retries + 1);
            else
                zp_debug("resending %s %" PRIu64 " to shard %d (retry %d)",
                         zp_op_name(s->req->op), s->seq, k, s->retries);
            sub_send(c, s);
        }
        if (failed) {
            /* Drop what ZeroMQ still queues for this shard (and the buffers it
             * references); whatever is still outstanding goes out again. */
            shard_reset(c, k);
            for (zeps_sub *s = sh->out; s; s = s->next)
                sub_send(c, s);
        }
    }
}

static void req_free(zeps_req *r);

/* bsp, a shard restarted: every outstanding request fails with ERESTARTED;
 * the sockets are reset so ZeroMQ drops (and releases) what it queued. */
static void abort_outstanding(zeps_client *c)
{
    c->abort_all = 0;
    for (int k = 0; k < c->nshards; k++) {
        zeps_shard *sh = &c->shards[k];
        if (!sh->out)
            continue;
        while (sh->out)
            sub_finish(c, sh->out, ZEPS_ERESTARTED);
        shard_reset(c, k);
    }
}

/* Say HELLO again to shard k (same rank and incarnation), then resend what
 * is outstanding there. */
static void rehello(zeps_client *c, int k)
{
    c->in_rehello = 1;
    zeps_req *r = zp_req_new(c, ZEPS__OP__HELLO, 1);
    zeps_sub *s = zp_req_add(r, k);
    s->max_retries = c->opt.hello_timeout_ms / c->opt.request_timeout_ms + 1;
    zp_req_send(r, s);
    int rc = zp_req_finish(r);
    req_free(r);
    c->in_rehello = 0;
    if (rc != 0) {
        zp_warn("HELLO again to shard %d failed: %s", k, c->err);
        return;
    }
    for (zeps_sub *o = c->shards[k].out; o; o = o->next)
        sub_send(c, o);
}

/* Read shard k's monitor. A refused key fails what waits on the shard at
 * once (retrying cannot help); other handshake failures are kept for the
 * timeout message. */
static void drain_monitor(zeps_client *c, int k)
{
    zeps_shard *sh = &c->shards[k];
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, sh->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&event, zmq_msg_data(&ev), 2);
            memcpy(&value, (char *)zmq_msg_data(&ev) + 2, 4);
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, sh->monitor, ZMQ_DONTWAIT);
            zmq_msg_close(&addr);
        }
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
            snprintf(sh->handshake, sizeof(sh->handshake),
                     "the shard refused this client's CURVE key (ZAP status %u)", value);
            int failed = 0;
            for (zeps_sub *s = sh->out, *next; s; s = next) {
                next = s->next;
                zp_fail(c, ZEPS_ETRANSPORT,
                     "shard %d at %s refused this client's CURVE key %.8s... (ZAP status %u): "
                     "add its .pub file to the server's curve_allow_dir",
                     k, sh->endpoint, c->curve_public, value);
                sub_finish(c, s, ZEPS_ETRANSPORT);
                failed = 1;
            }
            if (failed) {
                shard_reset(c, k); /* drops (and releases) what ZeroMQ still queued */
                return;            /* the monitor was replaced */
            }
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                   event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            snprintf(sh->handshake, sizeof(sh->handshake),
                     "the CURVE handshake failed (%s, code %u); check curve_server_public",
                     event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error" : "no detail",
                     value);
        }
    }
}

/* Wait up to timeout_ms for replies and handle them, then deadlines. */
static void progress(zeps_client *c, long timeout_ms)
{
    uint64_t now = zp_now_ns(), next = UINT64_MAX;
    for (int k = 0; k < c->nshards; k++)
        for (zeps_sub *s = c->shards[k].out; s; s = s->next)
            if (s->deadline_ns < next)
                next = s->deadline_ns;
    if (next != UINT64_MAX) {
        long until = next > now ? (long)((next - now) / 1000000ull) + 1 : 0;
        if (until < timeout_ms)
            timeout_ms = until;
    }
    int n = zmq_poll(c->items, c->npoll, timeout_ms);
    if (n > 0) {
        for (int k = 0; k < c->nshards; k++)
            if (c->items[k].revents & ZMQ_POLLIN)
                drain_shard(c, k);
        for (int k = 0; c->curve && k < c->nshards; k++)
            if ((c->items[c->nshards + k].revents & ZMQ_POLLIN) && c->shards[k].monitor)
                drain_monitor(c, k);
    }
    if (c->abort_all)
        abort_outstanding(c);
    for (int k = 0; k < c->nshards && !c->in_rehello; k++)
        if (c->shards[k].need_hello && strcmp(c->consistency, "bsp") != 0)
            rehello(c, k);
    check_deadlines(c);
}

/* --- requests --- */

zeps_req *zp_req_new(zeps_client *c, int op, int nsub)
{
    zeps_req *r = zp_xcalloc(1, sizeof(*r) + (size_t)nsub * sizeof(zeps_sub));
    r->c = c;
    r->op = op;
    r->table = UINT32_MAX;
    atomic_init(&r->zrefs, 0);
    return r;
}

/* Add a sub-request for shard k and send it. */
zeps_sub *zp_req_add(zeps_req *r, int k)
{
    zeps_client *c = r->c;
    while (c->shards[k].nout >= MAX_IN_FLIGHT)
        progress(c, 10);
    zeps_sub *s = &r->subs[r->nsub++];
    memset(s, 0, sizeof(*s));
    s->req = r;
    s->shard = k;
    s->req_id = ++c->next_req_id;
    s->seq = ++c->shards[k].next_seq;
    s->max_retries = c->opt.max_retries;
    return s;
}

void zp_req_send(zeps_req *r, zeps_sub *s)
{
    zeps_client *c = r->c;
    zeps_shard *sh = &c->shards[s->shard];
    s->next = sh->out;
    sh->out = s;
    sh->nout++;
    c->stats.requests++;
    sub_send(c, s);
}

/* Interrupted: fail r's outstanding sub-requests with ZEPS_ECLOSED and reset
 * their shards' sockets, so ZeroMQ drops (and releases) what it queued. */
static void give_up(zeps_client *c, zeps_req *r)
{
    zp_fail(c, ZEPS_ECLOSED, "interrupted while waiting for %s", zp_op_name(r->op));
    for (int i = 0; i < r->nsub; i++) {
        zeps_sub *s = &r->subs[i];
        if (s->done)
            continue;
        sub_finish(c, s, ZEPS_ECLOSED);
        shard_reset(c, s->shard);
        for (zeps_sub *o = c->shards[s->shard].out; o; o = o->next)
            sub_send(c, o);
    }
}

void zeps_client_set_interrupt(zeps_client *c, volatile int *flag)
{
    if (c)
        c->interrupt = flag;
}

/* Wait until every sub-request of r is answered (or failed) and ZeroMQ has
 * released r's payloads. Returns r's first error; r stays allocated. */
int zp_req_finish(zeps_req *r)
{
    zeps_client *c = r->c;
    uint64_t t0 = zp_now_ns();
    while (r->ndone < r->nsub) {
        if (c->interrupt && *c->interrupt) {
            give_up(c, r);
            break;
        }
        progress(c, 1000);
    }
    /* ZeroMQ releases a payload once it is written out; the reply proves it
     * was received, so this is at most a few microseconds. If it lingers
     * (a failed request), drop the queues that hold it. */
    uint64_t spin_until = zp_now_ns() + 100000000ull;
    while (atomic_load_explicit(&r->zrefs, memory_order_acquire) > 0) {
        if (zp_now_ns() > spin_until) {
            for (int i = 0; i < r->nsub; i++)
                shard_reset(c, r->subs[i].shard);
            for (int k = 0; k < c->nshards; k++)
                for (zeps_sub *s = c->shards[k].out; s; s = s->next)
                    sub_send(c, s);
            spin_until = UINT64_MAX;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    c->stats.wait_s += (double)(zp_now_ns() - t0) * 1e-9;
    return r->err;
}

static void req_free(zeps_req *r)
{
    for (int i = 0; i < r->nsub; i++) {
        if (r->subs[i].has_frame)
            zmq_msg_close(&r->subs[i].frame);
        free(r->subs[i].encoded); /* ZeroMQ released it: req_finish waited */
    }
    free(r->stats_buf);
    free(r);
}

int zeps_wait(zeps_req **rp)
{
    if (!rp || !*rp)
        return ZEPS_EINVAL;
    zeps_req *r = *rp;
    *rp = NULL;
    int err = zp_req_finish(r);
    req_free(r);
    return err;
}

int zeps_wait_all(zeps_req **reqs, int n)
{
    int first = 0;
    for (int i = 0; reqs && i < n; i++) {
        if (!reqs[i])
            continue;
        int rc = zeps_wait(&reqs[i]);
        if (rc && !first)
            first = rc;
    }
    return first;
}

struct zeps_view {
    int nparts;
    uint64_t *offset, *count;
    zmq_msg_t *frames;
};

int zeps_wait_view(zeps_req **rp, zeps_view **out)
{
    if (!rp || !*rp || !out)
        return ZEPS_EINVAL;
    zeps_req *r = *rp;
    *rp = NULL;
    int err = zp_req_finish(r);
    if (err == 0 && !r->view)
        err = zp_fail(r->c, ZEPS_EINVAL, "zeps_wait_view on a request that is not a view pull");
    if (err != 0) {
        req_free(r);
        return err;
    }
    zeps_view *v = zp_xcalloc(1, sizeof(*v));
    v->nparts = r->nsub;
    v->offset = zp_xcalloc((size_t)r->nsub, sizeof(uint64_t));
    v->count = zp_xcalloc((size_t)r->nsub, sizeof(uint64_t));
    v->frames = zp_xcalloc((size_t)r->nsub, sizeof(zmq_msg_t));
    for (int i = 0; i < r->nsub; i++) { /* subs are in shard order = element order */
        zeps_sub *s = &r->subs[i];
        v->offset[i] = s->offset;
        v->count[i] = s->count;
        zmq_msg_init(&v->frames[i]);
        zmq_msg_move(&v->frames[i], &s->frame);
        zmq_msg_close(&s->frame);
        s->has_frame = 0;
    }
    req_free(r);
    *out = v;
    return 0;
}

int zeps_view_parts(const zeps_view *v)
{
    return v ? v->nparts : 0;
}

const float *zeps_view_part(const zeps_view *v, int i, uint64_t *offset, uint64_t *count)
{
    if (!v || i < 0 || i >= v->nparts)
        return NULL;
    if (offset)
        *offset = v->offset[i];
    if (count)
        *count = v->count[i];
    return zmq_msg_data(&v->frames[i]);
}

void zeps_view_release(zeps_view **vp)
{
    zeps_view *v = vp ? *vp : NULL;
    if (!v)
        return;
    for (int i = 0; i < v->nparts; i++)
        zmq_msg_close(&v->frames[i]);
    free(v->frames);
    free(v->offset);
    free(v->count);
    free(v);
    *vp = NULL;
}

/* --- connection --- */

static void client_free(zeps_client *c)
{
    for (int k = 0; k < c->nshards; k++) {
        if (c->shards[k].monitor)
            zmq_close(c->shards[k].monitor);
        if (c->shards[k].sock)
            zmq_close(c->shards[k].sock);
    }
    explicit_bzero(c->curve_secret, sizeof(c->curve_secret));
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    for (uint32_t i = 0; i < c->ntables; i++) {
        free(c->tables[i].ids);
        free(c->tables[i].version);
        free(c->tables[i].residual);
        zp_rowres_free(&c->tables[i].row_residual);
        free(c->tables[i].view_id);
    }
    free(c->tables);
    free(c->shards);
    free(c->items);
    free(c);
}

static int hello_all(zeps_client *c)
{
    zeps_req *r = zp_req_new(c, ZEPS__OP__HELLO, c->nshards);
    int per_try = c->opt.request_timeout_ms < 1000 ? c->opt.request_timeout_ms : 1000;
    int saved = c->opt.request_timeout_ms;
    c->opt.request_timeout_ms = per_try;
    for (int k = 0; k < c->nshards; k++) {
        zeps_sub *s = zp_req_add(r, k);
        s->max_retries = c->opt.hello_timeout_ms / per_try;
        zp_req_send(r, s);
    }
    int rc = zeps_wait(&r);
    c->opt.request_timeout_ms = saved;
    return rc;
}

/* Copy and check the CURVE keys of c->opt (all three or none). */
static int curve_setup(zeps_client *c)
{
    const char *keys[3] = {c->opt.curve_server_key, c->opt.curve_public_key,
                           c->opt.curve_secret_key};
    char *dst[3] = {c->curve_server, c->curve_public, c->curve_secret};
    static const char *const names[3] = {"curve_server_key", "curve_public_key",
                                         "curve_secret_key"};
    int given = 0;
    for (int i = 0; i < 3; i++)
        given += keys[i] != NULL && keys[i][0] != '\0';
    c->opt.curve_server_key = c->opt.curve_public_key = c->opt.curve_secret_key = NULL;
    if (given == 0)
        return 0;
    for (int i = 0; i < 3; i++) {
        uint8_t raw[32];
        if (!keys[i] || strlen(keys[i]) != ZP_CURVE_KEY_LEN || !zmq_z85_decode(raw, keys[i]))
            return zp_fail(c, ZEPS_EINVAL,
                        "zeps_options.%s must be a %d-character Z85 key when CURVE is used "
                        "(set all three keys or none)",
                        names[i], ZP_CURVE_KEY_LEN);
        memcpy(dst[i], keys[i], ZP_CURVE_KEY_LEN + 1);
    }
    if (!zmq_has("curve"))
        return zp_fail(c, ZEPS_ETRANSPORT, "this libzmq was built without CURVE");
    c->curve = true;
    return 0;
}

int zeps_client_new_endpoints(zeps_client **out, const char *const *endpoints, int num_shards,
                              uint32_t rank, const zeps_options *opt)
{
    if (!out || !endpoints || num_shards < 1 || num_shards > ZP_MAX_SHARDS)
        return ZEPS_EINVAL;
    zeps_client *c = zp_xcalloc(1, sizeof(*c));
    if (opt)
        c->opt = *opt;
    if (c->opt.request_timeout_ms <= 0)
        c->opt.request_timeout_ms = 2000;
    if (c->opt.max_retries <= 0)
        c->opt.max_retries = 10;
    if (c->opt.hello_timeout_ms <= 0)
        c->opt.hello_timeout_ms = 30000;
    c->rank = rank;
    c->incarnation = c->opt.incarnation ? c->opt.incarnation : zp_random64() | 1u;
    c->nshards = num_shards;
    int rc = curve_setup(c);
    if (rc != 0) {
        zp_error("%s", c->err);
        free(c);
        return rc;
    }
    c->npoll = c->curve ? 2 * num_shards : num_shards;
    c->shards = zp_xcalloc((size_t)num_shards, sizeof(zeps_shard));
    c->items = zp_xcalloc((size_t)c->npoll, sizeof(zmq_pollitem_t));
    c->zctx = zmq_ctx_new();
    if (!c->zctx) {
        free(c->shards);
        free(c->items);
        free(c);
        return ZEPS_ETRANSPORT;
    }
    for (int k = 0; k < num_shards; k++) {
        snprintf(c->shards[k].endpoint, sizeof(c->shards[k].endpoint), "%s", endpoints[k]);
        if (shard_open(c, k) != 0) {
            zp_error("cannot connect to shard %d at %s: %s", k, endpoints[k],
                     zmq_strerror(zmq_errno()));
            client_free(c);
            return ZEPS_ETRANSPORT;
        }
    }
    rc = hello_all(c);
    c->drop_sends = c->opt.fault_drop_sends;
    c->resume_clock = INT64_MAX;
    for (int k = 0; k < num_shards; k++)
        if (c->shards[k].hello_clock < c->resume_clock)
            c->resume_clock = c->shards[k].hello_clock;
    if (c->resume_clock < 0 || rank == ZEPS_RANK_TOOL)
        c->resume_clock = 0;
    if (rc != 0) {
        zp_error("%s", c->err);
        client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int zeps_client_new(zeps_client **out, const char *cluster_file, uint32_t rank)
{
    zp_config *cfg = zp_xmalloc(sizeof(*cfg));
    char err[1024];
    int rc = zp_config_load(cfg, cluster_file, err, sizeof(err));
    if (rc != 0) {
        zp_error("%s", err);
        free(cfg);
        return rc;
    }
    if (rank != ZEPS_RANK_TOOL && rank >= (uint32_t)cfg->num_workers) {
        zp_error("rank %u is outside the cluster of %d workers in %s", rank, cfg->num_workers,
                 cluster_file);
        free(cfg);
        return ZEPS_ERANK;
    }
    zp_curve_client_keys keys;
    rc = zp_curve_load_client(cfg, &keys, err, sizeof(err));
    if (rc != 0) {
        zp_error("%s", err);
        free(cfg);
        return rc;
    }
    zeps_options opt = {
        .request_timeout_ms = cfg->request_timeout_ms,
        .max_retries = cfg->max_retries,
        .hello_timeout_ms = cfg->hello_timeout_ms,
        .num_workers = cfg->num_workers,
        .max_message_bytes = cfg->max_message_bytes,
        .curve_server_key = keys.server_public,
        .curve_public_key = keys.client_public,
        .curve_secret_key = keys.client_secret,
    };
    const char *eps[ZP_MAX_SHARDS];
    for (int k = 0; k < cfg->num_shards; k++)
        eps[k] = cfg->servers[k];
    rc = zeps_client_new_endpoints(out, eps, cfg->num_shards, rank, &opt);
    explicit_bzero(&keys, sizeof(keys));
    free(cfg);
    return rc;
}

void zeps_client_destroy(zeps_client **cp)
{
    zeps_client *c = *cp;
    if (!c)
        return;
    *cp = NULL;
    if (c->rank != ZEPS_RANK_TOOL) {
        /* Best effort and bounded: a gone server must not hold us up. */
        int saved_t = c->opt.request_timeout_ms;
        c->opt.request_timeout_ms = 500;
        zeps_req *r = zp_req_new(c, ZEPS__OP__BYE, c->nshards);
        for (int k = 0; k < c->nshards; k++) {
            zeps_sub *s = zp_req_add(r, k);
            s->max_retries = 1;
            zp_req_send(r, s);
        }
        zeps_wait(&r);
        c->opt.request_timeout_ms = saved_t;
    }
    client_free(c);
}

/* Start a request with one sub-request to each of shards [first, first + n). */
static zeps_req *simple_start(zeps_client *c, int op, int64_t clock, int first, int n)
{
    zeps_req *r = zp_req_new(c, op, n);
    r->clock = clock;
    for (int k = first; k < first + n; k++)
        zp_req_send(r, zp_req_add(r, k));
    return r;
}

static int simple_all(zeps_client *c, int op, int64_t clock, int first, int n)
{
    zeps_req *r = simple_start(c, op, clock, first, n);
    return zeps_wait(&r);
}

int zeps_clock_start(zeps_client *c, int64_t clock, zeps_req **req)
{
    if (!c || clock < 0 || !req)
        return ZEPS_EINVAL;
    *req = simple_start(c, ZEPS__OP__CLOCK, clock, 0, c->nshards);
    return 0;
}

int zeps_clock(zeps_client *c, int64_t clock)
{
    zeps_req *r;
    int rc = zeps_clock_start(c, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int64_t zeps_resume_clock(const zeps_client *c)
{
    return c ? c->resume_clock : 0;
}

int zeps_rejoined(const zeps_client *c)
{
    for (int k = 0; c && k < c->nshards; k++)
        if (c->shards[k].rejoined)
            return 1;
    return 0;
}

int zeps_rollback(zeps_client *c, int64_t clock)
{
    if (!c || clock < 0 || c->rank == ZEPS_RANK_TOOL)
        return ZEPS_EINVAL;
    c->abort_all = 0;
    uint64_t set = c->resume_set;
    int rc = hello_all(c);
    if (rc != 0)
        return rc;
    zeps_req *r = zp_req_new(c, ZEPS__OP__ROLLBACK, c->nshards);
    r->clock = clock;
    r->cut_set = set;
    for (int k = 0; k < c->nshards; k++)
        zp_req_send(r, zp_req_add(r, k));
    rc = zeps_wait(&r);
    if (rc == 0)
        zp_info("rolled back to clock %lld (snapshot set %016" PRIx64 ")", (long long)clock,
                c->resume_set);
    return rc;
}

int zeps_snapshot_request(zeps_client *c, int64_t clock, uint64_t setid)
{
    if (!c)
        return ZEPS_EINVAL;
    zeps_req *r = zp_req_new(c, ZEPS__OP__SNAPSHOT, c->nshards);
    r->clock = clock;
    r->cut_set = setid;
    for (int k = 0; k < c->nshards; k++)
        zp_req_send(r, zp_req_add(r, k));
    return zeps_wait(&r);
}

int zeps_barrier(zeps_client *c)
{
    if (!c)
        return ZEPS_EINVAL;
    /* Shard 0 keeps the cluster's barrier. */
    return simple_all(c, ZEPS__OP__BARRIER, 0, 0, 1);
}

int zeps_stats_raw(zeps_client *c, int shard, void **buf, size_t *len)
{
    if (!c || shard < 0 || shard >= c->nshards || !buf || !len)
        return ZEPS_EINVAL;
    zeps_req *r = zp_req_new(c, ZEPS__OP__STATS, 1);
    zp_req_send(r, zp_req_add(r, shard));
    zp_req_finish(r);
    void *b = r->stats_buf;
    size_t n = r->stats_len;
    r->stats_buf = NULL;
    int rc = zeps_wait(&r);
    if (rc == 0 && !b)
        rc = zp_fail(c, ZEPS_EPROTO, "shard %d answered STATS without statistics", shard);
    if (rc != 0) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int zeps_num_shards(const zeps_client *c)
{
    return c ? c->nshards : 0;
}

int zeps_num_workers(const zeps_client *c)
{
    return c ? c->nworkers : 0;
}

uint32_t zeps_rank(const zeps_client *c)
{
    return c ? c->rank : 0;
}

void zeps_client_get_stats(const zeps_client *c, zeps_client_stats *out)
{
    if (c && out)
        *out = c->stats;
}
