/*
 * ctl_elastic.c - zepsctl shards add and zepsctl shards remove: a shard
 * joins the running cluster, or gives all its slots away, while workers
 * train (docs/elastic.md, "Adding a shard", "Removing a shard").
 *
 * add ENDPOINT: the operator has started `zeps-server --config FILE
 * --shard N --join ENDPOINT` (N: the next index). The tool checks that
 * every shard holds the same map and that the new one answers as shard N
 * of this cluster, declares every sparse table there (the declarations
 * read from shard 0's STATS), sends every shard the map one epoch up that
 * names shard N at ENDPOINT and gives it no slot, then rebalances by live
 * moves (ctl_rebalance.c) until the rows are even. remove K: moves every
 * slot of shard K to the others by live moves, the fewest rows first,
 * until K owns none. Both are made of steps that each change nothing
 * when they fail (a move aborts whole); the steps done before a failure
 * stand, and the summary says where it stopped.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "ctl.h"
#include "ctl_mover.h"
#include "exitcode.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

typedef struct el_opts {
    zp_mv_opts mv;
    const char *what; /* add: the endpoint; remove: the shard */
    double tolerance;
    int max_moves;
} el_opts;

static void usage(FILE *f, const char *cmd)
{
    if (strcmp(cmd, "retire") == 0)
        fprintf(f, "usage: zepsctl shards retire K --config FILE [--timeout-ms MS] "
                   "[--clock-wait-s S]\n"
                   "\n"
                   "Retire shard K for good once 'zepsctl shards remove K' emptied it: every\n"
                   "shard takes the slot map one epoch up that names K retired, so that clients\n"
                   "no longer wait for it (HELLO) nor send it anything, and K can be stopped.\n"
                   "Refused, changing nothing, for shard 0 (it keeps the cluster's BARRIER), for\n"
                   "a shard that owns a slot or holds a row, for a shard of the cluster file when\n"
                   "a dense table is declared and with snapshot_dir. With replicas, each\n"
                   "shard's primary is told (not under bsp). K may already be stopped. A retired "
                   "shard never comes back (docs/elastic.md). Under bsp the workers send K\n"
                   "their CLOCKs until they learn the map: it then waits until each running\n"
                   "worker clocked twice, at most --clock-wait-s S seconds (300), and says when\n"
                   "K can be stopped.\n"
                   "\n"
                   "Exit status: 0 retired (or retired already; under bsp: and the workers\n"
                   "clocked twice); 1 a shard did not take the map (the shards before it did;\n"
                   "run it again), or under bsp a worker did not clock twice in time (K is\n"
                   "retired: do not stop it yet; run it again to wait again); 2 bad usage or\n"
                   "refused (nothing changed).\n");
    else if (strcmp(cmd, "add") == 0)
        fprintf(f, "usage: zepsctl shards add ENDPOINT --config FILE [--tolerance PCT] "
                   "[--max-moves N]\n"
                   "                          [move options of 'zepsctl shards move']\n"
                   "\n"
                   "Add the shard listening at ENDPOINT to the running cluster: start it first\n"
                   "with 'zeps-server --config FILE --shard N --join ENDPOINT' (N: the next\n"
                   "index, the number of shards so far). Shard 0's tables are declared there,\n"
                   "every shard takes the slot map that names it, and live moves give it slots\n"
                   "until the rows are even within +-PCT %% (default 10), then an even share of\n"
                   "each dense table (moves of dense ranges, 'zepsctl shards move --dense').\n"
                   "Any mode, one replica per shard (docs/elastic.md).\n"
                   "\n"
                   "Exit status: 0 added and balanced; 1 a step failed (the steps before it\n"
                   "stand, said so); 2 bad usage or refused (nothing changed).\n");
    else
        fprintf(f, "usage: zepsctl shards remove K --config FILE [move options of 'zepsctl shards "
                   "move']\n"
                   "\n"
                   "Move every slot of shard K to the other shards that own slots, by live moves\n"
                   "(the one with the fewest rows first), until K owns no slot and no row. A\n"
                   "shard that joined first moves its dense pieces to the shards holding fewest\n"
                   "elements; a shard of the cluster file holding a dense slice is refused (move\n"
                   "it away with 'zepsctl shards move --dense' first). Any mode; with replicas,\n"
                   "by moves between the primaries (not under bsp; docs/elastic.md).\n"
                   "\n"
                   "Exit status: 0 removed; 1 a move failed (the moves before it stand); 2 bad\n"
                   "usage or refused (nothing changed).\n");
}

