/*
 * ctl_shards.c - zepsctl shards: `move` (a slot set from one running shard
 * to another while workers train, docs/elastic.md "Live migration") and
 * `rebalance` (ctl_rebalance.c). The move itself is ctl_mover.c's; this
 * file reads the command line and reports.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "ctl.h"
#include "ctl_interrupt.h"
#include "ctl_mover.h"
#include "exitcode.h"
#include "zeps.h"

typedef zp_mv_opts mv_opts;

static void usage(FILE *f)
{
    fprintf(
        f, "usage: zepsctl shards move --config FILE --from A --to B --slots LO-HI[,LO-HI|SLOT..]\n"
           "       zepsctl shards move --config FILE --from A --to B --dense TABLE:LO-HI\n"
           "                           [--page ROWS] [--threshold ROWS] [--max-rounds N]\n"
           "                           [--cutover-ms MS] [--lease-ms MS] [--timeout-ms MS]\n"
           "                           [--max-mb-s N]\n"
           "\n"
           "Move the slots of shard A among those named (LO-HI ranges and single slots of\n"
           "the slot map, docs/elastic.md) to shard B while workers train: the rows of\n"
           "every sparse table in them are copied with their optimizer state, versions and\n"
           "touch clocks while A serves; then rounds of the rows changed meanwhile; then a\n"
           "short cut-over (A parks the requests of those slots, at most --cutover-ms) and\n"
           "the commit (the slot map one epoch up, on every shard). A failure before the\n"
           "commit aborts the move and changes nothing. Any mode (bsp: not with replicas),\n"
           "sparse tables, no cold tier; with replicas, between the primaries\n"
           "(docs/elastic.md).\n"
           "\n"
           "With --dense, move elements [LO, HI) of dense table TABLE, all on shard A,\n"
           "to shard B: every shard first takes a map that cuts the table's pieces at LO\n"
           "and HI if needed; the pieces are then copied with their optimizer state and\n"
           "versions during the cut-over (A parks their pushes and puts) and committed\n"
           "the same way (docs/elastic.md, \"Dense tables by range\"). --page counts\n"
           "elements per page; --threshold and --max-rounds do not apply to it.\n"
           "\n"
           "  --page ROWS        rows per page copied (default 4096)\n"
           "  --threshold ROWS   begin the cut-over once at most this many rows are left\n"
           "                     to send (default 1024)\n"
           "  --max-rounds N     ... or after N rounds (default 8)\n"
           "  --cutover-ms MS    the cut-over's bound at the source (default 2000)\n"
           "  --lease-ms MS      the shards abort the move after MS without a step (default\n"
           "                     10000)\n"
           "  --timeout-ms MS    how long each request may wait for its reply (default 5000)\n"
           "  --max-mb-s N       pace the copy rounds: at most N MB of pages in any second\n"
           "                     (default 0: unlimited); the cut-over is never paced\n"
           "\n"
           "Exit status: 0 moved; 1 failed and aborted (nothing changed) or, said so, the\n"
           "source did not take the commit; 2 bad usage or a move the shards refused;\n"
           "130 (SIGINT) or 143 (SIGTERM): interrupted, the move aborted before its commit.\n");
}

static int parse(mv_opts *o, int argc, char **argv)
{
    zp_ctl_mover_opts_default(o);
    for (int i = 1; i < argc; i++) {
        const char *a, *v;
        long long x;
        int got = zp_ctl_mover_opts_pair(argc, argv, &i, &a, &v, &x, "move");
        if (got != 0)
            return got;
        int text = zp_ctl_mover_opts_text(o, a, v, "move");
        if (text != 0) {
            if (text < 0)
                return -1;
        } else if (strcmp(a, "--config") == 0)
            o->conf = v;
        else if (strcmp(a, "--slots") == 0)
            o->slots = v;
        else if (strcmp(a, "--dense") == 0)
            o->dense = v;
        else if (strcmp(a, "--from") == 0 && x >= 0 && x < ZP_MAX_SHARDS)
            o->from = (int)x;
        else if (strcmp(a, "--to") == 0 && x >= 0 && x < ZP_MAX_SHARDS)
            o->to = (int)x;
        else if (!zp_ctl_mover_opts_one(o, a, x)) {
            fprintf(stderr,
                    "zepsctl shards move: bad option '%s %s' (unknown, or out "
                    "of its range: see --help)\n",
                    a, v);
            return -1;
        }
    }
    if (!o->conf || !o->slots == !o->dense || o->from < 0 || o->to < 0) {
        fprintf(stderr, "zepsctl shards move: --config, --from, --to and one of --slots and "
                        "--dense are required\n");
        return -1;
    }
    return zp_ctl_mover_opts_check(o, "move");
}

static int shards_move(int argc, char **argv)
{
    mv_opts o;
    int rc = parse(&o, argc, argv);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? ZP_EXIT_OK : ZP_EXIT_SETUP;
    }
    zp_mover *m = NULL;
    char err[1024];
    if (zp_ctl_mover_new(&m, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl shards move: %s\n", err);
        return ZP_EXIT_SETUP;
    }
    int n = zp_ctl_mover_shards(m);
    if (o.from >= n || o.to >= n || o.from == o.to) {
        fprintf(stderr,
                "zepsctl shards move: --from %d --to %d: two different shards of the cluster's "
                "%d are needed\n",
                o.from, o.to, n);
        zp_ctl_mover_destroy(&m);
        return ZP_EXIT_SETUP;
    }
    rc = o.dense ? zp_ctl_dense_move(m, &o, o.dense)
                 : zp_ctl_mover_move(m, o.from, o.to, NULL, o.slots);
    zp_ctl_mover_destroy(&m);
    return rc;
}

/* The subcommand `cmd` (NULL if there is none such). */
static int (*subcommand(const char *cmd))(int, char **)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } cmds[] = {{"move", shards_move},
                {"rebalance", zp_ctl_rebalance},
                {"add", zp_ctl_elastic_add},
                {"remove", zp_ctl_elastic_remove},
                {"retire", zp_ctl_elastic_retire},
                {"resolve", zp_ctl_resolve}};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (strcmp(cmd, cmds[i].name) == 0)
            return cmds[i].run;
    return NULL;
}

int zp_ctl_shards(int argc, char **argv)
{
    int (*run)(int, char **) = argc >= 2 ? subcommand(argv[1]) : NULL;
    if (run) { /* a signal taken (ctl_interrupt.h) ends it as interrupted, whatever failed */
        int rc = run(argc - 1, argv + 1);
        return zp_ctl_interrupt_taken() ? zp_ctl_interrupt_status() : rc;
    }
    FILE *f = argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) ? stdout
                                                                                          : stderr;
    fprintf(f,
            "usage: zepsctl shards move --config FILE --from A --to B --slots LO-HI[,..]\n"
            "       zepsctl shards rebalance --config FILE [--tolerance PCT] [--max-moves N]\n"
            "       zepsctl shards add ENDPOINT --config FILE [--tolerance PCT]\n"
            "       zepsctl shards remove K --config FILE\n"
            "       zepsctl shards retire K --config FILE\n"
            "       zepsctl shards resolve --config FILE --from A --to B --outcome abort|commit\n"
            "'zepsctl shards CMD --help' describes each one's options.\n");
    return f == stdout ? ZP_EXIT_OK : ZP_EXIT_SETUP;
}
