/*
 * shmhost.c - the shard's side of the shared-memory data path; see
 * shmhost.h and docs/protocol.md, "Shared memory".
 *
 * The listener is a SOCK_SEQPACKET unix socket in the abstract namespace:
 * it leaves no file behind when the shard is killed, and only processes of
 * the same network namespace (in practice: the same host) can reach it.
 * Each client keeps its connection open for as long as its segment is
 * attached: its end of file (the client exited or was killed) detaches the
 * segment, which is unmapped when the last frame on it is released, so a
 * killed client leaves nothing mapped here. Once attached (and without
 * CURVE) the connection carries the client's requests and their replies,
 * one packet each (common/bell.h): the headers skip ZeroMQ.
 */
#define _GNU_SOURCE
#include "shmhost.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "bell.h"
#include "errors.h"
#include "log.h"
#include "rng.h"
#include "shmmsg.h"
#include "shmseg.h"
#include "zeps_errors.h"

#define MAX_CONNS 4096
/* Packets read per wake-up of one connection: the others get their turn. */
#define PACKETS_PER_WAKE 64
/* Packets read before a ZeroMQ message: every one a worker sent before it
 * (its requests in flight and their retries after a stalled shard's
 * timeouts), so none is overtaken; bounded so a flood cannot starve the
 * ROUTER. */
#define PACKETS_BEFORE_ZMQ 4096
/* An attach connection's identity: a zero, then its serial (little-endian). */
#define IDENT_LEN 9

struct zp_shmconn {
    zp_shmhost *x;
    int fd;
    uv_poll_t poll;
    zp_shmseg *seg; /* NULL until attached */
    uint64_t id;    /* the segment's name in requests (shm_segment) */
    uint32_t rank;
    uint64_t inc;
    unsigned char ident[256]; /* the ROUTER identity of its last request */
    size_t ident_len;
    uint64_t serial;   /* its identity as a reply destination (IDENT_LEN) */
    uint64_t requests; /* requests read on it */
};

static void on_conn_closed(uv_handle_t *h)
{
    zp_shmconn *c = h->data;
    close(c->fd);
    zp_shmseg_unref(&c->seg); /* frames still out keep the mapping until released */
    free(c);
}

static void conn_close(zp_shmhost *x, zp_shmconn *c)
{
    for (int i = 0; i < x->nconns; i++)
        if (x->conns[i] == c) {
            x->conns[i] = x->conns[--x->nconns];
            break;
        }
    if (c->seg) {
        x->released++;
        zp_info("shared memory: worker %u's segment %016" PRIx64 " detached", c->rank, c->id);
    }
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, on_conn_closed);
}

/* Answer an attach on c: 0, or a zeps_err with the reason (sent too). */
static void answer(zp_shmconn *c, int code, uint64_t id, const char *text)
{
    zp_shm_ok ok = {.magic = ZP_SHM_MAGIC_OK,
                    .segment = id,
                    .code = code,
                    .flags = code == 0 && c->x->bell ? ZP_SHM_OK_BELL : 0};
    snprintf(ok.text, sizeof(ok.text), "%s", text);
    if (send(c->fd, &ok, sizeof(ok), MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(ok))
        zp_debug("shared memory: answering an attach failed: %s", strerror(errno));
}

/* The attach message on c: check it and map the segment. 0 or -1 (refused). */
static int attach(zp_shmhost *x, zp_shmconn *c, const zp_shm_attach *a, int fd, ssize_t n)
{
    char err[256];
    int rc = 0;
    if (n != (ssize_t)sizeof(*a) || a->magic != ZP_SHM_MAGIC_ATTACH || fd < 0)
        rc = zp_errors_set(err, sizeof(err), ZEPS_EPROTO, "not an attach message with a memfd");
    else if (a->token != zp_shmhost_token(x, a->rank, a->incarnation))
        rc = zp_errors_set(err, sizeof(err), ZEPS_EPROTO,
                           "token of worker %u does not match this shard's HELLO", a->rank);
    else
        rc = zp_shmseg_attach(&c->seg, fd, err, sizeof(err));
    if (rc != 0) {
        x->refused++;
        zp_warn("shared memory: attach refused: %s", err);
        answer(c, rc, 0, err);
        return -1;
    }
    c->rank = a->rank;
    c->inc = a->incarnation;
    c->id = zp_rng_random64() | 1u;
    c->serial = ++x->serial;
    x->attached++;
    zp_info("shared memory: worker %u attached segment %016" PRIx64 " (%" PRIu64 " MiB per area)",
            c->rank, c->id, zp_shmseg_area_bytes(c->seg) >> 20);
    answer(c, 0, c->id, "attached");
    return 0;
}

/* The descriptors a message passed (SCM_RIGHTS): the first one, the
 * others closed at once (one is expected), or -1. */
static int take_fds(struct msghdr *msg, ssize_t n)
{
    int fd = -1;
    for (struct cmsghdr *m = n > 0 ? CMSG_FIRSTHDR(msg) : NULL; m; m = CMSG_NXTHDR(msg, m))
        if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_RIGHTS) {
            int *fds = (int *)CMSG_DATA(m);
            size_t k = (m->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                if (fd < 0)
                    fd = fds[i];
                else
                    close(fds[i]);
            }
        }
    return fd;
}

