/*
 * ctl_rebalance.c - zepsctl shards rebalance: move slot sets among the
 * running shards until each holds its share of the sparse rows, within a
 * tolerance (docs/elastic.md, "Rebalancing").
 *
 * One move at a time, by the machinery of `zepsctl shards move`
 * (ctl_mover.h): read every shard's rows (STATS); if one is off the mean
 * by more than the tolerance, move from the shard with the most rows to
 * the one with the fewest as many of the first's slots as hold
 * min(its excess, the other's deficit) rows, counting the first's rows as
 * spread evenly over its slots (ids hash evenly over slots); read again.
 * A move's rows are counted again after it, so an estimate that was off
 * is corrected by the next move. A move that fails stops the command with
 * that move's exit status.
 */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "ctl.h"
#include "ctl_mover.h"
#include "exitcode.h"
#include "slotmap.h"
#include "zeps.h"

typedef struct rb_opts {
    zp_mv_opts mv;
    double tolerance; /* of the mean, 0.10 = +-10 % */
    int max_moves;
    const uint8_t *skip; /* [shards]: left out (shards add: the removed ones), or NULL */
} rb_opts;

static int rebalance(zp_mover *m, const rb_opts *o);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zepsctl shards rebalance --config FILE [--tolerance PCT] [--max-moves N]\n"
            "                                [--page ROWS] [--threshold ROWS] [--max-rounds N]\n"
            "                                [--cutover-ms MS] [--lease-ms MS] [--timeout-ms MS]\n"
            "                                [--max-mb-s N]\n"
            "\n"
            "Move slot sets among the running shards, one live move at a time (as\n"
            "'zepsctl shards move'), until every shard holds the mean of the sparse rows\n"
            "within +-PCT %% (default 10): each move takes from the shard with the most rows\n"
            "to the one with the fewest. The move options are those of 'shards move'.\n"
            "\n"
            "  --tolerance PCT    the allowed distance from the mean, in %% (1..100, default 10)\n"
            "  --max-moves N      give up after N moves (default 16)\n"
            "\n"
            "Exit status: 0 balanced; 1 a move failed and was aborted (the moves before it\n"
            "stand), or still not balanced after --max-moves; 2 bad usage or a move the\n"
            "shards refused.\n");
}

static int parse(rb_opts *o, int argc, char **argv)
{
    o->skip = NULL; /* every shard counts */
    int rc = zp_ctl_mover_opts_parse(&o->mv, &o->tolerance, &o->max_moves, NULL, argc, argv,
                                     "rebalance");
    if (rc != 0)
        return rc;
    if (!o->mv.conf) {
        fprintf(stderr, "zepsctl shards rebalance: --config is required\n");
        return -1;
    }
    return 0;
}

/* Every shard's rows into rows[] (a retired one is not asked: 0), the
 * total of those not skipped; -1 with the reason printed. */
static int64_t read_rows(zp_mover *m, uint64_t *rows, const uint8_t *skip)
{
    uint64_t total = 0;
    for (int k = 0; k < zp_ctl_mover_shards(m); k++) {
        rows[k] = 0;
        if (zp_ctl_mover_retired(m, k))
            continue;
        if (zp_ctl_rebalance_rows(m, k, &rows[k]) != 0) {
            fprintf(stderr, "zepsctl shards rebalance: %s\n", zp_ctl_mover_err(m));
            return -1;
        }
        total += skip && skip[k] ? 0 : rows[k];
    }
    return (int64_t)total;
}

/* "rows per shard: a b c (mean m, from -x % to +y %)"; the largest
 * distance from the mean as a fraction of it. */
static double report(const char *what, const uint64_t *rows, int n, double mean,
                     const uint8_t *skip)
{
    double lo = 0, hi = 0;
    printf("%s: rows per shard", what);
    for (int k = 0; k < n; k++) {
        if (skip && skip[k]) {
            printf(" -");
            continue;
        }
        double d = mean > 0 ? ((double)rows[k] - mean) / mean : 0;
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
        printf(" %" PRIu64, rows[k]);
    }
    printf(" (mean %.1f, from %+.1f %% to %+.1f %%)\n", mean, lo * 100, hi * 100);
    fflush(stdout);
    return -lo > hi ? -lo : hi;
}

/* The first slots of shard `from` under m holding about `want` of its
 * `rows` rows (at least one slot, at most all but one) into which[]; how
 * many. */
static uint32_t pick(const zp_slotmap *m, int from, uint64_t rows, double want, uint8_t *which)
{
    uint32_t owned = zp_slotmap_count(m, from);
    if (owned == 0)
        return 0;
    double per_slot = owned ? (double)rows / owned : 0;
    double n = per_slot > 0 ? floor(want / per_slot + 0.5) : 0;
    uint32_t take = n < 1 ? 1 : n > owned - 1 ? owned - 1 : (uint32_t)n, got = 0;
    for (uint32_t s = 0; s < zp_slotmap_slots(m); s++) {
        which[s] = got < take && zp_slotmap_slot_owner(m, s) == from;
        got += which[s];
    }
    return got;
}

