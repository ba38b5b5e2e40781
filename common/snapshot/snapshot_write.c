/*
 * snapshot_write.c - writes a snapshot file, and the durable-write helpers
 * (zp_snapshot_write_all, zp_snapshot_write_fsync_dir, zp_snapshot_write_replace_file) that the
 * manifest and resharding share; see snapshot.h and docs/snapshots.md.
 *
 * The writer may run in a fork()ed child of a threaded server, so it
 * allocates nothing and writes the float arrays straight from the caller's
 * memory (the child's copy-on-write view of the live slices). A file appears
 * whole or not at all: it is written to a temporary name, fsynced and renamed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "snapshot.h"
#include "snapshot_format.h"
#include "snapshot_io.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

/* Write all of buf, in chunks, through EINTR and short writes. 0 or errno. */
int zp_snapshot_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        size_t k = len > IO_CHUNK ? IO_CHUNK : len;
        ssize_t w = write(fd, p, k);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (w == 0)
            return EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int zp_snapshot_write_fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int rc = fsync(fd) < 0 ? errno : 0;
    close(fd);
    return rc;
}

/* The directory holding `path` ("." if none) into buf. */
static void parent_of(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        snprintf(buf, len, ".");
    else if (slash == buf)
        buf[1] = '\0';
    else
        *slash = '\0';
}

/* mkdir path if missing; when made, fsync its parent so the new entry is
 * durable before anything inside it is relied on. */
static int ensure_dir(const char *path, char *err, size_t errlen)
{
    if (mkdir(path, 0755) == 0) {
        char parent[PATH_MAX];
        parent_of(path, parent, sizeof(parent));
        int e = zp_snapshot_write_fsync_dir(parent);
        if (e)
            return zp_errors_set(err, errlen, ZEPS_EIO, "cannot fsync directory %s: %s", parent,
                                 strerror(e));
        return 0;
    }
    int e = errno;
    struct stat st;
    if (e == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    return zp_errors_set(err, errlen, ZEPS_EIO, "cannot create directory %s: %s", path,
                         e == EEXIST ? "exists and is not a directory" : strerror(e));
}

static uint64_t file_size_of(const zp_snapshot *s)
{
    uint64_t sz = FILE_HDR_LEN + SEC_HDR_LEN + pad8((uint64_t)s->nworker_recs * WREC_LEN);
    if (s->slotmap)
        sz += SEC_HDR_LEN + pad8(s->slotmap_len);
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_snap_table *t = &s->tables[i];
        uint64_t n = t->end - t->begin;
        sz += SEC_HDR_LEN + META_LEN;
        if (t->kind == 1) {
            sz += SEC_HDR_LEN + pad8(t->spec_len) + SEC_HDR_LEN + pad8(t->rows_len);
            continue;
        }
        sz += SEC_HDR_LEN + pad8(n * 4);
        sz += SEC_HDR_LEN + pad8(n * 4 * t->state_per_param);
    }
    return sz;
}

static void encode_header(uint8_t *b, const zp_snapshot *s, uint64_t size)
{
    memset(b, 0, FILE_HDR_LEN);
    memcpy(b, MAGIC, 8);
    /* format 1 unless there is a map to record: a default-map cluster
     * writes the files it always wrote, which every earlier build reads */
    zp_put32(b + 8, s->slotmap ? ZP_SNAP_FORMAT : ZP_SNAP_FORMAT_V1);
    zp_put32(b + 12, FILE_HDR_LEN);
    zp_put32(b + 16, s->h.shard);
    zp_put32(b + 20, s->h.nshards);
    zp_put32(b + 24, s->h.nworkers);
    zp_put32(b + 28, (s->slotmap ? 2 : 1) + 3 * s->ntables);
    zp_put64(b + 32, s->h.setid);
    zp_put64(b + 40, (uint64_t)s->h.clock);
    zp_put64(b + 48, s->h.incarnation);
    zp_put64(b + 56, s->h.created_ns);
    zp_put64(b + 64, size);
    memcpy(b + 72, s->h.consistency, strnlen(s->h.consistency, 15));
    zp_put32(b + 88, s->ntables);
    zp_put32(b + 92, s->nworker_recs);
    if (s->slotmap) /* the map's epoch, also in the header: inspect shows it */
        zp_put64(b + 96, zp_get64(s->slotmap));
    zp_put32(b + 124, zp_snapshot_crc32c(b, 124));
}

