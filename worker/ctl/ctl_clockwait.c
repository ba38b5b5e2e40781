/*
 * ctl_clockwait.c - after `zepsctl shards retire K` under bsp, the wait
 * until every running worker has clocked twice since (docs/elastic.md,
 * "Retiring a removed shard"). Under bsp a worker sends every live shard
 * its CLOCK; it learns the map that retires K from the answer to its
 * next CLOCK, which still went to K, and sends K nothing from the one
 * after. So K can be stopped once each worker's clock at shard 0 is two
 * past what it was when the map was given. Workers that said BYE or
 * were declared lost send nothing and are not waited for; so are workers
 * that start later (their HELLO brings the map).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc.h"
#include "ctl_mover.h"
#include "exitcode.h"
#include "now.h"

/* Shard 0's STATS: 0 with *rep (the caller frees it), else 1 (said). */
static int stats0(zp_mover *m, Zeps__Header **rep)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.op = ZEPS__OP__STATS;
    if (zp_ctl_mover_rpc(m, 0, &h, NULL, 0, rep, NULL) == 0 && (*rep)->stats)
        return 0;
    fprintf(stderr, "zepsctl shards retire: shard 0: %s\n", zp_ctl_mover_err(m));
    return 1;
}

/* Whether a worker w of the snapshot sends CLOCKs. */
static int clocking(const Zeps__WorkerStats *w)
{
    return !w->lost && !w->left;
}

/* The workers still short of their wanted clock in rep (want[] indexed
 * by rank, INT64_MIN: not waited for); *rank, *clock one of them. */
static size_t behind(const Zeps__ShardStats *st, const int64_t *want, size_t nwant, uint32_t *rank,
                     int64_t *clock)
{
    size_t n = 0;
    for (size_t i = 0; i < st->n_workers; i++) {
        const Zeps__WorkerStats *w = st->workers[i];
        if (w->rank < nwant && clocking(w) && w->clock < want[w->rank]) {
            *rank = w->rank;
            *clock = w->clock;
            n++;
        }
    }
    return n;
}

int zp_ctl_clockwait(zp_mover *m, int k, int wait_s)
{
    Zeps__Header *rep;
    if (stats0(m, &rep) != 0)
        return ZP_EXIT_FAILED;
    size_t nwant = 0;
    for (size_t i = 0; i < rep->stats->n_workers; i++)
        if (rep->stats->workers[i]->rank + 1 > nwant)
            nwant = rep->stats->workers[i]->rank + 1;
    int64_t *want = zp_alloc((nwant + 1) * sizeof(*want));
    for (size_t r = 0; r < nwant; r++)
        want[r] = INT64_MIN;
    for (size_t i = 0; i < rep->stats->n_workers; i++) {
        const Zeps__WorkerStats *w = rep->stats->workers[i];
        if (clocking(w))
            want[w->rank] = w->clock + 2;
    }
    zeps__header__free_unpacked(rep, NULL);
    double t0 = zp_now_s(), said = t0;
    int rc = ZP_EXIT_FAILED;
    for (;;) {
        if (stats0(m, &rep) != 0)
            break;
        uint32_t rank = 0;
        int64_t clock = 0;
        size_t n = behind(rep->stats, want, nwant, &rank, &clock);
        zeps__header__free_unpacked(rep, NULL);
        double t = zp_now_s();
        if (n == 0) {
            printf("shards retire: every worker clocked twice since (%.1f s): none sends shard %d "
                   "a CLOCK any more\n",
                   t - t0, k);
            rc = ZP_EXIT_OK;
            break;
        }
        if (t - t0 >= wait_s) {
            fprintf(stderr,
                    "zepsctl shards retire: %zu worker(s) did not clock twice within %d s (rank %u "
                    "at clock %" PRId64 ", waited for %" PRId64 "): under bsp they still send "
                    "shard %d their CLOCKs; stop it only once they have ('zepsctl stats' shows "
                    "each worker's clock)\n",
                    n, wait_s, rank, clock, want[rank], k);
            break;
        }
        if (t - said >= 5) {
            printf("shards retire: waiting for %zu worker(s) to clock twice (rank %u at clock "
                   "%" PRId64 " of %" PRId64 ", %.0f s)\n",
                   n, rank, clock, want[rank], t - t0);
            fflush(stdout);
            said = t;
        }
        usleep(100 * 1000);
    }
    free(want);
    return rc;
}
