/*
 * ctl_mover.h - the live move of a slot set as a tool drives it
 * (ctl_mover.c), for the commands made of moves: `zepsctl shards move`
 * (one move) and `zepsctl shards rebalance` (ctl_rebalance.c, a move at a
 * time). A mover holds the cluster file and a socket to every shard; it
 * is used by one thread.
 */
#ifndef ZP_CTL_MOVER_H
#define ZP_CTL_MOVER_H

#include <stddef.h>
#include <stdint.h>

#include "slotmap.h"

typedef struct zp_mv_opts {
    const char *conf, *slots;
    int from, to;
    uint64_t page;       /* rows per ROWS page */
    uint32_t lease_ms;   /* the shards abort without a step for this long */
    uint32_t cutover_ms; /* the source's cut-over bound */
    int timeout_ms;      /* per request */
    uint64_t threshold;  /* freeze once at most this many rows are left */
    uint64_t max_rounds; /* ... or after this many rounds */
} zp_mv_opts;

typedef struct zp_mover zp_mover;

/* The defaults of `zepsctl shards move --help`. */
void zp_ctl_mover_opts_default(zp_mv_opts *o);

/* Option `a` (--page, --threshold, --max-rounds, --cutover-ms, --lease-ms,
 * --timeout-ms) with value x (-1: not a number): 1 if taken, 0 if it is
 * not one of them or x is out of its range. */
int zp_ctl_mover_opt(zp_mv_opts *o, const char *a, long long x);

/* text as a number in [lo, hi], or -1. */
long long zp_ctl_mover_number(const char *text, long long lo, long long hi);

/* A mover of the cluster of o->conf (o is copied): 0, or ZEPS_ECONFIG /
 * ZEPS_ETRANSPORT with the reason in err. The caller destroys it. */
int zp_ctl_mover_new(zp_mover **out, const zp_mv_opts *o, char *err, size_t errlen);
void zp_ctl_mover_destroy(zp_mover **mp);

int zp_ctl_mover_shards(const zp_mover *m);

/* The reason of the last failure of a call below. */
const char *zp_ctl_mover_err(const zp_mover *m);

/* Shard k's slot map (from its HELLO; *out the caller's), and the rows of
 * its sparse tables (STATS). 0 or the error (zp_ctl_mover_err says why). */
int zp_ctl_mover_map(zp_mover *m, int k, zp_slotmap **out);
int zp_ctl_mover_rows(zp_mover *m, int k, uint64_t *rows);

/* Move the slots `which` (which[slot] != 0, over the map's slot count),
 * or when which is NULL those the text `slots` names (--slots), that are
 * shard `from`'s, to shard `to`, printing the progress of `zepsctl shards
 * move`: its exit status (0 moved; 1 failed, aborted; 2 refused). Both
 * stay the caller's. */
int zp_ctl_mover_move(zp_mover *m, int from, int to, const uint8_t *which, const char *slots);

#endif
