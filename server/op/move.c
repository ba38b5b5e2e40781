/*
 * move.c - MOVE: the steps a tool sends to move a slot set live from
 * source shard A to target shard B (docs/protocol.md "Moving slots",
 * docs/elastic.md), and the end of a move by its lease.
 *
 * The tool drives; each step is one request and one answer:
 * BEGIN (A) and IMPORT (B) start each side with the map to commit; ROWS
 * (A) hands the tool the next page of rows to copy, PUT (B) takes it;
 * FREEZE (A) begins the cut-over, in which A parks the requests of M;
 * then the tool sends SLOTS with the map to B and every other shard, and
 * COMMIT (A): A takes the map, drops M's rows and answers what it parked
 * with EMOVED naming B. ABORT (A or B), or the tool's lease or the
 * cut-over's bound passing, ends a side with nothing changed: B drops the
 * rows it took, A answers what it parked with EMOVED naming itself, so
 * each client sends those ids again (once, with new seqs) and A applies
 * them. move/move.c keeps the state; this file answers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dround.h"
#include "finite.h"
#include "handover.h"
#include "log.h"
#include "move.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "slotmap.h"
#include "snapshot_format.h"
#include "zeps_errors.h"

/* Most rows one ROWS page may ask for. */
#define ZP_MOVE_PAGE_MAX (1u << 20)

/* Room for the reply header beside a page under max_message_mb. */
#define ZP_MOVE_HEADER_ROOM 4096u

