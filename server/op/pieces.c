/*
 * pieces.c - the pieces of dense tables a shard holds when its slot map
 * places them by range (docs/elastic.md, "Dense tables by range").
 *
 * Each piece is a table record of its own (a dense slice of table.c, with
 * its own values, state and version) in the shard's table array, under
 * the table's name; the first record made is the one DECLARE answers
 * with, and a request is served by the piece that holds its range
 * (request.c). A new map may change which pieces this shard holds of a
 * table as long as it takes no written element away (as SLOTS gives away
 * no slot holding a row): the shard then makes the records again from
 * the declaration, keeping their ids (clients hold them), and copies into
 * them what the records before held of their elements (a piece cut in
 * two keeps its values, state and version). Moving written elements is
 * the job of a move.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "log.h"
#include "ops.h"
#include "piece.h"
#include "server.h"
#include "zeps_errors.h"

size_t zp_pieces_mine(const zp_server *s, const zp_slotmap *m, const char *name, uint64_t length,
                      zp_dense_piece **out)
{
    size_t n = zp_slotmap_dense_pieces(m, name, length, NULL, 0);
    zp_dense_piece *p = zp_alloc((n ? n : 1) * sizeof(*p));
    zp_slotmap_dense_pieces(m, name, length, p, n);
    size_t mine = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i].owner == s->shard)
            p[mine++] = p[i];
    if (mine == 0) /* none: one empty record answers for the table */
        p[mine++] = (zp_dense_piece){.lo = 0, .hi = 0, .owner = s->shard};
    *out = p;
    return mine;
}

/* Whether maps a and b give this shard the same pieces of dense table t. */
static bool same_pieces(const zp_server *s, const zp_slotmap *a, const zp_slotmap *b,
                        const zp_table *t)
{
    if (!zp_densemap_names(zp_slotmap_dense(a), t->name) &&
        !zp_densemap_names(zp_slotmap_dense(b), t->name))
        return true; /* the default slices under both */
    zp_dense_piece *pa, *pb;
    size_t na = zp_pieces_mine(s, a, t->name, t->length, &pa);
    size_t nb = zp_pieces_mine(s, b, t->name, t->length, &pb);
    bool same = na == nb;
    for (size_t i = 0; same && i < na; i++)
        same = pa[i].lo == pb[i].lo && pa[i].hi == pb[i].hi;
    free(pa);
    free(pb);
    return same;
}

/* Whether record t was written: pushes, PUTs or a restore. */
static bool written(const zp_table *t)
{
    return t->version != 0 || t->stats.pushes || t->stats.puts;
}

/* The first element of record t that map m does not give this shard, or
 * t->end if m gives it all of t. */
static uint64_t first_lost(const zp_server *s, const zp_slotmap *m, const zp_table *t)
{
    for (uint64_t at = t->begin; at < t->end;) {
        zp_dense_piece p;
        zp_slotmap_dense_find(m, t->name, t->length, at, &p);
        if (p.owner != s->shard)
            return at;
        at = p.hi;
    }
    return t->end;
}

/* The first element of a piece `next` gives this shard that overlaps
 * record t without lying inside it, or UINT64_MAX: a piece t's held
 * round pushes (bsp) would not cover, since each covers t alone. */
static uint64_t grown(const zp_server *s, const zp_slotmap *next, const zp_table *t)
{
    zp_dense_piece *p;
    size_t n = zp_pieces_mine(s, next, t->name, t->length, &p);
    uint64_t at = UINT64_MAX;
    for (size_t i = 0; i < n && at == UINT64_MAX; i++)
        if (p[i].lo < t->end && p[i].hi > t->begin && (p[i].lo < t->begin || p[i].hi > t->end))
            at = p[i].lo;
    free(p);
    return at;
}

/* Why this shard may not take `next` for dense record t (whose table's
 * pieces here change): 0 or ZEPS_ESTATE with the reason in why. */
