/*
 * rowvers.c - the kept versions of a sparse table's rows (rowvers.h).
 */
#include "rowvers.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "zeps_errors.h"

bool zp_rowvers_fits(uint32_t keep, uint32_t dim)
{
    return keep >= 1 && (uint64_t)keep * (dim + 1u) <= ZP_ROWVERS_MAX_FLOATS;
}

int zp_rowvers_init(zp_rowvers *v, uint32_t keep, uint32_t dim, char *err, size_t errlen)
{
    memset(v, 0, sizeof(*v));
    if (!zp_rowvers_fits(keep, dim))
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "staleness on demand keeps %u versions of each row of %u floats: "
                             "%u x (dim + 1) = %llu floats, over the %d a row history may hold; "
                             "lower cluster.inject's window (or its largest tau)",
                             keep, dim, keep, (unsigned long long)keep * (dim + 1u),
                             ZP_ROWVERS_MAX_FLOATS);
    zp_sparse_opts o = {
        .dim = keep * (dim + 1),
        .optimizer = "sgd",
        .lr = 1.0f,
        .init = ZP_INIT_ZEROS,
    };
    int rc = zp_sparse_new(&v->hist, &o, err, errlen);
    if (rc != 0)
        return rc;
    v->keep = keep;
    v->dim = dim;
    v->scratch = zp_alloc((size_t)o.dim * sizeof(float));
    return 0;
}

void zp_rowvers_fini(zp_rowvers *v)
{
    zp_sparse_destroy(&v->hist);
    free(v->scratch);
    memset(v, 0, sizeof(*v));
}

/* A history's tag of slot k: the version it holds + 1, 0 if empty. */
static uint32_t tag_of(const float *h, uint32_t k)
{
    uint32_t tag;
    memcpy(&tag, &h[k], sizeof(tag));
    return tag;
}

static void note_one(zp_rowvers *v, uint64_t id, const float *values, uint32_t version)
{
    zp_sparse_row row;
    float *h;
    bool known = zp_sparse_get(v->hist, id, &row);
    if (known) {
        h = row.values;
    } else {
        h = v->scratch;
        memset(h, 0, (size_t)v->keep * (v->dim + 1) * sizeof(float));
    }
    uint32_t k = version % v->keep, tag = version + 1;
    memcpy(&h[k], &tag, sizeof(tag));
    memcpy(&h[v->keep + (size_t)k * v->dim], values, v->dim * sizeof(float));
    if (!known) {
        zp_sparse_row fresh = {.id = id, .values = h};
        zp_sparse_put(v->hist, &fresh);
    }
}

void zp_rowvers_note(zp_rowvers *v, const zp_sparse *store, const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        zp_sparse_row row;
        if (zp_sparse_get(store, ids[i], &row)) /* a new row's version 0 is its init */
            note_one(v, ids[i], row.values, row.version);
    }
}

size_t zp_rowvers_serve(const zp_rowvers *v, const zp_sparse *store, const uint64_t *ids, size_t n,
                        uint32_t tau, float *rows, uint32_t *versions)
{
    size_t older = 0;
    for (size_t i = 0; i < n && tau > 0; i++) {
        zp_sparse_row row;
        uint32_t now = versions[i], want = now > tau ? now - tau : 0;
        bool kept = now > 0 && zp_sparse_get(v->hist, ids[i], &row);
        /* the versions kept are contiguous up to now - 1: the first found
         * from want on is the oldest there is; version 0 is the row's
         * initial values, made again rather than kept */
        for (uint32_t u = want; u < now; u++) {
            float *out = &rows[i * v->dim];
            if (u == 0) {
                zp_sparse_init_row(store, ids[i], out);
            } else if (kept && tag_of(row.values, u % v->keep) == u + 1) {
                memcpy(out, &row.values[v->keep + (size_t)(u % v->keep) * v->dim],
                       v->dim * sizeof(float));
            } else {
                continue;
            }
            versions[i] = u;
            older++;
            break;
        }
    }
    return older;
}

uint64_t zp_rowvers_bytes(const zp_rowvers *v)
{
    if (!v->hist)
        return 0;
    zp_sparse_counters c;
    zp_sparse_get_counters(v->hist, &c);
    return c.bytes;
}
