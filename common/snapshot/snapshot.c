/*
 * snapshot.c - snapshot files: the record, writing and reading; see
 * snapshot.h and docs/snapshots.md (the byte layout is documented there,
 * and the constants below must agree with it). The manifest is manifest.c,
 * resharding reshard.c.
 *
 * Shaped around two constraints. The writer may run in a fork()ed child of a
 * threaded server, so it allocates nothing and writes the float arrays
 * straight from the caller's memory (the child's copy-on-write view of the
 * live slices). The reader trusts nothing in the file: every length is
 * checked against the file size before it is used for a read or an
 * allocation, and every byte that is used is covered by a CRC32C (ISA-L's
 * crc32_iscsi: a library CRC, hardware-accelerated where the CPU has it).
 */
#include "snapshot.h"
#include "snapshot_io.h"
#include "sparse_hash.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "util.h"
#include "zeps_errors.h"

/* The format is little-endian and float arrays are written as they lie in
 * memory, so this build only runs on little-endian hosts (x86-64, arm64). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "snapshot format assumes little-endian");

#define MAGIC        "ZEPSSNAP"
#define FILE_HDR_LEN 128u
#define SEC_HDR_LEN  24u
#define META_LEN     184u
#define WREC_LEN     48u

enum {
    SEC_WORKERS = 1,
    SEC_META = 2,
    SEC_PARAMS = 3,
    SEC_STATE = 4,
    SEC_SPARSE_SPEC = 5, /* sparse table: its declaration */
    SEC_SPARSE_ROWS = 6, /* sparse table: its rows and counters */
};

#define IO_CHUNK     ((size_t)1 << 30) /* largest single read/write/CRC call */
#define SCRATCH      ((size_t)1 << 20) /* verify's streaming buffer */
#define MANIFEST_MAX ((size_t)16 << 20)

/* ---- little helpers ---- */

static void putf(uint8_t *p, float v)
{
    memcpy(p, &v, 4);
}
static void putd(uint8_t *p, double v)
{
    memcpy(p, &v, 8);
}
static float getf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}
static double getd(const uint8_t *p)
{
    double v;
    memcpy(&v, p, 8);
    return v;
}

static uint64_t pad8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/* CRC32C in its standard form (init and final xor ~0). ISA-L's crc32_iscsi
 * does neither itself, so raw values chain across calls; it takes a
 * non-const pointer but only reads, and an int length, hence the chunks. */
static uint32_t crc_raw(uint32_t raw, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        size_t k = n > IO_CHUNK ? IO_CHUNK : n;
        raw = crc32_iscsi((unsigned char *)b, (int)k, raw);
        b += k;
        n -= k;
    }
    return raw;
}

uint32_t zp_snap_crc32c(const void *p, size_t n)
{
    return ~crc_raw(0xffffffffu, p, n);
}

/* Bounded string field: true if s has a NUL within cap bytes and is non-empty
 * (or may be empty when allow_empty). */
static bool str_ok(const char *s, size_t cap, bool allow_empty)
{
    size_t n = strnlen(s, cap);
    return n < cap && (allow_empty || n > 0);
}


int zp_snapshot_path(char *buf, size_t len, const char *dir, uint64_t setid, uint32_t shard,
                     uint32_t nshards)
{
    int n = snprintf(buf, len, "%s/set-%016" PRIx64 "/shard-%u-of-%u.zsnap", dir, setid, shard,
                     nshards);
    return n < 0 || (size_t)n >= len ? ZEPS_EINVAL : 0;
}

/* ---- the record ---- */

zp_snapshot *zp_snapshot_new(uint32_t ntables, uint32_t nworker_recs)
{
    zp_snapshot *s = zp_xcalloc(1, sizeof(*s));
    s->h.format = ZP_SNAP_FORMAT;
    s->h.nshards = 1;
    s->h.clock = -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->h.created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    s->ntables = ntables;
    s->tables = zp_xcalloc(ntables ? ntables : 1, sizeof(zp_snap_table));
    s->nworker_recs = nworker_recs;
    s->workers = zp_xcalloc(nworker_recs ? nworker_recs : 1, sizeof(zp_snap_worker));
    return s;
}

