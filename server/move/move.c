/*
 * move.c - this shard's part of a live move of a slot set: see move.h
 * and docs/elastic.md.
 *
 * The source copies on its own loop, page by page, instead of forking as
 * a snapshot does: a page is read when the tool asks for it, and every
 * id a request touches after the move began is in a dirty set, so a row
 * changed after its page was read is sent again in the next round. A
 * round is what the dirty sets held when it began (the first: every row
 * of M), so rounds shrink while the tool copies faster than requests
 * touch rows of M; the cut-over parks the requests of M, and the last
 * round then holds every row changed since.
 */
#include "move.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "now.h"
#include "rows.h"
#include "server.h"
#include "slotmap.h"
#include "snapshot_format.h"
#include "wire.h"
#include "zeps_errors.h"

int zp_move_refused(const zp_server *s, char *why, size_t len)
{
    if (s->move) {
        snprintf(why, len, "shard %d already takes part in a move (as its %s, with shard %d)",
                 s->shard, s->move->role == ZP_MOVE_SOURCE ? "source" : "target", s->move->peer);
        return ZEPS_ESTATE;
    }
    if (s->role.replicas > 1 && (s->cons->caps & ZP_CAP_CUTS)) {
        snprintf(why, len,
                 "moving slots under bsp with replicas is not supported (the pushes a move "
                 "hands over are not replicated; docs/elastic.md)");
        return ZEPS_ESTATE;
    }
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        if (t->rows && t->rows->tier) {
            snprintf(why, len,
                     "moving slots is not supported with a cold tier (sparse table '%s' has one)",
                     t->name);
            return ZEPS_ESTATE;
        }
    }
    return 0;
}

/* Why a move of n slots (dense: whether it moves dense pieces) may not
 * be: 0 or ZEPS_EINVAL with why. */
static int kind_refused(const zp_server *s, int64_t n, bool dense, char *why, size_t len)
{
    if (n > 0 && dense) {
        snprintf(why, len, "a move takes slots or dense pieces, not both");
        return ZEPS_EINVAL;
    }
    if (n == 0 && !dense)
        return ZEPS_EINVAL; /* why: moving_slots' "moves no slot" */
    if (dense && s->role.replicas > 1) {
        snprintf(why, len,
                 "moving dense pieces is not supported with replicas (docs/elastic.md, \"What "
                 "is built\")");
        return ZEPS_ESTATE;
    }
    bool sparse = false;
    for (uint32_t i = 0; i < s->ntables; i++)
        sparse = sparse || s->tables[i]->rows;
    if (n > 0 && !sparse) {
        snprintf(why, len,
                 "shard %d holds no sparse table: slots place sparse rows only (dense tables "
                 "move by pieces, docs/elastic.md)",
                 s->shard);
        return ZEPS_EINVAL;
    }
    return 0;
}

/* The slots `next` gives from `src` to `dst` into moving[] (which s's
 * map gives to src); their count, or -1 with why if `next` changes any
 * other owner. */
static int64_t moving_slots(const zp_slotmap *cur, const zp_slotmap *next, int src, int dst,
                            uint8_t *moving, char *why, size_t len)
{
    int64_t n = 0;
    for (uint32_t k = 0; k < zp_slotmap_slots(next); k++) {
        int was = zp_slotmap_slot_owner(cur, k), now = zp_slotmap_slot_owner(next, k);
        moving[k] = was == src && now == dst;
        n += moving[k];
        if (was != now && !moving[k]) {
            snprintf(why, len,
                     "the map of epoch %" PRIu64 " gives slot %u to shard %d, which shard %d "
                     "owns: a move takes slots from shard %d to shard %d only",
                     zp_slotmap_epoch(next), k, now, was, src, dst);
            return -1;
        }
    }
    if (n == 0)
        snprintf(why, len, "the map of epoch %" PRIu64 " moves no slot from shard %d to shard %d",
                 zp_slotmap_epoch(next), src, dst);
    return n;
}

/* Mark every row of M the source holds in sparse table t; their count. */
static uint64_t mark_all(zp_server *s, const zp_table *t)
{
    zp_idset *set = &s->move->dirty[t->id];
    uint64_t cursor = 0, n = 0;
    zp_sparse_row row;
    while (zp_sparse_next(t->rows->store, &cursor, &row))
        if (zp_move_has(s->move, row.id)) {
            zp_idset_add(set, row.id);
            n++;
        }
    return n;
}

