/*
 * ctl_mover_opts.c - the options of the commands that move slots
 * (`zepsctl shards move`, `rebalance`, `add`, `remove`; docs/commands.md):
 * their defaults and their parsing into a zp_mv_opts, apart from the move
 * itself (ctl_mover.c), which only reads them. ctl_mover.h is the
 * interface.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_mover.h"
#include "ctl_pace.h"

/* A number option's value in [lo, hi]; -1 if it is not one. */
static long long number(const char *text, long long lo, long long hi)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    return *text && *end == '\0' && v >= lo && v <= hi ? v : -1;
}

void zp_ctl_mover_opts_default(zp_mv_opts *o)
{
    *o = (zp_mv_opts){.from = -1,
                      .to = -1,
                      .page = 4096,
                      .lease_ms = 10000,
                      .cutover_ms = 2000,
                      .timeout_ms = 5000,
                      .threshold = 1024,
                      .max_rounds = 8,
                      .clock_wait_s = 300,
                      .joined = 1};
}

int zp_ctl_mover_opts_one(zp_mv_opts *o, const char *a, long long x)
{
    if (strcmp(a, "--page") == 0 && x >= 1 && x <= (1 << 20))
        o->page = (uint64_t)x;
    else if (strcmp(a, "--threshold") == 0 && x >= 0)
        o->threshold = (uint64_t)x;
    else if (strcmp(a, "--max-rounds") == 0 && x >= 1)
        o->max_rounds = (uint64_t)x;
    else if (strcmp(a, "--cutover-ms") == 0 && x >= 1 && x <= 600000)
        o->cutover_ms = (uint32_t)x;
    else if (strcmp(a, "--lease-ms") == 0 && x >= 100 && x <= 3600000)
        o->lease_ms = (uint32_t)x;
    else if (strcmp(a, "--timeout-ms") == 0 && x >= 1 && x <= 3600000)
        o->timeout_ms = (int)x;
    else if (strcmp(a, "--clock-wait-s") == 0 && x >= 0 && x <= 86400)
        o->clock_wait_s = (int)x;
    else
        return 0;
    return 1;
}

int zp_ctl_mover_opts_text(zp_mv_opts *o, const char *a, const char *v, const char *cmd)
{
    if (strcmp(a, "--max-mb-s") != 0)
        return 0;
    if (zp_ctl_pace_parse(v, &o->max_mb_s) != 0) {
        fprintf(stderr,
                "zepsctl shards %s: --max-mb-s '%s': the copy's pace wants a number of MB/s, "
                "0 (unlimited, the default) to 1000000\n",
                cmd, v);
        return -1;
    }
    return 1;
}

int zp_ctl_mover_opts_check(const zp_mv_opts *o, const char *cmd)
{
    if (o->max_mb_s > 0 && o->lease_ms < ZP_MV_PACED_LEASE_MS) {
        fprintf(stderr,
                "zepsctl shards %s: --max-mb-s with --lease-ms %u: a paced copy may wait up to "
                "1 s between two steps, and the shards end a move that sent none within its "
                "lease; give --lease-ms %d or more\n",
                cmd, o->lease_ms, ZP_MV_PACED_LEASE_MS);
        return -1;
    }
    return 0;
}

int zp_ctl_mover_opts_pair(int argc, char **argv, int *i, const char **a, const char **v,
                           long long *x, const char *cmd)
{
    *a = argv[*i];
    *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    *x = *v ? number(*v, 0, 1ll << 40) : -1;
    if (strcmp(*a, "--help") == 0 || strcmp(*a, "-h") == 0)
        return 1;
    if (!*v) {
        fprintf(stderr, "zepsctl shards %s: option '%s' needs a value (or is unknown)\n", cmd, *a);
        return -1;
    }
    (*i)++;
    return 0;
}

long long zp_ctl_mover_opts_number(const char *text, long long lo, long long hi)
{
    return number(text, lo, hi);
}

int zp_ctl_mover_opts_parse(zp_mv_opts *o, double *tolerance, int *max_moves, const char **what,
                            int argc, char **argv, const char *cmd)
{
    zp_ctl_mover_opts_default(o);
    *tolerance = 0.10;
    *max_moves = 16;
    if (what)
        *what = NULL;
    for (int i = 1; i < argc; i++) {
        if (what && argv[i][0] != '-' && !*what) {
            *what = argv[i];
            continue;
        }
        const char *a, *v;
        long long x;
        int got = zp_ctl_mover_opts_pair(argc, argv, &i, &a, &v, &x, cmd);
        if (got != 0)
            return got;
        int text = zp_ctl_mover_opts_text(o, a, v, cmd);
        if (text != 0) {
            if (text < 0)
                return -1;
        } else if (strcmp(a, "--config") == 0)
            o->conf = v;
        else if (strcmp(a, "--tolerance") == 0 && x >= 1 && x <= 100)
            *tolerance = (double)x / 100.0;
        else if (strcmp(a, "--max-moves") == 0 && x >= 1 && x <= 1000)
            *max_moves = (int)x;
        else if (!zp_ctl_mover_opts_one(o, a, x)) {
            fprintf(stderr,
                    "zepsctl shards %s: bad option '%s %s' (unknown, or out "
                    "of its range: see --help)\n",
                    cmd, a, v);
            return -1;
        }
    }
    return zp_ctl_mover_opts_check(o, cmd);
}
