/*
 * table.h - one table on this shard, and the dense kind of table: a slice.
 *
 * A dense table of `length` f32 elements is cut into S contiguous slices;
 * shard i owns [i*length/S, (i+1)*length/S). This module owns the slice's
 * parameters, optimizer state and version, the declaration, and the
 * zp_table record that ties a table's parts together. Each part has its
 * own module and is touched only through it:
 *
 *   rows     a sparse table's row store and scratch   rows.c (+ sparse.c)
 *   round    BSP round state                          round.c
 *   dc       DC-ASGD state                            dc.c
 *   cpull    compressed-pull views                    cpull.c
 *   parked   pulls waiting on the table               parked.c
 *   versions the last versions, for injected staleness versions.c
 *   stats    counters and histograms                  recorded by op/
 *
 * What differs between a dense and a sparse table is a zp_table_kind (the
 * dense one here, zp_rows_kind in rows.c), so code that walks every table
 * never tests which kind it holds.
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

#include "buf.h"
#include "codec.h"
#include "cpull.h"
#include "dc.h"
#include "hist.h"
#include "init.h"
#include "optim.h"
#include "parked.h"
#include "round.h"
#include "rows.h"
#include "versions.h"
#include "snapshot.h"
#include "zeps.pb-c.h"

enum { ZP_TABLE_DENSE = 0, ZP_TABLE_SPARSE = 1 };

typedef struct zp_table zp_table;

/* Counters and histograms of one table: recorded by the op layer, read by
 * STATS. */
typedef struct zp_table_stats {
    uint64_t pushes, pulls;
    uint64_t keys_pulled, keys_pushed;    /* sparse */
    zp_hist tau, clock_gap, pull_wait_us; /* exact staleness (hist.h) */
    zp_freq_hist tau_by_freq;             /* sparse: per-row tau by row frequency */
    uint64_t dropped, late;
    uint64_t push_bytes_wire, push_bytes_raw; /* compression accounting */
    double decode_s;
    uint64_t pull_bytes_wire, pull_bytes_raw, pull_resyncs;
    double encode_s;
    uint64_t scans, puts; /* SCAN pages answered, PUT requests applied (op/scan.c) */
} zp_table_stats;

/* What a kind of table does its own way. */
typedef struct zp_table_kind {
    const char *name;
    uint32_t id; /* TableSpec.kind */
    bool rounds; /* collects BSP rounds (a cut is read from them) */
    /* fill t's kind-specific part from a checked spec; a dense table's
     * slice is elements [begin, end) */
    int (*create)(zp_table *t, const Zeps__TableSpec *spec, uint64_t begin, uint64_t end, char *err,
                  size_t errlen);
    void (*destroy)(zp_table *t);
    int (*check_same)(const zp_table *t, const Zeps__TableSpec *spec, char *err, size_t errlen);
    uint64_t (*bytes)(const zp_table *t);
    void (*clock)(zp_table *t, int64_t clock); /* the shard's clock moved on */
    void (*stats)(const zp_table *t, Zeps__TableStats *ts);
    void (*log_declared)(const zp_table *t, const Zeps__TableSpec *spec);
    void (*set_lr)(zp_table *t, float lr); /* make lr the kernels' learning rate */
    /* snapshots (common/snapshot): the record pointing at live memory; in
     * the writer, pack what is copied (rows); the declaration of a record
     * (heap, zeps__table_spec__free_unpacked); load a record into a table
     * made from it; whether a record fits t; put t back to a record */
    void (*describe)(const zp_table *t, zp_snap_table *st);
    void (*pack)(const zp_table *t, zp_snap_table *st);
    int (*snap_spec)(const zp_snap_table *st, Zeps__TableSpec **out, char *err, size_t errlen);
    int (*load)(zp_table *t, const zp_snap_table *st, char *err, size_t errlen);
    bool (*fits)(const zp_table *t, const zp_snap_table *st);
    int (*reset)(zp_table *t, const zp_snap_table *st, char *err, size_t errlen);
} zp_table_kind;

extern const zp_table_kind zp_table_dense;

struct zp_table {
    uint32_t id;
    char name[64];
    const zp_table_kind *kind;
    int nworkers;
    uint64_t version; /* updates applied (dense: to the slice; sparse: pushes) */

    /* the declaration, kept to check re-declarations */
    char optimizer[16];
    zp_hyper hyper;    /* dense: what the kernels read (hyper.lr = lr_now) */
    float lr_declared; /* lr as declared: re-declarations are checked against it */
    float lr_now;      /* the lr in force: lr_declared unless TUNE set another */
    zp_init_kind init;
    double init_scale;
    uint64_t seed;
    uint64_t init_digest; /* dense: of the declaration's init segments (segments.c), 0: none */
    bool init_known;      /* dense: declared (not restored): init_digest can be checked */
    bool has_staleness;   /* ssp bound declared for this table */
    uint32_t staleness;