int zp_move_start(zp_server *s, int role, zp_slotmap **next, int peer, double lease_s,
                  uint64_t *rows, char *why, size_t len)
{
    int src = role == ZP_MOVE_SOURCE ? s->shard : peer;
    int dst = role == ZP_MOVE_SOURCE ? peer : s->shard;
    uint8_t *moving = zp_alloc(zp_slotmap_slots(*next));
    int64_t n = moving_slots(s->slots, *next, src, dst, moving, why, len);
    bool dense = !zp_densemap_same(zp_slotmap_dense(s->slots), zp_slotmap_dense(*next));
    int rc = n < 0 ? ZEPS_EINVAL : kind_refused(s, n, dense, why, len);
    if (rc != 0) { /* EINVAL, or ESTATE for what is not built (replicas) */
        free(moving);
        return rc;
    }
    zp_move *m = zp_alloc_zeroed(1, sizeof(*m));
    m->role = role;
    if (dense && zp_dmove_plan(s, m, *next, src, dst, why, len) < 0) {
        zp_dmove_fini(m);
        free(m);
        free(moving);
        return ZEPS_EINVAL;
    }
    m->peer = peer;
    m->next = *next;
    *next = NULL;
    m->moving = moving;
    m->nmoving = (uint32_t)n;
    m->heard_s = zp_now_s();
    m->lease_s = lease_s;
    m->parked_tail = &m->parked;
    s->move = m;
    *rows = 0;
    for (size_t i = 0; i < m->npieces; i++) /* a dense move: its elements */
        *rows += m->pieces[i].hi - m->pieces[i].lo;
    if (role == ZP_MOVE_SOURCE) {
        m->ntables = s->ntables;
        m->dirty = zp_alloc_zeroed(m->ntables ? m->ntables : 1, sizeof(zp_idset));
        m->round = zp_alloc_zeroed(m->ntables ? m->ntables : 1, sizeof(zp_move_round));
        for (uint32_t i = 0; i < m->ntables; i++)
            if (s->tables[i]->rows)
                *rows += mark_all(s, s->tables[i]);
    } else {
        for (uint32_t i = 0; i < s->ntables; i++) {
            const zp_table *t = s->tables[i];
            zp_sparse_row row;
            uint64_t cursor = 0;
            while (t->rows && zp_sparse_next(t->rows->store, &cursor, &row))
                *rows += zp_move_has(m, row.id);
        }
    }
    return 0;
}

bool zp_move_has(const zp_move *m, uint64_t id)
{
    return m->moving[zp_slotmap_slot_of(m->next, id)] != 0;
}

/* The dirty set of table index i, growing the per-table arrays for a
 * table declared after the move began. */
static zp_idset *dirty_of(zp_move *m, uint32_t i)
{
    if (i >= m->ntables) {
        m->dirty = zp_alloc_grow(m->dirty, m->ntables, i + 1, sizeof(zp_idset));
        m->round = zp_alloc_grow(m->round, m->ntables, i + 1, sizeof(zp_move_round));
        m->ntables = i + 1;
    }
    return &m->dirty[i];
}

void zp_move_note(zp_server *s, const zp_table *t, const uint64_t *ids, size_t n)
{
    zp_move *m = s->move;
    if (!m || m->role != ZP_MOVE_SOURCE)
        return;
    zp_idset *set = dirty_of(m, t->id);
    for (size_t i = 0; i < n; i++)
        if (zp_move_has(m, ids[i]))
            zp_idset_add(set, ids[i]);
}

ptrdiff_t zp_move_frozen(const zp_server *s, const uint64_t *ids, size_t n)
{
    const zp_move *m = s->move;
    if (!m || !m->frozen)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (zp_move_has(m, ids[i]))
            return (ptrdiff_t)i;
    return -1;
}

void zp_move_park(zp_server *s, const zmq_msg_t *identity, const Zeps__Header *h, uint64_t id,
                  size_t pos, const char *what)
{
    zp_rlog_skip(s); /* parked, not applied: no backup applies it either */
    zp_move_parked *p = zp_move_parked_add(s->move, identity, h);
    if (!p)
        return;
    p->id = id;
    p->pos = pos;
    snprintf(p->what, sizeof(p->what), "%s", what);
}

uint64_t zp_move_left(const zp_server *s)
{
    const zp_move *m = s->move;
    uint64_t n = 0;
    for (uint32_t i = 0; m && i < m->ntables; i++)
        n += zp_idset_size(&m->dirty[i]) + (m->round[i].n - m->round[i].at);
    return n;
}

/* Begin the next round: every dirty set taken whole. Whether it holds
 * any id. */
static bool next_round(zp_move *m)
{
    bool any = false;
    for (uint32_t i = 0; i < m->ntables; i++) {
        zp_move_round *r = &m->round[i];
        free(r->ids);
        r->at = 0;
        zp_idset_take(&m->dirty[i], &r->ids, &r->n);
        any |= r->n > 0;
    }
    m->rounds += any;
    return any;
}

uint64_t zp_move_page(zp_server *s, uint64_t max, uint8_t *out, zp_table **t, uint64_t *left)
{
    zp_move *m = s->move;
    uint64_t n = 0;
    *t = NULL;
    for (int pass = 0; pass < 2 && n == 0; pass++) {
        for (uint32_t i = 0; i < m->ntables && n == 0; i++) {
            zp_move_round *r = &m->round[i];
            zp_table *tab = i < s->ntables ? s->tables[i] : NULL;
            if (!tab || !tab->rows || r->at >= r->n)
                continue;
            uint32_t dim = tab->rows->dim;
            uint32_t spp = (uint32_t)zp_sparse_state_per_value(tab->rows->store);
            uint64_t rec = ZP_SNAP_ROW_LEN(dim, spp);
            zp_sparse_row row;
            while (r->at < r->n && n < max) /* a row gone since is not sent */
                if (zp_sparse_get(tab->rows->store, r->ids[r->at++], &row))
                    zp_rows_record_pack(out + n++ * rec, &row, dim, spp);
            *t = tab;
            m->rows_sent += n;
            m->bytes_sent += n * rec;
        }
        if (n == 0 && (pass > 0 || !next_round(m)))
            break;
    }
    *left = zp_move_left(s);
    return n;
}

