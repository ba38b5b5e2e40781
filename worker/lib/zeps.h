/*
 * zeps.h - the zeps client library (libzeps), public API.
 *
 * A zeps_client talks to every shard of one zeps cluster over ZeroMQ (one
 * DEALER socket per shard). Tables are declared by name; pulls and pushes name
 * a global element range of a table and the library slices it over the
 * shards, sending the per-shard requests together and waiting for all of
 * them. Every request carries (rank, incarnation, sequence); a request that
 * gets no reply within the configured timeout is sent again, and the server
 * applies each (rank, sequence) once, so a retry never applies a gradient
 * twice.
 *
 * Threading: a zeps_client and the handles it gives out belong to one thread
 * at a time. Separate clients are independent. Non-blocking requests travel
 * while the caller computes (ZeroMQ's I/O thread moves the bytes); their
 * replies are collected in zeps_wait().
 *
 * Errors: every function returns 0 (ZEPS_OK) or a zeps_err code; output
 * parameters are written only on success. zeps_last_error() gives the text of
 * the last failure, including the server's message for ERROR replies.
 */
#ifndef ZEPS_H
#define ZEPS_H

#include <stddef.h>
#include <stdint.h>

#include "zeps_errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ZEPS_VERSION_STRING "0.1.0"

/* Rank used by tools (zepsctl) that observe a cluster without being a worker. */
#define ZEPS_RANK_TOOL 0xffffffffu

typedef struct zeps_client zeps_client;
typedef struct zeps_req zeps_req;

/* Options for zeps_client_new_endpoints(); zero-initialise, then set fields.
 * A zero field takes the default given beside it. */
typedef struct zeps_options {
    int request_timeout_ms;     /* resend after this long without a reply (2000) */
    int max_retries;            /* give up with ZEPS_ETIMEDOUT after this many resends (10) */
    int hello_timeout_ms;       /* how long zeps_client_new waits for every shard (30000) */
    uint64_t incarnation;       /* 0: chosen at random */
    int num_workers;            /* informative for tools; workers learn it from HELLO */
    uint64_t max_message_bytes; /* refuse larger payloads with ZEPS_ETOOBIG (0: no limit) */
    int fault_drop_sends;       /* fault injection for tests: the first N sends of requests
                                   after HELLO are not sent, as if lost on the wire (0) */
    /* CurveZMQ: all three as 40-character Z85 text (zepsctl keygen), or all
     * NULL for a plain connection. Copied; need not outlive the call. */
    const char *curve_server_key; /* the servers' public key */
    const char *curve_public_key; /* this client's public key */
    const char *curve_secret_key; /* this client's secret key */
    /* Interrupts the HELLO wait as zeps_client_set_interrupt() does later
     * waits (and is kept as that flag): NULL for none. */
    volatile int *interrupt;
    /* How payloads travel (docs/protocol.md, "Shared memory"): ZEPS_TRANSPORT_TCP
     * (0) always as ZeroMQ frames; ZEPS_TRANSPORT_AUTO in a shared-memory
     * segment with each shard on this host that offers it, frames otherwise. */
    int transport;
    uint64_t shm_segment_bytes; /* each area of such a segment (0: 256 MiB) */
} zeps_options;

#define ZEPS_TRANSPORT_TCP  0
#define ZEPS_TRANSPORT_AUTO 1

/* A table declaration. Every worker may declare the same table; a second
 * declaration with an equal spec is a no-op, a different one is ZEPS_ECONFLICT. */
/* A segment of a dense table's initial values (zeps_table_spec.segments). */
typedef struct zeps_init_segment {
    uint64_t length;  /* elements */
    const char *init; /* as zeps_table_spec.init */
    double init_scale;
    uint64_t seed;
} zeps_init_segment;

typedef struct zeps_table_spec {
    const char *name;      /* 1..63 chars of [A-Za-z0-9_.-] */
    uint64_t length;       /* number of f32 elements */
    const char *optimizer; /* "sgd" | "momentum" | "adagrad" | "adam" */
    double lr;
    double momentum;     /* momentum: mu (0.9 if 0) */
    double beta1, beta2; /* adam (0.9, 0.999 if 0) */
    double eps;          /* adagrad/adam (1e-8 if 0) */
    double weight_decay; /* L2 added to the gradient (0) */
    const char *init;    /* "zeros" | "constant" | "uniform" | "normal" (NULL = zeros) */
    double init_scale;   /* constant value, uniform half-width, or normal stddev */
    uint64_t seed;       /* initializer seed; same seed => same values on any shard count */
    int has_staleness;   /* ssp: nonzero to give this table its own bound ... */
    unsigned staleness;  /* ... of this many clocks (else the cluster's `staleness`) */
    /* nsegments > 0: the initial values by consecutive segments covering
     * the table, each initialised as a table of its own length would be
     * (init, init_scale and seed above unused); read during the call */
    const zeps_init_segment *segments;
    size_t nsegments;
} zeps_table_spec;

