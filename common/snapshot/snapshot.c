/*
 * snapshot.c - snapshot files: the record (zp_snapshot: new, free,
 * validate), the file paths and the CRC; see snapshot.h and
 * docs/snapshots.md (the byte layout is documented there, and the constants
 * in snapshot_format.h must agree with it). Writing is snapshot_write.c,
 * reading snapshot_read.c, the manifest manifest.c, resharding reshard.c.
 *
 * Every byte of a file that is used is covered by a CRC32C (ISA-L's
 * crc32_iscsi: a library CRC, hardware-accelerated where the CPU has it).
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

#include "alloc.h"
#include "errors.h"
#include "snapshot.h"
#include "snapshot_format.h"
#include "snapshot_io.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

#include <isa-l/crc.h>

/* CRC32C in its standard form (init and final xor ~0). ISA-L's crc32_iscsi
 * does neither itself, so raw values chain across calls; it takes a
 * non-const pointer but only reads, and an int length, hence the chunks. */
uint32_t zp_snapshot_crc_raw(uint32_t raw, const void *p, size_t n)
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

uint32_t zp_snapshot_crc32c(const void *p, size_t n)
{
    return ~zp_snapshot_crc_raw(0xffffffffu, p, n);
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
    zp_snapshot *s = zp_alloc_zeroed(1, sizeof(*s));
    s->h.format = ZP_SNAP_FORMAT;
    s->h.nshards = 1;
    s->h.clock = -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    s->h.created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    s->ntables = ntables;
    s->tables = zp_alloc_zeroed(ntables ? ntables : 1, sizeof(zp_snap_table));
    s->nworker_recs = nworker_recs;
    s->workers = zp_alloc_zeroed(nworker_recs ? nworker_recs : 1, sizeof(zp_snap_worker));
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
    free(s->owned_map);
    free(s);
    *sp = NULL;
}

void zp_snapshot_set_map(zp_snapshot *s, const void *wire, uint64_t len)
{
    free(s->owned_map);
    s->owned_map = NULL;
    s->slotmap = NULL;
    s->slotmap_len = 0;
    if (!wire || len == 0)
        return;
    s->owned_map = zp_alloc((size_t)len);
    memcpy(s->owned_map, wire, (size_t)len);
    s->slotmap = s->owned_map;
    s->slotmap_len = len;
}

/* The shard that owns `id` under the wire-form map `map` (checked by
 * zp_snapshot_check_map), or under the default map of nshards when map is
 * NULL. Allocates nothing: the writer checks its rows in a fork()ed child. */
static uint32_t owner_of(const uint8_t *map, uint64_t id, uint32_t nshards)
{
    if (!map)
        return (uint32_t)zp_sparse_shard_of(id, (int)nshards);
    uint64_t slot = zp_sparse_hash_id(id, ZP_SHARD_HASH_SEED) % zp_get32(map + 8);
    const uint8_t *o = map + ZP_SLOTMAP_WIRE_HDR + 2 * slot;
    return (uint32_t)o[0] | (uint32_t)o[1] << 8;
}

int zp_snapshot_check_map(const uint8_t *map, uint64_t len, uint32_t nshards, char *err,
                          size_t errlen)
{
    if (len < ZP_SLOTMAP_WIRE_HDR)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "slot map of %" PRIu64 " bytes (at least %d)", len,
                             ZP_SLOTMAP_WIRE_HDR);
    uint64_t epoch = zp_get64(map);
    uint32_t slots = zp_get32(map + 8), shards = zp_get32(map + 12);
    uint64_t owners = ZP_SLOTMAP_WIRE_HDR + 2 * (uint64_t)slots;
    if (slots == 0 || slots > ZP_SLOTS_MAX || len < owners)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "slot map of %u slots (1..%d) in %" PRIu64 " bytes", slots,
                             ZP_SLOTS_MAX, len);
    if (shards != nshards)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "slot map over %u shards, the file is one of %u shards", shards,
                             nshards);
    if (epoch == 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "slot map of epoch 0 (the default map is recorded as no map)");
    for (uint32_t k = 0; k < slots; k++) {
        const uint8_t *o = map + ZP_SLOTMAP_WIRE_HDR + 2 * (uint64_t)k;
        uint32_t owner = (uint32_t)o[0] | (uint32_t)o[1] << 8;
        if (owner >= nshards)
            return zp_errors_set(err, errlen, ZEPS_EINVAL, "slot map: slot %u names shard %u of %u",
                                 k, owner, nshards);
    }
    return len > owners ? zp_snapshot_pieces_map(map, owners, len, nshards, err, errlen) : 0;
}

/* The checks a table's description must pass, on write and on read. Writes
 * a message without prefix into err. */
