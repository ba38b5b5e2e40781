/*
 * ctl_bench.c - `zepsctl bench`: zeps against raw ZeroMQ on loopback TCP.
 *
 * One run starts two children: a real zeps-server (1 shard, async, from a
 * cluster file written into a temporary directory) and a forked raw ZeroMQ
 * ROUTER loop that answers the same request pattern with no protocol at all.
 * This process is the only client of both. Both sides are driven through
 * one ops table (start a request from slot i, finish slot i) by the same
 * ring and latency loops, so they do the same work pattern: W requests in
 * flight, one payload buffer per slot that is not reused before ZeroMQ
 * released it, zero-copy sends both ways, pulled payloads received in place
 * (zeps then copies them into the caller's buffer, as its API promises).
 * For each size and repetition the zeps cell runs, then the raw cell, so
 * machine noise hits both alike; the figures printed are medians.
 *
 * With --curve a second zeps-server runs with CurveZMQ on (keys made with
 * the same code as `zepsctl keygen`, in the temporary directory) and a
 * third cell, zeps over CURVE, follows the other two in every repetition, so
 * the cost of encryption is read off one run.
 *
 * Units: payload sizes are binary (4 MB = 4 MiB); throughputs are payload
 * bytes per second in MB/s = 10^6 B/s; latencies are round trips in µs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "ctl.h"
#include "curve.h"
#include "spawn.h"
#include "util.h"
#include "zeps.h"
#include "zeps.pb-c.h"

#define MAX_SIZES  16
#define MAX_WINDOW 64
#define MAX_REPS   99
#define MAX_BYTES  ((size_t)512 << 20)
#define MIN_TIMED  5  /* requests per throughput phase, at least */
#define MIN_RTT    20 /* round trips per latency phase, at least */
#define MEM_LEN    ((uint64_t)1 << 20)
#define ACCEPT     0.7 /* the project's bar: zeps push+pull >= 0.7 x raw at 4 MB, 32 MB */

/* OP_PULL_VIEW: a zeps pull through the zero-copy view API; raw ZeroMQ's pull
 * already leaves the payload in its receive buffer, so raw does OP_PULL. */
enum { OP_PUSH = 0, OP_PULL = 1, OP_PULL_VIEW = 2 };
enum { SIDE_ZEPS = 0, SIDE_RAW = 1, SIDE_CURVE = 2, NSIDES = 3 };

/* The figures of one cell, a plain vector so that medians and JSON are loops. */
enum {
    F_PUSH, F_PULL, F_BOTH, F_PUSH_P50, F_PUSH_P99, F_PULL_P50, F_PULL_P99, F_VIEW, F_BOTH_VIEW, NF
};
static const char *const field_names[NF] = {
    "push_MBps",       "pull_MBps",       "push_pull_MBps",
    "push_rtt_p50_us", "push_rtt_p99_us", "pull_rtt_p50_us",
    "pull_rtt_p99_us", "pull_view_MBps",  "push_pull_view_MBps"};
typedef struct cell {
    double v[NF];
} cell;

typedef struct bench_opts {
    int window, reps;
    double seconds;
    bool keep;
    int only;   /* -1: every side; else SIDE_ZEPS or SIDE_RAW (for profiling) */
    bool curve; /* also zeps over CURVE (SIDE_CURVE) */
    const char *json;
    int nsizes;
    size_t sizes[MAX_SIZES];
} bench_opts;

/* One system under test. select() makes size index i (of `bytes` bytes)
 * current; start() sends request `op` from slot `slot`; finish() waits for
 * that slot's reply and until its buffer is free again. */
typedef struct side_ops {
    const char *name;
    void (*select)(void *ctx, int i, size_t bytes);
    int (*start)(void *ctx, int op, int slot);
    int (*finish)(void *ctx, int op, int slot);
} side_ops;

typedef struct zeps_side {
    zeps_client *c;
    uint32_t tables[MAX_SIZES], table;
    uint64_t count;
    float **push, **pull;
    zeps_req *reqs[MAX_WINDOW];
} zeps_side;

typedef struct raw_side {
    void *ctx, *sock;
    size_t bytes;
    uint32_t seq;
    bool broken; /* after a transport error replies can no longer be matched */
    float **push;
    uint64_t tags[MAX_WINDOW];
    atomic_int inflight[MAX_WINDOW]; /* per slot: payloads ZeroMQ still holds */
} raw_side;

typedef struct bench {
    bench_opts o;
    char dir[64];
    pid_t server, raw, server_curve;
    float *push[MAX_WINDOW], *pull[MAX_WINDOW];
    zeps_side z, zc; /* zc: the client of the CURVE server */
    raw_side r;
    cell res[MAX_SIZES][NSIDES];
    double mem_sgd, mem_adam; /* server bytes per parameter */
} bench;

