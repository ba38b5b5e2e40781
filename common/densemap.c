/*
 * densemap.c - dense tables by range: per table, pieces and their owners
 * (see densemap.h). A map holds a few tables of a few pieces each, so a
 * lookup is a scan of the names and a binary search of the pieces.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "densemap.h"
#include "errors.h"

typedef struct dtable {
    char name[ZP_DENSEMAP_NAME_MAX + 1];
    uint64_t length;
    uint32_t npieces;
    uint64_t *lo;    /* [npieces], ascending, lo[0] = 0 */
    uint16_t *owner; /* [npieces] */
} dtable;

struct zp_densemap {
    uint32_t ntables;
    dtable *t; /* [ntables], ascending by name */
};

void zp_densemap_destroy(zp_densemap **dp)
{
    if (!dp || !*dp)
        return;
    for (uint32_t i = 0; i < (*dp)->ntables; i++) {
        free((*dp)->t[i].lo);
        free((*dp)->t[i].owner);
    }
    free((*dp)->t);
    free(*dp);
    *dp = NULL;
}

/* t's pieces made room for: n of them, unset. */
static void size_pieces(dtable *t, uint32_t n)
{
    t->npieces = n;
    t->lo = zp_alloc((size_t)n * sizeof(*t->lo));
    t->owner = zp_alloc((size_t)n * sizeof(*t->owner));
}

zp_densemap *zp_densemap_copy(const zp_densemap *d)
{
    if (!d)
        return NULL;
    zp_densemap *c = zp_alloc(sizeof(*c));
    c->ntables = d->ntables;
    c->t = zp_alloc_zeroed(d->ntables, sizeof(*c->t));
    for (uint32_t i = 0; i < d->ntables; i++) {
        const dtable *s = &d->t[i];
        dtable *t = &c->t[i];
        memcpy(t->name, s->name, sizeof(t->name));
        t->length = s->length;
        size_pieces(t, s->npieces);
        memcpy(t->lo, s->lo, (size_t)s->npieces * sizeof(*t->lo));
        memcpy(t->owner, s->owner, (size_t)s->npieces * sizeof(*t->owner));
    }
    return c;
}

static const dtable *lookup(const zp_densemap *d, const char *name)
{
    for (uint32_t i = 0; d && i < d->ntables; i++)
        if (strcmp(d->t[i].name, name) == 0)
            return &d->t[i];
    return NULL;
}

size_t zp_densemap_count(const zp_densemap *d)
{
    return d ? d->ntables : 0;
}

const char *zp_densemap_name(const zp_densemap *d, size_t i)
{
    return d->t[i].name;
}

uint64_t zp_densemap_length(const zp_densemap *d, size_t i)
{
    return d->t[i].length;
}

int zp_densemap_names(const zp_densemap *d, const char *name)
{
    return lookup(d, name) != NULL;
}

size_t zp_densemap_pieces(const zp_densemap *d, const char *name, uint64_t length, int base,
                          zp_dense_piece *out, size_t max)
{
    const dtable *t = lookup(d, name);
    size_t n = 0;
    if (t && t->length == length) {
        for (uint32_t i = 0; i < t->npieces; i++, n++)
            if (n < max)
                out[n] = (zp_dense_piece){.lo = t->lo[i],
                                          .hi = i + 1 < t->npieces ? t->lo[i + 1] : t->length,
                                          .owner = t->owner[i]};
        return n;
    }
    for (int k = 0; k < base; k++) {
        uint64_t lo = length * (uint64_t)k / (uint64_t)base;
        uint64_t hi = length * (uint64_t)(k + 1) / (uint64_t)base;
        if (lo == hi)
            continue;
        if (n < max)
            out[n] = (zp_dense_piece){.lo = lo, .hi = hi, .owner = k};
        n++;
    }
    return n;
}

size_t zp_densemap_find(const zp_densemap *d, const char *name, uint64_t length, int base,
                        uint64_t at, zp_dense_piece *out)
{
    size_t n = zp_densemap_pieces(d, name, length, base, NULL, 0);
    zp_dense_piece *p = zp_alloc((n ? n : 1) * sizeof(*p));
    zp_densemap_pieces(d, name, length, base, p, n);
    size_t lo = 0, hi = n; /* the last piece whose lo <= at */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (p[mid].lo <= at)
            lo = mid;
        else
            hi = mid;
    }
    *out = p[lo];
    free(p);
    return lo;
}

uint64_t zp_densemap_held(const zp_densemap *d, const char *name, uint64_t length, int base, int k)
{
    size_t n = zp_densemap_pieces(d, name, length, base, NULL, 0);
    zp_dense_piece *p = zp_alloc((n ? n : 1) * sizeof(*p));
    zp_densemap_pieces(d, name, length, base, p, n);
    uint64_t held = 0;
    for (size_t i = 0; i < n; i++)
        held += p[i].owner == k ? p[i].hi - p[i].lo : 0;
    free(p);
    return held;
}

