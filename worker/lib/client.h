/*
 * client.h - the body of zeps_client, which every part of libzeps reads:
 * each field says which file writes it. The client is one struct because
 * it is one object to the caller (zeps.h); the files that work on it are
 * layered (docs/architecture.md, "libzeps"):
 *
 *   client.c, control.c    lifecycle, HELLO at start, CLOCK/BARRIER/ROLLBACK/...
 *   tables.c, dense.c,     declarations and dense transfers; sparse batches
 *   sparse.c, view.c       (and zero-copy views of pulls)
 *   req.c                  the engine: sub-requests, replies, retries, waits
 *   failover.c             replicated shards: finding and following the primary
 *   shard.c, rowres.c      one socket per shard; per-row residuals
 *
 * Each file calls only files below it. Not installed.
 */
#ifndef ZP_CLIENT_H
#define ZP_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include <zmq.h>

#include "config.h"
#include "curve.h"
#include "shard.h"
#include "tables.h"
#include "slotmap.h"
#include "zeps.h"

/* sparse.c: zeps_sbatch_new's scratch, kept between calls, and the arrays
 * of the last batch freed (a holder shared with the live batches) */
typedef struct zp_sbuild zp_sbuild;
typedef struct zp_sbspare zp_sbspare;
void zp_sparse_build_free(zeps_client *c);
typedef struct zp_failover zp_failover;

struct zeps_client {
    /* client.c: set once by zeps_client_new_endpoints */
    void *zctx;
    int nshards;           /* the cluster file's, then more as shards join (join.c) */
    int ndense;            /* the cluster file's: dense tables are sliced over these */
    zp_shard *shards;      /* [ZP_MAX_SHARDS], nshards in use: a shard that joins
                              takes the next (join.c); their sockets belong to shard.c */
    zmq_pollitem_t *items; /* [npoll]: shards, then (CURVE or replicas >= 2) their
                              monitors, then (replicas >= 2) failover.c's probe slots */
    int npoll;
    zmq_pollitem_t *bell_items; /* xport_shm.c: items, then the attach connections */
    int bell_cap;
    int replicas;    /* endpoints per shard (cluster.replicas); 1 = not replicated */
    zp_failover *fo; /* replicas >= 2: finding each shard's primary (failover.c), else NULL */
    uint32_t rank;
    uint64_t incarnation;
    zeps_options opt;
    bool curve;
    char curve_server[ZP_CURVE_KEY_LEN + 1], curve_public[ZP_CURVE_KEY_LEN + 1],
        curve_secret[ZP_CURVE_KEY_LEN + 1];
    volatile int *interrupt; /* zeps_client_set_interrupt */
    int64_t done_clock;      /* zeps_client_set_done: clocks finished, -1 = not done */
    int64_t clock_sent;      /* control.c: the highest clock a CLOCK ended, -1 = none; join.c
                                tells a shard that joins (its ssp bound counts it) */
    int drop_sends;          /* fault injection: sends still to drop (req.c counts down) */

    /* req.c: the engine's state */
    uint64_t next_req_id;
    int nworkers;             /* HELLO reply */
    uint32_t caps;            /* HELLO reply: ZP_CAP_* of the cluster's consistency mode */
    char consistency[16];     /* HELLO reply: the mode's name, for people and logs */
    int64_t resume_clock;     /* zeps_resume_clock (client.c at start, req.c on ERESTARTED) */
    uint64_t resume_set;      /* the snapshot set of the cut to resume from */
    uint64_t resume_recovery; /* the recovery ERESTARTED named: ROLLBACK answers it */
    int abort_all;            /* ZP_CAP_ROLLBACK: a shard restarted; fail every request */
    int in_rehello;
    unsigned monitor_gen;    /* shard.c: makes each monitor endpoint unique */
    zeps_client_stats stats; /* every layer adds what it did */
    char err[1024];          /* zp_fail: the last error */

    /* tables.c: the declared tables, by handle */
    zp_table *tables;
    uint32_t ntables, cap_tables;

    /* sparse.c: the batch builder's scratch and the spare batch arrays
     * (both let go by zp_sparse_build_free) */
    zp_sbuild *sbuild;
    zp_sbspare *sbspare;

    /* where sparse ids live (common/slotmap.h): the default map of nshards
     * until a shard's EMOVED brings a newer one (redirect.c); owned */
    zp_slotmap *slots;
    zp_req_sub *moved; /* req.c: subs answered EMOVED, to be sent again split (redirect.c) */
};

/* Whether shard k is live: not retired by the client's slot map (a shard
 * removed for good, docs/elastic.md, "Retiring a removed shard"). Requests
 * that go to every shard go to the live ones. */
static inline int zp_client_live(const zeps_client *c, int k)
{
    return !zp_slotmap_retired(c->slots, k);
}

#endif
