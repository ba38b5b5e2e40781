/*
 * snapshot.h - the on-disk snapshot of one shard, the manifest that names
 * complete sets of them, and resharding a set in memory.
 *
 * A snapshot is described by a plain zp_snapshot record that does not refer
 * to any live server struct, so the server can fill one in a fork()ed child
 * (pointing the float arrays at its copy-on-write pages) and zepsctl can read
 * one without a server. The record is a public struct, not an opaque type,
 * because filling it in field by field is its whole purpose; the one private
 * field (`owned`) is set only by this module.
 *
 * Files: <dir>/set-<setid as 016x>/shard-<i>-of-<S>.zsnap, written to a
 * temporary file in the same directory, fsync'd, renamed and the directory
 * fsync'd. <dir>/MANIFEST names complete sets (every shard file present and
 * valid). docs/snapshots.md has the byte layout and the protocol.
 *
 * Thread-safety: every function works on its arguments only; functions that
 * change the manifest take an flock on <dir>/MANIFEST.lock, so several shard
 * processes may call them at once.
 */
#ifndef ZP_SNAPSHOT_H
#define ZP_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hyper.h"
#include "slotmap.h"

#define ZP_SNAP_FORMAT    2u  /* the newest format version this build writes and reads */
#define ZP_SNAP_FORMAT_V1 1u  /* written when the record has no slot map (the default map) */
#define ZP_SNAP_MAX_STATE 16u /* most optimizer state floats per parameter accepted */

/* Sparse tables (kind 1): the rows section's fixed header, and one row
 * record's bytes: u64 id, u32 version, u32 freq, i64 last_clock, dim f32
 * values, state_per_param * dim f32 state (docs/snapshots.md). */
#define ZP_SNAP_ROWS_HDR          64u
#define ZP_SNAP_ROW_LEN(dim, spp) (24u + 4u * (uint64_t)(dim) * (1u + (uint64_t)(spp)))
#define ZP_SNAP_MAX_SPEC          65536u /* largest packed declaration accepted */
#define ZP_SNAP_MAX_MAP           (64u << 20) /* largest slot map section (its dense list) */

/* One table of a shard. Dense (kind 0): the slice [begin, end) of a table
 * of `length` elements. Sparse (kind 1): `length` is the row width (dim),
 * begin = end = 0, and the rows of this shard are in `rows`. */
typedef struct zp_snap_table {
    char name[64];       /* NUL-terminated, non-empty */
    uint32_t kind;       /* 0 = dense, 1 = sparse */
    uint64_t length;     /* whole table */
    uint64_t begin, end; /* must be [length*i/S, length*(i+1)/S) for shard i of S */
    char optimizer[16];
    zp_hyper hyper; /* f32, as in the live table (lr: as declared) */
    float lr_now;   /* the lr in force when not the declared one (TUNE); 0: as declared */
    uint32_t init;  /* zp_init_kind */
    double init_scale;
    uint64_t seed;
    bool has_staleness;
    uint32_t staleness;
    uint64_t version; /* updates applied to this slice */
    int64_t round;    /* BSP rounds closed */
    uint32_t state_per_param;
    const float *params; /* end - begin floats */
    const float *state;  /* state_per_param blocks of end - begin floats; NULL if none */
    float *owned;        /* private: the allocation behind params/state, if ours */
    /* sparse tables only */
    const uint8_t *spec; /* the declaration, a packed zeps.TableSpec */
    uint64_t spec_len;
    const uint8_t *rows; /* ZP_SNAP_ROWS_HDR bytes (u64 rows, u32 dim, u32 state per value,
                            u64 created, not_admitted, pushes_skipped, evicted_ttl,
                            evicted_capacity, 0), then the row records */
    uint64_t rows_len;
    uint8_t *owned_bytes; /* private: the allocation behind spec/rows, if ours */
} zp_snap_table;

/* What this shard knew about one worker rank. max_seq/window are this
 * shard's duplicate window for that worker (workers.h). */
typedef struct zp_snap_worker {
    uint32_t rank;
    bool joined, left;
    uint64_t incarnation;
    int64_t clock;
    uint64_t max_seq;
    uint64_t window;
} zp_snap_worker;

typedef struct zp_snap_header {
    uint32_t format; /* set by read; write writes 2 with a slot map, 1 without */
    uint32_t shard, nshards;
    uint32_t nworkers;    /* the cluster's worker count */
    char consistency[16]; /* mode name: "bsp", "async", ... */
    int64_t clock;        /* global clock of a consistent cut; -1 = async point in time */
    uint64_t setid;       /* monotonic over the snapshots of a cluster */
    uint64_t created_ns;  /* CLOCK_REALTIME, ns since the epoch */
    uint64_t incarnation; /* of the server that wrote it */
    uint64_t slot_epoch;  /* set by read: the epoch of the file's slot map (0: default) */
} zp_snap_header;