static int parse(el_opts *o, int argc, char **argv, const char *cmd)
{
    int rc =
        zp_ctl_mover_opts_parse(&o->mv, &o->tolerance, &o->max_moves, &o->what, argc, argv, cmd);
    if (rc != 0)
        return rc;
    if (!o->mv.conf || !o->what) {
        fprintf(stderr, "zepsctl shards %s: %s and --config are required\n", cmd,
                strcmp(cmd, "add") == 0 ? "ENDPOINT" : "K");
        return -1;
    }
    return 0;
}

/* Every shard's map but a retired one's (and `but`'s, if >= 0: a shard
 * that may be stopped); all must hold the same epoch (the map itself:
 * shard 0's, into *out). ZP_EXIT_* with the reason printed. */
static int common_map(zp_mover *m, const char *cmd, int but, zp_slotmap **out)
{
    *out = NULL;
    for (int k = 0; k < zp_ctl_mover_shards(m); k++) {
        if (k == but || zp_ctl_mover_retired(m, k))
            continue;
        zp_slotmap *map = NULL;
        if (zp_ctl_mover_map(m, k, &map) != 0) {
            fprintf(stderr, "zepsctl shards %s: %s; nothing changed\n", cmd, zp_ctl_mover_err(m));
            zp_slotmap_destroy(out);
            return ZP_EXIT_FAILED;
        }
        if (*out && zp_slotmap_epoch(map) != zp_slotmap_epoch(*out)) {
            fprintf(stderr,
                    "zepsctl shards %s: shard 0 holds slot map epoch %" PRIu64
                    " and shard %d epoch %" PRIu64
                    " (a move that did not finish? docs/elastic.md): nothing changed\n",
                    cmd, zp_slotmap_epoch(*out), k, zp_slotmap_epoch(map));
            zp_slotmap_destroy(&map);
            zp_slotmap_destroy(out);
            return ZP_EXIT_SETUP;
        }
        if (*out)
            zp_slotmap_destroy(&map);
        else
            *out = map;
    }
    return ZP_EXIT_OK;
}

/* Shard k's STATS (with the sparse tables' declarations if specs): 0 and
 * *rep (the caller frees it), or ZP_EXIT_FAILED printed. */
static int stats(zp_mover *m, int k, bool specs, const char *cmd, Zeps__Header **rep)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.op = ZEPS__OP__STATS;
    h.flags = specs ? ZP_FLAG_SPECS : 0;
    if (zp_ctl_mover_rpc(m, k, &h, NULL, 0, rep, NULL) != 0 || !(*rep)->stats) {
        fprintf(stderr, "zepsctl shards %s: %s; nothing changed\n", cmd, zp_ctl_mover_err(m));
        return ZP_EXIT_FAILED;
    }
    return 0;
}

/* Refused with replicas under bsp (the shards would refuse each step;
 * said once here, before anything changes), and `add` with replicas (a
 * shard that joins is one process). */
static int mode_refused(zp_mover *m, const char *cmd)
{
    Zeps__Header *rep;
    if (stats(m, 0, false, cmd, &rep) != 0)
        return ZP_EXIT_FAILED;
    int rc = 0;
    if (rep->stats->replicas > 1 && (rep->stats->caps & ZP_CAP_CUTS)) {
        fprintf(stderr,
                "zepsctl shards %s: shards of %u replicas under '%s', which holds pushes in "
                "rounds: not built (docs/elastic.md, \"What is built\"); nothing changed\n",
                cmd, rep->stats->replicas, rep->stats->consistency ? rep->stats->consistency : "?");
        rc = ZP_EXIT_SETUP;
    } else if (rep->stats->replicas > 1 && strcmp(cmd, "add") == 0) {
        fprintf(stderr,
                "zepsctl shards add: shards of %u replicas: a shard that joins is one process "
                "(not built; docs/elastic.md, \"Moves with replicas\"); nothing changed\n",
                rep->stats->replicas);
        rc = ZP_EXIT_SETUP;
    }
    zeps__header__free_unpacked(rep, NULL);
    return rc;
}