void zp_snapshot_free(zp_snapshot **sp)
{
    if (!sp || !*sp)
        return;
    zp_snapshot *s = *sp;
    for (uint32_t i = 0; i < s->ntables; i++) {
        free(s->tables[i].owned);
        free(s->tables[i].owned_bytes);
    }
    free(s->tables);
    free(s->workers);
    free(s);
    *sp = NULL;
}

/* The checks a table's description must pass, on write and on read. Writes
 * a message without prefix into err. */
static int check_table_meta(const zp_snap_table *t, uint32_t shard, uint32_t nshards, char *err,
                            size_t errlen)
{
    if (!str_ok(t->name, sizeof(t->name), false))
        return zp_seterr(err, errlen, ZEPS_EINVAL, "table name empty or not terminated");
    if (!str_ok(t->optimizer, sizeof(t->optimizer), false))
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "table '%s': optimizer name empty or not terminated", t->name);
    if (t->kind > 1)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "table '%s': kind %u (0 dense and 1 sparse are known)", t->name, t->kind);
    if (t->state_per_param > ZP_SNAP_MAX_STATE)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "table '%s': %u state floats per parameter (max %u)", t->name,
                         t->state_per_param, ZP_SNAP_MAX_STATE);
    if (t->kind == 1) {
        if (t->length == 0 || t->length > 4096 || t->begin != 0 || t->end != 0)
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "sparse table '%s': dim %" PRIu64 " (1..4096), slice [%" PRIu64
                             ", %" PRIu64 ") (must be empty)",
                             t->name, t->length, t->begin, t->end);
        return 0;
    }
    if (t->length == 0)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "table '%s': length 0", t->name);
    uint64_t b = zp_slice_at(t->length, shard, nshards), e = zp_slice_at(t->length, shard + 1, nshards);
    if (t->begin != b || t->end != e)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "table '%s': slice [%" PRIu64 ", %" PRIu64 ") is not shard %u of %u of "
                         "length %" PRIu64 " ([%" PRIu64 ", %" PRIu64 "))",
                         t->name, t->begin, t->end, shard, nshards, t->length, b, e);
    if (t->state_per_param > ZP_SNAP_MAX_STATE)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "table '%s': %u state floats per parameter (max %u)", t->name,
                         t->state_per_param, ZP_SNAP_MAX_STATE);
    return 0;
}

/* A sparse table's spec and rows: sizes agree with the header and the meta,
 * and every row belongs to shard `shard` of `nshards`. */
static int check_rows(const zp_snap_table *t, uint32_t shard, uint32_t nshards, char *err,
                      size_t errlen)
{
    if (!t->spec || t->spec_len == 0 || t->spec_len > ZP_SNAP_MAX_SPEC)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "sparse table '%s': declaration of %" PRIu64
                         " bytes (1..%u)", t->name, t->spec_len, ZP_SNAP_MAX_SPEC);
    if (!t->rows || t->rows_len < ZP_SNAP_ROWS_HDR)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "sparse table '%s': rows section of %" PRIu64
                         " bytes, shorter than its header", t->name, t->rows_len);
    uint64_t nrows = zp_get64(t->rows), rec = ZP_SNAP_ROW_LEN(t->length, t->state_per_param);
    if (zp_get32(t->rows + 8) != t->length || zp_get32(t->rows + 12) != t->state_per_param)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "sparse table '%s': rows of dim %u and %u state floats per value, the "
                         "meta says %" PRIu64 " and %u",
                         t->name, zp_get32(t->rows + 8), zp_get32(t->rows + 12), t->length,
                         t->state_per_param);
    if (nrows > (t->rows_len - ZP_SNAP_ROWS_HDR) / rec ||
        ZP_SNAP_ROWS_HDR + nrows * rec != t->rows_len)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "sparse table '%s': %" PRIu64 " rows of %" PRIu64 " bytes do not fill %" PRIu64
                         " bytes",
                         t->name, nrows, rec, t->rows_len - ZP_SNAP_ROWS_HDR);
    for (uint64_t i = 0; i < nrows; i++) {
        uint64_t id = zp_get64(t->rows + ZP_SNAP_ROWS_HDR + i * rec);
        if ((uint32_t)zp_sparse_shard_of(id, (int)nshards) != shard)
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "sparse table '%s': row %" PRIu64 " (id %" PRIu64
                             ") belongs to shard %d, not %u of %u",
                             t->name, i, id, zp_sparse_shard_of(id, (int)nshards), shard, nshards);
    }
    return 0;
}

