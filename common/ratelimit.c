/*
 * ratelimit.c - token-bucket limiting of per-request log lines; see
 * ratelimit.h. Refill is computed from the elapsed time at each call, so
 * there is no timer and an idle limiter costs nothing.
 */
#include "ratelimit.h"

#include <inttypes.h>
#include <stdio.h>

void zp_ratelimit_init(zp_ratelimit *rl, const char *what, int burst, double interval_s)
{
    *rl = (zp_ratelimit){.what = what,
                         .burst = burst < 1 ? 1 : burst,
                         .interval_s = interval_s > 0 ? interval_s : 1.0};
    rl->tokens = rl->burst;
}

bool zp_ratelimit_due(zp_ratelimit *rl, double now, char *note, size_t cap)
{
    if (rl->last_s > 0 && now > rl->last_s) {
        rl->tokens += (now - rl->last_s) / rl->interval_s;
        if (rl->tokens > rl->burst)
            rl->tokens = rl->burst;
    }
    rl->last_s = now;
    if (rl->tokens < 1.0) {
        rl->pending++;
        rl->suppressed++;
        return false;
    }
    rl->tokens -= 1.0;
    if (cap)
        note[0] = '\0';
    if (rl->pending && cap)
        snprintf(note, cap, " (%" PRIu64 " more %s since the last message)", rl->pending, rl->what);
    rl->pending = 0;
    return true;
}
