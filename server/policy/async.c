/*
 * async.c - the async mode: every push applied on arrival with the full
 * step, every pull answered at once. Its hooks are the defaults the other
 * "apply on arrival" modes (ssp, weighted) reuse: no rounds, no cut, no
 * state kept per worker.
 */
#include "modes.h"

#include "errors.h"
#include "finite.h"
#include "server.h"
#include "zeps_errors.h"

int zp_async_nonfinite(const zp_table *t, const zp_push *p, char *err, size_t errlen)
{
    return zp_errors_set(err, errlen, ZEPS_ENONFINITE,
                         "PUSH to table '%s' from worker %u contains NaN or Inf; nothing applied",
                         t->name, p->rank);
}

int zp_async_push_check(const zp_table *t, zp_push *p, char *err, size_t errlen)
{
    if (!p->unchecked)
        return 0;
    if (!zp_finite_all(p->g, p->count))
        return zp_async_nonfinite(t, p, err, errlen);
    p->unchecked = false;
    return 0;
}

int zp_async_apply(zp_table *t, zp_push *p, double weight, zp_push_outcome outcome,
                   zp_push_result *res, char *err, size_t errlen)
{
    uint64_t before = t->version;
    if (p->sparse_codec)
        zp_table_apply_sparse(t, p->sparse_codec, p->sparse_buf, p->sparse_len, p->off, p->count,
                              (float)weight);
    else if (!p->unchecked)
        zp_table_apply(t, p->g, p->off, p->count, (float)weight);
    else if (!zp_table_apply_checked(t, p->g, p->g_own, p->off, p->count, (float)weight))
        return zp_async_nonfinite(t, p, err, errlen);
    res->outcome = outcome;
    res->applied = true;
    res->version_applied = before;
    res->tau = before - p->data_version;
    res->weight = weight;
    return 0;
}

void zp_async_refuse(const zp_table *t, const zp_push *p, zp_push_outcome outcome,
                     zp_push_result *res)
{
    res->outcome = outcome;
    res->applied = false;
    res->version_applied = t->version;
    res->tau = t->version - p->data_version;
    res->weight = 0.0;
    res->reply_flags |= ZP_FLAG_DROPPED;
}

bool zp_async_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    (void)s, (void)t, (void)rank, (void)clock;
    return true;
}

int zp_async_push(zp_server *s, zp_table *t, zp_push *p, zp_push_result *res, char *err,
                  size_t errlen)
{
    (void)s;
    return zp_async_apply(t, p, 1.0, ZP_PUSH_APPLIED, res, err, errlen);
}

int zp_async_push_rows(zp_server *s, zp_table *t, const zp_rows_push *rp, size_t *dropped,
                       char *err, size_t errlen)
{
    (void)s, (void)err, (void)errlen;
    *dropped = 0;
    if (rp->cand != NULL)
        zp_sparse_push_probed(t->rows->store, rp->ids, rp->n, rp->cand, rp->g, 1.0f, rp->clock,
                              rp->read_versions, &t->stats.tau, &t->stats.tau_by_freq);
    else
        zp_sparse_push(t->rows->store, rp->ids, rp->n, rp->g, 1.0f, rp->clock, rp->read_versions,
                       &t->stats.tau, &t->stats.tau_by_freq);
    return 0;
}

bool zp_async_bounds_moved(zp_server *s, zp_table *t)
{
    (void)s, (void)t; /* nothing is held */
    return false;
}

bool zp_async_quorum_changed(zp_server *s, zp_table *t, zp_push_result *res)
{
    (void)s, (void)t, (void)res;
    return false;
}

void zp_async_forget(zp_server *s, zp_table *t, uint32_t rank)
{
    (void)s, (void)t, (void)rank; /* nothing is held */
}

int64_t zp_async_cut(const zp_server *s)
{
    (void)s;
    return -1;
}

bool zp_async_needs_values(const zp_server *s)
{
    (void)s;
    return false;
}

bool zp_async_cpull_ok(const zp_server *s)
{
    (void)s;
    return true;
}

void zp_async_pulled(zp_server *s, zp_table *t, uint32_t rank, struct zp_buf *b)
{
    (void)s, (void)t, (void)rank, (void)b;
}

const zp_consistency_ops zp_async_ops = {
    .name = "async",
    .caps = 0,
    .holds_frames = false,
    .pull_ready = zp_async_ready,
    .rows_pull_ready = zp_async_ready,
    .push = zp_async_push,
    .push_rows = zp_async_push_rows,
    .bounds_moved = zp_async_bounds_moved,
    .quorum_changed = zp_async_quorum_changed,
    .forget = zp_async_forget,
    .cut = zp_async_cut,
    .needs_values = zp_async_needs_values,
    .cpull_ok = zp_async_cpull_ok,
    .pulled = zp_async_pulled,
};
