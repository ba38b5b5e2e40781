/*
 * test_move.c - server/move/move.c with op/move.c and op/owner.c, in
 * process through dispatch (inproc.h): one side of a live move of a slot
 * set (docs/elastic.md), driven by the tool's MOVE steps as a tool sends
 * them, with no sockets and no other shard.
 *
 * test_parked_commit / test_parked_abort: requests of the moving slots
 * that reach the source during its cut-over are parked, and each is
 * answered at the commit (EMOVED naming the target, at the new epoch) or
 * the abort (EMOVED naming the source) as the reply to that request: its
 * own req_id, seq and op, to its own sender, so that the client matches it
 * without waiting for its request timeout.
 * test_foreign_map_mid_import: a SLOTS at the epoch of the move a shard
 * imports, but not the move's map (every owner turned), is not the
 * commit: it is checked as any map (refused, rows would be left behind)
 * and the import goes on; the move's own map then commits it.
 * test_clock_brings_map: a CLOCK asking for a newer map (flag MAP) gets it.
 * test_put_parked: a PUT whose first row is of a moving slot is parked in
 * the cut-over as any request of it, and answered at the abort.
 * test_rows_left: each page of ROWS says how many rows are left to send.
 * test_import_counted: the target's commit says the rows and bytes it took.
 * test_held_page_room: under bsp, a page of the pushes a source hands over
 * (handover.c) takes every record that fits its room, to the byte, and
 * at least one.
 * test_held_drop_frees: a target's drop of the held pushes of the moving
 * slots frees them (the heap stays flat over 2,000 drops).
 * test_dense_parked_once: a dense move's cut-over parks each write of its
 * pieces once (dmove.c): a resend is not parked again, and is answered
 * with the first at the abort.
 * test_cut_frees_old_piece: a map cutting a dense piece on its shard frees
 * the record it replaced (op/pieces.c).
 * test_dense_late_copy_after_abort: a late copy of a dense write answered
 * EMOVED at the abort is a duplicate, not a second update (owner.c).
 */
#include <check.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "heap.h"
#include "handover.h"
#include "inproc.h"
#include "move.h"
#include "rows.h"
#include "slotmap.h"
#include "sparse.h"
#include "zeps_errors.h"

#define DIM 3

/* The first n ids (from `from`) that the default map of 2 shards gives to
 * `shard`. */
static void ids_on(uint64_t *ids, size_t n, int shard, uint64_t from)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    size_t k = 0;
    for (uint64_t id = from; k < n; id++)
        if (zp_slotmap_owner(d, id) == shard)
            ids[k++] = id;
    zp_slotmap_destroy(&d);
}

/* Shard `index` of 2 in `mode`, each of its `workers` said HELLO, the
 * table "emb" (dim DIM) declared, its id into *t if t: the caller's. */
static zt_shard *emb_shard(const char *mode, int workers, int index, uint32_t *t)
{
    zt_shard *z = zt_shard_start(zt_config(mode, workers, 2), index);
    for (int w = 0; w < workers; w++)
        zt_hello(z, (uint32_t)w);
    uint32_t id = zt_declare_sparse(z, "emb", DIM);
    if (t)
        *t = id;
    return z;
}

/* The default map of 2 shards at epoch 1 with the slot of `id` given to
 * shard 1: the map a move of that one slot from shard 0 commits. The
 * caller's. */
static zp_slotmap *move_map(uint64_t id)
{
    zp_slotmap *d = NULL, *next = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint8_t *which = calloc(zp_slotmap_slots(d), 1);
    which[zp_slotmap_slot_of(d, id)] = 1;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 1, &next), 0);
    free(which);
    zp_slotmap_destroy(&d);
    return next;
}

/* A SLOTS from the tool carrying wire[0..len); its one reply. */
static zt_reply *slots(zt_shard *z, const void *wire, size_t len)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__SLOTS, ZT_TOOL);
    ck_assert_int_eq(zt_send(z, &h, wire, len), 1);
    return zt_last(z);
}

static uint64_t rows_of(zt_shard *z, uint32_t t)
{
    zp_sparse_counters c;
    zp_sparse_get_counters(z->s->tables[t]->rows->store, &c);
    return c.rows;
}