typedef struct zp_snapshot {
    zp_snap_header h;
    uint32_t ntables;
    zp_snap_table *tables; /* [ntables] */
    uint32_t nworker_recs;
    zp_snap_worker *workers; /* [nworker_recs] */
    /* The slot map the sparse rows were placed by (common/slotmap.h), in
     * its wire form (epoch >= 1, h.nshards shards); NULL: the default map
     * of h.nshards, which a file of format 1 implies. */
    const uint8_t *slotmap;
    uint64_t slotmap_len;
    uint8_t *owned_map; /* private: the allocation behind slotmap, if ours */
} zp_snapshot;

/* A file's header as read without its sections (for the manifest). */
typedef struct zp_snap_info {
    zp_snap_header h;
    uint32_t ntables, nworker_recs;
    uint64_t file_size;
    uint32_t header_crc;
} zp_snap_info;

/* A new, zeroed record with room for ntables tables and nworker_recs workers
 * (h.format = ZP_SNAP_FORMAT). The caller fills it in; float arrays it points
 * at stay the caller's. Aborts on out-of-memory (small, fixed-size). */
zp_snapshot *zp_snapshot_new(uint32_t ntables, uint32_t nworker_recs);

/* Free a record made by zp_snapshot_new, _read or _reshard, and the float
 * arrays it owns (never the caller's). Tolerates NULL; sets *sp to NULL. */
void zp_snapshot_free(zp_snapshot **sp);

/* "<dir>/set-<setid:016x>/shard-<shard>-of-<nshards>.zsnap" into buf;
 * ZEPS_EINVAL if it does not fit. */
int zp_snapshot_path(char *buf, size_t len, const char *dir, uint64_t setid, uint32_t shard,
                     uint32_t nshards);

/* Check a record for writing: names terminated, slices match the shard
 * formula, arrays present, ranks in range. 0 or ZEPS_EINVAL with the field. */
int zp_snapshot_validate(const zp_snapshot *s, char *err, size_t errlen);

/* Write s to its path under dir (creating dir and the set directory) through
 * a temporary file, fsync, rename and directory fsync. Float arrays are
 * written straight from s. On success the path is copied to path_out (if not
 * NULL) and 0 returned; on error nothing is left behind but the directories,
 * and ZEPS_EINVAL (bad record) or ZEPS_EIO with a message naming the path.
 * Any thread. It allocates nothing on the heap (stack buffers only), so it
 * may run in a fork()ed child of a threaded server, which must not malloc. */
int zp_snapshot_write(const char *dir, const zp_snapshot *s, char *path_out, size_t path_len,
                      char *err, size_t errlen);

/* Read and verify a snapshot file: magic, format version, every CRC and
 * length. On success *out owns a new record (free with zp_snapshot_free);
 * on error *out is untouched and err names the file and what is wrong:
 * ZEPS_EIO (cannot read), ZEPS_EDATA (corrupt or truncated), ZEPS_EVERSION
 * (not a format this build reads), ZEPS_ENOMEM. */
int zp_snapshot_read(const char *path, zp_snapshot **out, char *err, size_t errlen);

/* As zp_snapshot_read but only checks: streams through the file with a
 * small buffer and allocates nothing large. info may be NULL. */
int zp_snapshot_read_verify(const char *path, zp_snap_info *info, char *err, size_t errlen);

/* Read and check only the header (its CRC and the file size it states). */
int zp_snapshot_read_info(const char *path, zp_snap_info *info, char *err, size_t errlen);

/* Point s->slotmap at a copy of the wire-form map `wire` of `len` bytes
 * (s owns the copy; NULL or len 0: the default map). Aborts on
 * out-of-memory (at most 32 KiB). */
void zp_snapshot_set_map(zp_snapshot *s, const void *wire, uint64_t len);

/* The slot map of the snapshot file at `path`: its header and, in a file
 * of format 2, its slot map section (both CRCs checked), without reading
 * the rest. On success *out is the caller's: the file's map, or the
 * default map of its shard count for a file of format 1; *info (if not
 * NULL) gets the header. ZEPS_EIO / ZEPS_EDATA naming the file otherwise. */
int zp_snapshot_read_map(const char *path, zp_slotmap **out, zp_snap_info *info, char *err,
                         size_t errlen);

/* The slot map of set `setid` of `nshards` files under dir, checked: the
 * set's map is the newest (highest epoch) of its files' maps, and every
 * file's shard must own the same slots under its own map as under the
 * set's. A file written before a move committed and another after it
 * disagree (the set would hold the moved rows twice, or not at all), and
 * so do maps of different slot counts: ZEPS_EDATA naming both files.
 * On success *out (if not NULL) is the caller's copy of the set's map. */
int zp_setmap_check(const char *dir, uint64_t setid, uint32_t nshards, zp_slotmap **out,
                              char *err, size_t errlen);

