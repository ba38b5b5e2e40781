/*
 * control.c - libzeps: the requests that name no table: CLOCK, BARRIER,
 * FINISH, ROLLBACK, SNAPSHOT and STATS. Each is one sub-request per shard (BARRIER
 * and STATS: one shard) through the engine (req.c).
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "client.h"
#include "control.h"
#include "log.h"
#include "push_clock.h"
#include "req.h"
#include "tables.h"
#include "zeps.h"

/* Start a request with one sub-request to each of shards [first, first + n). */

static zp_req *simple_start(zeps_client *c, int op, int64_t clock, int first, int n)
{
    zp_req *r = zp_req_new(c, op, n);
    r->clock = clock;
    for (int k = first; k < first + n; k++)
        if (zp_client_live(c, k))
            zp_req_send(r, zp_req_add(r, k));
    return r;
}

static int simple_all(zeps_client *c, int op, int64_t clock, int first, int n)
{
    zp_req *r = simple_start(c, op, clock, first, n);
    return zeps_wait(&r);
}

/* on[k] = whether a CLOCK goes to shard k: every shard, but outside modes
 * with cuts one that owns no slot and holds no dense slice is left out (a
 * shard removed by zepsctl shards remove, or joined and given nothing yet):
 * it holds no row a clock could matter to, so it can be stopped while the
 * workers run (docs/elastic.md, "Removing a shard"). */
void zp_control_clock_targets(const zeps_client *c, uint8_t *on)
{
    bool dense = false;
    uint8_t piece[ZP_MAX_SHARDS] = {0}; /* holds a piece of a dense table by range */
    for (uint32_t i = 0; i < c->ntables; i++) {
        const zp_table *ti = &c->tables[i];
        dense = dense || ti->dim == 0;
        for (int k = c->ndense; ti->dim == 0 && k < c->nshards; k++)
            piece[k] |= zp_tables_touches(c, ti, k, 0, ti->length);
    }
    for (int k = 0; k < c->nshards; k++)
        on[k] = zp_client_live(c, k) && ((c->caps & ZEPS_CAP_CUTS) || (dense && k < c->ndense) ||
                                         piece[k] || zp_slotmap_count(c->slots, k) > 0);
}

int zeps_clock_start(zeps_client *c, int64_t clock, zeps_req **req)
{
    if (!c || clock < 0 || !req)
        return ZEPS_EINVAL;
    uint8_t on[ZP_MAX_SHARDS];
    zp_control_clock_targets(c, on);
    zp_control_clock_start_on(c, clock, on, req);
    return 0;
}

void zp_control_clock_start_on(zeps_client *c, int64_t clock, const uint8_t *shards, zp_req **req)
{
    c->clock_sent = clock > c->clock_sent ? clock : c->clock_sent;
    int n = 0;
    for (int k = 0; k < c->nshards; k++)
        n += shards[k] != 0;
    *req = NULL;
    if (n == 0)
        return;
    zp_req *r = zp_req_new(c, ZEPS__OP__CLOCK, n);
    r->clock = clock;
    for (int k = 0; k < c->nshards; k++)
        if (shards[k])
            zp_req_send(r, zp_req_add(r, k));
    *req = r;
}

int zeps_push_clock_start(zeps_client *c, uint32_t table, const float *grad, uint64_t offset,
                          uint64_t count, int64_t clock, zeps_req **push, zeps_req **rest)
{
    if (!c || clock < 0 || !push || !rest)
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    uint8_t on[ZP_MAX_SHARDS], off[ZP_MAX_SHARDS], to[ZP_MAX_SHARDS];
    zp_control_clock_targets(c, to);
    for (int k = 0; k < c->nshards; k++) {
        on[k] = zp_tables_touches(c, ti, k, offset, count);
        off[k] = !on[k] && to[k];
    }
    int rc = zp_dense_push_start_clocked(c, table, grad, offset, count, clock, on, push);
    if (rc != 0)
        return rc;
    zp_control_clock_start_on(c, clock, off, rest);
    return 0;
}

int zeps_clock(zeps_client *c, int64_t clock)
{
    zp_req *r;
    int rc = zeps_clock_start(c, clock, &r);
    return rc ? rc : zeps_wait(&r);
}