static void free_page(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Answer every parked request with EMOVED by the shard's map now: naming
 * the target after the commit, this shard after an abort. */
static void answer_parked(zp_server *s)
{
    zp_move_parked *p;
    while ((p = zp_move_parked_take(s))) {
        if (p->dense[0]) { /* a dense write: the piece its first element is in now */
            const zp_table *t = zp_dmove_any(s, p->dense);
            zp_dense_piece at = {.lo = p->id, .hi = p->id + p->count, .owner = s->shard};
            if (t)
                zp_slotmap_dense_find(s->slots, t->name, t->length, p->id, &at);
            zp_owner_refuse_dense(s, &p->identity, &p->h, p->dense, p->id, &at);
        } else {
            zp_owner_refuse(s, &p->identity, &p->h, p->what, p->id, p->pos);
        }
        zp_move_parked_free(p);
    }
}

/* Ids still to send, and the source's round records (handover.h). */
static uint64_t left_all(const zp_server *s)
{
    return zp_move_left(s) + zp_handover_left(s);
}

/* End the move with nothing changed; why says why (for the log). */
uint64_t zp_move_op_abort(zp_server *s, const char *why)
{
    zp_move *m = s->move;
    uint64_t dropped = 0;
    if (m->role == ZP_MOVE_TARGET) {
        zp_handover_drop(s);
        dropped = zp_move_drop_rows(s);
    } else if (m->nhanded > 0) { /* the held pushes taken at the cut-over come back */
        zp_handover_give_back(s);
        zp_handover_apply(s);
    }
    zp_warn("move of %u slots %s shard %d aborted (%s): the map stays at epoch %" PRIu64
            "%s; %" PRIu64 " imported rows dropped, %zu parked requests sent back",
            m->nmoving, m->role == ZP_MOVE_SOURCE ? "to" : "from", m->peer, why,
            zp_slotmap_epoch(s->slots), m->role == ZP_MOVE_SOURCE ? ", this shard keeps them" : "",
            dropped, m->nparked);
    answer_parked(s);
    zp_move_end(s);
    zp_pull_serve_all(s); /* pulls of M held since the cut-over (sparse_ops.c rows_ready) */
    return dropped;
}

/* A replica that stopped serving (demoted, fenced) while it was a move's
 * source: the part is its own (BEGIN is not logged), and its primary now
 * knows nothing of it. Ended without answers: the parked requests' clients
 * find the new primary, which never parked them. */
static void end_demoted_source(zp_server *s)
{
    if (s->move->role == ZP_MOVE_SOURCE)
        zp_info("move of %u slots to shard %d ended: this replica no longer serves (%zu parked "
                "requests left to their clients' retries)",
                s->move->nmoving, s->move->peer, s->move->nparked);
    zp_move_end(s); /* a target's part (a backup's): the COMMIT from the log ends it */
}

bool zp_move_op_due(zp_server *s)
{
    /* a backup's move as a target is its primary's (the log's IMPORT): it
     * ends by the log's ABORT or SLOTS, the lease is the primary's to judge */
    if (s->move && s->move->role == ZP_MOVE_SOURCE && !zp_role_serves(&s->role)) {
        end_demoted_source(s);
        return false;
    }
    return zp_role_serves(&s->role) && zp_move_expired(s, zp_now_s());
}

void zp_move_op_end_by_time(zp_server *s)
{
    Zeps__Header h; /* the primary's backups end their part of it too */
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__MOVE;
    h.rank = 0xffffffffu;
    h.move_step = ZP_MOVE_ABORT;
    h.move_peer = (uint32_t)s->move->peer;
    zp_move_op_abort(s, zp_move_past_bound(s, zp_now_s()) ? "the cut-over passed its bound"
                                                          : "the tool's lease passed");
    zp_rlog_own(s, &h, NULL, 0);
}

/* The map of r's payload, decoded and newer than the shard's with the
 * same slot count; NULL after replying. */
static zp_slotmap *checked_map(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (r->npayload != 1) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "MOVE step %u must carry exactly one frame (the map to commit), got %d",
                       h->move_step, r->npayload);
        return NULL;
    }
    zp_slotmap *next = NULL;
    char why[384];
    int rc = zp_slotmap_decode(&next, zmq_msg_data(r->payload), zmq_msg_size(r->payload),
                               s->nshards, why, sizeof(why));
    if (rc == 0 && zp_slotmap_epoch(next) <= zp_slotmap_epoch(s->slots)) {
        snprintf(why, sizeof(why),
                 "the map's epoch %" PRIu64 " is not newer than shard %d's %" PRIu64,
                 zp_slotmap_epoch(next), s->shard, zp_slotmap_epoch(s->slots));
        rc = ZEPS_ESTALE;
    } else if (rc == 0 && zp_slotmap_slots(next) != zp_slotmap_slots(s->slots)) {
        snprintf(why, sizeof(why), "a map of %u slots; shard %d's has %u", zp_slotmap_slots(next),
                 s->shard, zp_slotmap_slots(s->slots));
        rc = ZEPS_EINVAL;
    } else if (rc == 0 && zp_slotmap_unretires(s->slots, next) >= 0) {
        snprintf(why, sizeof(why), "the map does not retire shard %d, which shard %d's retires",
                 zp_slotmap_unretires(s->slots, next), s->shard);
        rc = ZEPS_EINVAL;
    }
    if (rc != 0) {
        zp_slotmap_destroy(&next);
        zp_reply_error(s, r->identity, h, rc, "MOVE: %s", why);
        return NULL;
    }
    return next;
}

/* BEGIN (source) and IMPORT (target). */
static void on_start(zp_server *s, zp_request *r, int role)
{
    const Zeps__Header *h = r->h;
    char why[384];
    int rc = 0;
    int known = zp_slotmap_shards(s->slots); /* those that joined included */
    if (h->move_peer >= (uint32_t)known || h->move_peer == (uint32_t)s->shard) {
        snprintf(why, sizeof(why),
                 "the other shard of a move must be one of shards 0..%d but %d, not %u", known - 1,
                 s->shard, h->move_peer);
        rc = ZEPS_EINVAL;
    }
    if (rc == 0)
        rc = zp_move_refused(s, why, sizeof(why));
    zp_slotmap *next = rc == 0 ? checked_map(s, r) : NULL;
    if (rc == 0 && !next)
        return;
    uint64_t rows = 0;
    double lease = (h->move_bound_ms ? h->move_bound_ms : 10000) / 1000.0;
    if (rc == 0)
        rc = zp_move_start(s, role, &next, (int)h->move_peer, lease, &rows, why, sizeof(why));
    zp_slotmap_destroy(&next);
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "MOVE %s refused: %s",
                       role == ZP_MOVE_SOURCE ? "BEGIN" : "IMPORT", why);
        return;
    }
    zp_slotmap_destroy(&s->fenced); /* a new move: its SLOTS is its own */
    zp_info("move of %u slots %s shard %d begins (map epoch %" PRIu64 " to commit): %" PRIu64
            " rows of them here",
            s->move->nmoving, role == ZP_MOVE_SOURCE ? "to" : "from", s->move->peer,
            zp_slotmap_epoch(s->move->next), rows);
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.count = rows;
    rep.cursor = role == ZP_MOVE_SOURCE ? left_all(s) : 0;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

