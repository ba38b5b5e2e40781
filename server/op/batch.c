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

/* Check every push of the entry before replaying any: headers that parse,
 * dense tables of this shard, sums inside the sums frame. 0, or a zeps_err
 * with a message. */
static int check_items(zp_server *s, const uint8_t *p, size_t len, size_t nsum, char *err,
                       size_t errlen)
{
    size_t off = 0;
    zp_rbatch_view v;
    while (off < len) {
        if (zp_rbatch_read(p, len, &off, &v) != 0)
            return snprintf(err, errlen, "a round entry's push at byte %zu is cut short", off),
                   ZEPS_EPROTO;
        Zeps__Header *h = zeps__header__unpack(NULL, v.header_len, v.header);
        int rc = 0;
        bool clock = h && h->op == ZEPS__OP__CLOCK && h->flags == 0 && !v.closes;
        if (!h || (!clock && (h->op != ZEPS__OP__PUSH || (h->flags & ZP_FLAG_ROUND))))
            rc = ZEPS_EPROTO,
            snprintf(err, errlen, "a round entry carries a request that is no push or CLOCK");
        else if (clock)
            rc = 0;
        else if (h->table >= s->ntables || s->tables[h->table]->rows)
            rc = ZEPS_ETABLE,
            snprintf(err, errlen, "a round entry's push names table %u, not a dense table here",
                     h->table);
        else if (v.closes && (v.sum_at > nsum || nsum - v.sum_at < s->tables[h->table]->n))
            rc = ZEPS_ESIZE,
            snprintf(err, errlen, "a round entry's sum for table %u lies outside its %zu floats",
                     h->table, nsum);
        if (h)
            zeps__header__free_unpacked(h, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/* Replay one push (its sum given when it closed its round) or CLOCK; 1 for
 * a push. */
static int replay(zp_server *s, zp_request *r, const zp_rbatch_view *v, const float *sums)
{
    Zeps__Header *h = zeps__header__unpack(NULL, v->header_len, v->header);
    if (h->op == ZEPS__OP__CLOCK) { /* a CLOCK handled among the round's pushes */
        zp_request one = {.identity = r->identity, .h = h};
        zp_clock_on_clock(s, &one);
        zeps__header__free_unpacked(h, NULL);
        return 0;
    }
    zp_table *t = s->tables[h->table];
    zp_request one = {.identity = r->identity, .h = h, .phantom = true, .wire = v->wire};
    if (v->closes)
        zp_round_give(&t->round, sums + v->sum_at);
    zp_push_on(s, &one);
    if (v->closes && t->round.given) { /* the round did not close where the primary's did */
        zp_round_give(&t->round, NULL);
        zp_error("table '%s': the push of worker %u (seq %" PRIu64 ") closed round %" PRId64
                 " on the primary but not here; this replica no longer holds its primary's "
                 "values",
                 t->name, h->rank, h->seq, h->clock);
    }
    zeps__header__free_unpacked(h, NULL);
    return 1;
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
    zmq_msg_t *items = &r->payload[0];
    size_t nsum = zmq_msg_size(&r->payload[1]) / sizeof(float);
    const float *sums = nsum ? zp_request_aligned(&r->payload[1], 4) : NULL;
    const uint8_t *p = zmq_msg_data(items);
    size_t len = zmq_msg_size(items);
    int rc = check_items(s, p, len, nsum, err, sizeof(err));
    if (rc != 0) {
        zp_error("replication: %s; entry not applied", err);
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return;
    }
    size_t off = 0;
    zp_rbatch_view v;
    uint64_t n = 0;
    while (off < len && zp_rbatch_read(p, len, &off, &v) == 0)
        n += replay(s, r, &v, sums);
    s->repl.round_entries++;
    s->repl.round_pushes += n;
    zp_reply_ok(s, r->identity, h, 0);
}
