/*
 * ssp.c - stale synchronous parallel (bound s): pushes applied on arrival
 * (async's hooks); a pull at clock c is answered once every live worker's
 * clock is >= c - s (s = 0 is lock-step). The bound is the table's own when
 * declared, else the cluster's `staleness`.
 */
#include "modes.h"

#include "server.h"

uint32_t zp_ssp_bound(const zp_server *s, const zp_table *t)
{
    return t->has_staleness ? t->staleness : (uint32_t)s->cfg.staleness;
}

static bool ssp_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    (void)rank;
    return s->workers.min_clock >= clock - (int64_t)zp_ssp_bound(s, t);
}

const zp_consistency_ops zp_ssp_ops = {
    .name = "ssp",
    .caps = ZP_CAP_BOUND,
    .holds_frames = false,
    .pull_ready = ssp_pull_ready,
    .rows_pull_ready = ssp_pull_ready,
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
