/*
 * turns.c - staleness on demand in the op layer (cluster.inject,
 * state/inject.h): whose pulls are served stale, the turns pulls take,
 * and the version a pull of a dense or sparse table is served at.
 *
 * Turns (inject.turns, where pushes are applied on arrival): rank r is
 * served only when the table's turn is r's, and the turn moves on when r's
 * push is applied, so no push comes between a pull and its push and every
 * push is exactly as old as its pull was served. The turn skips workers
 * that said BYE or were declared lost.
 *
 * Dense tables: every dense step pulls and pushes every shard of a table,
 * so the turns of all shards move together, one push at a time.
 *
 * Sparse tables take turns by round: a sparse step visits only the shards
 * holding its ids, so a turn that waited for a rank's push would stay with
 * a rank that has no ids here while that rank waits for another shard's
 * turn, held by a rank waiting here: a deadlock. So a sparse table's turn
 * is for a (round, rank), visited in order: round c is every rank's step c.
 * The holder may be served a pull of a step up to c (a pull for a later
 * step waits), and the turn moves on when the holder pushes, or once the
 * holder finished step c (its CLOCK) without a push here, or at once for a
 * rank that finished step c before the turn reached it, said BYE, was
 * declared lost or waits in the final barrier. Each shard then serves the
 * steps in one order, (round, rank), whatever the timing: the smallest
 * unfinished (round, rank) always holds every turn it needs, so there is
 * no deadlock, and a run is the same bits for the same seed.
 */
#include "ops.h"

#include "log.h"
#include "server.h"

bool zp_turns_injecting(const zp_server *s, uint32_t rank)
{
    return s->inject.ops && rank < (uint32_t)s->nworkers;
}

bool zp_turns_on(const zp_server *s)
{
    return s->inject.ops && s->inject.turns && !s->cons->rounds;
}

static uint32_t turn_holder(const zp_server *s, const zp_table *t)
{
    /* a holder that was served keeps the turn until its push, even if
     * declared lost (silent here while it waits on another shard): passing
     * it on would make that push one update older than drawn */
    const zp_worker *h = &s->workers.w[t->turn];
    if (t->turn_taken && !h->left && !h->barrier_gen)
        return t->turn;
    for (int i = 0; i < s->nworkers; i++) {
        uint32_t r = (t->turn + (uint32_t)i) % (uint32_t)s->nworkers;
        const zp_worker *w = &s->workers.w[r];
        if (!w->left && !w->lost && !w->barrier_gen) /* the barrier: shard 0 alone */
            return r;
    }
    return t->turn;
}

/* ------------------------------------------------------ sparse: by round */

/* Whether w is behind round c by more than the step it may still be
 * finishing: it was declared lost (or restarted) while the round moved
 * on. It is served without turns until it catches up, so it holds none. */
static bool rows_behind(const zp_worker *w, uint64_t c)
{
    return w->clock + 1 < (int64_t)c;
}

/* Whether w can take no turn in round c: gone, behind, or its step c is
 * over. */
static bool rows_skips(const zp_worker *w, uint64_t c)
{
    return w->left || w->lost || w->barrier_gen || w->clock > (int64_t)c || rows_behind(w, c);
}

/* The rank whose turn it is on sparse t, its round in *round: t's turn
 * moved past every rank that cannot take it (nothing is changed here). */
static uint32_t rows_holder(const zp_server *s, const zp_table *t, uint64_t *round)
{
    uint32_t n = (uint32_t)s->nworkers, r = t->turn;
    uint64_t c = t->turn_round;
    const zp_worker *h = &s->workers.w[r];
    *round = c;
    if (t->turn_taken && !h->left && !h->barrier_gen && h->clock <= (int64_t)c)
        return r;            /* served, its step not over: it keeps the turn until its push */
    int64_t low = INT64_MAX; /* the earliest step a live worker has not finished */
    for (uint32_t i = 0; i < n; i++) {
        const zp_worker *w = &s->workers.w[i];
        if (!w->left && !w->lost && !w->barrier_gen && w->clock < low)
            low = w->clock;
    }
    if (low == INT64_MAX)
        return r;            /* nobody can take it */
    if ((uint64_t)low > c) { /* everyone is past round c: on to the first round not */
        c = (uint64_t)low;
        r = 0;
    }
    for (uint32_t i = 0; i <= 2 * n && rows_skips(&s->workers.w[r], c); i++) {
        r = (r + 1) % n;
        c += r == 0;
    }
    *round = c;
    return r;
}

