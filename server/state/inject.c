/*
 * inject.c - the staleness schedules of cluster.inject (inject.h), one
 * const zp_inject_ops each: fixed, uniform, geometric, replay, straggler.
 *
 * A draw turns one 64-bit value into a tau without a loop or a rejection,
 * so a tau costs the same whatever the schedule, and the value is a hash of
 * (seed, rank, version): nothing is kept between pulls.
 */
#include "inject.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "rng.h"
#include "zeps_errors.h"

/* floor(u * n / 2^64): u mapped onto [0, n) without the bias of u % n. */
static uint64_t scale_u(uint64_t u, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)u * n) >> 64);
}

static uint32_t fixed_draw(const zp_inject *in, uint32_t rank, uint64_t u)
{
    (void)rank;
    (void)u;
    return in->tau;
}

static uint32_t uniform_draw(const zp_inject *in, uint32_t rank, uint64_t u)
{
    (void)rank;
    return (uint32_t)scale_u(u, (uint64_t)in->max_tau + 1);
}

/* P(tau = k) = p (1-p)^k, conditioned on tau <= max_tau: the inverse of the
 * truncated distribution function at a uniform draw. */
static uint32_t geometric_draw(const zp_inject *in, uint32_t rank, uint64_t u)
{
    (void)rank;
    if (in->p >= 1.0)
        return 0;
    double q = log1p(-in->p);
    double f_max = -expm1(q * ((double)in->max_tau + 1.0)); /* P(tau <= max_tau) */
    double x = ((double)(u >> 11) + 0.5) * 0x1p-53 * f_max;
    double k = floor(log1p(-x) / q);
    return k < 0 ? 0 : k > in->max_tau ? in->max_tau : (uint32_t)k;
}

/* The smallest tau whose cumulative count exceeds a draw below the total. */
static uint32_t replay_draw(const zp_inject *in, uint32_t rank, uint64_t u)
{
    (void)rank;
    uint64_t r = scale_u(u, in->replay_cum[in->nreplay - 1]);
    uint32_t lo = 0, hi = in->nreplay - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (in->replay_cum[mid] > r)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

static uint32_t straggler_draw(const zp_inject *in, uint32_t rank, uint64_t u)
{
    (void)u;
    return rank == in->straggler ? in->tau : 0;
}

static uint32_t tau_largest(const zp_inject *in)
{
    return in->tau;
}

static uint32_t max_tau_largest(const zp_inject *in)
{
    return in->max_tau;
}

static uint32_t replay_largest(const zp_inject *in)
{
    return in->nreplay - 1;
}

/* clang-format off */
const zp_inject_ops zp_inject_fixed_ops = {
    .name = "fixed", .draw = fixed_draw, .largest = tau_largest};
const zp_inject_ops zp_inject_uniform_ops = {
    .name = "uniform", .draw = uniform_draw, .largest = max_tau_largest};
const zp_inject_ops zp_inject_geometric_ops = {
    .name = "geometric", .draw = geometric_draw, .largest = max_tau_largest};
const zp_inject_ops zp_inject_replay_ops = {
    .name = "replay", .draw = replay_draw, .largest = replay_largest};
const zp_inject_ops zp_inject_straggler_ops = {
    .name = "straggler", .draw = straggler_draw, .largest = tau_largest};
/* clang-format on */

static const zp_inject_ops *const schedules[] = {
    [ZP_INJECT_OFF] = NULL,
    [ZP_INJECT_FIXED] = &zp_inject_fixed_ops,
    [ZP_INJECT_UNIFORM] = &zp_inject_uniform_ops,
    [ZP_INJECT_GEOMETRIC] = &zp_inject_geometric_ops,
    [ZP_INJECT_REPLAY] = &zp_inject_replay_ops,
    [ZP_INJECT_STRAGGLER] = &zp_inject_straggler_ops,
};

/* One "tau count" line of a replay file into counts[] (grown as needed);
 * blank lines and '#' comments are skipped. */
static int replay_line(const char *line, uint64_t **counts, uint32_t *n, char *msg, size_t len)
{
    while (*line == ' ' || *line == '\t')
        line++;
    if (*line == '#' || *line == '\n' || *line == '\0')
        return 0;
    unsigned long long tau, count;
    char rest[2];
    if (sscanf(line, "%llu %llu %1s", &tau, &count, rest) != 2 || line[0] == '-') {
        snprintf(msg, len, "expected 'tau count' (two non-negative integers)");
        return -1;
    }
    if (tau > 1000000 || count > (1ull << 48)) {
        snprintf(msg, len, "tau %llu or count %llu too large (tau <= 1000000, count <= 2^48)", tau,
                 count);
        return -1;
    }
    if (tau >= *n) {
        uint32_t m = (uint32_t)tau + 1;
        *counts = zp_alloc_resize(*counts, m * sizeof(**counts));
        memset(*counts + *n, 0, (m - *n) * sizeof(**counts));
        *n = m;
    }
    (*counts)[tau] += count;
    return 0;
}

/* Read the replay histogram into in->replay_cum / nreplay. */
static int replay_load(zp_inject *in, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cluster.inject.replay_file '%s': %s", path,
                             strerror(errno));
    uint64_t *counts = NULL;
    uint32_t n = 0;
    char line[256], msg[160];
    unsigned lineno = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        lineno++;
        if (replay_line(line, &counts, &n, msg, sizeof(msg)) != 0)
            rc = zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s:%u: %s", path, lineno, msg);
    }
    fclose(f);
    for (uint32_t k = 1; rc == 0 && k < n; k++)
        counts[k] += counts[k - 1];
    if (rc == 0 && (n == 0 || counts[n - 1] == 0))
        rc = zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s: no 'tau count' line with a count > 0",
                           path);
    if (rc != 0) {
        free(counts);
        return rc;
    }
    in->replay_cum = counts;
    in->nreplay = n;
    return 0;
}

