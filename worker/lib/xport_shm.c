/*
 * xport_shm.c - the shared-memory transport of a shard on this host; see
 * xport.h and docs/protocol.md, "Shared memory".
 *
 * The client makes the segment (a sealed memfd, common/shmseg.h), hands it
 * to the shard over the unix socket its HELLO named, with SCM_RIGHTS, and
 * keeps that socket open: the shard detaches the segment when it closes.
 * A request's payload is copied into the request area once, at its first
 * send, and its resends name the same buffer, which is kept until the
 * request is answered (zp_shmseg_done) and the shard released it. A
 * reply's payload in the reply area becomes the reply's frame, read in
 * place; a view keeps it (and the segment mapped) until released.
 *
 * When the shard offers it (ZP_SHM_OK_BELL, no CURVE), the same socket
 * carries the requests and their replies, one packet each (common/bell.h),
 * polled beside the DEALERs: a request's header costs a send and a receive
 * on each side instead of ZeroMQ's hand-overs between threads. The DEALER
 * then takes a routing id named after the segment, so a reply that cannot
 * go as a packet comes there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "bell.h"
#include "client.h"
#include "errors.h"
#include "log.h"
#include "req.h"
#include "shard.h"
#include "shmmsg.h"
#include "shmseg.h"
#include "xport.h"
#include "zeps_errors.h"

typedef struct shmc {
    int sock;       /* the unix connection: its closing detaches the segment */
    zp_shmseg *seg; /* this side's reference */
    uint64_t id;    /* the segment's name in requests */
    char endpoint[64];
    int offered;      /* the shard's answer had ZP_SHM_OK_BELL */
    int bell;         /* requests go on sock (offered, and no CURVE) */
    int ready;        /* the last poll saw sock readable */
    uint64_t zmq_out; /* requests sent on the DEALER meanwhile, unanswered */
    uint8_t *rbuf;    /* one packet (ZP_BELL_MAX bytes) */
} shmc;

/* The shard at the other end of the attach is gone (killed or stopped):
 * its end of the unix socket closed. */
