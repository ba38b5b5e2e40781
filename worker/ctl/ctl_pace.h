/*
 * ctl_pace.h - the pace of a move's copy (ctl_pace.c): `zepsctl shards
 * move|add|remove|rebalance --max-mb-s N` keeps the bytes of the pages
 * the tool asks of the source under N MB in any sliding second, so that
 * a job's training keeps its speed while a move runs (docs/elastic.md,
 * "Pacing a move"). Pure arithmetic on the caller's clock: the caller
 * notes each page's bytes and asks how long to wait before the next ask.
 * One thread.
 */
#ifndef ZP_CTL_PACE_H
#define ZP_CTL_PACE_H

#include <stdint.h>

/* Pages noted within the last second, at most; past it a page is counted
 * with the newest (longer in the window: the pace errs slow). */
enum { ZP_PACE_LOG = 256 };

typedef struct zp_ctl_pace {
    double limit; /* bytes per second; 0: unlimited */
    double t[ZP_PACE_LOG];
    uint64_t b[ZP_PACE_LOG]; /* a ring of (time, bytes) of the last second's pages */
    int head, n;
    uint64_t window; /* the sum of b over the ring */
    uint64_t last;   /* the last page's bytes: the estimate of each one in flight */
    uint64_t peak;   /* the most bytes any sliding second held */
    double slept;    /* seconds the caller waited as told */
} zp_ctl_pace;

/* A pace of mb_s MB (1e6 bytes) per second, 0 for none. */
void zp_ctl_pace_init(zp_ctl_pace *p, double mb_s);

/* A page of `bytes` arrived at time now (seconds, any origin, never
 * going back). */
void zp_ctl_pace_note(zp_ctl_pace *p, double now, uint64_t bytes);

/* zp_ctl_pace_note of a page of `rows` rows, asked as pages of
 * `page_rows`: a shorter page (the tail of a round or a table) sets the
 * estimate of each page in flight to a full page of its rows, so that
 * the full pages that follow it do not pass the limit. */
void zp_ctl_pace_note_rows(zp_ctl_pace *p, double now, uint64_t bytes, uint64_t rows,
                           uint64_t page_rows);

/* How long (seconds, >= 0, at most 1) to wait at time now before asking
 * one more page while `inflight` pages are asked and not yet noted: 0
 * when the last second's bytes and those pages (each as the last one
 * noted) leave room under the limit, else until the oldest pages leave
 * the window enough. A page bigger than the limit goes once the window
 * is empty. 1 (read a page first) with pages in flight while no page's
 * size is known or when they alone would pass the limit with nothing in
 * the window to wait out. Always 0 when unlimited. */
double zp_ctl_pace_wait(zp_ctl_pace *p, double now, int inflight);

/* The bytes the sliding second ending at now holds. */
uint64_t zp_ctl_pace_bytes(zp_ctl_pace *p, double now);

/* Before asking one more page with `inflight` pages in flight: 1 to ask
 * now (having slept what zp_ctl_pace_wait said when none is in flight),
 * 0 to read a page first. On the real clock (zp_now_s). */
int zp_ctl_pace_ask(zp_ctl_pace *p, int inflight);

/* --max-mb-s's value: 0 with *mb_s (a finite number >= 0, at most 1e6),
 * -1 for anything else (text, negative, NaN, inf, empty). */
int zp_ctl_pace_parse(const char *text, double *mb_s);

#endif