/* Shard 0 of 2 holding rows of ids[0..n) (table "emb"), the source of a
 * move of the slot of ids[0] to shard 1, frozen with every row sent: the
 * next request of that slot is parked. *t is the table's id, *next the
 * move's map (the caller's). */
static zt_shard *frozen_source(const uint64_t *ids, size_t n, uint32_t *t, zp_slotmap **next)
{
    zt_shard *z = emb_shard("async", 2, 0, t);
    float g[8 * DIM];
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n * DIM; i++)
        g[i] = 1;
    ck_assert_int_eq(zt_spush(z, 0, *t, ids, n, g, n * DIM, NULL), 1);
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    *next = move_map(ids[0]);
    zt_reply *r = zt_move_step(z, ZP_MOVE_BEGIN, 1, *next, 0);
    ck_assert_int_eq(r->h->error, 0);
    ck_assert_uint_eq(r->h->count, 1); /* the row of ids[0] */
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_FREEZE, 1, NULL, 0)->h->error, 0);
    for (int i = 0; i < 4 && !z->s->move->drained; i++) /* a page, then an empty one */
        ck_assert_int_eq(zt_move_step(z, ZP_MOVE_ROWS, 1, NULL, 100)->h->error, 0);
    ck_assert(z->s->move->drained);
    return z;
}

/* Park a PULL from rank 0 and a PUSH from rank 1, each naming ids[0]
 * second, and a resend of that PULL; their headers into pull and push. */
static void park_two(zt_shard *z, uint32_t t, const uint64_t *ids, Zeps__Header *pull,
                     Zeps__Header *push)
{
    uint64_t two[2] = {ids[1], ids[0]};
    *pull = zt_header(z, ZEPS__OP__PULL, 0);
    pull->table = t;
    pull->count = 2;
    ck_assert_int_eq(zt_send(z, pull, two, sizeof(two)), 0);
    float g[2 * DIM] = {1, 1, 1, 1, 1, 1};
    uint8_t buf[sizeof(two) + sizeof(g)];
    memcpy(buf, two, sizeof(two));
    memcpy(buf + sizeof(two), g, sizeof(g));
    *push = zt_header(z, ZEPS__OP__PUSH, 1);
    push->table = t;
    push->count = 2;
    ck_assert_int_eq(zt_send(z, push, buf, sizeof(buf)), 0);
    ck_assert_int_eq(zt_send(z, pull, two, sizeof(two)), 0); /* a resend: parked once */
    ck_assert_uint_eq(z->s->move->nparked, 2);
}

/* r is the EMOVED answer to request `req`, naming shard `owner` at slot
 * map epoch `epoch`, sent to "w<rank>". */
static void assert_answers(const zt_reply *r, const Zeps__Header *req, uint32_t owner,
                           uint64_t epoch)
{
    char to[16];
    snprintf(to, sizeof(to), "w%u", req->rank);
    ck_assert_str_eq(r->to, to);
    ck_assert_int_eq(r->h->error, ZEPS_EMOVED);
    ck_assert_uint_eq(r->h->req_id, req->req_id); /* the client matches it by this */
    ck_assert_uint_ne(r->h->req_id, 0);
    ck_assert_uint_eq(r->h->seq, req->seq);
    ck_assert_uint_eq(r->h->table, req->table);
    ck_assert_uint_eq(r->h->slot_owner, owner);
    ck_assert_uint_eq(r->h->slot_epoch, epoch);
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "(position 1)"));
    ck_assert_ptr_nonnull(strstr(r->h->error_text, req->op == ZEPS__OP__PULL ? "PULL" : "PUSH"));
}

