/*
 * snapshot.c - snapshot files, the manifest and resharding; see snapshot.h
 * and docs/snapshots.md (the byte layout is documented there, and the
 * constants below must agree with it).
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

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}
static void putf(uint8_t *p, float v)
{
    memcpy(p, &v, 4);
}
static void putd(uint8_t *p, double v)
{
    memcpy(p, &v, 8);
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
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

static uint32_t crc32c(const void *p, size_t n)
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

static uint64_t slice_at(uint64_t length, uint32_t k, uint32_t S)
{
    return (uint64_t)((unsigned __int128)length * k / S);
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
    uint64_t b = slice_at(t->length, shard, nshards), e = slice_at(t->length, shard + 1, nshards);
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
    uint64_t nrows = get64(t->rows), rec = ZP_SNAP_ROW_LEN(t->length, t->state_per_param);
    if (get32(t->rows + 8) != t->length || get32(t->rows + 12) != t->state_per_param)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "sparse table '%s': rows of dim %u and %u state floats per value, the "
                         "meta says %" PRIu64 " and %u",
                         t->name, get32(t->rows + 8), get32(t->rows + 12), t->length,
                         t->state_per_param);
    if (nrows > (t->rows_len - ZP_SNAP_ROWS_HDR) / rec ||
        ZP_SNAP_ROWS_HDR + nrows * rec != t->rows_len)
        return zp_seterr(err, errlen, ZEPS_EINVAL,
                         "sparse table '%s': %" PRIu64 " rows of %" PRIu64 " bytes do not fill %" PRIu64
                         " bytes",
                         t->name, nrows, rec, t->rows_len - ZP_SNAP_ROWS_HDR);
    for (uint64_t i = 0; i < nrows; i++) {
        uint64_t id = get64(t->rows + ZP_SNAP_ROWS_HDR + i * rec);
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
static int write_all(int fd, const void *buf, size_t len)
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

static int fsync_dir(const char *path)
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
        int e = fsync_dir(parent);
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
    put32(b + 8, ZP_SNAP_FORMAT);
    put32(b + 12, FILE_HDR_LEN);
    put32(b + 16, s->h.shard);
    put32(b + 20, s->h.nshards);
    put32(b + 24, s->h.nworkers);
    put32(b + 28, 1 + 3 * s->ntables);
    put64(b + 32, s->h.setid);
    put64(b + 40, (uint64_t)s->h.clock);
    put64(b + 48, s->h.incarnation);
    put64(b + 56, s->h.created_ns);
    put64(b + 64, size);
    memcpy(b + 72, s->h.consistency, strnlen(s->h.consistency, 15));
    put32(b + 88, s->ntables);
    put32(b + 92, s->nworker_recs);
    put32(b + 124, crc32c(b, 124));
}

static void encode_meta(uint8_t *b, const zp_snap_table *t)
{
    memset(b, 0, META_LEN);
    memcpy(b, t->name, strnlen(t->name, 63));
    memcpy(b + 64, t->optimizer, strnlen(t->optimizer, 15));
    put32(b + 80, t->kind);
    put32(b + 84, t->init);
    put64(b + 88, t->length);
    put64(b + 96, t->begin);
    put64(b + 104, t->end);
    putf(b + 112, t->hyper.lr);
    putf(b + 116, t->hyper.momentum);
    putf(b + 120, t->hyper.beta1);
    putf(b + 124, t->hyper.beta2);
    putf(b + 128, t->hyper.eps);
    putf(b + 132, t->hyper.weight_decay);
    putd(b + 136, t->init_scale);
    put64(b + 144, t->seed);
    put32(b + 152, t->has_staleness ? 1 : 0);
    put32(b + 156, t->staleness);
    put64(b + 160, t->version);
    put64(b + 168, (uint64_t)t->round);
    put32(b + 176, t->state_per_param);
}

/* Section header, payload straight from `payload`, zero padding. 0 or errno. */
static int put_section(int fd, uint32_t type, uint32_t index, const void *payload, uint64_t len)
{
    static const uint8_t zeros[8];
    uint8_t h[SEC_HDR_LEN];
    put32(h, type);
    put32(h + 4, index);
    put64(h + 8, len);
    put32(h + 16, crc32c(payload, len));
    put32(h + 20, crc32c(h, 20));
    int e = write_all(fd, h, sizeof(h));
    if (!e && len)
        e = write_all(fd, payload, len);
    if (!e && pad8(len) != len)
        e = write_all(fd, zeros, pad8(len) - len);
    return e;
}

