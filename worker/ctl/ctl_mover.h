/*
 * ctl_mover.h - the live move of a slot set as a tool drives it
 * (ctl_mover.c; the options: ctl_mover_opts.c), for the commands made of
 * moves: `zepsctl shards move` (one move) and `zepsctl shards rebalance`
 * (ctl_rebalance.c, a move at a time). A mover holds the cluster file and
 * a socket to every shard; it is used by one thread.
 */
#ifndef ZP_CTL_MOVER_H
#define ZP_CTL_MOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "config.h"

#include "slotmap.h"
#include "zeps.pb-c.h"

typedef struct zp_mv_opts {
    const char *conf, *slots;
    const char *dense; /* zepsctl shards move --dense TABLE:LO-HI (instead of --slots) */
    int from, to;
    uint64_t page;       /* rows per ROWS page */
    uint32_t lease_ms;   /* the shards abort without a step for this long */
    uint32_t cutover_ms; /* the source's cut-over bound */
    int timeout_ms;      /* per request */
    uint64_t threshold;  /* freeze once at most this many rows are left */
    uint64_t max_rounds; /* ... or after this many rounds */
    int joined;          /* zp_ctl_mover_new also connects to the shards that joined at run
                            time (the newest map of the file's shards names them) */
    int stopped_ok;      /* replicated shards: one without a primary (stopped) is reached at
                            replica 0, where its steps fail, instead of failing at once */
    int clock_wait_s;    /* shards retire under bsp: how long to wait for the workers' clocks */
    double max_mb_s;     /* the copy rounds' pace (ctl_pace.h), MB/s in any second; 0: none */
} zp_mv_opts;

typedef struct zp_mover zp_mover;

/* The defaults of `zepsctl shards move --help`. */
void zp_ctl_mover_opts_default(zp_mv_opts *o);

/* Option `a` (--page, --threshold, --max-rounds, --cutover-ms, --lease-ms,
 * --timeout-ms) with value x (-1: not a number): 1 if taken, 0 if it is
 * not one of them or x is out of its range. */
int zp_ctl_mover_opts_one(zp_mv_opts *o, const char *a, long long x);

/* A move option whose value is not a whole number (--max-mb-s) with
 * value v: 1 if taken, 0 if `a` is not one of them, -1 if v is bad (said
 * on stderr, naming the option and `zepsctl shards CMD`). */
int zp_ctl_mover_opts_text(zp_mv_opts *o, const char *a, const char *v, const char *cmd);

/* The least --lease-ms a paced copy (--max-mb-s) runs with: its waits
 * between two steps reach 1 s (ctl_pace.h). */
enum { ZP_MV_PACED_LEASE_MS = 2000 };

/* The options' checks across options once all are read: 0, or -1 said on
 * stderr naming `zepsctl shards CMD` (--max-mb-s with a --lease-ms under
 * ZP_MV_PACED_LEASE_MS). */
int zp_ctl_mover_opts_check(const zp_mv_opts *o, const char *cmd);

/* Option argv[*i] of `zepsctl shards CMD` into *a, its value into *v
 * (and *x: a whole number, or -1) with *i moved past it: 0; 1 for --help
 * or -h; -1 (said on stderr) when the value is missing. */
int zp_ctl_mover_opts_pair(int argc, char **argv, int *i, const char **a, const char **v,
                           long long *x, const char *cmd);

/* text as a number in [lo, hi], or -1. */
long long zp_ctl_mover_opts_number(const char *text, long long lo, long long hi);

/* The arguments of a command that moves slots until a balance (`zepsctl
 * shards CMD`): the move options, --config FILE (into o->conf),
 * --tolerance PCT (into *tolerance as a fraction, default 0.10) and
 * --max-moves N (*max_moves, default 16); with `what` not NULL, its one
 * positional argument (*what, or NULL if none). 1 for --help, -1 for bad
 * usage (said on stderr, naming CMD), else 0; the caller checks what it
 * requires. */
int zp_ctl_mover_opts_parse(zp_mv_opts *o, double *tolerance, int *max_moves, const char **what,
                            int argc, char **argv, const char *cmd);

/* A mover of the cluster of o->conf (o is copied): 0, or ZEPS_ECONFIG /
 * ZEPS_ETRANSPORT with the reason in err. The caller destroys it. */
int zp_ctl_mover_new(zp_mover **out, const zp_mv_opts *o, char *err, size_t errlen);
void zp_ctl_mover_destroy(zp_mover **mp);

