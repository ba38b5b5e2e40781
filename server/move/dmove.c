/*
 * dmove.c - a live move of whole dense pieces from shard A to shard B
 * (docs/elastic.md, "Dense tables by range"): the pieces a move takes,
 * the target's pieces being imported, the source's pages of them and the
 * commit's hand-over on both sides.
 *
 * A dense piece changes at every push, so it is copied during the
 * cut-over (FREEZE parks the writes of the moving pieces), not in rounds
 * before it: what the tool reads after FREEZE is final. Pulls are not
 * parked: they change nothing, and the source is authoritative until the
 * commit. The target keeps the pieces it imports outside its tables
 * (nothing serves them) until the map that gives them to it arrives.
 *
 * Threading: the shard's loop only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "densemap.h"
#include "move.h"
#include "server.h"
#include "slotmap.h"
#include "piece.h"
#include "table.h"
#include "zeps_errors.h"

/* This shard's record of table `name` that is exactly [lo, hi), or (with
 * any_range) its first record of the table; NULL if none. */
static zp_table *record(const zp_server *s, const char *name, uint64_t lo, uint64_t hi,
                        bool any_range)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (!t->rows && strcmp(t->name, name) == 0 &&
            (any_range || (t->begin == lo && t->end == hi)))
            return t;
    }
    return NULL;
}

/* Add piece [lo, hi) of table `name` to m's; at the target, make the
 * piece it imports. 0, or -1 with why. */
static int add_piece(zp_server *s, zp_move *m, const char *name, uint64_t lo, uint64_t hi,
                     char *why, size_t len)
{
    const zp_table *t = record(s, name, lo, hi, m->role == ZP_MOVE_TARGET);
    if (!t && m->role == ZP_MOVE_SOURCE) {
        snprintf(why, len, "shard %d holds no piece [%" PRIu64 ", %" PRIu64 ") of dense table '%s'",
                 s->shard, lo, hi, name);
        return -1;
    }
    if (!t) {
        snprintf(why, len,
                 "shard %d has not declared dense table '%s': declare it there first (piece "
                 "[%" PRIu64 ", %" PRIu64 "))",
                 s->shard, name, lo, hi);
        return -1;
    }
    m->pieces = zp_alloc_resize(m->pieces, (m->npieces + 1) * sizeof(*m->pieces));
    zp_move_piece *p = &m->pieces[m->npieces];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->lo = lo;
    p->hi = hi;
    if (m->role == ZP_MOVE_TARGET && zp_piece_like(&p->in, t, UINT32_MAX, lo, hi, why, len) != 0)
        return -1;
    m->npieces++;
    return 0;
}

/* The pieces of table `name` next gives from src to dst into m; -1 with
 * why if next changes anything else of the table. */
static int plan_table(zp_server *s, zp_move *m, const zp_slotmap *next, const char *name,
                      uint64_t length, int src, int dst, char *why, size_t len)
{
    size_t na = zp_slotmap_dense_pieces(s->slots, name, length, NULL, 0);
    size_t nb = zp_slotmap_dense_pieces(next, name, length, NULL, 0);
    zp_dense_piece *a = zp_alloc((na + nb + 1) * sizeof(*a)), *b = a + na;
    zp_slotmap_dense_pieces(s->slots, name, length, a, na);
    zp_slotmap_dense_pieces(next, name, length, b, nb);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < (na > nb ? na : nb); i++) {
        if (na != nb || a[i].lo != b[i].lo || a[i].hi != b[i].hi) {
            snprintf(why, len,
                     "the map of epoch %" PRIu64 " cuts dense table '%s' otherwise: a move takes "
                     "whole pieces (cut them first with SLOTS)",
                     zp_slotmap_epoch(next), name);
            rc = -1;
        } else if (a[i].owner != b[i].owner && (a[i].owner != src || b[i].owner != dst)) {
            snprintf(why, len,
                     "the map of epoch %" PRIu64 " gives piece [%" PRIu64 ", %" PRIu64
                     ") of dense table '%s' from shard %d to shard %d: a move takes pieces "
                     "from shard %d to shard %d only",
                     zp_slotmap_epoch(next), a[i].lo, a[i].hi, name, a[i].owner, b[i].owner, src,
                     dst);
            rc = -1;
        } else if (a[i].owner != b[i].owner) {
            rc = add_piece(s, m, name, a[i].lo, a[i].hi, why, len);
        }
    }
    free(a);
    return rc;
}