/* One move from the fullest shard to the emptiest: its exit status. */
static int one_move(zp_mover *m, const uint64_t *rows, double mean, int nth, const uint8_t *skip)
{
    int n = zp_ctl_mover_shards(m), a = -1, b = -1;
    for (int k = 0; k < n; k++) {
        if (skip && skip[k])
            continue;
        a = a < 0 || rows[k] > rows[a] ? k : a;
        b = b < 0 || rows[k] < rows[b] ? k : b;
    }
    double want = fmin((double)rows[a] - mean, mean - (double)rows[b]);
    zp_slotmap *map = NULL;
    if (zp_ctl_mover_map(m, a, &map) != 0) {
        fprintf(stderr, "zepsctl shards rebalance: %s\n", zp_ctl_mover_err(m));
        return ZP_EXIT_FAILED;
    }
    uint8_t *which = zp_alloc(zp_slotmap_slots(map));
    uint32_t nslots = pick(map, a, rows[a], want, which);
    printf("move %d: %u of shard %d's %u slots (about %.0f rows) to shard %d\n", nth, nslots, a,
           zp_slotmap_count(map, a), want, b);
    fflush(stdout);
    int rc = nslots > 0 ? zp_ctl_mover_move(m, a, b, which, NULL) : ZP_EXIT_FAILED;
    free(which);
    zp_slotmap_destroy(&map);
    return rc;
}

int zp_ctl_rebalance_run(zp_mover *m, double tolerance, int max_moves, const uint8_t *skip)
{
    rb_opts o = {.tolerance = tolerance, .max_moves = max_moves, .skip = skip};
    return rebalance(m, &o);
}

/* o's shards left out, and the retired ones, into out[]. */
static void skipped(zp_mover *m, const rb_opts *o, uint8_t *out)
{
    for (int k = 0; k < zp_ctl_mover_shards(m); k++)
        out[k] = (o->skip && o->skip[k]) || zp_ctl_mover_retired(m, k);
}

static int rebalance(zp_mover *m, const rb_opts *given)
{
    uint8_t skip[ZP_MAX_SHARDS];
    skipped(m, given, skip);
    rb_opts all = *given, *o = &all;
    all.skip = skip;
    int n = zp_ctl_mover_shards(m), moves = 0, in = 0;
    for (int k = 0; k < n; k++)
        in += !skip[k];
    uint64_t rows[ZP_MAX_SHARDS], first[ZP_MAX_SHARDS];
    int64_t total = read_rows(m, rows, o->skip);
    if (total < 0)
        return ZP_EXIT_FAILED;
    memcpy(first, rows, sizeof(uint64_t) * (size_t)n);
    double mean = (double)total / in, off = report("before", rows, n, mean, o->skip);
    while (off > o->tolerance && total > 0 && moves < o->max_moves && in > 1) {
        int rc = one_move(m, rows, mean, ++moves, o->skip);
        if (rc != ZP_EXIT_OK)
            return rc;
        if ((total = read_rows(m, rows, o->skip)) < 0)
            return ZP_EXIT_FAILED;
        mean = (double)total / in;
        off = report("now", rows, n, mean, o->skip);
    }
    bool ok = off <= o->tolerance || total == 0 || in == 1;
    printf("rebalance: %d moves; rows per shard", moves);
    for (int k = 0; k < n; k++)
        printf(" %" PRIu64 "->%" PRIu64, first[k], rows[k]);
    printf("; farthest from the mean %.1f %% (tolerance %.0f %%): %s\n", off * 100,
           o->tolerance * 100, ok ? "balanced" : "not balanced");
    if (!ok)
        fprintf(stderr, "zepsctl shards rebalance: still %.1f %% off the mean after %d moves\n",
                off * 100, moves);
    return ok ? ZP_EXIT_OK : ZP_EXIT_FAILED;
}

int zp_ctl_rebalance(int argc, char **argv)
{
    rb_opts o;
    int rc = parse(&o, argc, argv);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? ZP_EXIT_OK : ZP_EXIT_SETUP;
    }
    zp_mover *m = NULL;
    char err[1024];
    if (zp_ctl_mover_new(&m, &o.mv, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl shards rebalance: %s\n", err);
        return ZP_EXIT_SETUP;
    }
    rc = rebalance(m, &o);
    zp_ctl_mover_destroy(&m);
    return rc;
}

int zp_ctl_rebalance_rows(zp_mover *m, int k, uint64_t *rows)
{
    Zeps__Header h, *rep;
    zeps__header__init(&h);
    h.op = ZEPS__OP__STATS;
    int rc = zp_ctl_mover_rpc(m, k, &h, NULL, 0, &rep, NULL);
    if (rc != 0)
        return rc;
    uint64_t n = 0;
    for (size_t i = 0; rep->stats && i < rep->stats->n_tables; i++)
        if (rep->stats->tables[i]->kind == 1 /* sparse */)
            n += rep->stats->tables[i]->rows;
    zeps__header__free_unpacked(rep, NULL);
    *rows = n;
    return 0;
}
