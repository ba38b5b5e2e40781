/*
 * cpull.h - compressed pulls: a shard answers a worker's pull with a
 * compressed delta against the copy of the slice the worker already holds.
 *
 * The shard keeps, per (table, worker), the view: the values it knows the
 * worker holds, and an id naming that content. A pull that names the view
 * it holds gets c = C(params - view) and the shard sets view += D(c) with
 * the same decode_add the worker runs on its copy, so the two stay equal
 * bit for bit, and whatever the codec dropped stays in params - view and
 * goes out with a later pull (error feedback without a separate residual).
 * A pull whose view is unknown (0, another id, a restarted shard) gets the
 * full f32 values, and the view is set to them (a resync).
 *
 * Memory: 4 bytes per element of the slice for every worker that uses
 * compressed pulls of the table, plus one 4-byte-per-element scratch for the
 * delta per table; made on first use, a worker's view freed when it says
 * BYE. docs/compression.md has the protocol and the reasons.
 *
 * Everything runs on the server's loop thread. The state lives in the
 * table (zp_table.cpull) and only this file touches it.
 */
#ifndef ZP_CPULL_H
#define ZP_CPULL_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "zeps.pb-c.h"

struct zp_table;

/* What a compressed pull asks for (parsed and checked from its header). */
typedef struct zp_cpull_req {
    const zp_codec_ops *codec; /* NULL: a plain pull */
    zp_codec_params params;
    uint64_t view_id; /* the view the worker holds; 0 = none */
} zp_cpull_req;

/* One worker's view of a table's slice. */
typedef struct zp_pull_view {
    float *v;    /* n floats, NULL until the first compressed pull */
    uint64_t id; /* names the content of v; 0 = none */
} zp_pull_view;

/* A table's compressed-pull state: the views and the delta scratch. */
typedef struct zp_cpull {
    zp_pull_view *views; /* [nworkers], made on first use */
    float *delta;        /* n floats, made on first delta */
} zp_cpull;

/* The reply a compressed pull gets. */
typedef struct zp_cpull_reply {
    int full;  /* 1: send the parameters (f32), the view now equals them */
    void *buf; /* else: the payload, malloc'ed; the caller frees it */
    size_t len;
    uint32_t codec;   /* the payload's codec (0 for full) */
    uint64_t view_id; /* the view after this reply */
} zp_cpull_reply;

/* Read the compressed-pull fields of a PULL header with ZP_FLAG_PULL_DELTA
 * into *out. Returns 0, or ZEPS_EPROTO (unknown codec) / ZEPS_EINVAL (bad
 * parameters, or randk, whose n/k scaling would make the view diverge)
 * with a sentence in err. */
int zp_cpull_parse(const Zeps__Header *h, zp_cpull_req *out, char *err, size_t errlen);

/* Prepare the answer for worker `rank` (< t->nworkers) to a compressed pull
 * of t's whole slice, whose values are `params` (t->n floats: the slice's
 * own, or the ones a past clock began with, table.h `past`), and update
 * the worker's view as if the answer were applied. `incarnation` seeds view
 * ids, so no id of an earlier run of the shard can name a view of this
 * one. Returns 0, or ZEPS_ENOMEM with a sentence in err (nothing changed).
 * Counts bytes and time in t. */
int zp_cpull_prepare(struct zp_table *t, uint32_t rank, const zp_cpull_req *rq,
                     const float *params, uint64_t incarnation, zp_cpull_reply *out, char *err,
                     size_t errlen);

/* Drop worker `rank`'s view of t (it left); its next compressed pull resyncs. */
void zp_cpull_forget(struct zp_table *t, uint32_t rank);

/* Free every view and the scratch of t (table destruction). */
void zp_cpull_free(struct zp_table *t);

/* Bytes held for compressed pulls of t: the views and the scratch. */
uint64_t zp_cpull_bytes(const struct zp_table *t);

#endif
