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
typedef struct zp_push zp_push;

typedef struct zp_consistency_ops {
    const char *name;
    uint32_t caps; /* ZP_CAP_* (wire.h): what the mode implies for clients */

    /* May a pull by `rank` at `clock` be answered now? */
    bool (*pull_ready)(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock);

    /* A validated push. The policy applies it, keeps it (it may take
     * p->frame, which holds p->g, with zmq_msg_move), or drops it (setting
     * ZP_FLAG_DROPPED in p->reply_flags), and records what it did with
     * zp_server_record_push. Returns 0, or a zeps_err with a message in err
     * (nothing changed). */
    int (*push)(zp_server *s, zp_table *t, zp_push *p, char *err, size_t errlen);
} zp_consistency_ops;

extern const zp_consistency_ops zp_consistency_bsp;
extern const zp_consistency_ops zp_consistency_async;
extern const zp_consistency_ops zp_consistency_ssp;
extern const zp_consistency_ops zp_consistency_weighted;

/* bsp: close t's open round if it holds as many pushes as the quorum now
 * needs (a worker was declared lost); no-op in other modes. */
void zp_bsp_close_if_ready(zp_server *s, zp_table *t);

/* w(tau) of a weighting function (config.h's zp_weight_fn) with parameter
 * lambda (exp only). Pure arithmetic, for the policies and their tests. */
double zp_weight(int fn, double lambda, uint64_t tau);

/* DC-ASGD: out[i] = g[i] + lambda * g[i]^2 * (w_now[i] - w_stale[i]). */
void zp_dc_compensate(float *out, const float *g, const float *w_now, const float *w_stale,
                      size_t n, float lambda);

/* The ops for a mode from config.h's zp_consistency; NULL if not built. */
const zp_consistency_ops *zp_consistency_ops_for(int mode);

#endif
