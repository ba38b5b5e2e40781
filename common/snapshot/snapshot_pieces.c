/*
 * snapshot_pieces.c - the dense records of a snapshot file checked against the
 * file's slot map (docs/snapshots.md, "Dense pieces"; docs/elastic.md,
 * "Dense tables by range").
 *
 * A shard whose map places a dense table by range holds one record per
 * piece it owns (begin and end the piece's; one empty record [0, 0) when
 * it owns none, and the empty records a cut left keep their ids), and
 * its file holds one dense record per record. A table the map does not
 * name keeps its default slice, checked as before pieces existed. The
 * map is read here in its wire form without allocating anything: the
 * writer runs these checks in a fork()ed child of a threaded server,
 * which must not malloc.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>

#include "densemap.h"
#include "errors.h"
#include "snapshot.h"
#include "snapshot_format.h"
#include "snapshot_io.h"
#include "zeps_errors.h"

static uint32_t get16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/* One table of a dense list: its name, length and npieces pieces of 10
 * bytes (u64 lo, u16 owner) at `pieces`. */
typedef struct dtable {
    const uint8_t *name;
    uint32_t nlen;
    uint64_t length;
    uint32_t npieces;
    const uint8_t *pieces;
} dtable;

/* Element past piece i of d: the next piece's lo, or the length. */
static uint64_t piece_hi(const dtable *d, uint32_t i)
{
    return i + 1 < d->npieces ? zp_get64(d->pieces + 10 * (i + 1)) : d->length;
}

/* The table at p (n bytes left) into *d, checked; the bytes it takes, or
 * 0 with a reason in err. */
static uint64_t walk_table(const uint8_t *p, uint64_t n, uint32_t nshards, dtable *d, char *err,
                           size_t errlen)
{
    if (n < 2 || (d->nlen = get16(p)) == 0 || d->nlen > ZP_DENSEMAP_NAME_MAX ||
        n < 2 + (uint64_t)d->nlen + 12) {
        zp_errors_set(err, errlen, ZEPS_EINVAL, "dense list: a table entry runs past the map");
        return 0;
    }
    d->name = p + 2;
    d->length = zp_get64(p + 2 + d->nlen);
    d->npieces = zp_get32(p + 10 + d->nlen);
    d->pieces = p + 14 + d->nlen;
    uint64_t took = 14 + (uint64_t)d->nlen + 10 * (uint64_t)d->npieces;
    if (memchr(d->name, 0, d->nlen) || d->length == 0 || d->npieces == 0 ||
        d->npieces > ZP_DENSEMAP_PIECES_MAX || took > n) {
        zp_errors_set(err, errlen, ZEPS_EINVAL,
                      "dense list: table '%.*s' of length %" PRIu64 " with %u pieces in %" PRIu64
                      " bytes",
                      (int)d->nlen, (const char *)d->name, d->length, d->npieces, n);
        return 0;
    }
    for (uint32_t i = 0; i < d->npieces; i++) {
        uint64_t lo = zp_get64(d->pieces + 10 * i);
        uint32_t owner = get16(d->pieces + 10 * i + 8);
        if ((i == 0 ? lo != 0 : lo <= zp_get64(d->pieces + 10 * (i - 1))) || lo >= d->length ||
            owner >= nshards) {
            zp_errors_set(err, errlen, ZEPS_EINVAL,
                          "dense list: table '%.*s' piece %u at %" PRIu64 " on shard %u (pieces "
                          "ascend from 0 below the length %" PRIu64 ", on shards below %u)",
                          (int)d->nlen, (const char *)d->name, i, lo, owner, d->length, nshards);
            return 0;
        }
    }
    return took;
}

/* The dense list of a map whose owners end at `at` of len bytes: the
 * tail must be u32 base (= the map's shards: no joined shard), u32
 * retired 0, then the list. Its start and length into *dl, *dlen. */
static int dense_list(const uint8_t *map, uint64_t at, uint64_t len, uint32_t nshards,
                      const uint8_t **dl, uint64_t *dlen, char *err, size_t errlen)
{
    if (len - at < 12)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "slot map of %" PRIu64 " bytes ends %" PRIu64 " bytes after its "
                             "owners, inside the 12 of its shard counts and dense list",
                             len, len - at);
    if (zp_get32(map + at) != nshards || zp_get32(map + at + 4) != 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "slot map of %" PRIu64 " bytes names joined or retired shards "
                             "(snapshots hold the cluster file's shards only)",
                             len);
    *dl = map + at + 8;
    *dlen = len - at - 8;
    return 0;
}

