/*
 * ctl_bench.h - what the parts of `zepsctl bench` share: the two systems
 * under test behind one ops table (side_ops), the zeps side
 * (ctl_bench_zeps.c: zeps-server children and libzeps clients) and the raw
 * ZeroMQ side (ctl_bench_raw.c: a forked ROUTER loop), driven by the
 * measurement loops in ctl_bench.c.
 */
#ifndef ZP_CTL_BENCH_H
#define ZP_CTL_BENCH_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "alloc.h"
#include "spawn.h"
#include "zeps.h"

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
    F_PUSH,
    F_PULL,
    F_BOTH,
    F_PUSH_P50,
    F_PUSH_P99,
    F_PULL_P50,
    F_PULL_P99,
    F_VIEW,
    F_BOTH_VIEW,
    NF
};
typedef struct cell {
    double v[NF];
} cell;

typedef struct bench_opts {
    int window, reps;
    double seconds;
    bool keep;
    int only;   /* -1: every side; else SIDE_ZEPS or SIDE_RAW (for profiling) */
    bool curve; /* also zeps over CURVE (SIDE_CURVE) */
    bool apply; /* also the server's kernel timings (zeps-server --bench-apply) */
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

/* Set by SIGINT/SIGTERM (ctl_bench.c), polled by every loop. */
extern volatile sig_atomic_t zp_ctl_bench_stop;

static inline size_t max_size(const bench_opts *o)
{
    size_t m = 0;
    for (int i = 0; i < o->nsizes; i++)
        m = o->sizes[i] > m ? o->sizes[i] : m;
    return m;
}

static inline float *buf_new(size_t bytes, float value)
{
    float *p = zp_alloc(bytes);
    for (size_t i = 0; i < bytes / sizeof(float); i++)
        p[i] = value; /* also faults every page in before anything is timed */
    return p;
}

/* Send `sig` to child *pid, wait up to 5 s, then SIGKILL. Sets *pid to 0. */
static inline void stop_child(pid_t *pid, int sig, const char *what)
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

/* The raw ZeroMQ side (ctl_bench_raw.c): fork its child and connect. */
int zp_ctl_bench_raw_open(bench *b);
void zp_ctl_bench_raw_close(bench *b);
extern const side_ops zp_ctl_bench_raw_ops;

/* The zeps side (ctl_bench_zeps.c): start zeps-server (and with --curve a
 * second one over CURVE), connect, declare a table per size, read the
 * server's memory per parameter. */
int zp_ctl_bench_zeps_open(bench *b);
void zp_ctl_bench_zeps_close(bench *b);
extern const side_ops zp_ctl_bench_zeps_ops, zp_ctl_bench_zeps_curve_ops;

/* Run `zeps-server --bench-apply reps` (found as server_spawn finds it),
 * its table going to this process's stdout; 0, or ZEPS_EIO if it could
 * not run or failed. */
int zp_ctl_bench_zeps_apply(int reps);

#endif
