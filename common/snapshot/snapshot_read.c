/*
 * snapshot_read.c - reads, verifies and inspects snapshot files; see
 * snapshot.h and docs/snapshots.md.
 *
 * The reader trusts nothing in the file: every length is checked against the
 * file size before it is used for a read or an allocation, and every byte
 * that is used is covered by a CRC32C. One parser serves zp_snapshot_read
 * (the whole record), zp_snapshot_read_verify (every CRC, streaming through a
 * small buffer, keeping nothing) and zp_snapshot_read_info (the header only).
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

typedef struct rd {
    int fd;
    const char *path;
    uint64_t size;
    uint64_t pos;     /* next section header */
    int k;            /* next section's number, from 0 */
    uint8_t *scratch; /* verify only */
    uint8_t *map;     /* format 2: the slot map (wire form, checked); NULL: default */
    uint64_t map_len;
    zp_snap_table *metas; /* with a map: every table's meta, for zp_snapshot_pieces_check */
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
    return zp_errors_set(r->err, r->errlen, code, "snapshot %s: %s", r->path, m);
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

int zp_snapshot_read_file(int fd, const char *path, void *buf, size_t len, char *err, size_t errlen)
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
    if (zp_snapshot_crc32c(b, 124) != zp_get32(b + 124))
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
    in.h.slot_epoch = format >= 2 ? zp_get64(b + 96) : 0;
    memcpy(in.h.consistency, b + 72, 16);
    in.ntables = zp_get32(b + 88);
    in.nworker_recs = zp_get32(b + 92);
    in.file_size = r->size;
    in.header_crc = zp_get32(b + 124);

    char m[256];
    if (zp_snapshot_check_header(&in.h, m, sizeof(m)))
        return RD_FAIL(r, ZEPS_EDATA, "header: %s", m);
    /* Bound the counts by the file size before anything is allocated. */
    uint32_t fixed = format >= 2 ? 2 : 1; /* workers, and format 2's slot map */
    if (in.ntables > r->size / (3 * SEC_HDR_LEN + META_LEN) || *nsections != fixed + 3 * in.ntables)
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
    if (zp_snapshot_crc32c(h, 20) != zp_get32(h + 20))
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
            raw = zp_snapshot_crc_raw(raw, dst, (size_t)len);
    } else {
        for (uint64_t done = 0; !rc && done < len;) {
            size_t k = len - done > SCRATCH ? SCRATCH : (size_t)(len - done);
            rc = rd_at(r, off + done, r->scratch, k);
            if (!rc)
                raw = zp_snapshot_crc_raw(raw, r->scratch, k);
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
    t->lr_now = getf(b + 180); /* 0 in files written before TUNE: as declared */
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
static int read_sparse(rd *r, const zp_snap_info *in, uint32_t i, zp_snap_table *t, zp_snapshot *s)
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
        if (zp_snapshot_check_rows(t, r->map, in->h.shard, in->h.nshards, m, sizeof(m)))
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
    uint64_t len = 0; /* set by sec_begin; gcc -O3 cannot see it through the early returns */
    uint32_t crc = 0;
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
    if (zp_snapshot_check_table_meta(&t, r->map, r->map_len, in->h.shard, in->h.nshards, m,
                                     sizeof(m)))
        return RD_FAIL(r, ZEPS_EDATA, "section %d (%s): %s", r->k - 1, label, m);
    if (r->metas)
        r->metas[i] = t;

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

/* Format 2: section 0, the slot map the rows were placed by, into r->map
 * (checked: its shard count is the file's, its epoch the header's). */
static int read_map(rd *r, const zp_snap_info *in)
{
    uint64_t len;
    uint32_t crc;
    int rc = sec_begin(r, SEC_SLOTMAP, 0, "slot map", &len, &crc);
    if (rc)
        return rc;
    if (len > ZP_SNAP_MAX_MAP)
        return RD_FAIL(r, ZEPS_EDATA, "section %d (slot map): %" PRIu64 " bytes (at most %u)", r->k,
                       len, ZP_SNAP_MAX_MAP);
    r->map = malloc((size_t)len + 1);
    if (!r->map)
        return RD_FAIL(r, ZEPS_ENOMEM, "no memory for the slot map");
    r->map_len = len;
    if ((rc = sec_payload(r, "slot map", r->map, len, crc)))
        return rc;
    char m[256];
    if (zp_snapshot_check_map(r->map, len, in->h.nshards, m, sizeof(m)))
        return RD_FAIL(r, ZEPS_EDATA, "section 0 (slot map): %s", m);
    if (zp_get64(r->map) != in->h.slot_epoch)
        return RD_FAIL(r, ZEPS_EDATA,
                       "section 0 (slot map): epoch %" PRIu64 ", the header says %" PRIu64,
                       zp_get64(r->map), in->h.slot_epoch);
    return 0;
}

/* The one parser behind read, verify, read_info and read_map (map_only:
 * the header and the slot map section). */
static int parse(const char *path, zp_snapshot **out, zp_snap_info *info, bool header_only,
                 bool map_only, uint8_t **map_out, uint64_t *map_len, char *err, size_t errlen)
{
    rd r = {.fd = -1, .path = path, .err = err, .errlen = errlen};
    r.fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r.fd < 0)
        return zp_errors_set(err, errlen, ZEPS_EIO, "snapshot %s: cannot open: %s", path,
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
        if (!rc && in.h.format >= 2)
            rc = read_map(&r, &in);
        if (!rc && r.map && !map_only &&
            !(r.metas = calloc(in.ntables ? in.ntables : 1, sizeof(*r.metas))))
            rc = RD_FAIL(&r, ZEPS_ENOMEM, "no memory for %u tables", in.ntables);
        if (!rc && !map_only)
            rc = read_workers(&r, &in, s);
        for (uint32_t i = 0; !rc && !map_only && i < in.ntables; i++) {
            rc = read_table(&r, &in, i, s);
            if (!rc && s)
                s->ntables = i + 1;
        }
        if (!rc && !map_only && r.pos != r.size)
            rc =
                RD_FAIL(&r, ZEPS_EDATA, "%" PRIu64 " bytes after the last section", r.size - r.pos);
        char m[320];
        if (!rc && r.metas &&
            zp_snapshot_pieces_check(r.metas, in.ntables, r.map, r.map_len, in.h.shard, m,
                                     sizeof(m)))
            rc = RD_FAIL(&r, ZEPS_EDATA, "%s", m);
    }
    free(r.metas);
    free(r.scratch);
    close(r.fd);
    if (rc) {
        free(r.map);
        zp_snapshot_free(&s);
        return rc;
    }
    if (s && r.map) { /* s takes the map */
        s->owned_map = r.map;
        s->slotmap = r.map;
        s->slotmap_len = r.map_len;
        r.map = NULL;
    }
    if (map_out) {
        *map_out = r.map;
        *map_len = r.map_len;
        r.map = NULL;
    }
    free(r.map);
    if (info)
        *info = in;
    if (out)
        *out = s;
    return 0;
}

int zp_snapshot_read(const char *path, zp_snapshot **out, char *err, size_t errlen)
{
    return parse(path, out, NULL, false, false, NULL, NULL, err, errlen);
}

int zp_snapshot_read_verify(const char *path, zp_snap_info *info, char *err, size_t errlen)
{
    return parse(path, NULL, info, false, false, NULL, NULL, err, errlen);
}

int zp_snapshot_read_info(const char *path, zp_snap_info *info, char *err, size_t errlen)
{
    return parse(path, NULL, info, true, false, NULL, NULL, err, errlen);
}

int zp_snapshot_read_map(const char *path, zp_slotmap **out, zp_snap_info *info, char *err,
                         size_t errlen)
{
    zp_snap_info in;
    uint8_t *map = NULL;
    uint64_t len = 0;
    int rc = parse(path, NULL, &in, false, true, &map, &len, err, errlen);
    if (rc)
        return rc;
    char m[256] = "no default map of that many shards";
    bool had = map != NULL;
    rc = had ? zp_slotmap_decode(out, map, (size_t)len, (int)in.h.nshards, m, sizeof(m))
             : zp_slotmap_new_default(out, (int)in.h.nshards);
    free(map);
    if (rc) /* checked as it was read: only a shard count past the default's limit */
        return zp_errors_set(err, errlen, ZEPS_EDATA, "snapshot %s: slot map of %u shards: %s",
                             path, in.h.nshards, m);
    if (info)
        *info = in;
    return 0;
}
