/*
 * tier.c - the cold tier of one sparse table on this shard (tier.h): where
 * it lives, whose it is, and its rows going out and coming back, over the
 * store of cold.h.
 */
#include "tier.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "alloc.h"
#include "cold.h"
#include "errors.h"
#include "folder.h"
#include "log.h"
#include "seen.h"
#include "warm.h"
#include "zeps_errors.h"

#define ID_FILE "ZEPS-TIER"
/* The room a tier keeps free on its disk: 64 MiB (write buffers being
 * flushed) and a quarter of what the tier holds (a compaction rewrites
 * files before it deletes the old ones). RocksDB must never meet a full
 * disk: Debian's build aborts the process on a write after a failed one
 * (an assertion in its file writer, seen in test_full_disk). */
#define FREE_MIN   ((uint64_t)64 << 20)
#define FREE_EVERY 1024 /* demotions between two looks at the disk */
#define ID_MAGIC   "zeps cold tier 1"
/* Each of the two buffers of rows not yet written (warm.h): 8 MiB of
 * records without a budget (half a RocksDB write buffer, rocks.c, so one
 * buffer's sorted batch goes into one), a 64th of the store's share with
 * one (within its quarter for writes, rocks.c). */
#define WARM_BYTES ((uint64_t)8 << 20)

struct zp_tier {
    const zp_cold_ops *ops;
    zp_cold *db;
    zp_warm *warm; /* the rows not yet written to db */
    zp_seen *seen; /* the ids ever given to it (a table without memory_budget), or NULL */
    char path[1024];
    size_t rec;
    zp_tier_counters c;
    char error[1600]; /* the first failure ("" while none) */
    void *it;         /* zp_tier_scan's iteration, and its position */
    uint64_t it_pos;
    unsigned reads;     /* reads of other threads in flight (fetch.c), counted on the loop */
    atomic_int active;  /* ... of those, reading the store now (pool threads) */
    atomic_bool closed; /* the store is closed; the struct waits for reads to end */
    uint64_t *noted;    /* ids written or deleted meanwhile: an open-addressing set */
    bool *used;
    size_t ncap, nnoted;
};

static int drain(zp_tier *t);

/* The stores a tier may be kept in; the first is the default. */
static const zp_cold_ops *const stores[] = {&zp_rocks_ops};

static const zp_cold_ops *store_named(const char *name)
{
    for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++)
        if (name == NULL || strcmp(name, stores[i]->name) == 0)
            return stores[i];
    return NULL;
}

uint64_t zp_tier_share(uint64_t memory_budget)
{
    return memory_budget / 2;
}

int zp_tier_dir_check(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "tier_dir '%s': %s (it is not created: make it on the disk meant "
                             "for the cold tier, or unset tier_dir)",
                             dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "tier_dir '%s' is not a folder", dir);
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/.zeps-tier-probe-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "tier_dir '%s' takes no file: %s", dir,
                             strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

/* The identity file's text for w. */
static void identity(const zp_tier_where *w, char *buf, size_t len)
{
    snprintf(buf, len, ID_MAGIC "\ntable %s\nshard %d\ndim %u\nstate %u\nrecord %zu\n", w->table,
             w->shard, w->dim, w->spv, w->rec);
}

static int write_identity(const char *path, const zp_tier_where *w, char *err, size_t errlen)
{
    char file[1100], text[256];
    snprintf(file, sizeof file, "%s/" ID_FILE, path);
    identity(w, text, sizeof text);
    FILE *f = fopen(file, "w");
    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
        int e = errno;
        return zp_errors_set(err, errlen, ZEPS_EIO, "cold tier '%s': cannot write %s: %s", path,
                             ID_FILE, strerror(e));
    }
    return 0;
}

/* Whether folder `path` holds nothing. */
static bool empty_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)) != NULL)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* 1 if `path` is this table's own tier (a leftover), 0 if it is new or
 * empty, else an error: a file, a folder of something else, another
 * table's tier. */