/* ROWS after the cut-over's last rows: a page of round records (the
 * bsp pushes of M the source held, handover.h), at most `room` bytes. */
static void on_held(zp_server *s, zp_request *r, uint64_t room)
{
    uint8_t *buf;
    size_t len;
    zp_table *t;
    uint64_t n = zp_handover_page(s, room, &buf, &len, &t);
    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.count = n;
    rep.cursor = left_all(s);
    rep.offset = s->move->rounds;
    rep.flags |= ZP_FLAG_HELD;
    rep.move_table = t->name;
    zp_reply_send(s, r->identity, &rep, buf, len, free_page, NULL); /* the sink owns buf */
}

/* ROWS of a dense move after the pieces' elements, under bsp: a page of
 * a piece's open round (move/dround.h). */
static void dense_round(zp_server *s, zp_request *r)
{
    uint8_t *buf;
    zp_table *t;
    size_t len = zp_dround_page(s, &buf, &t);
    if (len == 0) { /* not reached: the caller saw pages left */
        zp_reply_error(s, r->identity, r->h, ZEPS_ESTATE, "MOVE ROWS: no round page left");
        return;
    }
    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.flags |= ZP_FLAG_HELD;
    rep.move_table = t->name;
    rep.offset = t->begin;
    rep.count = t->n;
    rep.cursor = zp_dround_left(s);
    rep.data_version = t->version;
    s->move->handed_rows += len > ZP_DROUND_HEAD;
    zp_reply_send(s, r->identity, &rep, buf, len, free_page, NULL); /* the sink owns buf */
}

/* ROWS of a dense move: the next page of the moving pieces' elements
 * (after FREEZE; before it, none: a piece is copied in the cut-over),
 * then of their open rounds. */
static void dense_rows(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    uint64_t unit = 4 * sizeof(float); /* a value and at most 3 optimizer floats */
    uint64_t room = s->cfg.max_message_bytes;
    uint64_t fit = room > ZP_MOVE_HEADER_ROOM ? (room - ZP_MOVE_HEADER_ROOM) / unit : 0;
    uint64_t max = h->count < fit ? h->count : fit;
    if (max == 0 || h->count > (uint64_t)1 << 24) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "MOVE ROWS of %" PRIu64 " elements: 1 to 2^24 per page", h->count);
        return;
    }
    float *buf = zp_alloc(max * unit);
    zp_table *t = NULL;
    uint64_t at = 0, left = 0;
    uint64_t n = zp_dmove_page(s, max, buf, &t, &at, &left);
    if (n == 0 && zp_dround_left(s) > 0) {
        free(buf);
        dense_round(s, r);
        return;
    }
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.count = n;
    rep.cursor = left + zp_dround_left(s);
    rep.offset = at;
    if (s->move->frozen && n == 0 && rep.cursor == 0)
        s->move->drained = true; /* every element is sent, and the rounds */
    uint32_t k = t ? (uint32_t)t->opt->state_per_param : 0;
    if (t) {
        rep.move_table = t->name;
        rep.state_per_value = k;
        rep.data_version = t->version;
        s->move->rows_sent += n;
    }
    zp_reply_send(s, r->identity, &rep, buf, n * (1 + k) * sizeof(float), free_page,
                  NULL); /* the sink owns buf */
}