/* Per-call timing a client accumulates (seconds), for the scaling figures. */
typedef struct zeps_client_stats {
    double wait_s;           /* time spent blocked in zeps_wait (communication not hidden) */
    uint64_t requests;       /* requests sent, retries excluded */
    uint64_t retries;        /* requests sent again after a timeout */
    uint64_t bytes_out;      /* payload bytes pushed */
    uint64_t bytes_in;       /* payload bytes pulled */
    uint64_t dropped;        /* pushes the servers received but did not apply (too stale, late) */
    uint64_t bytes_out_raw;  /* push bytes before compression (= bytes_out without a codec) */
    uint64_t bytes_in_raw;   /* pull bytes as f32 (= bytes_in without compressed pulls) */
    double encode_s;         /* time spent compressing pushes (error feedback included) */
    double decode_s;         /* time spent validating and applying compressed pulls */
    uint64_t restarts;       /* ERESTARTED answers: a shard restored from a snapshot */
    uint64_t pushes_acked;   /* push requests acknowledged, once per shard a push reached
                              * however often it was resent (a DUPLICATE answer acknowledges
                              * it too): the sum of the shards' per-worker `pushes` (STATS)
                              * for this rank, if each was applied once */
    uint64_t redirects;      /* replicated shards: times a shard's requests moved to another
                              * replica, its primary (an ENOTPRIMARY redirect followed, or a
                              * primary found after the last one was lost) */
    uint64_t slot_redirects; /* EMOVED answers followed: a sparse request's ids sent again
                              * to their owners under a newer slot map (docs/elastic.md) */
    uint64_t slot_epoch;     /* the epoch of the slot map this client places ids by (0: the
                              * default map, hash mod S) */
} zeps_client_stats;

/* Connect as worker `rank` to the cluster described by the cluster file at
 * `path`. Waits (bounded, logged) until every shard answered HELLO. On success
 * *out owns a new client; destroy it with zeps_client_destroy(). With
 * replicated shards (cluster.replicas >= 2) the client knows every replica
 * and follows each shard's primary: an ENOTPRIMARY redirect, or a primary
 * lost and another elected (docs/replication.md); zeps_client_new_endpoints
 * knows one endpoint per shard and does not. */
int zeps_client_new(zeps_client **out, const char *cluster_file, uint32_t rank);

/* zeps_client_new, with the HELLO wait (and every later wait) interruptible
 * by *flag as zeps_client_set_interrupt makes them: a process stopped by a
 * signal while its shards are not up yet gives up at once with ZEPS_ECLOSED
 * instead of waiting out hello_timeout_ms. flag may be NULL. */
int zeps_client_new_interruptible(zeps_client **out, const char *cluster_file, uint32_t rank,
                                  volatile int *flag);

/* The same from explicit shard endpoints (endpoints[i] is shard i). */
int zeps_client_new_endpoints(zeps_client **out, const char *const *endpoints, int num_shards,
                              uint32_t rank, const zeps_options *opt);

/* The same for replicated shards: endpoints[k * replicas + r] is replica r
 * of shard k (replicas 1..5); the client follows each shard's primary as
 * zeps_client_new does. */
int zeps_client_new_replicas(zeps_client **out, const char *const *endpoints, int num_shards,
                             int replicas, uint32_t rank, const zeps_options *opt);

/* Make waits interruptible: while *flag is nonzero, zeps_wait() (and every
 * blocking call) gives up at once with ZEPS_ECLOSED instead of waiting on. A
 * signal handler may set the flag (it is only read); the signal itself
 * wakes a wait that is blocked. NULL turns it off. */
void zeps_client_set_interrupt(zeps_client *c, volatile int *flag);

/* This worker's rank as zeps-worker finds it (docs/operations.md): from
 * `value` if not NULL (a number, "auto", "hostname" or "env:NAME"), else
 * $ZEPS_RANK, else $JOB_COMPLETION_INDEX, else $SLURM_PROCID. On success
 * writes *rank; otherwise ZEPS_ECONFIG with a message naming the variable
 * and its value in err (errlen bytes, always terminated). */
int zeps_resolve_rank(const char *value, uint32_t *rank, char *err, size_t errlen);

/* This worker ran all its steps, `clock` being the number of clocks it
 * finished (its last CLOCK + 1): the BYE of zeps_client_destroy() says so,
 * and under bsp a worker then parked on a later round, which can never
 * close, is answered ZEPS_ECLOCK at once, naming this worker and clock,
 * instead of waiting out lost_worker_wait_s (docs/python.md, "Every rank
 * the same number of steps"). A negative clock takes it back. Without it
 * (a worker stopped by a signal or an error) the shards wait for a
 * replacement as configured. */
void zeps_client_set_done(zeps_client *c, int64_t clock);

/* Say BYE to every shard (best effort, bounded: one resend after 500 ms,
 * even when the interrupt flag is set), close sockets, free. Takes
 * *cp and sets it to NULL; NULL is ignored. */