static int write_body(int fd, const zp_snapshot *s)
{
    uint8_t b[FILE_HDR_LEN > META_LEN ? FILE_HDR_LEN : META_LEN];
    encode_header(b, s, file_size_of(s));
    int e = write_all(fd, b, FILE_HDR_LEN);

    /* Worker records go through a small stack buffer, 64 at a time, with
     * the CRC chained over the chunks: no heap in a fork()ed child. */
    uint64_t wlen = (uint64_t)s->nworker_recs * WREC_LEN;
    uint8_t rec[64 * WREC_LEN];
    uint32_t raw = 0xffffffffu;
    for (int pass = 0; pass < 2 && !e; pass++) {
        if (pass == 1) {
            uint8_t h[SEC_HDR_LEN];
            put32(h, SEC_WORKERS);
            put32(h + 4, 0);
            put64(h + 8, wlen);
            put32(h + 16, ~raw);
            put32(h + 20, crc32c(h, 20));
            e = write_all(fd, h, sizeof(h));
        }
        for (uint32_t i = 0; i < s->nworker_recs && !e; i += 64) {
            uint32_t k = s->nworker_recs - i < 64 ? s->nworker_recs - i : 64;
            memset(rec, 0, sizeof(rec));
            for (uint32_t j = 0; j < k; j++) {
                const zp_snap_worker *w = &s->workers[i + j];
                uint8_t *r = rec + j * WREC_LEN;
                put32(r, w->rank);
                put32(r + 4, (w->joined ? 1u : 0u) | (w->left ? 2u : 0u));
                put64(r + 8, w->incarnation);
                put64(r + 16, (uint64_t)w->clock);
                put64(r + 24, w->max_seq);
                put64(r + 32, w->window);
            }
            if (pass == 0)
                raw = crc_raw(raw, rec, (size_t)k * WREC_LEN);
            else
                e = write_all(fd, rec, (size_t)k * WREC_LEN);
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

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return zp_seterr(err, errlen, ZEPS_EIO, "cannot create %s: %s", tmp, strerror(errno));
    int e = write_body(fd, s);
    const char *what = "write";
    if (!e && fsync(fd) < 0) {
        e = errno;
        what = "fsync";
    }
    if (close(fd) < 0 && !e) {
        e = errno;
        what = "close";
    }
    if (!e && rename(tmp, path) < 0) {
        e = errno;
        what = "rename";
    }
    if (e) {
        unlink(tmp);
        return zp_seterr(err, errlen, ZEPS_EIO, "snapshot %s: %s failed: %s", path, what,
                         strerror(e));
    }
    /* The rename is durable only once the directory entry is. */
    if ((e = fsync_dir(setdir)))
        return zp_seterr(err, errlen, ZEPS_EIO, "snapshot %s: fsync of directory %s failed: %s",
                         path, setdir, strerror(e));
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
    uint32_t format = get32(b + 8), hlen = get32(b + 12);
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
    if (crc32c(b, 124) != get32(b + 124))
        return RD_FAIL(r, ZEPS_EDATA, "header CRC mismatch");
    uint64_t stated = get64(b + 64);
    if (stated != r->size)
        return RD_FAIL(r, ZEPS_EDATA, "%s: file is %" PRIu64 " bytes, header says %" PRIu64,
                       stated > r->size ? "truncated" : "trailing bytes", r->size, stated);

    zp_snap_info in;
    memset(&in, 0, sizeof(in));
    in.h.format = format;
    in.h.shard = get32(b + 16);
    in.h.nshards = get32(b + 20);
    in.h.nworkers = get32(b + 24);
    *nsections = get32(b + 28);
    in.h.setid = get64(b + 32);
    in.h.clock = (int64_t)get64(b + 40);
    in.h.incarnation = get64(b + 48);
    in.h.created_ns = get64(b + 56);
    memcpy(in.h.consistency, b + 72, 16);
    in.ntables = get32(b + 88);
    in.nworker_recs = get32(b + 92);
    in.file_size = r->size;
    in.header_crc = get32(b + 124);

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
    if (crc32c(h, 20) != get32(h + 20))
        return RD_FAIL(r, ZEPS_EDATA, "section %d (%s) header CRC mismatch", r->k, label);
    if (get32(h) != type || get32(h + 4) != index)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section %d (%s): type %u index %u, expected type %u index %u", r->k, label,
                       get32(h), get32(h + 4), type, index);
    uint64_t l = get64(h + 8), room = r->size - r->pos - SEC_HDR_LEN;
    if (l > room || pad8(l) > room)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section %d (%s): payload of %" PRIu64
                       " bytes runs past the end of the file",
                       r->k, label, l);
    *len = l;
    *crc = get32(h + 16);
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
    t->kind = get32(b + 80);
    t->init = get32(b + 84);
    t->length = get64(b + 88);
    t->begin = get64(b + 96);
    t->end = get64(b + 104);
    t->hyper.lr = getf(b + 112);
    t->hyper.momentum = getf(b + 116);
    t->hyper.beta1 = getf(b + 120);
    t->hyper.beta2 = getf(b + 124);
    t->hyper.eps = getf(b + 128);
    t->hyper.weight_decay = getf(b + 132);
    t->init_scale = getd(b + 136);
    t->seed = get64(b + 144);
    t->has_staleness = get32(b + 152) != 0;
    t->staleness = get32(b + 156);
    t->version = get64(b + 160);
    t->round = (int64_t)get64(b + 168);
    t->state_per_param = get32(b + 176);
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
            .rank = get32(p),
            .joined = get32(p + 4) & 1u,
            .left = (get32(p + 4) & 2u) != 0,
            .incarnation = get64(p + 8),
            .clock = (int64_t)get64(p + 16),
            .max_seq = get64(p + 24),
            .window = get64(p + 32),
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

/* ---- resharding ---- */

static int same_table(const zp_snap_table *a, const zp_snap_table *b)
{
    return strcmp(a->name, b->name) == 0 && strcmp(a->optimizer, b->optimizer) == 0 &&
           a->kind == b->kind && a->length == b->length &&
           memcmp(&a->hyper, &b->hyper, sizeof(a->hyper)) == 0 && a->init == b->init &&
           a->init_scale == b->init_scale && a->seed == b->seed &&
           a->has_staleness == b->has_staleness && a->staleness == b->staleness &&
           a->state_per_param == b->state_per_param &&
           (a->kind != 1 ||
            (a->spec_len == b->spec_len && memcmp(a->spec, b->spec, a->spec_len) == 0));
}

/* Sparse table i of shard `shard` of `nshards`: every source row whose id
 * hashes there (rows are re-hashed, not re-cut); counters summed over the
 * sources go to shard 0 (they describe the table's history, not a shard's).
 * On success t->rows/owned_bytes hold the new spec and rows. */
static int reshard_sparse(const zp_snapshot *const *src, uint32_t nsrc, uint32_t i,
                          uint32_t shard, uint32_t nshards, zp_snap_table *t)
{
    uint64_t rec = ZP_SNAP_ROW_LEN(t->length, t->state_per_param), nrows = 0;
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snap_table *u = &src[k]->tables[i];
        uint64_t n = get64(u->rows);
        for (uint64_t j = 0; j < n; j++)
            nrows += (uint32_t)zp_sparse_shard_of(get64(u->rows + ZP_SNAP_ROWS_HDR + j * rec),
                                                  (int)nshards) == shard;
    }
    uint64_t rows_len = ZP_SNAP_ROWS_HDR + nrows * rec;
    uint8_t *mem = malloc((size_t)(t->spec_len + rows_len));
    if (!mem)
        return ZEPS_ENOMEM;
    memcpy(mem, t->spec, t->spec_len);
    uint8_t *rows = mem + t->spec_len, *at = rows + ZP_SNAP_ROWS_HDR;
    memset(rows, 0, ZP_SNAP_ROWS_HDR);
    put64(rows, nrows);
    put32(rows + 8, (uint32_t)t->length);
    put32(rows + 12, t->state_per_param);
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snap_table *u = &src[k]->tables[i];
        for (int c = 0; c < 5 && shard == 0; c++)
            put64(rows + 16 + 8 * c, get64(rows + 16 + 8 * c) + get64(u->rows + 16 + 8 * c));
        uint64_t n = get64(u->rows);
        for (uint64_t j = 0; j < n; j++) {
            const uint8_t *r = u->rows + ZP_SNAP_ROWS_HDR + j * rec;
            if ((uint32_t)zp_sparse_shard_of(get64(r), (int)nshards) != shard)
                continue;
            memcpy(at, r, (size_t)rec);
            at += rec;
        }
    }
    t->owned = NULL;
    t->params = t->state = NULL;
    t->owned_bytes = mem;
    t->spec = mem;
    t->rows = rows;
    t->rows_len = rows_len;
    return 0;
}