START_TEST(test_parked_commit)
{
    uint64_t ids[2];
    ids_on(ids, 1, 0, 1);
    ids_on(ids + 1, 1, 0, ids[0] + 1);
    zp_slotmap *next = NULL;
    uint32_t t;
    zt_shard *z = frozen_source(ids, 2, &t, &next);
    ck_assert_uint_ne(zp_slotmap_slot_of(next, ids[1]), zp_slotmap_slot_of(next, ids[0]));
    Zeps__Header pull, push;
    park_two(z, t, ids, &pull, &push);
    int before = z->n;
    zt_reply *r = zt_move_step(z, ZP_MOVE_COMMIT, 1, next, 0); /* the parked two, then COMMIT's */
    ck_assert_int_eq(z->n, before + 3);
    ck_assert_int_eq(r->h->error, 0);
    ck_assert_uint_eq(r->h->count, 1); /* the row of ids[0] dropped */
    assert_answers(&z->r[before], &pull, 1, 1);
    assert_answers(&z->r[before + 1], &push, 1, 1);
    ck_assert_ptr_null(z->s->move);
    ck_assert_uint_eq(rows_of(z, t), 1);
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_parked_abort)
{
    uint64_t ids[2];
    ids_on(ids, 1, 0, 100);
    ids_on(ids + 1, 1, 0, ids[0] + 1);
    zp_slotmap *next = NULL;
    uint32_t t;
    zt_shard *z = frozen_source(ids, 2, &t, &next);
    Zeps__Header pull, push;
    park_two(z, t, ids, &pull, &push);
    /* another move's peer: not this one */
    zt_reply *r = zt_move_step(z, ZP_MOVE_ABORT, 2, NULL, 0);
    ck_assert_int_eq(r->h->error, 0);
    ck_assert_uint_eq(r->h->count, 0);
    ck_assert_ptr_nonnull(z->s->move);
    int before = z->n;
    r = zt_move_step(z, ZP_MOVE_ABORT, 1, NULL, 0);
    ck_assert_int_eq(z->n, before + 3);
    ck_assert_int_eq(r->h->error, 0);
    assert_answers(&z->r[before], &pull, 0, 0); /* send it here again */
    assert_answers(&z->r[before + 1], &push, 0, 0);
    ck_assert_ptr_null(z->s->move);
    ck_assert_uint_eq(rows_of(z, t), 2);
    ck_assert_int_eq(zt_spull(z, 0, t, ids, 2, 0), 1); /* served now */
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    r = zt_move_step(z, ZP_MOVE_ABORT, 1, NULL, 0); /* no move any more: nothing to abort */
    ck_assert_int_eq(r->h->error, 0);
    ck_assert_uint_eq(r->h->count, 0);
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_foreign_map_mid_import)
{
    /* shard 1 of 2 holds rows of its own slots and imports the slot of an
     * id of shard 0 */
    uint32_t t;
    zt_shard *z = emb_shard("async", 1, 1, &t);
    uint64_t mine[3], moving;
    ids_on(mine, 3, 1, 1);
    ids_on(&moving, 1, 0, 1);
    float g[3 * DIM] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(zt_spush(z, 0, t, mine, 3, g, 3 * DIM, NULL), 1);
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    zp_slotmap *next = move_map(moving);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_IMPORT, 0, next, 0)->h->error, 0);
    ck_assert_ptr_nonnull(z->s->move);
    /* the move's map at its epoch with every slot's owner turned over:
     * not the move's commit, and it would leave shard 1's rows behind */
    size_t len = zp_slotmap_wire_size(next);
    uint8_t *wire = malloc(len);
    zp_slotmap_encode(next, wire);
    for (uint32_t k = 0; k < zp_slotmap_slots(next); k++) {
        uint8_t *o = wire + ZP_SLOTMAP_WIRE_HDR + 2 * (size_t)k; /* u16, little-endian */
        ck_assert_uint_le(o[0], 1);
        o[0] ^= 1;
    }
    zt_reply *r = slots(z, wire, len);
    ck_assert_int_eq(r->h->error, ZEPS_ESTATE);
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "holds 3 rows of sparse table 'emb'"));
    ck_assert_uint_eq(zp_slotmap_epoch(z->s->slots), 0);
    ck_assert_ptr_nonnull(z->s->move); /* the import goes on */
    ck_assert_uint_eq(rows_of(z, t), 3);
    /* the move's own map is its commit: taken, the move over */
    zp_slotmap_encode(next, wire);
    ck_assert_int_eq(slots(z, wire, len)->h->error, 0);
    ck_assert_uint_eq(zp_slotmap_epoch(z->s->slots), 1);
    ck_assert_int_eq(zp_slotmap_owner(z->s->slots, moving), 1);
    ck_assert_ptr_null(z->s->move);
    free(wire);
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

/* CLOCK `c` from rank 0 with `flags` and `epoch` in slot_epoch: its reply. */
static zt_reply *clock_with(zt_shard *z, int64_t c, uint32_t flags, uint64_t epoch)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__CLOCK, 0);
    h.clock = c;
    h.flags = flags;
    h.slot_epoch = epoch;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    zt_reply *r = zt_last(z);
    ck_assert_msg(r->h->op == ZEPS__OP__CLOCK, "%s", r->h->error_text ? r->h->error_text : "?");
    return r;
}