static int gone(const shmc *x)
{
    char b;
    return recv(x->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static void let_go(zp_shard *sh);

static int place(zp_shard *sh, zp_req_sub *s, Zeps__Header *h)
{
    shmc *x = sh->xs;
    if (gone(x)) { /* back to the cluster file's endpoint, where a restarted shard answers */
        let_go(sh);
        zp_shard_reset(s->req->c, s->shard);
        return 0;
    }
    h->shm_segment = x->id;
    if (!s->data || !s->data_len)
        return 0;
    if (s->xseg != x->id) { /* first send, or the segment changed since */
        void *dst;
        if (zp_shmseg_alloc(x->seg, s->data_len, &s->xdesc, &dst) != 0)
            return 0; /* no room: this one goes as a frame */
        memcpy(dst, s->data, s->data_len);
        zp_shmseg_written(x->seg, &s->xdesc, 1);
        s->xseg = x->id;
    }
    h->shm_offset = s->xdesc.offset;
    h->shm_length = s->xdesc.length;
    h->shm_generation = s->xdesc.generation;
    return 1;
}

static void frame_free(void *data, void *hint)
{
    zp_shmseg *g = hint;
    zp_shmseg_release(g, data);
    zp_shmseg_unref(&g);
}

static int resolve(zp_shard *sh, const Zeps__Header *h, zp_frames *m, char *err, size_t errlen)
{
    shmc *x = sh->xs;
    if (!h->shm_length)
        return 0;
    if (m->n != 1)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a reply with a shared-memory descriptor carries %d payload frames",
                             m->n - 1);
    zp_shm_desc d = {h->shm_offset, h->shm_length, h->shm_generation};
    const void *data;
    int rc = zp_shmseg_take(x->seg, &d, &data, err, errlen);
    if (rc != 0)
        return rc;
    /* the frame holds the buffer and a reference on the segment until closed */
    zmq_msg_init_data(&m->f[m->n++], (void *)data, d.length, frame_free, zp_shmseg_ref(x->seg));
    m->bytes += d.length;
    return 0;
}

/* s goes on the DEALER from now on, and what follows while it is unanswered. */
static void use_zmq(shmc *x, zp_req_sub *s)
{
    if (s->xzmq == x->id)
        return;
    s->xzmq = x->id;
    x->zmq_out++;
}

static void bell_send(zp_shard *sh, zp_req_sub *s, const Zeps__Header *h, int frame)
{
    shmc *x = sh->xs;
    /* the first request under a new route goes on the DEALER: once it is
     * answered the shard has the route, for replies that are not packets */
    if (x->bell && !x->zmq_out && sh->routed) {
        int rc = zp_bell_send(x->sock, h, frame, s->data, s->data_len);
        if (rc == 0)
            return;
        zp_debug("%s %" PRIu64 " goes over ZeroMQ: %s", zp_wire_op_name(h->op), h->seq,
                 rc == ZEPS_ESIZE ? "larger than a packet" : strerror(errno));
    }
    if (x->bell) /* every request on the DEALER counts: none may be overtaken */
        use_zmq(x, s);
    zp_xport_zmq.send(sh, s, h, frame);
}

static void done(zp_shard *sh, zp_req_sub *s)
{
    shmc *x = sh->xs;
    if (s->xseg == x->id)
        zp_shmseg_done(x->seg, &s->xdesc);
    s->xseg = 0;
    if (s->xzmq == x->id) {
        x->zmq_out--;
        sh->routed = 1;
    }
    s->xzmq = 0;
}

static void let_go(zp_shard *sh)
{
    shmc *x = sh->xs;
    close(x->sock);
    zp_shmseg_unref(&x->seg);
    free(x->rbuf);
    free(x);
    sh->xs = NULL;
    sh->xp = &zp_xport_zmq;
    sh->fast[0] = '\0'; /* the socket's next connection is to the cluster file's endpoint */
    sh->route_len = 0;  /* under a name of ZeroMQ's */
}

const zp_xport_ops zp_xport_shm = {
    .name = "shm",
    .place = place,
    .resolve = resolve,
    .send = bell_send,
    .done = done,
    .close = let_go,
};

/* Connect to the abstract unix socket `endpoint` ("@name"); the fd or -1. */
static int dial(const char *endpoint, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(endpoint);
    if (endpoint[0] != '@' || n < 2 || n > sizeof(sa.sun_path)) {
        zp_errors_set(err, errlen, ZEPS_EPROTO, "shm endpoint '%s' is not an abstract name",
                      endpoint);
        return -1;
    }
    memcpy(sa.sun_path + 1, endpoint + 1, n - 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 2};
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0) {
        /* ECONNREFUSED: no such name here, the shard is on another host */
        zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "%s: %s", endpoint, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Send the attach with the memfd and read the shard's answer: 0 and *id, or a zeps_err. */
static int handshake(int sock, int memfd, const zp_shm_attach *a, uint64_t *id, uint32_t *flags,
                     char *err, size_t errlen)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {.iov_base = (void *)a, .iov_len = sizeof(*a)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
    if (sendmsg(sock, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(*a))
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "sending the segment: %s",
                             strerror(errno));
    zp_shm_ok ok;
    ssize_t n = recv(sock, &ok, sizeof(ok), 0);
    if (n != (ssize_t)sizeof(ok) || ok.magic != ZP_SHM_MAGIC_OK)
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "no answer to the attach (%s)",
                             n < 0 ? strerror(errno) : "closed");
    if (ok.code != 0) {
        ok.text[sizeof(ok.text) - 1] = '\0';
        return zp_errors_set(err, errlen, ok.code, "the shard refused the segment: %s", ok.text);
    }
    *id = ok.segment;
    *flags = ok.flags;
    return 0;
}

int zp_xport_shm_attach(zp_shard *sh, const char *endpoint, uint32_t rank, uint64_t incarnation,
                        uint64_t token, uint64_t area_bytes, char *err, size_t errlen)
{
    int sock = dial(endpoint, err, errlen);
    if (sock < 0)
        return ZEPS_ETRANSPORT;
    zp_shmseg *seg;
    int memfd;
    int rc = zp_shmseg_create(&seg, &memfd, area_bytes, err, errlen);
    if (rc != 0) {
        close(sock);
        return rc;
    }
    zp_shm_attach a = {
        .magic = ZP_SHM_MAGIC_ATTACH, .rank = rank, .incarnation = incarnation, .token = token};
    uint64_t id = 0;
    uint32_t flags = 0;
    rc = handshake(sock, memfd, &a, &id, &flags, err, errlen);
    close(memfd); /* the mappings keep the memory: ours, and the shard's */
    if (rc != 0) {
        close(sock);
        zp_shmseg_unref(&seg);
        return rc;
    }
    if (sh->xp)
        sh->xp->close(sh);
    shmc *x = zp_alloc_zeroed(1, sizeof(*x));
    x->sock = sock;
    x->seg = seg;
    x->id = id;
    x->offered = (flags & ZP_SHM_OK_BELL) != 0;
    snprintf(x->endpoint, sizeof(x->endpoint), "%s", endpoint);
    sh->xs = x;
    sh->xp = &zp_xport_shm;
    return 0;
}

const char *zp_xport_shm_endpoint(const zp_shard *sh)
{
    return sh->xp == &zp_xport_shm ? ((const shmc *)sh->xs)->endpoint : "";
}

void zp_xport_shm_hello(zeps_client *c, int k, const Zeps__Header *h)
{
    zp_shard *sh = &c->shards[k];
    const char *ep = h->shm_endpoint ? h->shm_endpoint : "";
    /* a tool moves no payloads worth a segment */
    if (c->opt.transport != ZEPS_TRANSPORT_AUTO || c->replicas > 1 || c->rank == ZEPS_RANK_TOOL)
        return;
    if (strcmp(ep, zp_xport_shm_endpoint(sh)) == 0)
        return; /* the same shard: the segment stays */
    if (sh->xp)
        sh->xp->close(sh); /* a restarted shard detached it already */
    if (!ep[0])
        return;
    char why[256];
    uint64_t area = c->opt.shm_segment_bytes ? c->opt.shm_segment_bytes : 256ull << 20;
    int rc =
        zp_xport_shm_attach(sh, ep, c->rank, c->incarnation, h->shm_token, area, why, sizeof(why));
    if (rc == ZEPS_ETRANSPORT && strstr(why, "Connection refused"))
        zp_debug("shard %d is on another host: payloads over %s", k, sh->endpoint);
    else if (rc != 0)
        zp_warn("shard %d: no shared memory (%s): payloads over %s", k, why, sh->endpoint);
    else
        zp_debug("shard %d: payloads in shared memory (%s)", k, ep);
    shmc *x = rc == 0 ? sh->xs : NULL;
    if (x && x->offered && !c->curve) { /* the requests themselves on the attach connection */
        x->bell = 1;
        x->rbuf = zp_alloc(ZP_BELL_MAX);
        _Static_assert(sizeof(sh->route) >= ZP_BELL_ROUTE_LEN, "a route fits");
        zp_bell_route(x->id, sh->route); /* the DEALER's name, for replies too big for a packet */
        sh->route_len = ZP_BELL_ROUTE_LEN;
        sh->routed = 0;
    }
    int fast = rc == 0 && h->shm_zmq_endpoint && h->shm_zmq_endpoint[0] && !c->curve &&
               strlen(h->shm_zmq_endpoint) < sizeof(sh->fast);
    if (fast) /* the headers too: the next socket connects to the shard's unix socket */
        snprintf(sh->fast, sizeof(sh->fast), "%s", h->shm_zmq_endpoint);
    if (fast || (x && x->bell)) /* this socket is answered (only the HELLO is out); the
                                   next takes the route */
        zp_shard_reset(c, k);
}

int zp_xport_shm_poll(zeps_client *c, long timeout_ms)
{
    int nb = 0;
    for (int k = 0; k < c->nshards; k++)
        nb += c->shards[k].xp == &zp_xport_shm && ((shmc *)c->shards[k].xs)->bell;
    if (!nb)
        return zmq_poll(c->items, c->npoll, timeout_ms);
    int need = c->npoll + c->nshards;
    if (need > c->bell_cap) {
        c->bell_items = zp_alloc_resize(c->bell_items, (size_t)need * sizeof(zmq_pollitem_t));
        c->bell_cap = need;
    }
    zmq_pollitem_t *it = c->bell_items;
    memcpy(it, c->items, (size_t)c->npoll * sizeof(zmq_pollitem_t));
    for (int k = 0; k < c->nshards; k++) {
        const zp_shard *sh = &c->shards[k];
        int fd = sh->xp == &zp_xport_shm && ((shmc *)sh->xs)->bell ? ((shmc *)sh->xs)->sock : -1;
        it[c->npoll + k] = (zmq_pollitem_t){.socket = NULL, .fd = fd, .events = ZMQ_POLLIN};
    }
    int n = zmq_poll(it, need, timeout_ms);
    for (int i = 0; i < c->npoll; i++)
        c->items[i].revents = it[i].revents;
    for (int k = 0; k < c->nshards && n > 0; k++)
        if (it[c->npoll + k].fd >= 0 && it[c->npoll + k].revents) {
            ((shmc *)c->shards[k].xs)->ready = 1; /* readable, or closed */
            c->items[k].revents |= ZMQ_POLLIN;
        }
    return n;
}

/* The shard asks for request req_id again over ZeroMQ (its reply did not
 * fit a packet and the DEALER had no route yet): due at once. */
static void on_resend(zp_shard *sh, uint64_t req_id)
{
    for (zp_req_sub *s = sh->out; s; s = s->next)
        if (s->req_id == req_id) {
            use_zmq(sh->xs, s);
            s->deadline_ns = 0;
            return;
        }
}

int zp_xport_shm_recv(zeps_client *c, int k, zp_frames *m)
{
    zp_shard *sh = &c->shards[k];
    shmc *x = sh->xp == &zp_xport_shm ? sh->xs : NULL;
    while (x && x->bell && x->ready) {
        struct iovec iov = {.iov_base = x->rbuf, .iov_len = ZP_BELL_MAX};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n = recvmsg(x->sock, &msg, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            x->ready = 0;
            return 0;
        }
        if (n <= 0) { /* the shard closed its end: back to the cluster file's endpoint */
            zp_info("shard %d: the attach connection closed (%s); requests over %s", k,
                    n < 0 ? strerror(errno) : "the shard stopped or was killed", sh->endpoint);
            let_go(sh);
            zp_shard_reset(c, k);
            return 0;
        }
        char err[256];
        int kind;
        uint64_t req_id;
        *m = (zp_frames){.n = 0};
        if (zp_bell_parse(x->rbuf, (size_t)n, (msg.msg_flags & MSG_TRUNC) != 0, m, &kind, &req_id,
                          err, sizeof(err)) != 0)
            zp_warn("shard %d: %s; ignored", k, err);
        else if (kind == ZP_BELL_RESEND)
            on_resend(sh, req_id);
        else
            return 1;
    }
    return 0;
}

zp_shmseg *zp_xport_shm_segment(const zp_shard *sh, uint64_t *id)
{
    if (sh->xp != &zp_xport_shm)
        return NULL;
    *id = ((const shmc *)sh->xs)->id;
    return ((const shmc *)sh->xs)->seg;
}

int zp_xport_shm_socket(const zp_shard *sh)
{
    return sh->xp == &zp_xport_shm ? ((const shmc *)sh->xs)->sock : -1;
}