/* The one piece of static state: set by SIGINT/SIGTERM, polled by the loops. */
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* ---- options ---------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl bench [options]\n\n"
               "Push/pull throughput and round-trip latency of zeps against a raw ZeroMQ\n"
               "DEALER/ROUTER pair doing the same pattern, both on loopback TCP.\n\n"
               "  --sizes LIST   payload sizes (default 64,4K,256K,4M,32M; K, M binary)\n"
               "  --window N     requests in flight for throughput (default 4, max 64)\n"
               "  --reps N       repetitions per cell; medians are printed (default 3)\n"
               "  --seconds S    target time per throughput phase (default 1.0)\n"
               "  --json PATH    also write the results as JSON\n"
               "  --keep         keep the temporary directory (cluster file, server log)\n"
               "  --only SIDE    measure only 'zeps' or 'raw' (for profiling)\n"
               "  --curve        also measure zeps with CurveZMQ on (a second server)\n");
}

/* "64,4K,256KB,4M,32MiB" -> o->sizes (K and M binary); -1 if malformed. */
static int parse_sizes(bench_opts *o, const char *list)
{
    char *copy = zp_xstrdup(list), *save = NULL, *end;
    o->nsizes = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        errno = 0;
        unsigned long long v = strtoull(t, &end, 10);
        int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : 0;
        end += shift != 0;
        if (errno || end == t || (*end && strcasecmp(end, "b") && strcasecmp(end, "ib")) ||
            (v <<= shift) < 4 || v % 4 || v > MAX_BYTES || o->nsizes == MAX_SIZES) {
            fprintf(stderr,
                    "zepsctl bench: bad size '%s' (multiples of 4 B up to 512M, "
                    "at most %d sizes)\n",
                    t, MAX_SIZES);
            free(copy);
            return -1;
        }
        o->sizes[o->nsizes++] = (size_t)v;
    }
    free(copy);
    return o->nsizes > 0 ? 0 : -1;
}

