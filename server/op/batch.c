/*
 * batch.c - a bsp round entry on a backup (docs/replication.md,
 * "Replication after aggregation"; the entry's layout is repl/rbatch.h).
 *
 * The primary logged a run of dense bsp pushes as one entry: each push's
 * request header without its values (and the CLOCKs handled among them),
 * and the sum of each round one of them closed, as the primary applied it. Each push is handled
 * here as a request of its own, in the order the primary applied them, through zp_push_on
 * (zp_request.phantom: no values frame): the same checks, the same duplicate window, clocks,
 * counters and histograms; the round holds the push without values, and the push that closed its
 * round on the primary closes it here on the primary's sum (zp_round_give), scaled by the same
 * count. So the backup reaches the primary's bits without receiving every worker's gradient.
 * A sparse push comes without its rows too: the round holds it without rows, and the request that
 * closed sparse rounds on the primary (a CLOCK, or a push carrying the clock) comes with each
 * round's merge as applied, given to the table before it is replayed, so its clock closes those
 * rounds here on the primary's merge (zp_rround_give).
 * Entries come only from the primary this replica follows (dispatch.c refuses ZP_FLAG_ROUND from
 * anyone else); a malformed one is refused whole before any push is replayed.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "log.h"
#include "ops.h"
#include "rbatch.h"
#include "server.h"
#include "zeps_errors.h"

/* The rows of an entry (rp, rlen): the merges at `at` are whole,
 * of sparse tables of this shard with their dim. 0, or a zeps_err with a
 * message. */
static int check_rows(zp_server *s, const uint8_t *rp, size_t rlen, uint64_t at, char *err,
                      size_t errlen)
{
    size_t off = (size_t)at;
    uint32_t count;
    zp_rbatch_rec rec;
    if (at > rlen || zp_rbatch_rows_group(rp, rlen, &off, &count) != 0 || count == 0)
        return snprintf(err, errlen,
                        "a round entry's sparse rounds at byte %" PRIu64
                        " lie outside its %zu bytes of rows",
                        at, rlen),
               ZEPS_ESIZE;
    for (uint32_t i = 0; i < count; i++) {
        if (zp_rbatch_rec_read(rp, rlen, &off, &rec) != 0)
            return snprintf(err, errlen, "a round entry's sparse round at byte %zu is cut short",
                            off),
                   ZEPS_ESIZE;
        if (rec.table >= s->ntables || !s->tables[rec.table]->rows ||
            s->tables[rec.table]->rows->dim != rec.dim)
            return snprintf(err, errlen,
                            "a round entry's sparse round names table %u of dim %u, not a "
                            "sparse table of that dim here",
                            rec.table, rec.dim),
                   ZEPS_ETABLE;
    }
    return 0;
}

/* One push (or CLOCK) of the entry, h (parsed from view v): a dense table
 * with its sum inside the sums frame, or a sparse table; its sparse rounds
 * whole. 0, or a zeps_err with a message. */
static int check_item(zp_server *s, const zp_rbatch_view *v, const Zeps__Header *h, size_t nsum,
                      const uint8_t *rows, size_t rlen, char *err, size_t errlen)
{
    bool clock = h->op == ZEPS__OP__CLOCK && (h->flags & ~ZP_FLAG_MAP) == 0 && !v->closes;
    if (!clock && (h->op != ZEPS__OP__PUSH || (h->flags & ZP_FLAG_ROUND)))
        return snprintf(err, errlen, "a round entry carries a request that is no push or CLOCK"),
               ZEPS_EPROTO;
    if (v->has_rows && !rows)
        return snprintf(err, errlen, "a round entry names sparse rounds it lacks"), ZEPS_EPROTO;
    int rc = v->has_rows ? check_rows(s, rows, rlen, v->rows_at, err, errlen) : 0;
    if (rc != 0 || clock)
        return rc;
    const zp_table *t = h->table < s->ntables ? s->tables[h->table] : NULL;
    if (!t)
        return snprintf(err, errlen, "a round entry's push names table %u, not a table here",
                        h->table),
               ZEPS_ETABLE;
    if (t->rows && (v->closes || h->count == 0 || h->count > (1u << 24)))
        return snprintf(err, errlen,
                        "a round entry's push to sparse table %u names %" PRIu64 " rows%s",
                        h->table, h->count, v->closes ? " and a sum" : ""),
               ZEPS_EPROTO;
    if (!t->rows && v->closes && (v->sum_at > nsum || nsum - v->sum_at < t->n))
        return snprintf(err, errlen, "a round entry's sum for table %u lies outside its %zu floats",
                        h->table, nsum),
               ZEPS_ESIZE;
    return 0;
}

/* Check the `count` items of the entry before replaying any; *end: where
 * they end. 0, or a zeps_err with a message. */