/* The shards the mover talks to (those joined included), the cluster
 * file's, and where shard k listens. */
int zp_ctl_mover_shards(const zp_mover *m);
int zp_ctl_mover_base(const zp_mover *m);
const char *zp_ctl_mover_endpoint(const zp_mover *m, int k);

/* Connect to the shards the newest map among the cluster file's shards
 * names past them (done by zp_ctl_mover_new with o->joined, where no
 * shard answering leaves the cluster file's shards only). 0 or the error. */
int zp_ctl_mover_joined(zp_mover *m);

/* Whether that newest map retires shard k (false before
 * zp_ctl_mover_joined): a retired shard owns nothing and may be stopped,
 * so the commands made of moves ask it nothing. */
bool zp_ctl_mover_retired(const zp_mover *m, int k);

/* The cluster file the mover read. */
const zp_config *zp_ctl_mover_config(const zp_mover *m);

/* Connect to one more shard, the next index, at `endpoint` (zepsctl shards
 * add): 0 or ZEPS_ETRANSPORT / ZEPS_EINVAL (zp_ctl_mover_err says why). */
int zp_ctl_mover_connect(zp_mover *m, const char *endpoint);

/* A request h (+ payload) to shard k and its answer, as the moves send
 * them (rank: a tool; --timeout-ms): 0 with *rep (the caller frees it with
 * zeps__header__free_unpacked) and, if data is not NULL, the answer's
 * payload (the caller closes it); the error otherwise. */
int zp_ctl_mover_rpc(zp_mover *m, int k, Zeps__Header *h, const void *payload, size_t len,
                     Zeps__Header **rep, zmq_msg_t *data);

/* SLOTS with `map` to shard k: 0 or the shard's error. */
int zp_ctl_mover_slots(zp_mover *m, int k, const zp_slotmap *map);

/* After `shards retire K` under bsp (ctl_clockwait.c): wait up to
 * wait_s seconds until every worker shard 0 knows, neither gone nor
 * lost, has clocked twice since the call, so that none sends K a CLOCK
 * any more; progress every 5 s on stdout. ZP_EXIT_OK, or ZP_EXIT_FAILED
 * (said on stderr, naming a worker behind). */
int zp_ctl_clockwait(zp_mover *m, int k, int wait_s);

/* The reason of the last failure of a call below. */
const char *zp_ctl_mover_err(const zp_mover *m);

/* Shard k's slot map (from its HELLO; *out the caller's), and the rows of
 * its sparse tables (STATS; ctl_rebalance.c). 0 or the error
 * (zp_ctl_mover_err says why). */
int zp_ctl_mover_map(zp_mover *m, int k, zp_slotmap **out);
int zp_ctl_rebalance_rows(zp_mover *m, int k, uint64_t *rows);

/* Move the slots `which` (which[slot] != 0, over the map's slot count),
 * or when which is NULL those the text `slots` names (--slots), that are
 * shard `from`'s, to shard `to`, printing the progress of `zepsctl shards
 * move`: its exit status (0 moved; 1 failed, aborted; 2 refused). Both
 * stay the caller's. */
int zp_ctl_mover_move(zp_mover *m, int from, int to, const uint8_t *which, const char *slots);

/* Move elements [LO, HI) of a dense table, `range` "TABLE:LO-HI", from
 * shard o->from to shard o->to as `zepsctl shards move --dense` does
 * (ctl_dense.c), printing its lines: its exit status. */
int zp_ctl_dense_move(zp_mover *m, const zp_mv_opts *o, const char *range);

/* ctl_dshare.c: `zepsctl shards add` gives joined shard n an even share
 * of every dense table, `remove` moves joined shard k's dense pieces to
 * the shards holding fewest elements, each by moves of dense ranges
 * (options o, its from/to ignored): an exit status. */
int zp_ctl_dshare_give(zp_mover *m, int n, const zp_mv_opts *o);
int zp_ctl_dshare_evacuate(zp_mover *m, int k, const zp_mv_opts *o);

/* Rebalance the shards of m as `zepsctl shards rebalance` does
 * (ctl_rebalance.c), printing its lines, leaving out the shards k with
 * skip[k] != 0 (skip may be NULL): its exit status. */
int zp_ctl_rebalance_run(zp_mover *m, double tolerance, int max_moves, const uint8_t *skip);

#endif