static void conn_ident(const zp_shmconn *c, zmq_msg_t *f)
{
    zmq_msg_init_size(f, IDENT_LEN);
    uint8_t *b = zmq_msg_data(f);
    b[0] = 0;
    memcpy(b + 1, &c->serial, sizeof(c->serial));
}

/* One packet of n bytes in x->rbuf, read on c: a request to deliver, or
 * bad input answered ERROR (the connection stays: nothing else is lost). */
static void on_packet(zp_shmhost *x, zp_shmconn *c, size_t n, int trunc)
{
    zp_frames m = {.n = 1};
    conn_ident(c, &m.f[0]);
    char err[256];
    int kind = 0;
    uint64_t rid;
    int rc = zp_bell_parse(x->rbuf, n, trunc, &m, &kind, &rid, err, sizeof(err));
    if (rc == 0 && kind != ZP_BELL_MESSAGE)
        rc = zp_errors_set(err, sizeof(err), ZEPS_EPROTO,
                           "a RESEND packet is the shard's to send, not a client's");
    if (rc != 0) {
        x->bell_bad++;
        x->refuse(x->arg, &m.f[0], rc, err);
    } else {
        x->bell_in++;
        c->requests++;
        x->deliver(x->arg, &m);
    }
    zp_wire_frames_close(&m);
}

/* Read and deliver what waits on attached connection c (at most max
 * packets); its end of file or an error closes it. */
static void read_packets(zp_shmhost *x, zp_shmconn *c, int max)
{
    for (int i = 0; i < max; i++) {
        union {
            char buf[CMSG_SPACE(sizeof(int) * 4)];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {.iov_base = x->rbuf, .iov_len = ZP_BELL_MAX};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = ctl.buf,
                             .msg_controllen = sizeof(ctl.buf)};
        ssize_t n = recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        int fd = take_fds(&msg, n);
        if (fd >= 0)
            close(fd); /* no descriptors travel with requests */
        if (n <= 0) {
            conn_close(x, c);
            return;
        }
        on_packet(x, c, (size_t)n, (msg.msg_flags & MSG_TRUNC) != 0);
    }
}

static void on_conn(uv_poll_t *h, int status, int events)
{
    (void)events;
    zp_shmconn *c = h->data;
    if (c->seg && c->x->bell && status >= 0) {
        read_packets(c->x, c, PACKETS_PER_WAKE);
        return;
    }
    zp_shm_attach a;
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = &a, .iov_len = sizeof(a)};
    struct msghdr msg = {.msg_iov = &iov,
                         .msg_iovlen = 1,
                         .msg_control = ctl.buf,
                         .msg_controllen = sizeof(ctl.buf)};
    ssize_t n = status < 0 ? -1 : recvmsg(c->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && status >= 0 && (errno == EAGAIN || errno == EINTR))
        return;
    int fd = take_fds(&msg, n);
    /* end of file, an error, anything after the attach, or a refused attach: gone */
    int keep = n > 0 && !c->seg && attach(c->x, c, &a, fd, n) == 0;
    if (fd >= 0)
        close(fd); /* the mapping keeps the memory */
    if (!keep)
        conn_close(c->x, c);
}

/* A connection from a process of another user is refused: the segment's
 * memory would be shared with it. */
static bool same_user(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == geteuid();
}