static int check_header(const zp_snap_header *h, char *err, size_t errlen)
{
    if (h->nshards == 0 || h->shard >= h->nshards)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "shard %u of %u", h->shard, h->nshards);
    if (!str_ok(h->consistency, sizeof(h->consistency), true))
        return zp_seterr(err, errlen, ZEPS_EINVAL, "consistency name not terminated");
    return 0;
}

int zp_snapshot_validate(const zp_snapshot *s, char *err, size_t errlen)
{
    char m[384];
    int rc = check_header(&s->h, m, sizeof(m));
    for (uint32_t i = 0; !rc && i < s->ntables; i++) {
        const zp_snap_table *t = &s->tables[i];
        rc = check_table_meta(t, s->h.shard, s->h.nshards, m, sizeof(m));
        if (!rc && t->kind == 1)
            rc = check_rows(t, s->h.shard, s->h.nshards, m, sizeof(m));
        size_t n = (size_t)(t->end - t->begin);
        if (!rc && n && !t->params)
            rc = zp_seterr(m, sizeof(m), ZEPS_EINVAL, "table '%s': no parameters", t->name);
        if (!rc && n && t->state_per_param && !t->state)
            rc = zp_seterr(m, sizeof(m), ZEPS_EINVAL, "table '%s': no optimizer state", t->name);
    }
    for (uint32_t i = 0; !rc && i < s->nworker_recs; i++)
        if (s->workers[i].rank >= s->h.nworkers)
            rc = zp_seterr(m, sizeof(m), ZEPS_EINVAL, "worker record %u: rank %u of %u workers", i,
                           s->workers[i].rank, s->h.nworkers);
    if (rc)
        return zp_seterr(err, errlen, rc, "snapshot of shard %u of %u: %s", s->h.shard,
                         s->h.nshards, m);
    return 0;
}

/* ---- writing ---- */

/* Write all of buf, in chunks, through EINTR and short writes. 0 or errno. */
int zp_snap_write_all(int fd, const void *buf, size_t len)
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

int zp_snap_fsync_dir(const char *path)
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
        int e = zp_snap_fsync_dir(parent);
        if (e)
            return zp_seterr(err, errlen, ZEPS_EIO, "cannot fsync directory %s: %s", parent,
                             strerror(e));
        return 0;
    }
    int e = errno;
    struct stat st;
    if (e == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    return zp_seterr(err, errlen, ZEPS_EIO, "cannot create directory %s: %s", path,
                     e == EEXIST ? "exists and is not a directory" : strerror(e));
}

static uint64_t file_size_of(const zp_snapshot *s)
{
    uint64_t sz = FILE_HDR_LEN + SEC_HDR_LEN + pad8((uint64_t)s->nworker_recs * WREC_LEN);
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
    zp_put32(b + 8, ZP_SNAP_FORMAT);
    zp_put32(b + 12, FILE_HDR_LEN);
    zp_put32(b + 16, s->h.shard);
    zp_put32(b + 20, s->h.nshards);
    zp_put32(b + 24, s->h.nworkers);
    zp_put32(b + 28, 1 + 3 * s->ntables);
    zp_put64(b + 32, s->h.setid);
    zp_put64(b + 40, (uint64_t)s->h.clock);
    zp_put64(b + 48, s->h.incarnation);
    zp_put64(b + 56, s->h.created_ns);
    zp_put64(b + 64, size);
    memcpy(b + 72, s->h.consistency, strnlen(s->h.consistency, 15));
    zp_put32(b + 88, s->ntables);
    zp_put32(b + 92, s->nworker_recs);
    zp_put32(b + 124, zp_snap_crc32c(b, 124));
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
}

