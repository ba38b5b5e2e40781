/*
 * round.c - a dense table's BSP round state; see round.h. The frames held
 * here are the received ZeroMQ messages themselves, so a round costs no copy
 * until it closes and its gradients are summed, in rank order, into acc.
 */
#include "round.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "zeps_errors.h"

int zp_round_init(zp_round *rd, int nworkers, size_t n)
{
    memset(rd, 0, sizeof(*rd));
    rd->nworkers = nworkers;
    rd->n = n;
    rd->pending = calloc((size_t)nworkers, sizeof(zmq_msg_t));
    rd->have = calloc((size_t)nworkers, sizeof(bool));
    rd->pending_version = calloc((size_t)nworkers, sizeof(uint64_t));
    rd->last_rank = calloc((size_t)nworkers, sizeof(uint32_t));
    rd->last_version = calloc((size_t)nworkers, sizeof(uint64_t));
    if (!rd->pending || !rd->have || !rd->pending_version || !rd->last_rank || !rd->last_version)
        return ZEPS_ENOMEM;
    return 0;
}

void zp_round_fini(zp_round *rd)
{
    zp_round_reset(rd, rd->closed);
    free(rd->pending);
    free(rd->have);
    free(rd->pending_version);
    free(rd->last_rank);
    free(rd->last_version);
    free(rd->acc);
    memset(rd, 0, sizeof(*rd));
}

bool zp_round_holds(const zp_round *rd, uint32_t rank)
{
    return rd->have && rank < (uint32_t)rd->nworkers && rd->have[rank];
}

int zp_round_hold(zp_round *rd, uint32_t rank, zmq_msg_t *frame, uint64_t data_version)
{
    if (!rd->acc && rd->nworkers > 1) {
        rd->acc = malloc((rd->n ? rd->n : 1) * sizeof(float));
        if (!rd->acc)
            return ZEPS_ENOMEM;
    }
    /* Keep the bytes as they arrived: the frame moves into the round. */
    zmq_msg_init(&rd->pending[rank]);
    if (frame)
        zmq_msg_move(&rd->pending[rank], frame);
    rd->have[rank] = true;
    rd->pending_version[rank] = data_version;
    rd->npending++;
    return 0;
}

int zp_round_hold_copy(zp_round *rd, uint32_t rank, const float *g, uint64_t data_version)
{
    zmq_msg_t frame;
    if (zmq_msg_init_size(&frame, rd->n * sizeof(float)) != 0)
        return ZEPS_ENOMEM;
    memcpy(zmq_msg_data(&frame), g, rd->n * sizeof(float));
    int rc = zp_round_hold(rd, rank, &frame, data_version);
    zmq_msg_close(&frame); /* empty once held */
    return rc;
}

int zp_round_take_part(zp_round *to, const zp_round *from, size_t off)
{
    to->closed = from->closed;
    for (int r = 0; r < from->nworkers && r < to->nworkers; r++) {
        if (!from->have[r])
            continue;
        zmq_msg_t *f = (zmq_msg_t *)&from->pending[r];
        int rc = zmq_msg_size(f) != from->n * sizeof(float) /* held without values (a backup) */
                     ? zp_round_hold(to, (uint32_t)r, NULL, from->pending_version[r])
                     : zp_round_hold_copy(to, (uint32_t)r, (const float *)zmq_msg_data(f) + off,
                                          from->pending_version[r]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void zp_round_forget(zp_round *rd, uint32_t rank)
{
    if (!zp_round_holds(rd, rank))
        return;
    zmq_msg_close(&rd->pending[rank]);
    rd->have[rank] = false;
    rd->npending--;
}

/* acc = sum over the ranks that pushed, in rank order. Returns how many. */
static int sum_in_rank_order(zp_round *rd)
{
    int first = 1, k = 0;
    for (int r = 0; r < rd->nworkers; r++) {
        if (!rd->have[r])
            continue;
        const float *g = zmq_msg_data(&rd->pending[r]);
        k++;
        if (first) {
            memcpy(rd->acc, g, rd->n * sizeof(float));
            first = 0;
            continue;
        }
        /* alpha = 1: each element is acc + g, rounded once, in any kernel */
        for (size_t done = 0, left = rd->n; left;) {
            int m = left > (1u << 30) ? (1 << 30) : (int)left;
            cblas_saxpy(m, 1.0f, g + done, 1, rd->acc + done, 1);
            done += (size_t)m;
            left -= (size_t)m;
        }
    }
    return k;
}

void zp_round_give(zp_round *rd, const float *g)
{
    rd->given = g;
}

bool zp_round_lacks_sum(const zp_round *rd)
{
    if (rd->given)
        return false;
    for (int r = 0; r < rd->nworkers; r++)
        if (rd->have[r] && zmq_msg_size(&rd->pending[r]) != rd->n * sizeof(float))
            return true;
    return false;
}

const float *zp_round_sum(zp_round *rd, int *k)
{
    if (rd->given) {
        *k = rd->npending;
        return rd->given;
    }
    if (rd->npending == 1) {
        int r = 0;
        while (!rd->have[r])
            r++;
        *k = 1;
        return zmq_msg_data(&rd->pending[r]);
    }
    *k = sum_in_rank_order(rd);
    return rd->acc;
}

void zp_round_close(zp_round *rd)
{
    rd->nlast = 0;
    for (int r = 0; r < rd->nworkers; r++) {
        if (!rd->have[r])
            continue;
        rd->last_rank[rd->nlast] = (uint32_t)r;
        rd->last_version[rd->nlast] = rd->pending_version[r];
        rd->nlast++;
        zmq_msg_close(&rd->pending[r]);
        rd->have[r] = false;
    }
    rd->npending = 0;
    rd->given = NULL;
    rd->closed++;
}

void zp_round_reset(zp_round *rd, int64_t closed)
{
    for (int r = 0; r < rd->nworkers && rd->have; r++) {
        if (!rd->have[r])
            continue;
        zmq_msg_close(&rd->pending[r]);
        rd->have[r] = false;
    }
    rd->npending = 0;
    rd->given = NULL;
    rd->closed = closed;
}

uint64_t zp_round_bytes(const zp_round *rd)
{
    return rd->acc ? rd->n * sizeof(float) : 0;
}
