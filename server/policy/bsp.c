/*
 * bsp.c - bulk synchronous parallel.
 *
 * A round of table t is clock c. Each worker's gradient for the round is
 * kept as the received ZeroMQ frame (no copy, table/round.c) until the
 * quorum, `live workers - backup_workers`, arrived; then they are summed in
 * rank order into one buffer, so the result is bit-for-bit the same
 * whatever order they arrived in, averaged over the pushes summed and
 * applied once. A pull at clock c waits until round c - 1 is applied
 * (rounds closed >= c). A push for a round already closed (a backup
 * worker's, late) is dropped, or applied at once scaled by w(tau) when
 * late_pushes = "weighted".
 *
 * A sparse table's round is a clock too, but its shape is not fixed (a
 * worker may push any rows, several times or not at all): its pushes are
 * held as copies (table/rround.c) until every live worker finished the
 * clock (min_clock passes it), then merged in rank order, repeated rows
 * summed, and applied once with the full step (a row's gradient comes only
 * from the workers that saw it; dense rounds average over the workers).
 * Pulls at clock c wait for round c - 1, as dense pulls do; a push for a
 * round already closed is dropped (docs/sparse.md). A replicated primary
 * keeps a copy of each merge it applies for its log; a backup holds the
 * round's pushes without rows and is given the primary's merge
 * (table/rround.h, docs/replication.md "Sparse rounds").
 *
 * The tables' common round is a consistent cut: snapshots are taken there
 * and a shard may be rolled back to one (ZP_CAP_CUTS, ZP_CAP_ROLLBACK).
 */
#include "modes.h"

#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "log.h"
#include "server.h"
#include "zeps_errors.h"

static bool bsp_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    (void)s, (void)rank;
    return t->round.closed >= clock;
}

static bool bsp_rows_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    (void)s, (void)rank;
    return t->round.closed >= clock;
}

/* Most bytes a sparse table may hold for its open rounds: four full-size
 * requests per worker (a round is one push per worker and table, usually
 * far below max_message_mb). */
static uint64_t held_limit(const zp_server *s)
{
    return 4 * s->cfg.max_message_bytes * (uint64_t)s->nworkers; /* workers >= 1 */
}

/* A push for a round that closed, from the incarnation of a worker that
 * had itself finished that clock before sending it: the client gave a
 * step's push an older step's clock (a forgotten zt.set_clock), which
 * dropping would hide. Dropped as before: a late push of a worker whose
 * round closed without it (backup workers, a worker declared lost and
 * back: it has not finished the clock), and a new incarnation redoing a
 * clock its predecessor finished on this shard (below its hello_clock). */
static int refuse_finished(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock,
                           char *err, size_t errlen)
{
    const zp_worker *w = &s->workers.w[rank];
    int64_t done = w->clock;
    if (done <= clock || clock < w->hello_clock)
        return 0;
    return zp_errors_set(err, errlen, ZEPS_ECLOCK,
                         "bsp: push to table '%s' for clock %lld, which worker %u had already "
                         "finished (%lld clocks done; round %lld is open): a step's pushes carry "
                         "that step's clock (zeps.torch: zt.set_clock(module, clock) every step)",
                         t->name, (long long)clock, rank, (long long)done,
                         (long long)t->round.closed);
}