/* Section header, payload straight from `payload`, zero padding. 0 or errno. */
static int put_section(int fd, uint32_t type, uint32_t index, const void *payload, uint64_t len)
{
    static const uint8_t zeros[8];
    uint8_t h[SEC_HDR_LEN];
    zp_put32(h, type);
    zp_put32(h + 4, index);
    zp_put64(h + 8, len);
    zp_put32(h + 16, zp_snap_crc32c(payload, len));
    zp_put32(h + 20, zp_snap_crc32c(h, 20));
    int e = zp_snap_write_all(fd, h, sizeof(h));
    if (!e && len)
        e = zp_snap_write_all(fd, payload, len);
    if (!e && pad8(len) != len)
        e = zp_snap_write_all(fd, zeros, pad8(len) - len);
    return e;
}

static int write_body(int fd, const zp_snapshot *s)
{
    uint8_t b[FILE_HDR_LEN > META_LEN ? FILE_HDR_LEN : META_LEN];
    encode_header(b, s, file_size_of(s));
    int e = zp_snap_write_all(fd, b, FILE_HDR_LEN);

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
            zp_put32(h + 20, zp_snap_crc32c(h, 20));
            e = zp_snap_write_all(fd, h, sizeof(h));
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
                raw = crc_raw(raw, rec, (size_t)k * WREC_LEN);
            else
                e = zp_snap_write_all(fd, rec, (size_t)k * WREC_LEN);
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

int zp_snap_replace_file(const char *tmp, const char *path, const char *dir, const char *label,
                         int (*fill)(int fd, const void *arg), const void *arg, char *err,
                         size_t errlen)
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
        return zp_seterr(err, errlen, ZEPS_EIO, "%s %s: %s failed: %s", label, path, what,
                         strerror(e));
    }
    /* The rename is durable only once the directory entry is. */
    if ((e = zp_snap_fsync_dir(dir)))
        return zp_seterr(err, errlen, ZEPS_EIO, "%s %s: fsync of directory %s failed: %s", label,
                         path, dir, strerror(e));
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
        return zp_seterr(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
    if ((rc = ensure_dir(dir, err, errlen)) || (rc = ensure_dir(setdir, err, errlen)))
        return rc;

    if ((rc = zp_snap_replace_file(tmp, path, setdir, "snapshot", fill_body, s, err, errlen)))
        return rc;
    if (path_out && path_len)
        snprintf(path_out, path_len, "%s", path);
    return 0;
}

/* ---- reading ---- */

typedef struct rd {
    int fd;
    const char *path;
    uint64_t size;
    uint64_t pos;     /* next section header */
    int k;            /* next section's number, from 0 */
    uint8_t *scratch; /* verify only */
    char *err;
    size_t errlen;
} rd;

#define RD_FAIL(r, code, ...) rd_fail((r), (code), __VA_ARGS__)

__attribute__((format(printf, 3, 4))) static int rd_fail(rd *r, int code, const char *fmt, ...)
{
    char m[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    return zp_seterr(r->err, r->errlen, code, "snapshot %s: %s", r->path, m);
}

/* pread exactly len bytes at off, through EINTR and short reads. */
static int rd_at(rd *r, uint64_t off, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        size_t k = len > IO_CHUNK ? IO_CHUNK : len;
        ssize_t got = pread(r->fd, p, k, (off_t)off);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return RD_FAIL(r, ZEPS_EIO, "read at offset %" PRIu64 " failed: %s", off,
                           strerror(errno));
        }
        if (got == 0)
            return RD_FAIL(r, ZEPS_EDATA,
                           "unexpected end of file at offset %" PRIu64
                           " (did it shrink while being read?)",
                           off);
        p += got;
        off += (uint64_t)got;
        len -= (size_t)got;
    }
    return 0;
}

int zp_snap_read_file(int fd, const char *path, void *buf, size_t len, char *err, size_t errlen)
{
    rd r = {.fd = fd, .path = path, .err = err, .errlen = errlen};
    return rd_at(&r, 0, buf, len);
}

