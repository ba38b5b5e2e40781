/*
 * ctl_bench_raw.c - `zepsctl bench`: the raw ZeroMQ side. A forked child
 * (no exec: it runs raw_child_main, before this process has any ZeroMQ
 * context) binds a ROUTER on loopback and answers the zeps request pattern
 * with no protocol at all: a push is a tag and a payload, answered by the
 * tag; a pull is a tag, answered by the tag and a payload sent without
 * copying. This process drives it through zp_ctl_bench_raw_ops.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <sys/wait.h>

#include <zmq.h>

#include "ctl_bench.h"
#include "now.h"

static void raw_sockopts(void *s)
{
    int zero = 0;
    int64_t unlimited = -1;
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &unlimited, sizeof unlimited);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
}

static int rcvmore(void *s)
{
    int more = 0;
    size_t len = sizeof more;
    zmq_getsockopt(s, ZMQ_RCVMORE, &more, &len);
    return more;
}

static void no_free(void *data, void *hint)
{
    (void)data, (void)hint;
}

/* The raw server, one request: push [id][tag][payload] -> [id][tag];
 * pull [id][tag] -> [id][tag][payload], the payload sent without copying
 * from one preallocated buffer. The tag's high 32 bits give the payload
 * length in floats, as a zeps header gives the element count. */
static int raw_serve_one(void *s, const char *payload, size_t max)
{
    zmq_msg_t id, data;
    uint64_t tag;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, s, 0) < 0 || zmq_recv(s, &tag, sizeof tag, 0) != sizeof tag)
        return -1;
    bool push = rcvmore(s);
    while (rcvmore(s)) { /* the pushed payload, received in place and dropped */
        zmq_msg_init(&data);
        zmq_msg_recv(&data, s, 0);
        zmq_msg_close(&data);
    }
    size_t bytes = (size_t)(tag >> 32) * sizeof(float);
    if (zmq_msg_send(&id, s, ZMQ_SNDMORE) < 0 ||
        zmq_send(s, &tag, sizeof tag, push ? 0 : ZMQ_SNDMORE) != sizeof tag)
        return -1;
    if (push)
        return 0;
    zmq_msg_init_data(&data, (void *)payload, bytes <= max ? bytes : 0, no_free, NULL);
    return zmq_msg_send(&data, s, 0) < 0 ? -1 : 0;
}

/* What the raw child is given: the pipe to write its endpoint to, and the
 * largest message. */
typedef struct raw_child_arg {
    int wfd;
    size_t max;
    char bind[128]; /* "tcp://127.0.0.1:*", or an ipc:// path (--transport shm) */
} raw_child_arg;

static void raw_child_main(void *arg) __attribute__((noreturn));
static void raw_child_main(void *arg)
{
    int wfd = ((raw_child_arg *)arg)->wfd;
    size_t max = ((raw_child_arg *)arg)->max;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    raw_sockopts(s);
    char ep[256] = "";
    size_t len = sizeof ep;
    if (zmq_bind(s, ((raw_child_arg *)arg)->bind) != 0 ||
        zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len) != 0)
        _exit(1);
    char *payload = (char *)buf_new(max, 1.0f);
    if (write(wfd, ep, strlen(ep) + 1) < 0)
        _exit(1);
    close(wfd);
    while (raw_serve_one(s, payload, max) == 0)
        ;
    _exit(2); /* normally it ends by SIGTERM from stop_child */
}

/* Fork the raw server (it binds an ephemeral port and reports its endpoint
 * through a pipe) and connect a DEALER to it. */
int zp_ctl_bench_raw_open(bench *b)
{
    int fds[2], timeout = 60000;
    char ep[256] = "";
    if (pipe(fds) != 0)
        return ZEPS_EIO;
    /* its own process group (a terminal's ^C reaches only zepsctl, which
     * then stops it in order), and gone if zepsctl dies */
    zp_spawn_opts so = {.log_fd = -1, .flags = ZP_SPAWN_GROUP, .deathsig = SIGKILL};
    raw_child_arg arg = {.wfd = fds[1], .max = max_size(&b->o), .bind = "tcp://127.0.0.1:*"};
    if (b->o.shm)
        snprintf(arg.bind, sizeof arg.bind, "ipc://%s/raw.ipc", b->dir);
    b->raw = zp_spawn_fork(raw_child_main, &arg, &so);
    close(fds[1]);
    ssize_t n = b->raw > 0 ? read(fds[0], ep, sizeof ep - 1) : -1;
    close(fds[0]);
    if (n <= 0) {
        fprintf(stderr, "bench: the raw ZeroMQ child failed to start\n");
        return ZEPS_ETRANSPORT;
    }
    raw_side *r = &b->r;
    r->ctx = zmq_ctx_new();
    r->sock = zmq_socket(r->ctx, ZMQ_DEALER);
    raw_sockopts(r->sock);
    zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout); /* nothing blocks forever */
    r->push = b->push;
    return zmq_connect(r->sock, ep) == 0 ? 0 : ZEPS_ETRANSPORT;
}