int zp_densemap_any_owner(const zp_densemap *d, int (*bad)(int k, const void *arg), const void *arg)
{
    for (uint32_t i = 0; d && i < d->ntables; i++)
        for (uint32_t j = 0; j < d->t[i].npieces; j++)
            if (bad(d->t[i].owner[j], arg))
                return d->t[i].owner[j];
    return -1;
}

/* Table `name` of d, or a new entry for it (in name order) holding the
 * default pieces; NULL with a reason if d names it with another length. */
static dtable *entry_for(zp_densemap *d, const char *name, uint64_t length, int base, char *err,
                         size_t errlen)
{
    uint32_t at = 0;
    while (at < d->ntables && strcmp(d->t[at].name, name) < 0)
        at++;
    if (at < d->ntables && strcmp(d->t[at].name, name) == 0) {
        if (d->t[at].length == length)
            return &d->t[at];
        zp_errors_set(err, errlen, ZEPS_EINVAL,
                      "dense table '%s' has %" PRIu64 " elements in the map, not %" PRIu64, name,
                      d->t[at].length, length);
        return NULL;
    }
    d->t = zp_alloc_resize(d->t, (size_t)(d->ntables + 1) * sizeof(*d->t));
    memmove(&d->t[at + 1], &d->t[at], (size_t)(d->ntables - at) * sizeof(*d->t));
    d->ntables++;
    dtable *t = &d->t[at];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->length = length;
    size_t n = zp_densemap_pieces(NULL, name, length, base, NULL, 0);
    zp_dense_piece *p = zp_alloc(n * sizeof(*p));
    zp_densemap_pieces(NULL, name, length, base, p, n);
    size_pieces(t, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        t->lo[i] = p[i].lo;
        t->owner[i] = (uint16_t)p[i].owner;
    }
    free(p);
    return t;
}

/* Cut t's piece holding `at` at `at` (nothing if a piece begins there or
 * at is the length); both parts keep the owner. */
static void cut_at(dtable *t, uint64_t at)
{
    if (at >= t->length)
        return;
    uint32_t i = 0;
    while (i + 1 < t->npieces && t->lo[i + 1] <= at)
        i++;
    if (t->lo[i] == at)
        return;
    t->lo = zp_alloc_resize(t->lo, (size_t)(t->npieces + 1) * sizeof(*t->lo));
    t->owner = zp_alloc_resize(t->owner, (size_t)(t->npieces + 1) * sizeof(*t->owner));
    memmove(&t->lo[i + 2], &t->lo[i + 1], (size_t)(t->npieces - i - 1) * sizeof(*t->lo));
    memmove(&t->owner[i + 2], &t->owner[i + 1], (size_t)(t->npieces - i - 1) * sizeof(*t->owner));
    t->lo[i + 1] = at;
    t->owner[i + 1] = t->owner[i];
    t->npieces++;
}

int zp_densemap_moved(const zp_densemap *d, const char *name, uint64_t length, int base,
                      uint64_t lo, uint64_t hi, int to, zp_densemap **out, char *err, size_t errlen)
{
    size_t nl = name ? strlen(name) : 0;
    if (nl == 0 || nl > ZP_DENSEMAP_NAME_MAX || lo >= hi || hi > length || to < 0 || base < 1)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "cannot move elements [%" PRIu64 ", %" PRIu64
                             ") of a dense table of %" PRIu64 " to shard %d",
                             lo, hi, length, to);
    zp_densemap *n = d ? zp_densemap_copy(d) : zp_alloc_zeroed(1, sizeof(*n));
    dtable *t = entry_for(n, name, length, base, err, errlen);
    if (t) {
        cut_at(t, lo);
        cut_at(t, hi);
    }
    if (t && t->npieces > ZP_DENSEMAP_PIECES_MAX) {
        zp_errors_set(err, errlen, ZEPS_EINVAL,
                      "dense table '%s' would be cut into %u pieces (at most %d)", name, t->npieces,
                      ZP_DENSEMAP_PIECES_MAX);
        t = NULL;
    }
    if (!t) {
        zp_densemap_destroy(&n);
        return ZEPS_EINVAL;
    }
    for (uint32_t i = 0; i < t->npieces; i++)
        if (t->lo[i] >= lo && t->lo[i] < hi)
            t->owner[i] = (uint16_t)to;
    *out = n;
    return 0;
}

int zp_densemap_same(const zp_densemap *a, const zp_densemap *b)
{
    if (!a || !b)
        return !a && !b;
    if (a->ntables != b->ntables)
        return 0;
    for (uint32_t i = 0; i < a->ntables; i++) {
        const dtable *x = &a->t[i], *y = &b->t[i];
        if (strcmp(x->name, y->name) != 0 || x->length != y->length || x->npieces != y->npieces ||
            memcmp(x->lo, y->lo, (size_t)x->npieces * sizeof(*x->lo)) != 0 ||
            memcmp(x->owner, y->owner, (size_t)x->npieces * sizeof(*x->owner)) != 0)
            return 0;
    }
    return 1;
}

