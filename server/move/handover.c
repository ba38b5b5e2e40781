/*
 * handover.c - the bsp pushes of a move's slots, handed from the source
 * to the target as round records: see handover.h. The records keep the
 * order the source held the pushes in, which is all a round's merge
 * (table/rround.c: rank order, then arrival) needs to come out the same.
 */
#include "handover.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "finite.h"
#include "move.h"
#include "rows.h"
#include "server.h"
#include "zeps_errors.h"

#define VERS 1u /* a record's flags: row versions follow */

static int in_m(uint64_t id, void *arg)
{
    return zp_move_has(arg, id);
}

static int any(uint64_t id, void *arg)
{
    (void)id, (void)arg;
    return 1;
}

/* Bytes of a record of n rows of dim floats. */
static size_t rec_len(uint64_t n, uint32_t dim, int vers)
{
    size_t b = ZP_HANDOVER_HEAD + n * (8 + 4 * (size_t)dim + (vers ? 4 : 0));
    return (b + 7) & ~(size_t)7;
}

/* The handed-over pushes of table index i, the arrays grown for a table
 * declared after the cut-over began. */
static zp_rround *handed_of(zp_move *m, uint32_t i)
{
    if (i >= m->nhanded) {
        m->handed = zp_alloc_grow(m->handed, m->nhanded, i + 1, sizeof(zp_rround));
        m->hand_sent = zp_alloc_grow(m->hand_sent, m->nhanded, i + 1, sizeof(size_t));
        m->nhanded = i + 1;
    }
    return &m->handed[i];
}

uint64_t zp_handover_take_table(zp_server *s, zp_table *t)
{
    zp_move *m = s->move;
    return zp_rround_split(&t->rows->held, handed_of(m, t->id), in_m, m, t->rows->dim);
}

uint64_t zp_handover_take(zp_server *s)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->ntables; i++)
        if (s->tables[i]->rows)
            n += zp_handover_take_table(s, s->tables[i]);
    return n;
}

uint64_t zp_handover_left(const zp_server *s)
{
    const zp_move *m = s->move;
    uint64_t n = 0;
    for (uint32_t i = 0; m && i < m->nhanded; i++)
        n += m->handed[i].nheld - m->hand_sent[i];
    return n;
}

/* Write push p as a record at out; its length. */
static size_t pack(uint8_t *out, const zp_rround_push *p, uint32_t dim)
{
    size_t len = rec_len(p->n, dim, p->vers != NULL);
    uint32_t head[2] = {p->rank, p->vers ? VERS : 0};
    uint64_t n = p->n;
    memset(out, 0, len);
    memcpy(out, head, 8);
    memcpy(out + 8, &p->clock, 8);
    memcpy(out + 16, &n, 8);
    uint8_t *at = out + ZP_HANDOVER_HEAD;
    memcpy(at, p->ids, p->n * 8);
    memcpy(at + p->n * 8, p->g, p->n * dim * 4);
    if (p->vers)
        memcpy(at + p->n * (8 + 4 * (size_t)dim), p->vers, p->n * 4);
    return len;
}

uint64_t zp_handover_page(zp_server *s, uint64_t room, uint8_t **buf, size_t *len, zp_table **t)
{
    zp_move *m = s->move;
    *buf = NULL;
    *len = 0;
    *t = NULL;
    uint32_t i = 0;
    while (i < m->nhanded && m->hand_sent[i] >= m->handed[i].nheld)
        i++;
    if (i >= m->nhanded)
        return 0;
    zp_rround *rr = &m->handed[i];
    *t = s->tables[i];
    uint32_t dim = (*t)->rows->dim;
    size_t from = m->hand_sent[i], end = from, bytes = 0;
    while (end < rr->nheld) {
        size_t b = rec_len(rr->held[end].n, dim, rr->held[end].vers != NULL);
        if (end > from && bytes + b > room)
            break;
        bytes += b;
        end++;
    }
    *buf = zp_alloc(bytes);
    for (size_t k = from; k < end; k++)
        *len += pack(*buf + *len, &rr->held[k], dim);
    m->hand_sent[i] = end;
    return end - from;
}

void zp_handover_give_back(zp_server *s)
{
    zp_move *m = s->move;
    for (uint32_t i = 0; m && i < m->nhanded && i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (t->rows)
            zp_rround_split(&m->handed[i], &t->rows->held, any, NULL, t->rows->dim);
    }
}

