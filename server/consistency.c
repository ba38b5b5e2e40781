/*
 * consistency.c - the bsp, async, ssp and weighted policies.
 *
 * bsp: a round of table t is clock c. Each worker's gradient for the round is
 * kept as the received ZeroMQ frame (no copy) until `workers - backup_workers`
 * of them arrived; then they are summed in rank order into one buffer, so
 * the result is bit-for-bit the same whatever order they arrived in, averaged
 * over the pushes summed and applied once. A pull at clock c waits until
 * round c - 1 is applied (t->round >= c). A push for a round already closed
 * (a backup worker's, late) is dropped, or applied at once scaled by w(tau)
 * when late_pushes = "weighted".
 *
 * async: every push applied on arrival, every pull answered at once.
 *
 * ssp (bound s): pushes applied on arrival; a pull at clock c is answered
 * once every live worker's clock is >= c - s (s = 0 is lock-step).
 *
 * weighted: async with each push scaled by w(tau) (tau in versions, see
 * stats.h), dropped past max_staleness, optionally delay-compensated
 * (DC-ASGD) and optionally holding pulls as ssp with `bound`.
 */
#include "consistency.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "server.h"
#include "zeps_errors.h"

double zp_weight(int fn, double lambda, uint64_t tau)
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

void zp_dc_compensate(float *restrict out, const float *restrict g, const float *restrict w_now,
                      const float *restrict w_stale, size_t n, float lambda)
{
    for (size_t i = 0; i < n; i++)
        out[i] = g[i] + lambda * g[i] * g[i] * (w_now[i] - w_stale[i]);
}

static uint64_t tau_of(const zp_table *t, const zp_push *p)
{
    return t->version - p->data_version; /* data_version <= version: checked on arrival */
}

/* Apply p scaled by `weight` now and record it as `kind`. */
static void apply_now(zp_server *s, zp_table *t, zp_push *p, zp_trace_kind kind, double weight)
{
    uint64_t before = t->version;
    if (p->sparse_codec)
        zp_table_apply_sparse(t, p->sparse_codec, p->sparse_buf, p->sparse_len, p->off, p->count,
                              (float)weight);
    else
        zp_table_apply(t, p->g, p->off, p->count, (float)weight);
    zp_server_record_push(s, t, p, kind, before, weight, 1);
}

/* --- bsp --- */

static bool bsp_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    return t->round >= clock;
}

/* acc = sum over the ranks that pushed, in rank order. Returns how many. */
static int bsp_sum(zp_table *t)
{
    int first = 1, k = 0;
    for (int r = 0; r < t->nworkers; r++) {
        if (!t->have[r])
            continue;
        const float *g = zmq_msg_data(&t->pending[r]);
        k++;
        if (first) {
            memcpy(t->acc, g, t->n * sizeof(float));
            first = 0;
            continue;
        }
        /* alpha = 1: each element is acc + g, rounded once, in any kernel */
        for (size_t done = 0, left = t->n; left;) {
            int m = left > (1u << 30) ? (1 << 30) : (int)left;
            cblas_saxpy(m, 1.0f, g + done, 1, t->acc + done, 1);
            done += (size_t)m;
            left -= (size_t)m;
        }
    }
    return k;
}

static void bsp_close_round(zp_server *s, zp_table *t)
{
    uint64_t before = t->version;
    if (t->npending == 1) {
        int r = 0;
        while (!t->have[r])
            r++;
        zp_table_apply(t, zmq_msg_data(&t->pending[r]), 0, t->n, 1.0f);
    } else {
        int k = bsp_sum(t);
        zp_table_apply(t, t->acc, 0, t->n, 1.0f / (float)k);
    }
    for (int r = 0; r < t->nworkers; r++) {
        if (!t->have[r])
            continue;
        zp_push p = {.rank = (uint32_t)r, .clock = t->round, .data_version = t->pending_version[r],
                     .count = t->n};
        zp_server_record_push(s, t, &p, ZP_TRACE_PUSH, before, 1.0, 1);
        zmq_msg_close(&t->pending[r]);
        t->have[r] = false;
    }
    t->npending = 0;
    t->round++;
    zp_persist_on_round(s);
    zp_debug("table '%s': round %lld applied (version %llu)", t->name,
             (long long)(t->round - 1), (unsigned long long)t->version);
}

