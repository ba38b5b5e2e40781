/*
 * scan.c - SCAN and PUT: a table read or written page by page with its
 * optimizer state, so a program can keep a model itself (export it, serve
 * it without zeps, load it into another cluster of any shard count).
 *
 * Both ops move one layout each way (docs/protocol.md, "SCAN and PUT"):
 * a sparse table's rows as the snapshot's row records (id, version,
 * touches, last clock, values, state: table/rows.c packs both), a dense
 * slice's range as its values followed by the optimizer's state blocks cut
 * to the range (table/table.c). SCAN reads what is there now (never
 * parked); PUT writes at once, outside BSP rounds and staleness rules,
 * counts as one update (the version moves on) and is applied once per
 * (worker, seq) like a push. Everything a PUT carries is checked before
 * anything is written; a page is bounded by max_message_mb.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "finite.h"
#include "move.h"
#include "ops.h"
#include "server.h"
#include "sparse_hash.h"
#include "tiered.h"
#include "zeps_errors.h"

/* Most rows or elements one SCAN or PUT may name (as a sparse PULL). */
#define ZP_SCAN_MAX_COUNT (1u << 24)

/* Room for the reply header beside a page under max_message_mb. */
#define ZP_SCAN_HEADER_ROOM 4096u

static void free_page(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Floats of optimizer state t keeps per value. */
static uint32_t state_per_value(const zp_table *t)
{
    return t->rows ? (uint32_t)zp_sparse_state_per_value(t->rows->store)
                   : (uint32_t)t->opt->state_per_param;
}

/* Bytes of one unit of a page: a row record, or a dense element with its
 * state. */
static uint64_t unit_bytes(const zp_table *t)
{
    uint32_t spv = state_per_value(t);
    return t->rows ? ZP_SNAP_ROW_LEN(t->rows->dim, spv) : 4u * (1u + (uint64_t)spv);
}

/* The count of a SCAN or PUT: 1 to ZP_SCAN_MAX_COUNT; 0, or -1 after
 * replying ERANGE. */
static int checked_count(zp_server *s, zp_request *r, const zp_table *t)
{
    const Zeps__Header *h = r->h;
    if (h->count >= 1 && h->count <= ZP_SCAN_MAX_COUNT)
        return 0;
    zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                   "%s of table '%s' names %" PRIu64 " %s; 1 to %u per request",
                   zp_wire_op_name(h->op), t->name, h->count, t->rows ? "rows" : "elements",
                   ZP_SCAN_MAX_COUNT);
    return -1;
}

/* Send a page of n units from buf (the reply takes buf) starting at the
 * request's offset, continuing at `cursor` (0: done). */
static void send_page(zp_server *s, zp_request *r, zp_table *t, uint8_t *buf, uint64_t n,
                      uint64_t cursor)
{
    Zeps__Header rep;
    zp_reply_init(s, r->h, &rep);
    rep.offset = r->h->offset;
    rep.count = n;
    rep.cursor = cursor;
    rep.data_version = t->version;
    rep.state_per_value = state_per_value(t);
    t->stats.scans++;
    zp_reply_send(s, r->identity, &rep, buf, n * unit_bytes(t), free_page, NULL);
}

/* The rows of the sparse table t from the request's cursor (a record
 * number; 0: the first); with a cold tier, its rows follow the hot ones
 * (cursors from ZP_TIERED_CURSOR on, tiered.h). */