static int whose(const char *path, const zp_tier_where *w, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (mkdir(path, 0755) == 0)
            return 0;
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "cold tier '%s': cannot make it: %s", path,
                             strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "cold tier '%s' is not a folder", path);
    char file[1100], want[256], have[256] = "";
    snprintf(file, sizeof file, "%s/" ID_FILE, path);
    FILE *f = fopen(file, "r");
    if (f == NULL)
        return empty_dir(path) ? 0
                               : zp_errors_set(err, errlen, ZEPS_ECONFIG,
                                               "cold tier '%s' holds files but no " ID_FILE
                                               ": not a zeps cold tier, left alone",
                                               path);
    size_t n = fread(have, 1, sizeof have - 1, f);
    fclose(f);
    have[n] = '\0';
    identity(w, want, sizeof want);
    if (strcmp(have, want) == 0)
        return 1;
    for (char *p = have; (p = strchr(p, '\n')) != NULL;)
        *p = ';';
    return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                         "cold tier '%s' belongs to another table or row layout (%s), not to "
                         "table '%s' shard %d (dim %u, %u state floats per value): left alone",
                         path, have, w->table, w->shard, w->dim, w->spv);
}

/* The tier's folder of w into path (len bytes); 0 or ZEPS_ECONFIG. */
static int tier_path(char *path, size_t len, const zp_tier_where *w, char *err, size_t errlen)
{
    if ((size_t)snprintf(path, len, "%s/tier-%s-shard-%d", w->dir, w->table, w->shard) >= len)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "tier_dir '%s' is too long", w->dir);
    return 0;
}

/* Open the store in `path` (its identity written) as a tier of w. */
/* Bytes free on the disk of `path` for an unprivileged writer. */
static uint64_t free_bytes(const char *path)
{
    struct statvfs v;
    if (statvfs(path, &v) != 0)
        return UINT64_MAX; /* unknown: the store's own errors still stop the tier */
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* 0 if `path`'s disk has the room a tier holding `held` bytes keeps free,
 * else ZEPS_EIO saying how much is free and needed. */
static int room_left(const char *path, uint64_t held, char *err, size_t errlen)
{
    uint64_t have = free_bytes(path), need = FREE_MIN + held / 4;
    if (have >= need)
        return 0;
    return zp_errors_set(err, errlen, ZEPS_EIO,
                         "the disk is full: %llu MiB free, a cold tier keeps %llu MiB free "
                         "(64 MiB and a quarter of the %llu MiB it holds)",
                         (unsigned long long)(have >> 20), (unsigned long long)(need >> 20),
                         (unsigned long long)(held >> 20));
}

static int open_at(zp_tier **out, const char *path, const zp_tier_where *w, char *err,
                   size_t errlen)
{
    const zp_cold_ops *ops = store_named(NULL);
    zp_cold *db = NULL;
    char why[400];
    int rc = room_left(path, 0, why, sizeof why);
    if (rc != 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "cold tier '%s': %s", path, why);
    rc = write_identity(path, w, err, errlen);
    if (rc == 0)
        rc = ops->open(&db, path, w->mem, err, errlen);
    if (rc != 0)
        return rc;
    zp_warm *warm = NULL;
    uint64_t wb = w->mem != 0 ? w->mem / 64 : WARM_BYTES;
    size_t cap = w->warm_rows != 0 ? w->warm_rows : (size_t)(wb / w->rec);
    rc = zp_warm_new(&warm, ops, db, w->rec, cap, err, errlen);
    if (rc != 0) {
        ops->close(&db);
        return rc;
    }
    zp_tier *t = zp_alloc_zeroed(1, sizeof(*t));
    t->ops = ops;
    t->db = db;
    t->warm = warm;
    t->rec = w->rec;
    t->c.mem_share = w->mem;
    /* A table bounded by memory_budget leaves new ids to RocksDB's own
     * filters, which its share bounds; this one grows with the cold ids. */
    if (w->mem == 0)
        zp_seen_new(&t->seen);
    snprintf(t->path, sizeof t->path, "%s", path);
    *out = t;
    return 0;
}

/* Delete this table's own leftover tier in `path` (its identity checked
 * by whose), leaving an empty folder. */
static int empty_tier(const char *path, char *err, size_t errlen)
{
    int rc = store_named(NULL)->destroy(path, err, errlen);
    if (rc == 0 && mkdir(path, 0755) != 0 && errno != EEXIST)
        rc = zp_errors_set(err, errlen, ZEPS_EIO, "cold tier '%s': %s", path, strerror(errno));
    return rc;
}

int zp_tier_open(zp_tier **out, const zp_tier_where *w, char *err, size_t errlen)
{
    char path[1024];
    int rc = tier_path(path, sizeof path, w, err, errlen);
    if (rc == 0)
        rc = whose(path, w, err, errlen);
    if (rc == 1) {
        zp_warn("cold tier '%s': rows a previous process of shard %d left (no snapshot restored "
                "them), deleted",
                path, w->shard);
        rc = empty_tier(path, err, errlen);
    }
    return rc == 0 ? open_at(out, path, w, err, errlen) : rc;
}

/* Copy every file of folder `from` into folder `to` (a checkpoint is flat). */
static int copy_files(const char *from, const char *to, char *err, size_t errlen)
{
    DIR *d = opendir(from);
    if (d == NULL)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "no cold tier checkpoint '%s': %s", from,
                             strerror(errno));
    int rc = 0;
    struct dirent *e;
    static char buf[1 << 16];
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char a[1400], b[1400];
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ssize_t n = 0;
        while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
            if (write(out, buf, (size_t)n) != n)
                n = -1;
        if (in < 0 || out < 0 || n < 0 || fsync(out) != 0)
            rc = zp_errors_set(err, errlen, ZEPS_EIO, "cannot copy %s to %s: %s", a, b,
                               strerror(errno));
        if (in >= 0)
            close(in);
        if (out >= 0)
            close(out);
    }
    closedir(d);
    return rc;
}