void zeps_client_destroy(zeps_client **cp);

/* Declare a table on every shard. On success *table is its handle (a small
 * index local to this client). */
int zeps_declare(zeps_client *c, const zeps_table_spec *spec, uint32_t *table);

/* Number of elements of a declared table, or 0 for an unknown handle. */
uint64_t zeps_table_length(const zeps_client *c, uint32_t table);

/* Start pulling elements [offset, offset + count) of `table` into dst, as seen
 * by a worker at `clock` (BSP/SSP may park the pull until that clock is
 * allowed). dst must stay valid and untouched until zeps_wait() returns.
 * On success *req is a wait handle. */
int zeps_pull_start(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
                    int64_t clock, zeps_req **req);

/* Start pushing a gradient for elements [offset, offset + count) computed at
 * `clock`. The bytes are sent without copying: grad must stay valid and
 * unchanged until zeps_wait() returns. */
int zeps_push_start(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                    uint64_t count, int64_t clock, zeps_req **req);

/* Wait until every shard answered the request (retrying as configured) and
 * ZeroMQ released the caller's buffer. Takes *req (sets it to NULL) whatever
 * the result. Returns the first error any shard replied with. */
int zeps_wait(zeps_req **req);

/* Wait for every non-NULL handle of reqs[0..n) (each is taken and set to
 * NULL, as by zeps_wait) and return the first error, or 0. */
int zeps_wait_all(zeps_req **reqs, int n);

/* Zero-copy pulls. zeps_pull_view_start() pulls like zeps_pull_start() but
 * leaves the values in the buffers ZeroMQ received them into; zeps_wait_view()
 * waits like zeps_wait() and on success hands them over as a view: one part
 * per shard the range touched, in element order, each 4-byte aligned and
 * valid until zeps_view_release(). This saves the copy into a caller
 * buffer (about 4 ms per 32 MB here), for programs that read parameters
 * where they land. */
typedef struct zeps_view zeps_view;

int zeps_pull_view_start(zeps_client *c, uint32_t table, uint64_t offset, uint64_t count,
                         int64_t clock, zeps_req **req);

/* Takes *req (sets it to NULL). On success *view owns the received values. */
int zeps_wait_view(zeps_req **req, zeps_view **view);

/* Number of parts, and part i: its values, first element and count. */
int zeps_view_parts(const zeps_view *v);
const float *zeps_view_part(const zeps_view *v, int i, uint64_t *offset, uint64_t *count);

/* Give the buffers back. Takes *vp and sets it to NULL; NULL is ignored.
 * A view refers to no client: it may be read and released after
 * zeps_client_destroy(). */
void zeps_view_release(zeps_view **vp);

/* Compressed pushes. From now on, pushes of `table` by this client are
 * encoded with `codec` ("none", "fp16", "bf16", "int8", "sign", "topk",
 * "randk"; docs/compression.md); with error_feedback, the client keeps a
 * residual per element (4 bytes per element of the table) and sends
 * C(residual + g), carrying what compression dropped into later pushes.
 * The push buffer is read (not referenced) when a push starts. */
typedef struct zeps_codec_opts {
    const char *codec;
    double fraction; /* topk/randk: share of elements sent (0.01 if 0) */
    uint64_t count;  /* topk/randk: exact number sent (overrides fraction) */
    uint32_t block;  /* int8: elements per scale (256 if 0) */
    int error_feedback;
    uint64_t seed; /* stochastic codecs */
} zeps_codec_opts;

int zeps_set_push_codec(zeps_client *c, uint32_t table, const zeps_codec_opts *opts);

/* Compressed pulls. From now on, a pull of the WHOLE of `table` into a
 * caller buffer (zeps_pull / zeps_pull_start with offset 0 and count = the
 * table's length) asks each shard for the change since the values this
 * client last pulled, compressed with opts->codec ("none", "fp16", "bf16",
 * "int8", "sign", "topk"; fraction/count/block/seed as for pushes;
 * error_feedback is ignored: it is implicit, see below). Each shard keeps a
 * copy of what the client holds (its view, 4 bytes per element of its slice
 * per worker) and sends c = C(params - view), then adds D(c) to its view;
 * the client adds D(c) to the buffer, so buffer and view stay equal bit for
 * bit and what the codec left out goes out with later pulls.
 *
 * THE CONTRACT: the buffer of a compressed pull must hold exactly what the
 * previous compressed pull of this table left in it (the caller may read it,
 * not write it), one compressed pull of the table in flight at a time. The
 * first pull, a pull after zeps_pull_codec_reset(), and any pull whose view
 * the shard no longer has (it restarted, a reply was lost) bring the full
 * f32 values (a resync), so a fresh buffer needs a reset, not zeroing.
 * With codec "none" every pull brings the full values, as a plain pull.
 * Pulls of part of the table and view pulls stay plain and do not touch
 * the buffer's bookkeeping. randk is refused (ZEPS_EINVAL): its n/k scaling
 * would make the copy run away. opts NULL turns compressed pulls off. */
