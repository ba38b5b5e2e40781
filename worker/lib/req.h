/*
 * req.h - the request engine of libzeps (req.c): requests cut into one
 * sub-request per shard, sent, answered, retried and waited for. The layers
 * above (tables.c, dense.c, sparse.c, view.c, control.c, client.c) build a
 * request, fill its sub-requests and wait; the engine never calls them back:
 * what a reply must fill is described in the sub-request beforehand (a
 * destination, a scatter, where to record versions). Internal to libzeps.
 */
#ifndef ZP_REQ_H
#define ZP_REQ_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "alloc.h"
#include "codec.h"
#include "shmseg.h"
#include "fail.h"
#include "zeps.h"
#include "zeps.pb-c.h"

/* Fewer than the server's dedup window (ZP_SEQ_WINDOW = 64) in flight per shard. */
#define ZP_REQ_MAX_IN_FLIGHT 48

/* The public handle zeps_req is the engine's request. */
typedef struct zeps_req zp_req;

/* Where the rows of a sparse PULL reply go: the reply holds `count` rows of
 * `dim` floats, then `count` u32 row versions. Row j goes to every position
 * plist[pbegin[j]] .. plist[pbegin[j + 1] - 1] of rows, its version to
 * versions[j]; a reply that fits increments *replied. Everything is borrowed
 * from the sparse batch (sparse.c), which outlives the request. */
typedef struct zp_req_scatter {
    float *rows;
    uint32_t dim;
    int in_order;         /* row j goes to position j: one copy, pbegin and plist unread */
    const uint32_t *perm; /* or row j goes to position perm[j] only (with in_order 0) */
    const size_t *pbegin;
    const uint32_t *plist;
    uint32_t *versions;
    int *replied;         /* NULL for a redirect's piece (its parent counts) */
    const uint32_t *jmap; /* a redirect's piece: row i is row jmap[i] of the above (redirect.c) */
} zp_req_scatter;

/* What a sparse PULL or PUSH sub needs to be sent again, split by owner,
 * after an EMOVED (redirect.c); set by sparse.c, all borrowed from the
 * table and batch, which outlive the request. table_ids NULL: the sub is
 * not sent again (the error reaches the caller). */
typedef struct zp_req_resend {
    const uint32_t *table_ids; /* the table's id on each shard */
    uint64_t *versions;        /* PULL: each shard's version of the table (version_out's) */
    uint32_t dim;
    const void *raw; /* PUSH: [ids][dim f32 rows][u32 versions with ROW_VERSIONS], uncompressed;
                        a dense PUSH: its count f32, uncompressed */
    int dense;       /* a dense PULL/PUSH of table `handle`: cut again by the client's map */
    uint32_t handle;
} zp_req_resend;

struct zp_req_sub {
    zp_req_sub *next; /* in the shard's list of outstanding subs */
    zp_req *req;
    int shard;
    uint64_t req_id, seq;
    uint32_t table; /* id on that shard */
    uint64_t offset, count;
    uint64_t data_version;
    uint32_t flags;
    const void *data; /* PUSH/PUT payload (borrowed, or `encoded`) */
    size_t data_len;  /* its bytes */
    void *encoded;    /* a payload owned by the sub, compressed or assembled (data points here) */
    uint32_t spv;     /* PUT request, SCAN reply: optimizer floats per value */
    uint64_t cursor;  /* SCAN reply: where the next page starts (0: done) */
    uint32_t codec;
    int compressed;          /* a compressed PULL: */
    zp_codec_params cparams; /* the codec's parameters (a copy: tables may move) */
    uint64_t view_id;        /* the view dst holds */
    uint64_t *view_id_out;   /* where the reply's view id is recorded */
    uint64_t *version_out;   /* PULL: where the slice version of the reply is recorded */
    float *dst;              /* PULL destination (NULL for a view or a scatter) */
    zp_req_scatter scatter;  /* sparse PULL: where the rows go (rows != NULL) */
    zmq_msg_t frame;         /* view PULL, SCAN: the received payload (8-byte aligned for SCAN) */
    zp_shm_desc xdesc;       /* xport_shm.c: the payload's buffer in the segment */
    uint64_t xseg;           /* ... of the segment so named (0: not placed) */
    uint64_t xzmq;           /* ... sent on the DEALER while that segment's attach connection
                                carries requests (0: not) */
    int has_frame;
    zp_req_resend resend; /* a PULL/PUSH: how an EMOVED sends it again */
    zp_req_sub *parent;   /* a redirect's piece: the sub it answers for (redirect.c) */
    uint64_t split_epoch; /* ... and the epoch of the map it was split by */
    uint64_t split_ns;    /* a redirected sub: not split before this (redirect.c) */
    uint64_t behind_ns;   /* ... first refused by a shard behind the map, or a parent was */
    int behind;           /* ... times so far: the wait doubles with each */
    int pieces;           /* a redirected sub: its pieces not yet answered */
    int piece_err;        /* ... the first error one of them had */
    uint32_t *jmap;       /* a pull piece's scatter.jmap (owned) */
    uint64_t deadline_ns;
    uint64_t sent_ns; /* first sent (0: not yet): how long a parked one has waited */
    int retries;
    int max_retries;
    int done;
};

struct zeps_req {
    zeps_client *c;
    int op;
    int64_t clock;
    const Zeps__TableSpec *spec;
    uint64_t cut_set;    /* ROLLBACK */
    uint64_t recovery;   /* ROLLBACK: the recovery it answers */
    uint32_t evict_rank; /* EVICT */
    int nsub, ndone;
    int err;
    int view;         /* a zero-copy pull */
    uint64_t said_ns; /* when a sub's wait was last logged (a PARKED reply's text) */
    atomic_int zrefs; /* payload frames ZeroMQ still holds */
    void *stats_buf;
    size_t stats_len;
    zp_req *follow; /* the pieces of its redirected subs (redirect.c), owned: freed with it */
    zp_req_sub subs[];
};

/* A request of `op` with room for nsub sub-requests. The caller owns it
 * until it hands it to zeps_wait (or frees it with zp_req_free). Inline:
 * redirect.c, below this engine, makes its follow-up requests too. */
static inline zp_req *zp_req_new(zeps_client *c, int op, int nsub)
{
    zp_req *r = zp_alloc_zeroed(1, sizeof(*r) + (size_t)nsub * sizeof(zp_req_sub));
    r->c = c;
    r->op = op;
    atomic_init(&r->zrefs, 0);
    return r;
}

/* Add a sub-request for shard k (waiting while k has ZP_REQ_MAX_IN_FLIGHT
 * out); the caller fills it, then sends it with zp_req_send. */
zp_req_sub *zp_req_add(zp_req *r, int k);
void zp_req_send(zp_req *r, zp_req_sub *s);

/* Wait until every sub-request of r is answered or failed and ZeroMQ
 * released r's payloads; r stays allocated. Returns r's first error. */
int zp_req_finish(zp_req *r);

/* Free a finished request and what its subs own. */
void zp_req_free(zp_req *r);

#endif