int zp_tier_restore(zp_tier **out, const zp_tier_where *w, const char *from, char *err,
                    size_t errlen)
{
    char path[1024];
    int rc = tier_path(path, sizeof path, w, err, errlen);
    if (rc == 0)
        rc = whose(path, w, err, errlen);
    if (rc == 1)
        rc = empty_tier(path, err, errlen);
    if (rc == 0)
        rc = copy_files(from, path, err, errlen);
    if (rc == 0)
        rc = open_at(out, path, w, err, errlen);
    if (rc != 0)
        return rc;
    zp_tier *t = *out; /* count what it holds */
    uint64_t id;
    const void *val;
    size_t len;
    void *it = NULL;
    while ((rc = t->ops->iter_next(t->db, &it, &id, &val, &len, err, errlen)) == 1) {
        t->c.rows++;
        if (t->seen != NULL)
            zp_seen_add(t->seen, id);
    }
    if (rc < 0) {
        zp_tier_close(out);
        return -rc;
    }
    zp_info("cold tier '%s': %llu rows restored from %s", path, (unsigned long long)t->c.rows,
            from);
    return 0;
}

int zp_tier_checkpoint(zp_tier *t, const char *dir, char *err, size_t errlen)
{
    char why[600];
    if (t->error[0])
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s", t->error);
    zp_folder_remove_flat(dir); /* a set taken again (the final one at the same cut) */
    if (drain(t) != 0)
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s", t->error);
    if (t->ops->checkpoint(t->db, dir, why, sizeof why) != 0)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cold tier '%s': checkpoint into %s: %s",
                             t->path, dir, why);
    return 0;
}

static void tier_free(zp_tier *t)
{
    free(t->noted);
    free(t->used);
    zp_seen_free(&t->seen);
    free(t);
}

/* The store closes once no pool thread reads it (a MultiGet: they end by
 * themselves); the struct is freed when the last read in flight has come
 * back to the loop (zp_tier_read_end), whose callback finds it closed. */