/* PUT of a dense move's round page (the target). */
static void dense_round_put(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    char why[256];
    int rc = ZEPS_EINVAL;
    if (!s->cons->rounds || r->npayload != 1)
        snprintf(why, sizeof(why), "%s",
                 r->npayload != 1 ? "one frame expected"
                                  : "the cluster's mode holds no push in rounds");
    else
        rc = zp_dround_put(s, h->move_table ? h->move_table : "", h->offset, h->count,
                           zp_request_aligned(r->payload, 8), zmq_msg_size(r->payload), why,
                           sizeof(why));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc,
                       "MOVE PUT of the open round of [%" PRIu64 ", %" PRIu64
                       ") of dense table '%s': %s; nothing held",
                       h->offset, h->offset + h->count, h->move_table ? h->move_table : "", why);
        return;
    }
    s->move->handed_rows += zmq_msg_size(r->payload) > ZP_DROUND_HEAD;
    zp_reply_ok(s, r->identity, h, 0);
}

/* PUT of a dense move: a page of a moving piece's elements (the target). */
static void dense_put(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (h->flags & ZP_FLAG_HELD) {
        dense_round_put(s, r);
        return;
    }
    zp_table *t = h->move_table ? zp_dmove_piece_in(s, h->move_table, h->offset, h->count) : NULL;
    uint64_t k = t ? (uint64_t)t->opt->state_per_param : 0;
    if (!t || r->npayload != 1 || h->count == 0 || h->state_per_value != k ||
        zmq_msg_size(r->payload) != h->count * (1 + k) * sizeof(float)) {
        zp_reply_error(s, r->identity, h, t ? ZEPS_ESIZE : ZEPS_EINVAL,
                       "MOVE PUT of %" PRIu64 " elements from %" PRIu64 " of dense table '%s' "
                       "(%u optimizer floats each): %s",
                       h->count, h->offset, h->move_table ? h->move_table : "", h->state_per_value,
                       t ? "not one frame of that many values and states"
                         : "not inside a piece moving to this shard");
        return;
    }
    const float *v = zp_request_aligned(r->payload, 8);
    if (!zp_finite_all(v, (size_t)(h->count * (1 + k)))) {
        zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                       "MOVE PUT to dense table '%s' holds NaN or Inf; nothing written", t->name);
        return;
    }
    zp_table_write(t, (size_t)(h->offset - t->begin), (size_t)h->count, v);
    t->version = h->data_version; /* the piece's, as at the source */
    s->move->rows_sent += h->count;
    s->move->bytes_sent += zmq_msg_size(r->payload);
    zp_reply_ok(s, r->identity, h, 0);
}

/* ROWS: the next page of the rows to copy. */
static void on_rows(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (s->move->npieces) {
        dense_rows(s, r);
        return;
    }
    uint64_t unit = 0;
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        if (t->rows) {
            uint64_t u = ZP_SNAP_ROW_LEN(t->rows->dim, zp_sparse_state_per_value(t->rows->store));
            unit = u > unit ? u : unit;
        }
    }
    uint64_t room = s->cfg.max_message_bytes;
    unit = unit ? unit : 1; /* a move begins only with a sparse table: never 0 */
    uint64_t fit = room > ZP_MOVE_HEADER_ROOM ? (room - ZP_MOVE_HEADER_ROOM) / unit : 0;
    uint64_t max = h->count < fit ? h->count : fit;
    if (max == 0 || h->count > ZP_MOVE_PAGE_MAX) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "MOVE ROWS of %" PRIu64 " rows: 1 to %u per page (and a row of %" PRIu64
                       " bytes must fit max_message_mb)",
                       h->count, ZP_MOVE_PAGE_MAX, unit);
        return;
    }
    uint8_t *buf = zp_alloc(max * unit);
    zp_table *t = NULL;
    uint64_t left = 0;
    uint64_t n = zp_move_page(s, max, buf, &t, &left);
    left += zp_handover_left(s);
    if (n == 0 && zp_handover_left(s) > 0) { /* the rows are sent: the held pushes follow */
        free(buf);
        on_held(s, r, room - ZP_MOVE_HEADER_ROOM);
        return;
    }
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.count = n;
    rep.cursor = left;
    rep.offset = s->move->rounds;
    if (s->move->frozen && n == 0 && left == 0)
        s->move->drained = true; /* every row changed before the cut-over is sent */
    if (t) {
        rep.move_table = t->name;
        rep.state_per_value = (uint32_t)zp_sparse_state_per_value(t->rows->store);
    }
    uint64_t rec = t ? ZP_SNAP_ROW_LEN(t->rows->dim, rep.state_per_value) : 0;
    zp_reply_send(s, r->identity, &rep, buf, n * rec, free_page, NULL); /* the sink owns buf */
}