/* Returns 0 to run, 1 after --help, -1 on a usage error. */
static int parse_opts(bench_opts *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"sizes", required_argument, NULL, 's'}, {"window", required_argument, NULL, 'w'},
        {"reps", required_argument, NULL, 'r'},  {"seconds", required_argument, NULL, 't'},
        {"json", required_argument, NULL, 'j'},  {"keep", no_argument, NULL, 'k'},
        {"only", required_argument, NULL, 'o'},  {"curve", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    *o = (bench_opts){.window = 4, .reps = 3, .seconds = 1.0, .only = -1};
    parse_sizes(o, "64,4K,256K,4M,32M");
    optind = 0; /* a full rescan; argv[0] is the subcommand name */
    int ch, bad = 0;
    while ((ch = getopt_long(argc, argv, "s:w:r:t:j:ko:h", longs, NULL)) != -1) {
        if (ch == 's')
            bad |= parse_sizes(o, optarg) != 0;
        else if (ch == 'w')
            o->window = atoi(optarg);
        else if (ch == 'r')
            o->reps = atoi(optarg);
        else if (ch == 't')
            o->seconds = atof(optarg);
        else if (ch == 'j')
            o->json = optarg;
        else if (ch == 'k')
            o->keep = true;
        else if (ch == 'c')
            o->curve = true;
        else if (ch == 'o')
            o->only = strcmp(optarg, "raw") == 0 ? SIDE_RAW : SIDE_ZEPS;
        else if (ch == 'h')
            return usage(stdout), 1;
        else
            bad = 1;
    }
    if (bad || optind < argc || o->window < 1 || o->window > MAX_WINDOW || o->reps < 1 ||
        o->reps > MAX_REPS || !(o->seconds > 0 && o->seconds <= 3600)) {
        fprintf(stderr, "zepsctl bench: bad arguments (window 1..%d, reps 1..%d, seconds > 0)\n",
                MAX_WINDOW, MAX_REPS);
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- small helpers ---------------------------------------------------- */

static const char *size_label(size_t bytes, char *buf, size_t len)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, len, "%zu MB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, len, "%zu KB", bytes >> 10);
    else
        snprintf(buf, len, "%zu B", bytes);
    return buf;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Each field's median over n cells (fields independently). */
static cell cell_median(const cell *c, int n)
{
    cell m;
    double v[MAX_REPS];
    for (int f = 0; f < NF; f++) {
        for (int i = 0; i < n; i++)
            v[i] = c[i].v[f];
        qsort(v, (size_t)n, sizeof(double), cmp_double);
        m.v[f] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
    return m;
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

static size_t max_size(const bench_opts *o)
{
    size_t m = 0;
    for (int i = 0; i < o->nsizes; i++)
        m = o->sizes[i] > m ? o->sizes[i] : m;
    return m;
}

static float *buf_new(size_t bytes, float value)
{
    float *p = zp_xmalloc(bytes);
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        p[i] = value; /* also faults every page in before anything is timed */
    return p;
}

/* Send `sig` to child *pid, wait up to 5 s, then SIGKILL. Sets *pid to 0. */
static void stop_child(pid_t *pid, int sig, const char *what)
{
    int status = 0;
    if (*pid <= 0)
        return;
    int rc = zp_spawn_stop(*pid, sig, 5.0, &status);
    if (rc == 0) {
        fprintf(stderr, "bench: %s did not stop within 5 s; killing it\n", what);
    } else if (rc == 1 && WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench: %s exited with status %d\n", what, WEXITSTATUS(status));
    }
    *pid = 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* ---- the measurement loops, shared by both sides ---------------------- */

/* Keep `window` requests of `op` in flight until at least min_n were issued
 * and `seconds` passed, then wait for all. *n requests completed in *secs.
 * Every request started is finished, also after an error. */
static int ring(const side_ops *s, void *ctx, int op, int window, long min_n, double seconds,
                long *n, double *secs)
{
    long issued = 0, done = 0;
    int rc = 0;
    double t0 = zp_now_s();
    for (;;) {
        if (issued - done == window && (rc = s->finish(ctx, op, (int)(done++ % window))) != 0)
            break;
        if (g_stop)
            rc = ZEPS_ECLOSED;
        if (rc != 0 || (issued >= min_n && zp_now_s() - t0 >= seconds))
            break;
        if ((rc = s->start(ctx, op, (int)(issued % window))) != 0)
            break;
        issued++;
    }
    for (; done < issued; done++) {
        int r2 = s->finish(ctx, op, (int)(done % window));
        rc = rc ? rc : r2;
    }
    *n = done;
    *secs = zp_now_s() - t0;
    return rc;
}

/* Round trips of `op`, one in flight, for `seconds` (at least MIN_RTT);
 * p50 and p99 (nearest rank) in µs. */
static int latency(const side_ops *s, void *ctx, int op, double seconds, double *p50, double *p99)
{
    size_t n = 0, cap = 4096;
    double *v = zp_xmalloc(cap * sizeof(double)), t0 = zp_now_s();
    int rc = 0;
    while (n < MIN_RTT || zp_now_s() - t0 < seconds) {
        uint64_t a = zp_now_ns();
        if (g_stop || (rc = s->start(ctx, op, 0)) != 0 || (rc = s->finish(ctx, op, 0)) != 0) {
            rc = rc ? rc : ZEPS_ECLOSED;
            break;
        }
        if (n == cap)
            v = zp_xrealloc(v, (cap *= 2) * sizeof(double));
        v[n++] = (double)(zp_now_ns() - a) * 1e-3;
    }
    if (rc == 0) {
        qsort(v, n, sizeof(double), cmp_double);
        *p50 = v[(size_t)ceil(0.50 * (double)n) - 1];
        *p99 = v[(size_t)ceil(0.99 * (double)n) - 1];
    }
    free(v);
    return rc;
}

/* A throughput phase after a warm-up of 2 windows: payload bytes moved and
 * the seconds it took. */
static int throughput(const bench *b, const side_ops *s, void *ctx, int op, size_t bytes,
                      double *moved, double *secs)
{
    long n;
    int w = b->o.window;
    int rc = ring(s, ctx, op, w, 2L * w, 0.0, &n, secs);
    if (rc == 0)
        rc = ring(s, ctx, op, w, MIN_TIMED, b->o.seconds, &n, secs);
    *moved = (double)n * (double)bytes;
    return rc;
}

/* Measure one cell (one side, one size, one repetition) into *out. */
static int measure_cell(const bench *b, const side_ops *s, void *ctx, int si, int rep, cell *out)
{
    size_t bytes = b->o.sizes[si];
    double *v = out->v, pb, pt, lb, lt;
    char lbl[32];
    size_label(bytes, lbl, sizeof lbl);
    s->select(ctx, si, bytes);
    double vb, vt;
    int rc = throughput(b, s, ctx, OP_PUSH, bytes, &pb, &pt);
    if (rc == 0)
        rc = throughput(b, s, ctx, OP_PULL, bytes, &lb, &lt);
    if (rc == 0)
        rc = throughput(b, s, ctx, OP_PULL_VIEW, bytes, &vb, &vt);
    if (rc != 0)
        return rc;
    v[F_PUSH] = pb / pt / 1e6;
    v[F_PULL] = lb / lt / 1e6;
    v[F_BOTH] = (pb + lb) / (pt + lt) / 1e6;
    v[F_VIEW] = vb / vt / 1e6;
    v[F_BOTH_VIEW] = (pb + vb) / (pt + vt) / 1e6;
    fprintf(stderr,
            "bench: %s push %s ... %.1f MB/s, pull %.1f MB/s (view %.1f), push+pull %.1f MB/s "
            "(rep %d/%d)\n",
            lbl, s->name, v[F_PUSH], v[F_PULL], v[F_VIEW], v[F_BOTH], rep + 1, b->o.reps);
    rc = latency(s, ctx, OP_PUSH, b->o.seconds / 2, &v[F_PUSH_P50], &v[F_PUSH_P99]);
    if (rc == 0)
        rc = latency(s, ctx, OP_PULL, b->o.seconds / 2, &v[F_PULL_P50], &v[F_PULL_P99]);
    if (rc == 0)
        fprintf(stderr, "bench: %s rtt %s ... push p50/p99 %.0f/%.0f µs, pull %.0f/%.0f µs\n", lbl,
                s->name, v[F_PUSH_P50], v[F_PUSH_P99], v[F_PULL_P50], v[F_PULL_P99]);
    return rc;
}

/* ---- raw ZeroMQ side -------------------------------------------------- */

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
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0 ||
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
static int raw_open(bench *b)
{
    int fds[2], timeout = 60000;
    char ep[256] = "";
    if (pipe(fds) != 0)
        return ZEPS_EIO;
    /* its own process group (a terminal's ^C reaches only zepsctl, which
     * then stops it in order), and gone if zepsctl dies */
    zp_spawn_opts so = {.log_fd = -1, .flags = ZP_SPAWN_GROUP, .deathsig = SIGKILL};
    raw_child_arg arg = {.wfd = fds[1], .max = max_size(&b->o)};
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
static void raw_close(bench *b)
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
    while ((n = zmq_recv(r->sock, &tag, sizeof tag, 0)) < 0 && errno == EINTR && !g_stop)
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

static const side_ops raw_ops = {
    .name = "raw", .select = raw_select, .start = raw_start, .finish = raw_finish};

/* ---- zeps side -------------------------------------------------------- */

static void zs_select(void *ctx, int i, size_t bytes)
{
    zeps_side *z = ctx;
    z->table = z->tables[i];
    z->count = bytes / sizeof(float);
}

static int zs_report(zeps_side *z, int op, int rc)
{
    if (rc != 0)
        fprintf(stderr, "bench: zeps %s: %s\n", op == OP_PUSH ? "push" : "pull",
                zeps_last_error(z->c));
    return rc;
}

static int zs_start(void *ctx, int op, int slot)
{
    zeps_side *z = ctx;
    zeps_req **req = &z->reqs[slot];
    if (op == OP_PUSH)
        return zs_report(z, op,
                         zeps_push_start(z->c, z->table, z->push[slot], 0, z->count, 0, req));
    if (op == OP_PULL_VIEW)
        return zs_report(z, op, zeps_pull_view_start(z->c, z->table, 0, z->count, 0, req));
    return zs_report(z, op, zeps_pull_start(z->c, z->table, z->pull[slot], 0, z->count, 0, req));
}

static int zs_finish(void *ctx, int op, int slot)
{
    zeps_side *z = ctx;
    if (op != OP_PULL_VIEW)
        return zs_report(z, op, zeps_wait(&z->reqs[slot]));
    zeps_view *v = NULL;
    int rc = zeps_wait_view(&z->reqs[slot], &v);
    zeps_view_release(&v);
    return zs_report(z, op, rc);
}

static const side_ops zeps_ops = {
    .name = "zeps", .select = zs_select, .start = zs_start, .finish = zs_finish};
static const side_ops curve_ops = {
    .name = "zeps+curve", .select = zs_select, .start = zs_start, .finish = zs_finish};

/* Bind port 0 (or connect to `port`) on 127.0.0.1: returns the port bound,
 * or 1 if the connect succeeded; -1 on failure. */
static int loopback(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;
    if (fd >= 0 && port > 0)
        rc = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ? 1 : -1;
    else if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        rc = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return rc;
}

static int write_cluster_file(const bench *b, const char *path, int port, bool curve)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return ZEPS_EIO;
    fprintf(f,
            "# written by zepsctl bench\n"
            "cluster = {\n"
            "  servers = [ \"tcp://127.0.0.1:%d\" ];\n"
            "  workers = 1;\n"
            "  consistency = \"async\";\n"
            "  request_timeout_ms = 30000;\n"
            "  max_message_mb = %zu;\n"
            "  log_level = \"info\";\n",
            port, (max_size(&b->o) >> 20) + 16);
    if (curve)
        fprintf(f,
                "  curve_server_secret = \"%s/keys/server.key\";\n"
                "  curve_server_public = \"%s/keys/server.pub\";\n"
                "  curve_allow_dir = \"%s/allow\";\n",
                b->dir, b->dir, b->dir);
    fprintf(f, "};\n");
    return fclose(f) == 0 ? 0 : ZEPS_EIO;
}

/* fork + exec `zeps-server --config cfg --shard 0`, found beside zepsctl or
 * else on PATH, with its output into logpath. */
static int server_spawn(pid_t *server, const char *cfg, const char *logpath)
{
    char exe[PATH_MAX + 16];
    zp_ctl_bindir(exe, PATH_MAX);
    strcat(exe, "/zeps-server");
    if (exe[0] != '/' || access(exe, X_OK) != 0)
        snprintf(exe, sizeof exe, "zeps-server");
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ZEPS_EIO;
    zp_spawn_opts so = {.log_fd = fd, .flags = ZP_SPAWN_GROUP | ZP_SPAWN_PATH,
                        .deathsig = SIGTERM};
    *server = zp_spawn_start((char *[]){exe, "--config", (char *)cfg, "--shard", "0", NULL}, &so);
    close(fd);
    return *server > 0 ? 0 : ZEPS_EIO;
}

/* Wait (up to 15 s) until the server listens; fail at once if it exits. */
static int server_wait_ready(pid_t *server, int port)
{
    int status;
    for (int i = 0; i < 1500 && !g_stop; i++) {
        if (zp_spawn_wait(*server, 0, &status) == 1) {
            *server = 0;
            fprintf(stderr, "bench: zeps-server exited during start-up\n");
            return ZEPS_EIO;
        }
        if (loopback(port) == 1)
            return 0;
        usleep(10000);
    }
    fprintf(stderr, "bench: zeps-server is not listening on port %d\n", port);
    return ZEPS_ETIMEDOUT;
}

static int declare(zeps_side *z, const char *name, uint64_t len, const char *optim, uint32_t *table)
{
    /* sgd with a tiny rate: a gradient of ones keeps the values finite */
    zeps_table_spec spec = {.name = name,
                            .length = len,
                            .optimizer = optim,
                            .lr = strcmp(optim, "sgd") == 0 ? 1e-9 : 1e-3,
                            .init = "zeros"};
    int rc = zeps_declare(z->c, &spec, table);
    if (rc != 0)
        fprintf(stderr, "bench: declare %s: %s\n", name, zeps_last_error(z->c));
    return rc;
}

/* Server bytes per parameter of the tables mem_sgd and mem_adam, from STATS. */
static int read_memory(bench *b)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = zeps_stats_raw(b->z.c, 0, &buf, &len);
    if (rc != 0) {
        fprintf(stderr, "bench: stats: %s\n", zeps_last_error(b->z.c));
        return rc;
    }
    Zeps__ShardStats *st = zeps__shard_stats__unpack(NULL, len, buf);
    free(buf);
    if (!st)
        return ZEPS_EPROTO;
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        uint64_t n = t->slice_end > t->slice_begin ? t->slice_end - t->slice_begin : t->length;
        double per = n ? (double)t->bytes_param / (double)n : 0;
        if (strcmp(t->name, "mem_sgd") == 0)
            b->mem_sgd = per;
        else if (strcmp(t->name, "mem_adam") == 0)
            b->mem_adam = per;
    }
    zeps__shard_stats__free_unpacked(st, NULL);
    return 0;
}

/* Server and client key pairs for the CURVE side: <dir>/keys/server.*,
 * <dir>/keys/client.*, and the client's public key alone in <dir>/allow. */
static int make_keys(const bench *b, zp_curve_client_keys *k)
{
    char keys[128], allow[128], path[160], pub[ZP_CURVE_KEY_LEN + 1], err[1024];
    snprintf(keys, sizeof keys, "%s/keys", b->dir);
    snprintf(allow, sizeof allow, "%s/allow", b->dir);
    if (mkdir(keys, 0700) != 0 || mkdir(allow, 0700) != 0) {
        fprintf(stderr, "bench: cannot create key directories in %s: %s\n", b->dir,
                strerror(errno));
        return ZEPS_EIO;
    }
    int rc = zp_curve_keygen(keys, "server", k->server_public, err, sizeof err);
    if (rc == 0)
        rc = zp_curve_keygen(keys, "client", pub, err, sizeof err);
    snprintf(path, sizeof path, "%s/keys/client.key", b->dir);
    if (rc == 0)
        rc = zp_curve_read_key(path, true, k->client_secret, err, sizeof err);
    memcpy(k->client_public, pub, sizeof pub);
    snprintf(path, sizeof path, "%s/allow/client.pub", b->dir);
    FILE *f = rc == 0 ? fopen(path, "w") : NULL;
    if (rc == 0 && (!f || fprintf(f, "%s\n", pub) < 0 || fclose(f) != 0)) {
        snprintf(err, sizeof err, "cannot write %s", path);
        rc = ZEPS_EIO;
    }
    if (rc != 0)
        fprintf(stderr, "bench: %s\n", err);
    return rc;
}

/* Start a server (with CURVE on if `curve`), connect to it as rank 0 and
 * declare one table per size. */
static int zeps_open_one(bench *b, zeps_side *z, pid_t *server, bool curve)
{
    char cfg[128], logpath[128], ep[64];
    const char *tag = curve ? "-curve" : "";
    zp_curve_client_keys keys;
    memset(&keys, 0, sizeof keys);
    snprintf(cfg, sizeof cfg, "%s/cluster%s.conf", b->dir, tag);
    snprintf(logpath, sizeof logpath, "%s/server%s.log", b->dir, tag);
    int port = loopback(0);
    int rc = port > 0 ? 0 : ZEPS_EIO;
    if (rc == 0 && curve)
        rc = make_keys(b, &keys);
    if (rc == 0)
        rc = write_cluster_file(b, cfg, port, curve);
    if (rc == 0)
        rc = server_spawn(server, cfg, logpath);
    if (rc == 0)
        rc = server_wait_ready(server, port);
    if (rc == 0) {
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
        const char *eps[] = {ep};
        zeps_options opt = {.request_timeout_ms = 30000,
                            .max_retries = 1,
                            .hello_timeout_ms = 15000,
                            .num_workers = 1};
        if (curve) {
            opt.curve_server_key = keys.server_public;
            opt.curve_public_key = keys.client_public;
            opt.curve_secret_key = keys.client_secret;
        }
        if ((rc = zeps_client_new_endpoints(&z->c, eps, 1, 0, &opt)) != 0)
            fprintf(stderr, "bench: cannot connect to zeps-server%s: %s\n", tag, zeps_strerror(rc));
    }
    if (rc != 0) {
        fprintf(stderr, "bench: the server's log is %s (kept)\n", logpath);
        b->o.keep = true;
        return rc;
    }
    z->push = b->push;
    z->pull = b->pull;
    for (int i = 0; i < b->o.nsizes && rc == 0; i++) {
        char name[32];
        snprintf(name, sizeof name, "bench_%zu", b->o.sizes[i]);
        rc = declare(z, name, b->o.sizes[i] / sizeof(float), "sgd", &z->tables[i]);
    }
    return rc;
}

/* The plain server and client, the two memory probes, and with --curve the
 * CURVE server and client. */
static int zeps_open(bench *b)
{
    int rc = zeps_open_one(b, &b->z, &b->server, false);
    uint32_t t;
    if (rc == 0)
        rc = declare(&b->z, "mem_sgd", MEM_LEN, "sgd", &t);
    if (rc == 0)
        rc = declare(&b->z, "mem_adam", MEM_LEN, "adam", &t);
    if (rc == 0)
        rc = read_memory(b);
    if (rc == 0 && b->o.curve)
        rc = zeps_open_one(b, &b->zc, &b->server_curve, true);
    return rc;
}

static void zeps_close(bench *b)
{
    zeps_client_destroy(&b->z.c);
    zeps_client_destroy(&b->zc.c);
    stop_child(&b->server, SIGTERM, "zeps-server");
    stop_child(&b->server_curve, SIGTERM, "zeps-server (CURVE)");
}

/* ---- the run ---------------------------------------------------------- */

/* Per size: repetitions of (zeps cell, raw cell), then the medians. */
static int measure_all(bench *b)
{
    const side_ops *ops[NSIDES] = {&zeps_ops, &raw_ops, &curve_ops};
    void *ctx[NSIDES] = {&b->z, &b->r, &b->zc};
    cell *reps = zp_xcalloc((size_t)b->o.reps * NSIDES, sizeof(cell));
    int rc = 0;
    for (int si = 0; si < b->o.nsizes && rc == 0; si++) {
        for (int rep = 0; rep < b->o.reps && rc == 0; rep++)
            for (int s = 0; s < NSIDES && rc == 0; s++)
                if ((b->o.only < 0 || b->o.only == s) && (s != SIDE_CURVE || b->o.curve))
                    rc = measure_cell(b, ops[s], ctx[s], si, rep, &reps[s * b->o.reps + rep]);
        for (int s = 0; s < NSIDES && rc == 0; s++)
            b->res[si][s] = cell_median(&reps[s * b->o.reps], b->o.reps);
    }
    free(reps);
    return rc;
}

/* "1523", or "5.8" below 100 */
static const char *mbs(double v, char *buf)
{
    snprintf(buf, 16, v < 100 ? "%.1f" : "%.0f", v);
    return buf;
}

static void print_row(const bench *b, int si)
{
    const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
    char lbl[32], zl[40], rl[40], m[6][16];
    snprintf(zl, sizeof zl, "%.0f/%.0f", z[F_PUSH_P50], z[F_PUSH_P99]);
    snprintf(rl, sizeof rl, "%.0f/%.0f", r[F_PUSH_P50], r[F_PUSH_P99]);
    printf("%7s | %6s %6s %5.2f | %6s %6s %5.2f | %6s %6s %5.2f | %13s | %13s\n",
           size_label(b->o.sizes[si], lbl, sizeof lbl), mbs(z[F_PUSH], m[0]), mbs(r[F_PUSH], m[1]),
           ratio(z[F_PUSH], r[F_PUSH]), mbs(z[F_PULL], m[2]), mbs(r[F_PULL], m[3]),
           ratio(z[F_PULL], r[F_PULL]), mbs(z[F_BOTH], m[4]), mbs(r[F_BOTH], m[5]),
           ratio(z[F_BOTH], r[F_BOTH]), zl, rl);
}

static void print_table(const bench *b)
{
    char lbl[32];
    printf("zeps vs raw ZeroMQ on tcp 127.0.0.1: window %d, median of %d, ~%g s per phase\n"
           "payload MB/s (10^6 B/s; sizes are binary); RTT = 1 request in flight, µs\n\n",
           b->o.window, b->o.reps, b->o.seconds);
    printf("%7s | %-19s | %-19s | %-19s | %13s | %13s\n", "", "push MB/s", "pull MB/s",
           "push+pull MB/s", "zeps push RTT", "raw push RTT");
    printf("%7s | %6s %6s %5s | %6s %6s %5s | %6s %6s %5s | %13s | %13s\n", "size", "zeps", "raw",
           "ratio", "zeps", "raw", "ratio", "zeps", "raw", "ratio", "p50/p99", "p50/p99");
    for (int si = 0; si < b->o.nsizes; si++)
        print_row(b, si);
    printf("\npull RTT, p50/p99 µs:\n");
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
        printf("%7s | zeps %.0f/%.0f, raw %.0f/%.0f\n", size_label(b->o.sizes[si], lbl, sizeof lbl),
               z[F_PULL_P50], z[F_PULL_P99], r[F_PULL_P50], r[F_PULL_P99]);
    }
    printf("\nzero-copy pulls (zeps_pull_view_start; raw ZeroMQ pulls are zero-copy anyway):\n");
    printf("%7s | %-19s | %-19s\n", "", "pull view MB/s", "push+pull view MB/s");
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
        char m[4][16];
        printf("%7s | %6s %6s %5.2f | %6s %6s %5.2f\n",
               size_label(b->o.sizes[si], lbl, sizeof lbl), mbs(z[F_VIEW], m[0]),
               mbs(r[F_VIEW], m[1]), ratio(z[F_VIEW], r[F_VIEW]), mbs(z[F_BOTH_VIEW], m[2]),
               mbs(r[F_BOTH_VIEW], m[3]), ratio(z[F_BOTH_VIEW], r[F_BOTH_VIEW]));
    }
    if (b->o.curve) {
        printf("\nCurveZMQ (authenticated and encrypted) vs plain zeps, same run:\n");
        printf("%7s | %-20s | %-20s | %-20s\n", "", "push MB/s", "pull MB/s", "push+pull MB/s");
        printf("%7s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s\n", "size", "plain", "curve", "ratio",
               "plain", "curve", "ratio", "plain", "curve", "ratio");
        for (int si = 0; si < b->o.nsizes; si++) {
            const double *z = b->res[si][SIDE_ZEPS].v, *c = b->res[si][SIDE_CURVE].v;
            char m[6][16];
            printf("%7s | %6s %6s %6.2f | %6s %6s %6.2f | %6s %6s %6.2f\n",
                   size_label(b->o.sizes[si], lbl, sizeof lbl), mbs(z[F_PUSH], m[0]),
                   mbs(c[F_PUSH], m[1]), ratio(c[F_PUSH], z[F_PUSH]), mbs(z[F_PULL], m[2]),
                   mbs(c[F_PULL], m[3]), ratio(c[F_PULL], z[F_PULL]), mbs(z[F_BOTH], m[4]),
                   mbs(c[F_BOTH], m[5]), ratio(c[F_BOTH], z[F_BOTH]));
        }
    }
    printf("\nserver memory per dense parameter, with optimizer state: sgd %.2f B, adam %.2f B\n",
           b->mem_sgd, b->mem_adam);
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
        double q = ratio(z[F_BOTH], r[F_BOTH]), qv = ratio(z[F_BOTH_VIEW], r[F_BOTH_VIEW]);
        if (b->o.sizes[si] == (4u << 20) || b->o.sizes[si] == (32u << 20))
            printf("acceptance %s: zeps push+pull = %.3f x raw with copying pulls, %.3f with "
                   "zero-copy pulls (bar %.1f): %s / %s\n",
                   size_label(b->o.sizes[si], lbl, sizeof lbl), q, qv, ACCEPT,
                   q >= ACCEPT ? "PASS" : "FAIL", qv >= ACCEPT ? "PASS" : "FAIL");
    }
}