int zeps_set_pull_codec(zeps_client *c, uint32_t table, const zeps_codec_opts *opts);

/* Forget what the caller's buffer holds: the next compressed pull of
 * `table` brings the full values (call it before pulling into a new buffer). */
int zeps_pull_codec_reset(zeps_client *c, uint32_t table);

/* --- Sparse tables (docs/sparse.md) ---
 *
 * A sparse table maps u64 ids (any value) to rows of `dim` f32. Row `id`
 * lives on shard hash(id) mod S; rows are created on first touch with the
 * table's initializer (seeded by (seed, id), so independent of S), go
 * through admission if configured, and may be evicted (TTL in clocks, or
 * LRU/LFU under a row capacity or memory budget). Each row has its own
 * optimizer state and version. */
typedef struct zeps_sparse_spec {
    const char *name;      /* as for dense tables; one namespace for both */
    uint32_t dim;          /* values per row, 1..4096 */
    const char *optimizer; /* "sgd" | "adagrad" | "adam" | "ftrl" */
    double lr;             /* step; ftrl: alpha */
    double beta1, beta2;   /* adam (0.9, 0.999 if 0) */
    double eps;            /* adagrad/adam (1e-8 if 0) */
    double weight_decay;   /* L2 added to the gradient (sgd/adagrad/adam) */
    double l1, l2;         /* ftrl */
    double ftrl_beta;      /* ftrl beta (1 if 0) */
    const char *init;      /* "zeros" | "constant" | "uniform" | "normal" */
    double init_scale;
    uint64_t seed;
    uint32_t admit_count;   /* create a row once its id was touched this often (0/1: at once) */
    double admit_prob;      /* or with this probability per touch (0 = 1 = always) */
    uint64_t ttl_clocks;    /* evict rows untouched for this many clocks (0: never) */
    uint64_t capacity_rows; /* evict (lru/lfu) above this many rows per shard (0: no cap) */
    uint64_t memory_budget; /* ... or above this many bytes per shard (0: no budget) */
    const char *evict;      /* "lru" | "lfu" (NULL = lru) */
    /* Lead columns: values [0, lead_cols) of every row take lead_lr (ftrl:
     * alpha) and lead_init instead of lr and init, so a per-id bias can live
     * in the row of its embedding, one lookup for both (docs/sparse.md). */
    uint32_t lead_cols;    /* 0..dim (0: none) */
    double lead_lr;        /* > 0 when lead_cols > 0 */
    const char *lead_init; /* as init (NULL = zeros) */
    double lead_init_scale;
    /* Cold tier: rows evicted under capacity_rows or memory_budget (the hot
     * budget) are kept on the shard's disk (cluster.tier_dir) instead of
     * dropped, and come back exactly when touched (docs/sparse.md). With
     * memory_budget, half of it goes to the tier's RocksDB (write buffers,
     * block cache, index and filters) and half to the hot rows. */
    int tier; /* 0: off, 1: on */
} zeps_sparse_spec;

int zeps_declare_sparse(zeps_client *c, const zeps_sparse_spec *spec, uint32_t *table);

/* Values per row of a sparse table; 0 for a dense table or unknown handle. */
uint32_t zeps_table_dim(const zeps_client *c, uint32_t table);

/* A batch of ids, deduplicated and grouped by shard once, then pulled and
 * pushed as one request per shard that holds any of them. Positions keep
 * the caller's order: rows[i * dim] is the row of ids[i] (repeats get the
 * same row) and a push sums the gradients of repeated ids into one update of
 * that row. The batch remembers the row versions its last pull saw and sends
 * them with the push, so the server measures each row's staleness. */
typedef struct zeps_sbatch zeps_sbatch;

/* ids are copied; n may be 0. */
int zeps_sbatch_new(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                    zeps_sbatch **out);
size_t zeps_sbatch_size(const zeps_sbatch *b);   /* n */
size_t zeps_sbatch_unique(const zeps_sbatch *b); /* distinct ids */
void zeps_sbatch_free(zeps_sbatch **bp);

/* Pull every row of the batch into rows[n * dim] (as seen at `clock`). rows
 * must stay valid until zeps_wait() returns. */
int zeps_sbatch_pull_start(zeps_sbatch *b, float *rows, int64_t clock, zeps_req **req);
int zeps_sbatch_pull(zeps_sbatch *b, float *rows, int64_t clock);

/* Push grads[n * dim] (per position; repeats are summed). grads is read
 * when the call starts. */
int zeps_sbatch_push_start(zeps_sbatch *b, const float *grads, int64_t clock, zeps_req **req);
int zeps_sbatch_push(zeps_sbatch *b, const float *grads, int64_t clock);

