/*
 * workers.c - per-rank state of a shard; see workers.h.
 */
#include "workers.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

void zp_workers_init(zp_workers *ws, int n)
{
    ws->n = n;
    ws->w = zp_xcalloc((size_t)n, sizeof(zp_worker));
}

void zp_workers_fini(zp_workers *ws)
{
    for (int i = 0; i < ws->n; i++)
        if (ws->w[i].barrier_gen)
            zmq_msg_close(&ws->w[i].barrier_identity);
    free(ws->w);
    ws->w = NULL;
    ws->n = 0;
}

bool zp_worker_hello(zp_worker *w, uint64_t incarnation)
{
    w->lost = false;
    if ((w->joined || w->rehello) && w->incarnation == incarnation) {
        w->joined = true;
        w->rehello = false;
        w->left = false;
        return false;
    }
    w->rehello = false;
    if (w->barrier_gen) {
        zmq_msg_close(&w->barrier_identity);
        w->barrier_gen = 0;
    }
    w->joined = true;
    w->left = false;
    w->incarnation = incarnation;
    w->max_seq = 0;
    w->window = 0;
    return true;
}

bool zp_worker_seen(const zp_worker *w, uint64_t seq)
{
    if (seq > w->max_seq)
        return false;
    if (seq == w->max_seq)
        return seq != 0;
    uint64_t back = w->max_seq - seq; /* >= 1 */
    if (back > ZP_SEQ_WINDOW)
        return true;
    return (w->window >> (back - 1)) & 1u;
}

void zp_worker_record(zp_worker *w, uint64_t seq)
{
    if (seq > w->max_seq) {
        uint64_t shift = seq - w->max_seq;
        /* the old max_seq becomes bit shift-1 */
        if (w->max_seq == 0)
            w->window = 0;
        else if (shift > ZP_SEQ_WINDOW)
            w->window = 0;
        else if (shift == ZP_SEQ_WINDOW)
            w->window = 1ull << (ZP_SEQ_WINDOW - 1);
        else
            w->window = (w->window << shift) | (1ull << (shift - 1));
        w->max_seq = seq;
    } else if (seq < w->max_seq) {
        uint64_t back = w->max_seq - seq;
        if (back <= ZP_SEQ_WINDOW)
            w->window |= 1ull << (back - 1);
    }
}
