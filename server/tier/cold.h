/*
 * cold.h - the store under a sparse table's cold tier: fixed-size values
 * keyed by u64 ids, on disk. A store is a const zp_cold_ops table chosen by
 * name (RocksDB today, rocks.c); tier.c is its only user, so another store
 * (LMDB) is one more file and one more entry in tier.c's list of stores.
 *
 * Durability is not the store's: writes may be lost in a crash (RocksDB
 * runs with its write-ahead log off). A cold tier is made durable by a
 * checkpoint taken with the snapshot of its table (docs/sparse.md, "Cold
 * tier").
 *
 * Every call returns 0 or a zeps_err with the store's own message in err.
 * Threading: get_many, bytes and memory from any thread (several at
 * once); every other call from one thread at a time (the tier hands them
 * between its writer thread, warm.h, and the loop, never at once).
 */
#ifndef ZP_COLD_H
#define ZP_COLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zp_cold zp_cold; /* a store's open database (its ops' own body) */

/* What a store holds in memory now, by part (RocksDB's own figures). */
typedef struct zp_cold_memory {
    uint64_t write_buffers; /* rocksdb.cur-size-all-mem-tables */
    uint64_t table_readers; /* rocksdb.estimate-table-readers-mem: index and filter
                             * blocks held outside the block cache */
    uint64_t block_cache;   /* the block cache's usage (index, filter and data blocks) */
} zp_cold_memory;

typedef struct zp_cold_ops {
    const char *name;
    /* Open (create if missing) the database in folder `path`, holding at
     * most `mem` bytes in memory (0: the store's unbounded defaults); *out
     * is the caller's, closed with close. */
    int (*open)(zp_cold **out, const char *path, uint64_t mem, char *err, size_t errlen);
    /* Open an existing database read-only (a snapshot's checkpoint: nothing
     * in the folder is changed); ZEPS_EDATA if it is missing or damaged. */
    int (*open_read)(zp_cold **out, const char *path, char *err, size_t errlen);
    void (*close)(zp_cold **cp); /* NULL and *cp NULL tolerated; sets *cp NULL */
    /* Delete the database in `path` (a closed one) with everything in it. */
    int (*destroy)(const char *path, char *err, size_t errlen);
    /* Write (put) or delete (del) one row. A store may gather them and
     * write them later, in one batch: reads see them only once commit (or
     * checkpoint) has run. A failure may be that of earlier writes. */
    int (*put)(zp_cold *c, uint64_t id, const void *val, size_t len, char *err, size_t errlen);
    int (*del)(zp_cold *c, uint64_t id, char *err, size_t errlen);
    int (*commit)(zp_cold *c, char *err, size_t errlen);
    /* The values of ids[0..n), each `len` bytes, into vals[i * len];
     * found[i] says whether id i is there (a value of another length is
     * ZEPS_EDATA). */
    int (*get_many)(zp_cold *c, const uint64_t *ids, size_t n, void *vals, size_t len, bool *found,
                    char *err, size_t errlen);
    /* Iterate in id order: *it starts NULL; each call gives the next id and
     * a pointer to its value (valid until the next call) and returns 1, or 0
     * at the end (the iterator freed, *it NULL again), or a negative
     * zeps_err (freed too). An iteration sees every write made before it
     * began. iter_free ends an iteration early. */
    int (*iter_next)(zp_cold *c, void **it, uint64_t *id, const void **val, size_t *len, char *err,
                     size_t errlen);
    void (*iter_free)(zp_cold *c, void **it);
    /* Bytes the database takes on disk and in its write buffers. */
    uint64_t (*bytes)(zp_cold *c);
    /* What it holds in memory now. */
    void (*memory)(zp_cold *c, zp_cold_memory *out);
    /* A consistent copy of the database with every write so far in folder
     * `dir` (must not exist), from which open works. */
    int (*checkpoint)(zp_cold *c, const char *dir, char *err, size_t errlen);
} zp_cold_ops;

extern const zp_cold_ops zp_rocks_ops; /* rocks.c */

#endif