static int reshard_check(const zp_snapshot *const *src, uint32_t nsrc, char *err, size_t errlen)
{
    if (nsrc == 0)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "reshard: no source snapshots");
    const zp_snapshot *a = src[0];
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snapshot *b = src[k];
        if (!b)
            return zp_seterr(err, errlen, ZEPS_EINVAL, "reshard: source %u missing", k);
        int rc = zp_snapshot_validate(b, err, errlen);
        if (rc)
            return rc;
        if (b->h.shard != k || b->h.nshards != nsrc)
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "reshard: source %u is shard %u of %u, expected %u of %u", k,
                             b->h.shard, b->h.nshards, k, nsrc);
        if (b->h.setid != a->h.setid || b->h.clock != a->h.clock ||
            b->h.nworkers != a->h.nworkers || strcmp(b->h.consistency, a->h.consistency) != 0)
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "reshard: shard %u (set %016" PRIx64 ", clock %" PRId64
                             ") is not from the same cut as shard 0 (set %016" PRIx64
                             ", clock %" PRId64 ")",
                             k, b->h.setid, b->h.clock, a->h.setid, a->h.clock);
        if (b->ntables != a->ntables)
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "reshard: shard %u has %u tables, shard 0 %u", k, b->ntables,
                             a->ntables);
        for (uint32_t i = 0; i < a->ntables; i++)
            if (!same_table(&a->tables[i], &b->tables[i]))
                return zp_seterr(
                    err, errlen, ZEPS_EINVAL,
                    "reshard: table %u of shard %u ('%s') differs from shard 0's ('%s')", i, k,
                    b->tables[i].name, a->tables[i].name);
    }
    return 0;
}

