/*
 * setmap.c - the slot map of a snapshot set (docs/snapshots.md, "The slot
 * map of a set"; docs/elastic.md, "Snapshots").
 *
 * Each file records the map its shard held when it was written (format 2;
 * a file of format 1 implies the default map). The shards of a set write
 * their files at slightly different moments, so a move that commits in
 * between leaves a set whose files disagree: the source's file written
 * before the commit holds the moved rows and the target's written after
 * holds them too (twice), or the source's after and the target's before
 * hold none (missed). Both show as a shard that owns other slots under its
 * own map than under the newest map of the set; a shard that merely missed
 * a map change which did not concern it (the tool's SLOTS to the other
 * shards) owns the same slots under both, and the set is sound. So the
 * rule is: the set's map is the newest of its files' maps, and every
 * file's shard owns the same slots under its own map as under it.
 * Dense pieces follow the same rule: every file's shard holds the same
 * pieces of every table either map names under both (docs/elastic.md,
 * "Dense tables by range"), so a set holding a moved piece twice or not
 * at all is refused.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "slotmap.h"
#include "snapshot.h"
#include "zeps_errors.h"

/* True if shard k holds the same pieces of dense table `name` of
 * `length` elements under a and b (either may not name it: its default
 * slices). */
static bool same_pieces(const zp_slotmap *a, const zp_slotmap *b, const char *name,
                        uint64_t length, int k)
{
    size_t na = zp_slotmap_dense_pieces(a, name, length, NULL, 0);
    size_t nb = zp_slotmap_dense_pieces(b, name, length, NULL, 0);
    zp_dense_piece *p = zp_alloc_zeroed(na + nb ? na + nb : 1, sizeof(*p));
    zp_slotmap_dense_pieces(a, name, length, p, na);
    zp_slotmap_dense_pieces(b, name, length, p + na, nb);
    size_t i = 0, j = na;
    bool same = true;
    while (same) { /* the next piece of k under each, in order */
        while (i < na && p[i].owner != k)
            i++;
        while (j < na + nb && p[j].owner != k)
            j++;
        if (i == na || j == na + nb)
            break;
        same = p[i].lo == p[j].lo && p[i].hi == p[j].hi;
        i++;
        j++;
    }
    same = same && i == na && j == na + nb;
    free(p);
    return same;
}

/* True if shard k owns the same slots and the same dense pieces under a
 * and b (of one slot count; every table either names has one length). */
static bool same_claim(const zp_slotmap *a, const zp_slotmap *b, int k)
{
    for (uint32_t n = 0; n < zp_slotmap_slots(a); n++)
        if ((zp_slotmap_slot_owner(a, n) == k) != (zp_slotmap_slot_owner(b, n) == k))
            return false;
    const zp_densemap *d[2] = {zp_slotmap_dense(a), zp_slotmap_dense(b)};
    for (int q = 0; q < 2; q++)
        for (size_t i = 0; i < zp_densemap_count(d[q]); i++)
            if (!same_pieces(a, b, zp_densemap_name(d[q], i), zp_densemap_length(d[q], i), k))
                return false;
    return true;
}

/* The first table both maps name with different lengths, or NULL. */
static const char *other_length(const zp_slotmap *a, const zp_slotmap *b)
{
    const zp_densemap *da = zp_slotmap_dense(a), *db = zp_slotmap_dense(b);
    for (size_t i = 0; i < zp_densemap_count(da); i++)
        for (size_t j = 0; j < zp_densemap_count(db); j++)
            if (strcmp(zp_densemap_name(da, i), zp_densemap_name(db, j)) == 0 &&
                zp_densemap_length(da, i) != zp_densemap_length(db, j))
                return zp_densemap_name(da, i);
    return NULL;
}

/* The maps of the set's files into maps[0..nshards), the newest's index
 * into *newest. 0 or an error naming the file. */
static int read_maps(const char *dir, uint64_t setid, uint32_t nshards, zp_slotmap **maps,
                     uint32_t *newest, char *err, size_t errlen)
{
    *newest = 0;
    for (uint32_t k = 0; k < nshards; k++) {
        char path[PATH_MAX];
        if (zp_snapshot_path(path, sizeof(path), dir, setid, k, nshards))
            return zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long",
                                 dir);
        zp_snap_info in;
        int rc = zp_snapshot_read_map(path, &maps[k], &in, err, errlen);
        if (rc)
            return rc;
        if (in.h.nshards != nshards || in.h.shard != k)
            return zp_errors_set(err, errlen, ZEPS_EDATA, "snapshot %s: header says shard %u of %u",
                                 path, in.h.shard, in.h.nshards);
        if (zp_slotmap_epoch(maps[k]) > zp_slotmap_epoch(maps[*newest]))
            *newest = k;
    }
    return 0;
}

int zp_setmap_check(const char *dir, uint64_t setid, uint32_t nshards, zp_slotmap **out,
                              char *err, size_t errlen)
{
    if (nshards == 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "set %016" PRIx64 ": 0 shards", setid);
    zp_slotmap **maps = calloc(nshards, sizeof(*maps));
    if (!maps)
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "set %016" PRIx64 ": no memory", setid);
    uint32_t nw = 0;
    int rc = read_maps(dir, setid, nshards, maps, &nw, err, errlen);
    for (uint32_t k = 0; !rc && k < nshards; k++) {
        const zp_slotmap *mine = maps[k], *set = maps[nw];
        bool equal_epoch = zp_slotmap_epoch(mine) == zp_slotmap_epoch(set);
        if (zp_slotmap_slots(mine) != zp_slotmap_slots(set))
            rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                               "set %016" PRIx64 " in %s: shard %u's file has a slot map of %u "
                               "slots (epoch %" PRIu64 "), shard %u's of %u (epoch %" PRIu64
                               "): not one cluster's maps",
                               setid, dir, k, zp_slotmap_slots(mine), zp_slotmap_epoch(mine), nw,
                               zp_slotmap_slots(set), zp_slotmap_epoch(set));
        else if (other_length(mine, set))
            rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                               "set %016" PRIx64 " in %s: shard %u's file and shard %u's name "
                               "dense table '%s' with different lengths: not one cluster's maps",
                               setid, dir, k, nw, other_length(mine, set));
        else if (!same_claim(mine, set, (int)k) || (equal_epoch && !same_claim(mine, set, (int)nw)))
            rc = zp_errors_set(
                err, errlen, ZEPS_EDATA,
                "set %016" PRIx64 " in %s: shard %u's file was written at slot map epoch %" PRIu64
                " and shard %u's at epoch %" PRIu64
                ", under which shard %u owns other slots or dense pieces: a move committed while "
                "the set was taken, so the set would hold the moved rows or pieces twice or not "
                "at all",
                setid, dir, k, zp_slotmap_epoch(mine), nw, zp_slotmap_epoch(set), k);
    }
    if (!rc && out) {
        *out = maps[nw];
        maps[nw] = NULL;
    }
    for (uint32_t k = 0; k < nshards; k++)
        zp_slotmap_destroy(&maps[k]);
    free(maps);
    return rc;
}