/* Whether the cluster's mode holds pushes in rounds (bsp: its workers
 * send every live shard their CLOCKs), into *out: 0 or ZP_EXIT_FAILED
 * (said). */
static int rounds(zp_mover *m, const char *cmd, bool *out)
{
    Zeps__Header *rep;
    if (stats(m, 0, false, cmd, &rep) != 0)
        return ZP_EXIT_FAILED;
    *out = (rep->stats->caps & ZP_CAP_CUTS) != 0;
    zeps__header__free_unpacked(rep, NULL);
    return 0;
}

/* The new shard at m's last index answers HELLO as that shard of this
 * cluster. */
static int check_new(zp_mover *m, int n, const char *ep, const char *conf)
{
    Zeps__Header h, *rep;
    zeps__header__init(&h);
    h.op = ZEPS__OP__HELLO;
    zmq_msg_t data;
    if (zp_ctl_mover_rpc(m, n, &h, NULL, 0, &rep, &data) != 0) {
        fprintf(stderr,
                "zepsctl shards add: %s; start it first with 'zeps-server --config %s --shard %d "
                "--join %s' (docs/elastic.md); nothing changed\n",
                zp_ctl_mover_err(m), conf, n, ep);
        return ZP_EXIT_FAILED;
    }
    zmq_msg_close(&data);
    int rc = 0;
    if (rep->shard != (uint32_t)n || rep->num_shards != (uint32_t)zp_ctl_mover_base(m)) {
        fprintf(stderr,
                "zepsctl shards add: %s answers as shard %u of a cluster of %u; this "
                "cluster's next shard is %d (its cluster file names %d): start it with "
                "'zeps-server --config %s --shard %d --join %s'; nothing changed\n",
                ep, rep->shard, rep->num_shards, n, zp_ctl_mover_base(m), conf, n, ep);
        rc = ZP_EXIT_SETUP;
    }
    zeps__header__free_unpacked(rep, NULL);
    return rc;
}

/* Declare shard 0's tables on shard n (a dense one once, holding nothing
 * there until a move brings it a piece): how many, or -1 printed. */
static int declare_tables(zp_mover *m, int n)
{
    Zeps__Header *st;
    if (stats(m, 0, true, "add", &st) != 0)
        return -1;
    int count = 0;
    for (size_t i = 0; i < st->stats->n_tables && count >= 0; i++) {
        Zeps__TableSpec *spec = st->stats->tables[i]->spec;
        bool again = false; /* a dense table's later pieces: the same table */
        for (size_t j = 0; spec && j < i; j++)
            again = again || strcmp(st->stats->tables[j]->name, spec->name) == 0;
        if (!spec || again)
            continue;
        Zeps__Header h, *rep;
        zeps__header__init(&h);
        h.op = ZEPS__OP__DECLARE;
        h.spec = spec;
        if (zp_ctl_mover_rpc(m, n, &h, NULL, 0, &rep, NULL) != 0) {
            fprintf(stderr, "zepsctl shards add: declaring sparse table '%s' on shard %d: %s\n",
                    spec->name, n, zp_ctl_mover_err(m));
            count = -1;
            break;
        }
        zeps__header__free_unpacked(rep, NULL);
        if (spec->kind == 1)
            printf("declared sparse table '%s' (dim %u, %s) on shard %d\n", spec->name, spec->dim,
                   spec->optimizer, n);
        else
            printf("declared dense table '%s' (%" PRIu64 " elements, %s) on shard %d\n", spec->name,
                   spec->length, spec->optimizer, n);
        count++;
    }
    zeps__header__free_unpacked(st, NULL);
    return count;
}

