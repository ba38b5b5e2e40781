/*
 * owner.c - which sparse ids this shard owns, and the EMOVED refusal of a
 * request that names others (docs/elastic.md, docs/protocol.md "Slots and
 * redirects").
 *
 * A sparse request (PULL, PUSH, PUT) is checked against the shard's slot
 * map before anything is read or touched; an id of a slot another shard
 * owns refuses the whole request with EMOVED, naming that shard and the
 * map's epoch, with the map itself as the payload: a client takes it and
 * sends the ids again to their owners, with no further round trip. A
 * HELLO reply carries the map the same way when it is not the default
 * (epoch > 0), so a client knows it before its first request.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"
#include "handover.h"
#include "log.h"
#include "move.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "slotmap.h"
#include "snapshot_format.h"
#include "zeps_errors.h"

ptrdiff_t zp_owner_foreign(const zp_server *s, const uint64_t *ids, size_t n)
{
    const zp_slotmap *m = s->slots;
    if (zp_slotmap_shards(m) == 1)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (zp_slotmap_owner(m, ids[i]) != s->shard)
            return (ptrdiff_t)i;
    return -1;
}

static void free_map(void *data, void *hint)
{
    (void)hint;
    free(data);
}

void zp_owner_send_with_map(zp_server *s, zmq_msg_t *identity, Zeps__Header *rep)
{
    const zp_slotmap *m = s->slots;
    rep->slot_epoch = zp_slotmap_epoch(m);
    size_t len = zp_slotmap_wire_size(m);
    void *map = zp_alloc(len);
    zp_slotmap_encode(m, map);
    zp_reply_send(s, identity, rep, map, len, free_map, NULL); /* the sink owns map */
}

/* A request answered EMOVED: the client sends its elements or ids on
 * under new seqs and never this one again, so the seq is recorded: a copy
 * still on its way (a retry sent while it was parked in a move's
 * cut-over) is a duplicate here, never applied once the slots or the
 * piece are this shard's again (an abort). A process that replaced the
 * worker has seqs of its own. */
static void record_refused(zp_server *s, const Zeps__Header *req)
{
    zp_worker *w = req->rank < (uint32_t)s->nworkers ? &s->workers.w[req->rank] : NULL;
    if (w && w->joined && req->seq && req->incarnation == w->incarnation)
        zp_workers_record(w, req->seq);
}

void zp_owner_refuse(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, const char *what,
                     uint64_t id, size_t pos)
{
    const zp_slotmap *m = s->slots;
    uint32_t slot = zp_slotmap_slot_of(m, id);
    int owner = zp_slotmap_slot_owner(m, slot);
    char text[320];
    snprintf(text, sizeof(text),
             "%s: id %" PRIu64 " (position %zu) is in slot %u, which shard %d owns at slot map "
             "epoch %" PRIu64 ", not shard %d: send it there (the map is this reply's payload)",
             what, id, pos, slot, owner, zp_slotmap_epoch(m), s->shard);
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.error = ZEPS_EMOVED;
    rep.error_text = text;
    rep.slot_owner = (uint32_t)owner;
    zp_reply_count_error(s, (unsigned)req->op, ZEPS_EMOVED);
    char note[96];
    if (zp_ratelimit_due(&s->logs.refused, zp_now_s(), note, sizeof(note)))
        zp_info("%s from rank %d refused (EMOVED): %s%s", zp_wire_op_name(req->op), (int)req->rank,
                text, note);
    zp_owner_send_with_map(s, identity, &rep);
    record_refused(s, req);
}

/* Rows of sparse table t this shard holds whose slot `next` gives to
 * another shard (a page of records at a time). */