/* A CLOCK with flag MAP whose slot_epoch is older than the shard's map is
 * answered with that map (a worker that never meets EMOVED learns it so);
 * one at the shard's epoch, one without the flag, and any at epoch 0 on a
 * shard of the default map get a bare ack. HELLO says the shard knows the
 * flag (caps MAPS). */
START_TEST(test_clock_brings_map)
{
    zt_shard *z = zt_shard_start(zt_config("async", 2, 2), 0);
    zt_hello(z, 0);
    ck_assert(zt_last(z)->h->caps & ZP_CAP_MAPS);
    ck_assert_ptr_null(clock_with(z, 0, ZP_FLAG_MAP, 0)->data); /* the default map */
    zp_slotmap *d = NULL, *m = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint8_t none[4096] = {0};
    ck_assert_int_eq(zp_slotmap_moved(d, none, 0, &m), 0);
    size_t len = zp_slotmap_wire_size(m);
    void *wire = malloc(len);
    zp_slotmap_encode(m, wire);
    ck_assert_int_eq(slots(z, wire, len)->h->op, ZEPS__OP__SLOTS);
    zt_reply *r = clock_with(z, 1, ZP_FLAG_MAP, 0);
    ck_assert_uint_eq(r->h->slot_epoch, 1);
    ck_assert_uint_eq(r->len, len);
    ck_assert_int_eq(memcmp(r->data, wire, len), 0);
    ck_assert_ptr_null(clock_with(z, 2, ZP_FLAG_MAP, 1)->data); /* it has it */
    ck_assert_ptr_null(clock_with(z, 3, 0, 0)->data);           /* it did not ask */
    ck_assert_int_eq(z->s->workers.w[0].clock, 4);              /* each clock counted */
    free(wire);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    zt_shard_free(z);
}
END_TEST

/* A PUT of one row (values all v) of id `id`, state none (sgd), from rank
 * 0; the replies it produced. */
static int put_row(zt_shard *z, uint32_t t, uint64_t id, float v, Zeps__Header *h)
{
    uint8_t rec[24 + DIM * 4] = {0};
    memcpy(rec, &id, 8);
    for (int i = 0; i < DIM; i++)
        memcpy(rec + 24 + 4 * i, &v, 4);
    *h = zt_header(z, ZEPS__OP__PUT, 0);
    h->table = t;
    h->count = 1;
    return zt_send(z, h, rec, sizeof(rec));
}

/* A PUT that names a row of the moving slot first (position 0) is parked
 * like any request of it: nothing written, and the abort answers it. */
START_TEST(test_put_parked)
{
    uint64_t ids[2];
    ids_on(ids, 1, 0, 200);
    ids_on(ids + 1, 1, 0, ids[0] + 1);
    zp_slotmap *next = NULL;
    uint32_t t;
    zt_shard *z = frozen_source(ids, 2, &t, &next);
    Zeps__Header put;
    ck_assert_int_eq(put_row(z, t, ids[0], 7.0f, &put), 0);
    ck_assert_uint_eq(z->s->move->nparked, 1);
    zp_sparse_row row;
    ck_assert(zp_sparse_get(z->s->tables[t]->rows->store, ids[0], &row));
    ck_assert_float_eq(row.values[0], -1.0f); /* the push's, not the PUT's */
    int before = z->n;
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_ABORT, 1, NULL, 0)->h->error, 0);
    ck_assert_int_eq(z->n, before + 2);
    const zt_reply *r = &z->r[before];
    ck_assert_int_eq(r->h->error, ZEPS_EMOVED);
    ck_assert_uint_eq(r->h->req_id, put.req_id);
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "(position 0)"));
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "PUT"));
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

/* Shard 0 of 2 holding rows of two ids of one of its slots (table "emb"),
 * the source of a move of that slot to shard 1 (BEGIN answered: 2 rows to
 * send). *next is the move's map (the caller's). */