/* Whether ep is one of m's shards already (printed). */
static bool known(zp_mover *m, const char *ep)
{
    for (int k = 0; k < zp_ctl_mover_shards(m); k++)
        if (strcmp(zp_ctl_mover_endpoint(m, k), ep) == 0) {
            fprintf(stderr, "zepsctl shards add: %s is shard %d already; nothing changed\n", ep, k);
            return true;
        }
    return false;
}

/* Give every shard the map with shard n at ep: the new one first. */
static int send_joined(zp_mover *m, const zp_slotmap *cur, int n, const char *ep)
{
    zp_slotmap *next = NULL;
    char why[512];
    if (zp_slotmap_joined(cur, ep, &next, why, sizeof(why)) != 0) {
        fprintf(stderr, "zepsctl shards add: %s; nothing changed\n", why);
        return ZP_EXIT_SETUP;
    }
    int rc = ZP_EXIT_OK;
    for (int i = 0; i <= n && rc == ZP_EXIT_OK; i++) {
        int k = i == 0 ? n : i - 1;
        if (zp_ctl_mover_slots(m, k, next) != 0) {
            fprintf(stderr,
                    "zepsctl shards add: shard %d did not take the map of epoch %" PRIu64
                    " that names shard %d: %s%s\n",
                    k, zp_slotmap_epoch(next), n, zp_ctl_mover_err(m),
                    k == n ? "; nothing changed"
                           : " (the shards before it took it: shard N owns no slot, so "
                             "nothing moved; run 'shards add' again once it answers)");
            rc = ZP_EXIT_FAILED;
        }
    }
    if (rc == ZP_EXIT_OK)
        printf("slot map epoch %" PRIu64 ": shard %d at %s joined, owning no slot yet\n",
               zp_slotmap_epoch(next), n, ep);
    zp_slotmap_destroy(&next);
    return rc;
}

static int add(zp_mover *m, const el_opts *o)
{
    const char *ep = o->what;
    int n = zp_ctl_mover_shards(m);
    zp_slotmap *cur = NULL;
    int rc = mode_refused(m, "add");
    if (rc == 0)
        rc = common_map(m, "add", -1, &cur);
    if (rc == 0 && known(m, ep))
        rc = ZP_EXIT_SETUP;
    if (rc == 0 && zp_ctl_mover_connect(m, ep) != 0) {
        fprintf(stderr, "zepsctl shards add: %s; nothing changed\n", zp_ctl_mover_err(m));
        rc = ZP_EXIT_SETUP;
    }
    if (rc == 0)
        rc = check_new(m, n, ep, o->mv.conf);
    if (rc == 0 && declare_tables(m, n) < 0)
        rc = ZP_EXIT_FAILED;
    if (rc == 0)
        rc = send_joined(m, cur, n, ep);
    uint8_t skip[ZP_MAX_SHARDS] = {0}; /* shards removed before: they stay empty */
    for (int k = 0; rc == 0 && k < n; k++)
        skip[k] = zp_slotmap_count(cur, k) == 0;
    zp_slotmap_destroy(&cur);
    if (rc != 0)
        return rc;
    rc = zp_ctl_rebalance_run(m, o->tolerance, o->max_moves, skip);
    if (rc == ZP_EXIT_OK) /* and an even share of each dense table (replicas: refused above) */
        rc = zp_ctl_dshare_give(m, n, &o->mv);
    printf("shards add: shard %d at %s %s\n", n, ep,
           rc == ZP_EXIT_OK ? "joined and holds its share of the rows"
                            : "joined; the rebalance did not finish (run 'zepsctl shards "
                              "rebalance' again)");
    return rc;
}

/* Shard k's dense slices: refused (printed) if it holds one. */
static int dense_refused(zp_mover *m, int k)
{
    Zeps__Header *st;
    if (stats(m, k, false, "remove", &st) != 0)
        return ZP_EXIT_FAILED;
    int rc = 0;
    for (size_t i = 0; i < st->stats->n_tables && rc == 0; i++) {
        const Zeps__TableStats *t = st->stats->tables[i];
        if (t->kind == 0 && t->slice_end > t->slice_begin) {
            fprintf(stderr,
                    "zepsctl shards remove: shard %d holds elements [%" PRIu64 ", %" PRIu64
                    ") of dense table '%s': move them away first ('zepsctl shards move "
                    "--dense', docs/elastic.md); nothing changed\n",
                    k, t->slice_begin, t->slice_end, t->name);
            rc = ZP_EXIT_SETUP;
        }
    }
    zeps__header__free_unpacked(st, NULL);
    return rc;
}

