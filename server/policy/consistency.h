/*
 * consistency.h - when a pull may be answered and what becomes of a push,
 * as an ops table chosen by the cluster file's `consistency` (registry.c).
 *
 * Every decision that depends on the mode is a hook or a capability here;
 * code outside server/policy/ asks the table and never compares the mode.
 * Adding a mode is one more file defining a `const zp_consistency_ops` and
 * one line in registry.c.
 *
 * Calls go down: a policy reads and updates tables (table/) and reads the
 * workers' clocks (state/workers.h); it never replies, records or starts a
 * snapshot. It says what happened in a zp_push_result and the op layer
 * (op/push.c, op/clock.c) records it, replies and triggers what follows.
 */
#ifndef ZP_CONSISTENCY_H
#define ZP_CONSISTENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "codec.h"

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;
struct zp_buf;

/* One dense push as a policy sees it. */
typedef struct zp_push {
    uint32_t rank;
    int64_t clock;         /* the clock it was computed at */
    uint64_t data_version; /* the slice version it was computed from */
    const float *g;        /* count values, read in place from `frame` */
    /* g has not been checked for NaN/Inf yet (reject_nonfinite, a policy
     * that applies on arrival): whoever applies it checks it in the same
     * pass (zp_table_apply_checked), whoever drops it checks it first
     * (zp_async_push_check), so a bad push is refused whatever the policy does */
    bool unchecked;
    /* g itself, writable, when nothing reads it after this push (its frame
     * is closed after the reply): a kernel may consume it (apply_keep).
     * NULL otherwise. */
    float *g_own;
    size_t off, count; /* slice-relative range */
    zmq_msg_t *frame;  /* holds g; a policy may take it (zmq_msg_move) */
    /* a validated topk/randk payload applied as it is (sgd without weight
     * decay: only the k sent elements change); g is then NULL */
    const zp_codec_ops *sparse_codec;
    const void *sparse_buf;
    size_t sparse_len;
} zp_push;

/* What a policy did with a push. */
typedef enum zp_push_outcome {
    ZP_PUSH_APPLIED = 0,  /* applied now, scaled by weight */
    ZP_PUSH_KEPT,         /* held for the open round: nothing applied yet */
    ZP_PUSH_ROUND_CLOSED, /* completed the round: every held push applied at once */
    ZP_PUSH_DROPPED,      /* too stale: not applied */
    ZP_PUSH_LATE,         /* for a round already closed: applied weighted, or dropped */
} zp_push_outcome;

typedef struct zp_push_result {
    zp_push_outcome outcome;
    bool applied;             /* the push's own values changed the table */
    uint64_t version_applied; /* the table's version when applied (or refused) */
    uint64_t tau;             /* version_applied - data_version */
    double weight;            /* its scale (0 when not applied) */
    uint32_t reply_flags;     /* ZP_FLAG_DROPPED when received but not applied */
    /* ZP_PUSH_ROUND_CLOSED: the pushes of round `round`, in rank order, all
     * applied at version_applied (views into the table's round state, valid
     * until the next push to it) */
    int64_t round;
    int nheld;
    const uint32_t *held_rank;
    const uint64_t *held_version;
    /* ZP_PUSH_ROUND_CLOSED on a replicated primary: a copy of the round's
     * sum as applied (the table's n floats, scaled by 1/nheld), for its
     * log entry; whoever receives the result owns it (free) */
    float *sum;
} zp_push_result;

/* One sparse push as a policy sees it (op/sparse_ops.c checked it). */
typedef struct zp_rows_push {
    uint32_t rank;
    const uint64_t *ids; /* n distinct ids of this shard; NULL on a backup replaying a
                            bsp round entry: the push's rows are in its round's merge */
    size_t n;
    /* each id's candidate row (zp_rows_check_push), or NULL: borrowed from
     * the table's scratch, valid during push_rows only (a policy that
     * keeps a push for later must not keep this) */
    const uint32_t *cand;
    const float *g; /* n * dim finite gradients (borrowed: copy what is kept) */
    int64_t clock;
    const uint32_t *read_versions; /* n row versions read, or NULL */
} zp_rows_push;