static void on_accept(uv_poll_t *h, int status, int events)
{
    (void)events;
    zp_shmhost *x = h->data;
    if (status < 0)
        return;
    for (;;) {
        int fd = accept4(x->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (!same_user(fd) || x->nconns == MAX_CONNS) {
            x->refused++;
            zp_warn("shared memory: a connection refused (%s)",
                    x->nconns == MAX_CONNS ? "too many" : "another user");
            close(fd);
            continue;
        }
        zp_shmconn *c = zp_alloc_zeroed(1, sizeof(*c));
        c->x = x;
        c->fd = fd;
        c->poll.data = c;
        uv_poll_init(x->loop, &c->poll, fd);
        uv_poll_start(&c->poll, UV_READABLE | UV_DISCONNECT, on_conn);
        if (x->nconns == x->cap) {
            x->cap = x->cap ? 2 * x->cap : 16;
            x->conns = zp_alloc_resize(x->conns, (size_t)x->cap * sizeof(*x->conns));
        }
        x->conns[x->nconns++] = c;
    }
}

int zp_shmhost_start(zp_shmhost *x, uv_loop_t *loop, int shard, uint64_t inc, char *err,
                     size_t errlen)
{
    memset(x, 0, sizeof(*x));
    x->lfd = -1;
    x->loop = loop;
    x->key = zp_rng_random64();
    snprintf(x->name, sizeof(x->name), "@zeps-shm-%016" PRIx64 "-%d", inc, shard);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(x->name); /* sun_path[0] = 0: the abstract namespace */
    memcpy(sa.sun_path + 1, x->name + 1, n - 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) !=
            0 ||
        listen(fd, 64) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "unix socket %s: %s", x->name,
                             strerror(e));
    }
    x->lfd = fd;
    x->rbuf = zp_alloc(ZP_BELL_MAX);
    x->lpoll.data = x;
    uv_poll_init(loop, &x->lpoll, fd);
    uv_poll_start(&x->lpoll, UV_READABLE, on_accept);
    x->on = true;
    return 0;
}

static void on_listener_closed(uv_handle_t *h)
{
    zp_shmhost *x = h->data;
    close(x->lfd);
    x->lfd = -1;
}

void zp_shmhost_stop(zp_shmhost *x)
{
    if (!x->on)
        return;
    x->on = false;
    while (x->nconns > 0)
        conn_close(x, x->conns[0]);
    free(x->conns);
    x->conns = NULL;
    free(x->rbuf);
    x->rbuf = NULL;
    x->cap = 0;
    uv_poll_stop(&x->lpoll);
    uv_close((uv_handle_t *)&x->lpoll, on_listener_closed);
}

uint64_t zp_shmhost_token(const zp_shmhost *x, uint32_t rank, uint64_t incarnation)
{
    return zp_rng_mix64(x->key ^ zp_rng_mix64(incarnation ^ ((uint64_t)rank << 32))) | 1u;
}

static zp_shmconn *by_id(zp_shmhost *x, uint64_t id)
{
    for (int i = 0; i < x->nconns; i++)
        if (x->conns[i]->seg && x->conns[i]->id == id)
            return x->conns[i];
    return NULL;
}

static void frame_free(void *data, void *hint)
{
    zp_shmseg *g = hint;
    zp_shmseg_release(g, data);
    zp_shmseg_unref(&g);
}

int zp_shmhost_resolve(zp_shmhost *x, const zmq_msg_t *identity, const Zeps__Header *h,
                       zp_frames *m, char *err, size_t errlen)
{
    if (!h->shm_segment && !h->shm_length)
        return 0;
    zp_shmconn *c = h->shm_segment ? by_id(x, h->shm_segment) : NULL;
    if (!c) /* this shard restarted: read as if without payload, so the worker hears
               ERESTARTED (or the op's payload error) as over TCP */
        return 0;
    if (c->rank != h->rank || c->inc != h->incarnation)
        return zp_errors_set(err, errlen, ZEPS_ESHM,
                             "shared-memory segment %016" PRIx64 " belongs to worker %u "
                             "incarnation %016" PRIx64 ", not to this request's",
                             c->id, c->rank, c->inc);
    size_t il = zmq_msg_size((zmq_msg_t *)identity);
    c->ident_len = il <= sizeof(c->ident) ? il : 0;
    memcpy(c->ident, zmq_msg_data((zmq_msg_t *)identity), c->ident_len);
    if (!h->shm_length)
        return 0;
    if (m->n != 2 || m->dropped)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a message with a shared-memory descriptor carries no payload "
                             "frame (it has %d)",
                             m->n + m->dropped - 2);
    zp_shm_desc d = {h->shm_offset, h->shm_length, h->shm_generation};
    const void *data;
    int rc = zp_shmseg_take(c->seg, &d, &data, err, errlen);
    if (rc != 0)
        return rc;
    /* the frame holds the buffer and a reference on the segment until it is closed */
    zmq_msg_init_data(&m->f[m->n++], (void *)data, d.length, frame_free, zp_shmseg_ref(c->seg));
    m->bytes += d.length;
    return 0;
}

/* Copy a reply's payload into c's reply area and name it in rep: true, or
 * false (no room). */