static zt_shard *two_row_source(zp_slotmap **next)
{
    uint32_t t;
    zt_shard *z = emb_shard("async", 2, 0, &t);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint64_t ids[2];
    ids_on(ids, 1, 0, 1);
    ids[1] = ids[0] + 1;
    while (zp_slotmap_slot_of(d, ids[1]) != zp_slotmap_slot_of(d, ids[0]))
        ids[1]++;
    zp_slotmap_destroy(&d);
    float g[2 * DIM] = {1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(zt_spush(z, 0, t, ids, 2, g, 2 * DIM, NULL), 1);
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    *next = move_map(ids[0]);
    zt_reply *r = zt_move_step(z, ZP_MOVE_BEGIN, 1, *next, 0);
    ck_assert_int_eq(r->h->error, 0);
    ck_assert_uint_eq(r->h->count, 2);
    return z;
}

/* ROWS: a page of one row out of two says one is left, the next none. */
START_TEST(test_rows_left)
{
    zp_slotmap *next = NULL;
    zt_shard *z = two_row_source(&next);
    zt_reply *r = zt_move_step(z, ZP_MOVE_ROWS, 1, NULL, 1);
    ck_assert_int_eq(r->h->error, 0);
    ck_assert_uint_eq(r->h->count, 1);
    ck_assert_uint_eq(r->h->cursor, 1);
    r = zt_move_step(z, ZP_MOVE_ROWS, 1, NULL, 1);
    ck_assert_uint_eq(r->h->count, 1);
    ck_assert_uint_eq(r->h->cursor, 0);
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

/* A SLOTS from the tool carrying wire[0..len), taken; what the shard
 * logged (stderr) meanwhile, into out. */
static void slots_logged(zt_shard *z, const void *wire, size_t len, char *out, size_t cap)
{
    fflush(stderr);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    int saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_eq(dup2(fileno(f), 2), 2);
    int rc = slots(z, wire, len)->h->error;
    fflush(stderr);
    ck_assert_int_eq(dup2(saved, 2), 2);
    close(saved);
    ck_assert_int_eq(rc, 0);
    rewind(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
}

/* The target counts what it takes, each PUT's rows and bytes, and its
 * commit says so: "2 rows (B bytes) taken", B the PUT's payload. */
START_TEST(test_import_counted)
{
    zp_slotmap *next = NULL;
    zt_shard *a = two_row_source(&next);
    const zt_reply *page = zt_move_step(a, ZP_MOVE_ROWS, 1, NULL, 100);
    ck_assert_uint_eq(page->h->count, 2);
    ck_assert_ptr_nonnull(page->data);

    zt_shard *b = emb_shard("async", 1, 1, NULL);
    ck_assert_int_eq(zt_move_step(b, ZP_MOVE_IMPORT, 0, next, 0)->h->error, 0);
    Zeps__Header h = zt_header(b, ZEPS__OP__MOVE, ZT_TOOL);
    h.move_step = ZP_MOVE_PUT;
    h.move_peer = 0;
    h.move_table = (char *)"emb";
    h.count = page->h->count;
    ck_assert_int_eq(zt_send(b, &h, page->data, page->len), 1);
    ck_assert_int_eq(zt_last(b)->h->error, 0);
    size_t len = zp_slotmap_wire_size(next);
    uint8_t *wire = malloc(len);
    zp_slotmap_encode(next, wire);
    char log[2048], want[64];
    slots_logged(b, wire, len, log, sizeof(log));
    snprintf(want, sizeof(want), ": 2 rows (%zu bytes) taken", page->len);
    ck_assert_msg(strstr(log, want), "no '%s' in: %s", want, log);
    ck_assert_ptr_null(b->s->move);
    free(wire);
    zp_slotmap_destroy(&next);
    zt_shard_free(b);
    zt_shard_free(a);
}
END_TEST

/* Bytes of a round record of one row (handover.h: head, id, DIM floats,
 * padded to 8). */
#define REC1 ((ZP_HANDOVER_HEAD + 8 + 4 * DIM + 7) & ~7u)

/* Under bsp, four pushes of a moving row held at the source (ranks 0, 1,
 * 0, 1, clock 0) are taken at the freeze as four records, paged in the
 * order held: a room smaller than one record still takes that one, a room
 * one byte short of two records takes one, a room of exactly two both. */
START_TEST(test_held_page_room)
{
    uint32_t t;
    zt_shard *z = emb_shard("bsp", 2, 0, &t);
    uint64_t id;
    ids_on(&id, 1, 0, 1);
    float g[DIM] = {1, 2, 3};
    for (uint32_t k = 0; k < 4; k++) {
        ck_assert_int_eq(zt_spush(z, k % 2, t, &id, 1, g, DIM, NULL), 1);
        ck_assert_int_eq(zt_last(z)->h->error, 0);
    }
    zp_slotmap *next = move_map(id);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_BEGIN, 1, next, 0)->h->error, 0);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_FREEZE, 1, NULL, 0)->h->error, 0);
    ck_assert_uint_eq(zp_handover_left(z->s), 4);
    const uint64_t room[3] = {REC1 - 1, 2 * REC1 - 1, 2 * REC1}, want[3] = {1, 1, 2};
    for (int k = 0; k < 3; k++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        zp_table *tab = NULL;
        ck_assert_uint_eq(zp_handover_page(z->s, room[k], &buf, &len, &tab), want[k]);
        ck_assert_uint_eq(len, want[k] * REC1);
        ck_assert_ptr_eq(tab, z->s->tables[t]);
        uint32_t rank;
        memcpy(&rank, buf + len - REC1, 4); /* the last push paged so far: its rank */
        ck_assert_uint_eq(rank, (uint32_t)(k == 2 ? 3 : k) % 2);
        free(buf);
    }
    ck_assert_uint_eq(zp_handover_left(z->s), 0);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_ABORT, 1, NULL, 0)->h->error, 0);
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

