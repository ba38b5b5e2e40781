/*
 * ctl_reshard_tier.c - the cold tiers of a set in `zepsctl snapshot
 * reshard` (ctl_reshard_tier.h): the hot rows are in the shard files and
 * move with them (common/snapshot/reshard.c); the cold ones are in each
 * shard's RocksDB checkpoint and move here, to the new shard their id
 * hashes to (server/tier/rehash.h), so each new shard's tier holds its
 * cold rows and its file its hot ones. docs/snapshots.md.
 */
#include "ctl_reshard_tier.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rehash.h"
#include "snapshot_io.h"

/* Whether `name` is tier-<table>-shard-<k>-of-<nsrc> of a sparse table. */
static bool known(const char *name, const zp_snapshot *s, uint32_t nsrc)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        if (s->tables[i].kind != 1)
            continue;
        for (uint32_t k = 0; k < nsrc; k++) {
            char want[512];
            snprintf(want, sizeof want, "tier-%s-shard-%u-of-%u", s->tables[i].name, k, nsrc);
            if (strcmp(name, want) == 0)
                return true;
        }
    }
    return false;
}

int zp_ctl_reshard_tier_check(const char *src_dir, uint64_t setid, const zp_snapshot *const *src,
                              uint32_t nsrc)
{
    char path[2048], err[1024];
    snprintf(path, sizeof path, "%s/set-%016" PRIx64, src_dir, setid);
    DIR *d = opendir(path);
    struct dirent *e;
    int rc = 0;
    while (d != NULL && rc == 0 && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "tier-", 5) == 0 && !known(e->d_name, src[0], nsrc)) {
            fprintf(stderr,
                    "zepsctl snapshot reshard: %s/%s is no cold tier checkpoint of this set's "
                    "sparse tables and %u shards: left alone, nothing written\n",
                    path, e->d_name, nsrc);
            rc = 1;
        }
    if (d != NULL)
        closedir(d);
    for (uint32_t i = 0; rc == 0 && i < src[0]->ntables; i++) {
        zp_rehash_job r = {
            .src_dir = src_dir, .setid = setid, .table = src[0]->tables[i].name, .nsrc = nsrc};
        if (src[0]->tables[i].kind == 1 && zp_rehash_present(&r, err, sizeof err) < 0) {
            fprintf(stderr, "zepsctl snapshot reshard: %s\n", err);
            rc = 1;
        }
    }
    return rc;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* s's record of sparse table `name` (reshard checked there is one: a
 * shard's file may hold several records of a dense table, so indexes
 * differ between files). */
static const zp_snap_table *sparse_of(const zp_snapshot *s, const char *name)
{
    for (uint32_t i = 0; i < s->ntables; i++)
        if (s->tables[i].kind == 1 && strcmp(s->tables[i].name, name) == 0)
            return &s->tables[i];
    return NULL;
}

/* The ids of table i's hot rows over the set's shard files, sorted. */
static uint64_t *hot_ids(const zp_snapshot *const *src, uint32_t nsrc, uint32_t i, size_t *n)
{
    const zp_snap_table *t0 = &src[0]->tables[i];
    uint64_t rec = ZP_SNAP_ROW_LEN(t0->length, t0->state_per_param), total = 0;
    for (uint32_t k = 0; k < nsrc; k++)
        total += zp_get64(sparse_of(src[k], t0->name)->rows);
    uint64_t *ids = malloc((size_t)(total ? total : 1) * sizeof *ids);
    if (ids == NULL)
        return NULL;
    size_t m = 0;
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snap_table *t = sparse_of(src[k], t0->name);
        for (uint64_t j = 0; j < zp_get64(t->rows); j++)
            ids[m++] = zp_get64(t->rows + ZP_SNAP_ROWS_HDR + j * rec);
    }
    qsort(ids, m, sizeof *ids, by_id);
    *n = m;
    return ids;
}

int zp_ctl_reshard_tier_write(const char *src_dir, const char *dst_dir, uint64_t setid,
                              const zp_snapshot *const *src, uint32_t nsrc, uint32_t nout)
{
    char err[1024];
    for (uint32_t i = 0; i < src[0]->ntables; i++) {
        zp_rehash_job r = {.src_dir = src_dir,
                           .dst_dir = dst_dir,
                           .setid = setid,
                           .table = src[0]->tables[i].name,
                           .nsrc = nsrc,
                           .ndst = nout};
        if (src[0]->tables[i].kind != 1 || zp_rehash_present(&r, err, sizeof err) != 1)
            continue; /* checked before: none */
        size_t nhot = 0;
        uint64_t *hot = hot_ids(src, nsrc, i, &nhot);
        if (hot == NULL) {
            fprintf(stderr, "zepsctl snapshot reshard: table '%s': no memory\n", r.table);
            return 1;
        }
        r.hot = hot;
        r.nhot = nhot;
        zp_rehash_counts c;
        int rc = zp_rehash_write(&r, &c, err, sizeof err);
        free(hot);
        if (rc != 0) {
            fprintf(stderr, "zepsctl snapshot reshard: table '%s': %s\n", r.table, err);
            return 1;
        }
        printf("table '%s': %" PRIu64 " cold rows into %u cold tier checkpoints (%" PRIu64
               " out-of-date copies of hot rows left out)\n",
               r.table, c.written, nout, c.copies);
    }
    return 0;
}