/* Copy block q of the new slice [b2, e2) of table i from the sources. */
static void reshard_block(const zp_snapshot *const *src, uint32_t nsrc, uint32_t i, int q,
                          float *dst, uint64_t b2, uint64_t e2)
{
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snap_table *t = &src[k]->tables[i];
        uint64_t lo = t->begin > b2 ? t->begin : b2, hi = t->end < e2 ? t->end : e2;
        if (lo >= hi)
            continue;
        uint64_t nk = t->end - t->begin;
        const float *from = q < 0 ? t->params : t->state + (uint64_t)q * nk;
        memcpy(dst + (lo - b2), from + (lo - t->begin), (size_t)(hi - lo) * sizeof(float));
    }
}

int zp_snapshot_reshard(const zp_snapshot *const *src, uint32_t nsrc, uint32_t shard,
                        uint32_t nshards, zp_snapshot **out, char *err, size_t errlen)
{
    if (nshards == 0 || shard >= nshards)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "reshard: shard %u of %u", shard, nshards);
    int rc = reshard_check(src, nsrc, err, errlen);
    if (rc)
        return rc;
    const zp_snapshot *a = src[0];

    /* Workers merged per rank (ranks < nworkers, checked by validate). */
    uint32_t N = a->h.nworkers;
    zp_snap_worker *m = calloc(N ? N : 1, sizeof(*m));
    bool *have = calloc(N ? N : 1, sizeof(*have));
    if (!m || !have) {
        free(m);
        free(have);
        return zp_seterr(err, errlen, ZEPS_ENOMEM, "reshard: no memory for %u workers", N);
    }
    uint32_t nrec = 0;
    for (uint32_t k = 0; k < nsrc; k++)
        for (uint32_t j = 0; j < src[k]->nworker_recs; j++) {
            const zp_snap_worker *w = &src[k]->workers[j];
            zp_snap_worker *x = &m[w->rank];
            if (!have[w->rank]) {
                have[w->rank] = true;
                nrec++;
                *x = *w;
                continue;
            }
            if (w->clock > x->clock)
                x->clock = w->clock;
            if (w->incarnation > x->incarnation)
                x->incarnation = w->incarnation;
            x->left = x->left && w->left;
        }

    zp_snapshot *s = zp_snapshot_new(a->ntables, nrec);
    s->h = a->h;
    s->h.shard = shard;
    s->h.nshards = nshards;
    for (uint32_t k = 0; k < nsrc; k++) {
        if (src[k]->h.incarnation > s->h.incarnation)
            s->h.incarnation = src[k]->h.incarnation;
        if (src[k]->h.created_ns > s->h.created_ns)
            s->h.created_ns = src[k]->h.created_ns;
    }
    for (uint32_t r = 0, j = 0; r < N; r++) {
        if (!have[r])
            continue;
        /* The duplicate windows are per (worker, shard) sequence numbers of
         * the old layout: meaningless here. Not joined forces a fresh HELLO
         * before this shard accepts anything from the worker. */
        m[r].joined = false;
        m[r].max_seq = 0;
        m[r].window = 0;
        s->workers[j++] = m[r];
    }
    free(m);
    free(have);

    s->ntables = 0; /* counts tables built, for free on error */
    for (uint32_t i = 0; i < a->ntables; i++) {
        zp_snap_table t = a->tables[i];
        if (t.kind == 1) {
            t.owned = NULL;
            t.owned_bytes = NULL;
            for (uint32_t k = 0; k < nsrc; k++) {
                if (src[k]->tables[i].version > t.version)
                    t.version = src[k]->tables[i].version;
                if (src[k]->tables[i].round > t.round)
                    t.round = src[k]->tables[i].round;
            }
            if (reshard_sparse(src, nsrc, i, shard, nshards, &t) != 0) {
                zp_snapshot_free(&s);
                return zp_seterr(err, errlen, ZEPS_ENOMEM, "reshard: table '%s': no memory",
                                 t.name);
            }
            s->tables[i] = t;
            s->ntables = i + 1;
            continue;
        }
        t.begin = slice_at(t.length, shard, nshards);
        t.end = slice_at(t.length, shard + 1, nshards);
        uint64_t n = t.end - t.begin, spp = t.state_per_param;
        for (uint32_t k = 0; k < nsrc; k++) {
            const zp_snap_table *u = &src[k]->tables[i];
            if (u->version > t.version)
                t.version = u->version;
            if (u->round > t.round)
                t.round = u->round;
        }
        float *mem = malloc((size_t)(n * (1 + spp) * 4) + 4);
        if (!mem) {
            zp_snapshot_free(&s);
            return zp_seterr(err, errlen, ZEPS_ENOMEM, "reshard: table '%s': no memory", t.name);
        }
        reshard_block(src, nsrc, i, -1, mem, t.begin, t.end);
        for (uint64_t q = 0; q < spp; q++)
            reshard_block(src, nsrc, i, (int)q, mem + n * (1 + q), t.begin, t.end);
        t.owned = mem;
        t.params = mem;
        t.state = spp ? mem + n : NULL;
        s->tables[i] = t;
        s->ntables = i + 1;
    }
    *out = s;
    return 0;
}