/* A bsp target importing a slot holds a push of a moving row (as a PUT
 * of held records would) and drops it (as an abort does), 2,000 times:
 * each drop frees what it took out of the rounds, so the heap in use
 * grows by less than one drop's leak would make it over the loop. */
START_TEST(test_held_drop_frees)
{
    uint32_t t;
    zt_shard *z = emb_shard("bsp", 1, 1, &t);
    uint64_t moving;
    ids_on(&moving, 1, 0, 1);
    zp_slotmap *next = move_map(moving);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_IMPORT, 0, next, 0)->h->error, 0);
    zp_rround *held = &z->s->tables[t]->rows->held;
    float g[DIM] = {1, 2, 3};
    size_t before = 0;
    for (int k = 0; k < 2000; k++) {
        if (k == 100) /* the arrays the loop reuses are grown by now */
            before = mallinfo2().uordblks;
        ck_assert_int_eq(zp_rround_hold(held, 0, 0, &moving, 1, g, DIM, NULL), 0);
        ck_assert_uint_eq(zp_handover_drop(z->s), 1);
        ck_assert_uint_eq(held->nheld, 0);
    }
    size_t grown = mallinfo2().uordblks - before;
    ck_assert_msg(grown < 1900 * (8 + 4 * DIM), "the heap grew %zu bytes over 1,900 drops", grown);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_ABORT, 0, NULL, 0)->h->error, 0);
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

/* A PUSH of elements [0, 4) of dense table `t` from rank 0 with seq `seq`
 * (req_id: the next); the replies it produced. */
static int dense_push(zt_shard *z, uint32_t t, uint64_t seq)
{
    const float g[4] = {1, 1, 1, 1};
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.seq = seq;
    h.table = t;
    h.count = 4;
    return zt_send(z, &h, g, sizeof(g));
}

/* Shard 0 of 2 (async, one worker) with the dense table "w" of 100 (*t),
 * the source of a move of [0, 50) to shard 1 in its cut-over (a write of
 * the piece is parked): the shard and *next, the move's map, the caller's. */
static zt_shard *frozen_dense_source(uint32_t *t, zp_slotmap **next)
{
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 0);
    zt_hello(z, 0);
    *t = zt_declare(z, 0, "w", 100, 1.0);
    zp_slotmap *d = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", 100, 0, 50, 1, next, err, sizeof(err)), 0);
    zp_slotmap_destroy(&d);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_BEGIN, 1, *next, 0)->h->error, 0);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_FREEZE, 1, NULL, 0)->h->error, 0);
    return z;
}

/* A dense move's cut-over parks the writes of its pieces once each: two
 * pushes of one worker (seqs 1, 2) are both parked, the resend of the
 * first is not parked again, and the abort answers each of the two once,
 * with EMOVED naming the source. */
