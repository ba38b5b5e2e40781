/*
 * consistency.c - the bsp and async policies.
 *
 * bsp: a round of table t is clock c. Each worker's gradient for the round is
 * kept as the received ZeroMQ frame (no copy) until all workers pushed; then
 * the gradients are summed in rank order into one buffer, so the result is
 * bit-for-bit the same whatever order they arrived in, averaged and applied
 * once. A pull at clock c waits until round c - 1 is applied (t->round >= c).
 *
 * async: every push is applied on arrival, every pull answered at once.
 */
#include "consistency.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "server.h"
#include "zeps_errors.h"

static bool bsp_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    return t->round >= clock;
}

/* acc = sum over ranks, in rank order, of the pending gradients. */
static void bsp_sum(zp_table *t)
{
    const float *g0 = zmq_msg_data(&t->pending[0]);
    memcpy(t->acc, g0, t->n * sizeof(float));
    for (int r = 1; r < t->nworkers; r++) {
        const float *g = zmq_msg_data(&t->pending[r]);
        /* alpha = 1: each element is acc + g, rounded once, in any kernel */
        size_t left = t->n, done = 0;
        while (left) {
            int k = left > (1u << 30) ? (1 << 30) : (int)left;
            cblas_saxpy(k, 1.0f, g + done, 1, t->acc + done, 1);
            done += (size_t)k;
            left -= (size_t)k;
        }
    }
}

static void bsp_close_round(zp_server *s, zp_table *t)
{
    if (t->nworkers == 1) {
        zp_table_apply(t, zmq_msg_data(&t->pending[0]), 0, t->n, 1.0f);
    } else {
        bsp_sum(t);
        zp_table_apply(t, t->acc, 0, t->n, 1.0f / (float)t->nworkers);
    }
    for (int r = 0; r < t->nworkers; r++) {
        zmq_msg_close(&t->pending[r]);
        t->have[r] = false;
    }
    t->npending = 0;
    t->round++;
    zp_debug("table '%s': round %lld applied (version %llu)", t->name,
             (long long)(t->round - 1), (unsigned long long)t->version);
}

static int bsp_push(zp_server *s, zp_table *t, uint32_t rank, int64_t clock, const float *g,
                    size_t off, size_t count, zmq_msg_t *frame, char *err, size_t errlen)
{
    if (off != 0 || count != t->n) {
        snprintf(err, errlen,
                 "bsp: a push to table '%s' must cover this shard's whole slice [%llu, %llu)",
                 t->name, (unsigned long long)t->begin, (unsigned long long)t->end);
        return ZEPS_ERANGE;
    }
    if (clock != t->round) {
        snprintf(err, errlen, "bsp: push for clock %lld but table '%s' is collecting round %lld",
                 (long long)clock, t->name, (long long)t->round);
        return ZEPS_ECLOCK;
    }
    if (t->have[rank]) {
        snprintf(err, errlen, "bsp: worker %u already pushed table '%s' for round %lld", rank,
                 t->name, (long long)clock);
        return ZEPS_ESTATE;
    }
    if (!t->acc && t->nworkers > 1) {
        t->acc = malloc((t->n ? t->n : 1) * sizeof(float));
        if (!t->acc) {
            snprintf(err, errlen, "bsp: cannot allocate the round buffer of table '%s'", t->name);
            return ZEPS_ENOMEM;
        }
    }
    /* Keep the bytes as they arrived: the frame moves into the round. The
     * receive buffer is 4-byte aligned data we were already reading in place. */
    zmq_msg_init(&t->pending[rank]);
    zmq_msg_move(&t->pending[rank], frame);
    t->have[rank] = true;
    t->npending++;
    if (t->npending == t->nworkers)
        bsp_close_round(s, t);
    return 0;
}

const zp_consistency_ops zp_consistency_bsp = {
    .name = "bsp",
    .pull_ready = bsp_pull_ready,
    .push = bsp_push,
};

static bool async_pull_ready(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock)
{
    return true;
}

static int async_push(zp_server *s, zp_table *t, uint32_t rank, int64_t clock, const float *g,
                      size_t off, size_t count, zmq_msg_t *frame, char *err, size_t errlen)
{
    zp_table_apply(t, g, off, count, 1.0f);
    return 0;
}

const zp_consistency_ops zp_consistency_async = {
    .name = "async",
    .pull_ready = async_pull_ready,
    .push = async_push,
};

const zp_consistency_ops *zp_consistency_ops_for(int mode)
{
    switch (mode) {
    case ZP_CONSISTENCY_BSP:
        return &zp_consistency_bsp;
    case ZP_CONSISTENCY_ASYNC:
        return &zp_consistency_async;
    default:
        return NULL;
    }
}