static void scan_rows(zp_server *s, zp_request *r, zp_table *t, uint64_t max)
{
    const Zeps__Header *h = r->h;
    uint64_t end = zp_sparse_records(t->rows->store);
    bool cold = t->rows->tier != NULL && h->offset >= ZP_TIERED_CURSOR;
    if (h->offset > end && !cold) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "SCAN of sparse table '%s': cursor %" PRIu64 " is past the end of its "
                       "rows on shard %d (%" PRIu64 "); a cursor is 0 or what the previous page "
                       "answered",
                       t->name, h->offset, s->shard, end);
        return;
    }
    zp_sparse_counters c;
    zp_sparse_get_counters(t->rows->store, &c);
    c.rows += zp_tiered_cold_rows(t->rows);
    if (max > c.rows) /* no bigger than the rows there are */
        max = c.rows;
    uint8_t *buf = malloc(max ? max * unit_bytes(t) : 1);
    if (!buf) {
        zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                       "cannot allocate a page of %" PRIu64 " rows of table '%s'", max, t->name);
        return;
    }
    uint64_t cursor = h->offset;
    uint64_t n = cold ? 0 : zp_rows_scan(t->rows, &cursor, max, buf);
    if (t->rows->tier != NULL && (cold || cursor == 0)) { /* the hot rows, then the cold ones */
        if (!cold)
            cursor = ZP_TIERED_CURSOR;
        int64_t more = zp_tiered_scan(t->rows, &cursor, max - n, buf + n * unit_bytes(t));
        if (more < 0) {
            free(buf);
            zp_reply_error(s, r->identity, h, ZEPS_EIO, "SCAN of sparse table '%s': %s", t->name,
                           zp_tiered_error(t->rows));
            return;
        }
        n += (uint64_t)more;
    }
    send_page(s, r, t, buf, n, cursor);
}

/* The elements of dense t's pieces from the request's offset (a global
 * index inside one of them; the end of t's gives an empty last page).
 * The cursor goes on from a piece's end to the next piece's begin. */
static void scan_slice(zp_server *s, zp_request *r, zp_table *t, uint64_t max)
{
    const Zeps__Header *h = r->h;
    zp_table *p = zp_request_piece_at(s, t, h->offset);
    if (p)
        t = p;
    if (!p && h->offset != t->end) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "SCAN of table '%s' at element %" PRIu64 " is outside shard %d's slice "
                       "[%" PRIu64 ", %" PRIu64 ")",
                       t->name, h->offset, s->shard, t->begin, t->end);
        return;
    }
    uint64_t n = t->end - h->offset < max ? t->end - h->offset : max;
    uint8_t *buf = malloc(n ? n * unit_bytes(t) : 1);
    if (!buf) {
        zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                       "cannot allocate a page of %" PRIu64 " elements of table '%s'", n, t->name);
        return;
    }
    zp_table_read(t, (size_t)(h->offset - t->begin), (size_t)n, (float *)buf);
    const zp_table *next = p ? zp_request_piece_after(s, t) : NULL;
    send_page(s, r, t, buf, n, h->offset + n < t->end ? h->offset + n : next ? next->begin : 0);
}

void zp_scan_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = zp_request_worker(s, r);
    zp_table *t = w ? zp_request_table(s, r) : NULL;
    if (!t)
        return;
    if (r->npayload != 0) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "SCAN of table '%s' carries no payload frame, got %d", t->name, r->npayload);
        return;
    }
    if (checked_count(s, r, t) != 0)
        return;
    uint64_t unit = unit_bytes(t), room = s->cfg.max_message_bytes;
    uint64_t fit = room > ZP_SCAN_HEADER_ROOM ? (room - ZP_SCAN_HEADER_ROOM) / unit : 0;
    if (fit == 0) {
        zp_reply_error(s, r->identity, h, ZEPS_ETOOBIG,
                       "SCAN of table '%s': one %s of %" PRIu64 " bytes does not fit "
                       "max_message_mb (%" PRIu64 " bytes)",
                       t->name, t->rows ? "row" : "element", unit, room);
        return;
    }
    uint64_t max = h->count < fit ? h->count : fit; /* a page may hold fewer than asked */
    if (t->rows)
        scan_rows(s, r, t, max);
    else
        scan_slice(s, r, t, max);
}

/* The payload of a PUT as 8-byte aligned memory. */
static const uint8_t *aligned_payload(zmq_msg_t *frame)
{
    return zp_request_aligned(frame, 8);
}

/* The layout checks every PUT shares: one frame of count units of t with
 * the state t's optimizer keeps. The payload, or NULL after replying. */