int zp_snapshot_check_table_meta(const zp_snap_table *t, const uint8_t *map, uint64_t map_len,
                                 uint32_t shard, uint32_t nshards, char *err, size_t errlen)
{
    if (!str_ok(t->name, sizeof(t->name), false))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "table name empty or not terminated");
    if (!str_ok(t->optimizer, sizeof(t->optimizer), false))
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "table '%s': optimizer name empty or not terminated", t->name);
    if (t->kind > 1)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "table '%s': kind %u (0 dense and 1 sparse are known)", t->name,
                             t->kind);
    if (t->state_per_param > ZP_SNAP_MAX_STATE)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "table '%s': %u state floats per parameter (max %u)", t->name,
                             t->state_per_param, ZP_SNAP_MAX_STATE);
    if (t->kind == 1) {
        if (t->length == 0 || t->length > 4096 || t->begin != 0 || t->end != 0)
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "sparse table '%s': dim %" PRIu64 " (1..4096), slice [%" PRIu64
                                 ", %" PRIu64 ") (must be empty)",
                                 t->name, t->length, t->begin, t->end);
        return 0;
    }
    if (t->length == 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "table '%s': length 0", t->name);
    int rc = zp_snapshot_pieces_slice(t, map, map_len, shard, nshards, err, errlen);
    if (rc)
        return rc;
    if (t->state_per_param > ZP_SNAP_MAX_STATE)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "table '%s': %u state floats per parameter (max %u)", t->name,
                             t->state_per_param, ZP_SNAP_MAX_STATE);
    return 0;
}

/* A sparse table's spec and rows: sizes agree with the header and the meta,
 * and every row belongs to shard `shard` of `nshards` under `map` (the
 * wire form, checked; NULL: the default map). */
int zp_snapshot_check_rows(const zp_snap_table *t, const uint8_t *map, uint32_t shard,
                           uint32_t nshards, char *err, size_t errlen)
{
    if (!t->spec || t->spec_len == 0 || t->spec_len > ZP_SNAP_MAX_SPEC)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "sparse table '%s': declaration of %" PRIu64 " bytes (1..%u)", t->name,
                             t->spec_len, ZP_SNAP_MAX_SPEC);
    if (!t->rows || t->rows_len < ZP_SNAP_ROWS_HDR)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "sparse table '%s': rows section of %" PRIu64
                             " bytes, shorter than its header",
                             t->name, t->rows_len);
    uint64_t nrows = zp_get64(t->rows), rec = ZP_SNAP_ROW_LEN(t->length, t->state_per_param);
    if (zp_get32(t->rows + 8) != t->length || zp_get32(t->rows + 12) != t->state_per_param)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "sparse table '%s': rows of dim %u and %u state floats per value, the "
                             "meta says %" PRIu64 " and %u",
                             t->name, zp_get32(t->rows + 8), zp_get32(t->rows + 12), t->length,
                             t->state_per_param);
    if (nrows > (t->rows_len - ZP_SNAP_ROWS_HDR) / rec ||
        ZP_SNAP_ROWS_HDR + nrows * rec != t->rows_len)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "sparse table '%s': %" PRIu64 " rows of %" PRIu64
                             " bytes do not fill %" PRIu64 " bytes",
                             t->name, nrows, rec, t->rows_len - ZP_SNAP_ROWS_HDR);
    for (uint64_t i = 0; i < nrows; i++) {
        uint64_t id = zp_get64(t->rows + ZP_SNAP_ROWS_HDR + i * rec);
        uint32_t owner = owner_of(map, id, nshards);
        if (owner != shard)
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "sparse table '%s': row %" PRIu64 " (id %" PRIu64
                                 ") belongs to shard %u, not %u of %u (%s %" PRIu64 ")",
                                 t->name, i, id, owner, shard, nshards,
                                 map ? "slot map of epoch" : "the default slot map, epoch",
                                 map ? zp_get64(map) : 0);
    }
    return 0;
}

int zp_snapshot_check_header(const zp_snap_header *h, char *err, size_t errlen)
{
    if (h->nshards == 0 || h->shard >= h->nshards)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "shard %u of %u", h->shard, h->nshards);
    if (!str_ok(h->consistency, sizeof(h->consistency), true))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "consistency name not terminated");
    return 0;
}

int zp_snapshot_validate(const zp_snapshot *s, char *err, size_t errlen)
{
    char m[384];
    int rc = zp_snapshot_check_header(&s->h, m, sizeof(m));
    if (!rc && s->slotmap)
        rc = zp_snapshot_check_map(s->slotmap, s->slotmap_len, s->h.nshards, m, sizeof(m));
    for (uint32_t i = 0; !rc && i < s->ntables; i++) {
        const zp_snap_table *t = &s->tables[i];
        rc = zp_snapshot_check_table_meta(t, s->slotmap, s->slotmap_len, s->h.shard, s->h.nshards,
                                          m, sizeof(m));
        if (!rc && t->kind == 1)
            rc = zp_snapshot_check_rows(t, s->slotmap, s->h.shard, s->h.nshards, m, sizeof(m));
        size_t n = (size_t)(t->end - t->begin);
        if (!rc && n && !t->params)
            rc = zp_errors_set(m, sizeof(m), ZEPS_EINVAL, "table '%s': no parameters", t->name);
        if (!rc && n && t->state_per_param && !t->state)
            rc =
                zp_errors_set(m, sizeof(m), ZEPS_EINVAL, "table '%s': no optimizer state", t->name);
    }
    if (!rc)
        rc = zp_snapshot_pieces_check(s->tables, s->ntables, s->slotmap, s->slotmap_len, s->h.shard,
                                      m, sizeof(m));
    for (uint32_t i = 0; !rc && i < s->nworker_recs; i++)
        if (s->workers[i].rank >= s->h.nworkers)
            rc = zp_errors_set(m, sizeof(m), ZEPS_EINVAL, "worker record %u: rank %u of %u workers",
                               i, s->workers[i].rank, s->h.nworkers);
    if (rc)
        return zp_errors_set(err, errlen, rc, "snapshot of shard %u of %u: %s", s->h.shard,
                             s->h.nshards, m);
    return 0;
}