/* PUT: a page of rows of M (the target). 0, or -1 after replying. */
static int put_checked(zp_server *s, zp_request *r, zp_table *t, const uint8_t *recs)
{
    const Zeps__Header *h = r->h;
    uint32_t dim = t->rows->dim, spv = (uint32_t)zp_sparse_state_per_value(t->rows->store);
    uint64_t rec = ZP_SNAP_ROW_LEN(dim, spv);
    if (h->state_per_value != spv || h->count == 0 || h->count > ZP_MOVE_PAGE_MAX ||
        zmq_msg_size(r->payload) != h->count * rec) {
        zp_reply_error(s, r->identity, h, ZEPS_ESIZE,
                       "MOVE PUT to sparse table '%s': %" PRIu64 " rows of %u optimizer floats "
                       "per value in %zu bytes; this table's rows are %" PRIu64
                       " bytes with %u (1 to %u rows per page)",
                       t->name, h->count, h->state_per_value, zmq_msg_size(r->payload), rec, spv,
                       ZP_MOVE_PAGE_MAX);
        return -1;
    }
    size_t n = (size_t)h->count;
    const uint64_t *ids = zp_rows_record_ids(t->rows, recs, n);
    for (size_t i = 0; i < n; i++) {
        if (!zp_move_has(s->move, ids[i])) {
            zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                           "MOVE PUT to sparse table '%s': id %" PRIu64 " (row %zu) is not in "
                           "the slots moving to shard %d; nothing written",
                           t->name, ids[i], i, s->shard);
            return -1;
        }
        if (!zp_finite_all((const float *)(recs + i * rec + 24), (size_t)dim * (1 + spv))) {
            zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                           "MOVE PUT to sparse table '%s': row %zu (id %" PRIu64
                           ") holds NaN or Inf; nothing written",
                           t->name, i, ids[i]);
            return -1;
        }
    }
    ptrdiff_t rep = zp_rows_repeated(t->rows, ids, n);
    if (rep >= 0) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "MOVE PUT to sparse table '%s' names id %" PRIu64 " twice (row %td)",
                       t->name, ids[rep], rep);
        return -1;
    }
    return zp_sparse_ops_room(s, r, t, ids, n) ? 0 : -1;
}

/* PUT of round records (the target): held in t's rounds, those of
 * rounds closed here applied at once. */
static void put_held(zp_server *s, zp_request *r, zp_table *t)
{
    const Zeps__Header *h = r->h;
    char why[256];
    int rc = ZEPS_EINVAL;
    if (!s->cons->rows_handed)
        snprintf(why, sizeof(why), "the cluster's mode '%s' holds no push in rounds",
                 s->cons->name);
    else
        rc = zp_handover_put(s, t, zmq_msg_data(r->payload), zmq_msg_size(r->payload), h->count,
                             why, sizeof(why));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc,
                       "MOVE PUT of %" PRIu64 " round records to sparse table '%s': %s; nothing "
                       "held",
                       h->count, t->name, why);
        return;
    }
    s->move->handed_rows += h->count; /* applied from the commit on (handover.h) */
    zp_reply_ok(s, r->identity, h, 0);
}

static void on_put(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (s->move->npieces) {
        dense_put(s, r);
        return;
    }
    zp_table *t = NULL;
    for (uint32_t i = 0; i < s->ntables && h->move_table; i++)
        if (strcmp(s->tables[i]->name, h->move_table) == 0)
            t = s->tables[i];
    if (!t || !t->rows || r->npayload != 1) {
        zp_reply_error(s, r->identity, h, t && t->rows ? ZEPS_EPROTO : ZEPS_ETABLE, "MOVE PUT: %s",
                       t && t->rows ? "one frame of row records expected"
                                    : "no sparse table of that name on this shard (declare it "
                                      "here first)");
        return;
    }
    if (h->flags & ZP_FLAG_HELD) {
        put_held(s, r, t);
        return;
    }
    const uint8_t *recs = zp_request_aligned(r->payload, 8);
    if (put_checked(s, r, t, recs) != 0)
        return;
    zp_rows_put(t->rows, recs, h->count);
    s->move->rows_sent += h->count;
    s->move->bytes_sent += zmq_msg_size(r->payload);
    zp_reply_ok(s, r->identity, h, 0);
}

