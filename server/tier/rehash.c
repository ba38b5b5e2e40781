/*
 * rehash.c - a set's cold tier checkpoints cut again for another shard
 * count (rehash.h): one pass over the old checkpoints, each cold row
 * written to the new checkpoint its id hashes to, all of them open at once.
 */
#include "rehash.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cold.h"
#include "errors.h"
#include "folder.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

#define TMP_SUFFIX  ".tmp"
#define WORK_SUFFIX ".work"

int zp_rehash_checkpoint_path(char *buf, size_t len, const char *snapdir, uint64_t setid,
                              const char *table, uint32_t shard, uint32_t nshards)
{
    int n = snprintf(buf, len, "%s/set-%016" PRIx64 "/tier-%s-shard-%u-of-%u", snapdir, setid,
                     table, shard, nshards);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int zp_rehash_present(const zp_rehash_job *r, char *err, size_t errlen)
{
    char path[2048];
    uint32_t have = 0, missing = 0;
    for (uint32_t k = 0; k < r->nsrc; k++) {
        if (zp_rehash_checkpoint_path(path, sizeof path, r->src_dir, r->setid, r->table, k,
                                      r->nsrc) != 0)
            return zp_errors_set(err, errlen, ZEPS_EDATA, "snapshot_dir '%s' is too long",
                                 r->src_dir);
        if (is_dir(path))
            have++;
        else
            missing = k;
    }
    if (have == 0)
        return 0;
    if (have == r->nsrc)
        return 1;
    zp_rehash_checkpoint_path(path, sizeof path, r->src_dir, r->setid, r->table, missing, r->nsrc);
    return zp_errors_set(err, errlen, ZEPS_EDATA,
                         "table '%s': %u of %u shards have a cold tier checkpoint, %s is missing",
                         r->table, have, r->nsrc, path);
}

static bool is_hot(const zp_rehash_job *r, uint64_t id)
{
    size_t lo = 0, hi = r->nhot;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->hot[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nhot && r->hot[lo] == id;
}

/* The new checkpoints being written: out[j] in folder tmp[j]. */
typedef struct outputs {
    const zp_cold_ops *ops;
    uint32_t n;
    zp_cold **db;
    char (*tmp)[2048];  /* the checkpoints' temporary names */
    char (*work)[2048]; /* the stores written, checkpointed into tmp */
    uint64_t *rows;     /* written to each */
    size_t len;         /* the record length (0 until the first record) */
} outputs;

/* Check one record read from checkpoint `from`: its value is a row record
 * (a record starts with its id; every record has one length). */
static int check_record(outputs *o, const char *from, uint64_t id, const void *val, size_t len,
                        char *err, size_t errlen)
{
    uint64_t head = 0;
    if (len >= sizeof head)
        memcpy(&head, val, sizeof head);
    if (len < sizeof head || head != id || (o->len != 0 && len != o->len))
        return zp_errors_set(err, errlen, ZEPS_EDATA,
                             "cold tier checkpoint '%s' is damaged: the record of id %" PRIu64
                             " (%zu bytes) is not a row record of its table",
                             from, id, len);
    o->len = len;
    return 0;
}

/* Every record of the checkpoint in `from` into the output its id hashes
 * to, but the out-of-date copies of hot rows. */
static int carry(const zp_rehash_job *r, outputs *o, const char *from, zp_rehash_counts *c,
                 char *err, size_t errlen)
{
    char why[1024];
    zp_cold *src = NULL;
    if (!is_dir(from))
        return zp_errors_set(err, errlen, ZEPS_EDATA, "cold tier checkpoint '%s' is missing", from);
    int rc = o->ops->open_read(&src, from, why, sizeof why);
    if (rc != 0)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "cold tier checkpoint '%s' is damaged: %s",
                             from, why);
    void *it = NULL;
    uint64_t id;
    const void *val;
    size_t len;
    while (rc == 0 && (rc = o->ops->iter_next(src, &it, &id, &val, &len, why, sizeof why)) == 1) {
        rc = 0;
        c->read++;
        if (is_hot(r, id)) {
            c->copies++;
            continue;
        }
        if ((rc = check_record(o, from, id, val, len, err, errlen)) != 0)
            break;
        uint32_t j = (uint32_t)zp_sparse_shard_of(id, (int)o->n);
        if (o->ops->put(o->db[j], id, val, len, why, sizeof why) != 0) {
            rc = zp_errors_set(err, errlen, ZEPS_EIO, "cannot write %s: %s", o->tmp[j], why);
            break;
        }
        o->rows[j]++;
        c->written++;
    }
    if (rc < 0)
        rc = zp_errors_set(err, errlen, ZEPS_EDATA, "cold tier checkpoint '%s' is damaged: %s",
                           from, why);
    o->ops->iter_free(src, &it);
    o->ops->close(&src);
    return rc;
}

/* The rows of the checkpoint written in `tmp`, read back (read-only). */
static int count_back(const zp_cold_ops *ops, const char *tmp, uint64_t *rows, char *err,
                      size_t errlen)
{
    zp_cold *db = NULL;
    int rc = ops->open_read(&db, tmp, err, errlen);
    void *it = NULL;
    uint64_t id;
    const void *val;
    size_t len;
    *rows = 0;
    while (rc == 0 && (rc = ops->iter_next(db, &it, &id, &val, &len, err, errlen)) == 1) {
        rc = 0;
        ++*rows;
    }
    ops->close(&db);
    return rc < 0 ? -rc : rc;
}

/* Written outputs made checkpoints under their temporary names (a
 * checkpoint flushes RocksDB's write buffer first, the log being off,
 * and links its files; the store written is then deleted), read back,
 * counted and renamed to their final names. */
static int finish(const zp_rehash_job *r, outputs *o, char *err, size_t errlen)
{
    char why[1024], final[2048];
    for (uint32_t j = 0; j < o->n; j++) {
        int rc = o->ops->checkpoint(o->db[j], o->tmp[j], why, sizeof why);
        o->ops->close(&o->db[j]);
        zp_folder_remove_flat(o->work[j]);
        if (rc != 0)
            return zp_errors_set(err, errlen, ZEPS_EIO, "cannot write %s: %s", o->tmp[j], why);
    }
    for (uint32_t j = 0; j < o->n; j++) {
        uint64_t back = 0;
        if (count_back(o->ops, o->tmp[j], &back, why, sizeof why) != 0 || back != o->rows[j])
            return zp_errors_set(err, errlen, ZEPS_EIO,
                                 "%s: %" PRIu64 " rows read back of %" PRIu64 " written %s",
                                 o->tmp[j], back, o->rows[j], why);
    }
    for (uint32_t j = 0; j < o->n; j++) {
        zp_rehash_checkpoint_path(final, sizeof final, r->dst_dir, r->setid, r->table, j, o->n);
        zp_folder_remove_flat(final); /* the same set written again */
        if (rename(o->tmp[j], final) == 0)
            continue;
        int rc = zp_errors_set(err, errlen, ZEPS_EIO, "cannot rename %s to %s: %s", o->tmp[j],
                               final, strerror(errno));
        for (uint32_t i = 0; i < j; i++) { /* all or none under their final names */
            zp_rehash_checkpoint_path(final, sizeof final, r->dst_dir, r->setid, r->table, i, o->n);
            zp_folder_remove_flat(final);
        }
        return rc;
    }
    for (uint32_t j = 0; j < o->n; j++)
        o->tmp[j][0] = '\0'; /* renamed */
    return 0;
}

/* Open the r->ndst outputs under their temporary names. */
static int open_outputs(const zp_rehash_job *r, outputs *o, char *err, size_t errlen)
{
    char why[1024];
    for (uint32_t j = 0; j < o->n; j++) {
        if (zp_rehash_checkpoint_path(o->tmp[j], sizeof o->tmp[j] - sizeof WORK_SUFFIX, r->dst_dir,
                                      r->setid, r->table, j, o->n) != 0)
            return zp_errors_set(err, errlen, ZEPS_EIO, "snapshot_dir '%s' is too long",
                                 r->dst_dir);
        snprintf(o->work[j], sizeof o->work[j], "%s" WORK_SUFFIX, o->tmp[j]);
        strcat(o->tmp[j], TMP_SUFFIX);
        zp_folder_remove_flat(o->tmp[j]); /* left by an earlier run that failed */
        zp_folder_remove_flat(o->work[j]);
        if (o->ops->open(&o->db[j], o->work[j], 0, why, sizeof why) != 0)
            return zp_errors_set(err, errlen, ZEPS_EIO, "cannot make %s: %s", o->work[j], why);
    }
    return 0;
}

int zp_rehash_write(const zp_rehash_job *r, zp_rehash_counts *counts, char *err, size_t errlen)
{
    outputs o = {.ops = &zp_rocks_ops, .n = r->ndst};
    o.db = zp_alloc_zeroed(r->ndst, sizeof *o.db);
    o.tmp = zp_alloc_zeroed(r->ndst, sizeof *o.tmp);
    o.work = zp_alloc_zeroed(r->ndst, sizeof *o.work);
    o.rows = zp_alloc_zeroed(r->ndst, sizeof *o.rows);
    zp_rehash_counts c = {0};
    int rc = open_outputs(r, &o, err, errlen);
    for (uint32_t k = 0; rc == 0 && k < r->nsrc; k++) {
        char from[2048];
        if (zp_rehash_checkpoint_path(from, sizeof from, r->src_dir, r->setid, r->table, k,
                                      r->nsrc) != 0)
            rc =
                zp_errors_set(err, errlen, ZEPS_EDATA, "snapshot_dir '%s' is too long", r->src_dir);
        else
            rc = carry(r, &o, from, &c, err, errlen);
    }
    if (rc == 0)
        rc = finish(r, &o, err, errlen);
    for (uint32_t j = 0; j < o.n; j++) { /* what is left on error */
        o.ops->close(&o.db[j]);
        if (o.work[j][0] != '\0')
            zp_folder_remove_flat(o.work[j]);
        if (o.tmp[j][0] != '\0')
            zp_folder_remove_flat(o.tmp[j]);
    }
    free(o.db);
    free(o.tmp);
    free(o.work);
    free(o.rows);
    if (rc == 0)
        *counts = c;
    return rc;
}