static const uint8_t *checked_put(zp_server *s, zp_request *r, const zp_table *t)
{
    const Zeps__Header *h = r->h;
    if (r->npayload != 1) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "PUT to table '%s' must carry exactly one frame, got %d", t->name,
                       r->npayload);
        return NULL;
    }
    if (checked_count(s, r, t) != 0)
        return NULL;
    if (h->state_per_value != state_per_value(t)) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "PUT to table '%s' carries %u optimizer floats per value; its optimizer "
                       "%s keeps %u",
                       t->name, h->state_per_value, t->optimizer, state_per_value(t));
        return NULL;
    }
    uint64_t want = h->count * unit_bytes(t);
    if (zmq_msg_size(r->payload) != want) {
        zp_reply_error(s, r->identity, h, ZEPS_ESIZE,
                       "PUT of %" PRIu64 " %s to table '%s' carries %zu bytes, expected %" PRIu64,
                       h->count, t->rows ? "rows" : "elements", t->name, zmq_msg_size(r->payload),
                       want);
        return NULL;
    }
    return aligned_payload(r->payload);
}

/* A PUT of rows: ids of this shard, distinct, values and state finite,
 * room for the rows it makes; then every row put. 0, or -1 after
 * replying. */
static int put_rows(zp_server *s, zp_request *r, zp_table *t, const uint8_t *recs)
{
    const Zeps__Header *h = r->h;
    size_t n = (size_t)h->count;
    uint32_t dim = t->rows->dim, spv = state_per_value(t);
    uint64_t rec = unit_bytes(t);
    const uint64_t *ids = zp_rows_record_ids(t->rows, recs, n);
    ptrdiff_t bad = zp_owner_foreign(s, ids, n);
    if (bad >= 0) {
        char what[128];
        snprintf(what, sizeof(what), "PUT to sparse table '%s'", t->name);
        zp_owner_refuse(s, r->identity, h, what, ids[bad], (size_t)bad);
        return -1;
    }
    bad = zp_move_frozen(s, ids, n);
    if (bad >= 0) { /* a move's cut-over: answered at its commit or abort (op/move.c) */
        char what[96];
        snprintf(what, sizeof(what), "PUT to sparse table '%s'", t->name);
        zp_move_park(s, r->identity, h, ids[bad], (size_t)bad, what);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!zp_finite_all((const float *)(recs + i * rec + 24), (size_t)dim * (1 + spv))) {
            zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                           "PUT to sparse table '%s': row %zu (id %" PRIu64 ") holds NaN or Inf; "
                           "nothing written",
                           t->name, i, ids[i]);
            return -1;
        }
    }
    ptrdiff_t rep = zp_rows_repeated(t->rows, ids, n);
    if (rep >= 0) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "PUT to sparse table '%s' names id %" PRIu64 " twice (row %td)", t->name,
                       ids[rep], rep);
        return -1;
    }
    if (!zp_sparse_ops_room(s, r, t, ids, n))
        return -1;
    zp_rows_put(t->rows, recs, n);
    zp_move_note(s, t, ids, n); /* a moving row changed: it is sent again */
    return 0;
}

/* A PUT of dense elements [offset, offset + count) of the slice, values
 * and state finite. 0, or -1 after replying. */
static int put_slice(zp_server *s, zp_request *r, zp_table **tp, const uint8_t *data)
{
    const Zeps__Header *h = r->h;
    if (zp_request_range(s, r, tp) != 0) /* *tp: the piece it lands in */
        return -1;
    zp_table *t = *tp;
    if (!zp_finite_all((const float *)data, (size_t)h->count * (1 + state_per_value(t)))) {
        zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                       "PUT to table '%s' holds NaN or Inf; nothing written", t->name);
        return -1;
    }
    zp_table_write(t, (size_t)(h->offset - t->begin), (size_t)h->count, (const float *)data);
    return 0;
}

void zp_scan_on_put(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_worker *w = zp_request_worker(s, r);
    zp_table *t = w ? zp_request_table(s, r) : NULL;
    if (!t)
        return;
    if (zp_workers_seen(w, h->seq)) { /* a resend: an older write must not come back */
        w->duplicates++;
        zp_reply_ok(s, r->identity, h, ZP_FLAG_DUPLICATE);
        return;
    }
    const uint8_t *data = checked_put(s, r, t);
    if (!data)
        return;
    if ((t->rows ? put_rows(s, r, t, data) : put_slice(s, r, &t, data)) != 0)
        return;
    zp_workers_record(w, h->seq);
    zp_table_after_put(t, h->data_version);
    t->stats.puts++;
    zp_reply_ok(s, r->identity, h, 0);
}
