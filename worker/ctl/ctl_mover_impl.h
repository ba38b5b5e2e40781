/*
 * ctl_mover_impl.h - the mover's state (ctl_mover.c), shared with what it
 * says (ctl_mover_say.c). Not an interface: ctl_mover.h is.
 */
#ifndef ZP_CTL_MOVER_IMPL_H
#define ZP_CTL_MOVER_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "ctl_mover.h"
#include "ctl_pace.h"
#include "ctl_zkmap.h"
#include "curve.h"

typedef zp_mv_opts mv_opts;

typedef struct zp_mover {
    mv_opts o;
    const uint8_t *which; /* the slot set, when not --slots (zp_ctl_mover_move) */
    zp_config cfg;
    void *zctx;
    zp_curve_client_keys keys;
    int n;                                   /* shards: the cluster file's, then those joined */
    char ep[ZP_MAX_SHARDS][ZP_ENDPOINT_MAX]; /* where each listens */
    void *sock[ZP_MAX_SHARDS];
    zp_ctl_zkmap *zk;               /* with coordination: where a move commits its map */
    uint8_t retired[ZP_MAX_SHARDS]; /* the newest map of the file's shards retires them */
    uint64_t req_id;
    char err[1024];
    uint64_t rows, bytes, rounds;     /* copied so far */
    uint64_t held;                    /* round records (bsp pushes held) handed over */
    uint64_t round_rows, round_bytes; /* ... when the round in progress began */
    zp_ctl_pace pace;                 /* --max-mb-s: kept over the moves of one command */
    bool aborting;                    /* its ABORTs go out whatever the signals say */
} mv;

/* A move's last lines: the cut-over (its rows and time), the whole move
 * (rows, bytes, rounds, speed; what the source said, `src`; the map's
 * epoch), the pace if any, and the `summary:` line. */
void zp_ctl_mover_say_report(const mv *m, uint64_t cut_rows, double cut_ms, double secs,
                             const char *src, uint64_t epoch);

/* With the map committed in ZooKeeper, shard k's answer (rc) to the SLOTS
 * or COMMIT (`what`) that hastens it: a failure other than ESTALE is said. */
void zp_ctl_mover_say_hasten(const mv *m, int k, int rc, const char *what);

/* The map's write to ZooKeeper unconfirmed and the node unread: said, with
 * why no ABORT is sent; returns ZP_EXIT_FAILED. */
int zp_ctl_mover_say_undecided(const mv *m);

#endif
