/*
 * warm.h - the rows a cold tier was given and has not yet written to its
 * store (cold.h): demotions and deletes, gathered in RAM by id and written
 * by a thread of their own, off the shard's loop, in one sorted batch per
 * buffer.
 *
 * Two buffers: the loop fills one while the writer thread writes the
 * other. A full buffer is handed to the writer when it is idle (the loop
 * waits for it otherwise). Until its write has ended, a buffer's rows are
 * still found here (zp_warm_get), so a row is always read from here or,
 * once written, from the store: a read of the store (fetch.c) is never
 * asked for an id held here, and needs no write before it.
 *
 * Why: a RocksDB write of a few demotions at a time on the loop inserted
 * each into a skiplist write buffer of random keys, the largest cost of a
 * tiered shard in the CTR job (docs/sparse.md); a sorted batch the size
 * of a buffer goes in nearly as appends, on another core, and a row
 * demoted and soon pulled again comes back from here without a read.
 *
 * Threading: every call from one thread (the loop); the writer thread
 * only calls the store's put, del and commit, one buffer at a time.
 */
#ifndef ZP_WARM_H
#define ZP_WARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cold.h"

typedef struct zp_warm zp_warm;

/* Buffers of `cap` rows of `rec` bytes each, written to store db (ops);
 * *out is the caller's (zp_warm_free), db stays the caller's and must
 * outlive it. 0 or ZEPS_EINTERNAL (no thread). */
int zp_warm_new(zp_warm **out, const zp_cold_ops *ops, zp_cold *db, size_t rec, size_t cap,
                char *err, size_t errlen);

/* Wait for the writer (a write in flight ends), stop it and free; rows not
 * yet handed to it are dropped (a closed tier's rows, as before a
 * close). NULL and *wp NULL tolerated. */
void zp_warm_free(zp_warm **wp);

/* Row id's record (rec bytes; NULL: a delete) to be written; it
 * replaces an earlier one of id not yet written. 0, or a zeps_err with
 * the store's message if a write of the writer failed (the rows of that
 * batch are lost: the caller stops the tier). */
int zp_warm_put(zp_warm *w, uint64_t id, const void *rec, char *err, size_t errlen);

/* 1 and *rec (valid until the next call) if id's newest write is held
 * here, -1 if it is a delete, 0 if id is not here. */
int zp_warm_get(zp_warm *w, uint64_t id, const void **rec);

/* Everything held written to the store (the loop waits), for a scan or a
 * checkpoint of the store. 0 or a zeps_err as zp_warm_put. */
int zp_warm_drain(zp_warm *w, char *err, size_t errlen);

/* Bytes the buffers take. */
uint64_t zp_warm_bytes(const zp_warm *w);

#endif