static int check_items(zp_server *s, const uint8_t *p, size_t len, uint64_t count, size_t nsum,
                       size_t *end, char *err, size_t errlen)
{
    size_t off = 0;
    zp_rbatch_view v;
    for (uint64_t i = 0; i < count; i++)
        if (zp_rbatch_read(p, len, &off, &v) != 0)
            return snprintf(err, errlen, "a round entry's push at byte %zu is cut short", off),
                   ZEPS_EPROTO;
    *end = off;
    size_t rstart = zp_rbatch_rows_start(off);
    const uint8_t *rows = rstart < len ? p + rstart : NULL;
    size_t rlen = rows ? len - rstart : 0;
    off = 0;
    for (uint64_t i = 0; i < count; i++) {
        zp_rbatch_read(p, len, &off, &v);
        Zeps__Header *h = zeps__header__unpack(NULL, v.header_len, v.header);
        int rc = h ? check_item(s, &v, h, nsum, rows, rlen, err, errlen)
                   : (snprintf(err, errlen, "a round entry carries a header that does not parse"),
                      ZEPS_EPROTO);
        if (h)
            zeps__header__free_unpacked(h, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/* Give the merges of the sparse rounds an item closed on the primary
 * (rows frame rp, rlen, aligned to 8; checked) to their tables. */
static void give_rows(zp_server *s, const uint8_t *rp, size_t rlen, uint64_t at)
{
    size_t off = (size_t)at;
    uint32_t count = 0;
    zp_rbatch_rec rec;
    zp_rbatch_rows_group(rp, rlen, &off, &count);
    for (uint32_t i = 0; i < count && zp_rbatch_rec_read(rp, rlen, &off, &rec) == 0; i++) {
        zp_table *t = s->tables[rec.table];
        if (zp_rround_give(&t->rows->held, rec.clock, (const uint64_t *)(const void *)rec.ids,
                           (size_t)rec.n, (const float *)(const void *)rec.g, rec.dim,
                           (const uint32_t *)(const void *)rec.vers) != 0)
            zp_error("table '%s': no memory for round %" PRId64 " as its primary applied it",
                     t->name, rec.clock);
    }
}

/* After an item that carried sparse rounds: a merge no round took means
 * the rounds did not close here where they closed on the primary. */
static void given_left(zp_server *s, const Zeps__Header *h)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        if (t->rows && zp_rround_given_clear(&t->rows->held) > 0)
            zp_error("table '%s': the %s of worker %u (seq %" PRIu64 ") closed a sparse round on "
                     "the primary but not here; this replica no longer holds its primary's "
                     "values",
                     t->name, zp_wire_op_name(h->op), h->rank, h->seq);
    }
}

/* Replay one push (its sum given when it closed its round) or CLOCK, the
 * merges of the sparse rounds it closed given first; 1 for a push. */
static int replay(zp_server *s, zp_request *r, const zp_rbatch_view *v, const float *sums,
                  const uint8_t *rows, size_t rlen)
{
    Zeps__Header *h = zeps__header__unpack(NULL, v->header_len, v->header);
    if (v->has_rows)
        give_rows(s, rows, rlen, v->rows_at);
    int push = h->op != ZEPS__OP__CLOCK;
    zp_table *t = push ? s->tables[h->table] : NULL;
    zp_request one = {.identity = r->identity, .h = h, .phantom = push, .wire = v->wire};
    if (v->closes)
        zp_round_give(&t->round, sums + v->sum_at);
    if (push)
        zp_push_on(s, &one);
    else /* a CLOCK handled among the round's pushes */
        zp_clock_on_clock(s, &one);
    if (v->closes && t->round.given) { /* the round did not close where the primary's did */
        zp_round_give(&t->round, NULL);
        zp_error("table '%s': the push of worker %u (seq %" PRIu64 ") closed round %" PRId64
                 " on the primary but not here; this replica no longer holds its primary's "
                 "values",
                 t->name, h->rank, h->seq, h->clock);
    }
    if (v->has_rows)
        given_left(s, h);
    zeps__header__free_unpacked(h, NULL);
    return push;
}

void zp_batch_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    char err[256];
    if (!s->applying || r->npayload != 2 || !s->cons->rounds) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "a bsp round entry comes only from the primary's log, under bsp");
        return;
    }
    size_t nsum = zmq_msg_size(&r->payload[1]) / sizeof(float);
    const float *sums = nsum ? zp_request_aligned(&r->payload[1], 4) : NULL;
    const uint8_t *p = zp_request_aligned(&r->payload[0], 8); /* the rows' ids: u64 */
    size_t len = zmq_msg_size(&r->payload[0]), end = 0;
    int rc = check_items(s, p, len, h->count, nsum, &end, err, sizeof(err));
    if (rc != 0) {
        zp_error("replication: %s; entry not applied", err);
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    size_t rstart = zp_rbatch_rows_start(end);
    const uint8_t *rows = rstart < len ? p + rstart : NULL;
    size_t rlen = rows ? len - rstart : 0, off = 0;
    zp_rbatch_view v;
    uint64_t n = 0;
    for (uint64_t i = 0; i < h->count && zp_rbatch_read(p, len, &off, &v) == 0; i++)
        n += (uint64_t)replay(s, r, &v, sums, rows, rlen);
    s->repl.round_entries++;
    s->repl.round_pushes += n;
    zp_reply_ok(s, r->identity, h, 0);
}
