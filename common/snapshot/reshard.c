/*
 * reshard.c - a snapshot set of S shards cut again for S' shards: each
 * dense table assembled from every piece of the set (a shard's default
 * slice, or the pieces its map gave it) and cut at the default slices of
 * S', sparse rows re-hashed to zp_sparse_shard_of(id, S'); see snapshot.h
 * and docs/snapshots.md.
 *
 * A table is known by its name: a shard holding several pieces of a dense
 * table has a record per piece, so the sources' records need not line up
 * by index. The tables of the result are shard 0's, in the order of their
 * first records there.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "errors.h"
#include "snapshot.h"
#include "snapshot_io.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

/* ---- resharding ---- */

static int same_table(const zp_snap_table *a, const zp_snap_table *b)
{
    return strcmp(a->name, b->name) == 0 && strcmp(a->optimizer, b->optimizer) == 0 &&
           a->kind == b->kind && a->length == b->length &&
           memcmp(&a->hyper, &b->hyper, sizeof(a->hyper)) == 0 && a->init == b->init &&
           a->init_scale == b->init_scale && a->seed == b->seed &&
           a->has_staleness == b->has_staleness && a->staleness == b->staleness &&
           a->state_per_param == b->state_per_param &&
           (a->kind != 1 ||
            (a->spec_len == b->spec_len && memcmp(a->spec, b->spec, a->spec_len) == 0));
}

/* s's first record of table `name` (NULL if none); *count (if not NULL)
 * gets how many records of it s has. */
static const zp_snap_table *first_of(const zp_snapshot *s, const char *name, uint32_t *count)
{
    const zp_snap_table *first = NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->ntables; i++)
        if (strcmp(s->tables[i].name, name) == 0) {
            first = first ? first : &s->tables[i];
            n++;
        }
    if (count)
        *count = n;
    return first;
}

/* Whether record i of s is the first of its table's. */
static bool is_first(const zp_snapshot *s, uint32_t i)
{
    return first_of(s, s->tables[i].name, NULL) == &s->tables[i];
}

/* Sparse table `t->name` of shard `shard` of `nshards`: every source row whose id
 * hashes there (rows are re-hashed, not re-cut); counters summed over the
 * sources go to shard 0 (they describe the table's history, not a shard's).
 * On success t->rows/owned_bytes hold the new spec and rows. */
static int reshard_sparse(const zp_snapshot *const *src, uint32_t nsrc, uint32_t shard,
                          uint32_t nshards, zp_snap_table *t)
{
    uint64_t rec = ZP_SNAP_ROW_LEN(t->length, t->state_per_param), nrows = 0;
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snap_table *u = first_of(src[k], t->name, NULL);
        uint64_t n = zp_get64(u->rows);
        for (uint64_t j = 0; j < n; j++)
            nrows += (uint32_t)zp_sparse_shard_of(zp_get64(u->rows + ZP_SNAP_ROWS_HDR + j * rec),
                                                  (int)nshards) == shard;
    }
    uint64_t rows_len = ZP_SNAP_ROWS_HDR + nrows * rec;
    uint8_t *mem = malloc((size_t)(t->spec_len + rows_len));
    if (!mem)
        return ZEPS_ENOMEM;
    memcpy(mem, t->spec, t->spec_len);
    uint8_t *rows = mem + t->spec_len, *at = rows + ZP_SNAP_ROWS_HDR;
    memset(rows, 0, ZP_SNAP_ROWS_HDR);
    zp_put64(rows, nrows);
    zp_put32(rows + 8, (uint32_t)t->length);
    zp_put32(rows + 12, t->state_per_param);
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snap_table *u = first_of(src[k], t->name, NULL);
        for (int c = 0; c < 5 && shard == 0; c++)
            zp_put64(rows + 16 + 8 * c,
                     zp_get64(rows + 16 + 8 * c) + zp_get64(u->rows + 16 + 8 * c));
        uint64_t n = zp_get64(u->rows);
        for (uint64_t j = 0; j < n; j++) {
            const uint8_t *r = u->rows + ZP_SNAP_ROWS_HDR + j * rec;
            if ((uint32_t)zp_sparse_shard_of(zp_get64(r), (int)nshards) != shard)
                continue;
            memcpy(at, r, (size_t)rec);
            at += rec;
        }
    }
    t->owned = NULL;
    t->params = t->state = NULL;
    t->owned_bytes = mem;
    t->spec = mem;
    t->rows = rows;
    t->rows_len = rows_len;
    return 0;
}