void zp_tier_close(zp_tier **tp)
{
    if (tp == NULL || *tp == NULL)
        return;
    zp_tier *t = *tp;
    atomic_store(&t->closed, true);
    while (atomic_load(&t->active) > 0)
        sched_yield();
    zp_warm_free(&t->warm);
    t->ops->iter_free(t->db, &t->it);
    t->ops->close(&t->db);
    if (t->reads == 0)
        tier_free(t);
    *tp = NULL;
}

const char *zp_tier_path(const zp_tier *t)
{
    return t->path;
}

const char *zp_tier_error(const zp_tier *t)
{
    return t->error[0] ? t->error : NULL;
}

/* Keep the first failure (rc != 0) and answer -1. */
static int failed(zp_tier *t, const char *what, const char *msg)
{
    if (!t->error[0])
        zp_errors_set(t->error, sizeof t->error, ZEPS_EIO, "cold tier '%s' failed to %s: %s",
                      t->path, what, msg);
    zp_error("%s", t->error);
    return -1;
}

/* ---------------------------------------------------------------- reads off the loop */

static size_t slot_of(uint64_t id, size_t mask)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (size_t)id & mask;
}

static void note_put(zp_tier *t, uint64_t id);

/* Every row held unwritten (warm.h) written to the store, for a scan or
 * a checkpoint: 0, or -1 (the tier failed: rows already gone from the
 * hot tier are lost with it, and the table refuses every request from
 * then on). */
static int drain(zp_tier *t)
{
    char err[600];
    if (t->error[0])
        return -1;
    return zp_warm_drain(t->warm, err, sizeof err) == 0 ? 0 : failed(t, "write rows", err);
}

/* The set twice as large, every id placed again. */
static void note_grow(zp_tier *t)
{
    uint64_t *old = t->noted;
    bool *oldu = t->used;
    size_t oldcap = t->ncap;
    t->ncap = oldcap ? 2 * oldcap : 1024;
    t->noted = zp_alloc(t->ncap * sizeof(uint64_t));
    t->used = zp_alloc_zeroed(t->ncap, sizeof(bool));
    t->nnoted = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (oldu[i])
            note_put(t, old[i]);
    free(old);
    free(oldu);
}

static void note_put(zp_tier *t, uint64_t id)
{
    if (2 * (t->nnoted + 1) > t->ncap)
        note_grow(t);
    size_t mask = t->ncap - 1, i = slot_of(id, mask);
    while (t->used[i] && t->noted[i] != id)
        i = (i + 1) & mask;
    if (!t->used[i]) {
        t->used[i] = true;
        t->noted[i] = id;
        t->nnoted++;
    }
}

/* An id written or deleted: noted while a read is in flight. */
static void note(zp_tier *t, uint64_t id)
{
    if (t->reads > 0)
        note_put(t, id);
}

void zp_tier_read_begin(zp_tier *t)
{
    t->reads++; /* the ids it reads are none of those held unwritten (zp_tier_held) */
}

void zp_tier_read_end(zp_tier *t, size_t ids)
{
    t->c.fetched += ids;
    if (--t->reads == 0 && atomic_load(&t->closed)) {
        tier_free(t);
        return;
    }
    if (t->reads == 0 && t->nnoted > 0) {
        memset(t->used, 0, t->ncap * sizeof(bool));
        t->nnoted = 0;
    }
}

bool zp_tier_touched(const zp_tier *t, uint64_t id)
{
    if (t->nnoted == 0)
        return false;
    size_t mask = t->ncap - 1, i = slot_of(id, mask);
    for (; t->used[i]; i = (i + 1) & mask)
        if (t->noted[i] == id)
            return true;
    return false;
}

int zp_tier_read_many(zp_tier *t, const uint64_t *ids, size_t n, void *recs, bool *found, char *err,
                      size_t errlen)
{
    atomic_fetch_add(&t->active, 1);
    int rc = atomic_load(&t->closed)
                 ? zp_errors_set(err, errlen, ZEPS_ECLOSED, "the cold tier was closed")
                 : t->ops->get_many(t->db, ids, n, recs, t->rec, found, err, errlen);
    atomic_fetch_sub(&t->active, 1);
    return rc;
}

