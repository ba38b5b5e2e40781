"""Generate the C source of zeps' cffi extension (API mode, out of line).

Run by CMake at build time (worker/python/CMakeLists.txt):

    /usr/bin/python3 build_ffi.py OUT.c

CMake then compiles OUT.c into the extension module `zeps._native` and
links it against libzeps.so, so the binding is a thin layer over the one C
implementation of the protocol. The declarations below are zeps.h's public
API as cffi reads it (no preprocessor); worker/python/tests/test_binding.py checks that
every function libzeps exports is declared here.

Besides the API, the source holds one small C helper: the SIGINT hook that
makes a Ctrl-C interrupt a wait (see _zp_py_arm below).
"""
import sys

import cffi

CDEF = r"""
typedef struct zeps_client zeps_client;
typedef struct zeps_req zeps_req;
typedef struct zeps_view zeps_view;
typedef struct zeps_sbatch zeps_sbatch;

typedef struct zeps_options {
    int request_timeout_ms;
    int max_retries;
    int hello_timeout_ms;
    uint64_t incarnation;
    int num_workers;
    uint64_t max_message_bytes;
    int fault_drop_sends;
    const char *curve_server_key;
    const char *curve_public_key;
    const char *curve_secret_key;
    volatile int *interrupt;
    int transport;
    uint64_t shm_segment_bytes;
} zeps_options;

typedef struct zeps_init_segment {
    uint64_t length;
    const char *init;
    double init_scale;
    uint64_t seed;
} zeps_init_segment;

typedef struct zeps_table_spec {
    const char *name;
    uint64_t length;
    const char *optimizer;
    double lr;
    double momentum;
    double beta1, beta2;
    double eps;
    double weight_decay;
    const char *init;
    double init_scale;
    uint64_t seed;
    int has_staleness;
    unsigned staleness;
    const zeps_init_segment *segments;
    size_t nsegments;
} zeps_table_spec;

typedef struct zeps_client_stats {
    double wait_s;
    uint64_t requests;
    uint64_t retries;
    uint64_t bytes_out;
    uint64_t bytes_in;
    uint64_t dropped;
    uint64_t bytes_out_raw;
    uint64_t bytes_in_raw;
    double encode_s;
    double decode_s;
    uint64_t restarts;
    uint64_t pushes_acked;
    uint64_t redirects;
    uint64_t slot_redirects;
    uint64_t slot_epoch;
} zeps_client_stats;

typedef struct zeps_codec_opts {
    const char *codec;
    double fraction;
    uint64_t count;
    uint32_t block;
    int error_feedback;
    uint64_t seed;
} zeps_codec_opts;

typedef struct zeps_sparse_spec {
    const char *name;
    uint32_t dim;
    const char *optimizer;
    double lr;
    double beta1, beta2;
    double eps;
    double weight_decay;
    double l1, l2;
    double ftrl_beta;
    const char *init;
    double init_scale;
    uint64_t seed;
    uint32_t admit_count;
    double admit_prob;
    uint64_t ttl_clocks;
    uint64_t capacity_rows;
    uint64_t memory_budget;
    const char *evict;
    uint32_t lead_cols;
    double lead_lr;
    const char *lead_init;
    double lead_init_scale;
    int tier;
} zeps_sparse_spec;

typedef struct zeps_page {
    uint64_t count;
    uint64_t offset;
    uint64_t next;
    uint64_t version;
    uint32_t dim;
    uint32_t state_per_value;
    const void *data;
    uint64_t bytes;
    void *priv;
} zeps_page;

const char *zeps_strerror(int err);
const char *zeps_errname(int err);

int zeps_client_new(zeps_client **out, const char *cluster_file, uint32_t rank);
int zeps_client_new_interruptible(zeps_client **out, const char *cluster_file, uint32_t rank,
                                  volatile int *flag);
int zeps_client_new_endpoints(zeps_client **out, const char *const *endpoints, int num_shards,
                              uint32_t rank, const zeps_options *opt);
int zeps_client_new_replicas(zeps_client **out, const char *const *endpoints, int num_shards,
                             int replicas, uint32_t rank, const zeps_options *opt);
void zeps_client_set_interrupt(zeps_client *c, volatile int *flag);
void zeps_client_destroy(zeps_client **cp);
void zeps_client_set_done(zeps_client *c, int64_t clock);
int zeps_set_lr(zeps_client *c, uint32_t table, double lr);
int zeps_snapshot_take(zeps_client *c, double timeout_s, int64_t *clock, uint64_t *setid);
int zeps_scan(zeps_client *c, uint32_t table, int shard, uint64_t cursor, uint64_t max,
              zeps_page *page);
void zeps_page_release(zeps_page *page);
int zeps_put_dense(zeps_client *c, uint32_t table, uint64_t offset, uint64_t count, uint32_t k,
                   const float *values, const float *state, uint64_t version);
int zeps_put_rows(zeps_client *c, uint32_t table, uint32_t k, const void *records, uint64_t n,
                  uint64_t version);

int zeps_declare(zeps_client *c, const zeps_table_spec *spec, uint32_t *table);
uint64_t zeps_table_length(const zeps_client *c, uint32_t table);
int zeps_pull_start(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
                    int64_t clock, zeps_req **req);
int zeps_push_start(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                    uint64_t count, int64_t clock, zeps_req **req);
int zeps_wait(zeps_req **req);
int zeps_wait_all(zeps_req **reqs, int n);
int zeps_pull_view_start(zeps_client *c, uint32_t table, uint64_t offset, uint64_t count,
                         int64_t clock, zeps_req **req);
int zeps_wait_view(zeps_req **req, zeps_view **view);
int zeps_view_parts(const zeps_view *v);
const float *zeps_view_part(const zeps_view *v, int i, uint64_t *offset, uint64_t *count);
void zeps_view_release(zeps_view **vp);
int zeps_set_push_codec(zeps_client *c, uint32_t table, const zeps_codec_opts *opts);
int zeps_set_pull_codec(zeps_client *c, uint32_t table, const zeps_codec_opts *opts);
int zeps_pull_codec_reset(zeps_client *c, uint32_t table);

int zeps_declare_sparse(zeps_client *c, const zeps_sparse_spec *spec, uint32_t *table);
uint32_t zeps_table_dim(const zeps_client *c, uint32_t table);
int zeps_sbatch_new(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                    zeps_sbatch **out);
size_t zeps_sbatch_size(const zeps_sbatch *b);
size_t zeps_sbatch_unique(const zeps_sbatch *b);
void zeps_sbatch_free(zeps_sbatch **bp);
int zeps_sbatch_pull_start(zeps_sbatch *b, float *rows, int64_t clock, zeps_req **req);
int zeps_sbatch_pull(zeps_sbatch *b, float *rows, int64_t clock);
int zeps_sbatch_push_start(zeps_sbatch *b, const float *grads, int64_t clock, zeps_req **req);
int zeps_sbatch_push(zeps_sbatch *b, const float *grads, int64_t clock);
int zeps_push_clock_start(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                          uint64_t count, int64_t clock, zeps_req **push, zeps_req **rest);
const uint32_t *zeps_sbatch_positions(const zeps_sbatch *b);
int zeps_sbatch_pull_unique_start(zeps_sbatch *b, float *urows, int64_t clock, zeps_req **req);
int zeps_sbatch_push_unique_start(zeps_sbatch *b, const float *ugrads, int64_t clock,
                                  zeps_req **req);
int zeps_sbatch_pull_unique(zeps_sbatch *b, float *urows, int64_t clock);
int zeps_sbatch_push_unique(zeps_sbatch *b, const float *ugrads, int64_t clock);
int zeps_sbatch_new_pull_unique(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                                float *urows, int64_t clock, zeps_sbatch **out, zeps_req **req);
int zeps_spull(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n, float *rows,
               int64_t clock);
int zeps_spush(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n, const float *grads,
               int64_t clock);

typedef struct zeps_pipe zeps_pipe;
typedef struct zeps_pipe_opts {
    int prefetch;
    int max_inflight;
    int clock;
} zeps_pipe_opts;
typedef struct zeps_pipe_step {
    int64_t clock;
    void *user;
    size_t n;
    float *rows[16];
    float *grads[16];
} zeps_pipe_step;
int zeps_pipe_new(zeps_client *c, const uint32_t *tables, int ntables, const zeps_pipe_opts *opts,
                  zeps_pipe **out);
int zeps_pipe_feed(zeps_pipe *p, int64_t clock, const uint64_t *ids, size_t n, void *user);
int zeps_pipe_next(zeps_pipe *p, zeps_pipe_step **step);
int zeps_pipe_push(zeps_pipe *p, zeps_pipe_step *step);
int zeps_pipe_drain(zeps_pipe *p);
void zeps_pipe_reset(zeps_pipe *p);
int zeps_pipe_slots(const zeps_pipe *p);
void zeps_pipe_destroy(zeps_pipe **pp);

int zeps_pull(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
              int64_t clock);
int zeps_push(zeps_client *c, uint32_t table, const float *grad, uint64_t offset, uint64_t count,
              int64_t clock);
int zeps_clock(zeps_client *c, int64_t clock);
int zeps_clock_start(zeps_client *c, int64_t clock, zeps_req **req);
int64_t zeps_resume_clock(const zeps_client *c);
int zeps_rejoined(const zeps_client *c);
int zeps_rollback(zeps_client *c, int64_t clock);
int zeps_snapshot_request(zeps_client *c, int64_t clock, uint64_t setid);
int zeps_evict(zeps_client *c, uint32_t rank);
int zeps_finish(zeps_client *c, int64_t clock);
int zeps_barrier(zeps_client *c);
uint64_t zeps_pulled_version(const zeps_client *c, uint32_t table, int shard);
int zeps_num_shards(const zeps_client *c);
int zeps_num_workers(const zeps_client *c);
const char *zeps_consistency(const zeps_client *c, uint32_t *caps);
uint32_t zeps_rank(const zeps_client *c);
void zeps_client_get_stats(const zeps_client *c, zeps_client_stats *out);
const char *zeps_last_error(const zeps_client *c);
int zeps_stats_raw(zeps_client *c, int shard, void **buf, size_t *len);

int zeps_resolve_rank(const char *value, uint32_t *rank, char *err, size_t errlen);
void free(void *);

/* the binding's own helpers (below) */
volatile int *_zp_py_arm(void);
int _zp_py_exit_on_term(void);
typedef struct _zp_py_pulled {
    zeps_sbatch *batch;
    size_t unique;
    const uint32_t *positions;
} _zp_py_pulled;
int _zp_py_pull_unique(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                       float *urows, int64_t clock, _zp_py_pulled *out, zeps_req **req);
void _zp_py_sbatch_free(zeps_sbatch *b);
"""