/* Source k's records against shard 0's: the same tables (each named by
 * a record of both), alike but for their slices, a sparse table once. */
static int check_tables(const zp_snapshot *a, const zp_snapshot *b, uint32_t k, char *err,
                        size_t errlen)
{
    for (int q = 0; q < 2; q++) {
        const zp_snapshot *x = q ? a : b, *y = q ? b : a;
        for (uint32_t i = 0; i < x->ntables; i++) {
            uint32_t n;
            const zp_snap_table *t = &x->tables[i], *u = first_of(y, t->name, &n);
            if (!u || !same_table(u, t))
                return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                     "reshard: table '%s' of shard %u %s shard %u's", t->name,
                                     q ? 0 : k, u ? "differs from" : "is not one of", q ? k : 0);
            if (t->kind == 1 && n != 1)
                return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                     "reshard: sparse table '%s' has %u records in shard %u's "
                                     "file",
                                     t->name, n, q ? k : 0);
        }
    }
    return 0;
}

/* Whether records x and y of dense table `name` overlap: the first
 * element both hold into *at. */
static bool overlap(const zp_snap_table *x, const zp_snap_table *y, const char *name, uint64_t *at)
{
    if (strcmp(x->name, name) != 0 || strcmp(y->name, name) != 0)
        return false;
    *at = x->begin > y->begin ? x->begin : y->begin;
    return *at < (x->end < y->end ? x->end : y->end);
}

/* No element of dense table `name` in two records of the sources. */
static int check_twice(const zp_snapshot *const *src, uint32_t nsrc, const char *name, char *err,
                       size_t errlen)
{
    for (uint32_t k = 0; k < nsrc; k++)
        for (uint32_t i = 0; i < src[k]->ntables; i++)
            for (uint32_t l = k; l < nsrc; l++)
                for (uint32_t j = l == k ? i + 1 : 0; j < src[l]->ntables; j++) {
                    uint64_t at;
                    if (overlap(&src[k]->tables[i], &src[l]->tables[j], name, &at))
                        return zp_errors_set(err, errlen, ZEPS_EDATA,
                                             "reshard: dense table '%s': shard %u's file and "
                                             "shard %u's both hold element %" PRIu64
                                             " (a piece twice: a move committed while the set "
                                             "was taken)",
                                             name, k, l, at);
                }
    return 0;
}

/* The records of dense table `name` (`length` elements) over the sources
 * cover each element once: none twice, and from 0 each next one where
 * the last ends. */
static int check_cover(const zp_snapshot *const *src, uint32_t nsrc, const char *name,
                       uint64_t length, char *err, size_t errlen)
{
    int rc = check_twice(src, nsrc, name, err, errlen);
    for (uint64_t at = 0, next = 0; rc == 0 && at < length; at = next) {
        for (uint32_t k = 0; k < nsrc; k++)
            for (uint32_t i = 0; i < src[k]->ntables; i++) {
                const zp_snap_table *t = &src[k]->tables[i];
                if (strcmp(t->name, name) == 0 && t->begin == at && t->end > at)
                    next = t->end;
            }
        if (next == at)
            rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                               "reshard: dense table '%s': no file of the set holds element "
                               "%" PRIu64 " (a piece missing: a move committed while the set "
                               "was taken)",
                               name, at);
    }
    return rc;
}