static void encode_meta(uint8_t *b, const zp_snap_table *t)
{
    memset(b, 0, META_LEN);
    memcpy(b, t->name, strnlen(t->name, 63));
    memcpy(b + 64, t->optimizer, strnlen(t->optimizer, 15));
    zp_put32(b + 80, t->kind);
    zp_put32(b + 84, t->init);
    zp_put64(b + 88, t->length);
    zp_put64(b + 96, t->begin);
    zp_put64(b + 104, t->end);
    putf(b + 112, t->hyper.lr);
    putf(b + 116, t->hyper.momentum);
    putf(b + 120, t->hyper.beta1);
    putf(b + 124, t->hyper.beta2);
    putf(b + 128, t->hyper.eps);
    putf(b + 132, t->hyper.weight_decay);
    putd(b + 136, t->init_scale);
    zp_put64(b + 144, t->seed);
    zp_put32(b + 152, t->has_staleness ? 1 : 0);
    zp_put32(b + 156, t->staleness);
    zp_put64(b + 160, t->version);
    zp_put64(b + 168, (uint64_t)t->round);
    zp_put32(b + 176, t->state_per_param);
    putf(b + 180, t->lr_now);
}

/* Section header, payload straight from `payload`, zero padding. 0 or errno. */
static int put_section(int fd, uint32_t type, uint32_t index, const void *payload, uint64_t len)
{
    static const uint8_t zeros[8];
    uint8_t h[SEC_HDR_LEN];
    zp_put32(h, type);
    zp_put32(h + 4, index);
    zp_put64(h + 8, len);
    zp_put32(h + 16, zp_snapshot_crc32c(payload, len));
    zp_put32(h + 20, zp_snapshot_crc32c(h, 20));
    int e = zp_snapshot_write_all(fd, h, sizeof(h));
    if (!e && len)
        e = zp_snapshot_write_all(fd, payload, len);
    if (!e && pad8(len) != len)
        e = zp_snapshot_write_all(fd, zeros, pad8(len) - len);
    return e;
}