static int bsp_push(zp_server *s, zp_table *t, zp_push *p, char *err, size_t errlen)
{
    if (p->off != 0 || p->count != t->n)
        return zp_seterr(err, errlen, ZEPS_ERANGE,
                         "bsp: a push to table '%s' must cover this shard's whole slice [%llu, %llu)",
                         t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
    if (p->clock < t->round) {
        /* a backup worker's push for a round that closed without it */
        if (s->cfg.late_weighted) {
            apply_now(s, t, p, ZP_TRACE_LATE, zp_weight(s->cfg.weight_fn, s->cfg.weight_lambda,
                                                         tau_of(t, p)));
        } else {
            zp_server_record_push(s, t, p, ZP_TRACE_LATE, t->version, 0.0, 0);
            p->reply_flags |= ZP_FLAG_DROPPED;
        }
        return 0;
    }
    if (p->clock > t->round)
        return zp_seterr(err, errlen, ZEPS_ECLOCK,
                         "bsp: push for clock %lld but table '%s' is collecting round %lld",
                         (long long)p->clock, t->name, (long long)t->round);
    if (t->have[p->rank])
        return zp_seterr(err, errlen, ZEPS_ESTATE,
                         "bsp: worker %u already pushed table '%s' for round %lld", p->rank,
                         t->name, (long long)p->clock);
    if (!t->acc && t->nworkers > 1) {
        t->acc = malloc((t->n ? t->n : 1) * sizeof(float));
        if (!t->acc)
            return zp_seterr(err, errlen, ZEPS_ENOMEM,
                             "bsp: cannot allocate the round buffer of table '%s'", t->name);
    }
    /* Keep the bytes as they arrived: the frame moves into the round. */
    zmq_msg_init(&t->pending[p->rank]);
    zmq_msg_move(&t->pending[p->rank], p->frame);
    t->have[p->rank] = true;
    t->pending_version[p->rank] = p->data_version;
    t->npending++;
    if (t->npending >= zp_server_round_quorum(s))
        bsp_close_round(s, t);
    return 0;
}

void zp_bsp_close_if_ready(zp_server *s, zp_table *t)
{
    if (s->cons == &zp_consistency_bsp && t->npending > 0 &&
        t->npending >= zp_server_round_quorum(s))
        bsp_close_round(s, t);
}

const zp_consistency_ops zp_consistency_bsp = {
    .name = "bsp",
    .caps = ZP_CAP_CUTS | ZP_CAP_ROLLBACK,
    .pull_ready = bsp_pull_ready,
    .push = bsp_push,
};

/* --- async --- */

static bool always_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    return true;
}

static int async_push(zp_server *s, zp_table *t, zp_push *p, char *err, size_t errlen)
{
    apply_now(s, t, p, ZP_TRACE_PUSH, 1.0);
    return 0;
}

const zp_consistency_ops zp_consistency_async = {
    .name = "async",
    .pull_ready = always_ready,
    .push = async_push,
};

/* --- ssp --- */

static bool ssp_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    return s->min_clock >= clock - (int64_t)zp_server_staleness(s, t);
}

const zp_consistency_ops zp_consistency_ssp = {
    .name = "ssp",
    .caps = ZP_CAP_BOUND,
    .pull_ready = ssp_pull_ready,
    .push = async_push,
};

/* --- weighted --- */

static bool weighted_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank,
                                int64_t clock)
{
    return s->cfg.weighted_bound < 0 || s->min_clock >= clock - s->cfg.weighted_bound;
}

/* DC-ASGD: replace p->g by its compensated form in t->scratch. */
static int dc_compensate(zp_server *s, zp_table *t, zp_push *p, char *err, size_t errlen)
{
    const zp_buf *stale = t->pulled ? t->pulled[p->rank] : NULL;
    if (!stale)
        return 0; /* never pulled: w_stale = w_now, no compensation */
    if (!t->scratch && !(t->scratch = malloc((t->n ? t->n : 1) * sizeof(float))))
        return zp_seterr(err, errlen, ZEPS_ENOMEM, "weighted: no memory for DC-ASGD scratch");
    zp_dc_compensate(t->scratch + p->off, p->g, t->params->data + p->off, stale->data + p->off,
                     p->count, (float)s->cfg.dc_lambda);
    p->g = t->scratch + p->off;
    return 0;
}

static int weighted_push(zp_server *s, zp_table *t, zp_push *p, char *err, size_t errlen)
{
    uint64_t tau = tau_of(t, p);
    if (s->cfg.max_staleness >= 0 && tau > (uint64_t)s->cfg.max_staleness) {
        zp_server_record_push(s, t, p, ZP_TRACE_DROP, t->version, 0.0, 0);
        p->reply_flags |= ZP_FLAG_DROPPED;
        return 0;
    }
    if (s->cfg.dc_lambda > 0) {
        int rc = dc_compensate(s, t, p, err, errlen);
        if (rc != 0)
            return rc;
    }
    apply_now(s, t, p, ZP_TRACE_PUSH, zp_weight(s->cfg.weight_fn, s->cfg.weight_lambda, tau));
    return 0;
}

const zp_consistency_ops zp_consistency_weighted = {
    .name = "weighted",
    .pull_ready = weighted_pull_ready,
    .push = weighted_push,
};

const zp_consistency_ops *zp_consistency_ops_for(int mode)
{
    switch (mode) {
    case ZP_CONSISTENCY_BSP:
        return &zp_consistency_bsp;
    case ZP_CONSISTENCY_ASYNC:
        return &zp_consistency_async;
    case ZP_CONSISTENCY_SSP:
        return &zp_consistency_ssp;
    case ZP_CONSISTENCY_WEIGHTED:
        return &zp_consistency_weighted;
    default:
        return NULL;
    }
}