int64_t zp_dmove_plan(zp_server *s, zp_move *m, const zp_slotmap *next, int src, int dst, char *why,
                      size_t len)
{
    const zp_densemap *cd = zp_slotmap_dense(s->slots), *nd = zp_slotmap_dense(next);
    if (zp_densemap_same(cd, nd))
        return 0;
    for (size_t i = 0; i < zp_densemap_count(cd); i++)
        if (!zp_densemap_names(nd, zp_densemap_name(cd, i))) {
            snprintf(why, len, "the map of epoch %" PRIu64 " forgets dense table '%s'",
                     zp_slotmap_epoch(next), zp_densemap_name(cd, i));
            return -1;
        }
    for (size_t i = 0; i < zp_densemap_count(nd); i++)
        if (plan_table(s, m, next, zp_densemap_name(nd, i), zp_densemap_length(nd, i), src, dst,
                       why, len) != 0)
            return -1;
    if (m->npieces == 0)
        snprintf(why, len, "the map of epoch %" PRIu64 " moves no piece from shard %d to shard %d",
                 zp_slotmap_epoch(next), src, dst);
    return m->npieces ? (int64_t)m->npieces : -1;
}

/* Whether record t is one of the pieces m takes. */
static bool moving(const zp_move *m, const zp_table *t)
{
    for (size_t i = 0; i < m->npieces; i++)
        if (t->begin == m->pieces[i].lo && t->end == m->pieces[i].hi &&
            strcmp(t->name, m->pieces[i].name) == 0)
            return true;
    return false;
}

bool zp_dmove_parks(const zp_server *s, const zp_table *t, int op)
{
    const zp_move *m = s->move;
    return m && m->role == ZP_MOVE_SOURCE && m->frozen && m->npieces &&
           (op == ZEPS__OP__PUSH || op == ZEPS__OP__PUT) && moving(m, t);
}

void zp_dmove_park(zp_server *s, const zmq_msg_t *identity, const Zeps__Header *h,
                   const char *table)
{
    zp_move_parked *p = zp_move_parked_add(s->move, identity, h);
    if (!p)
        return;
    p->h.count = h->count; /* its EMOVED text names it (op/owner.c) */
    p->id = h->offset;
    p->count = h->count;
    snprintf(p->dense, sizeof(p->dense), "%s", table);
}

uint64_t zp_dmove_page(zp_server *s, uint64_t max, float *out, zp_table **t, uint64_t *at,
                       uint64_t *left)
{
    zp_move *m = s->move;
    uint64_t n = 0;
    *t = NULL;
    while (m->frozen && m->piece_at < m->npieces && n == 0) {
        const zp_move_piece *p = &m->pieces[m->piece_at];
        uint64_t from = m->elem_at > p->lo ? m->elem_at : p->lo;
        if (from >= p->hi) {
            m->piece_at++;
            continue;
        }
        zp_table *r = record(s, p->name, p->lo, p->hi, false);
        n = p->hi - from < max ? p->hi - from : max;
        zp_table_read(r, (size_t)(from - r->begin), (size_t)n, out);
        *t = r;
        *at = from;
        m->elem_at = from + n;
    }
    *left = 0;
    for (size_t i = m->piece_at; i < m->npieces; i++) {
        const zp_move_piece *p = &m->pieces[i];
        uint64_t from = m->elem_at > p->lo ? m->elem_at : p->lo;
        *left += from < p->hi ? p->hi - from : 0;
    }
    return n;
}

zp_table *zp_dmove_piece_in(zp_server *s, const char *name, uint64_t at, uint64_t n)
{
    zp_move *m = s->move;
    for (size_t i = 0; m && i < m->npieces; i++) {
        zp_move_piece *p = &m->pieces[i];
        if (p->in && at >= p->lo && n <= p->hi - at && strcmp(p->name, name) == 0)
            return p->in;
    }
    return NULL;
}

uint64_t zp_dmove_drop(zp_server *s)
{
    zp_move *m = s->move;
    uint64_t n = 0;
    for (size_t i = 0; i < m->npieces; i++) {
        zp_table *r = record(s, m->pieces[i].name, m->pieces[i].lo, m->pieces[i].hi, false);
        zp_table *e = NULL;
        char err[256];
        if (!r || zp_piece_like(&e, r, r->id, 0, 0, err, sizeof(err)) != 0)
            continue; /* not made (out of memory): the record stays, unserved by the map */
        n += r->n;
        s->tables[r->id] = e; /* s owns it */
        zp_table_destroy(&r);
    }
    return n;
}

void zp_dmove_adopt(zp_server *s)
{
    zp_move *m = s->move;
    for (size_t i = 0; i < m->npieces; i++) {
        zp_table *t = m->pieces[i].in;
        if (!t)
            continue;
        t->id = s->ntables;
        zp_table_append(&s->tables, &s->ntables, &s->cap_tables, t); /* s takes it */
        m->pieces[i].in = NULL;
    }
}

void zp_dmove_fini(zp_move *m)
{
    for (size_t i = 0; i < m->npieces; i++)
        zp_table_destroy(&m->pieces[i].in);
    free(m->pieces);
    m->pieces = NULL;
    m->npieces = 0;
}

bool zp_dmove_moving(const zp_server *s, const zp_table *t)
{
    return s->move && moving(s->move, t);
}

const zp_table *zp_dmove_any(const zp_server *s, const char *name)
{
    return record(s, name, 0, 0, true);
}
