/*
 * consistency.h - when a pull may be answered and how a push is applied, as
 * an ops table chosen by the cluster file's `consistency`. This is the seam
 * where bounded staleness and staleness weighting plug in: a new mode is one
 * more `const zp_consistency_ops`.
 */
#ifndef ZP_CONSISTENCY_H
#define ZP_CONSISTENCY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;

typedef struct zp_consistency_ops {
    const char *name;

    /* May a pull by `rank` at `clock` be answered now? */
    bool (*pull_ready)(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock);

    /* A validated push of g[0..count) for slice-relative offset `off`,
     * computed by `rank` at `clock`. The policy applies it, or keeps it: it
     * may take the frame holding g with zmq_msg_move (g points into it).
     * Returns 0, or a zeps_err with a message in err (nothing changed). */
    int (*push)(zp_server *s, zp_table *t, uint32_t rank, int64_t clock, const float *g,
                size_t off, size_t count, zmq_msg_t *frame, char *err, size_t errlen);
} zp_consistency_ops;

extern const zp_consistency_ops zp_consistency_bsp;
extern const zp_consistency_ops zp_consistency_async;

/* The ops for a mode from config.h's zp_consistency; NULL if not built. */
const zp_consistency_ops *zp_consistency_ops_for(int mode);

#endif