# A Ctrl-C during a wait: Python's own SIGINT handler only marks the signal
# for the interpreter, which cannot run while C waits. So the binding chains
# a handler in front of it that also sets the flag libzeps watches
# (zeps_client_set_interrupt); the signal wakes the blocked poll, the wait
# returns ZEPS_ECLOSED, and the binding lets Python run its handler
# (KeyboardInterrupt). _zp_py_arm() (re)installs the chain when someone
# (Python's signal module) replaced it, clears the flag and returns it; it
# is called before every wait, a sigaction query when nothing changed.
SOURCE = r"""
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "zeps.h"

static volatile int zp_py_flag;
static struct sigaction zp_py_prev;

static void zp_py_on_sigint(int sig, siginfo_t *si, void *uc)
{
    zp_py_flag = 1;
    if (zp_py_prev.sa_flags & SA_SIGINFO) {
        if (zp_py_prev.sa_sigaction != NULL)
            zp_py_prev.sa_sigaction(sig, si, uc);
    } else if (zp_py_prev.sa_handler != SIG_DFL && zp_py_prev.sa_handler != SIG_IGN &&
               zp_py_prev.sa_handler != NULL) {
        zp_py_prev.sa_handler(sig);
    } else if (zp_py_prev.sa_handler == SIG_DFL) {
        signal(sig, SIG_DFL); /* nobody else handles it: do what SIGINT does */
        raise(sig);
    }
}

volatile int *_zp_py_arm(void)
{
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) == 0 && !((cur.sa_flags & SA_SIGINFO) &&
                                                cur.sa_sigaction == zp_py_on_sigint)) {
        struct sigaction mine;
        memset(&mine, 0, sizeof mine);
        mine.sa_sigaction = zp_py_on_sigint;
        mine.sa_flags = SA_SIGINFO; /* no SA_RESTART: the poll must wake */
        sigemptyset(&mine.sa_mask);
        if (cur.sa_handler != SIG_IGN && sigaction(SIGINT, &mine, &zp_py_prev) != 0)
            memset(&zp_py_prev, 0, sizeof zp_py_prev);
    }
    zp_py_flag = 0;
    return &zp_py_flag;
}

/* zeps.torch's forward in one call (each call from Python costs more than
 * the call itself: the interpreter's work between calls runs on caches the
 * batch's arrays evicted): with req NULL the SIGINT chain armed and the
 * wait done, else the pull left in flight in *req; the batch of ids[n]
 * made and its distinct rows pulled into urows (zeps_sbatch_new_pull_unique),
 * and out->batch, its distinct count and its positions array (the batch's)
 * filled. On success the caller owns out->batch (_zp_py_sbatch_free); on
 * error out is not written. */
typedef struct _zp_py_pulled {
    zeps_sbatch *batch;
    size_t unique;
    const uint32_t *positions;
} _zp_py_pulled;

int _zp_py_pull_unique(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                       float *urows, int64_t clock, _zp_py_pulled *out, zeps_req **req)
{
    zeps_sbatch *b;
    if (!req)
        (void)_zp_py_arm();
    int rc = zeps_sbatch_new_pull_unique(c, table, ids, n, urows, clock, &b, req);
    if (rc != 0)
        return rc;
    out->batch = b;
    out->unique = zeps_sbatch_unique(b);
    out->positions = zeps_sbatch_positions(b);
    return 0;
}

/* zeps_sbatch_free by value: the caller keeps no pointer cell per batch. */
void _zp_py_sbatch_free(zeps_sbatch *b)
{
    zeps_sbatch_free(&b);
}

/* After a worker wrote its result, SIGTERM ends it with status 0 at once.
 * A C handler, not a Python one: the interpreter resets the handlers it
 * installed to SIG_DFL early in its shutdown, and a SIGTERM that arrived
 * while torch and numpy were still being torn down killed the process
 * (status 143) although it had finished. */
static void zp_py_on_term(int sig)
{
    (void)sig;
    _exit(0);
}

int _zp_py_exit_on_term(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = zp_py_on_term;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGTERM, &sa, NULL);
}
"""


def builder():
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source("zeps._native", SOURCE)
    return ffi


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_ffi.py OUT.c")
    builder().emit_c_code(sys.argv[1])