size_t zp_tier_record_bytes(const zp_tier *t)
{
    return t->rec;
}

/* ---------------------------------------------------------------- rows */

int zp_tier_demote(zp_tier *t, uint64_t id, const void *rec)
{
    char err[400];
    if (t->error[0])
        return -1;
    if (t->c.demotions % FREE_EVERY == 0 &&
        room_left(t->path, t->ops->bytes(t->db), err, sizeof err) != 0)
        return failed(t, "write a row", err);
    note(t, id);
    if (zp_warm_put(t->warm, id, rec, err, sizeof err) != 0)
        return failed(t, "write a row", err);
    if (t->seen != NULL)
        zp_seen_add(t->seen, id);
    t->c.demotions++;
    t->c.rows++;
    return 0;
}

int zp_tier_fetch(zp_tier *t, uint64_t id, void *rec)
{
    char err[400];
    bool found = false;
    if (t->error[0])
        return -1;
    if (t->c.rows == 0)
        return 0; /* nothing there: no read */
    int held = zp_tier_held(t, id, rec);
    if (held != 0)
        return held > 0;
    if (!zp_tier_may_hold(t, id))
        return 0; /* never given: a new id, no read */
    if (t->ops->get_many(t->db, &id, 1, rec, t->rec, &found, err, sizeof err) != 0)
        return failed(t, "read a row", err);
    t->c.sync_reads += found;
    return found ? 1 : 0;
}

bool zp_tier_may_hold(zp_tier *t, uint64_t id)
{
    if (t->seen == NULL || zp_seen_may(t->seen, id))
        return true;
    t->c.unseen++;
    return false;
}

int zp_tier_held(zp_tier *t, uint64_t id, void *rec)
{
    const void *r = NULL;
    int got = zp_warm_get(t->warm, id, &r);
    if (got > 0)
        memcpy(rec, r, t->rec);
    return got;
}

void zp_tier_promoted(zp_tier *t, bool counted)
{
    t->c.rows--;
    t->c.promotions += counted;
}

int zp_tier_forget(zp_tier *t, uint64_t id, bool cold)
{
    char err[400];
    if (t->error[0])
        return -1;
    note(t, id);
    if (zp_warm_put(t->warm, id, NULL, err, sizeof err) != 0)
        return failed(t, "delete a row", err);
    t->c.rows -= cold;
    return 0;
}

void zp_tier_get_counters(const zp_tier *t, zp_tier_counters *out)
{
    *out = t->c;
    out->bytes = t->ops->bytes(t->db);
    zp_cold_memory m;
    t->ops->memory(t->db, &m);
    out->mem_write_buffers = m.write_buffers + zp_warm_bytes(t->warm);
    out->mem_table_readers = m.table_readers + (t->seen ? zp_seen_bytes(t->seen) : 0);
    out->mem_block_cache = m.block_cache;
}

int64_t zp_tier_scan(zp_tier *t, uint64_t *pos, uint64_t max, uint8_t *out)
{
    char err[400];
    if (t->error[0])
        return -1;
    if (drain(t) != 0)
        return -1;
    if (t->it == NULL || *pos != t->it_pos) { /* start over, skip to *pos */
        t->ops->iter_free(t->db, &t->it);
        t->it_pos = 0;
    }
    uint64_t n = 0, id;
    const void *val;
    size_t len;
    while (n < max) {
        int rc = t->ops->iter_next(t->db, &t->it, &id, &val, &len, err, sizeof err);
        if (rc < 0)
            return failed(t, "read its rows", err);
        if (rc == 0) {
            *pos = UINT64_MAX;
            return (int64_t)n;
        }
        if (t->it_pos++ < *pos)
            continue;
        if (len != t->rec)
            return failed(t, "read its rows", "a value is not a row record");
        memcpy(out + n++ * t->rec, val, len);
    }
    *pos = t->it_pos;
    return (int64_t)n;
}