static uint64_t rows_leaving(const zp_server *s, zp_table *t, const zp_slotmap *next)
{
    enum { PAGE = 1024 };
    uint64_t rec = ZP_SNAP_ROW_LEN(t->rows->dim, zp_sparse_state_per_value(t->rows->store));
    uint8_t *buf = zp_alloc(PAGE * rec);
    uint64_t cursor = 0, leaving = 0;
    do {
        uint64_t n = zp_rows_scan(t->rows, &cursor, PAGE, buf);
        const uint64_t *ids = zp_rows_record_ids(t->rows, buf, (size_t)n);
        for (uint64_t i = 0; i < n; i++)
            leaving += zp_slotmap_owner(next, ids[i]) != s->shard;
    } while (cursor != 0);
    free(buf);
    return leaving;
}

/* Rows of the pushes sparse table t holds for open bsp rounds whose ids
 * `next` gives to other shards (a row not made yet has its pushes there). */
static uint64_t held_leaving(const zp_server *s, const zp_table *t, const zp_slotmap *next)
{
    const zp_rround *rr = &t->rows->held;
    uint64_t leaving = 0;
    for (size_t i = 0; i < rr->nheld; i++)
        for (size_t j = 0; j < rr->held[i].n; j++)
            leaving += zp_slotmap_owner(next, rr->held[i].ids[j]) != s->shard;
    return leaving;
}

void zp_owner_refuse_dense(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req,
                           const char *name, uint64_t at, const zp_dense_piece *p)
{
    char text[320];
    if (p->owner == s->shard) /* the range leaves its piece */
        snprintf(text, sizeof(text),
                 "%s of dense table '%s' of %" PRIu64 " elements from element %" PRIu64
                 " leaves piece [%" PRIu64 ", %" PRIu64 ") of shard %d at slot map epoch %" PRIu64
                 ": cut it by the map (this reply's payload)",
                 zp_wire_op_name(req->op), name, req->count, at, p->lo, p->hi, p->owner,
                 zp_slotmap_epoch(s->slots));
    else
        snprintf(text, sizeof(text),
                 "%s of dense table '%s': element %" PRIu64 " is in piece [%" PRIu64 ", %" PRIu64
                 "), which shard %d holds at slot map epoch %" PRIu64
                 ", not shard %d: send it there (the map is this reply's payload)",
                 zp_wire_op_name(req->op), name, at, p->lo, p->hi, p->owner,
                 zp_slotmap_epoch(s->slots), s->shard);
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.error = ZEPS_EMOVED;
    rep.error_text = text;
    rep.slot_owner = (uint32_t)p->owner;
    zp_reply_count_error(s, (unsigned)req->op, ZEPS_EMOVED);
    zp_owner_send_with_map(s, identity, &rep);
    record_refused(s, req);
}