/* One move of some of shard k's slots to the shard among `to` with the
 * fewest rows: its exit status; *left the slots k still owns before it. */
static int give_some(zp_mover *m, int k, const uint8_t *to, int nth, uint32_t *left)
{
    int n = zp_ctl_mover_shards(m), b = -1, others = 0;
    uint64_t rows[ZP_MAX_SHARDS], total = 0;
    for (int j = 0; j < n; j++) {
        if (j != k && !to[j])
            continue;
        if (zp_ctl_rebalance_rows(m, j, &rows[j]) != 0) {
            fprintf(stderr, "zepsctl shards remove: %s\n", zp_ctl_mover_err(m));
            return ZP_EXIT_FAILED;
        }
        total += rows[j];
        if (j != k) {
            others++;
            b = b < 0 || rows[j] < rows[b] ? j : b;
        }
    }
    zp_slotmap *map = NULL;
    if (zp_ctl_mover_map(m, k, &map) != 0) {
        fprintf(stderr, "zepsctl shards remove: %s\n", zp_ctl_mover_err(m));
        return ZP_EXIT_FAILED;
    }
    uint32_t owned = zp_slotmap_count(map, k), take = owned;
    *left = owned;
    double want = (double)total / others - (double)rows[b];
    if (owned > 0 && rows[k] > 0 && others > 1 && want < (double)rows[k]) {
        double n_slots = floor(want / ((double)rows[k] / owned) + 0.5);
        take = n_slots < 1 ? 1 : n_slots > owned ? owned : (uint32_t)n_slots;
    }
    uint8_t *which = zp_alloc_zeroed(zp_slotmap_slots(map), 1);
    for (uint32_t s = 0, got = 0; s < zp_slotmap_slots(map) && got < take; s++)
        if (zp_slotmap_slot_owner(map, s) == k)
            which[s] = 1, got++;
    int rc = ZP_EXIT_OK;
    if (owned > 0) {
        printf("move %d: %u of shard %d's %u slots (%" PRIu64 " rows) to shard %d (%" PRIu64
               " rows)\n",
               nth, take, k, owned, rows[k], b, rows[b]);
        fflush(stdout);
        rc = zp_ctl_mover_move(m, k, b, which, NULL);
    }
    free(which);
    zp_slotmap_destroy(&map);
    return rc;
}

/* K of `shards CMD K`: the shard, or -1 (said) if it is not one of m's
 * shards. */
static int shard_arg(const zp_mover *m, const el_opts *o, const char *cmd)
{
    int n = zp_ctl_mover_shards(m);
    long long k = zp_ctl_mover_opts_number(o->what, 0, ZP_MAX_SHARDS - 1);
    if (k >= 0 && k < n)
        return (int)k;
    fprintf(stderr, "zepsctl shards %s: '%s' is not one of the cluster's %d shards\n", cmd, o->what,
            n);
    return -1;
}