static int reshard_check(const zp_snapshot *const *src, uint32_t nsrc, char *err, size_t errlen)
{
    if (nsrc == 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "reshard: no source snapshots");
    const zp_snapshot *a = src[0];
    for (uint32_t k = 0; k < nsrc; k++) {
        const zp_snapshot *b = src[k];
        if (!b)
            return zp_errors_set(err, errlen, ZEPS_EINVAL, "reshard: source %u missing", k);
        int rc = zp_snapshot_validate(b, err, errlen);
        if (rc)
            return rc;
        if (b->h.shard != k || b->h.nshards != nsrc)
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "reshard: source %u is shard %u of %u, expected %u of %u", k,
                                 b->h.shard, b->h.nshards, k, nsrc);
        if (b->h.setid != a->h.setid || b->h.clock != a->h.clock ||
            b->h.nworkers != a->h.nworkers || strcmp(b->h.consistency, a->h.consistency) != 0)
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "reshard: shard %u (set %016" PRIx64 ", clock %" PRId64
                                 ") is not from the same cut as shard 0 (set %016" PRIx64
                                 ", clock %" PRId64 ")",
                                 k, b->h.setid, b->h.clock, a->h.setid, a->h.clock);
        if ((rc = check_tables(a, b, k, err, errlen)))
            return rc;
    }
    for (uint32_t i = 0; i < a->ntables; i++) {
        const zp_snap_table *t = &a->tables[i];
        int rc = t->kind == 0 && is_first(a, i)
                     ? check_cover(src, nsrc, t->name, t->length, err, errlen)
                     : 0;
        if (rc)
            return rc;
    }
    return 0;
}

/* Copy block q (-1: the parameters) of the new slice [b2, e2) of dense
 * table `name` from every record of it that overlaps. */
static void reshard_block(const zp_snapshot *const *src, uint32_t nsrc, const char *name, int q,
                          float *dst, uint64_t b2, uint64_t e2)
{
    for (uint32_t k = 0; k < nsrc; k++)
        for (uint32_t i = 0; i < src[k]->ntables; i++) {
            const zp_snap_table *t = &src[k]->tables[i];
            uint64_t lo = t->begin > b2 ? t->begin : b2, hi = t->end < e2 ? t->end : e2;
            if (strcmp(t->name, name) != 0 || lo >= hi)
                continue;
            uint64_t nk = t->end - t->begin;
            const float *from = q < 0 ? t->params : t->state + (uint64_t)q * nk;
            memcpy(dst + (lo - b2), from + (lo - t->begin), (size_t)(hi - lo) * sizeof(float));
        }
}

/* The newest version and round of table t->name over every record of it
 * in the sources, into t. */
static void reshard_newest(const zp_snapshot *const *src, uint32_t nsrc, zp_snap_table *t)
{
    for (uint32_t k = 0; k < nsrc; k++)
        for (uint32_t i = 0; i < src[k]->ntables; i++) {
            const zp_snap_table *u = &src[k]->tables[i];
            if (strcmp(u->name, t->name) != 0)
                continue;
            if (u->version > t->version)
                t->version = u->version;
            if (u->round > t->round)
                t->round = u->round;
        }
}

/* Dense table t->name of shard `shard` of `nshards`: the new slice's
 * parameters and state copied from the records it overlaps. On success
 * t->owned holds them; on ZEPS_ENOMEM t is unchanged but for begin and
 * end. */
static int reshard_dense(const zp_snapshot *const *src, uint32_t nsrc, uint32_t shard,
                         uint32_t nshards, zp_snap_table *t)
{
    t->begin = zp_slice_at(t->length, shard, nshards);
    t->end = zp_slice_at(t->length, shard + 1, nshards);
    uint64_t n = t->end - t->begin, spp = t->state_per_param;
    float *mem = malloc((size_t)(n * (1 + spp) * 4) + 4);
    if (!mem)
        return ZEPS_ENOMEM;
    reshard_block(src, nsrc, t->name, -1, mem, t->begin, t->end);
    for (uint64_t q = 0; q < spp; q++)
        reshard_block(src, nsrc, t->name, (int)q, mem + n * (1 + q), t->begin, t->end);
    t->owned = mem;
    t->params = mem;
    t->state = spp ? mem + n : NULL;
    return 0;
}

