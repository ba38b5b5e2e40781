/*
 * rowindex.c - the id -> row number index of a sparse table's store.
 *
 * One open-addressing table of 8-byte slots {row number, low 32 bits of the
 * id's hash}, power-of-two capacity, linear probing, doubled when the load
 * would pass 0.7, backward-shift deletion (no tombstones, so probe lengths do
 * not degrade under churn). The stored hash bits give an entry's home slot
 * without touching its row, which keeps growth and deletion inside the
 * index; they also filter probes before the row's id is compared. The hash
 * is XXH3 under a per-table random seed (zp_rowindex_hash).
 *
 * Lookup and insertion are static inline in rowindex.h (the per-row hot
 * path); this file holds what runs rarely. The index lives in the zp_sparse
 * (sparse_int.h), which owns its memory.
 */
#include "rowindex.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "rng.h"

void zp_rowindex_init(zp_sparse *t)
{
    t->icap = ZP_ROWINDEX_MIN_CAP;
    t->index = zp_alloc_huge(t->icap * sizeof(slot));
    memset(t->index, 0xff, t->icap * sizeof(slot));
    t->index_seed = zp_rng_random64();
}

void zp_rowindex_grow(zp_sparse *t)
{
    uint64_t ncap = t->icap * 2;
    slot *ni = zp_alloc_huge(ncap * sizeof(slot));

    memset(ni, 0xff, ncap * sizeof(slot));
    for (uint64_t i = 0; i < t->icap; i++)
        if (t->index[i].row != ROW_NONE)
            zp_rowindex_put(ni, ncap - 1, t->index[i]);
    zp_alloc_huge_free(t->index, t->icap * sizeof(slot));
    t->c.bytes += (ncap - t->icap) * sizeof(slot);
    t->index = ni;
    t->icap = ncap;
}

/* Shift later entries of the cluster back into the hole at i so every entry
 * stays reachable from its home slot without tombstones. */
void zp_rowindex_delete(zp_sparse *t, uint64_t i)
{
    uint64_t mask = t->icap - 1, j = i;

    for (;;) {
        j = (j + 1) & mask;
        if (t->index[j].row == ROW_NONE)
            break;
        uint64_t home = t->index[j].hash & mask;
        /* The entry at j may move to the hole at i unless its home lies
         * cyclically in (i, j]. */
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            t->index[i] = t->index[j];
            i = j;
        }
    }
    t->index[i].row = ROW_NONE;
}