static int bsp_push_rows(zp_server *s, zp_table *t, const zp_rows_push *rp, size_t *dropped,
                         char *err, size_t errlen)
{
    zp_rround *rr = &t->rows->held;
    size_t dim = t->rows->dim;
    *dropped = 0;
    if (rp->clock < t->round.closed) { /* its round closed without it */
        int rc = refuse_finished(s, t, rp->rank, rp->clock, err, errlen);
        if (rc != 0)
            return rc;
        *dropped = rp->n;
        return 0;
    }
    uint64_t bytes = (uint64_t)rp->n * (8 + 4 + 4 * dim);
    if (rr->bytes + bytes > held_limit(s))
        return zp_errors_set(err, errlen, ZEPS_ENOMEM,
                             "bsp: sparse table '%s' holds %llu bytes of pushes for the open "
                             "rounds; %llu more would pass the limit of %llu (4 x max_message_mb x "
                             "workers): is a worker pushing clocks ahead of the others?",
                             t->name, (unsigned long long)rr->bytes, (unsigned long long)bytes,
                             (unsigned long long)held_limit(s));
    /* a backup replaying a round entry holds the push without its rows:
     * the primary's merge of the round is given (op/batch.c) */
    size_t rows = rp->ids ? rp->n : 0;
    if (zp_rround_hold(rr, rp->rank, rp->clock, rp->ids, rows, rp->g, dim, rp->read_versions) != 0)
        return zp_errors_set(err, errlen, ZEPS_ENOMEM,
                             "bsp: cannot hold a push of %zu rows of sparse table '%s'", rp->n,
                             t->name);
    return 0;
}

/* Whether a shard keeps the values each round began with (table.h
 * `past`, a sparse table's rows.h `past`): only where every worker's push is in every round. With
 * backup workers a round closes without the slow ones, whose pulls of a closed round get the newest
 * values, as they always did. */
static bool keeps_past(const zp_server *s)
{
    return s->cfg.backup_workers == 0;
}

/* ... and of sparse table t: not when it is tiered (a cold row's values
 * are not at hand before the round reads it). */
static bool keeps_rows_past(const zp_server *s, const zp_table *t)
{
    return keeps_past(s) && !t->rows->tier;
}

/* Apply the held round `clock` of sparse table t: merged, once. A `late`
 * one (closed here before its pushes were handed over) keeps no past. */
static int close_rows_round(zp_server *s, zp_table *t, int64_t clock, bool late)
{
    zp_rround *rr = &t->rows->held;
    size_t n = zp_rround_merge(rr, clock, t->rows->dim);
    if (n == (size_t)-1)
        return ZEPS_ENOMEM;
    if (!late && keeps_rows_past(s, t) &&
        zp_rowpast_keep(&t->rows->past, t->rows->store, rr->ids, n, clock) != 0)
        zp_warn("bsp: no memory to keep the %zu rows of sparse table '%s' as round %lld found "
                "them: a worker redoing that round reads them as it left them",
                n, t->name, (long long)clock);
    if (n > 0)
        zp_sparse_push(t->rows->store, rr->ids, n, rr->g, 1.0f, clock,
                       rr->vers_ok ? rr->vers : NULL, &t->stats.tau, &t->stats.tau_by_freq);
    /* a replicated primary: the round's entry carries the merge as applied */
    if (n > 0 && s->repl.on && !s->applying && zp_rround_keep(rr, clock, t->rows->dim) != 0)
        zp_error("bsp: no memory to keep round %lld of sparse table '%s' for the backups",
                 (long long)clock, t->name);
    zp_debug("sparse table '%s': round %lld applied (%zu rows from %d workers)", t->name,
             (long long)clock, n, rr->nranks);
    return 0;
}

/* Close the rounds of sparse table t that every live worker finished. */
static bool bsp_bounds_moved(zp_server *s, zp_table *t)
{
    int64_t to = s->workers.min_clock, from = t->round.closed;
    if (!t->rows || to <= from)
        return false;
    while (t->round.closed < to) {
        if (!zp_rround_holds_before(&t->rows->held, to)) {
            t->round.closed = to; /* nothing held: nothing to apply */
            break;
        }
        if (close_rows_round(s, t, t->round.closed, false) != 0) {
            zp_error("bsp: out of memory merging round %lld of sparse table '%s'; its pulls "
                     "wait until it can be applied",
                     (long long)t->round.closed, t->name);
            break;
        }
        t->round.closed++;
    }
    /* the last round closed held nothing: a pull at its clock reads the rows as they are */
    int64_t last = t->round.closed - 1;
    if (t->round.closed != from && keeps_rows_past(s, t) && !zp_rowpast_has(&t->rows->past, last))
        zp_rowpast_none(&t->rows->past, last);
    return t->round.closed != from;
}