/* ---- the manifest ---- */

/*
 * Text, one record per line, ending in a CRC32C of everything before the
 * last line:
 *   zeps-manifest 1
 *   set <setid:016x> shards <S> clock <clock> created <ns>
 *   file <name> <size> <header crc:08x>        (S lines, by shard)
 *   ...
 *   crc32c <08x>
 */

void zp_manifest_free(zp_manifest **mp)
{
    if (!mp || !*mp)
        return;
    for (size_t i = 0; i < (*mp)->nsets; i++)
        free((*mp)->sets[i].files);
    free((*mp)->sets);
    free(*mp);
    *mp = NULL;
}

const zp_snap_set *zp_manifest_newest(const zp_manifest *m)
{
    return m && m->nsets ? &m->sets[0] : NULL;
}

static int manifest_path(char *buf, size_t len, const char *dir, const char *leaf)
{
    int n = snprintf(buf, len, "%s/%s", dir, leaf);
    return n < 0 || (size_t)n >= len ? ZEPS_EINVAL : 0;
}

/* Next line of text[*pos..end) into line (without '\n'); false at the end. */
static bool next_line(const char *text, size_t end, size_t *pos, char *line, size_t cap)
{
    if (*pos >= end)
        return false;
    const char *nl = memchr(text + *pos, '\n', end - *pos);
    size_t n = nl ? (size_t)(nl - (text + *pos)) : end - *pos;
    size_t c = n < cap - 1 ? n : cap - 1;
    memcpy(line, text + *pos, c);
    line[c] = '\0';
    *pos += n + (nl ? 1 : 0);
    return true;
}

static int manifest_parse(const char *path, const char *text, size_t size, zp_manifest *m,
                          char *err, size_t errlen)
{
#define BAD(...) zp_seterr(err, errlen, ZEPS_EDATA, "manifest " __VA_ARGS__)
    /* The last line is the CRC of everything before it. */
    if (size == 0 || text[size - 1] != '\n')
        return BAD("%s: truncated (no final newline)", path);
    size_t last = size - 1;
    while (last > 0 && text[last - 1] != '\n')
        last--;
    unsigned crc;
    char tail[32];
    if (sscanf(text + last, "crc32c %8x%1[\n]", &crc, tail) != 2)
        return BAD("%s: no crc32c line at the end (truncated?)", path);
    if (crc32c(text, last) != crc)
        return BAD("%s: CRC mismatch", path);

    char line[256], name[128], canon[sizeof(((zp_snap_file *)0)->name)];
    size_t pos = 0, cap = 0;
    unsigned ver;
    if (!next_line(text, last, &pos, line, sizeof(line)) ||
        sscanf(line, "zeps-manifest %u", &ver) != 1 || ver != 1)
        return BAD("%s: first line is not 'zeps-manifest 1'", path);
    while (next_line(text, last, &pos, line, sizeof(line))) {
        uint64_t setid, created;
        int64_t clock;
        unsigned S;
        if (sscanf(line, "set %" SCNx64 " shards %u clock %" SCNd64 " created %" SCNu64, &setid, &S,
                   &clock, &created) != 4 ||
            S == 0 || S > 1u << 20)
            return BAD("%s: bad line '%s'", path, line);
        if (m->nsets == cap) {
            cap = cap ? 2 * cap : 8;
            m->sets = zp_xrealloc(m->sets, cap * sizeof(zp_snap_set));
        }
        zp_snap_set *set = &m->sets[m->nsets++];
        *set = (zp_snap_set){.setid = setid, .nshards = S, .clock = clock, .created_ns = created};
        set->files = zp_xcalloc(S, sizeof(zp_snap_file));
        if (m->nsets > 1 && setid >= m->sets[m->nsets - 2].setid)
            return BAD("%s: set %016" PRIx64 " out of order", path, setid);
        for (unsigned i = 0; i < S; i++) {
            zp_snap_file *f = &set->files[i];
            unsigned hc;
            snprintf(canon, sizeof(canon), "set-%016" PRIx64 "/shard-%u-of-%u.zsnap", setid, i, S);
            if (!next_line(text, last, &pos, line, sizeof(line)) ||
                sscanf(line, "file %127s %" SCNu64 " %8x", name, &f->size, &hc) != 3 ||
                strcmp(name, canon) != 0)
                return BAD("%s: set %016" PRIx64 ": expected the line of %s", path, setid, canon);
            memcpy(f->name, canon, sizeof(canon));
            f->header_crc = hc;
        }
    }
    return 0;
#undef BAD
}

