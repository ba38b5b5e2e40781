/*
 * table.h - one dense table's slice on this shard.
 *
 * A dense table of `length` f32 elements is cut into S contiguous slices;
 * shard i owns [i*length/S, (i+1)*length/S). This module owns the slice's
 * parameters, optimizer state, version and the state a consistency policy
 * keeps per table (BSP's pending round, parked pulls).
 *
 * Parameters live in a reference-counted buffer so a pull reply can hand the
 * bytes to ZeroMQ without copying: while ZeroMQ still holds a reference, the
 * next update writes into a fresh copy instead (copy-on-write), so a reply
 * in flight never changes under the wire and always matches the version it
 * names.
 */
#ifndef ZP_TABLE_H
#define ZP_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "cpull.h"
#include "optim.h"
#include "sparse.h"
#include "stats.h"
#include "util.h"
#include "zeps.pb-c.h"

typedef struct zp_buf {
    atomic_int refs;
    size_t n;      /* floats */
    float data[];  /* 64-byte aligned start not required: f32 needs 4 */
} zp_buf;

/* Drop one reference; frees the buffer at zero. Callable from any thread
 * (ZeroMQ calls it from its I/O thread); signature fits zmq_free_fn. */
void zp_buf_release(void *data, void *hint);

/* A pull waiting for its clock (BSP/SSP). Owns a copy of the requester's
 * routing identity. */
typedef struct zp_parked {
    struct zp_parked *next;
    zmq_msg_t identity;
    uint64_t req_id;
    uint32_t rank;
    uint64_t seq;
    uint64_t offset, count;
    int64_t clock;
    double since_s; /* when it was parked */
    zmq_msg_t keys; /* sparse tables: the ids asked for */
    bool has_keys;
    zp_cpull_req cp; /* a compressed pull (cp.codec != NULL) */
} zp_parked;

/* Close what a parked pull holds and free it. */
void zp_parked_free(zp_parked *p);

enum { ZP_TABLE_DENSE = 0, ZP_TABLE_SPARSE = 1 };

/* One push as the consistency policy sees it. */
typedef struct zp_push zp_push;
struct zp_push {
    uint32_t rank;
    int64_t clock;          /* the clock it was computed at */
    uint64_t data_version;  /* the slice version it was computed from */
    const float *g;         /* count values, read in place from `frame` */
    size_t off, count;      /* slice-relative range */
    zmq_msg_t *frame;       /* holds g; a policy may take it (zmq_msg_move) */
    /* a validated topk/randk payload applied as it is (sgd without weight
     * decay: only the k sent elements change); g is then NULL */
    const zp_codec_ops *sparse_codec;
    const void *sparse_buf;
    size_t sparse_len;
    uint32_t reply_flags;   /* out: ZP_FLAG_DROPPED if received but not applied */
};