/* The same batch by its distinct rows, for a caller that keeps one row per
 * id (an autograd leaf: PyTorch sums repeated positions itself).
 * positions[i] is the index of ids[i]'s row among the zeps_sbatch_unique(b)
 * distinct rows, in the order the ids first appear (the same on any shard
 * count; the batch owns the array, valid until it is freed); the
 * _unique calls read and write urows[u * dim], u < zeps_sbatch_unique(b),
 * with no scatter and no sum: the ids were deduplicated once, in C. */
const uint32_t *zeps_sbatch_positions(const zeps_sbatch *b);
int zeps_sbatch_pull_unique_start(zeps_sbatch *b, float *urows, int64_t clock, zeps_req **req);
int zeps_sbatch_push_unique_start(zeps_sbatch *b, const float *ugrads, int64_t clock,
                                  zeps_req **req);
/* ... and their blocking forms (start, then zeps_wait). */
int zeps_sbatch_pull_unique(zeps_sbatch *b, float *urows, int64_t clock);
int zeps_sbatch_push_unique(zeps_sbatch *b, const float *ugrads, int64_t clock);

/* A step's first two calls in one: zeps_sbatch_new of ids[n], then its
 * distinct rows pulled into urows, which must hold n * dim floats (there
 * are at most n distinct rows; zeps_sbatch_unique(*out) of them are
 * written). With req NULL the call waits for the rows; else *req is the
 * pull in flight, to wait for as zeps_sbatch_pull_unique_start's. On
 * success the caller owns *out (zeps_sbatch_free); on error no batch is
 * left and *out is not written. */
int zeps_sbatch_new_pull_unique(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n,
                                float *urows, int64_t clock, zeps_sbatch **out, zeps_req **req);

/* One-shot forms: a batch made, used once and freed. */
int zeps_spull(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n, float *rows,
               int64_t clock);
int zeps_spush(zeps_client *c, uint32_t table, const uint64_t *ids, size_t n, const float *grads,
               int64_t clock);

/* --- Reading and writing a table whole (SCAN, PUT; docs/protocol.md) ---
 *
 * For checkpoints a program keeps itself: read every shard's part of a
 * table page by page with its optimizer state (zeps_scan), and write values
 * and state back, into this cluster or a new one of any shard count
 * (zeps_put_dense, zeps_put_rows). The optimizer keeps k floats of state
 * per value (k = state_per_value: sgd 0, momentum 1, adagrad 1, adam 2 (m,
 * v), ftrl 2 (z, n)); a sparse row's version is its Adam step count, a
 * dense slice's version the slice's. Pages are read as they are when each
 * is read: a scan during training is not a consistent cut (take it after
 * zeps_barrier, or use snapshots).
 *
 * A sparse page holds `count` row records, each ZEPS_ROW_RECORD_BYTES(dim,
 * k) bytes, the rows section of a snapshot file (docs/snapshots.md): u64
 * id, u32 version, u32 touches, i64 last clock, dim f32 values, then k
 * blocks of dim f32 state; little-endian, no padding (records after the
 * first may be unaligned: copy fields out with memcpy). A dense page holds
 * `count` f32 values of elements [offset, offset + count), then k blocks
 * of `count` f32 state for the same elements. */
#define ZEPS_ROW_RECORD_BYTES(dim, k) (24u + 4u * (uint64_t)(dim) * (1u + (uint64_t)(k)))

typedef struct zeps_page {
    uint64_t count;           /* rows (sparse) or elements (dense) in the page; may be 0 */
    uint64_t offset;          /* dense: the global index of its first element; sparse: its cursor */
    uint64_t next;            /* the cursor of this shard's next page; 0: this was the last */
    uint64_t version;         /* the table's version on the shard when the page was read */
    uint32_t dim;             /* sparse: values per row; dense: 0 */
    uint32_t state_per_value; /* k */
    const void *data;         /* the page, `bytes` bytes laid out as above, 8-byte aligned */
    uint64_t bytes;
    void *priv; /* the library's */
} zeps_page;

/* Read one page of `table`'s part on shard `shard`, starting at `cursor`
 * (0 for the first page, then each page's `next` until it is 0), at most
 * `max` rows or elements (0: as many as fit max_message_mb; a page may hold
 * fewer than asked). Sparse rows come in the shard's storage order: a row
 * present for the whole scan is in exactly one page, whatever is created
 * or evicted meanwhile; a row made during the scan appears at most once,
 * and one evicted and made again may appear twice (keep the later). On
 * success *page is filled and the caller owns its data until
 * zeps_page_release(page); on error *page is untouched. Errors: ETABLE,
 * EINVAL (no page, shard out of range), ERANGE (a cursor past the shard's
 * rows or outside its slice, max above 2^24: the shard's words). A cursor
 * is only meaningful as 0 or a `next` of the same shard and table, until
 * that shard restarts. */
int zeps_scan(zeps_client *c, uint32_t table, int shard, uint64_t cursor, uint64_t max,
              zeps_page *page);