int zp_snapshot_pieces_map(const uint8_t *map, uint64_t at, uint64_t len, uint32_t nshards,
                           char *err, size_t errlen)
{
    const uint8_t *dl = NULL;
    uint64_t n = 0;
    int rc = dense_list(map, at, len, nshards, &dl, &n, err, errlen);
    if (rc)
        return rc;
    uint32_t ntables = zp_get32(dl);
    if (ntables == 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "dense list of 0 tables");
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    uint64_t off = 4;
    for (uint32_t i = 0; i < ntables; i++) {
        dtable d;
        uint64_t took = off < n ? walk_table(dl + off, n - off, nshards, &d, err, errlen) : 0;
        if (took == 0)
            return off < n
                       ? ZEPS_EINVAL
                       : zp_errors_set(err, errlen, ZEPS_EINVAL,
                                       "dense list: %u tables in %" PRIu64 " bytes", ntables, n);
        uint32_t m = prev_len < d.nlen ? prev_len : d.nlen;
        int c = prev ? memcmp(prev, d.name, m) : -1;
        if (prev && (c > 0 || (c == 0 && prev_len >= d.nlen)))
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "dense list: table '%.*s' out of order or named twice",
                                 (int)d.nlen, (const char *)d.name);
        prev = d.name;
        prev_len = d.nlen;
        off += took;
    }
    if (off != n)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "dense list: %" PRIu64 " bytes after its last table", n - off);
    return 0;
}

/* Table `name`'s entry in map (checked), into *d; false when the map (or
 * its absence) gives the table its default slices. */
static bool named(const uint8_t *map, uint64_t len, const char *name, dtable *d)
{
    uint64_t at = map ? ZP_SLOTMAP_WIRE_HDR + 2 * (uint64_t)zp_get32(map + 8) : 0;
    if (!map || len <= at)
        return false;
    const uint8_t *dl = map + at + 8;
    uint64_t n = len - at - 8, off = 4;
    size_t want = strlen(name);
    char ignore[8];
    for (uint32_t i = 0; i < zp_get32(dl); i++) {
        off += walk_table(dl + off, n - off, zp_get32(map + 12), d, ignore, sizeof(ignore));
        if (d->nlen == want && memcmp(d->name, name, want) == 0)
            return true;
    }
    return false;
}

/* A named table's record [t->begin, t->end) on `shard`: a piece the map
 * gives it, or empty at 0. */
static int check_piece(const zp_snap_table *t, const dtable *d, const uint8_t *map, uint32_t shard,
                       char *err, size_t errlen)
{
    if (t->length != d->length)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "dense table '%s' of length %" PRIu64 ": the file's slot map "
                             "(epoch %" PRIu64 ") names it with length %" PRIu64,
                             t->name, t->length, zp_get64(map), d->length);
    if (t->begin == 0 && t->end == 0)
        return 0;
    for (uint32_t i = 0; i < d->npieces; i++)
        if (zp_get64(d->pieces + 10 * i) == t->begin && piece_hi(d, i) == t->end &&
            get16(d->pieces + 10 * i + 8) == shard)
            return 0;
    return zp_errors_set(err, errlen, ZEPS_EINVAL,
                         "dense table '%s': record [%" PRIu64 ", %" PRIu64 ") is not a piece "
                         "shard %u holds under the file's slot map (epoch %" PRIu64 ")",
                         t->name, t->begin, t->end, shard, zp_get64(map));
}

int zp_snapshot_pieces_slice(const zp_snap_table *t, const uint8_t *map, uint64_t len,
                             uint32_t shard, uint32_t nshards, char *err, size_t errlen)
{
    dtable d;
    if (named(map, len, t->name, &d))
        return check_piece(t, &d, map, shard, err, errlen);
    uint64_t b = zp_slice_at(t->length, shard, nshards),
             e = zp_slice_at(t->length, shard + 1, nshards);
    if (t->begin != b || t->end != e)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "table '%s': slice [%" PRIu64 ", %" PRIu64
                             ") is not shard %u of %u of "
                             "length %" PRIu64 " ([%" PRIu64 ", %" PRIu64 "))",
                             t->name, t->begin, t->end, shard, nshards, t->length, b, e);
    return 0;
}

/* Records i.. of table tables[i].name that are not empty; whether one
 * before i has the name (tables[i] is then not its first). */
static uint32_t count_records(const zp_snap_table *tables, uint32_t n, uint32_t i, bool *seen)
{
    uint32_t c = 0;
    *seen = false;
    for (uint32_t j = 0; j < n; j++) {
        if (tables[j].kind != 0 || strcmp(tables[j].name, tables[i].name) != 0)
            continue;
        *seen = *seen || j < i;
        c += tables[j].end > tables[j].begin;
    }
    return c;
}

int zp_snapshot_pieces_check(const zp_snap_table *tables, uint32_t n, const uint8_t *map,
                             uint64_t len, uint32_t shard, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < n; i++) {
        const zp_snap_table *t = &tables[i];
        dtable d;
        bool seen;
        if (t->kind != 0 || !named(map, len, t->name, &d))
            continue;
        for (uint32_t j = i + 1; t->end > t->begin && j < n; j++)
            if (tables[j].kind == 0 && strcmp(tables[j].name, t->name) == 0 &&
                tables[j].begin == t->begin && tables[j].end == t->end)
                return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                     "dense table '%s': records %u and %u are both the piece "
                                     "[%" PRIu64 ", %" PRIu64 ")",
                                     t->name, i, j, t->begin, t->end);
        uint32_t have = count_records(tables, n, i, &seen), want = 0;
        for (uint32_t p = 0; p < d.npieces; p++)
            want += get16(d.pieces + 10 * p + 8) == shard;
        if (!seen && have != want)
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "dense table '%s': shard %u holds %u pieces of it under the "
                                 "file's slot map (epoch %" PRIu64 "), the file has %u",
                                 t->name, shard, want, zp_get64(map), have);
    }
    return 0;
}
