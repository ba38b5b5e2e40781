/*
 * snap_fixture.h - what the snapshot tests share (test_snapshot: the file
 * format; test_manifest: manifest, restore fallback, pruning; test_reshard):
 * a set of four tables cut into S shards with values known from
 * zt_snap_val, a scratch directory, and assertions on files and tables.
 *
 * Everything here asserts with Check (ck_assert): call it from a test. The
 * scratch directory is one per test process, zt_snap_dir, made by
 * zt_snap_dir_make and removed with its contents by zt_snap_dir_remove.
 */
#ifndef ZT_SNAP_FIXTURE_H
#define ZT_SNAP_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"

typedef struct zt_snap_tspec {
    const char *name, *opt;
    uint64_t length;
    uint32_t spp;
} zt_snap_tspec;

#define ZT_SNAP_NT 4u
extern const zt_snap_tspec zt_snap_tables[ZT_SNAP_NT];

/* The value of global element i of block q (-1 = params) of table t. */
float zt_snap_val(uint32_t t, int q, uint64_t i, uint32_t salt);

typedef struct zt_snap_fx {
    zp_snapshot *s;
    float *mem[2 * 8];
    int nmem;
} zt_snap_fx;

/* Shard `shard` of S of set `setid`, values salted by `salt`: f->s is a
 * record whose floats f owns; zt_snap_fx_free frees both. */
void zt_snap_fx_make(zt_snap_fx *f, uint64_t setid, uint32_t shard, uint32_t S, uint32_t salt);
void zt_snap_fx_free(zt_snap_fx *f);

/* The scratch directory ("<scratch root>/snap-XXXXXX", scratch.h). */
extern char zt_snap_dir[256];
void zt_snap_dir_make(void);
void zt_snap_dir_remove(void);

/* The whole file at path, in a malloc'ed buffer the caller frees. */
uint8_t *zt_snap_slurp(const char *path, size_t *len);
/* Replace the file at path with b[0..len). */
void zt_snap_spit(const char *path, const uint8_t *b, size_t len);
/* zp_snapshot_write into zt_snap_dir, which must succeed; path as there. */
void zt_snap_write_ok(const zp_snapshot *s, char *path, size_t len);
/* zt_snap_write_ok, then zp_snapshot_free: the call takes s. */
void zt_snap_write_free(zp_snapshot *s, char *path, size_t len);
/* That err (an error message) contains needle. */
void zt_snap_assert_has(const char *err, const char *needle);
/* Entries of dir but . and ..; -1 if it cannot be opened. */
int zt_snap_count_entries(const char *dir);
/* Every field and every float of two dense tables equal. */
void zt_snap_assert_tables_equal(const zp_snap_table *a, const zp_snap_table *b);

#endif