static int record_refused(const zp_server *s, const zp_slotmap *next, const zp_table *t, char *why,
                          size_t len)
{
    uint64_t big = t->round.npending > 0 ? grown(s, next, t) : UINT64_MAX;
    if (big != UINT64_MAX) {
        snprintf(why, len,
                 "the map of epoch %" PRIu64 " gives shard %d a piece of dense table '%s' from "
                 "element %" PRIu64 " that spans more than its piece [%" PRIu64 ", %" PRIu64
                 "), whose open round holds pushes of that piece alone: only cuts while a "
                 "round is open (docs/elastic.md, \"Moves under bsp\")",
                 zp_slotmap_epoch(next), s->shard, t->name, big, t->begin, t->end);
        return ZEPS_ESTATE;
    }
    uint64_t lost = written(t) ? first_lost(s, next, t) : t->end;
    if (lost < t->end) {
        snprintf(why, len,
                 "the map of epoch %" PRIu64 " gives element %" PRIu64 " of dense table '%s' "
                 "to another shard, and shard %d wrote it: SLOTS moves no written element, "
                 "a move does (docs/elastic.md, \"Dense tables by range\")",
                 zp_slotmap_epoch(next), lost, t->name, s->shard);
        return ZEPS_ESTATE;
    }
    if (t->init_digest != 0 || !t->init_known) {
        snprintf(why, len,
                 "the map of epoch %" PRIu64 " changes the pieces of dense table '%s' on shard "
                 "%d, which was declared with init segments or restored (not supported)",
                 zp_slotmap_epoch(next), t->name, s->shard);
        return ZEPS_ESTATE;
    }
    return 0;
}

int zp_pieces_refused(const zp_server *s, const zp_slotmap *next, char *why, size_t len)
{
    if (zp_densemap_same(zp_slotmap_dense(s->slots), zp_slotmap_dense(next)))
        return 0;
    if (s->role.replicas > 1) {
        snprintf(why, len,
                 "the map of epoch %" PRIu64 " places dense tables by range, and shard %d "
                 "runs with replicas: not built (docs/elastic.md, \"Dense tables by range\")",
                 zp_slotmap_epoch(next), s->shard);
        return ZEPS_ESTATE;
    }
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        if (t->rows || same_pieces(s, s->slots, next, t))
            continue;
        int rc = record_refused(s, next, t, why, len);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The ids of this shard's records of dense table `name`, ascending, into
 * a new array *out (the caller frees it); how many. */
static size_t records_of(const zp_server *s, const char *name, uint32_t **out)
{
    uint32_t *ids = zp_alloc((s->ntables ? s->ntables : 1) * sizeof(*ids));
    size_t n = 0;
    for (uint32_t i = 0; i < s->ntables; i++)
        if (!s->tables[i]->rows && strcmp(s->tables[i]->name, name) == 0)
            ids[n++] = i;
    *out = ids;
    return n;
}

/* New records for pieces p[0..np) (then empty ones up to `total`) of the
 * table head declares, with ids ids[i] for i < nold and the next ones
 * past the array after; into made. 0 or an error (nothing kept). */
static int make_pieces(zp_server *s, const zp_table *head, const zp_dense_piece *p, size_t np,
                       const uint32_t *ids, size_t nold, zp_table **made, size_t total, char *err,
                       size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < total; i++) {
        uint32_t id = i < nold ? ids[i] : s->ntables + (uint32_t)(i - nold);
        uint64_t lo = i < np ? p[i].lo : 0, hi = i < np ? p[i].hi : 0;
        rc = zp_piece_like(&made[i], head, id, lo, hi, err, errlen);
    }
    for (size_t i = 0; rc != 0 && i < total; i++)
        zp_table_destroy(&made[i]);
    return rc;
}

/* Record `to` takes the values, optimizer state and version of the
 * elements it shares with record `from` (a piece cut or grown keeps
 * what was written to it), and its open round (bsp): a piece cut from
 * `from` holds its part of each push held there, so the round's close
 * sums the same values for its elements (a piece grown past `from` is
 * refused while pushes are held: record_refused). 0 or ZEPS_ENOMEM. */
static int copy_overlap(zp_table *to, const zp_table *from)
{
    uint64_t lo = to->begin > from->begin ? to->begin : from->begin;
    uint64_t hi = to->end < from->end ? to->end : from->end;
    if (lo >= hi)
        return 0;
    if (to->begin >= from->begin && to->end <= from->end &&
        zp_round_take_part(&to->round, &from->round, (size_t)(to->begin - from->begin)) != 0)
        return ZEPS_ENOMEM;
    if (from->round.closed > to->round.closed)
        to->round.closed = from->round.closed;
    size_t n = (size_t)(hi - lo), k = (size_t)from->opt->state_per_param;
    float *buf = zp_alloc(n * (1 + k) * sizeof(float));
    zp_table_read(from, (size_t)(lo - from->begin), n, buf);
    zp_table_write(to, (size_t)(lo - to->begin), n, buf);
    free(buf);
    if (from->version > to->version)
        to->version = from->version;
    return 0;
}