bool zp_turns_rows_mine(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    if (!zp_turns_on(s) || rank >= (uint32_t)s->nworkers)
        return true;
    const zp_worker *w = &s->workers.w[rank];
    if (clock > w->clock + 1)
        return true; /* its CLOCKs never reached this shard (restarted): out of step */
    uint64_t c;
    uint32_t r = rows_holder(s, t, &c);
    return rows_behind(w, c) || (rank == r && clock <= (int64_t)c);
}

/* rank was served a pull of sparse t: the turn is taken until its push */
static void rows_take(zp_server *s, zp_table *t, uint32_t rank)
{
    uint64_t c;
    if (rows_holder(s, t, &c) != rank)
        return;
    t->turn = rank;
    t->turn_round = c;
    t->turn_taken = true;
}

/* a push by rank to sparse t: its visit of the round is over */
static void rows_done(zp_server *s, zp_table *t, uint32_t rank)
{
    uint64_t c;
    if (rows_holder(s, t, &c) != rank)
        return;
    t->turn = (rank + 1) % (uint32_t)s->nworkers;
    t->turn_round = c + (t->turn == 0);
    t->turn_taken = false;
}

bool zp_turns_mine(const zp_server *s, const zp_table *t, uint32_t rank)
{
    return !zp_turns_on(s) || rank >= (uint32_t)s->nworkers || rank == turn_holder(s, t);
}

void zp_turns_take(zp_server *s, zp_table *t, uint32_t rank)
{
    if (!zp_turns_on(s) || rank >= (uint32_t)s->nworkers)
        return;
    if (t->rows) {
        rows_take(s, t, rank);
        return;
    }
    t->turn = rank;
    t->turn_taken = true;
}

void zp_turns_done(zp_server *s, zp_table *t, uint32_t rank)
{
    if (!zp_turns_on(s) || rank >= (uint32_t)s->nworkers)
        return;
    if (t->rows) {
        rows_done(s, t, rank);
    } else if (rank == turn_holder(s, t)) {
        t->turn = (rank + 1) % (uint32_t)s->nworkers;
        t->turn_taken = false;
    }
}

zp_buf *zp_turns_dense_params(zp_server *s, zp_table *t, uint32_t rank, uint64_t *served)
{
    if (!zp_turns_injecting(s, rank)) {
        *served = t->version;
        return zp_table_params_ref(t);
    }
    zp_table_keep_versions(t, s->inject.window + 1);
    uint64_t tau = zp_inject_tau(&s->inject, rank, t->version);
    /* no version is older than the first kept: the start of the run */
    uint64_t oldest = zp_versions_oldest(&t->versions);
    uint64_t want = t->version - tau < oldest || tau > t->version ? oldest : t->version - tau;
    return zp_table_params_at(t, want, served);
}

int zp_turns_rows_ready(zp_server *s, zp_table *t, uint32_t rank, char *err, size_t errlen)
{
    if (!zp_turns_injecting(s, rank) || s->inject.window == 0)
        return 0;
    return zp_rows_keep_versions(t->rows, s->inject.window, err, errlen);
}

void zp_turns_rows(zp_server *s, zp_table *t, uint32_t rank, const uint64_t *ids, size_t n,
                   float *rows, uint32_t *versions)
{
    if (!zp_turns_injecting(s, rank) || !t->rows->kept.hist)
        return;
    uint32_t tau = zp_inject_tau(&s->inject, rank, t->version);
    zp_rowvers_serve(&t->rows->kept, t->rows->store, ids, n, tau, rows, versions);
}
