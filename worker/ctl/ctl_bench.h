/*
 * ctl_bench.h - what the parts of `zepsctl bench` share: the two systems
 * under test behind one ops table (side_ops), the zeps side
 * (ctl_bench_zeps.c: zeps-server children and libzeps clients) and the raw
 * ZeroMQ side (ctl_bench_raw.c: a forked ROUTER loop), driven by the
 * measurement loops in ctl_bench.c; with --replicas 2 a replicated shard
 * and its ZooKeeper (ctl_bench_repl.c) and sparse pushes to both zeps
 * shards (ctl_bench_sparse.c).
 */
#ifndef ZP_CTL_BENCH_H
#define ZP_CTL_BENCH_H

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "alloc.h"
#include "curve.h"
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
/* SIDE_R2: zeps on a shard of two replicas (--replicas 2). SIDE_MEM: one
 * thread's memcpy of the same bytes (--transport shm: the ceiling). */
enum { SIDE_ZEPS = 0, SIDE_RAW = 1, SIDE_CURVE = 2, SIDE_R2 = 3, SIDE_MEM = 4, NSIDES = 5 };

/* The bars of the replication issue, r=2 against r=1 in the same run. */
#define REPL_PUSH_AIM   0.45 /* dense push MB/s at 4 MB, and sparse push rows/s: at least */
#define REPL_RTT_AIM    2.2  /* 64 B push round trip: at most */
#define REPL_SESSION_MS 4000 /* the replicas' ZooKeeper session timeout */

/* Sparse pushes (ctl_bench_sparse.c): rows of SPARSE_DIMS values, batches
 * of SPARSE_BATCH ids drawn uniformly from SPARSE_VOCAB. */
#define NSPARSE 2
#define SPARSE_DIMS                                                                                \
    {                                                                                              \
        8, 64                                                                                      \
    }
#define SPARSE_BATCH 10000
#define SPARSE_VOCAB 10000000ull

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
    int only;     /* -1: every side; else SIDE_ZEPS or SIDE_RAW (for profiling) */
    bool curve;   /* also zeps over CURVE (SIDE_CURVE) */
    int replicas; /* 2: also zeps on a replicated shard (SIDE_R2); else 1 */
    int log_mb;   /* the replicated shard's replication.log_mb; 0: the server's default */
    bool apply;   /* also the server's kernel timings (zeps-server --bench-apply) */
    bool shm;     /* --transport shm: zeps over shared memory, raw ZeroMQ over ipc://, and
                     the memcpy ceiling (ctl_bench_mem.c) */
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
    uint32_t sparse[NSPARSE]; /* the sparse tables (--replicas) */
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

typedef struct mem_side { /* SIDE_MEM */
    size_t bytes;
    float **a, **b; /* copies go a -> b ("push") and b -> a ("pull") */
} mem_side;

typedef struct bench {
    bench_opts o;
    char dir[64];
    pid_t server, raw, server_curve;
    pid_t replica[2], zk; /* --replicas: the replicated shard and its ZooKeeper */
    float *push[MAX_WINDOW], *pull[MAX_WINDOW];
    zeps_side z, zc, zr; /* zc: the client of the CURVE server, zr: of the replicated one */
    raw_side r;
    mem_side m;
    cell res[MAX_SIZES][NSIDES];
    double sparse[NSPARSE][2]; /* sparse push rows/s, medians: [dim][r=1, r=2] */
    double mem_sgd, mem_adam;  /* server bytes per parameter */
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

/* "4 MB", "256 KB", "64 B" (binary units) into buf; returns buf. */
static inline const char *size_label(size_t bytes, char *buf, size_t len)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, len, "%zu MB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, len, "%zu KB", bytes >> 10);
    else
        snprintf(buf, len, "%zu B", bytes);
    return buf;
}

/* a / b, 0 when b is not positive (a side that measured nothing). */
static inline double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
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

/* --transport shm (ctl_bench_mem.c): the memcpy side; the check that the
 * zeps client's payloads really go through shared memory (its shard's
 * STATS says so: 0, or ZEPS_ETRANSPORT said on stderr); the table of
 * zeps over shared memory against memcpy and raw ZeroMQ over ipc://, and
 * its JSON member (ending with a comma). */
extern const side_ops zp_ctl_bench_mem_ops;
int zp_ctl_bench_mem_check(bench *b);
void zp_ctl_bench_mem_print(const bench *b);
void zp_ctl_bench_mem_json(const bench *b, FILE *f, int si);

/* The raw ZeroMQ side (ctl_bench_raw.c): fork its child and connect (with
 * --transport shm over ipc:// in the bench's directory, else loopback TCP). */
int zp_ctl_bench_raw_open(bench *b);
void zp_ctl_bench_raw_close(bench *b);
extern const side_ops zp_ctl_bench_raw_ops;

/* The zeps side (ctl_bench_zeps.c): start zeps-server (and with --curve a
 * second one over CURVE), connect, declare a table per size, read the
 * server's memory per parameter. */
int zp_ctl_bench_zeps_open(bench *b);
void zp_ctl_bench_zeps_close(bench *b);
extern const side_ops zp_ctl_bench_zeps_ops, zp_ctl_bench_zeps_curve_ops, zp_ctl_bench_zeps_r2_ops;

/* What the zeps sides share with the replicated one (ctl_bench_zeps.c):
 * write a cluster file for one shard at `servers` (a libconfig value:
 * "[ \"tcp://...\" ]" or a list of replica arrays) with `extra` settings
 * of the cluster group; start `zeps-server --config cfg --shard 0`
 * [--replica r] (replica < 0: none) with its output into logpath; connect
 * client z to endpoint ep (keys: CURVE, or NULL) and declare one table per
 * size. Each returns 0 or a zeps_err, said on stderr. */
int zp_ctl_bench_zeps_write_conf(const bench *b, const char *path, const char *servers,
                                 const char *extra);
int zp_ctl_bench_zeps_spawn(pid_t *server, const char *cfg, const char *logpath, int replica);
int zp_ctl_bench_zeps_connect(bench *b, zeps_side *z, const char *ep,
                              const zp_curve_client_keys *keys);

/* The replicated shard (ctl_bench_repl.c): a one-node ZooKeeper, replica 0
 * elected, replica 1 following it until STATS says in_sync = 2, and a
 * client of the primary (b->zr). Close stops the client, both replicas and
 * then ZooKeeper; it may be called whatever open did. */
int zp_ctl_bench_repl_open(bench *b);
void zp_ctl_bench_repl_close(bench *b);
/* The r=2 / r=1 table and the bars; its part of the JSON (a member per
 * size result, after which the caller writes its own). */
void zp_ctl_bench_repl_print(const bench *b);
void zp_ctl_bench_repl_json(const bench *b, FILE *f, int si);

/* Sparse pushes (ctl_bench_sparse.c): declare the sparse tables on z;
 * measure b->o.reps repetitions of (r=1, r=2) into b->sparse; print them;
 * write them as a JSON member ("sparse_push": ..., ending with a comma). */
int zp_ctl_bench_sparse_declare(zeps_side *z);
int zp_ctl_bench_sparse_measure(bench *b);
void zp_ctl_bench_sparse_print(const bench *b);
void zp_ctl_bench_sparse_json(const bench *b, FILE *f);

/* Run `zeps-server --bench-apply reps` (found as server_spawn finds it),
 * its table going to this process's stdout; 0, or ZEPS_EIO if it could
 * not run or failed. */
int zp_ctl_bench_zeps_apply(int reps);

#endif
