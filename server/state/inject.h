/*
 * inject.h - staleness on demand (cluster.inject, docs/consistency.md): the
 * law of the tau a pull is served with, for studies that ask what
 * theory asks ("what if every gradient were exactly tau versions old?").
 *
 * A schedule is a const zp_inject_ops (fixed, uniform, geometric, replay,
 * straggler, in inject.c). The tau of a pull is a pure function of the
 * seed, the pulling rank and the version the table is at, so every shard
 * and every dense table draws the same tau for one pull of a worker, and
 * a run whose pulls come in a fixed order (turns, op/turns.c) is
 * reproducible bit for bit. The shard keeps the versions a schedule can
 * reach (dense slices: table/versions.c; sparse rows, each tau of its own
 * updates behind: table/rowvers.c); the op layer serves the pull from them
 * and records the tau each push then really had, as in any run.
 */
#ifndef ZP_INJECT_H
#define ZP_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct zp_inject zp_inject;

typedef struct zp_inject_ops {
    const char *name; /* the cluster file's schedule name */
    /* tau for `rank`, from u uniform in [0, 2^64) */
    uint32_t (*draw)(const zp_inject *in, uint32_t rank, uint64_t u);
    /* the largest tau it can draw (the versions a shard must keep) */
    uint32_t (*largest)(const zp_inject *in);
} zp_inject_ops;

struct zp_inject {
    const zp_inject_ops *ops; /* NULL: injection off */
    uint32_t tau, max_tau, straggler;
    uint32_t window; /* versions kept besides the newest: the largest tau served */
    double p;        /* geometric */
    bool turns;      /* pulls take turns by rank (op/turns.c) */
    uint64_t seed;
    uint64_t *replay_cum; /* replay: counts of tau <= k, k = 0..nreplay-1 (owned) */
    uint32_t nreplay;
};

/* Set *in from cfg's cluster.inject (off: in->ops NULL); replay reads its
 * histogram file. Returns 0, or ZEPS_ECONFIG / ZEPS_EIO with a message naming
 * the file and line in err; *in then holds nothing to free. */
int zp_inject_init(zp_inject *in, const zp_config *cfg, char *err, size_t errlen);

/* Free what zp_inject_init allocated; tolerates a zeroed or failed *in. */
void zp_inject_fini(zp_inject *in);

/* The tau a pull by `rank` of a table at `version` is served with: a pure
 * function of (seed, rank, version), at most in->window. 0 when off. */
uint32_t zp_inject_tau(const zp_inject *in, uint32_t rank, uint64_t version);

#endif