/* A live move handed t pushes of rounds this shard has closed already (the
 * target at its commit, when every worker's CLOCK of that round reached it
 * before the move's last pages; the source, given them back by an abort): every
 * push of such a round naming those rows is among them (a worker whose
 * push of the round was parked instead has not ended the round: it waits
 * for that push's answer), so each is merged in rank order and applied
 * now, oldest round first, as its close would have. */
static void bsp_rows_handed(zp_server *s, zp_table *t)
{
    int64_t c;
    while (t->rows && (c = zp_rround_first_clock(&t->rows->held)) >= 0 && c < t->round.closed)
        if (close_rows_round(s, t, c, true) != 0) {
            zp_error("bsp: out of memory applying round %lld of sparse table '%s', handed over "
                     "by a move after it closed here; its pushes stay held",
                     (long long)c, t->name);
            return;
        }
}

static int quorum(const zp_server *s)
{
    return zp_workers_quorum(&s->workers, s->cfg.lost_continue, s->cfg.backup_workers);
}

/* Apply the open round: the held gradients summed in rank order, scaled
 * by 1/k. */
static void close_round(zp_server *s, zp_table *t, zp_push_result *res)
{
    uint64_t before = t->version;
    int k;
    bool lacks = zp_round_lacks_sum(&t->round);
    const float *g = lacks ? NULL : zp_round_sum(&t->round, &k);
    if (keeps_past(s))
        zp_table_keep_past(t, t->round.closed);
    if (g)
        zp_table_apply(t, g, 0, t->n, 1.0f / (float)k);
    else /* a backup whose round entry did not close this round: it has diverged */
        zp_error("table '%s': round %lld closed here without the sum its primary applied; "
                 "this replica no longer holds its primary's values",
                 t->name, (long long)t->round.closed);
    if (g && s->repl.on && !s->applying) { /* the primary: the round's log entry carries it */
        res->sum = zp_alloc_zeroed(t->n ? t->n : 1, sizeof(float));
        memcpy(res->sum, g, t->n * sizeof(float));
    }
    res->round = t->round.closed;
    zp_round_close(&t->round);
    res->outcome = ZP_PUSH_ROUND_CLOSED;
    res->applied = true;
    res->version_applied = before;
    res->weight = 1.0;
    res->nheld = t->round.nlast;
    res->held_rank = t->round.last_rank;
    res->held_version = t->round.last_version;
    zp_debug("table '%s': round %lld applied (version %llu)", t->name, (long long)res->round,
             (unsigned long long)t->version);
}

/* A backup worker's push for a round that closed without it. */
static int late_push(zp_server *s, zp_table *t, zp_push *p, zp_push_result *res, char *err,
                     size_t errlen)
{
    if (s->cfg.late_weighted)
        return zp_async_apply(t, p,
                              zp_weighted_weight(s->cfg.weight_fn, s->cfg.weight_lambda,
                                                 t->version - p->data_version),
                              ZP_PUSH_LATE, res, err, errlen);
    zp_async_refuse(t, p, ZP_PUSH_LATE, res);
    return 0;
}

