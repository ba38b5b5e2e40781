/*
 * tiered.c - a sparse table's cold tier as the op layer sees it
 * (tiered.h): opened at DECLARE, counted in STATS, read by SCAN.
 */
#include "tiered.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "errors.h"
#include "rehash.h"
#include "snapshot.h"
#include "tier.h"
#include "zeps_errors.h"

static zp_tier_where where_of(const zp_rows *r, const char *dir, const char *table, int shard,
                              int nshards)
{
    zp_tier_where w = {
        .dir = dir,
        .table = table,
        .shard = shard,
        .nshards = nshards,
        .dim = r->dim,
        .spv = (uint32_t)zp_sparse_state_per_value(r->store),
        .rec = zp_sparse_record_bytes(r->store),
        .mem = zp_tier_share(r->spec != NULL ? r->spec->memory_budget : 0),
    };
    return w;
}

static int no_dir(const char *dir, const char *table, int shard, char *err, size_t errlen)
{
    if (dir != NULL && dir[0] != '\0')
        return 0;
    return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                         "table '%s' asks for a cold tier, but shard %d has no tier_dir "
                         "(cluster section)",
                         table, shard);
}

int zp_tiered_open(zp_rows *r, const char *dir, const char *table, int shard, int nshards,
                   char *err, size_t errlen)
{
    int rc = no_dir(dir, table, shard, err, errlen);
    zp_tier_where w = where_of(r, dir, table, shard, nshards);
    if (rc == 0)
        rc = zp_tier_open(&r->tier, &w, err, errlen);
    if (rc == 0)
        zp_sparse_set_cold(r->store, r->tier);
    return rc;
}

int zp_tiered_checkpoint_path(char *buf, size_t len, const char *snapdir, uint64_t setid,
                              const char *table, int shard, int nshards)
{
    return zp_rehash_checkpoint_path(buf, len, snapdir, setid, table, (uint32_t)shard,
                                     (uint32_t)nshards);
}

int zp_tiered_checkpoint(zp_rows *r, const char *snapdir, uint64_t setid, const char *table,
                         int shard, int nshards, char *err, size_t errlen)
{
    char path[2048], set[2048];
    if (zp_tiered_checkpoint_path(path, sizeof path, snapdir, setid, table, shard, nshards) != 0)
        return zp_errors_set(err, errlen, ZEPS_EIO, "snapshot_dir '%s' is too long", snapdir);
    snprintf(set, sizeof set, "%s/set-%016" PRIx64, snapdir, setid);
    if (mkdir(set, 0755) != 0 && errno != EEXIST)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cannot make %s: %s", set, strerror(errno));
    return zp_tier_checkpoint(r->tier, path, err, errlen);
}

/* The records of the restored tier whose row is hot (loaded from the
 * set's file): out-of-date copies (a promotion leaves its record in the
 * tier), marked as such and not counted as cold rows. */
static int mark_copies(zp_rows *r, char *err, size_t errlen)
{
    enum { PIECE = 256 };
    size_t rec = zp_sparse_record_bytes(r->store);
    uint8_t *buf = zp_alloc(PIECE * rec);
    uint64_t pos = 0, id;
    int64_t got = 0;
    while (pos != UINT64_MAX && (got = zp_tier_scan(r->tier, &pos, PIECE, buf)) >= 0)
        for (int64_t i = 0; i < got; i++) {
            memcpy(&id, buf + (size_t)i * rec, sizeof id); /* a record starts with its id */
            if (zp_sparse_mark_copy(r->store, id))
                zp_tier_promoted(r->tier, false);
        }
    free(buf);
    if (got >= 0)
        return 0;
    return zp_errors_set(err, errlen, ZEPS_EIO, "%s", zp_tier_error(r->tier));
}

int zp_tiered_restore(zp_rows *r, const char *tier_dir, const char *snapdir, uint64_t setid,
                      const char *table, int shard, int nshards, char *err, size_t errlen)
{
    char from[2048];
    int rc = no_dir(tier_dir, table, shard, err, errlen);
    if (rc == 0 &&
        zp_tiered_checkpoint_path(from, sizeof from, snapdir, setid, table, shard, nshards) != 0)
        rc = zp_errors_set(err, errlen, ZEPS_EIO, "snapshot_dir '%s' is too long", snapdir);
    zp_tier_where w = where_of(r, tier_dir, table, shard, nshards);
    if (rc == 0)
        rc = zp_tier_restore(&r->tier, &w, from, err, errlen);
    if (rc == 0 && (rc = mark_copies(r, err, errlen)) != 0)
        zp_tier_close(&r->tier);
    if (rc == 0)
        zp_sparse_set_cold(r->store, r->tier);
    return rc;
}

const char *zp_tiered_error(const zp_rows *r)
{
    if (r->tier == NULL && r->spec != NULL && r->spec->tier)
        return "its cold tier is not open (a rollback could not restore it)";
    return r->tier ? zp_tier_error(r->tier) : NULL;
}

int zp_tiered_rollback(zp_rows *r, const char *tier_dir, const char *snapdir, uint64_t setid,
                       const char *table, int shard, int nshards, char *err, size_t errlen)
{
    r->fetch_floor = r->fetches;
    zp_sparse_set_cold(r->store, NULL);
    zp_tier_close(&r->tier);
    return zp_tiered_restore(r, tier_dir, snapdir, setid, table, shard, nshards, err, errlen);
}

uint64_t zp_tiered_cold_rows(const zp_rows *r)
{
    if (r->tier == NULL)
        return 0;
    zp_tier_counters c;
    zp_tier_get_counters(r->tier, &c);
    return c.rows;
}

int64_t zp_tiered_scan(zp_rows *r, uint64_t *cursor, uint64_t max, uint8_t *out)
{
    if (r->tier == NULL || max == 0) {
        *cursor = r->tier == NULL ? 0 : *cursor;
        return 0;
    }
    size_t rec = zp_sparse_record_bytes(r->store);
    uint32_t spp = (uint32_t)zp_sparse_state_per_value(r->store);
    uint64_t unit = ZP_SNAP_ROW_LEN(r->dim, spp), pos = *cursor - ZP_TIERED_CURSOR;
    /* records read in pieces into an aligned buffer, then packed */
    enum { PIECE = 256 };
    uint8_t *buf = zp_alloc(PIECE * rec);
    int64_t n = 0;
    while ((uint64_t)n < max && pos != UINT64_MAX) {
        uint64_t want = max - (uint64_t)n < PIECE ? max - (uint64_t)n : PIECE;
        int64_t got = zp_tier_scan(r->tier, &pos, want, buf);
        if (got < 0) {
            n = -1;
            break;
        }
        for (int64_t i = 0; i < got; i++) {
            zp_sparse_row row;
            zp_sparse_record_row(r->store, buf + (size_t)i * rec, &row);
            if (zp_sparse_has(r->store, row.id))
                continue; /* an out-of-date copy of a hot row: the hot rows gave it */
            zp_rows_record_pack(out + (uint64_t)n++ * unit, &row, r->dim, spp);
        }
    }
    free(buf);
    *cursor = pos == UINT64_MAX ? 0 : ZP_TIERED_CURSOR + pos;
    return n;
}