static bool place_in(zp_shmconn *c, Zeps__Header *rep, const void *data, size_t len)
{
    zp_shm_desc d;
    void *dst;
    if (len == 0 || zp_shmseg_alloc(c->seg, len, &d, &dst) != 0)
        return false;
    memcpy(dst, data, len);
    zp_shmseg_written(c->seg, &d, 0);
    rep->shm_offset = d.offset;
    rep->shm_length = d.length;
    rep->shm_generation = d.generation;
    return true;
}

bool zp_shmhost_place(zp_shmhost *x, const zmq_msg_t *identity, Zeps__Header *rep, const void *data,
                      size_t len)
{
    size_t il = zmq_msg_size((zmq_msg_t *)identity);
    const void *id = zmq_msg_data((zmq_msg_t *)identity);
    for (int i = 0; i < x->nconns; i++) {
        zp_shmconn *c = x->conns[i];
        if (!c->seg || c->ident_len != il || !il || memcmp(c->ident, id, il) != 0)
            continue;
        return place_in(c, rep, data, len);
    }
    return false;
}

bool zp_shmhost_is_conn(const zmq_msg_t *identity)
{
    return zmq_msg_size((zmq_msg_t *)identity) == IDENT_LEN &&
           ((const uint8_t *)zmq_msg_data((zmq_msg_t *)identity))[0] == 0;
}

static zp_shmconn *by_ident(zp_shmhost *x, const zmq_msg_t *identity)
{
    uint64_t serial;
    memcpy(&serial, (const uint8_t *)zmq_msg_data((zmq_msg_t *)identity) + 1, sizeof(serial));
    for (int i = 0; i < x->nconns; i++)
        if (x->conns[i]->seg && x->conns[i]->serial == serial)
            return x->conns[i];
    return NULL;
}

void zp_shmhost_send(zp_shmhost *x, const zmq_msg_t *identity, const Zeps__Header *rep,
                     const void *data, size_t len, zp_shmhost_out *out)
{
    out->bytes = 0;
    out->route = false;
    zp_shmconn *c = by_ident(x, identity);
    if (!c) {
        zp_debug("reply to a closed attach connection dropped");
        return;
    }
    out->rep = *rep;
    out->payload = data != NULL && !place_in(c, &out->rep, data, len);
    int rc = zp_bell_send(c->fd, &out->rep, out->payload, data, len);
    if (rc == 0) {
        out->bytes = zeps__header__get_packed_size(&out->rep) + (out->payload ? len : 0);
        return;
    }
    /* too big, or the connection is full: the client's DEALER takes it */
    out->route = true;
    out->too_big = rc == ZEPS_ESIZE;
    zmq_msg_init_size(&out->dealer, ZP_BELL_ROUTE_LEN);
    zp_bell_route(c->id, zmq_msg_data(&out->dealer));
}

void zp_shmhost_unrouted(zp_shmhost *x, const zmq_msg_t *identity, zp_shmhost_out *out)
{
    zmq_msg_close(&out->dealer);
    zp_shmconn *c = by_ident(x, identity);
    if (c && out->too_big) { /* the client asks again over ZeroMQ: answered there */
        x->bell_resent++;
        zp_debug("a %s reply does not fit a packet, and worker %u's DEALER is not connected: "
                 "RESEND",
                 zp_wire_op_name(out->rep.op), c->rank);
        zp_bell_send_resend(c->fd, out->rep.req_id);
    } else {
        zp_debug("reply on an attach connection dropped: the connection is full and worker "
                 "%u's DEALER is not connected",
                 c ? c->rank : 0);
    }
}

void zp_shmhost_drain(zp_shmhost *x)
{
    if (!x->bell)
        return;
    for (int i = x->nconns - 1; i >= 0; i--) /* read_packets may close (and drop) conns[i] */
        if (i < x->nconns && x->conns[i]->seg)
            read_packets(x, x->conns[i], PACKETS_BEFORE_ZMQ);
}

uint64_t zp_shmhost_requests(const zp_shmhost *x, uint32_t rank)
{
    uint64_t n = 0;
    for (int i = 0; i < x->nconns; i++)
        if (x->conns[i]->seg && x->conns[i]->rank == rank)
            n += x->conns[i]->requests;
    return n;
}

const char *zp_shmhost_transport(const zp_shmhost *x, uint32_t rank)
{
    for (int i = 0; i < x->nconns; i++)
        if (x->conns[i]->seg && x->conns[i]->rank == rank && x->conns[i]->ident_len)
            return "shm";
    return "tcp";
}
