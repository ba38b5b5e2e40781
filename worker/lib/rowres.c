/*
 * rowres.c - error-feedback residuals of a sparse table, one row per id the
 * client pushed: an open-addressing index (random-seeded id hash) over rows
 * kept in one growing array. It sits at the bottom of libzeps and calls
 * nothing of it; the table (tables.c) owns the store, the sparse batches
 * (sparse.c) read and write its rows while encoding a compressed push.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rng.h"
#include "rowres.h"
#include "sparse_hash.h"

struct zp_rowres {
    uint32_t dim;
    uint64_t seed; /* hash seed, random */
    size_t cap, n; /* index slots (power of two), rows held */
    uint64_t *keys;
    uint32_t *row; /* slot -> row number, UINT32_MAX = empty */
    float *vals;   /* n rows of dim */
    size_t vcap;   /* rows allocated */
};

static void grow(zp_rowres *r)
{
    size_t cap = r->cap ? 2 * r->cap : 1024;
    uint64_t *keys = zp_alloc(cap * sizeof(uint64_t));
    uint32_t *row = zp_alloc(cap * sizeof(uint32_t));
    memset(row, 0xff, cap * sizeof(uint32_t));
    for (size_t i = 0; i < r->cap; i++) {
        if (r->row[i] == UINT32_MAX)
            continue;
        size_t j = (size_t)zp_sparse_hash_id(r->keys[i], r->seed) & (cap - 1);
        while (row[j] != UINT32_MAX)
            j = (j + 1) & (cap - 1);
        keys[j] = r->keys[i];
        row[j] = r->row[i];
    }
    free(r->keys);
    free(r->row);
    r->keys = keys;
    r->row = row;
    r->cap = cap;
}

float *zp_rowres_get(zp_rowres *r, uint64_t id)
{
    if (2 * (r->n + 1) > r->cap)
        grow(r);
    size_t j = (size_t)zp_sparse_hash_id(id, r->seed) & (r->cap - 1);
    while (r->row[j] != UINT32_MAX && r->keys[j] != id)
        j = (j + 1) & (r->cap - 1);
    if (r->row[j] == UINT32_MAX) {
        if (r->n == r->vcap) {
            r->vcap = r->vcap ? 2 * r->vcap : 1024;
            r->vals = zp_alloc_resize(r->vals, r->vcap * r->dim * sizeof(float));
        }
        memset(r->vals + r->n * r->dim, 0, r->dim * sizeof(float));
        r->keys[j] = id;
        r->row[j] = (uint32_t)r->n++;
    }
    return r->vals + (size_t)r->row[j] * r->dim;
}

zp_rowres *zp_rowres_new(uint32_t dim)
{
    zp_rowres *r = zp_alloc_zeroed(1, sizeof(*r));
    r->dim = dim;
    r->seed = zp_rng_random64();
    return r;
}

void zp_rowres_free(zp_rowres **rp)
{
    if (!rp || !*rp)
        return;
    free((*rp)->keys);
    free((*rp)->row);
    free((*rp)->vals);
    free(*rp);
    *rp = NULL;
}
