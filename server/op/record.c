/*
 * record.c - exact staleness measurement: the one place that turns what a
 * policy did with a push, and every answered pull, into histogram counts
 * (the table's and the worker's), drop/late counters and trace rows, so
 * every mode is measured the same way (docs/consistency.md).
 */
#include "ops.h"

#include "server.h"

void zp_record_push(zp_server *s, zp_table *t, const zp_push *p, zp_trace_kind kind,
                    uint64_t version_applied, double weight, int applied)
{
    zp_worker *w = p->rank < (uint32_t)s->nworkers ? &s->workers.w[p->rank] : NULL;
    uint64_t tau = version_applied - p->data_version;
    int64_t gap = s->workers.max_clock - p->clock;
    if (gap < 0)
        gap = 0;
    if (applied) {
        zp_hist_add_linear(&t->stats.tau, tau);
        zp_hist_add_linear(&t->stats.clock_gap, (uint64_t)gap);
        if (w)
            zp_hist_add_linear(&w->tau, tau);
    }
    if (kind == ZP_TRACE_DROP) {
        t->stats.dropped++;
        if (w)
            w->dropped++;
    } else if (kind == ZP_TRACE_LATE) {
        t->stats.late++;
        if (w)
            w->late++;
    }
    if (s->trace) {
        zp_trace_row row = {.kind = kind,
                            .worker = p->rank,
                            .table = t->id,
                            .clock = p->clock,
                            .version_read = p->data_version,
                            .version_applied = version_applied,
                            .tau = tau,
                            .clock_gap = gap,
                            .weight = weight,
                            .applied = applied};
        zp_trace_write(s->trace, &row);
    }
}

/* Every push of the round that closed, in rank order. */
static void record_round(zp_server *s, zp_table *t, const zp_push_result *res)
{
    for (int i = 0; i < res->nheld; i++) {
        zp_push p = {.rank = res->held_rank[i],
                     .clock = res->round,
                     .data_version = res->held_version[i],
                     .count = t->n};
        zp_record_push(s, t, &p, ZP_TRACE_PUSH, res->version_applied, 1.0, 1);
    }
}

void zp_record_result(zp_server *s, zp_table *t, const zp_push *p, const zp_push_result *res)
{
    switch (res->outcome) {
    case ZP_PUSH_APPLIED:
        zp_record_push(s, t, p, ZP_TRACE_PUSH, res->version_applied, res->weight, 1);
        break;
    case ZP_PUSH_DROPPED:
        zp_record_push(s, t, p, ZP_TRACE_DROP, res->version_applied, 0.0, 0);
        break;
    case ZP_PUSH_LATE:
        zp_record_push(s, t, p, ZP_TRACE_LATE, res->version_applied, res->weight, res->applied);
        break;
    case ZP_PUSH_ROUND_CLOSED:
        record_round(s, t, res);
        break;
    case ZP_PUSH_KEPT:
        break; /* recorded when its round closes */
    }
}

void zp_record_pull(zp_server *s, zp_table *t, uint32_t rank, int64_t clock, double wait_us,
                    uint64_t version_sent)
{
    zp_hist_add_log2(&t->stats.pull_wait_us, (uint64_t)wait_us);
    if (s->trace) {
        zp_trace_row row = {.kind = ZP_TRACE_PULL,
                            .worker = rank,
                            .table = t->id,
                            .clock = clock,
                            .version_read = version_sent,
                            .version_applied = version_sent,
                            .clock_gap = clock - s->workers.min_clock,
                            .weight = 1.0,
                            .wait_us = wait_us};
        zp_trace_write(s->trace, &row);
    }
}