/* With linger 0, closing drops what ZeroMQ still holds and releases our
 * buffers, so they may be freed after this. */
void zp_ctl_bench_raw_close(bench *b)
{
    if (b->r.sock)
        zmq_close(b->r.sock);
    if (b->r.ctx)
        zmq_ctx_term(b->r.ctx);
    b->r.sock = b->r.ctx = NULL;
    stop_child(&b->raw, SIGTERM, "raw ZeroMQ child");
}

/* ZeroMQ's I/O thread is done with a payload buffer we sent. */
static void raw_released(void *data, void *hint)
{
    (void)data;
    atomic_fetch_sub_explicit((atomic_int *)hint, 1, memory_order_release);
}

static int raw_fail(raw_side *r, const char *what)
{
    fprintf(stderr, "bench: raw %s: %s\n", what, errno ? zmq_strerror(errno) : "bad reply");
    r->broken = true;
    return ZEPS_ETRANSPORT;
}

static void raw_select(void *ctx, int i, size_t bytes)
{
    ((raw_side *)ctx)->bytes = bytes;
}

static int raw_start(void *ctx, int op, int slot)
{
    if (op == OP_PULL_VIEW)
        op = OP_PULL;
    raw_side *r = ctx;
    zmq_msg_t m;
    if (r->broken)
        return ZEPS_ETRANSPORT;
    uint64_t tag = ((uint64_t)(r->bytes / sizeof(float)) << 32) | r->seq++;
    r->tags[slot] = tag;
    if (zmq_send(r->sock, &tag, sizeof tag, op == OP_PUSH ? ZMQ_SNDMORE : 0) != sizeof tag)
        return raw_fail(r, "send");
    if (op == OP_PULL)
        return 0;
    atomic_fetch_add_explicit(&r->inflight[slot], 1, memory_order_relaxed);
    zmq_msg_init_data(&m, r->push[slot], r->bytes, raw_released, &r->inflight[slot]);
    if (zmq_msg_send(&m, r->sock, 0) < 0) {
        zmq_msg_close(&m); /* calls raw_released */
        return raw_fail(r, "send");
    }
    return 0;
}

/* Until ZeroMQ released the slot's buffer (at once, nearly always: the
 * reply proves the payload was sent). Bounded: 10 s. */
static int raw_wait_released(raw_side *r, int slot)
{
    uint64_t t0 = zp_now_ns();
    while (atomic_load_explicit(&r->inflight[slot], memory_order_acquire)) {
        if (zp_now_ns() - t0 > 10000000000ull)
            return errno = ETIMEDOUT, raw_fail(r, "buffer release");
        sched_yield();
    }
    return 0;
}

static int raw_finish(void *ctx, int op, int slot)
{
    if (op == OP_PULL_VIEW)
        op = OP_PULL;
    raw_side *r = ctx;
    uint64_t tag;
    int n;
    if (r->broken)
        return ZEPS_ETRANSPORT;
    while ((n = zmq_recv(r->sock, &tag, sizeof tag, 0)) < 0 && errno == EINTR && !zp_ctl_bench_stop)
        ;
    if (n != sizeof tag)
        return raw_fail(r, "recv");
    errno = 0;
    if (tag != r->tags[slot] || rcvmore(r->sock) != (op == OP_PULL))
        return raw_fail(r, "reply");
    if (op == OP_PUSH)
        return raw_wait_released(r, slot);
    zmq_msg_t m; /* the pulled payload, received in place and not copied */
    zmq_msg_init(&m);
    n = zmq_msg_recv(&m, r->sock, 0);
    size_t got = zmq_msg_size(&m);
    zmq_msg_close(&m);
    return n < 0 || got != r->bytes ? raw_fail(r, "pull payload") : 0;
}

const side_ops zp_ctl_bench_raw_ops = {
    .name = "raw", .select = raw_select, .start = raw_start, .finish = raw_finish};