int zp_inject_init(zp_inject *in, const zp_config *cfg, char *err, size_t errlen)
{
    memset(in, 0, sizeof(*in));
    if ((unsigned)cfg->inject >= sizeof(schedules) / sizeof(schedules[0]))
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "unknown inject schedule %d",
                             (int)cfg->inject);
    in->ops = schedules[cfg->inject];
    if (!in->ops)
        return 0;
    in->tau = (uint32_t)cfg->inject_tau;
    in->max_tau = (uint32_t)cfg->inject_max_tau;
    in->straggler = (uint32_t)cfg->inject_straggler;
    in->p = cfg->inject_p;
    in->turns = cfg->inject_turns;
    in->seed = cfg->inject_seed;
    if (cfg->inject == ZP_INJECT_REPLAY) {
        int rc = replay_load(in, cfg->inject_replay, err, errlen);
        if (rc != 0) {
            in->ops = NULL;
            return rc;
        }
    }
    uint32_t need = in->ops->largest(in);
    in->window = cfg->inject_window ? (uint32_t)cfg->inject_window : need;
    if (in->window < need) {
        int rc = zp_errors_set(err, errlen, ZEPS_ECONFIG,
                               "%s: 'cluster.inject.window' = %u keeps fewer versions than "
                               "'%s' holds (tau up to %u)",
                               cfg->path, in->window, cfg->inject_replay, need);
        zp_inject_fini(in);
        return rc;
    }
    return 0;
}

void zp_inject_fini(zp_inject *in)
{
    free(in->replay_cum);
    memset(in, 0, sizeof(*in));
}

uint32_t zp_inject_tau(const zp_inject *in, uint32_t rank, uint64_t version)
{
    if (!in->ops)
        return 0;
    uint64_t u = zp_rng_mix64(zp_rng_mix64(in->seed ^ 0x5ca1ab1e0ddba11ull) ^
                              zp_rng_mix64(((uint64_t)rank << 40) ^ version));
    uint32_t tau = in->ops->draw(in, rank, u);
    return tau < in->window ? tau : in->window;
}