static int decode_header(rd *r, zp_snap_info *info, uint32_t *nsections)
{
    uint8_t b[FILE_HDR_LEN];
    if (r->size < 16) {
        if (r->size >= 8 && rd_at(r, 0, b, 8) == 0 && memcmp(b, MAGIC, 8) != 0)
            return RD_FAIL(r, ZEPS_EDATA, "bad magic: not a zeps snapshot");
        return RD_FAIL(r, ZEPS_EDATA, "truncated: %" PRIu64 " bytes, too short for a header",
                       r->size);
    }
    int rc = rd_at(r, 0, b, r->size < FILE_HDR_LEN ? (size_t)r->size : FILE_HDR_LEN);
    if (rc)
        return rc;
    if (memcmp(b, MAGIC, 8) != 0)
        return RD_FAIL(r, ZEPS_EDATA, "bad magic: not a zeps snapshot");
    uint32_t format = zp_get32(b + 8), hlen = zp_get32(b + 12);
    /* The version is read before the CRC: a newer format may lay its header
     * out differently, and "too new" is the useful message then. */
    if (format == 0 || format > ZP_SNAP_FORMAT)
        return RD_FAIL(r, ZEPS_EVERSION, "format version %u, this build reads version %u", format,
                       ZP_SNAP_FORMAT);
    if (hlen != FILE_HDR_LEN)
        return RD_FAIL(r, ZEPS_EDATA, "header length %u, expected %u", hlen, FILE_HDR_LEN);
    if (r->size < FILE_HDR_LEN)
        return RD_FAIL(r, ZEPS_EDATA, "truncated: %" PRIu64 " bytes, shorter than the header",
                       r->size);
    if (zp_snap_crc32c(b, 124) != zp_get32(b + 124))
        return RD_FAIL(r, ZEPS_EDATA, "header CRC mismatch");
    uint64_t stated = zp_get64(b + 64);
    if (stated != r->size)
        return RD_FAIL(r, ZEPS_EDATA, "%s: file is %" PRIu64 " bytes, header says %" PRIu64,
                       stated > r->size ? "truncated" : "trailing bytes", r->size, stated);

    zp_snap_info in;
    memset(&in, 0, sizeof(in));
    in.h.format = format;
    in.h.shard = zp_get32(b + 16);
    in.h.nshards = zp_get32(b + 20);
    in.h.nworkers = zp_get32(b + 24);
    *nsections = zp_get32(b + 28);
    in.h.setid = zp_get64(b + 32);
    in.h.clock = (int64_t)zp_get64(b + 40);
    in.h.incarnation = zp_get64(b + 48);
    in.h.created_ns = zp_get64(b + 56);
    memcpy(in.h.consistency, b + 72, 16);
    in.ntables = zp_get32(b + 88);
    in.nworker_recs = zp_get32(b + 92);
    in.file_size = r->size;
    in.header_crc = zp_get32(b + 124);

    char m[256];
    if (check_header(&in.h, m, sizeof(m)))
        return RD_FAIL(r, ZEPS_EDATA, "header: %s", m);
    /* Bound the counts by the file size before anything is allocated. */
    if (in.ntables > r->size / (3 * SEC_HDR_LEN + META_LEN) || *nsections != 1 + 3 * in.ntables)
        return RD_FAIL(r, ZEPS_EDATA, "header: %u sections for %u tables in %" PRIu64 " bytes",
                       *nsections, in.ntables, r->size);
    if (in.nworker_recs > r->size / WREC_LEN)
        return RD_FAIL(r, ZEPS_EDATA, "header: %u worker records cannot fit in %" PRIu64 " bytes",
                       in.nworker_recs, r->size);
    *info = in;
    return 0;
}

/* Read and check the next section header; on success *len is the payload
 * length (checked against the file) and *crc the payload's stated CRC. */
static int sec_begin(rd *r, uint32_t type, uint32_t index, const char *label, uint64_t *len,
                     uint32_t *crc)
{
    uint8_t h[SEC_HDR_LEN];
    if (r->pos > r->size || r->size - r->pos < SEC_HDR_LEN)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section %d (%s): header at offset %" PRIu64
                       " runs past the end of the file (%" PRIu64 " bytes)",
                       r->k, label, r->pos, r->size);
    int rc = rd_at(r, r->pos, h, sizeof(h));
    if (rc)
        return rc;
    if (zp_snap_crc32c(h, 20) != zp_get32(h + 20))
        return RD_FAIL(r, ZEPS_EDATA, "section %d (%s) header CRC mismatch", r->k, label);
    if (zp_get32(h) != type || zp_get32(h + 4) != index)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section %d (%s): type %u index %u, expected type %u index %u", r->k, label,
                       zp_get32(h), zp_get32(h + 4), type, index);
    uint64_t l = zp_get64(h + 8), room = r->size - r->pos - SEC_HDR_LEN;
    if (l > room || pad8(l) > room)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section %d (%s): payload of %" PRIu64
                       " bytes runs past the end of the file",
                       r->k, label, l);
    *len = l;
    *crc = zp_get32(h + 16);
    return 0;
}