static bool in_move(uint64_t id, void *arg)
{
    return zp_move_has(arg, id);
}

/* Drop the rows of every sparse table whose id `pred` holds for. */
static uint64_t drop_where(zp_server *s, bool (*pred)(uint64_t id, void *arg), void *arg)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < s->ntables; i++)
        if (s->tables[i]->rows)
            n += zp_sparse_drop_where(s->tables[i]->rows->store, pred, arg);
    return n;
}

uint64_t zp_move_drop_rows(zp_server *s)
{
    return drop_where(s, in_move, s->move);
}

/* Whether a->map gives id to another shard than a->shard. */
typedef struct foreign_arg {
    const zp_slotmap *map;
    int shard;
} foreign_arg;

static bool is_foreign(uint64_t id, void *arg)
{
    const foreign_arg *a = arg;
    return zp_slotmap_owner(a->map, id) != a->shard;
}

uint64_t zp_move_drop_foreign(zp_server *s, const zp_slotmap *next)
{
    foreign_arg a = {next, s->shard};
    return drop_where(s, is_foreign, &a);
}

bool zp_move_past_bound(const zp_server *s, double now_s)
{
    const zp_move *m = s->move;
    /* Past its last page (drained) the tool may have committed at the
     * target (SLOTS comes before the COMMIT here): an end by time then
     * asks first, ZooKeeper's node with coordination (zkmap.c), else the
     * target (op/move_ask.c); ended without asking, this shard would
     * serve M at the old map beside the target at the new one. */
    return m && m->frozen && now_s - m->frozen_s > m->bound_s;
}

bool zp_move_expired(const zp_server *s, double now_s)
{
    const zp_move *m = s->move;
    return m && (zp_move_past_bound(s, now_s) || now_s - m->heard_s > m->lease_s);
}

void zp_move_end(zp_server *s)
{
    zp_move *m = s->move;
    if (!m)
        return;
    while (m->parked) /* the caller answered them; none is left but by a bug */
        zp_move_parked_free(zp_move_parked_take(s));
    for (uint32_t i = 0; i < m->ntables; i++) {
        zp_idset_fini(&m->dirty[i]);
        free(m->round[i].ids);
    }
    for (uint32_t i = 0; i < m->nhanded; i++) /* held pushes handed over (or not, at an end) */
        zp_rround_fini(&m->handed[i]);
    free(m->handed);
    free(m->hand_sent);
    free(m->dirty);
    free(m->round);
    free(m->moving);
    zp_dmove_fini(m);
    if (m->ask_sock) /* the source's question to the target (op/move_ask.c) */
        zmq_close(m->ask_sock);
    zp_slotmap_destroy(&m->next);
    free(m);
    s->move = NULL;
}

bool zp_move_taken_ends(const zp_server *s)
{
    const zp_move *m = s->move;
    return m && m->role == ZP_MOVE_TARGET &&
           zp_slotmap_epoch(s->slots) >= zp_slotmap_epoch(m->next);
}

void zp_move_map_taken(zp_server *s)
{
    zp_move *m = s->move;
    if (!zp_move_taken_ends(s))
        return;
    zp_dmove_adopt(s); /* a dense move's pieces: served from now on */
    zp_info("move of %u slots from shard %d committed here at map epoch %" PRIu64 ": %" PRIu64
            " rows (%" PRIu64 " bytes) taken",
            m->nmoving, m->peer, zp_slotmap_epoch(s->slots), m->rows_sent, m->bytes_sent);
    zp_move_end(s);
}

bool zp_move_commits(const zp_server *s, const zp_slotmap *next)
{
    const zp_move *m = s->move;
    if (!m || m->role != ZP_MOVE_TARGET || zp_slotmap_epoch(next) != zp_slotmap_epoch(m->next) ||
        zp_slotmap_slots(next) != zp_slotmap_slots(m->next) ||
        !zp_densemap_same(zp_slotmap_dense(next), zp_slotmap_dense(m->next)))
        return false;
    for (uint32_t k = 0; k < zp_slotmap_slots(next); k++)
        if (zp_slotmap_slot_owner(next, k) != zp_slotmap_slot_owner(m->next, k))
            return false;
    return true;
}

int zp_move_fenced(const zp_server *s, const zp_slotmap *next, char *why, size_t len)
{
    if (!s->fenced || !zp_slotmap_same(next, s->fenced))
        return 0;
    snprintf(why, len,
             "shard %d ended its part of the move committing the map of epoch %" PRIu64
             " when its source, shard %d, asked what became of it, and the source aborted it: "
             "this commit comes too late",
             s->shard, zp_slotmap_epoch(next), s->fenced_source);
    return ZEPS_ESTATE;
}