static void json_cell(FILE *f, const char *name, const cell *c, const char *sep)
{
    fprintf(f, "      \"%s\": {", name);
    for (int i = 0; i < NF; i++)
        fprintf(f, "%s\"%s\": %.1f", i ? ", " : "", field_names[i], c->v[i]);
    fprintf(f, "}%s\n", sep);
}

static int write_json(const bench *b, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
        return ZEPS_EIO;
    }
    fprintf(f,
            "{\n  \"transport\": \"tcp://127.0.0.1\", \"window\": %d, \"reps\": %d, "
            "\"seconds\": %g,\n  \"units\": \"payload MB/s (10^6 B/s); RTT in us; "
            "medians over reps\",\n  \"results\": [\n",
            b->o.window, b->o.reps, b->o.seconds);
    for (int si = 0; si < b->o.nsizes; si++) {
        const cell *z = &b->res[si][SIDE_ZEPS], *r = &b->res[si][SIDE_RAW];
        fprintf(f, "    {\n      \"bytes\": %zu,\n", b->o.sizes[si]);
        json_cell(f, "zeps", z, ",");
        json_cell(f, "raw", r, ",");
        if (b->o.curve)
            json_cell(f, "zeps_curve", &b->res[si][SIDE_CURVE], ",");
        fprintf(f,
                "      \"ratio\": {\"push\": %.3f, \"pull\": %.3f, \"push_pull\": %.3f, "
                "\"pull_view\": %.3f, \"push_pull_view\": %.3f}\n"
                "    }%s\n",
                ratio(z->v[F_PUSH], r->v[F_PUSH]), ratio(z->v[F_PULL], r->v[F_PULL]),
                ratio(z->v[F_BOTH], r->v[F_BOTH]), ratio(z->v[F_VIEW], r->v[F_VIEW]),
                ratio(z->v[F_BOTH_VIEW], r->v[F_BOTH_VIEW]), si + 1 < b->o.nsizes ? "," : "");
    }
    fprintf(f, "  ],\n  \"server_bytes_per_param\": {\"sgd\": %.3f, \"adam\": %.3f}\n}\n",
            b->mem_sgd, b->mem_adam);
    return fclose(f) == 0 ? 0 : ZEPS_EIO;
}