/* Read the payload of the current section into dst (or, if dst is NULL,
 * through the scratch buffer), check its CRC and padding, and move on. */
static int sec_payload(rd *r, const char *label, void *dst, uint64_t len, uint32_t crc)
{
    uint64_t off = r->pos + SEC_HDR_LEN;
    uint32_t raw = 0xffffffffu;
    int rc = 0;
    if (dst) {
        rc = rd_at(r, off, dst, (size_t)len);
        if (!rc)
            raw = crc_raw(raw, dst, (size_t)len);
    } else {
        for (uint64_t done = 0; !rc && done < len;) {
            size_t k = len - done > SCRATCH ? SCRATCH : (size_t)(len - done);
            rc = rd_at(r, off + done, r->scratch, k);
            if (!rc)
                raw = crc_raw(raw, r->scratch, k);
            done += k;
        }
    }
    if (rc)
        return rc;
    if (~raw != crc)
        return RD_FAIL(r, ZEPS_EDATA, "section %d (%s) CRC mismatch", r->k, label);
    uint8_t pad[8] = {0};
    size_t npad = (size_t)(pad8(len) - len);
    if (npad && (rc = rd_at(r, off + len, pad, npad)))
        return rc;
    for (size_t i = 0; i < npad; i++)
        if (pad[i])
            return RD_FAIL(r, ZEPS_EDATA, "section %d (%s): nonzero padding", r->k, label);
    r->pos = off + pad8(len);
    r->k++;
    return 0;
}

static void decode_meta(const uint8_t *b, zp_snap_table *t)
{
    memset(t, 0, sizeof(*t));
    memcpy(t->name, b, 64);
    memcpy(t->optimizer, b + 64, 16);
    t->kind = zp_get32(b + 80);
    t->init = zp_get32(b + 84);
    t->length = zp_get64(b + 88);
    t->begin = zp_get64(b + 96);
    t->end = zp_get64(b + 104);
    t->hyper.lr = getf(b + 112);
    t->hyper.momentum = getf(b + 116);
    t->hyper.beta1 = getf(b + 120);
    t->hyper.beta2 = getf(b + 124);
    t->hyper.eps = getf(b + 128);
    t->hyper.weight_decay = getf(b + 132);
    t->init_scale = getd(b + 136);
    t->seed = zp_get64(b + 144);
    t->has_staleness = zp_get32(b + 152) != 0;
    t->staleness = zp_get32(b + 156);
    t->version = zp_get64(b + 160);
    t->round = (int64_t)zp_get64(b + 168);
    t->state_per_param = zp_get32(b + 176);
}

static int read_workers(rd *r, const zp_snap_info *in, zp_snapshot *s)
{
    uint64_t len;
    uint32_t crc;
    int rc = sec_begin(r, SEC_WORKERS, 0, "workers", &len, &crc);
    if (rc)
        return rc;
    if (len != (uint64_t)in->nworker_recs * WREC_LEN)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section %d (workers): %" PRIu64 " bytes, expected %u records of %u", r->k,
                       len, in->nworker_recs, WREC_LEN);
    uint8_t *buf = malloc(len ? (size_t)len : 1);
    if (!buf)
        return RD_FAIL(r, ZEPS_ENOMEM, "no memory for %u worker records", in->nworker_recs);
    rc = sec_payload(r, "workers", buf, len, crc);
    for (uint32_t i = 0; !rc && i < in->nworker_recs; i++) {
        const uint8_t *p = buf + (size_t)i * WREC_LEN;
        zp_snap_worker w = {
            .rank = zp_get32(p),
            .joined = zp_get32(p + 4) & 1u,
            .left = (zp_get32(p + 4) & 2u) != 0,
            .incarnation = zp_get64(p + 8),
            .clock = (int64_t)zp_get64(p + 16),
            .max_seq = zp_get64(p + 24),
            .window = zp_get64(p + 32),
        };
        if (w.rank >= in->h.nworkers)
            rc = RD_FAIL(r, ZEPS_EDATA, "section %d (workers): record %u has rank %u of %u workers",
                         r->k - 1, i, w.rank, in->h.nworkers);
        else if (s)
            s->workers[i] = w;
    }
    free(buf);
    return rc;
}