typedef struct zp_table {
    uint32_t id;
    char name[64];
    uint32_t kind;         /* ZP_TABLE_DENSE or ZP_TABLE_SPARSE */

    /* sparse tables: the rows (the dense fields below are then empty: n = 0) */
    zp_sparse *sparse;
    uint32_t dim;
    Zeps__TableSpec *sparse_spec; /* the declaration, to check re-declarations */
    uint64_t keys_pulled, keys_pushed;
    uint64_t *ids;         /* scratch: a request's ids, aligned */
    size_t ids_cap;
    uint64_t *set_keys;    /* scratch: the repeated-id check */
    uint32_t *set_gen, set_stamp;
    size_t set_cap;
    uint64_t set_seed;     /* its hash seed, random */
    float *grads;          /* scratch: misaligned gradients */
    size_t grad_cap;
    uint32_t *vers;        /* scratch: row versions read */
    size_t ver_cap;
    uint64_t length;       /* whole table */
    uint64_t begin, end;   /* this shard's slice, global element indices */
    size_t n;              /* end - begin */

    /* the declaration, kept to check re-declarations */
    char optimizer[16];
    zp_hyper hyper;
    zp_init_kind init;
    double init_scale;
    uint64_t seed;
    bool has_staleness;    /* ssp bound declared for this table */
    uint32_t staleness;

    const zp_optim_ops *opt;
    zp_buf *params;        /* n floats; the table holds one reference */
    float *state;          /* opt->state_per_param * n floats, or NULL */
    uint64_t version;      /* updates applied to this slice */

    /* BSP: the round being collected and the gradients received for it */
    int64_t round;         /* = rounds closed so far */
    int npending;
    int nworkers;
    zmq_msg_t *pending;    /* [nworkers] gradient frames held until the round closes */
    bool *have;            /* [nworkers] */
    uint64_t *pending_version; /* [nworkers] data_version of each held push */
    float *acc;            /* n floats: rank-ordered sum (BSP only, made on first use) */

    zp_parked *parked;     /* FIFO of waiting pulls */
    zp_parked **parked_tail;
    size_t nparked;

    uint64_t pushes, pulls;

    /* exact staleness measurement (stats.h) */
    zp_hist tau, clock_gap, pull_wait_us;
    uint64_t dropped, late;
    uint64_t push_bytes_wire, push_bytes_raw; /* compression accounting */
    double decode_s;

    /* DC-ASGD: the buffer each worker last pulled (a reference: copy-on-write
     * keeps it as it was sent) and scratch for the compensated gradient */
    zp_buf **pulled;       /* [nworkers], made on first use */
    float *scratch;
    float *push_scratch;   /* n floats: compressed pushes decoded for async/ssp/weighted */

    /* compressed pulls (cpull.h): each worker's view and the delta scratch,
     * made on first use; accounting of every pull's bytes */
    zp_pull_view *views;   /* [nworkers] */
    float *pull_delta;
    uint64_t pull_bytes_wire, pull_bytes_raw, pull_resyncs;
    double encode_s;
} zp_table;

/* Create the slice of a table declared by `spec` for shard `shard` of
 * `nshards`, with BSP state for `nworkers`. Validates the spec. On success
 * *out owns a new table; on error returns a zeps_err with a message in err. */
int zp_table_new(zp_table **out, uint32_t id, const Zeps__TableSpec *spec, int shard, int nshards,
                 int nworkers, char *err, size_t errlen);
void zp_table_destroy(zp_table **tp);

/* 0 if `spec` declares the same table as t; else ZEPS_ECONFLICT with the
 * first differing field named in err. */
int zp_table_check_same(const zp_table *t, const Zeps__TableSpec *spec, char *err, size_t errlen);

/* Apply a gradient to slice elements [off, off + count) (off relative to
 * begin), scaled by `scale`, with the table's optimizer; bumps the version.
 * Copies the parameter buffer first if a reply still references it. */
void zp_table_apply(zp_table *t, const float *g, size_t off, size_t count, float scale);

/* zp_table_apply for a validated topk/randk payload of `count` values at
 * `off`, on an sgd table without weight decay: w -= lr * scale * decoded,
 * touching only the sent elements (decode_add); bumps the version. */
void zp_table_apply_sparse(zp_table *t, const zp_codec_ops *codec, const void *buf, size_t len,
                           size_t off, size_t count, float scale);

/* True if t's optimizer lets zp_table_apply_sparse stand for zp_table_apply
 * (sgd, no weight decay). */
bool zp_table_sparse_ok(const zp_table *t);

/* Take a reference on the parameter buffer for a zero-copy reply; release
 * it with zp_buf_release (ZeroMQ does so through the free callback). */
zp_buf *zp_table_params_ref(zp_table *t);

/* Put the slice back to a snapshot's state (rollback): parameters,
 * optimizer state, version and round; gradients held for an open BSP round
 * are dropped. Replies still reading the old parameters keep their bytes
 * (copy-on-write). Parked pulls are left to the caller. */
void zp_table_reset_to(zp_table *t, const float *params, const float *state, uint64_t version,
                       int64_t round);

/* Bytes of parameters and optimizer state held for this slice. */
uint64_t zp_table_bytes(const zp_table *t);

/* Append a parked pull (takes ownership of p). */
void zp_table_park(zp_table *t, zp_parked *p);

#endif
