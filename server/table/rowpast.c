/*
 * rowpast.c - see rowpast.h.
 */
#include "rowpast.h"

#include <stdlib.h>
#include <string.h>

#include "zeps_errors.h"

void zp_rowpast_init(zp_rowpast *p, uint32_t dim)
{
    memset(p, 0, sizeof(*p));
    p->clock = -1;
    p->dim = dim;
}

void zp_rowpast_fini(zp_rowpast *p)
{
    free(p->ids);
    free(p->vals);
    free(p->vers);
    free(p->slots);
    zp_rowpast_init(p, p->dim);
}

void zp_rowpast_clear(zp_rowpast *p)
{
    p->clock = -1; /* what is kept is read only at p->clock */
}

static size_t home(const zp_rowpast *p, uint64_t id)
{
    uint64_t z = id + 0x9e3779b97f4a7c15ULL; /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return (size_t)(z ^ (z >> 31)) & (p->nslots - 1);
}

/* Room for n rows and their index. 0 or -1. */
static int grow(zp_rowpast *p, size_t n)
{
    size_t nslots = 16;
    while (nslots < 2 * n)
        nslots *= 2;
    if (n > p->cap) {
        uint64_t *ids = realloc(p->ids, n * sizeof(*ids));
        if (ids)
            p->ids = ids;
        float *vals = realloc(p->vals, n * p->dim * sizeof(*vals));
        if (vals)
            p->vals = vals;
        uint32_t *vers = realloc(p->vers, n * sizeof(*vers));
        if (vers)
            p->vers = vers;
        if (!ids || !vals || !vers)
            return -1;
        p->cap = n;
    }
    if (nslots > p->nslots) {
        uint32_t *slots = realloc(p->slots, nslots * sizeof(*slots));
        if (!slots)
            return -1;
        p->slots = slots;
        p->nslots = nslots;
    }
    memset(p->slots, 0, p->nslots * sizeof(*p->slots));
    return 0;
}

int zp_rowpast_keep(zp_rowpast *p, const zp_sparse *store, const uint64_t *ids, size_t n,
                    int64_t clock)
{
    zp_rowpast_clear(p);
    if (n > UINT32_MAX - 1 || grow(p, n) != 0)
        return ZEPS_ENOMEM;
    size_t dim = p->dim;
    for (size_t i = 0; i < n; i++) {
        float *v = p->vals + i * dim;
        zp_sparse_row row;
        if (zp_sparse_get(store, ids[i], &row)) {
            memcpy(v, row.values, dim * sizeof(float));
            p->vers[i] = row.version;
        } else { /* what a pull of a row that does not exist answers */
            zp_sparse_init_row(store, ids[i], v);
            p->vers[i] = 0;
        }
        p->ids[i] = ids[i];
        size_t h = home(p, ids[i]);
        while (p->slots[h] != 0)
            h = (h + 1) & (p->nslots - 1);
        p->slots[h] = (uint32_t)i + 1;
    }
    p->n = n;
    p->clock = clock;
    return 0;
}

void zp_rowpast_none(zp_rowpast *p, int64_t clock)
{
    p->n = 0;
    p->clock = clock;
}

int zp_rowpast_has(const zp_rowpast *p, int64_t clock)
{
    return p->clock >= 0 && p->clock == clock;
}

size_t zp_rowpast_serve(const zp_rowpast *p, int64_t clock, const uint64_t *ids, size_t n,
                        float *out, uint32_t *versions)
{
    if (!zp_rowpast_has(p, clock) || p->n == 0)
        return 0;
    size_t dim = p->dim, served = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t h = home(p, ids[i]); p->slots[h] != 0; h = (h + 1) & (p->nslots - 1)) {
            size_t k = p->slots[h] - 1;
            if (p->ids[k] != ids[i])
                continue;
            memcpy(out + i * dim, p->vals + k * dim, dim * sizeof(float));
            if (versions)
                versions[i] = p->vers[k];
            served++;
            break;
        }
    }
    return served;
}