typedef struct zp_consistency_ops {
    const char *name;
    /* ZP_CAP_* (wire.h): sent to clients in HELLO and STATS, and read on
     * the shard: CUTS (snapshots are consistent cuts at a common clock),
     * ROLLBACK (a shard may be rolled back to a cut), BOUND (pulls wait for
     * a staleness bound) */
    uint32_t caps;
    /* the policy keeps a push's frame past the request (p->frame moves into
     * the table): a compressed push is decoded into a frame of its own
     * instead of scratch */
    bool holds_frames;
    /* pushes wait for a round of every worker before anything is applied
     * (bsp): a fixed pull order (cluster.inject turns) would never close
     * one, and is not needed (a round's pushes all meet one version) */
    bool rounds;

    /* May a pull of dense table t by `rank` at `clock` be answered now? */
    bool (*pull_ready)(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock);
    /* The same for a sparse table (which has no rounds). */
    bool (*rows_pull_ready)(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock);

    /* A validated dense push: apply it, keep it (taking p->frame), or drop
     * it, and say which in *res. Returns 0, or a zeps_err with a message in
     * err (nothing changed, *res untouched). */
    int (*push)(zp_server *s, zp_table *t, zp_push *p, zp_push_result *res, char *err,
                size_t errlen);
    /* A validated sparse push: apply its rows, or hold a copy of them
     * (bsp), or drop some, and say how many rows were dropped in *dropped.
     * Returns 0, or a zeps_err with a message in err (nothing changed). */
    int (*push_rows)(zp_server *s, zp_table *t, const zp_rows_push *rp, size_t *dropped, char *err,
                     size_t errlen);
    /* The workers' clock bounds moved (state/workers.h): apply what they
     * release of sparse table t (bsp: the held rounds every live worker
     * finished). Returns true if t's round count moved (the cut may have). */
    bool (*bounds_moved)(zp_server *s, zp_table *t);
    /* A live move put held pushes into sparse table t's rounds (the
     * target's, or the source's back after an abort): apply those of
     * rounds already closed here. NULL: the mode holds no push (a move
     * hands none over). */
    void (*rows_handed)(zp_server *s, zp_table *t);

    /* The quorum changed (a worker declared lost): close t's open round if
     * it now holds enough pushes. Returns true and fills *res
     * (ZP_PUSH_ROUND_CLOSED) if it did. */
    bool (*quorum_changed)(zp_server *s, zp_table *t, zp_push_result *res);
    /* Worker `rank` rejoined with a new incarnation and redoes its clock:
     * drop what it had pushed to t that is not applied yet. */
    void (*forget)(zp_server *s, zp_table *t, uint32_t rank);
    /* The clock every table of the shard has closed when they agree (a
     * consistent cut), else -1 (always -1 without ZP_CAP_CUTS). */
    int64_t (*cut)(const zp_server *s);

    /* Must every dense push reach the policy as f32 values (no topk/randk
     * shortcut)? */
    bool (*needs_values)(const zp_server *s);
    /* May a worker pull deltas against its own view (compressed pulls)? */
    bool (*cpull_ok)(const zp_server *s);
    /* A pull of t by `rank` is answered from buffer b (the policy may keep
     * a reference of its own). */
    void (*pulled)(zp_server *s, zp_table *t, uint32_t rank, struct zp_buf *b);
    /* The values of a past clock a pull of t at `clock` is answered with
     * instead of the current ones, with a reference for the caller and
     * their version in *version; NULL: the current ones. NULL op: never
     * (only bsp keeps them: a worker redoing a clock, table.h `past`). */
    struct zp_buf *(*past)(zp_server *s, zp_table *t, int64_t clock, uint64_t *version);
    /* The same for a sparse table: overwrite what a pull of ids[0..n) at
     * `clock` read from the store (rows[n * dim], versions[n], NULL
     * allowed) with the rows as that clock found them. NULL op: never. */
    void (*rows_past)(zp_server *s, zp_table *t, int64_t clock, const uint64_t *ids, size_t n,
                      float *rows, uint32_t *versions);
} zp_consistency_ops;

#endif
