/*
 * waitfor.c - what a held request waits for: under a policy that collects
 * rounds, the ranks whose push the open round lacks; otherwise the slowest
 * live ranks (the clock bound a ssp or bsp-sparse pull waits on); in the
 * barrier, the ranks not in it; said as a list of ranks with why ("2 (lost
 * 12 s ago), 5 (never joined)"). The shard's wait checks log it
 * (waits.c), and a retried parked pull is answered with it (the worker
 * logs it). Reads the workers and tables; changes nothing.
 */
#include <stdio.h>
#include <string.h>

#include "now.h"
#include "server.h"
#include "waitfor.h"

/* Counted by the rounds, barrier and clock bounds: under continue a lost or
 * departed worker is not. */
static bool counted(const zp_server *s, const zp_worker *w)
{
    return !(s->cfg.lost_continue && (w->lost || w->left));
}

int zp_waitfor_pull(const zp_server *s, const zp_table *t, const zp_parked *p, unsigned char *mark)
{
    int n = 0;
    bool round = s->cons->holds_frames && t->kind->rounds && t->round.nworkers > 0;
    for (int i = 0; i < s->nworkers; i++) {
        const zp_worker *w = &s->workers.w[i];
        bool waits;
        if (round)
            waits = counted(s, w) && !zp_round_holds(&t->round, (uint32_t)i);
        else
            waits = !w->left && counted(s, w) && w->clock == s->workers.min_clock &&
                    w->clock < p->clock;
        mark[i] = waits;
        n += waits;
    }
    return n;
}

int zp_waitfor_barrier(const zp_server *s, unsigned char *mark)
{
    int n = 0;
    for (int i = 0; i < s->nworkers; i++) {
        const zp_worker *w = &s->workers.w[i];
        mark[i] = counted(s, w) && w->barrier_gen != s->barrier_gen;
        n += mark[i];
    }
    return n;
}

void zp_waitfor_list(const zp_server *s, const unsigned char *mark, double now, char *buf,
                     size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->nworkers && at + 40 < len; i++) {
        if (!mark[i])
            continue;
        const zp_worker *w = &s->workers.w[i];
        at += (size_t)snprintf(buf + at, len - at, "%s%d", at ? ", " : "", i);
        if (!w->joined)
            at += (size_t)snprintf(buf + at, len - at, " (never joined)");
        else if (w->left || w->lost)
            at += (size_t)snprintf(buf + at, len - at, " (%s %.0f s ago)",
                                   w->left ? "left" : "lost", now - w->last_seen_s);
    }
    if (at + 40 >= len)
        snprintf(buf + len - 5, 5, "...");
}

void zp_waitfor_reply_parked(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req,
                             const zp_table *t, const zp_parked *p)
{
    unsigned char mark[ZP_MAX_WORKERS];
    char ranks[ZP_WAITFOR_LISTLEN], text[ZP_WAITFOR_LISTLEN + 128];
    double now = zp_now_s();
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.flags = ZP_FLAG_PARKED;
    if (zp_waitfor_pull(s, t, p, mark) > 0) {
        zp_waitfor_list(s, mark, now, ranks, sizeof(ranks));
        snprintf(text, sizeof(text),
                 "PULL of table '%s' at clock %lld on shard %d waits for worker(s) %s", t->name,
                 (long long)p->clock, s->shard, ranks);
        rep.error_text = text;
    }
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}