/* Whether r's one frame is the map this shard holds, byte for byte. */
static bool holds_map(const zp_server *s, const zp_request *r)
{
    zp_slotmap *m = NULL;
    char why[64];
    bool same = r->npayload == 1 &&
                zp_slotmap_decode(&m, zmq_msg_data(r->payload), zmq_msg_size(r->payload),
                                  s->nshards, why, sizeof(why)) == 0 &&
                zp_slotmap_same(m, s->slots);
    zp_slotmap_destroy(&m);
    return same;
}

/* COMMIT as a backup applies it from its primary's log: the backup had no
 * part in the move (BEGIN, ROWS and FREEZE are not logged), so it takes
 * the map the primary took and drops the rows of the slots that map gives
 * away, as the primary did. The same for a tool's COMMIT to a shard in no
 * move: the repair of a commit the target took and the source missed (its
 * tool died, or its primary failed before its backups had it;
 * docs/elastic.md "What each failure does"). */
static void commit_logged(zp_server *s, zp_request *r)
{
    if (holds_map(s, r)) { /* the source committed already, by asking its target (move_ask.c) */
        zp_info("move commit outside a move: slot map epoch %" PRIu64 " held already",
                zp_slotmap_epoch(s->slots));
        Zeps__Header rep;
        zp_reply_init(s, r->h, &rep);
        zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL); /* count 0: nothing dropped */
        return;
    }
    zp_slotmap *next = checked_map(s, r);
    if (!next)
        return;
    uint64_t dropped = zp_move_drop_foreign(s, next);
    zp_info("move commit %s: slot map epoch %" PRIu64 " taken, %" PRIu64
            " rows of the slots it gives away dropped",
            s->applying ? "from the primary's log" : "outside a move (a repair)",
            zp_slotmap_epoch(next), dropped);
    zp_slotmap_destroy(&s->slots);
    s->slots = next; /* the shard owns it */
    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.count = dropped;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

/* A dense move's commit at the source, once it took the map: the pulls
 * parked (ssp) on the moving pieces are answered EMOVED naming the
 * target, since their records are dropped. */
static void refuse_parked_pulls(zp_server *s)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (t->rows || !zp_dmove_moving(s, t))
            continue;
        zp_parked *p;
        while ((p = zp_parked_pop(&t->parked)))
            zp_owner_refuse_parked_pull(s, t, p);
    }
}

/* COMMIT: take the map, drop M's rows, send the parked requests to B. */
static void on_commit(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_move *m = s->move;
    if (!m->frozen || !m->drained) {
        zp_reply_error(s, r->identity, h, ZEPS_ESTATE, "MOVE COMMIT %s",
                       m->frozen ? "before a ROWS page after FREEZE came back "
                                   "empty: rows of the slots are not sent yet"
                                 : "before FREEZE: the rows of "
                                   "the slots may still change here");
        return;
    }
    zp_slotmap *next = checked_map(s, r);
    if (!next)
        return;
    bool same = zp_slotmap_same(next, m->next);
    zp_slotmap_destroy(&next);
    if (!same) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "MOVE COMMIT carries another map than the move's (epoch %" PRIu64 ")",
                       zp_slotmap_epoch(m->next));
        return;
    }
    uint64_t dropped = zp_move_op_commit(s);
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.count = dropped;
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}