    /* a dense table's slice (empty for a sparse table: n = 0) */
    uint64_t length;     /* whole table */
    uint64_t begin, end; /* this shard's slice, global element indices */
    size_t n;            /* end - begin */
    const zp_optim_ops *opt;
    zp_buf *params;      /* n floats; the table holds one reference */
    float *state;        /* opt->state_per_param * n floats, or NULL */
    float *push_scratch; /* n floats: compressed pushes decoded in place */

    zp_rows *rows;          /* a sparse table's rows (rows.c); NULL if dense */
    zp_round round;         /* round.c */
    zp_dc dc;               /* dc.c */
    zp_cpull cpull;         /* cpull.c */
    zp_parked_queue parked; /* parked.c */
    zp_versions versions;   /* versions.c: kept only under cluster.inject */
    /* bsp: the slice as round `past_clock` began (the values a pull at that
     * clock is answered with) and its version, kept while round
     * past_clock + 1 is collected: a worker that died between its shards'
     * pushes of round past_clock redoes it and pulls these again at a shard
     * that closed the round without waiting for it (docs/faults.md). One
     * reference; NULL: none. Costs a copy of the slice per round. */
    zp_buf *past;
    int64_t past_clock;
    uint64_t past_version;
    uint32_t turn;       /* cluster.inject turns: the rank whose pull is next (op/turns.c) */
    bool turn_taken;     /* ... and it was served: its push is still to come */
    uint64_t turn_round; /* a sparse table's turns: the step the turn is for (op/turns.c) */
    zp_table_stats stats;
};

/* The kind of table for TableSpec.kind, NULL if none. */
const zp_table_kind *zp_table_kind_for(uint32_t kind);

/* Create the slice of a table declared by `spec` for shard `shard` of
 * `nshards`, with BSP state for `nworkers`. Validates the spec. On success
 * *out owns a new table; on error returns a zeps_err with a message in err. */
int zp_table_new(zp_table **out, uint32_t id, const Zeps__TableSpec *spec, int shard, int nshards,
                 int nworkers, char *err, size_t errlen);
void zp_table_destroy(zp_table **tp);

/* The same for a piece of a dense table: elements [begin, end) (within
 * the spec's length; begin = end: no element here), placed by the slot
 * map's dense list (docs/elastic.md, "Dense tables by range"). */
int zp_table_new_piece(zp_table **out, uint32_t id, const Zeps__TableSpec *spec, uint64_t begin,
                       uint64_t end, int nworkers, char *err, size_t errlen);

/* A table declared from a snapshot record's recorded declaration as
 * table `id`, empty (zp_table_load_snap loads it). *out owns it on
 * success. */
int zp_table_declared_from_snap(zp_table **out, uint32_t id, const zp_snap_table *st, int nworkers,
                                char *err, size_t errlen);

/* Load table t (zp_table_declared_from_snap of st) with st's contents.
 * 0 or a zeps_err; on error the caller destroys t. */
int zp_table_load_snap(zp_table *t, const zp_snap_table *st, char *err, size_t errlen);

/* A table made from a snapshot record as table `id`: declared from the
 * recorded declaration, then loaded. *out owns it on success. */
int zp_table_from_snap(zp_table **out, uint32_t id, const zp_snap_table *st, int nworkers,
                       char *err, size_t errlen);

/* Append t to a growing array of tables; the array takes t. */
void zp_table_append(zp_table ***tables, uint32_t *n, uint32_t *cap, zp_table *t);

/* True for a dense table with no element on this shard: a table shorter
 * than the shard count (a 1-element bias on 2 shards). No push or pull
 * reaches it here, so it closes no round: it must not hold back the
 * shard's bsp cut (policy/bsp.c) or a rollback (state/restore.c). */
bool zp_table_empty_slice(const zp_table *t);

/* Make `lr` t's learning rate in force (TUNE; a sparse table's lead
 * columns scale with it: lead_lr x lr / lr_declared). Returns 0, or
 * ZEPS_EOPTIM naming the table if lr is not finite and > 0 (nothing
 * changed). */
int zp_table_set_lr(zp_table *t, double lr, char *err, size_t errlen);

/* t's snapshot record, pointing at live memory (the kind's describe, and
 * the lr in force). */
void zp_table_describe(const zp_table *t, zp_snap_table *st);

/* Rollback: t put back to record st, its lr in force too. 0 or an error
 * code with a message in err. */