static int remove_shard(zp_mover *m, const el_opts *o)
{
    int n = zp_ctl_mover_shards(m);
    long long k = shard_arg(m, o, "remove");
    if (k < 0)
        return ZP_EXIT_SETUP;
    if (zp_ctl_mover_retired(m, (int)k)) {
        fprintf(stderr, "zepsctl shards remove: shard %lld is retired: it owns nothing\n", k);
        return ZP_EXIT_SETUP;
    }
    zp_slotmap *cur = NULL;
    int rc = mode_refused(m, "remove");
    if (rc == 0)
        rc = common_map(m, "remove", -1, &cur);
    uint8_t to[ZP_MAX_SHARDS] = {0};
    int others = 0;
    for (int j = 0; rc == 0 && j < n; j++) {
        to[j] = j != k && zp_slotmap_count(cur, j) > 0;
        others += to[j];
    }
    if (rc == 0 && others == 0) { /* before a joined shard's pieces move: nothing changed */
        fprintf(stderr,
                "zepsctl shards remove: shard %lld is the only shard that owns slots; nothing "
                "changed\n",
                k);
        rc = ZP_EXIT_SETUP;
    }
    zp_slotmap_destroy(&cur);
    if (rc == 0 && k >= zp_ctl_mover_base(m)) /* a joined shard gives its pieces away */
        rc = zp_ctl_dshare_evacuate(m, (int)k, &o->mv);
    if (rc == 0)
        rc = dense_refused(m, (int)k);
    uint32_t left = 1;
    for (int nth = 1; rc == 0 && left > 0 && nth <= o->max_moves + 1; nth++)
        rc = give_some(m, (int)k, to, nth, &left);
    uint64_t rows = 0;
    if (rc == 0 && zp_ctl_rebalance_rows(m, (int)k, &rows) != 0)
        rc = ZP_EXIT_FAILED;
    if (rc == 0 && (left > 0 || rows > 0)) {
        fprintf(stderr,
                "zepsctl shards remove: shard %lld still owns %u slots and %" PRIu64
                " rows after %d moves\n",
                k, left, rows, o->max_moves);
        rc = ZP_EXIT_FAILED;
    }
    if (rc == 0)
        printf("shards remove: shard %lld owns 0 slots and 0 rows: a running worker sends it "
               "nothing more once it holds the new map (from its next CLOCK's answer: no CLOCK "
               "goes there after that outside bsp), so stop it once no worker's clock moves "
               "there ('zepsctl stats'; under bsp: once 'zepsctl shards retire' says so); a "
               "client that starts later says HELLO to it until 'zepsctl shards retire %lld' "
               "(docs/elastic.md, \"Removing a shard\")\n",
               k, k);
    return rc;
}

/* Why shard k may not be retired beyond what the map says (printed):
 * snapshots on, a dense table sliced over it, or rows it still holds (if
 * it answers: *answers). */
static int retire_refused(zp_mover *m, int k, bool *answers)
{
    if (zp_ctl_mover_config(m)->snapshot_dir[0]) {
        fprintf(stderr,
                "zepsctl shards retire: the cluster writes snapshots (snapshot_dir): a set has a "
                "file per shard of the cluster file and a restore expects each one, so a shard "
                "cannot retire (docs/elastic.md); nothing changed\n");
        return ZP_EXIT_SETUP;
    }
    Zeps__Header *st;
    if (stats(m, 0, false, "retire", &st) != 0)
        return ZP_EXIT_FAILED;
    int rc = 0;
    for (size_t i = 0; i < st->stats->n_tables && rc == 0; i++)
        if (st->stats->tables[i]->kind == 0 && k < zp_ctl_mover_base(m)) {
            fprintf(stderr,
                    "zepsctl shards retire: dense table '%s' is sliced over the cluster file's "
                    "shards, shard %d among them: it cannot retire; nothing changed\n",
                    st->stats->tables[i]->name, k);
            rc = ZP_EXIT_SETUP;
        }
    zeps__header__free_unpacked(st, NULL);
    uint64_t rows = 0;
    *answers = rc == 0 && zp_ctl_rebalance_rows(m, k, &rows) == 0;
    if (*answers && rows > 0) {
        fprintf(stderr,
                "zepsctl shards retire: shard %d holds %" PRIu64 " rows: run 'zepsctl shards "
                "remove %d' first; nothing changed\n",
                k, rows, k);
        rc = ZP_EXIT_SETUP;
    }
    return rc;
}

/* Give every shard but k the map that retires k, then k if it answers. */
static int send_retired(zp_mover *m, const zp_slotmap *next, int k, bool answers)
{
    for (int j = 0; j < zp_ctl_mover_shards(m); j++) {
        if (j == k || zp_ctl_mover_retired(m, j))
            continue;
        if (zp_ctl_mover_slots(m, j, next) != 0) {
            fprintf(stderr,
                    "zepsctl shards retire: shard %d did not take the map of epoch %" PRIu64
                    " that retires shard %d: %s (the shards before it took it; run 'shards "
                    "retire %d' again)\n",
                    j, zp_slotmap_epoch(next), k, zp_ctl_mover_err(m), k);
            return ZP_EXIT_FAILED;
        }
    }
    if (answers && zp_ctl_mover_slots(m, k, next) != 0)
        printf("shard %d did not take the map (%s): it is retired all the same\n", k,
               zp_ctl_mover_err(m));
    return ZP_EXIT_OK;
}