/* Why shard s may not take `next` now ("" if it may), into why. */
static int slots_refused(zp_server *s, const zp_slotmap *next, char *why, size_t len)
{
    uint64_t have = zp_slotmap_epoch(s->slots), want = zp_slotmap_epoch(next);
    if (want <= have) {
        snprintf(why, len, "slot map epoch %" PRIu64 " is not newer than shard %d's %" PRIu64, want,
                 s->shard, have);
        return ZEPS_ESTALE;
    }
    int fenced = zp_move_fenced(s, next, why, len); /* a move ended at its source's question */
    if (fenced != 0)
        return fenced;
    if (zp_slotmap_shards(next) < zp_slotmap_shards(s->slots) ||
        zp_slotmap_shards(next) <= s->shard) {
        snprintf(why, len,
                 "a map of %d shards; shard %d's names %d (a map lists every shard that ever "
                 "joined, this one included)",
                 zp_slotmap_shards(next), s->shard, zp_slotmap_shards(s->slots));
        return ZEPS_EINVAL;
    }
    int back = zp_slotmap_unretires(s->slots, next);
    if (back >= 0) {
        snprintf(why, len,
                 "the map of epoch %" PRIu64 " does not retire shard %d, which shard %d's "
                 "retires: a retired shard never comes back (docs/elastic.md)",
                 want, back, s->shard);
        return ZEPS_EINVAL;
    }
    if (zp_slotmap_slots(next) != zp_slotmap_slots(s->slots)) {
        snprintf(why, len,
                 "a map of %u slots; shard %d's has %u (a move changes owners, never "
                 "the slot count)",
                 zp_slotmap_slots(next), s->shard, zp_slotmap_slots(s->slots));
        return ZEPS_EINVAL;
    }
    if (s->role.replicas > 1 && (s->cons->caps & ZP_CAP_CUTS)) {
        snprintf(why, len,
                 "a new slot map on shard %d: not built under bsp with replicas "
                 "(docs/elastic.md)",
                 s->shard);
        return ZEPS_ESTATE;
    }
    if (zp_move_commits(s, next)) /* the commit of the move this shard imports */
        return 0;
    if (zp_pieces_refused(s, next, why, len))
        return ZEPS_ESTATE;
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (!t->rows)
            continue;
        if (t->rows->tier) {
            snprintf(why, len,
                     "sparse table '%s' has a cold tier: its rows are not checked "
                     "against a new slot map (not built)",
                     t->name);
            return ZEPS_ESTATE;
        }
        uint64_t n = rows_leaving(s, t, next), held = held_leaving(s, t, next);
        if (held > 0) {
            snprintf(why, len,
                     "shard %d holds %" PRIu64 " rows of pushes to sparse table '%s' for open bsp "
                     "rounds in slots the map of epoch %" PRIu64 " gives to other shards; SLOTS "
                     "moves no push: move them with MOVE (zepsctl shards move, docs/elastic.md)",
                     s->shard, held, t->name, want);
            return ZEPS_ESTATE;
        }
        if (n > 0) {
            snprintf(why, len,
                     "shard %d holds %" PRIu64 " rows of sparse table '%s' in slots the map of "
                     "epoch %" PRIu64 " gives to other shards; SLOTS moves no row: move them "
                     "with MOVE (zepsctl shards move, docs/elastic.md)",
                     s->shard, n, t->name, want);
            return ZEPS_ESTATE;
        }
    }
    return 0;
}

void zp_owner_refuse_parked_pull(zp_server *s, const zp_table *t, zp_parked *p)
{
    Zeps__Header req;
    zeps__header__init(&req);
    req.op = ZEPS__OP__PULL;
    req.req_id = p->req_id;
    req.rank = p->rank;
    req.seq = p->seq;
    req.table = t->id;
    req.count = p->count;
    zp_dense_piece at;
    zp_slotmap_dense_find(s->slots, t->name, t->length, p->offset, &at);
    zp_owner_refuse_dense(s, &p->identity, &req, t->name, p->offset, &at);
    if (p->rank < (uint32_t)s->nworkers && s->workers.w[p->rank].parked > 0)
        s->workers.w[p->rank].parked--;
    zp_parked_free(p);
}

void zp_owner_on_slots(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    if (r->npayload != 1) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "SLOTS must carry exactly one frame (the map), got %d", r->npayload);
        return;
    }
    zp_slotmap *next = NULL;
    char why[384];
    int rc = zp_slotmap_decode(&next, zmq_msg_data(r->payload), zmq_msg_size(r->payload),
                               s->nshards, why, sizeof(why));
    if (rc == 0)
        rc = slots_refused(s, next, why, sizeof(why));
    if (rc != 0) {
        zp_slotmap_destroy(&next);
        zp_reply_error(s, r->identity, h, rc, "SLOTS: %s", why);
        return;
    }
    zp_info("slot map epoch %" PRIu64 " taken (was %" PRIu64 "): shard %d owns %u of %u slots",
            zp_slotmap_epoch(next), zp_slotmap_epoch(s->slots), s->shard,
            zp_slotmap_count(next, s->shard), zp_slotmap_slots(next));
    bool commit = zp_move_commits(s, next); /* of the move this shard imports */
    zp_slotmap *old = s->slots;
    s->slots = next; /* the shard owns it */
    if (!commit)     /* dense pieces placed otherwise, nothing written given away */
        zp_pieces_rebuild(s, old, zp_owner_refuse_parked_pull);
    zp_slotmap_destroy(&old);
    zp_handover_map_taken(
        s); /* the commit: a dense move's pieces and bsp records join the tables */
    zp_reply_ok(s, r->identity, h, 0);
}