/* The pulls parked on record `from` (by ssp's bound), once the shard took
 * a map that cuts it: each goes on waiting on the new record among
 * made[0..n) that holds its range, or, if none does (its range now spans
 * two pieces), is given to `refuse` (EMOVED with the map, as a request
 * cut by an older map is). */
static void rehome_parked(zp_server *s, zp_table *from, zp_table **made, size_t n,
                          zp_pieces_refuse_fn refuse)
{
    zp_parked *p;
    while ((p = zp_parked_pop(&from->parked))) {
        zp_table *to = NULL;
        for (size_t i = 0; i < n && !to; i++)
            if (p->offset >= made[i]->begin && p->count <= made[i]->end - p->offset)
                to = made[i];
        if (to) {
            zp_parked_push(&to->parked, p);
            continue;
        }
        refuse(s, from, p); /* answers and frees p */
    }
}

/* Make this shard's records of dense table `name` again for the pieces
 * its map gives it now, keeping their ids. 0 or an error (nothing
 * changed). */
static int rebuild(zp_server *s, const char *name, zp_pieces_refuse_fn refuse, char *err,
                   size_t errlen)
{
    uint32_t *ids;
    size_t nold = records_of(s, name, &ids);
    const zp_table *head = s->tables[ids[0]];
    zp_dense_piece *p;
    size_t np = zp_pieces_mine(s, s->slots, name, head->length, &p);
    size_t total = np > nold ? np : nold;
    zp_table **made = zp_alloc_zeroed(total, sizeof(*made));
    int rc = make_pieces(s, head, p, np, ids, nold, made, total, err, errlen);
    int copied = 0;
    for (size_t i = 0; rc == 0 && copied == 0 && i < np; i++)
        for (size_t j = 0; copied == 0 && j < nold; j++)
            copied = copy_overlap(made[i], s->tables[ids[j]]);
    for (size_t i = 0; copied != 0 && i < total; i++)
        zp_table_destroy(&made[i]); /* nothing changed */
    if (copied != 0) {
        rc = copied;
        snprintf(err, errlen, "no memory for the pushes its open round holds");
    }
    for (size_t j = 0; rc == 0 && j < nold; j++)
        rehome_parked(s, s->tables[ids[j]], made, np, refuse);
    for (size_t i = 0; rc == 0 && i < total; i++) {
        if (i < nold) {
            zp_table_destroy(&s->tables[ids[i]]);
            s->tables[ids[i]] = made[i]; /* s takes it */
        } else {
            zp_table_append(&s->tables, &s->ntables, &s->cap_tables, made[i]);
        }
    }
    free(made);
    free(p);
    free(ids);
    return rc;
}

void zp_pieces_rebuild(zp_server *s, const zp_slotmap *old, zp_pieces_refuse_fn refuse)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        uint32_t *ids;
        size_t n = t->rows ? 0 : records_of(s, t->name, &ids);
        bool first = n > 0 && ids[0] == i;
        if (n > 0)
            free(ids);
        if (!first || same_pieces(s, old, s->slots, t))
            continue;
        char err[256], name[sizeof(t->name)];
        snprintf(name, sizeof(name), "%s", t->name); /* t is replaced */
        if (rebuild(s, name, refuse, err, sizeof(err)) != 0)
            zp_error("dense table '%s': its pieces of slot map epoch %" PRIu64
                     " were not made (%s): it keeps the pieces it held",
                     name, zp_slotmap_epoch(s->slots), err);
        else
            zp_info("dense table '%s': shard %d holds %" PRIu64 " elements at slot map epoch "
                    "%" PRIu64,
                    name, s->shard,
                    zp_densemap_held(zp_slotmap_dense(s->slots), name, s->tables[i]->length,
                                     zp_slotmap_base(s->slots), s->shard),
                    zp_slotmap_epoch(s->slots));
    }
}
