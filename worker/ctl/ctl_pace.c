/*
 * ctl_pace.c - the pace of a move's copy (--max-mb-s): a sliding second
 * of the pages received, kept as a small ring of (time, bytes), and the
 * wait before the next page that keeps that second's bytes, with the
 * pages still in flight, under the limit. A sliding window rather than a
 * token bucket so that "at most N MB in any second" is what is measured
 * and printed (ctl_mover.c). ctl_pace.h is the interface.
 */
#include "ctl_pace.h"

#include <math.h> /* isfinite, a macro */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "now.h"

void zp_ctl_pace_init(zp_ctl_pace *p, double mb_s)
{
    memset(p, 0, sizeof(*p));
    p->limit = mb_s * 1e6;
}

/* Drop the pages that left the sliding second ending at now. */
static void expire(zp_ctl_pace *p, double now)
{
    while (p->n > 0 && p->t[p->head] + 1.0 <= now) {
        p->window -= p->b[p->head];
        p->head = (p->head + 1) % ZP_PACE_LOG;
        p->n--;
    }
}

void zp_ctl_pace_note(zp_ctl_pace *p, double now, uint64_t bytes)
{
    expire(p, now);
    if (bytes == 0) /* an empty page (a round's end): nothing to pace, no estimate */
        return;
    if (p->n == ZP_PACE_LOG) { /* full: counted with the newest */
        int i = (p->head + p->n - 1) % ZP_PACE_LOG;
        p->b[i] += bytes;
        p->t[i] = now;
    } else {
        int i = (p->head + p->n++) % ZP_PACE_LOG;
        p->t[i] = now;
        p->b[i] = bytes;
    }
    p->window += bytes;
    p->last = bytes;
    if (p->window > p->peak)
        p->peak = p->window;
}

void zp_ctl_pace_note_rows(zp_ctl_pace *p, double now, uint64_t bytes, uint64_t rows,
                           uint64_t page_rows)
{
    zp_ctl_pace_note(p, now, bytes);
    if (bytes > 0 && rows > 0 && rows < page_rows)
        p->last = (uint64_t)((double)bytes / (double)rows * (double)page_rows);
}

double zp_ctl_pace_wait(zp_ctl_pace *p, double now, int inflight)
{
    if (p->limit <= 0)
        return 0;
    expire(p, now);
    if (p->last == 0 && inflight > 0)
        return 1.0; /* no page's size known yet: one at a time until one is noted */
    double need = (double)p->window + (double)p->last * (inflight + 1);
    if (need <= p->limit)
        return 0;
    if (p->n == 0) /* pages in flight to read first; else one bigger than the limit goes alone */
        return inflight > 0 ? 1.0 : 0;
    /* the oldest pages leave first: wait until enough of them have */
    int i = p->head;
    for (int k = 0; k < p->n; k++, i = (i + 1) % ZP_PACE_LOG) {
        need -= (double)p->b[i];
        if (need <= p->limit || k == p->n - 1) {
            double w = p->t[i] + 1.0 - now;
            return w > 1e-6 ? w : 1e-6; /* never 0 by rounding */
        }
    }
    return 0; /* not reached: the loop ends at the newest page */
}

uint64_t zp_ctl_pace_bytes(zp_ctl_pace *p, double now)
{
    expire(p, now);
    return p->window;
}

int zp_ctl_pace_ask(zp_ctl_pace *p, int inflight)
{
    double w;
    while ((w = zp_ctl_pace_wait(p, zp_now_s(), inflight)) > 0) {
        if (inflight > 0) /* its page tells the size and may leave room */
            return 0;
        struct timespec ts = {.tv_sec = (time_t)w, .tv_nsec = (long)((w - (time_t)w) * 1e9)};
        nanosleep(&ts, NULL); /* then asked again: the clock may say a hair less */
        p->slept += w;
    }
    return 1;
}

int zp_ctl_pace_parse(const char *text, double *mb_s)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !isfinite(v) || v < 0 || v > 1e6)
        return -1;
    *mb_s = v;
    return 0;
}
