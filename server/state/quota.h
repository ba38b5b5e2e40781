/*
 * quota.h - how much a shard lets its peers make it hold: tables, sparse
 * rows and bytes (parameters + optimizer state + row index), over all its
 * tables. Each is a cluster-file key (max_tables, max_rows,
 * max_memory_mb); the row and byte limits default to a share of the memory
 * this process may use (common/memlimit.h: the machine's, or its cgroup's
 * memory.max), so a shard that is sent ever more ids or declarations
 * answers ENOMEM instead of growing until the kernel kills it.
 *
 * The checks are made before anything is created: a DECLARE with the bytes
 * its slice will take, a sparse PULL or PUSH with the rows its ids would
 * create. A table that evicts (capacity_rows or memory_budget) grows only
 * up to its own bound, and only that growth counts. Nothing here replies:
 * the op layer answers with the code and message returned.
 */
#ifndef ZP_QUOTA_H
#define ZP_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct zp_table zp_table;

typedef struct zp_quota {
    uint32_t max_tables;
    uint64_t max_rows;
    uint64_t max_bytes;
    uint64_t memory;       /* what this process may use, bytes */
    char memory_from[160]; /* where that figure came from */
    uint64_t full_refused; /* requests refused by a limit */
} zp_quota;

/* The limits of a shard from cfg: a key set to 0 (the default) takes its
 * default: max_bytes = half of zp_memlimit_bytes(), max_rows = max_bytes /
 * 64 (the smallest row record with its index entry); max_tables as given. */
void zp_quota_init(zp_quota *l, const zp_config *cfg);

/* Bytes (zp_table_bytes) and sparse rows held now by tables[0..n). */
uint64_t zp_quota_bytes_held(zp_table *const *tables, uint32_t n);
uint64_t zp_quota_rows_held(zp_table *const *tables, uint32_t n);

/* 0 if a new table `name` of about `bytes` fits beside tables[0..n);
 * else ZEPS_ENOMEM with a message naming the limit (counted). */
int zp_quota_check_table(zp_quota *l, zp_table *const *tables, uint32_t n, const char *name,
                         uint64_t bytes, int shard, char *err, size_t errlen);

/* 0 if `rows` new rows of table t (ids[0..count) of a request, of which
 * `rows` have no row yet) fit; else ZEPS_ENOMEM with a message (counted). */
int zp_quota_check_rows(zp_quota *l, zp_table *const *tables, uint32_t n, const zp_table *t,
                        uint64_t rows, int shard, char *err, size_t errlen);

/* Whether `rows` new rows of t would fit (nothing counted): when even
 * every id of a request being new fits, its ids need not be looked up. */
bool zp_quota_room_for(const zp_quota *l, zp_table *const *tables, uint32_t n, const zp_table *t,
                       uint64_t rows);

/* How many of ids[0..count) table t holds no row for (repeats counted
 * each time: the check errs on the safe side). */
uint64_t zp_quota_new_rows(const zp_table *t, const uint64_t *ids, size_t count);

#endif