static int write_body(int fd, const zp_snapshot *s)
{
    uint8_t b[FILE_HDR_LEN > META_LEN ? FILE_HDR_LEN : META_LEN];
    encode_header(b, s, file_size_of(s));
    int e = zp_snapshot_write_all(fd, b, FILE_HDR_LEN);
    if (!e && s->slotmap) /* format 2: section 0 is the slot map */
        e = put_section(fd, SEC_SLOTMAP, 0, s->slotmap, s->slotmap_len);

    /* Worker records go through a small stack buffer, 64 at a time, with
     * the CRC chained over the chunks: no heap in a fork()ed child. */
    uint64_t wlen = (uint64_t)s->nworker_recs * WREC_LEN;
    uint8_t rec[64 * WREC_LEN];
    uint32_t raw = 0xffffffffu;
    for (int pass = 0; pass < 2 && !e; pass++) {
        if (pass == 1) {
            uint8_t h[SEC_HDR_LEN];
            zp_put32(h, SEC_WORKERS);
            zp_put32(h + 4, 0);
            zp_put64(h + 8, wlen);
            zp_put32(h + 16, ~raw);
            zp_put32(h + 20, zp_snapshot_crc32c(h, 20));
            e = zp_snapshot_write_all(fd, h, sizeof(h));
        }
        for (uint32_t i = 0; i < s->nworker_recs && !e; i += 64) {
            uint32_t k = s->nworker_recs - i < 64 ? s->nworker_recs - i : 64;
            memset(rec, 0, sizeof(rec));
            for (uint32_t j = 0; j < k; j++) {
                const zp_snap_worker *w = &s->workers[i + j];
                uint8_t *r = rec + j * WREC_LEN;
                zp_put32(r, w->rank);
                zp_put32(r + 4, (w->joined ? 1u : 0u) | (w->left ? 2u : 0u));
                zp_put64(r + 8, w->incarnation);
                zp_put64(r + 16, (uint64_t)w->clock);
                zp_put64(r + 24, w->max_seq);
                zp_put64(r + 32, w->window);
            }
            if (pass == 0)
                raw = zp_snapshot_crc_raw(raw, rec, (size_t)k * WREC_LEN);
            else
                e = zp_snapshot_write_all(fd, rec, (size_t)k * WREC_LEN);
        }
    }
    /* wlen is a multiple of 48, so of 8: no padding. */

    for (uint32_t i = 0; i < s->ntables && !e; i++) {
        const zp_snap_table *t = &s->tables[i];
        uint64_t n = t->end - t->begin;
        encode_meta(b, t);
        e = put_section(fd, SEC_META, i, b, META_LEN);
        if (t->kind == 1) {
            if (!e)
                e = put_section(fd, SEC_SPARSE_SPEC, i, t->spec, t->spec_len);
            if (!e)
                e = put_section(fd, SEC_SPARSE_ROWS, i, t->rows, t->rows_len);
            continue;
        }
        if (!e)
            e = put_section(fd, SEC_PARAMS, i, t->params, n * 4);
        if (!e)
            e = put_section(fd, SEC_STATE, i, t->state, n * 4 * t->state_per_param);
    }
    return e;
}

int zp_snapshot_write_replace_file(const char *tmp, const char *path, const char *dir,
                                   const char *label, int (*fill)(int fd, const void *arg),
                                   const void *arg, char *err, size_t errlen)
{
    int e = 0;
    const char *what = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        e = errno;
    } else {
        what = "write";
        e = fill(fd, arg);
        if (!e && fsync(fd) < 0) {
            e = errno;
            what = "fsync";
        }
        if (close(fd) < 0 && !e) {
            e = errno;
            what = "close";
        }
    }
    if (!e && rename(tmp, path) < 0) {
        e = errno;
        what = "rename";
    }
    if (e) {
        unlink(tmp);
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s %s: %s failed: %s", label, path, what,
                             strerror(e));
    }
    /* The rename is durable only once the directory entry is. */
    if ((e = zp_snapshot_write_fsync_dir(dir)))
        return zp_errors_set(err, errlen, ZEPS_EIO, "%s %s: fsync of directory %s failed: %s",
                             label, path, dir, strerror(e));
    return 0;
}

static int fill_body(int fd, const void *arg)
{
    return write_body(fd, arg);
}

int zp_snapshot_write(const char *dir, const zp_snapshot *s, char *path_out, size_t path_len,
                      char *err, size_t errlen)
{
    int rc = zp_snapshot_validate(s, err, errlen);
    if (rc)
        return rc;
    char setdir[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX];
    int n = snprintf(setdir, sizeof(setdir), "%s/set-%016" PRIx64, dir, s->h.setid);
    if (n < 0 || (size_t)n >= sizeof(setdir) ||
        zp_snapshot_path(path, sizeof(path), dir, s->h.setid, s->h.shard, s->h.nshards) ||
        snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
    if ((rc = ensure_dir(dir, err, errlen)) || (rc = ensure_dir(setdir, err, errlen)))
        return rc;

    if ((rc = zp_snapshot_write_replace_file(tmp, path, setdir, "snapshot", fill_body, s, err,
                                             errlen)))
        return rc;
    if (path_out && path_len)
        snprintf(path_out, path_len, "%s", path);
    return 0;
}
