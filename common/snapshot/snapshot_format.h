/*
 * snapshot_format.h - the snapshot file's constants and the helpers that
 * snapshot.c (the record), snapshot_write.c and snapshot_read.c share. The
 * byte layout is documented in docs/snapshots.md, and the constants below
 * must agree with it. Internal to common/snapshot/.
 */
#ifndef ZP_SNAPSHOT_FORMAT_H
#define ZP_SNAPSHOT_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "snapshot.h"

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
    SEC_SLOTMAP = 7,     /* format 2: the slot map, section 0 */
};

#define IO_CHUNK ((size_t)1 << 30) /* largest single read/write/CRC call */
#define SCRATCH  ((size_t)1 << 20) /* verify's streaming buffer */

static inline void putf(uint8_t *p, float v)
{
    memcpy(p, &v, 4);
}
static inline void putd(uint8_t *p, double v)
{
    memcpy(p, &v, 8);
}
static inline float getf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}
static inline double getd(const uint8_t *p)
{
    double v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t pad8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/* CRC32C without the final xor, chained: raw = zp_snapshot_crc_raw(raw, ...)
 * from raw = 0xffffffff; the CRC is ~raw. */
uint32_t zp_snapshot_crc_raw(uint32_t raw, const void *p, size_t n);

/* The checks a table's description (and, for a sparse table, its rows) must
 * pass, on write and on read: 0 or ZEPS_EINVAL with a message without
 * prefix in err. */
int zp_snapshot_check_table_meta(const zp_snap_table *t, const uint8_t *map, uint64_t map_len,
                                 uint32_t shard, uint32_t nshards, char *err, size_t errlen);
int zp_snapshot_check_rows(const zp_snap_table *t, const uint8_t *map, uint32_t shard,
                           uint32_t nshards, char *err, size_t errlen);

/* A wire-form slot map as a file may record it: its length, 1..
 * ZP_SLOTS_MAX slots, `nshards` shards, every owner below it, epoch >= 1,
 * and after the owners nothing or a dense list (zp_snapshot_pieces_map).
 * 0 or ZEPS_EINVAL with a message without prefix. Allocates nothing. */
int zp_snapshot_check_map(const uint8_t *map, uint64_t len, uint32_t nshards, char *err,
                          size_t errlen);

/* The dense list of a map whose owners end at byte `at` of its `len`
 * (snapshot_pieces.c): no joined or retired shard, tables named once each in
 * ascending order, each one's pieces ascending from 0 below its length on
 * shards below nshards, nothing after. 0 or ZEPS_EINVAL with a message
 * without prefix. Allocates nothing. */
int zp_snapshot_pieces_map(const uint8_t *map, uint64_t at, uint64_t len, uint32_t nshards,
                           char *err, size_t errlen);

/* Where dense record t may lie on `shard` of `nshards` under the checked
 * map (NULL: the default map): a table the map names, on a piece the map
 * gives the shard (or empty at 0); any other, on its default slice. 0 or
 * ZEPS_EINVAL with a message without prefix. Allocates nothing. */
int zp_snapshot_pieces_slice(const zp_snap_table *t, const uint8_t *map, uint64_t len,
                             uint32_t shard, uint32_t nshards, char *err, size_t errlen);

/* The records tables[0..n) of a file (each passed zp_snapshot_pieces_slice)
 * hold every piece the map gives `shard` of each table it names once: no
 * piece twice, none missing. 0 or ZEPS_EINVAL with a message without
 * prefix. Allocates nothing. */
int zp_snapshot_pieces_check(const zp_snap_table *tables, uint32_t n, const uint8_t *map,
                             uint64_t len, uint32_t shard, char *err, size_t errlen);

/* Check a header's shard numbering and its consistency name: 0 or
 * ZEPS_EINVAL with a sentence in err. */
int zp_snapshot_check_header(const zp_snap_header *h, char *err, size_t errlen);

#endif