int zp_table_reset(zp_table *t, const zp_snap_table *st, char *err, size_t errlen);

/* 0 if `spec` declares the same table as t; else ZEPS_ECONFLICT with the
 * first differing field named in err. */
int zp_table_check_same(const zp_table *t, const Zeps__TableSpec *spec, char *err, size_t errlen);

/* Apply a gradient to slice elements [off, off + count) (off relative to
 * begin), scaled by `scale`, with the table's optimizer; bumps the version.
 * Copies the parameter buffer first if a reply still references it. */
void zp_table_apply(zp_table *t, const float *g, size_t off, size_t count, float scale);

/* zp_table_apply of a gradient not checked yet: applies it only if every
 * value is finite, reading it once where the optimizer can (g_own: g
 * itself, given up by the caller, garbage afterwards; or NULL). Returns
 * true if applied (version bumped), false if a value was NaN or Inf and
 * nothing changed (the version neither). */
bool zp_table_apply_checked(zp_table *t, const float *g, float *g_own, size_t off, size_t count,
                            float scale);

/* zp_table_apply for a validated topk/randk payload of `count` values at
 * `off`, on an sgd table without weight decay: w -= lr * scale * decoded,
 * touching only the sent elements (decode_add); bumps the version. */
void zp_table_apply_sparse(zp_table *t, const zp_codec_ops *codec, const void *buf, size_t len,
                           size_t off, size_t count, float scale);

/* SCAN of a dense slice: elements [off, off + n) (off relative to begin)
 * into out: their n values, then each of the optimizer's state_per_param
 * blocks for them (n floats each), the snapshot's layout of a slice cut to
 * the range. */
void zp_table_read(const zp_table *t, size_t off, size_t n, float *out);

/* PUT into a dense slice: the values and state of elements [off, off + n)
 * from `in`, laid out as zp_table_read writes them (checked: sizes,
 * finite). Copies the parameter buffer first if a reply still references
 * it. The version is zp_table_after_put's. */
void zp_table_write(zp_table *t, size_t off, size_t n, const float *in);

/* After a PUT (dense or sparse): the version becomes max(version + 1,
 * at_least), so it never goes back, counts the write, and a checkpoint's
 * version (an Adam step count) can be put back with it. */
void zp_table_after_put(zp_table *t, uint64_t at_least);

/* True if t's optimizer lets zp_table_apply_sparse stand for zp_table_apply
 * (sgd, no weight decay). */
bool zp_table_sparse_ok(const zp_table *t);

/* Take a reference on the parameter buffer for a zero-copy reply; release
 * it with zp_buf_release (ZeroMQ does so through the free callback). */
zp_buf *zp_table_params_ref(zp_table *t);

/* Keep the last `keep` versions of a dense slice from now on (the current
 * one first); nothing for a sparse table or when already keeping. */
void zp_table_keep_versions(zp_table *t, uint32_t keep);

/* A reference on the parameters as they were at the newest kept version
 * <= want (the current ones if none is kept), its version in *got. Release
 * with zp_buf_release. */
/* The slice's current values are those of clock `clock` (bsp): keep them
 * (table.h `past`), dropping the ones kept before; the update that follows
 * writes a copy. */
void zp_table_keep_past(zp_table *t, int64_t clock);

/* A reference to the values kept for `clock` (their version in *version),
 * or NULL if those are not kept. */
zp_buf *zp_table_past(zp_table *t, int64_t clock, uint64_t *version);

zp_buf *zp_table_params_at(zp_table *t, uint64_t want, uint64_t *got);

/* n floats of scratch to decode a compressed push into, or NULL. */
float *zp_table_push_scratch(zp_table *t);

/* Put the slice back to a snapshot's state (rollback): parameters,
 * optimizer state, version and round; gradients held for an open BSP round
 * are dropped. Replies still reading the old parameters keep their bytes
 * (copy-on-write). Parked pulls are left to the caller. */
void zp_table_reset_to(zp_table *t, const float *params, const float *state, uint64_t version,
                       int64_t round);

/* Whether pushes are held for a round not closed yet (bsp): the table's
 * state is then more than a snapshot records. */
bool zp_table_holds_pushes(const zp_table *t);

/* Bytes of parameters, optimizer state and scratch held for this table. */
uint64_t zp_table_bytes(const zp_table *t);

/* About the bytes a table declared by `spec` takes on shard `shard` of
 * `nshards` when created, before anything is allocated: a dense slice's
 * parameters, optimizer state and push scratch; 0 for a sparse table (it
 * grows by rows, checked per request) or a spec its kind will refuse. */
uint64_t zp_table_estimate_bytes(const Zeps__TableSpec *spec, int shard, int nshards);

#endif