/* Give a page's data back; the page may then be reused. Tolerates a
 * zeroed or released page. */
void zeps_page_release(zeps_page *page);

/* Write elements [offset, offset + count) of dense `table`: values[count],
 * and state[k * count] (k blocks of count floats, NULL when k is 0) for an
 * optimizer keeping k floats per value. Every shard holding part of the
 * range writes its part at once (outside bsp rounds); its version becomes
 * max(version + 1, `version`), so a checkpoint's version comes back with
 * one PUT per shard (a part over max_message_mb goes in several, each
 * counting one). Applied once even if resent. The arrays are read during
 * the call only. Errors: ERANGE, EINVAL (k not the table's optimizer's,
 * a sparse table), ENONFINITE (NaN or Inf anywhere: nothing is written
 * on that shard). */
int zeps_put_dense(zeps_client *c, uint32_t table, uint64_t offset, uint64_t count, uint32_t k,
                   const float *values, const float *state, uint64_t version);

/* Write n rows of sparse `table` given as records (the layout above, with
 * k floats of state per value; ids distinct), made if missing (no
 * admission; a table at capacity evicts to make room) and put as given:
 * values, state, version, touches, last clock. Each shard gets its rows
 * (one PUT per shard unless over max_message_mb); the table's version
 * there becomes max(version + 1, `version`). The records are read during
 * the call only. Errors: EINVAL (repeated ids, k not the optimizer's, a
 * dense table), ENONFINITE, ENOMEM (the shard's row limits). */
int zeps_put_rows(zeps_client *c, uint32_t table, uint32_t k, const void *records, uint64_t n,
                  uint64_t version);

/* --- Pipelines (docs/pipeline.md) ---
 *
 * A zeps_pipe runs the requests of a training loop over a fixed list of
 * tables (sparse and dense) so that communication overlaps computation:
 * the pulls of the next `prefetch` steps travel while the caller computes
 * one, and the pushes of up to `max_inflight` steps stay unanswered. The
 * caller feeds steps (a clock and, for the sparse tables, the minibatch's
 * ids), takes them back in order with zeps_pipe_next() once their rows
 * arrived, writes gradients into the step's buffers and hands it back with
 * zeps_pipe_push(). Loop:
 *
 *     for (s = start; s <= start + prefetch; s++) zeps_pipe_feed(p, s, ids(s), n(s), NULL);
 *     for (c = start; c < end; c++) {
 *         zeps_pipe_next(p, &st);            // rows of step c are in st->rows
 *         compute(st->rows, st->grads);
 *         zeps_pipe_push(p, st);             // pushes (and the clock) start, no wait
 *         if (c + prefetch + 1 < end) zeps_pipe_feed(p, c + prefetch + 1, ...);
 *     }
 *     zeps_pipe_drain(p);
 *
 * Ordering and staleness. The pulls of a step go out after the pushes of
 * every step pushed before them (messages to a shard keep their order), as
 * of the clock the worker has reached then (the last pushed clock + 1, or
 * the first fed clock): with prefetch 0 a step's pull follows the previous
 * step's push, exactly as a loop of blocking calls; with prefetch k a step
 * reads rows that miss at most the worker's own last k pushes, and the
 * shards measure that per row as now (a row touched by every step has
 * tau = k under async with one worker). Under bsp/ssp the lower pull clock
 * is what lets the pull go out early; it is k clocks staler. Where dense
 * tables advance in rounds (ZEPS_CAP_CUTS: bsp), a round's pushes must
 * wait for the round before it, so a dense table's pull asks for the
 * step's own clock: it travels early and the shards hold it until the
 * round before it closed (dense values are then never stale).
 *
 * Ownership. The pipe owns the sparse batches (ids are copied at feed), the
 * row and gradient buffers of every step (valid from zeps_pipe_next until
 * that step's zeps_pipe_push; gradients must be written before it) and
 * every request in flight; the caller owns `user` (handed back untouched).
 * One thread at a time, as the client. A dense table is pulled whole into
 * the step's buffer, so tables with compressed pulls (zeps_set_pull_codec,
 * whose contract is one buffer) must not be in a pipe.
 *
 * Errors. A failing call waits for every request of the pipe in flight
 * (bounded by the client's timeouts and interrupt flag), so no buffer is
 * referenced and nothing hangs, and returns the error; every later call
 * returns the same error until zeps_pipe_reset() (zeps_last_error() has the
 * text). Misuse (next before the held step was pushed, feeding more than the
 * ring holds) is ZEPS_EINVAL and changes nothing. */
typedef struct zeps_pipe zeps_pipe;

#define ZEPS_PIPE_MAX_TABLES 16
#define ZEPS_PIPE_MAX_AHEAD  64

typedef struct zeps_pipe_opts {
    int prefetch;     /* steps pulled ahead of the one being computed (0: none) */
    int max_inflight; /* steps whose pushes may stay unanswered when the next step
                         is handed out (0: each push is answered first) */
    int clock;        /* nonzero: zeps_pipe_push also finishes the step's clock */
} zeps_pipe_opts;

