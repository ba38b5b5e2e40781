/*
 * ctl_resolve.c - zepsctl shards resolve: an operator ends a move whose
 * source shard A is in doubt (docs/elastic.md, "What each failure does").
 * Without coordination, a source whose cut-over bound passed after its
 * last rows were sent asks the target B whether it committed; while B
 * does not answer (dead, unreachable), A keeps the slots' requests parked.
 * `--outcome abort` sends A the MOVE ABORT (A serves the slots again at
 * its epoch: pushes B applied after its commit, if it took one, stay on
 * B only); `--outcome commit --slots SET` sends A the MOVE COMMIT with the
 * map the move commits (A's map with the slots of SET it owns on B, as
 * `shards move` made it), then SLOTS to the other shards. A shard in no
 * move takes a COMMIT's newer map too, so commit also repairs a source
 * that aborted (docs/protocol.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl.h"
#include "ctl_mover.h"
#include "exitcode.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps_errors.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl shards resolve --config FILE --from A --to B --outcome abort\n"
               "       zepsctl shards resolve --config FILE --from A --to B --outcome commit "
               "--slots SET\n"
               "                              [--timeout-ms MS]\n"
               "\n"
               "End a move from shard A to shard B whose source is in doubt (zepsctl status:\n"
               "MOVE IN DOUBT): B did not answer whether it committed, so A keeps the\n"
               "slots' requests parked. abort: A serves them again at its map's epoch.\n"
               "commit: A takes the move's map (its own with the slots of SET it owns given\n"
               "to B; SET as given to shards move) and drops their rows, then every other\n"
               "shard takes the map (docs/elastic.md, \"What each failure does\").\n"
               "\n"
               "Exit status: 0 done; 1 shard A did not answer or refused; 2 bad usage.\n");
}

/* The options into o and *outcome; 0, 1 (help) or -1 (said). */
static int parse(zp_mv_opts *o, const char **outcome, int argc, char **argv)
{
    zp_ctl_mover_opts_default(o);
    o->timeout_ms = 2000;
    *outcome = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        long long x;
        int got = zp_ctl_mover_opts_pair(argc, argv, &i, &a, &v, &x, "resolve");
        if (got != 0)
            return got;
        if (strcmp(a, "--config") == 0)
            o->conf = v;
        else if (strcmp(a, "--slots") == 0)
            o->slots = v;
        else if (strcmp(a, "--outcome") == 0)
            *outcome = v;
        else if (strcmp(a, "--from") == 0 && x >= 0 && x < ZP_MAX_SHARDS)
            o->from = (int)x;
        else if (strcmp(a, "--to") == 0 && x >= 0 && x < ZP_MAX_SHARDS)
            o->to = (int)x;
        else if (strcmp(a, "--timeout-ms") == 0 && x >= 1 && x <= 3600000)
            o->timeout_ms = (int)x;
        else {
            fprintf(stderr,
                    "zepsctl shards resolve: bad option '%s %s' (unknown, or out "
                    "of its range: see --help)\n",
                    a, v);
            return -1;
        }
    }
    bool commit = *outcome && strcmp(*outcome, "commit") == 0;
    bool abort = *outcome && strcmp(*outcome, "abort") == 0;
    if (!o->conf || o->from < 0 || o->to < 0 || o->from == o->to || !(commit || abort) ||
        commit != (o->slots != NULL)) {
        fprintf(stderr, "zepsctl shards resolve: --config, two different shards --from and --to, "
                        "and --outcome abort, or --outcome commit with --slots, are required\n");
        return -1;
    }
    return 0;
}

/* What shard a says of a move in doubt ("" if none; "?" unanswered). */
static void doubt(zp_mover *m, int a, char *out, size_t len)
{
    Zeps__Header h, *rep = NULL;
    zeps__header__init(&h);
    h.op = ZEPS__OP__STATS;
    snprintf(out, len, "?");
    if (zp_ctl_mover_rpc(m, a, &h, NULL, 0, &rep, NULL) != 0)
        return;
    snprintf(out, len, "%s", rep->stats && rep->stats->move_doubt ? rep->stats->move_doubt : "");
    zeps__header__free_unpacked(rep, NULL);
}

/* MOVE `st` (ABORT or COMMIT with the map `wire`) to shard a, peer b. */
static int step(zp_mover *m, int a, int b, uint32_t st, const void *wire, size_t len)
{
    Zeps__Header h, *rep = NULL;
    zeps__header__init(&h);
    h.op = ZEPS__OP__MOVE;
    h.move_step = st;
    h.move_peer = (uint32_t)b;
    int rc = zp_ctl_mover_rpc(m, a, &h, wire, len, &rep, NULL);
    if (rc == 0)
        zeps__header__free_unpacked(rep, NULL);
    return rc;
}