/* Reshard: from the nsrc snapshots of one complete set (src[k] is shard k
 * of nsrc, same tables in the same order, same clock) make shard `shard` of
 * `nshards`. Dense slices are concatenated and cut again; optimizer state
 * block by block. Version and round: the max over the sources. Workers:
 * merged per rank (clock and incarnation: max; joined false, max_seq and
 * window 0: dedup starts afresh, see docs/snapshots.md). On success *out
 * owns a new record with its own arrays; the sources are not changed. */
int zp_reshard_build(const zp_snapshot *const *src, uint32_t nsrc, uint32_t shard, uint32_t nshards,
                     zp_snapshot **out, char *err, size_t errlen);

/* ---- the manifest ---- */

typedef struct zp_snap_file {
    char name[96]; /* relative to dir: set-.../shard-i-of-S.zsnap */
    uint64_t size;
    uint32_t header_crc;
} zp_snap_file;

typedef struct zp_snap_set {
    uint64_t setid;
    uint32_t nshards;
    int64_t clock;
    uint64_t created_ns;
    zp_snap_file *files; /* [nshards], by shard */
} zp_snap_set;

typedef struct zp_manifest {
    size_t nsets;
    zp_snap_set *sets; /* newest (largest setid) first */
} zp_manifest;

/* Load <dir>/MANIFEST. A missing file is an empty manifest (0 sets). On
 * success *out owns a new manifest; ZEPS_EDATA if it is corrupt. */
int zp_manifest_load(const char *dir, zp_manifest **out, char *err, size_t errlen);
void zp_manifest_free(zp_manifest **mp);

/* The newest complete set, or NULL if there is none. Points into m. */
const zp_snap_set *zp_manifest_newest(const zp_manifest *m);

/* True when all nshards files of set `setid` exist and verify (every CRC).
 * Returns 0 if complete, else ZEPS_EDATA/ZEPS_EIO naming the first file that
 * is missing or bad. Whoever writes the last file of a set finds out this
 * way: each shard calls it after writing its own file, and the one that
 * sees 0 calls zp_manifest_add_set (doing so twice is harmless). */
int zp_manifest_set_complete(const char *dir, uint64_t setid, uint32_t nshards, char *err,
                             size_t errlen);

/* Record set `setid` of nshards files as complete: under the manifest
 * lock, reads each file's header (it must agree on setid, shard count and
 * clock) and rewrites MANIFEST atomically. Adding a set already there
 * replaces its entry; a set whose files a newer set's pruning removed
 * meanwhile is not recorded (returns 0). Does not verify payloads
 * (zp_manifest_set_complete does). */
int zp_manifest_add_set(const char *dir, uint64_t setid, uint32_t nshards, char *err,
                        size_t errlen);

/* Called for every set find_restorable skips, with the reason. */
typedef void (*zp_snap_log_fn)(void *arg, const char *msg);

/* The newest set in the manifest of nshards shards whose file for `shard`
 * reads back valid (size and header CRC as recorded, every CRC) and whose
 * other shards' files verify too (so every shard picks the same set: a
 * shard whose own file is fine still falls back when another shard's file
 * of that set is corrupt). Each set
 * skipped is reported through log (if not NULL). On success *out owns the
 * shard's record, or is NULL when the manifest names no set at all (nothing
 * to restore: a fresh start); if sets exist but none is restorable, returns
 * ZEPS_EDATA with a summary in err. *setid_out (if not NULL) gets the set.
 * A set whose files' slot maps disagree (zp_setmap_check) is
 * skipped; the record returned carries the set's map (the newest of its
 * files') when it is newer than the one its own file recorded. */
int zp_manifest_find_restorable(const char *dir, uint32_t shard, uint32_t nshards,
                                zp_snapshot **out, uint64_t *setid_out, zp_snap_log_fn log,
                                void *log_arg, char *err, size_t errlen);

/* Keep the newest `keep` complete sets (at least 1: the newest complete set
 * is never deleted) and the pinned one (zp_manifest_pin): rewrite MANIFEST
 * without the others, then delete every set directory older than the
 * newest complete set that is not kept (dropped sets and abandoned
 * incomplete ones). Directories newer than the newest complete set may be
 * being written and are left alone. *removed (if not NULL) gets the number
 * of set directories deleted. */
int zp_manifest_prune(const char *dir, unsigned keep, unsigned *removed, char *err, size_t errlen);

/* Pin set `setid` (<dir>/PINNED, replaced atomically): every prune keeps
 * it, whatever `keep` says, until another set is pinned. A shard that
 * restarted pins the set it restored: the others roll back to it, while
 * writers of the abandoned timeline may still complete newer sets whose
 * prune would otherwise delete it. */
int zp_manifest_pin(const char *dir, uint64_t setid, char *err, size_t errlen);

#endif