/* The declaration and rows of sparse table i (its meta read into *t). */
static int read_sparse(rd *r, const zp_snap_info *in, uint32_t i, zp_snap_table *t,
                       zp_snapshot *s)
{
    char label[96];
    uint64_t len[2];
    uint32_t crc;
    const uint32_t types[2] = {SEC_SPARSE_SPEC, SEC_SPARSE_ROWS};
    const char *what[2] = {"declaration", "rows"};
    uint8_t *mem[2] = {NULL, NULL};
    int rc = 0;
    for (int q = 0; q < 2 && !rc; q++) {
        snprintf(label, sizeof(label), "sparse table '%s' %s", t->name, what[q]);
        rc = sec_begin(r, types[q], i, label, &len[q], &crc);
        if (!rc && q == 0 && (len[q] == 0 || len[q] > ZP_SNAP_MAX_SPEC))
            rc = RD_FAIL(r, ZEPS_EDATA, "section %d (%s): %" PRIu64 " bytes (1..%u)", r->k, label,
                         len[q], ZP_SNAP_MAX_SPEC);
        /* sec_begin bounded len by the file; the rows are read to check them */
        if (!rc && !(mem[q] = malloc((size_t)len[q] + 1)))
            rc = RD_FAIL(r, ZEPS_ENOMEM, "%s: no memory for %" PRIu64 " bytes", label, len[q]);
        if (!rc)
            rc = sec_payload(r, label, mem[q], len[q], crc);
    }
    if (!rc) {
        t->spec = mem[0];
        t->spec_len = len[0];
        t->rows = mem[1];
        t->rows_len = len[1];
        char m[320];
        if (check_rows(t, in->h.shard, in->h.nshards, m, sizeof(m)))
            rc = RD_FAIL(r, ZEPS_EDATA, "section %d (%s): %s", r->k - 1, label, m);
    }
    if (rc || !s) {
        free(mem[0]);
        free(mem[1]);
        return rc;
    }
    /* one allocation owns both: spec then rows */
    uint8_t *both = malloc((size_t)(len[0] + len[1]) + 1);
    if (!both) {
        free(mem[0]);
        free(mem[1]);
        return RD_FAIL(r, ZEPS_ENOMEM, "sparse table '%s': no memory", t->name);
    }
    memcpy(both, mem[0], len[0]);
    memcpy(both + len[0], mem[1], len[1]);
    free(mem[0]);
    free(mem[1]);
    t->owned_bytes = both;
    t->spec = both;
    t->rows = both + len[0];
    s->tables[i] = *t;
    return 0;
}

/* Meta, params and state of table i. With s, into s->tables[i] (allocating
 * the floats); without, only checked. */