/* Check one record at rec[0..left): its length into *len, or an error. */
static int check_rec(const zp_server *s, const zp_table *t, const uint8_t *rec, size_t left,
                     size_t *len, char *why, size_t whylen)
{
    uint32_t head[2];
    int64_t clock;
    uint64_t n;
    uint32_t dim = t->rows->dim;
    if (left < ZP_HANDOVER_HEAD)
        return snprintf(why, whylen, "a record cut short"), ZEPS_ESIZE;
    memcpy(head, rec, 8);
    memcpy(&clock, rec + 8, 8);
    memcpy(&n, rec + 16, 8);
    if (head[0] >= (uint32_t)s->nworkers || head[1] > VERS || clock < 0 || n == 0 ||
        n > (left - ZP_HANDOVER_HEAD) / 12 || rec_len(n, dim, head[1] & VERS) > left) {
        snprintf(why, whylen,
                 "a record of rank %u (of %d workers), clock %" PRId64 ", %" PRIu64
                 " rows, flags %u does not fit the %zu bytes left",
                 head[0], s->nworkers, clock, n, head[1], left);
        return ZEPS_ESIZE;
    }
    *len = rec_len(n, dim, head[1] & VERS);
    const uint8_t *ids = rec + ZP_HANDOVER_HEAD;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t id;
        memcpy(&id, ids + j * 8, 8);
        if (!zp_move_has(s->move, id))
            return snprintf(why, whylen, "id %" PRIu64 " is not in the moving slots", id),
                   ZEPS_EINVAL;
    }
    float *g = zp_alloc(n * dim * sizeof(float) + 1);
    memcpy(g, ids + n * 8, n * dim * sizeof(float));
    bool ok = zp_finite_all(g, n * dim);
    free(g);
    if (!ok)
        return snprintf(why, whylen, "a gradient of rank %u is NaN or Inf", head[0]),
               ZEPS_ENONFINITE;
    return 0;
}

/* Hold the checked record rec of table t in rr. */
static int hold_rec(zp_rround *rr, const zp_table *t, const uint8_t *rec)
{
    uint32_t head[2], dim = t->rows->dim;
    int64_t clock;
    uint64_t n;
    memcpy(head, rec, 8);
    memcpy(&clock, rec + 8, 8);
    memcpy(&n, rec + 16, 8);
    uint8_t *body = zp_alloc(rec_len(n, dim, head[1] & VERS)); /* aligned copies */
    memcpy(body, rec + ZP_HANDOVER_HEAD, rec_len(n, dim, head[1] & VERS) - ZP_HANDOVER_HEAD);
    const uint64_t *ids = (const uint64_t *)body;
    const float *g = (const float *)(body + n * 8);
    const uint32_t *vers = head[1] & VERS ? (const uint32_t *)(g + n * dim) : NULL;
    int rc = zp_rround_hold(rr, head[0], clock, ids, n, g, dim, vers);
    free(body);
    return rc;
}

int zp_handover_put(zp_server *s, zp_table *t, const uint8_t *page, size_t len, uint64_t count,
                    char *why, size_t whylen)
{
    size_t at = 0;
    for (uint64_t i = 0; i < count; i++) {
        size_t l = 0;
        int rc = check_rec(s, t, page + at, len - at, &l, why, whylen);
        if (rc != 0)
            return rc;
        at += l;
    }
    if (at != len) {
        snprintf(why, whylen, "%" PRIu64 " records take %zu of the page's %zu bytes", count, at,
                 len);
        return ZEPS_ESIZE;
    }
    for (at = 0; count-- > 0;) {
        size_t l = 0;
        check_rec(s, t, page + at, len - at, &l, why, whylen);
        if (hold_rec(handed_of(s->move, t->id), t, page + at) != 0) {
            snprintf(why, whylen, "no memory to hold a round record of sparse table '%s'", t->name);
            return ZEPS_ENOMEM; /* the move aborts, which drops those held */
        }
        at += l;
    }
    return 0;
}

uint64_t zp_handover_adopt(zp_server *s)
{
    zp_move *m = s->move;
    uint64_t n = 0;
    for (uint32_t i = 0; m && i < m->nhanded && i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (t->rows) /* after what t holds: no push of M came before the commit */
            n += zp_rround_split(&m->handed[i], &t->rows->held, any, NULL, t->rows->dim);
    }
    return n;
}

void zp_handover_apply(zp_server *s)
{
    for (uint32_t i = 0; s->cons->rows_handed && i < s->ntables; i++)
        if (s->tables[i]->rows)
            s->cons->rows_handed(s, s->tables[i]);
}

void zp_handover_map_taken(zp_server *s)
{
    if (zp_move_taken_ends(s))
        zp_handover_adopt(s); /* before the move ends with them */
    zp_move_map_taken(s);
    zp_handover_apply(s);
}

uint64_t zp_handover_drop(zp_server *s)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (!t->rows)
            continue;
        zp_rround gone;
        memset(&gone, 0, sizeof(gone));
        n += zp_rround_split(&t->rows->held, &gone, in_m, s->move, t->rows->dim);
        zp_rround_fini(&gone);
    }
    return n;
}

void zp_handover_note(zp_server *s, zp_table *t, int64_t below)
{
    const zp_rround *rr = &t->rows->held;
    for (size_t i = 0; i < rr->nheld; i++)
        if (rr->held[i].clock < below)
            zp_move_note(s, t, rr->held[i].ids, rr->held[i].n);
}