int zp_manifest_load(const char *dir, zp_manifest **out, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (manifest_path(path, sizeof(path), dir, "MANIFEST"))
        return zp_seterr(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
    zp_manifest *m = zp_xcalloc(1, sizeof(*m));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            *out = m;
            return 0;
        }
        free(m);
        return zp_seterr(err, errlen, ZEPS_EIO, "manifest %s: cannot open: %s", path,
                         strerror(errno));
    }
    struct stat st;
    int rc = 0;
    char *text = NULL;
    if (fstat(fd, &st) < 0 || (size_t)st.st_size > MANIFEST_MAX)
        rc = zp_seterr(err, errlen, ZEPS_EDATA, "manifest %s: cannot stat or larger than %zu bytes",
                       path, MANIFEST_MAX);
    if (!rc) {
        rd r = {.fd = fd, .path = path, .err = err, .errlen = errlen};
        text = zp_xmalloc((size_t)st.st_size + 1);
        rc = rd_at(&r, 0, text, (size_t)st.st_size);
    }
    close(fd);
    if (!rc)
        rc = manifest_parse(path, text, (size_t)st.st_size, m, err, errlen);
    free(text);
    if (rc) {
        zp_manifest_free(&m);
        return rc;
    }
    *out = m;
    return 0;
}

/* Rewrite MANIFEST atomically: tmp, fsync, rename, fsync the directory. */
static int manifest_store(const char *dir, const zp_manifest *m, char *err, size_t errlen)
{
    size_t cap = 64, len = 0;
    for (size_t i = 0; i < m->nsets; i++)
        cap += 128 + (size_t)m->sets[i].nshards * 160; /* bounds of the two line formats */
    char *text = zp_xmalloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "zeps-manifest 1\n");
    for (size_t i = 0; i < m->nsets; i++) {
        const zp_snap_set *s = &m->sets[i];
        len +=
            (size_t)snprintf(text + len, cap - len,
                             "set %016" PRIx64 " shards %u clock %" PRId64 " created %" PRIu64 "\n",
                             s->setid, s->nshards, s->clock, s->created_ns);
        for (uint32_t k = 0; k < s->nshards; k++)
            len += (size_t)snprintf(text + len, cap - len, "file %s %" PRIu64 " %08x\n",
                                    s->files[k].name, s->files[k].size, s->files[k].header_crc);
    }
    len += (size_t)snprintf(text + len, cap - len, "crc32c %08x\n", crc32c(text, len));

    char path[PATH_MAX], tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof(tmp), "%s/MANIFEST.tmp.%ld", dir, (long)getpid());
    if (manifest_path(path, sizeof(path), dir, "MANIFEST") || n < 0 || (size_t)n >= sizeof(tmp)) {
        free(text);
        return zp_seterr(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
    }
    int e = 0;
    const char *what = "create";
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        e = errno;
    } else {
        what = "write";
        e = write_all(fd, text, len);
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
    free(text);
    if (e) {
        unlink(tmp);
        return zp_seterr(err, errlen, ZEPS_EIO, "manifest %s: %s failed: %s", path, what,
                         strerror(e));
    }
    if ((e = fsync_dir(dir)))
        return zp_seterr(err, errlen, ZEPS_EIO, "manifest %s: fsync of directory %s failed: %s",
                         path, dir, strerror(e));
    return 0;
}

/* flock <dir>/MANIFEST.lock: serialises manifest changes between the shard
 * processes sharing dir. Returns the fd (close to unlock) or -1. */
