/*
 * weighted.c - staleness-weighted async: each push applied on arrival
 * scaled by w(tau) (tau in versions, hist.h), dropped past max_staleness,
 * optionally delay-compensated (DC-ASGD, dc_lambda > 0) and optionally
 * holding pulls as ssp with `bound`. A sparse push is weighted row by row,
 * by the staleness of each row. The weighting functions are here too: bsp
 * uses them for late pushes.
 *
 * DC-ASGD needs, per worker, the parameters it last pulled: the `pulled`
 * hook keeps a reference to the buffer each dense pull is sent from
 * (table/dc.c; copy-on-write keeps it unchanged). A worker pulling deltas
 * holds a view no buffer records, so compressed pulls are refused, and a
 * topk/randk push must be decoded to values to be compensated.
 */
#include "modes.h"

#include <math.h>

#include "errors.h"
#include "server.h"
#include "zeps_errors.h"

double zp_weighted_weight(int fn, double lambda, uint64_t tau)
{
    switch (fn) {
    case ZP_WEIGHT_INVERSE:
        return 1.0 / (1.0 + (double)tau);
    case ZP_WEIGHT_EXP:
        return exp(-lambda * (double)tau);
    case ZP_WEIGHT_LR_OVER_TAU:
        return 1.0 / (tau > 1 ? (double)tau : 1.0);
    default:
        return 1.0;
    }
}

static bool weighted_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    (void)t, (void)rank;
    return s->cfg.weighted_bound < 0 || s->workers.min_clock >= clock - s->cfg.weighted_bound;
}

static bool dc_on(const zp_server *s)
{
    return s->cfg.dc_lambda > 0;
}

/* DC-ASGD: replace p->g by its compensated form in the table's scratch
 * (DC-ASGD-a with dc_mean_square > 0: lambda scaled by the running mean
 * square of the gradients, which every push updates, pulled or not). */
static int dc_compensate(zp_server *s, zp_table *t, zp_push *p, char *err, size_t errlen)
{
    const zp_buf *stale = zp_dc_pulled(&t->dc, p->rank);
    float m = (float)s->cfg.dc_mean_square;
    float *ms = m > 0 ? zp_dc_mean_square(&t->dc, t->n) : NULL;
    float *scratch = stale || ms ? zp_dc_scratch(&t->dc, t->n) : NULL;
    if ((m > 0 && !ms) || ((stale || ms) && !scratch))
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "weighted: no memory for DC-ASGD state");
    const float *now = t->params->data + p->off;
    /* never pulled: w_stale = w_now, no compensation */
    const float *was = stale ? stale->data + p->off : now;
    if (ms)
        zp_dc_compensate_adaptive(scratch + p->off, p->g, now, was, ms + p->off, p->count,
                                  (float)s->cfg.dc_lambda, m);
    else if (stale)
        zp_dc_compensate(scratch + p->off, p->g, now, was, p->count, (float)s->cfg.dc_lambda);
    else
        return 0;
    p->g = scratch + p->off;
    return 0;
}

static int weighted_push(zp_server *s, zp_table *t, zp_push *p, zp_push_result *res, char *err,
                         size_t errlen)
{
    uint64_t tau = t->version - p->data_version; /* data_version <= version: checked on arrival */
    int rc;
    if (s->cfg.max_staleness >= 0 && tau > (uint64_t)s->cfg.max_staleness) {
        if ((rc = zp_async_push_check(t, p, err, errlen)) != 0)
            return rc; /* a bad push is refused as such, stale or not */
        zp_async_refuse(t, p, ZP_PUSH_DROPPED, res);
        return 0;
    }
    if (dc_on(s)) {
        /* the compensation reads g beside two other vectors: check first */
        if ((rc = zp_async_push_check(t, p, err, errlen)) != 0 ||
            (rc = dc_compensate(s, t, p, err, errlen)) != 0)
            return rc;
        p->g_own = NULL; /* g is the table's DC scratch now */
    }
    return zp_async_apply(t, p, zp_weighted_weight(s->cfg.weight_fn, s->cfg.weight_lambda, tau),
                          ZP_PUSH_APPLIED, res, err, errlen);
}

/* With row versions: each row scaled by w(tau of that row), rows staler
 * than max_staleness dropped. Without: as async. */
static int weighted_push_rows(zp_server *s, zp_table *t, const zp_rows_push *rp, size_t *dropped,
                              char *err, size_t errlen)
{
    if (!rp->read_versions)
        return zp_async_push_rows(s, t, rp, dropped, err, errlen);
    size_t dim = t->rows->dim;
    *dropped = 0;
    for (size_t i = 0; i < rp->n; i++) {
        zp_sparse_row row;
        uint64_t tau = 0;
        if (zp_sparse_get(t->rows->store, rp->ids[i], &row) && row.version > rp->read_versions[i])
            tau = row.version - rp->read_versions[i];
        if (s->cfg.max_staleness >= 0 && tau > (uint64_t)s->cfg.max_staleness) {
            (*dropped)++;
            continue;
        }
        float wt = (float)zp_weighted_weight(s->cfg.weight_fn, s->cfg.weight_lambda, tau);
        zp_sparse_push(t->rows->store, &rp->ids[i], 1, rp->g + i * dim, wt, rp->clock,
                       &rp->read_versions[i], &t->stats.tau, &t->stats.tau_by_freq);
    }
    return 0;
}

static bool weighted_needs_values(const zp_server *s)
{
    return dc_on(s);
}

static bool weighted_cpull_ok(const zp_server *s)
{
    return !dc_on(s);
}

static void weighted_pulled(zp_server *s, zp_table *t, uint32_t rank, zp_buf *b)
{
    if (dc_on(s))
        zp_dc_remember(&t->dc, t->nworkers, rank, b);
}

const zp_consistency_ops zp_weighted_ops = {
    .name = "weighted",
    .caps = 0,
    .holds_frames = false,
    .pull_ready = weighted_pull_ready,
    .rows_pull_ready = weighted_pull_ready,
    .push = weighted_push,
    .push_rows = weighted_push_rows,
    .bounds_moved = zp_async_bounds_moved,
    .quorum_changed = zp_async_quorum_changed,
    .forget = zp_async_forget,
    .cut = zp_async_cut,
    .needs_values = weighted_needs_values,
    .cpull_ok = weighted_cpull_ok,
    .pulled = weighted_pulled,
};