/* Under bsp, the wait for every worker's two clocks (ctl_clockwait.c). */
static int wait_clocks(zp_mover *m, const el_opts *o, int k)
{
    int rc = zp_ctl_clockwait(m, k, o->mv.clock_wait_s);
    if (rc == 0)
        printf("shards retire: shard %d can be stopped for good (docs/elastic.md)\n", k);
    return rc;
}

static int retire(zp_mover *m, const el_opts *o)
{
    long long k = shard_arg(m, o, "retire");
    if (k < 0)
        return ZP_EXIT_SETUP;
    bool bsp = false;
    int rc = rounds(m, "retire", &bsp);
    if (rc == 0 && zp_ctl_mover_retired(m, (int)k)) {
        printf("shards retire: shard %lld is retired already%s\n", k,
               bsp ? "; under bsp: waiting for each running worker to clock twice" : "");
        fflush(stdout);
        return bsp ? wait_clocks(m, o, (int)k) : ZP_EXIT_OK;
    }
    zp_slotmap *cur = NULL, *next = NULL;
    bool answers = false;
    char why[512];
    if (rc == 0)
        rc = mode_refused(m, "retire");
    if (rc == 0)
        rc = common_map(m, "retire", (int)k, &cur);
    if (rc == 0 && zp_slotmap_retire(cur, (int)k, &next, why, sizeof(why)) != 0) {
        fprintf(stderr, "zepsctl shards retire: %s; nothing changed\n", why);
        rc = ZP_EXIT_SETUP;
    }
    if (rc == 0)
        rc = retire_refused(m, (int)k, &answers);
    if (rc == 0)
        rc = send_retired(m, next, (int)k, answers);
    if (rc == 0 && !bsp)
        printf("shards retire: slot map epoch %" PRIu64 " retires shard %lld: no client waits "
               "for it from now on, so it can be stopped for good (docs/elastic.md)\n",
               zp_slotmap_epoch(next), k);
    if (rc == 0 && bsp) {
        printf("shards retire: slot map epoch %" PRIu64 " retires shard %lld: under bsp the "
               "running workers send it their CLOCKs until they learn the map; waiting for "
               "each to clock twice (--clock-wait-s %d)\n",
               zp_slotmap_epoch(next), k, o->mv.clock_wait_s);
        fflush(stdout);
        rc = wait_clocks(m, o, (int)k);
    }
    zp_slotmap_destroy(&next);
    zp_slotmap_destroy(&cur);
    return rc;
}

static int run(int argc, char **argv, const char *cmd)
{
    el_opts o;
    int rc = parse(&o, argc, argv, cmd);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr, cmd);
        return rc > 0 ? ZP_EXIT_OK : ZP_EXIT_SETUP;
    }
    zp_mover *m = NULL;
    char err[1024];
    o.mv.stopped_ok = strcmp(cmd, "retire") == 0; /* the shard to retire may be stopped */
    if (zp_ctl_mover_new(&m, &o.mv, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl shards %s: %s\n", cmd, err);
        return ZP_EXIT_SETUP;
    }
    rc = strcmp(cmd, "add") == 0      ? add(m, &o)
         : strcmp(cmd, "remove") == 0 ? remove_shard(m, &o)
                                      : retire(m, &o);
    zp_ctl_mover_destroy(&m);
    return rc;
}

int zp_ctl_elastic_add(int argc, char **argv)
{
    return run(argc, argv, "add");
}

int zp_ctl_elastic_remove(int argc, char **argv)
{
    return run(argc, argv, "remove");
}

int zp_ctl_elastic_retire(int argc, char **argv)
{
    return run(argc, argv, "retire");
}