uint64_t zp_move_op_commit(zp_server *s)
{
    zp_move *m = s->move;
    /* Frozen, every request of M is parked, so what was marked since the
     * tool's last page can only be touches of pulls parked before the
     * cut-over (ssp) served since: the rows' values are the target's, their
     * touch counts stay as the last page sent them. */
    uint64_t touched = zp_move_left(s);
    if (touched > 0)
        zp_info("move commit: %" PRIu64 " rows of the slots were touched by pulls parked before "
                "the cut-over since their last page; their touch counts stay as sent",
                touched);
    uint64_t dropped = zp_move_drop_rows(s);
    char cut[48] = "no cut-over (committed unfrozen)";
    if (m->frozen) /* a fence's read may find the map committed before FREEZE */
        snprintf(cut, sizeof(cut), "cut-over %.1f ms", (zp_now_s() - m->frozen_s) * 1e3);
    zp_slotmap_destroy(&s->slots);
    s->slots = m->next; /* the shard owns it */
    m->next = NULL;
    refuse_parked_pulls(s); /* a dense move: by the map just taken */
    dropped += zp_dmove_drop(s);
    zp_info("move of %u slots to shard %d committed at map epoch %" PRIu64 ": %" PRIu64
            " rows (%" PRIu64 " bytes) sent in %" PRIu64 " rounds, %" PRIu64
            " rows dropped here, %s, %zu parked requests sent to shard %d, %" PRIu64
            " rows of held bsp pushes handed over",
            m->nmoving, m->peer, zp_slotmap_epoch(s->slots), m->rows_sent, m->bytes_sent, m->rounds,
            dropped, cut, m->nparked, m->peer, m->handed_rows);
    answer_parked(s);
    zp_sparse_ops_refuse_moved(s); /* pulls held by ssp's bound since before the cut-over */
    zp_move_end(s);
    return dropped;
}

/* Whether the request's step is for this shard's side of the move in
 * progress; replies ESTATE if not. */
static bool step_fits(zp_server *s, zp_request *r, int role)
{
    const zp_move *m = s->move;
    if (m && m->role == role && r->h->move_peer == (uint32_t)m->peer)
        return true;
    zp_reply_error(s, r->identity, r->h, ZEPS_ESTATE,
                   "MOVE step %u: shard %d is not the %s of a move with shard %u (%s)",
                   r->h->move_step, s->shard, role == ZP_MOVE_SOURCE ? "source" : "target",
                   r->h->move_peer, m ? "it is in another move" : "no move is in progress");
    return false;
}

void zp_move_op_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    uint32_t step = h->move_step;
    if (step == ZP_MOVE_BEGIN || step == ZP_MOVE_IMPORT) {
        on_start(s, r, step == ZP_MOVE_BEGIN ? ZP_MOVE_SOURCE : ZP_MOVE_TARGET);
        return;
    }
    if (step == ZP_MOVE_ABORT) {
        uint64_t n = s->move && r->h->move_peer == (uint32_t)s->move->peer
                         ? zp_move_op_abort(s, "the tool aborted it")
                         : 0;
        Zeps__Header rep;
        zp_reply_init(s, h, &rep);
        rep.count = n;
        zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
        return;
    }
    if (step < ZP_MOVE_ROWS || step > ZP_MOVE_COMMIT) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL, "MOVE: unknown step %u (1 to 8)", step);
        return;
    }
    if (step == ZP_MOVE_COMMIT && (s->applying || !s->move)) {
        if (s->move) /* a part left from when this backup was primary, or a target's part
                      * that its primary committed from ZooKeeper (zkmap.c) */
            end_demoted_source(s);
        commit_logged(s, r);
        return;
    }
    if (!step_fits(s, r, step == ZP_MOVE_PUT ? ZP_MOVE_TARGET : ZP_MOVE_SOURCE))
        return;
    s->move->heard_s = zp_now_s(); /* the tool's lease runs on */
    if (step == ZP_MOVE_ROWS) {
        on_rows(s, r);
    } else if (step == ZP_MOVE_PUT) {
        on_put(s, r);
    } else if (step == ZP_MOVE_FREEZE) {
        if (!s->move->frozen) {
            s->move->frozen = true;
            s->move->frozen_s = zp_now_s();
            s->move->bound_s = (h->move_bound_ms ? h->move_bound_ms : 2000) / 1000.0;
            s->move->handed_rows = zp_handover_take(s); /* no row of M changes here from now */
        }
        Zeps__Header rep;
        zp_reply_init(s, h, &rep);
        rep.cursor = left_all(s);
        zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
    } else {
        on_commit(s, r);
    }
}
