/*
 * workers.c - per-rank state of a shard, and what the shard derives from
 * it (quorum, clock bounds, lost workers); see workers.h. Nothing here
 * replies or touches a table: the op layer acts on what these return.
 */
#include "workers.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"

void zp_workers_init(zp_workers *ws, int n)
{
    ws->n = n;
    ws->w = zp_alloc_zeroed((size_t)n, sizeof(zp_worker));
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

bool zp_workers_hello(zp_worker *w, uint64_t incarnation)
{
    w->lost = false;
    w->evicted = false;
    if ((w->joined || w->rehello) && w->incarnation == incarnation) {
        if (w->rehello)
            w->hello_clock = w->clock;
        w->joined = true;
        w->rehello = false;
        w->left = w->done = false;
        return false;
    }
    w->rehello = false;
    if (w->barrier_gen) {
        zmq_msg_close(&w->barrier_identity);
        w->barrier_gen = 0;
    }
    w->joined = true;
    w->left = w->done = false;
    w->incarnation = incarnation;
    w->hello_clock = w->clock;
    w->max_seq = 0;
    w->window = 0;
    w->seq_hi = 0;
    w->jump_logged = false;
    w->fence = 0;
    return true;
}

bool zp_workers_held(const zp_worker *w, uint64_t incarnation, double lease, double now)
{
    return w->joined && w->incarnation != incarnation && !w->left && !w->lost && !w->rehello &&
           !w->evicted && now - w->last_seen_s < lease;
}

bool zp_workers_seen(const zp_worker *w, uint64_t seq)
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

void zp_workers_record(zp_worker *w, uint64_t seq)
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

bool zp_workers_seq_jump(const zp_worker *w, uint64_t seq)
{
    return seq > w->seq_hi && seq - w->seq_hi > ZP_SEQ_WINDOW;
}

void zp_workers_note_seq(zp_worker *w, uint64_t seq)
{
    if (seq > w->seq_hi)
        w->seq_hi = seq;
}

void zp_workers_fence(zp_worker *w, uint64_t seq)
{
    if (seq > w->fence) /* a late resend of an older HELLO lowers nothing */
        w->fence = seq;
    w->fence_logged = false;
}

bool zp_workers_fenced(const zp_worker *w, uint64_t seq)
{
    return seq < w->fence;
}

int zp_workers_live(const zp_workers *ws, bool lost_continue)
{
    int n = ws->n;
    for (int i = 0; lost_continue && i < ws->n; i++)
        if (ws->w[i].lost || ws->w[i].left)
            n--;
    return n;
}

int zp_workers_quorum(const zp_workers *ws, bool lost_continue, int backup)
{
    int q = zp_workers_live(ws, lost_continue) - backup;
    return q < 1 ? 1 : q;
}

void zp_workers_update_bounds(zp_workers *ws, bool lost_continue)
{
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < ws->n; i++) {
        const zp_worker *w = &ws->w[i];
        if (w->left || (w->lost && lost_continue))
            continue;
        if (w->clock < lo)
            lo = w->clock;
        if (w->clock > hi)
            hi = w->clock;
    }
    ws->min_clock = lo == INT64_MAX ? hi : lo;
    if (hi > ws->max_clock)
        ws->max_clock = hi;
}

int zp_workers_check_lost(zp_workers *ws, double timeout, bool lost_continue, double now)
{
    int newly = 0;
    for (int i = 0; i < ws->n; i++) {
        zp_worker *w = &ws->w[i];
        if (!w->joined || w->left || w->lost || now - w->last_seen_s < timeout)
            continue;
        w->lost = true;
        w->lost_count++;
        newly++;
        zp_warn("worker %d declared lost: silent for %.1f s (lost_worker_timeout_s = %g); "
                "on_lost_worker = %s: %s",
                i, now - w->last_seen_s, timeout, lost_continue ? "continue" : "wait",
                lost_continue ? "rounds close without it until it is back" : "rounds wait for it");
    }
    return newly;
}