/* --outcome commit: the move's map (A's with the slots of SET it owns on
 * B) to A as COMMIT, then to every other shard as SLOTS. */
static int commit(zp_mover *m, const zp_mv_opts *o)
{
    zp_slotmap *cur = NULL, *next = NULL;
    int rc = zp_ctl_mover_map(m, o->from, &cur);
    if (rc != 0) {
        fprintf(stderr, "zepsctl shards resolve: shard %d: %s\n", o->from, zp_ctl_mover_err(m));
        return ZP_EXIT_FAILED;
    }
    uint32_t n = zp_slotmap_slots(cur), count = 0;
    uint8_t *which = zp_alloc(n);
    char err[256];
    if (zp_slotmap_parse_set(o->slots, n, which, err, sizeof(err)) < 0) {
        fprintf(stderr, "zepsctl shards resolve: --slots: %s\n", err);
        rc = ZP_EXIT_SETUP;
    }
    for (uint32_t k = 0; rc == 0 && k < n; k++)
        count += which[k] = which[k] && zp_slotmap_slot_owner(cur, k) == o->from;
    if (rc == 0 && (count == 0 || zp_slotmap_moved(cur, which, o->to, &next) != 0)) {
        fprintf(stderr, "zepsctl shards resolve: no slot of '%s' is on shard %d\n", o->slots,
                o->from);
        rc = ZP_EXIT_SETUP;
    }
    free(which);
    zp_slotmap_destroy(&cur);
    if (rc != 0)
        return rc;
    size_t len = zp_slotmap_wire_size(next);
    void *wire = zp_alloc(len);
    zp_slotmap_encode(next, wire);
    rc = step(m, o->from, o->to, ZP_MOVE_COMMIT, wire, len);
    if (rc != 0)
        fprintf(stderr, "zepsctl shards resolve: shard %d refused the COMMIT: %s\n", o->from,
                zp_ctl_mover_err(m));
    for (int k = 0; rc == 0 && k < zp_ctl_mover_shards(m); k++)
        if (k != o->from && !zp_ctl_mover_retired(m, k) && zp_ctl_mover_slots(m, k, next) != 0)
            fprintf(stderr, "zepsctl shards resolve: shard %d did not take the map: %s\n", k,
                    zp_ctl_mover_err(m));
    if (rc == 0)
        printf("committed: shard %d took the map of epoch %" PRIu64 " (%u slots on shard %d)\n",
               o->from, zp_slotmap_epoch(next), count, o->to);
    free(wire);
    zp_slotmap_destroy(&next);
    return rc == 0 ? ZP_EXIT_OK : ZP_EXIT_FAILED;
}

int zp_ctl_resolve(int argc, char **argv)
{
    zp_mv_opts o;
    const char *outcome;
    int rc = parse(&o, &outcome, argc, argv);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? ZP_EXIT_OK : ZP_EXIT_SETUP;
    }
    zp_mover *m = NULL;
    char err[1024];
    if (zp_ctl_mover_new(&m, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl shards resolve: %s\n", err);
        return ZP_EXIT_SETUP;
    }
    if (o.from >= zp_ctl_mover_shards(m) || o.to >= zp_ctl_mover_shards(m)) {
        fprintf(stderr, "zepsctl shards resolve: no shard %d in the cluster's %d\n",
                o.from > o.to ? o.from : o.to, zp_ctl_mover_shards(m));
        zp_ctl_mover_destroy(&m);
        return ZP_EXIT_SETUP;
    }
    char said[512];
    doubt(m, o.from, said, sizeof(said));
    printf("shard %d: %s\n", o.from,
           said[0] == '?' ? "did not answer STATS"
           : said[0]      ? said
                          : "no move in doubt");
    if (strcmp(outcome, "commit") == 0) {
        rc = commit(m, &o);
    } else if (step(m, o.from, o.to, ZP_MOVE_ABORT, NULL, 0) != 0) {
        fprintf(stderr, "zepsctl shards resolve: shard %d: %s\n", o.from, zp_ctl_mover_err(m));
        rc = ZP_EXIT_FAILED;
    } else if (!said[0]) {
        printf("nothing to resolve: shard %d took part in no move in doubt\n", o.from);
    } else {
        printf("aborted: shard %d serves the slots of its move to shard %d again\n", o.from, o.to);
    }
    zp_ctl_mover_destroy(&m);
    return rc;
}
