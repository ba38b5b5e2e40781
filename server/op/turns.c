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
 * Only dense tables take turns: every dense step pulls and pushes every
 * shard of a table, so the turns of all shards move together. A sparse
 * step visits only the shards holding its ids, and a rank that has none on
 * a shard would keep that shard's turn while its own pull waits for
 * another shard's turn held by a rank waiting here: a deadlock. Sparse
 * rows are served tau behind all the same, exact with one worker.
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

bool zp_turns_mine(const zp_server *s, const zp_table *t, uint32_t rank)
{
    return !zp_turns_on(s) || rank >= (uint32_t)s->nworkers || rank == turn_holder(s, t);
}

void zp_turns_take(zp_server *s, zp_table *t, uint32_t rank)
{
    if (zp_turns_on(s) && !t->rows && rank < (uint32_t)s->nworkers) {
        t->turn = rank;
        t->turn_taken = true;
    }
}

void zp_turns_done(zp_server *s, zp_table *t, uint32_t rank)
{
    if (zp_turns_on(s) && !t->rows && rank == turn_holder(s, t)) {
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