static int run(bench *b)
{
    size_t max = max_size(&b->o);
    for (int i = 0; i < b->o.window; i++) {
        b->push[i] = buf_new(max, 1.0f);
        b->pull[i] = buf_new(max, 0.0f);
    }
    /* The raw child forks before this process has any ZeroMQ context. */
    int rc = raw_open(b);
    if (rc == 0)
        rc = zeps_open(b);
    if (rc == 0)
        rc = measure_all(b);
    if (rc == 0) {
        fflush(stderr);
        print_table(b);
        fflush(stdout);
    }
    if (rc == 0 && b->o.json)
        rc = write_json(b, b->o.json);
    return rc;
}

/* Every exit path: client and server, raw socket and child, then the
 * buffers (ZeroMQ holds none of them any more) and the directory. */
static void teardown(bench *b)
{
    zeps_close(b);
    raw_close(b);
    for (int i = 0; i < MAX_WINDOW; i++) {
        free(b->push[i]);
        free(b->pull[i]);
    }
    if (b->o.keep && b->dir[0])
        fprintf(stderr, "bench: kept %s\n", b->dir);
    else if (b->dir[0])
        nftw(b->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int zp_ctl_bench(int argc, char **argv)
{
    bench *b = zp_xcalloc(1, sizeof *b);
    int rc = parse_opts(&b->o, argc, argv);
    if (rc != 0) {
        free(b);
        return rc > 0 ? 0 : 2;
    }
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    const char *tmp = getenv("TMPDIR");
    snprintf(b->dir, sizeof b->dir, "%s/zeps-bench-XXXXXX",
             tmp && tmp[0] && strlen(tmp) < 40 ? tmp : "/tmp");
    if (mkdtemp(b->dir)) {
        rc = run(b);
    } else {
        fprintf(stderr, "bench: cannot create %s: %s\n", b->dir, strerror(errno));
        b->dir[0] = '\0';
        rc = ZEPS_EIO;
    }
    teardown(b);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (rc != 0)
        fprintf(stderr, "zepsctl bench: failed: %s%s\n", zeps_strerror(rc),
                g_stop ? " (interrupted)" : "");
    free(b);
    return rc == 0 ? 0 : 1;
}