static int manifest_lock(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (manifest_path(path, sizeof(path), dir, "MANIFEST.lock")) {
        zp_seterr(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        zp_seterr(err, errlen, ZEPS_EIO, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            zp_seterr(err, errlen, ZEPS_EIO, "cannot lock %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

int zp_snapshot_set_complete(const char *dir, uint64_t setid, uint32_t nshards, char *err,
                             size_t errlen)
{
    if (nshards == 0)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "set %016" PRIx64 ": 0 shards", setid);
    for (uint32_t i = 0; i < nshards; i++) {
        char path[PATH_MAX];
        zp_snap_info in;
        if (zp_snapshot_path(path, sizeof(path), dir, setid, i, nshards))
            return zp_seterr(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
        if (access(path, F_OK) < 0)
            return zp_seterr(err, errlen, ZEPS_EDATA, "set %016" PRIx64 " incomplete: %s: %s",
                             setid, path, strerror(errno));
        int rc = zp_snapshot_verify(path, &in, err, errlen);
        if (rc)
            return rc;
        if (in.h.setid != setid || in.h.shard != i || in.h.nshards != nshards)
            return zp_seterr(err, errlen, ZEPS_EDATA,
                             "snapshot %s: header says set %016" PRIx64 " shard %u of %u", path,
                             in.h.setid, in.h.shard, in.h.nshards);
    }
    return 0;
}

int zp_manifest_add_set(const char *dir, uint64_t setid, uint32_t nshards, char *err, size_t errlen)
{
    if (nshards == 0)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "set %016" PRIx64 ": 0 shards", setid);
    zp_snap_set set = {.setid = setid, .nshards = nshards};
    set.files = zp_xcalloc(nshards, sizeof(zp_snap_file));
    int rc = 0;
    for (uint32_t i = 0; i < nshards && !rc; i++) {
        char path[PATH_MAX];
        zp_snap_info in;
        if (zp_snapshot_path(path, sizeof(path), dir, setid, i, nshards)) {
            rc = zp_seterr(err, errlen, ZEPS_EINVAL, "snapshot directory %s: path too long", dir);
            break;
        }
        rc = zp_snapshot_read_info(path, &in, err, errlen);
        if (!rc && (in.h.setid != setid || in.h.shard != i || in.h.nshards != nshards ||
                    (i > 0 && in.h.clock != set.clock)))
            rc = zp_seterr(
                err, errlen, ZEPS_EDATA,
                "snapshot %s: header says set %016" PRIx64 " shard %u of %u clock %" PRId64
                ", not part of set %016" PRIx64 " of %u shards (clock %" PRId64 ")",
                path, in.h.setid, in.h.shard, in.h.nshards, in.h.clock, setid, nshards, set.clock);
        if (rc)
            break;
        if (i == 0) {
            set.clock = in.h.clock;
            set.created_ns = in.h.created_ns;
        }
        if (in.h.created_ns > set.created_ns)
            set.created_ns = in.h.created_ns;
        zp_snap_file *f = &set.files[i];
        snprintf(f->name, sizeof(f->name), "set-%016" PRIx64 "/shard-%u-of-%u.zsnap", setid, i,
                 nshards);
        f->size = in.file_size;
        f->header_crc = in.header_crc;
    }
    if (rc) {
        free(set.files);
        return rc;
    }

    int lk = manifest_lock(dir, err, errlen);
    if (lk < 0) {
        free(set.files);
        return ZEPS_EIO;
    }
    zp_manifest *m = NULL;
    rc = zp_manifest_load(dir, &m, err, errlen);
    if (!rc) {
        /* Replace an entry of the same id; keep the list newest first. */
        size_t at = 0;
        for (size_t i = 0; i < m->nsets; i++)
            if (m->sets[i].setid == setid) {
                free(m->sets[i].files);
                memmove(&m->sets[i], &m->sets[i + 1], (m->nsets - i - 1) * sizeof(zp_snap_set));
                m->nsets--;
                break;
            }
        while (at < m->nsets && m->sets[at].setid > setid)
            at++;
        m->sets = zp_xrealloc(m->sets, (m->nsets + 1) * sizeof(zp_snap_set));
        memmove(&m->sets[at + 1], &m->sets[at], (m->nsets - at) * sizeof(zp_snap_set));
        m->sets[at] = set;
        m->nsets++;
        set.files = NULL; /* m owns it now */
        rc = manifest_store(dir, m, err, errlen);
    }
    free(set.files);
    zp_manifest_free(&m);
    close(lk);
    return rc;
}

int zp_snapshot_find_restorable(const char *dir, uint32_t shard, uint32_t nshards,
                                zp_snapshot **out, uint64_t *setid_out, zp_snap_log_fn log,
                                void *log_arg, char *err, size_t errlen)
{
    if (nshards == 0 || shard >= nshards)
        return zp_seterr(err, errlen, ZEPS_EINVAL, "restore: shard %u of %u", shard, nshards);
    zp_manifest *m = NULL;
    int rc = zp_manifest_load(dir, &m, err, errlen);
    if (rc)
        return rc;
    if (m->nsets == 0) {
        zp_manifest_free(&m);
        *out = NULL;
        return 0;
    }
    char why[512], msg[600];
    size_t skipped = 0;
    for (size_t i = 0; i < m->nsets; i++) {
        const zp_snap_set *set = &m->sets[i];
        char path[PATH_MAX];
        zp_snap_info in;
        zp_snapshot *s = NULL;
        rc = 0;
        if (set->nshards != nshards) {
            rc = zp_seterr(why, sizeof(why), ZEPS_EDATA,
                           "it has %u shards, this cluster %u (it needs resharding)", set->nshards,
                           nshards);
        } else if (manifest_path(path, sizeof(path), dir, set->files[shard].name)) {
            rc = zp_seterr(why, sizeof(why), ZEPS_EINVAL, "path too long");
        } else if (!(rc = zp_snapshot_read_info(path, &in, why, sizeof(why))) &&
                   (in.file_size != set->files[shard].size ||
                    in.header_crc != set->files[shard].header_crc)) {
            rc = zp_seterr(why, sizeof(why), ZEPS_EDATA,
                           "snapshot %s: %" PRIu64 " bytes, header CRC %08x; the manifest "
                           "recorded %" PRIu64 " bytes, %08x",
                           path, in.file_size, in.header_crc, set->files[shard].size,
                           set->files[shard].header_crc);
        }
        if (!rc)
            rc = zp_snapshot_read(path, &s, why, sizeof(why));
        /* Every shard must restore the same set: a set is usable only if
         * the other shards' files (in the same shared directory) are intact
         * too, else one shard would fall back and the others would not. */
        for (uint32_t j = 0; !rc && j < nshards; j++) {
            if (j == shard)
                continue;
            char other[PATH_MAX];
            if (manifest_path(other, sizeof(other), dir, set->files[j].name)) {
                rc = zp_seterr(why, sizeof(why), ZEPS_EINVAL, "path too long");
            } else if (!(rc = zp_snapshot_verify(other, &in, why, sizeof(why))) &&
                       (in.file_size != set->files[j].size ||
                        in.header_crc != set->files[j].header_crc)) {
                rc = zp_seterr(why, sizeof(why), ZEPS_EDATA,
                               "snapshot %s (shard %u): changed since the manifest recorded it",
                               other, j);
            }
            if (rc) {
                char inner[400]; /* room for the sentence around it */
                snprintf(inner, sizeof(inner), "%.399s", why);
                snprintf(why, sizeof(why), "shard %u's file is not usable, so no shard may "
                         "restore this set: %s", j, inner);
            }
        }
        if (rc)
            zp_snapshot_free(&s);
        if (!rc) {
            zp_manifest_free(&m);
            if (setid_out)
                *setid_out = s->h.setid;
            *out = s;
            return 0;
        }
        skipped++;
        snprintf(msg, sizeof(msg), "skipping snapshot set %016" PRIx64 " for shard %u of %u: %s",
                 set->setid, shard, nshards, why);
        if (log)
            log(log_arg, msg);
    }
    size_t nsets = m->nsets;
    zp_manifest_free(&m);
    return zp_seterr(err, errlen, ZEPS_EDATA,
                     "no restorable snapshot for shard %u of %u in %s: all %zu set(s) skipped "
                     "(last: %s)",
                     shard, nshards, dir, nsets, skipped ? why : "none");
}

/* setid of a "set-<16 hex>" name; false if it is not one. */
static bool parse_set_name(const char *name, uint64_t *setid)
{
    if (strncmp(name, "set-", 4) != 0 || strlen(name) != 20)
        return false;
    uint64_t v = 0;
    for (int i = 4; i < 20; i++) {
        char c = name[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *setid = v;
    return true;
}

/* Delete the files of one set directory, then the directory. */
static int remove_set_dir(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[PATH_MAX];
    if (manifest_path(path, sizeof(path), dir, name))
        return zp_seterr(err, errlen, ZEPS_EINVAL, "%s/%s: path too long", dir, name);
    DIR *d = opendir(path);
    if (!d)
        return zp_seterr(err, errlen, ZEPS_EIO, "cannot open %s: %s", path, strerror(errno));
    int dfd = dirfd(d), rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (unlinkat(dfd, de->d_name, 0) < 0)
            rc = zp_seterr(err, errlen, ZEPS_EIO, "cannot delete %s/%s: %s", path, de->d_name,
                           strerror(errno));
    }
    closedir(d);
    if (!rc && rmdir(path) < 0)
        rc = zp_seterr(err, errlen, ZEPS_EIO, "cannot delete %s: %s", path, strerror(errno));
    return rc;
}

int zp_manifest_prune(const char *dir, unsigned keep, unsigned *removed, char *err, size_t errlen)
{
    if (keep == 0)
        keep = 1; /* never delete the newest complete set */
    int lk = manifest_lock(dir, err, errlen);
    if (lk < 0)
        return ZEPS_EIO;
    zp_manifest *m = NULL;
    unsigned nrm = 0;
    int rc = zp_manifest_load(dir, &m, err, errlen);
    if (rc || m->nsets == 0)
        goto done; /* no complete set: delete nothing */
    if (m->nsets > keep) {
        /* The manifest forgets the sets first, so it never names a file
         * that is gone. */
        for (size_t i = keep; i < m->nsets; i++)
            free(m->sets[i].files);
        m->nsets = keep;
        if ((rc = manifest_store(dir, m, err, errlen)))
            goto done;
    }
    /* Any set directory older than the newest complete set and not kept is
     * either dropped or was never completed; shards write their sets in
     * order, so none of those is still being written. */
    uint64_t newest = m->sets[0].setid;
    DIR *d = opendir(dir);
    if (!d) {
        rc = zp_seterr(err, errlen, ZEPS_EIO, "cannot open %s: %s", dir, strerror(errno));
        goto done;
    }
    struct dirent *de;
    while (!rc && (de = readdir(d)) != NULL) {
        uint64_t id;
        if (!parse_set_name(de->d_name, &id) || id >= newest)
            continue;
        bool kept = false;
        for (size_t i = 0; i < m->nsets && !kept; i++)
            kept = m->sets[i].setid == id;
        if (kept)
            continue;
        rc = remove_set_dir(dir, de->d_name, err, errlen);
        if (!rc)
            nrm++;
    }
    closedir(d);
    int e;
    if (!rc && nrm && (e = fsync_dir(dir)))
        rc = zp_seterr(err, errlen, ZEPS_EIO, "cannot fsync directory %s: %s", dir, strerror(e));
done:
    zp_manifest_free(&m);
    close(lk);
    if (!rc && removed)
        *removed = nrm;
    return rc;
}
