/*
 * waits.c - no silent waits: what every held request waits for, said in the
 * log every few seconds, and ended with an error when it waits for a worker
 * that is gone for good.
 *
 * A request the shard holds (a parked pull of any table, a worker in the
 * barrier) waits for some ranks (waitfor.c says which). Every
 * ZP_WAITS_LOG_S the shard logs each wait with those ranks. Under on_lost_worker = wait, a rank declared lost (silent past the
 * lost-worker timeout) or gone with BYE is waited for lost_worker_wait_s
 * more (a replacement may rejoin with its rank meanwhile); then every
 * request waiting for it is answered ETIMEDOUT naming it, so the other
 * workers end with a clear error instead of waiting for ever
 * (docs/faults.md). Under continue such ranks are not waited for at all.
 * Only the timer calls in here; nothing here changes a table or a round.
 */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "waitfor.h"
#include "zeps_errors.h"

#define ZP_WAITS_LOG_S 5.0

/* How long rank i has been gone (lost or said BYE) beyond what it is
 * allowed under on_lost_worker = wait; <= 0 while it may still come back. */
static double overdue(const zp_server *s, const zp_worker *w, double now)
{
    if (!w->joined || s->cfg.lost_continue || (!w->lost && !w->left))
        return 0;
    if (w->done) /* it ran all its steps: no wait brings it back */
        return 1;
    double allowed = zp_clock_lost_wait(s) + (w->left ? 0 : zp_clock_lost_timeout(s));
    return now - w->last_seen_s - allowed;
}

/* Why rank is given up, for the error text. */
static void gone_why(const zp_server *s, int rank, char *buf, size_t len)
{
    if (s->workers.w[rank].done)
        snprintf(buf, len,
                 "worker %d finished all its steps at clock %lld (BYE) and will never join: "
                 "every worker must run the same number of steps (docs/python.md)",
                 rank, (long long)s->workers.w[rank].clock);
    else if (s->workers.w[rank].left)
        snprintf(buf, len,
                 "worker %d said BYE and on_lost_worker = wait gives up on it after "
                 "lost_worker_wait_s %.0f s",
                 rank, zp_clock_lost_wait(s));
    else
        snprintf(buf, len,
                 "worker %d is gone: on_lost_worker = wait gives up on it after "
                 "lost_worker_timeout_s %.0f + lost_worker_wait_s %.0f s of silence",
                 rank, zp_clock_lost_timeout(s), zp_clock_lost_wait(s));
}

/* The error a wait for rank ends with: ECLOCK when it ran all its steps
 * (the job's ranks ran unequal step counts), else ETIMEDOUT. */
static int gone_code(const zp_server *s, int rank)
{
    return s->workers.w[rank].done ? ZEPS_ECLOCK : ZEPS_ETIMEDOUT;
}

/* The first marked rank overdue, or -1. */
static int first_overdue(const zp_server *s, const unsigned char *mark, double now)
{
    for (int i = 0; i < s->nworkers; i++)
        if (mark[i] && overdue(s, &s->workers.w[i], now) > 0)
            return i;
    return -1;
}

static void fail_pull(zp_server *s, zp_table *t, zp_parked *p, int rank, const char *ranks)
{
    char why[ZP_WAITFOR_LISTLEN];
    gone_why(s, rank, why, sizeof(why));
    zp_reply_error_to(s, &p->identity, ZEPS__OP__PULL, p->req_id, gone_code(s, rank),
                      "PULL of table '%s' at clock %lld on shard %d waited %.1f s for worker(s) "
                      "%s; %s",
                      t->name, (long long)p->clock, s->shard, zp_now_s() - p->since_s, ranks, why);
    s->waits_failed++;
}

/* Log or fail every parked pull of t. */
static void check_table(zp_server *s, zp_table *t, bool log, double now, unsigned char *mark)
{
    char ranks[ZP_WAITFOR_LISTLEN];
    zp_parked_queue keep;
    zp_parked_init(&keep);
    zp_parked *p;
    size_t logged = 0;
    while ((p = zp_parked_pop(&t->parked))) {
        zp_waitfor_pull(s, t, p, mark);
        int gone = first_overdue(s, mark, now);
        if (gone >= 0 || (log && logged < 3)) /* a few lines per table, not one per pull */
            zp_waitfor_list(s, mark, now, ranks, sizeof(ranks));
        if (gone >= 0) {
            fail_pull(s, t, p, gone, ranks);
            zp_parked_free(p);
            continue;
        }
        if (log && now - p->since_s >= 1.0 && logged++ < 3) /* not every short wait */
            zp_info("table '%s': PULL of worker %u at clock %lld waiting %.0f s for worker(s) %s",
                    t->name, p->rank, (long long)p->clock, now - p->since_s, ranks);
        zp_parked_push(&keep, p); /* same order: the queue is FIFO */
    }
    t->parked = keep;
    if (!keep.head)
        t->parked.tail = &t->parked.head;
}

/* Log or fail the workers waiting in the barrier (shard 0). */
static void check_barrier(zp_server *s, bool log, double now, unsigned char *mark)
{
    int waiting = 0;
    for (int i = 0; i < s->nworkers; i++)
        waiting += s->workers.w[i].barrier_gen == s->barrier_gen;
    if (!waiting)
        return;
    char ranks[ZP_WAITFOR_LISTLEN], why[ZP_WAITFOR_LISTLEN];
    zp_waitfor_barrier(s, mark);
    zp_waitfor_list(s, mark, now, ranks, sizeof(ranks));
    int gone = first_overdue(s, mark, now);
    if (gone >= 0)
        gone_why(s, gone, why, sizeof(why));
    if (log && gone < 0)
        zp_info("barrier: %d worker(s) waiting for worker(s) %s", waiting, ranks);
    for (int i = 0; gone >= 0 && i < s->nworkers; i++) {
        zp_worker *x = &s->workers.w[i];
        if (x->barrier_gen != s->barrier_gen)
            continue;
        zp_reply_error_to(s, &x->barrier_identity, ZEPS__OP__BARRIER, x->barrier_req,
                          gone_code(s, gone), "BARRIER on shard %d waited for worker(s) %s; %s",
                          s->shard, ranks, why);
        zmq_msg_close(&x->barrier_identity);
        x->barrier_gen = 0;
        s->waits_failed++;
    }
}

void zp_waits_check(zp_server *s)
{
    if (s->stopping)
        return;
    double now = zp_now_s();
    bool log = now - s->waits_logged_s >= ZP_WAITS_LOG_S;
    unsigned char mark[ZP_MAX_WORKERS];
    for (uint32_t i = 0; i < s->ntables; i++)
        if (s->tables[i]->parked.n)
            check_table(s, s->tables[i], log, now, mark);
    check_barrier(s, log, now, mark);
    if (log)
        s->waits_logged_s = now;
}