static int read_table(rd *r, const zp_snap_info *in, uint32_t i, zp_snapshot *s)
{
    char label[96];
    uint64_t len;
    uint32_t crc;
    uint8_t b[META_LEN];
    snprintf(label, sizeof(label), "table #%u meta", i);
    int rc = sec_begin(r, SEC_META, i, label, &len, &crc);
    if (rc)
        return rc;
    if (len != META_LEN)
        return RD_FAIL(r, ZEPS_EDATA, "section %d (%s): %" PRIu64 " bytes, expected %u", r->k,
                       label, len, META_LEN);
    if ((rc = sec_payload(r, label, b, len, crc)))
        return rc;
    zp_snap_table t;
    decode_meta(b, &t);
    char m[320];
    if (check_table_meta(&t, in->h.shard, in->h.nshards, m, sizeof(m)))
        return RD_FAIL(r, ZEPS_EDATA, "section %d (%s): %s", r->k - 1, label, m);

    if (t.kind == 1)
        return read_sparse(r, in, i, &t, s);
    uint64_t n = t.end - t.begin, spp = t.state_per_param;
    /* Bound the allocation by what is left of the file (n <= size/4 first,
     * so the product cannot overflow: spp <= ZP_SNAP_MAX_STATE). */
    if (n > r->size / 4 || n * 4 * (1 + spp) > r->size - r->pos)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section %d (table '%s' params): %" PRIu64
                       " floats of parameters and state run past the end of the file",
                       r->k, t.name, n * (1 + spp));
    float *mem = NULL;
    if (s) {
        mem = malloc((size_t)(n * (1 + spp) * 4) + 4);
        if (!mem)
            return RD_FAIL(r, ZEPS_ENOMEM, "table '%s': no memory for %" PRIu64 " floats", t.name,
                           n * (1 + spp));
    }
    const uint32_t types[2] = {SEC_PARAMS, SEC_STATE};
    const char *what[2] = {"params", "optimizer state"};
    for (int q = 0; q < 2 && !rc; q++) {
        uint64_t want = n * 4 * (q ? spp : 1);
        snprintf(label, sizeof(label), "table '%s' %s", t.name, what[q]);
        rc = sec_begin(r, types[q], i, label, &len, &crc);
        if (!rc && len != want)
            rc = RD_FAIL(r, ZEPS_EDATA, "section %d (%s): %" PRIu64 " bytes, expected %" PRIu64,
                         r->k, label, len, want);
        if (!rc)
            rc = sec_payload(r, label, mem ? mem + (q ? n : 0) : NULL, len, crc);
    }
    if (rc) {
        free(mem);
        return rc;
    }
    if (s) {
        t.owned = mem;
        t.params = mem;
        t.state = spp ? mem + n : NULL;
        s->tables[i] = t;
    }
    return 0;
}

/* The one parser behind read, verify and read_info. */
static int parse(const char *path, zp_snapshot **out, zp_snap_info *info, bool header_only,
                 char *err, size_t errlen)
{
    rd r = {.fd = -1, .path = path, .err = err, .errlen = errlen};
    r.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r.fd < 0)
        return zp_seterr(err, errlen, ZEPS_EIO, "snapshot %s: cannot open: %s", path,
                         strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(r.fd, &st) < 0)
        rc = RD_FAIL(&r, ZEPS_EIO, "cannot stat: %s", strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = RD_FAIL(&r, ZEPS_EIO, "not a regular file");
    r.size = (uint64_t)st.st_size;
    zp_snap_info in;
    uint32_t nsec = 0;
    if (!rc)
        rc = decode_header(&r, &in, &nsec);
    zp_snapshot *s = NULL;
    if (!rc && !header_only) {
        r.pos = FILE_HDR_LEN;
        if (out) {
            s = zp_snapshot_new(in.ntables, in.nworker_recs);
            s->h = in.h;
            s->ntables = 0; /* counts the tables read so far, for free on error */
        } else if (!(r.scratch = malloc(SCRATCH))) {
            rc = RD_FAIL(&r, ZEPS_ENOMEM, "no memory for a read buffer");
        }
        if (!rc)
            rc = read_workers(&r, &in, s);
        for (uint32_t i = 0; !rc && i < in.ntables; i++) {
            rc = read_table(&r, &in, i, s);
            if (!rc && s)
                s->ntables = i + 1;
        }
        if (!rc && r.pos != r.size)
            rc =
                RD_FAIL(&r, ZEPS_EDATA, "%" PRIu64 " bytes after the last section", r.size - r.pos);
    }
    free(r.scratch);
    close(r.fd);
    if (rc) {
        zp_snapshot_free(&s);
        return rc;
    }
    if (info)
        *info = in;
    if (out)
        *out = s;
    return 0;
}

int zp_snapshot_read(const char *path, zp_snapshot **out, char *err, size_t errlen)
{
    return parse(path, out, NULL, false, err, errlen);
}

int zp_snapshot_verify(const char *path, zp_snap_info *info, char *err, size_t errlen)
{
    return parse(path, NULL, info, false, err, errlen);
}

int zp_snapshot_read_info(const char *path, zp_snap_info *info, char *err, size_t errlen)
{
    return parse(path, NULL, info, true, err, errlen);
}