/* One step as zeps_pipe_next hands it out. rows[i]: table i's pulled rows
 * (sparse: n * dim, row of position j at j * dim; dense: the whole table);
 * grads[i]: where the caller writes table i's gradient, same shape. */
typedef struct zeps_pipe_step {
    int64_t clock;
    void *user;
    size_t n; /* positions of the sparse tables */
    float *rows[ZEPS_PIPE_MAX_TABLES];
    float *grads[ZEPS_PIPE_MAX_TABLES];
} zeps_pipe_step;

/* A pipe over tables[0..ntables) of c (copied; opts NULL = all zero). It
 * holds prefetch + max_inflight + 2 steps (zeps_pipe_slots). On success
 * *out owns it; destroy it before the client. */
int zeps_pipe_new(zeps_client *c, const uint32_t *tables, int ntables, const zeps_pipe_opts *opts,
                  zeps_pipe **out);

/* Queue step `clock` with the ids of its minibatch (copied; the same ids go
 * to every sparse table) and start its pulls if the bound allows. Waits for
 * old pushes if their slot is needed. */
int zeps_pipe_feed(zeps_pipe *p, int64_t clock, const uint64_t *ids, size_t n, void *user);

/* Wait for the oldest fed step's pulls (and for pushes beyond
 * max_inflight); on success *step is it, the pipe's until zeps_pipe_push. */
int zeps_pipe_next(zeps_pipe *p, zeps_pipe_step **step);

/* Start the pushes of `step` (the one zeps_pipe_next handed out) from its
 * grads, and its clock if opts.clock; then the pulls the bound now allows.
 * Does not wait for replies. */
int zeps_pipe_push(zeps_pipe *p, zeps_pipe_step *step);

/* Wait for every push in flight; returns the first error. */
int zeps_pipe_drain(zeps_pipe *p);

/* Wait for everything in flight, forget every fed step and clear the
 * error: the pipe is as new (bsp recovery feeds again from the cut). */
void zeps_pipe_reset(zeps_pipe *p);

/* Steps the pipe holds. */
int zeps_pipe_slots(const zeps_pipe *p);

/* Waits like zeps_pipe_reset, frees. Takes *pp and sets it to NULL; NULL
 * is ignored. */
void zeps_pipe_destroy(zeps_pipe **pp);

/* Blocking forms of zeps_pull_start() and zeps_push_start(). */
int zeps_pull(zeps_client *c, uint32_t table, float *dst, uint64_t offset, uint64_t count,
              int64_t clock);
int zeps_push(zeps_client *c, uint32_t table, const float *grad, uint64_t offset, uint64_t count,
              int64_t clock);

/* Tell every shard this worker finished clock `clock` (its clock becomes
 * clock + 1). Clocks must not go backwards. */
int zeps_clock(zeps_client *c, int64_t clock);

/* A step's last dense push and its clock in one: zeps_push_start of
 * [offset, offset + count), each shard's part carrying `clock` (a PUSH
 * with the CLOCK flag: no CLOCK message of its own), and a CLOCK to the
 * shards the range does not touch (*rest; NULL when it touches them all).
 * Send no later push of the step. Wait for both. */
int zeps_push_clock_start(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                          uint64_t count, int64_t clock, zeps_req **push, zeps_req **rest);

/* Non-blocking form of zeps_clock(): on success *req is a wait handle. */
int zeps_clock_start(zeps_client *c, int64_t clock, zeps_req **req);

/* --- Recovery (docs/faults.md) ---
 *
 * The clock this worker resumes at. After zeps_client_new: the smallest
 * clock any shard recorded for this rank (0 for a new job; a restarted
 * worker, or a job restored from a snapshot, continues where the shards
 * are). Under bsp, after a call failed with ZEPS_ERESTARTED (a shard
 * restarted from a snapshot, or rolled back): the cut the job goes back to. */
int64_t zeps_resume_clock(const zeps_client *c);

/* Nonzero if some shard knew this rank under another incarnation at
 * HELLO: this process replaces a worker that died (it must not wait in a
 * start-up barrier the others have passed). */
int zeps_rejoined(const zeps_client *c);

/* bsp recovery after ZEPS_ERESTARTED: say HELLO again to every shard and
 * have every shard roll back to the cut `clock` (zeps_resume_clock()) of the
 * snapshot set it came from; the caller then pulls at `clock` and redoes the
 * clocks from there. The request names the recovery the ERESTARTED
 * answer named: a shard rolls back once per recovery, and shards already
 * at that cut only acknowledge, so every worker may call it, late too. Returns 0, or an error
 * (ERESTARTED again if another rollback overtook this one: call it again with the new resume
 * clock). */
int zeps_rollback(zeps_client *c, int64_t clock);

