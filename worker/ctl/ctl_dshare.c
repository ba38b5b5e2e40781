/*
 * ctl_dshare.c - the dense part of `zepsctl shards add` and `remove`
 * (docs/elastic.md, "Dense tables by range"): a shard that joins takes
 * an even share of every dense table, and a joined shard that is removed
 * gives its pieces away first, each by a live move of a dense range
 * (ctl_dense.c). A move at a time; each reads the shards' map anew.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl.h"
#include "ctl_mover.h"
#include "exitcode.h"

#define MAX_DENSE 64 /* dense tables the commands even out */

typedef struct dtab {
    char name[64];
    uint64_t length;
} dtab;

/* The dense tables of shard 0 (STATS), at most MAX_DENSE, into t: how
 * many, or -1 (said). */
static int dense_tables(zp_mover *m, dtab *t)
{
    Zeps__Header h, *rep;
    zeps__header__init(&h);
    h.op = ZEPS__OP__STATS;
    if (zp_ctl_mover_rpc(m, 0, &h, NULL, 0, &rep, NULL) != 0) {
        fprintf(stderr, "zepsctl shards: %s\n", zp_ctl_mover_err(m));
        return -1;
    }
    int n = 0;
    for (size_t i = 0; rep->stats && i < rep->stats->n_tables && n < MAX_DENSE; i++) {
        const Zeps__TableStats *ts = rep->stats->tables[i];
        bool again = false;
        for (int j = 0; j < n; j++)
            again = again || strcmp(t[j].name, ts->name) == 0;
        if (ts->kind != 0 || again)
            continue;
        snprintf(t[n].name, sizeof(t[n].name), "%s", ts->name);
        t[n++].length = ts->length;
    }
    zeps__header__free_unpacked(rep, NULL);
    return n;
}

/* The newest map among the live shards, into *out: 0 or -1 (said). */
static int newest_map(zp_mover *m, zp_slotmap **out)
{
    *out = NULL;
    for (int k = 0; k < zp_ctl_mover_shards(m); k++) {
        zp_slotmap *s = NULL;
        if (zp_ctl_mover_retired(m, k) || zp_ctl_mover_map(m, k, &s) != 0)
            continue;
        if (!*out || zp_slotmap_epoch(s) > zp_slotmap_epoch(*out)) {
            zp_slotmap_destroy(out);
            *out = s;
        } else {
            zp_slotmap_destroy(&s);
        }
    }
    if (!*out)
        fprintf(stderr, "zepsctl shards: no shard answered with its map\n");
    return *out ? 0 : -1;
}

/* One move of [lo, hi) of table t from shard `from` to shard `to`: its
 * exit status. */
static int move_range(zp_mover *m, const zp_mv_opts *o, const dtab *t, int from, int to,
                      uint64_t lo, uint64_t hi)
{
    zp_mv_opts mo = *o;
    mo.from = from;
    mo.to = to;
    char range[160];
    snprintf(range, sizeof(range), "%.63s:%" PRIu64 "-%" PRIu64, t->name, lo, hi);
    return zp_ctl_dense_move(m, &mo, range);
}

/* Elements of t on shard k under map m, and k's last piece of it. */
static uint64_t held(const zp_slotmap *m, const dtab *t, int k, zp_dense_piece *last)
{
    size_t n = zp_slotmap_dense_pieces(m, t->name, t->length, NULL, 0);
    zp_dense_piece *p = zp_alloc((n ? n : 1) * sizeof(*p));
    zp_slotmap_dense_pieces(m, t->name, t->length, p, n);
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].owner == k) {
            h += p[i].hi - p[i].lo;
            if (last)
                *last = p[i];
        }
    free(p);
    return h;
}

/* The shard other than `not` that holds most (most) or fewest (!most)
 * elements of t under map m, among the live shards holding some (and,
 * for the fewest, every live base shard); -1 if none. */
static int pick(zp_mover *m, const zp_slotmap *map, const dtab *t, int not, bool most)
{
    int best = -1;
    uint64_t bh = 0;
    for (int k = 0; k < zp_ctl_mover_shards(m); k++) {
        uint64_t h = held(map, t, k, NULL);
        bool in = !zp_ctl_mover_retired(m, k) &&
                  k != not &&(h > 0 || (!most && k < zp_ctl_mover_base(m)));
        if (in && (best < 0 || (most ? h > bh : h < bh))) {
            best = k;
            bh = h;
        }
    }
    return best;
}

/* Give shard n an even share of table t: the tail of the piece of the
 * shard holding most, a move at a time. */
static int share_table(zp_mover *m, const zp_mv_opts *o, const dtab *t, int n)
{
    for (int moves = 0; moves < 64; moves++) {
        zp_slotmap *map = NULL;
        if (newest_map(m, &map) != 0)
            return ZP_EXIT_FAILED;
        int parts = 1;
        for (int k = 0; k < zp_ctl_mover_shards(m); k++)
            parts += k != n && !zp_ctl_mover_retired(m, k) && held(map, t, k, NULL) > 0;
        uint64_t share = t->length / (uint64_t)parts, have = held(map, t, n, NULL);
        int h = pick(m, map, t, n, true);
        zp_dense_piece last = {0};
        uint64_t hh = h >= 0 ? held(map, t, h, &last) : 0;
        zp_slotmap_destroy(&map);
        if (have >= share || h < 0 || hh <= share) {
            printf("dense table '%s': shard %d holds %" PRIu64 " of %" PRIu64 " elements\n",
                   t->name, n, have, t->length);
            return ZP_EXIT_OK;
        }
        uint64_t give = hh - share < share - have ? hh - share : share - have;
        uint64_t lo = last.hi - last.lo > give ? last.hi - give : last.lo;
        int rc = move_range(m, o, t, h, n, lo, last.hi);
        if (rc != ZP_EXIT_OK)
            return rc;
    }
    fprintf(stderr, "zepsctl shards add: dense table '%s' not even after 64 moves\n", t->name);
    return ZP_EXIT_FAILED;
}

int zp_ctl_dshare_give(zp_mover *m, int n, const zp_mv_opts *o)
{
    dtab t[MAX_DENSE];
    int nt = dense_tables(m, t);
    if (nt < 0)
        return ZP_EXIT_FAILED;
    for (int i = 0; i < nt; i++) {
        int rc = share_table(m, o, &t[i], n);
        if (rc != ZP_EXIT_OK)
            return rc;
    }
    return ZP_EXIT_OK;
}

int zp_ctl_dshare_evacuate(zp_mover *m, int k, const zp_mv_opts *o)
{
    dtab t[MAX_DENSE];
    int nt = dense_tables(m, t);
    if (nt < 0)
        return ZP_EXIT_FAILED;
    for (int i = 0; i < nt; i++) {
        for (int moves = 0;; moves++) {
            zp_slotmap *map = NULL;
            if (newest_map(m, &map) != 0)
                return ZP_EXIT_FAILED;
            zp_dense_piece last = {0};
            uint64_t h = held(map, &t[i], k, &last);
            int to = pick(m, map, &t[i], k, false);
            zp_slotmap_destroy(&map);
            if (h == 0)
                break;
            if (to < 0 || moves >= 64) {
                fprintf(stderr,
                        "zepsctl shards remove: dense table '%s': %" PRIu64
                        " elements of shard %d have nowhere to go\n",
                        t[i].name, h, k);
                return ZP_EXIT_FAILED;
            }
            int rc = move_range(m, o, &t[i], k, to, last.lo, last.hi);
            if (rc != ZP_EXIT_OK)
                return rc;
        }
    }
    return ZP_EXIT_OK;
}