/* --- the wire form --- */

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

size_t zp_densemap_wire_size(const zp_densemap *d)
{
    size_t n = 4;
    for (uint32_t i = 0; i < d->ntables; i++)
        n += 2 + strlen(d->t[i].name) + 8 + 4 + (size_t)d->t[i].npieces * 10;
    return n;
}

void zp_densemap_encode(const zp_densemap *d, unsigned char *p)
{
    put_le(p, d->ntables, 4);
    p += 4;
    for (uint32_t i = 0; i < d->ntables; i++) {
        const dtable *t = &d->t[i];
        size_t nl = strlen(t->name);
        put_le(p, nl, 2);
        memcpy(p + 2, t->name, nl);
        p += 2 + nl;
        put_le(p, t->length, 8);
        put_le(p + 8, t->npieces, 4);
        p += 12;
        for (uint32_t j = 0; j < t->npieces; j++, p += 10) {
            put_le(p, t->lo[j], 8);
            put_le(p + 8, t->owner[j], 2);
        }
    }
}

/* Table i of a wire form at p[at..len) into t; the new offset, or 0 with a
 * reason in err. `prev` is the name before (ascending, distinct). */
static size_t decode_table(dtable *t, const unsigned char *p, size_t at, size_t len,
                           const char *prev, int nshards, char *err, size_t errlen)
{
    size_t nl = at + 2 <= len ? (size_t)get_le(p + at, 2) : 0;
    if (nl == 0 || nl > ZP_DENSEMAP_NAME_MAX || at + 2 + nl + 12 > len ||
        memchr(p + at + 2, 0, nl)) {
        zp_errors_set(err, errlen, ZEPS_EPROTO, "a dense table of the map without a usable name");
        return 0;
    }
    memcpy(t->name, p + at + 2, nl);
    at += 2 + nl;
    t->length = get_le(p + at, 8);
    uint64_t np = get_le(p + at + 8, 4);
    at += 12;
    if (prev && strcmp(prev, t->name) >= 0) {
        zp_errors_set(err, errlen, ZEPS_EPROTO, "dense table '%s' of the map is out of order",
                      t->name);
        return 0;
    }
    if (t->length == 0 || np == 0 || np > ZP_DENSEMAP_PIECES_MAX || np > t->length ||
        at + np * 10 > len) {
        zp_errors_set(err, errlen, ZEPS_EPROTO,
                      "dense table '%s' of the map: %" PRIu64 " pieces of %" PRIu64
                      " elements (1..%d pieces, each non-empty)",
                      t->name, np, t->length, ZP_DENSEMAP_PIECES_MAX);
        return 0;
    }
    size_pieces(t, (uint32_t)np);
    for (uint32_t j = 0; j < np; j++, at += 10) {
        t->lo[j] = get_le(p + at, 8);
        t->owner[j] = (uint16_t)get_le(p + at + 8, 2);
        bool order = j == 0 ? t->lo[0] == 0 : t->lo[j] > t->lo[j - 1] && t->lo[j] < t->length;
        if (!order || t->owner[j] >= nshards) {
            zp_errors_set(err, errlen, ZEPS_EPROTO,
                          "piece %u of dense table '%s' of the map: at %" PRIu64
                          " on shard %d (pieces from 0 upwards, below %" PRIu64
                          ", on shards below %d)",
                          j, t->name, t->lo[j], t->owner[j], t->length, nshards);
            return 0;
        }
    }
    return at;
}

int zp_densemap_decode(zp_densemap **out, const unsigned char *p, size_t len, int nshards,
                       char *err, size_t errlen)
{
    uint64_t nt = len >= 4 ? get_le(p, 4) : 0;
    if (nt == 0 || nt > len / 16)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a slot map's dense list of %zu bytes names %" PRIu64
                             " tables (at least 1, 16 bytes each)",
                             len, nt);
    zp_densemap *d = zp_alloc(sizeof(*d));
    d->ntables = (uint32_t)nt;
    d->t = zp_alloc_zeroed(nt, sizeof(*d->t));
    size_t at = 4;
    for (uint32_t i = 0; i < nt && at; i++)
        at = decode_table(&d->t[i], p, at, len, i ? d->t[i - 1].name : NULL, nshards, err, errlen);
    if (at && at != len) {
        zp_errors_set(err, errlen, ZEPS_EPROTO,
                      "a slot map's dense list with %zu bytes past its end", len - at);
        at = 0;
    }
    if (!at) {
        zp_densemap_destroy(&d);
        return ZEPS_EPROTO;
    }
    *out = d;
    return 0;
}