/* Ask every shard for a snapshot (tools; zepsctl snapshot take). Under
 * bsp, `clock` is the cut: each shard writes its file when every table of
 * it has closed round `clock` (at once if it is there), so all shards write
 * the same cut with no coordinator; a shard already past it answers
 * ZEPS_ECLOCK. In other modes each shard snapshots now as set `setid`.
 * Returns once every shard accepted (the files are written in the
 * background; ShardStats.last_snapshot_set says when). */
int zeps_snapshot_request(zeps_client *c, int64_t clock, uint64_t setid);

/* Take a snapshot of the whole cluster and wait (at most timeout_s) until
 * every shard wrote it: under bsp a consistent cut at the clock every shard
 * stands at, or else the next one every shard reaches (a worker calls it
 * after a step's pushes and CLOCK, or it would hold that round back);
 * otherwise a point in time, now. On success *clock (the cut; -1 for a
 * point in time) and *setid (either may be NULL) name the set. Returns 0;
 * ZEPS_ETIMEDOUT if not every shard wrote it in time, ZEPS_ESTATE from a
 * shard without a snapshot_dir, ZEPS_ECLOSED when interrupted. Any client,
 * a tool (rank ZEPS_RANK_TOOL) or a worker. */
int zeps_snapshot_take(zeps_client *c, double timeout_s, int64_t *clock, uint64_t *setid);

/* Operators (a tool client, zepsctl evict): release worker `rank` on every
 * shard, so that the next HELLO of a new incarnation of that rank is taken
 * even though the old one was heard from within its lease (docs/faults.md,
 * "Two processes with one rank"). The old incarnation's requests are then
 * refused. Returns 0 once every shard acknowledged. */
int zeps_evict(zeps_client *c, uint32_t rank);

/* Make `lr` the learning rate `table` is updated with from now on, on every
 * shard (dense or sparse; a sparse table's lead columns scale with it:
 * lead_lr x lr / the declared lr). The other hyper-parameters stay as
 * declared. Kept in snapshots; a re-declaration is still checked against
 * the declared lr. Under bsp, call it in a step after that step's pull
 * (as a schedule does at an epoch's start): the round it applies to is
 * then the same on every run. Returns 0 once every shard acknowledged;
 * ZEPS_EOPTIM if lr is not finite and > 0 (docs/python.md, "Learning-rate
 * schedules"). */
int zeps_set_lr(zeps_client *c, uint32_t table, double lr);

/* The job reached its target at `clock` (this worker's last pushed step):
 * tell every shard, which then answers every other worker's pulls with
 * ZEPS_EFINISHED, parked ones at once, so they stop instead of running out
 * their step budget; this worker's own pulls are still served (its final
 * evaluation). Call it after the last push was acknowledged. Returns 0 once
 * every shard acknowledged. */
int zeps_finish(zeps_client *c, int64_t clock);

/* Block until every worker of the cluster entered the barrier. */
int zeps_barrier(zeps_client *c);

/* The version of `table`'s slice on `shard` as returned by the last pull
 * (a sparse table: the pushes applied to it on that shard, as of the last
 * pull of a batch with ids there; 0 before any). */
uint64_t zeps_pulled_version(const zeps_client *c, uint32_t table, int shard);

/* The cluster's consistency mode as the shards said at HELLO: its name
 * ("bsp", ...; for people and logs: decide nothing by it) and, in *caps if
 * not NULL, what it implies (ZEPS_CAP_*). The string lives as long as c. */
#define ZEPS_CAP_CUTS     0x1u /* snapshots are consistent cuts at a common clock */
#define ZEPS_CAP_ROLLBACK 0x2u /* a restored shard sends the whole job back to its cut */
#define ZEPS_CAP_BOUND    0x4u /* pulls wait for a staleness bound */
const char *zeps_consistency(const zeps_client *c, uint32_t *caps);

/* Cluster layout learnt at HELLO: the shards this client knows, the
 * cluster file's and those it learnt joined at run time from a slot map
 * (docs/elastic.md, "Adding a shard"; the count grows when it learns one). */
int zeps_num_shards(const zeps_client *c);
int zeps_num_workers(const zeps_client *c);
uint32_t zeps_rank(const zeps_client *c);

/* The client's accumulated timing and byte counters. */
void zeps_client_get_stats(const zeps_client *c, zeps_client_stats *out);

/* Text of the last error on this client ("" if none). Valid until the next call.
 * With c NULL: why the last zeps_client_new* call of this thread failed (the
 * cluster file's path, line and key for a bad file; the shard and endpoint
 * that did not answer HELLO), "" after a success. */
const char *zeps_last_error(const zeps_client *c);

/* Ask shard `shard` for its statistics. On success *buf is a malloc'ed
 * protobuf-encoded zeps.ShardStats message of *len bytes that the caller
 * frees. (zepsctl decodes it; other programs may ignore this.) */
int zeps_stats_raw(zeps_client *c, int shard, void **buf, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