/* A new snapshot for ntables tables holding the sources' worker records
 * merged per rank (ranks < nworkers, checked by validate): the newest clock
 * and incarnation, left only if every shard saw the worker leave. NULL if
 * out of memory; the caller owns the result. */
static zp_snapshot *reshard_workers(const zp_snapshot *const *src, uint32_t nsrc, uint32_t ntables)
{
    uint32_t N = src[0]->h.nworkers;
    zp_snap_worker *m = calloc(N ? N : 1, sizeof(*m));
    bool *have = calloc(N ? N : 1, sizeof(*have));
    if (!m || !have) {
        free(m);
        free(have);
        return NULL;
    }
    uint32_t nrec = 0;
    for (uint32_t k = 0; k < nsrc; k++)
        for (uint32_t j = 0; j < src[k]->nworker_recs; j++) {
            const zp_snap_worker *w = &src[k]->workers[j];
            zp_snap_worker *x = &m[w->rank];
            if (!have[w->rank]) {
                have[w->rank] = true;
                nrec++;
                *x = *w;
                continue;
            }
            if (w->clock > x->clock)
                x->clock = w->clock;
            if (w->incarnation > x->incarnation)
                x->incarnation = w->incarnation;
            x->left = x->left && w->left;
        }
    zp_snapshot *s = zp_snapshot_new(ntables, nrec);
    for (uint32_t r = 0, j = 0; r < N; r++) {
        if (!have[r])
            continue;
        /* The duplicate windows are per (worker, shard) sequence numbers of
         * the old layout: meaningless here. Not joined forces a fresh HELLO
         * before this shard accepts anything from the worker. */
        m[r].joined = false;
        m[r].max_seq = 0;
        m[r].window = 0;
        s->workers[j++] = m[r];
    }
    free(m);
    free(have);
    return s;
}

int zp_reshard_build(const zp_snapshot *const *src, uint32_t nsrc, uint32_t shard, uint32_t nshards,
                     zp_snapshot **out, char *err, size_t errlen)
{
    if (nshards == 0 || shard >= nshards)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "reshard: shard %u of %u", shard, nshards);
    int rc = reshard_check(src, nsrc, err, errlen);
    if (rc)
        return rc;
    const zp_snapshot *a = src[0];
    uint32_t ntables = 0;
    for (uint32_t i = 0; i < a->ntables; i++)
        ntables += is_first(a, i);
    zp_snapshot *s = reshard_workers(src, nsrc, ntables);
    if (!s)
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "reshard: no memory for %u workers",
                             a->h.nworkers);
    s->h = a->h;
    s->h.shard = shard;
    s->h.nshards = nshards;
    for (uint32_t k = 0; k < nsrc; k++) {
        if (src[k]->h.incarnation > s->h.incarnation)
            s->h.incarnation = src[k]->h.incarnation;
        if (src[k]->h.created_ns > s->h.created_ns)
            s->h.created_ns = src[k]->h.created_ns;
    }

    s->ntables = 0; /* counts tables built, for free on error */
    for (uint32_t i = 0; i < a->ntables; i++) {
        if (!is_first(a, i))
            continue; /* another piece of a dense table already built */
        zp_snap_table t = a->tables[i];
        reshard_newest(src, nsrc, &t);
        t.owned = NULL;
        t.owned_bytes = NULL;
        rc = t.kind == 1 ? reshard_sparse(src, nsrc, shard, nshards, &t)
                         : reshard_dense(src, nsrc, shard, nshards, &t);
        if (rc != 0) {
            zp_snapshot_free(&s);
            return zp_errors_set(err, errlen, ZEPS_ENOMEM, "reshard: table '%s': no memory",
                                 t.name);
        }
        s->tables[s->ntables++] = t;
    }
    *out = s;
    return 0;
}