int zeps_rollback(zeps_client *c, int64_t clock)
{
    if (!c || clock < 0 || c->rank == ZEPS_RANK_TOOL)
        return ZEPS_EINVAL;
    c->abort_all = 0;
    uint64_t set = c->resume_set;
    int rc = zp_control_hello_all(c);
    if (rc != 0)
        return rc;
    zp_req *r = zp_req_new(c, ZEPS__OP__ROLLBACK, c->nshards);
    r->clock = clock;
    r->cut_set = set;
    r->recovery = c->resume_recovery;
    for (int k = 0; k < c->nshards; k++)
        if (zp_client_live(c, k))
            zp_req_send(r, zp_req_add(r, k));
    rc = zeps_wait(&r);
    if (rc == 0)
        zp_info("rolled back to clock %lld (snapshot set %016" PRIx64 ")", (long long)clock,
                c->resume_set);
    return rc;
}

int zeps_snapshot_request(zeps_client *c, int64_t clock, uint64_t setid)
{
    if (!c)
        return ZEPS_EINVAL;
    zp_req *r = zp_req_new(c, ZEPS__OP__SNAPSHOT, c->nshards);
    r->clock = clock;
    r->cut_set = setid;
    for (int k = 0; k < c->nshards; k++)
        if (zp_client_live(c, k))
            zp_req_send(r, zp_req_add(r, k));
    return zeps_wait(&r);
}

int zeps_evict(zeps_client *c, uint32_t rank)
{
    if (!c)
        return ZEPS_EINVAL;
    zp_req *r = zp_req_new(c, ZEPS__OP__EVICT, c->nshards);
    r->evict_rank = rank;
    for (int k = 0; k < c->nshards; k++)
        if (zp_client_live(c, k))
            zp_req_send(r, zp_req_add(r, k));
    return zeps_wait(&r);
}

int zeps_set_lr(zeps_client *c, uint32_t table, double lr)
{
    if (!c)
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (!(isfinite(lr) && lr > 0))
        return zp_fail(c, ZEPS_EOPTIM, "table '%s': lr %g must be finite and > 0", ti->name, lr);
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = ti->name;
    spec.lr = lr;
    int on = ti->dim ? c->nshards : c->ndense; /* a dense table is on the file's shards */
    zp_req *r = zp_req_new(c, ZEPS__OP__TUNE, on);
    r->spec = &spec; /* read by every send and resend: lives until zeps_wait returns */
    for (int k = 0; k < on; k++) {
        if (!zp_client_live(c, k))
            continue;
        zp_req_sub *s = zp_req_add(r, k);
        s->table = ti->ids[k];
        zp_req_send(r, s);
    }
    return zeps_wait(&r);
}

int zeps_finish(zeps_client *c, int64_t clock)
{
    if (!c)
        return ZEPS_EINVAL;
    return simple_all(c, ZEPS__OP__FINISH, clock, 0, c->nshards);
}

int zeps_barrier(zeps_client *c)
{
    if (!c)
        return ZEPS_EINVAL;
    /* Shard 0 keeps the cluster's barrier. */
    return simple_all(c, ZEPS__OP__BARRIER, 0, 0, 1);
}

int zeps_stats_raw(zeps_client *c, int shard, void **buf, size_t *len)
{
    if (!c || shard < 0 || shard >= c->nshards || !buf || !len)
        return ZEPS_EINVAL;
    zp_req *r = zp_req_new(c, ZEPS__OP__STATS, 1);
    zp_req_send(r, zp_req_add(r, shard));
    zp_req_finish(r);
    void *b = r->stats_buf;
    size_t n = r->stats_len;
    r->stats_buf = NULL;
    int rc = zeps_wait(&r);
    if (rc == 0 && !b)
        rc = zp_fail(c, ZEPS_EPROTO, "shard %d answered STATS without statistics", shard);
    if (rc != 0) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int zeps_wait_all(zp_req **reqs, int n)
{
    int first = 0;
    for (int i = 0; reqs && i < n; i++) {
        if (!reqs[i])
            continue;
        int rc = zeps_wait(&reqs[i]);
        if (rc && !first)
            first = rc;
    }
    return first;
}

int zp_control_hello_all(zeps_client *c)
{
    zp_req *r = zp_req_new(c, ZEPS__OP__HELLO, c->nshards);
    int per_try = c->opt.request_timeout_ms < 1000 ? c->opt.request_timeout_ms : 1000;
    int saved = c->opt.request_timeout_ms;
    c->opt.request_timeout_ms = per_try;
    for (int k = 0; k < c->nshards; k++) {
        if (!zp_client_live(c, k))
            continue;
        zp_req_sub *s = zp_req_add(r, k);
        /* ceil(hello_timeout_ms / per_try) tries: about hello_timeout_ms in all */
        s->max_retries = (c->opt.hello_timeout_ms + per_try - 1) / per_try - 1;
        zp_req_send(r, s);
    }
    int rc = zeps_wait(&r);
    c->opt.request_timeout_ms = saved;
    return rc;
}