static int bsp_push(zp_server *s, zp_table *t, zp_push *p, zp_push_result *res, char *err,
                    size_t errlen)
{
    zp_round *rd = &t->round;
    if (p->off != 0 || p->count != t->n)
        return zp_errors_set(
            err, errlen, ZEPS_ERANGE,
            "bsp: a push to table '%s' must cover this shard's whole slice [%llu, %llu)", t->name,
            (unsigned long long)t->begin, (unsigned long long)t->end);
    if (p->clock < rd->closed) { /* with backup workers a round closes without a push */
        int rc = s->cfg.backup_workers ? 0 : refuse_finished(s, t, p->rank, p->clock, err, errlen);
        return rc != 0 ? rc : late_push(s, t, p, res, err, errlen);
    }
    if (p->clock > rd->closed)
        return zp_errors_set(err, errlen, ZEPS_ECLOCK,
                             "bsp: push for clock %lld but table '%s' is collecting round %lld",
                             (long long)p->clock, t->name, (long long)rd->closed);
    if (zp_round_holds(rd, p->rank))
        return zp_errors_set(err, errlen, ZEPS_ESTATE,
                             "bsp: worker %u already pushed table '%s' for round %lld", p->rank,
                             t->name, (long long)p->clock);
    if (zp_round_hold(rd, p->rank, p->frame, p->data_version) != 0)
        return zp_errors_set(err, errlen, ZEPS_ENOMEM,
                             "bsp: cannot allocate the round buffer of table '%s'", t->name);
    res->outcome = ZP_PUSH_KEPT;
    res->version_applied = t->version;
    if (rd->npending >= quorum(s))
        close_round(s, t, res);
    return 0;
}

static bool bsp_quorum_changed(zp_server *s, zp_table *t, zp_push_result *res)
{
    if (!t->kind->rounds || t->round.npending == 0 || t->round.npending < quorum(s))
        return false;
    close_round(s, t, res);
    return true;
}

/* A new incarnation of `rank` redoes the clock it resumes at (its recorded
 * clock): what the old one pushed for an open round it had not finished is
 * redone, so it goes; a push for a round it had finished (the clock rode on
 * it) will not be redone, so it stays, or the round would never close. */
static void bsp_forget(zp_server *s, zp_table *t, uint32_t rank)
{
    if (t->rows)
        zp_rround_forget(&t->rows->held, rank, s->workers.w[rank].clock);
    else if (t->round.closed >= s->workers.w[rank].clock)
        zp_round_forget(&t->round, rank);
}

/* A pull at the clock of the last round closed: a new incarnation of a
 * worker whose push of that round reached this shard before it died, and
 * not another shard (which waits for it): it redoes the round from the
 * values the round began with, as the dead one did. */
static zp_buf *bsp_past(zp_server *s, zp_table *t, int64_t clock, uint64_t *version)
{
    (void)s;
    return zp_table_past(t, clock, version);
}

/* The same for a sparse table's rows: those the round changed are
 * answered as they were before it. */
static void bsp_rows_past(zp_server *s, zp_table *t, int64_t clock, const uint64_t *ids, size_t n,
                          float *rows, uint32_t *versions)
{
    (void)s;
    zp_rowpast_serve(&t->rows->past, clock, ids, n, rows, versions);
}

/* The round every table with elements here stands at, when they agree (an
 * empty dense slice closes no round: table.h). */
static int64_t bsp_cut(const zp_server *s)
{
    if (s->ntables == 0)
        return -1;
    int64_t r = -1;
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        if (zp_table_empty_slice(t))
            continue;
        if (r >= 0 && t->round.closed != r)
            return -1;
        r = t->round.closed;
    }
    return r;
}

const zp_consistency_ops zp_bsp_ops = {
    .name = "bsp",
    .caps = ZP_CAP_CUTS | ZP_CAP_ROLLBACK,
    .holds_frames = true,
    .rounds = true,
    .pull_ready = bsp_pull_ready,
    .rows_pull_ready = bsp_rows_pull_ready,
    .push = bsp_push,
    .push_rows = bsp_push_rows,
    .bounds_moved = bsp_bounds_moved,
    .rows_handed = bsp_rows_handed,
    .quorum_changed = bsp_quorum_changed,
    .forget = bsp_forget,
    .cut = bsp_cut,
    .needs_values = zp_async_needs_values,
    .cpull_ok = zp_async_cpull_ok,
    .pulled = zp_async_pulled,
    .past = bsp_past,
    .rows_past = bsp_rows_past,
};
