/*
 * ratelimit.h - the one way zeps limits a log line that a peer can cause
 * once per request (a refused request, a refused CURVE key, a HELLO, a BYE):
 * a token bucket per kind of line. Up to `burst` lines pass at once, then
 * one per `interval_s`; a line that is not due is counted instead, and the
 * next line that is due says how many were left out. A flood of hostile
 * requests thus costs a few lines a second, not megabytes, and nothing is
 * lost from the counts (STATS reports what was left out).
 *
 * The caller owns the struct (embedded, no allocation) and calls it from
 * one thread: a shard's loop.
 */
#ifndef ZP_RATELIMIT_H
#define ZP_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zp_ratelimit {
    const char *what;  /* "refused" in " (N more refused since the last message)" */
    double burst;      /* lines that may pass at once */
    double interval_s; /* then one line per interval */
    double tokens;
    double last_s;       /* when tokens were last refilled; 0 = never */
    uint64_t pending;    /* left out since the last line that passed */
    uint64_t suppressed; /* left out, ever */
} zp_ratelimit;

/* A limiter of `burst` lines, then one per `interval_s`; `what` (a static
 * string) names the lines in the note. */
void zp_ratelimit_init(zp_ratelimit *rl, const char *what, int burst, double interval_s);

/* Whether a line may be logged at time `now` (seconds, zp_now_s). If so,
 * note[0..cap) receives " (N more <what> since the last message)" when
 * lines were left out since the last one, else ""; if not, the line is
 * counted as suppressed and note is left alone. */
bool zp_ratelimit_due(zp_ratelimit *rl, double now, char *note, size_t cap);

#endif
