/*
 * delay.c - the compute delay a worker injects per step, to simulate slow
 * or noisy workers in experiments on stale updates. It is a pure function
 * of (seed, rank, step), so reruns see the same delays (train.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "log.h"
#include "rng.h"
#include "train.h"

/* zp_rng stream of the injected delays (ASCII "delay"), apart from the
 * models' streams. */
#define STREAM_DELAY 0x64656c6179ull

static int is_slow(const zp_config *cfg, int rank)
{
    for (int i = 0; i < cfg->num_slow_ranks; i++)
        if (cfg->slow_ranks[i] == rank)
            return 1;
    return 0;
}

/* See train.h. One generator per step, seeded from (seed, rank, step),
 * costs a few mixes and keeps step c's delay independent of steps 0..c-1. */
double zp_delay_ms(const zp_config *cfg, int rank, int64_t step)
{
    double ms = cfg->delay_ms;
    zp_rng r;
    zp_rng_seed(&r, cfg->seed ^ STREAM_DELAY, (uint64_t)rank, (uint64_t)step);
    switch (cfg->delay_dist) {
    case ZP_DELAY_FIXED:
        break;
    case ZP_DELAY_UNIFORM:
        ms += cfg->delay_jitter_ms * zp_rng_uniform(&r);
        break;
    case ZP_DELAY_LOGNORMAL:
        ms *= exp(cfg->delay_sigma * zp_rng_normal(&r));
        break;
    }
    if (is_slow(cfg, rank))
        ms *= cfg->slow_factor;
    return ms;
}

void zp_delay_log(const zp_config *cfg, int rank)
{
    char what[128] = "";
    if (cfg->delay_dist == ZP_DELAY_UNIFORM)
        snprintf(what, sizeof(what), " + U[0, %g) ms", cfg->delay_jitter_ms);
    else if (cfg->delay_dist == ZP_DELAY_LOGNORMAL)
        snprintf(what, sizeof(what), " (median), log-stddev %g", cfg->delay_sigma);
    double factor = is_slow(cfg, rank) ? cfg->slow_factor : 1.0;
    if (cfg->delay_ms <= 0 && (cfg->delay_dist != ZP_DELAY_UNIFORM || cfg->delay_jitter_ms <= 0))
        zp_info("injected delay: none");
    else if (factor != 1.0)
        zp_info("injected delay: %s, %g ms%s, times %g (slow rank)",
                zp_config_keys_delay_dist_name(cfg->delay_dist), cfg->delay_ms, what, factor);
    else
        zp_info("injected delay: %s, %g ms%s", zp_config_keys_delay_dist_name(cfg->delay_dist),
                cfg->delay_ms, what);
}

void zp_delay_inject(const zp_config *cfg, int rank, int64_t step)
{
    double ms = zp_delay_ms(cfg, rank, step);
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000.0), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