START_TEST(test_dense_parked_once)
{
    uint32_t t;
    zp_slotmap *next = NULL;
    zt_shard *z = frozen_dense_source(&t, &next);
    ck_assert_int_eq(dense_push(z, t, 1), 0);
    ck_assert_int_eq(dense_push(z, t, 2), 0);
    ck_assert_int_eq(dense_push(z, t, 1), 0); /* a resend of seq 1 */
    ck_assert_uint_eq(z->s->move->nparked, 2);
    int before = z->n;
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_ABORT, 1, NULL, 0)->h->error, 0);
    ck_assert_int_eq(z->n - before, 3); /* the two parked, then ABORT's */
    for (int k = 0; k < 2; k++) {
        const Zeps__Header *h = z->r[before + k].h;
        ck_assert_int_eq(h->error, ZEPS_EMOVED);
        ck_assert_uint_eq(h->seq, (uint64_t)k + 1);
    }
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

/* A map cutting a dense piece of 4 MiB in two on the shard that holds it
 * is taken (both parts here, values kept), and the record it replaced is
 * freed: the heap grows by far less than the piece. */
START_TEST(test_cut_frees_old_piece)
{
    const uint64_t len = 2u << 20; /* shard 0 holds [0, len / 2): 4 MiB */
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 0);
    zt_hello(z, 0);
    zt_declare(z, 0, "w", len, 1.0);
    zp_slotmap *d = NULL, *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", len, len / 4, len / 2, 0, &m, err, sizeof(err)),
                     0);
    size_t wl = zp_slotmap_wire_size(m);
    uint8_t *wire = malloc(wl);
    zp_slotmap_encode(m, wire);
    uint32_t before_tables = z->s->ntables;
    size_t before = zt_heap_used();
    ck_assert_int_eq(slots(z, wire, wl)->h->error, 0);
    size_t after = zt_heap_used();
    ck_assert_uint_eq(z->s->ntables, before_tables + 1); /* [0, len/4) and [len/4, len/2) */
    ck_assert_msg(after < before + len, "the cut grew the heap by %zu bytes (the piece: %zu)",
                  after - before, (size_t)(len / 2 * sizeof(float)));
    free(wire);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    zt_shard_free(z);
}
END_TEST

/* A dense write parked in the cut-over and answered EMOVED by the abort:
 * a late copy of its seq (a retry sent while it was parked) is a
 * duplicate, not applied, though the piece is this shard's again; the
 * client's resend under a new seq is applied once. */
START_TEST(test_dense_late_copy_after_abort)
{
    uint32_t t;
    zp_slotmap *next = NULL;
    zt_shard *z = frozen_dense_source(&t, &next);
    ck_assert_int_eq(dense_push(z, t, 1), 0); /* parked */
    int before = z->n;
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_ABORT, 1, NULL, 0)->h->error, 0);
    ck_assert_int_eq(z->r[before].h->error, ZEPS_EMOVED);
    ck_assert_int_eq(dense_push(z, t, 1), 1); /* the late copy */
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PUSH);
    ck_assert_msg(zt_last(z)->h->flags & ZP_FLAG_DUPLICATE, "a late copy applied");
    ck_assert_int_eq(dense_push(z, t, 2), 1); /* the client's resend */
    ck_assert_msg(zt_last(z)->h->op == ZEPS__OP__PUSH &&
                      !(zt_last(z)->h->flags & ZP_FLAG_DUPLICATE),
                  "the resend: op %d error %d %s", zt_last(z)->h->op, zt_last(z)->h->error,
                  zt_last(z)->h->error_text ? zt_last(z)->h->error_text : "");
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 4, 0), 1);
    const float *v = zt_last(z)->data;
    for (int i = 0; i < 4; i++)
        ck_assert_msg(v[i] == 0.0f, "element %d: %g: the push applied %g times", i, (double)v[i],
                      1.0 - (double)v[i]); /* from 1, lr 1, g 1 */
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"move",
         0,
         {test_parked_commit, test_parked_abort, test_foreign_map_mid_import, test_clock_brings_map,
          test_put_parked, test_rows_left, test_import_counted, test_held_page_room,
          test_held_drop_frees, test_dense_parked_once, test_cut_frees_old_piece,
          test_dense_late_copy_after_abort}},
    };
    return zt_run_cases("move", cases, sizeof(cases) / sizeof(cases[0]));
}
