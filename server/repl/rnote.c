/*
 * rnote.c - what a primary's handlers tell the replication log about the
 * request being handled (rlog.h): a bsp push kept for its round (dense,
 * with the round's sum when it closed it; sparse, without its rows), a
 * CLOCK that may join the round batch, and the merges of the sparse rounds
 * the request closed. rlog.c decides at the request's end what is logged.
 * Kept apart from rlog.c, which owns the log, the followers and the held
 * replies: these only record, and each handler calls one of them.
 *
 * Threading: the shard's loop thread only.
 */
#include <stdlib.h>

#include "rlog.h"
#include "rround.h"
#include "server.h"

void zp_rnote_round_push(zp_server *s, uint32_t table, uint64_t wire, float **sum, size_t nsum)
{
    zp_repl *r = &s->repl;
    if (!r->pending || r->batch.n >= ZP_RBATCH_MAX) {
        free(*sum);
        *sum = NULL;
        return;
    }
    r->note = true;
    r->note_table = table;
    r->note_wire = wire;
    free(r->note_sum);
    r->note_sum = *sum;
    r->note_nsum = nsum;
    *sum = NULL;
}

void zp_rnote_round_clock(zp_server *s)
{
    if (s->repl.pending)
        s->repl.note_clock = true;
}

void zp_rnote_round_sparse(zp_server *s, uint32_t table, int64_t clock, uint64_t wire)
{
    zp_repl *r = &s->repl;
    if (!r->pending || r->batch.n >= ZP_RBATCH_MAX)
        return; /* logged alone, with its rows */
    r->note_sparse = true;
    r->note_table = table;
    r->note_round = clock;
    r->note_wire = wire;
}

void zp_rnote_round_rows(zp_server *s, uint32_t table, uint32_t dim, struct zp_rround *rr)
{
    zp_repl *r = &s->repl;
    size_t n;
    const zp_rround_done *d = zp_rround_kept(rr, &n);
    for (size_t i = 0; r->pending && i < n; i++)
        zp_rbatch_rows_put(&r->note_rows, table, d[i].clock, d[i].ids, d[i].n, d[i].g, dim,
                           d[i].vers);
    zp_rround_kept_clear(rr);
}
