/*
 * sparse_ops.c - PULL and PUSH of sparse tables on a shard (entered from
 * pull.c and push.c once the worker and the table are checked).
 *
 * Frames (docs/protocol.md, "Sparse tables"): a PULL carries `count` ids as
 * little-endian u64; its reply carries count * dim f32 values (row i for id i)
 * followed by count u32 row versions. A PUSH carries the ids, then count *
 * dim f32 gradients, then, with ZP_FLAG_ROW_VERSIONS, the u32 row versions
 * the gradients were computed from (so tau is measured per row). Ids must
 * belong to this shard (its slot map, owner.c: EMOVED otherwise) and be distinct within a push
 * (the client library sums repeated ids first); gradients must be finite.
 * Everything is checked before any row is touched.
 *
 * When is the policy's: its rows_pull_ready hook holds pulls, its push_rows
 * hook applies the rows (under `weighted`, each row scaled by the weight of
 * its own staleness) or, under bsp, holds a copy for their round
 * (policy/bsp.c, docs/sparse.md "Consistency"). This file checks, records
 * and replies; the rows and the scratch are table/rows.c's. A replicated
 * primary logs a push held for its bsp round with the round, without its
 * rows (repl/rbatch.h); a backup replays it so (zp_request.phantom), its
 * round's merge given by the entry (op/batch.c).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "codec.h"
#include "errors.h"
#include "fetch.h"
#include "handover.h"
#include "finite.h"
#include "log.h"
#include "move.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "sparse_hash.h"
#include "tiered.h"
#include "zeps_errors.h"

/* Most ids one request may name (16 Mi: 128 MiB of ids). */
#define ZP_SPARSE_MAX_KEYS (1 << 24)

static void free_reply(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Whether t's cold tier (if any) works; else replies EIO naming it. A
 * tier that failed once refuses every request of its table: a row it
 * could not write or read back is not served from its initializer. */
static bool tier_ok(zp_server *s, zmq_msg_t *identity, const Zeps__Header *h, const zp_table *t)
{
    const char *why = zp_tiered_error(t->rows);
    if (why == NULL)
        return true;
    zp_reply_error(s, identity, h, ZEPS_EIO, "%s of sparse table '%s' refused: %s",
                   zp_wire_op_name(h->op), t->name, why);
    return false;
}

/* Send the rows of ids[0..n) to rank's `identity` as the reply to req_id
 * (under cluster.inject, rows as the schedule serves them, in turns by
 * round: turns.c). */
static void send_rows(zp_server *s, zmq_msg_t *identity, uint64_t req_id, zp_table *t,
                      uint32_t rank, int64_t clock, const uint64_t *ids, size_t n, double wait_us)
{
    zp_hist_add_log2(&t->stats.pull_wait_us, (uint64_t)wait_us);
    size_t dim = t->rows->dim;
    size_t len = n * (dim + 1) * sizeof(float);
    float *buf = malloc(len);
    Zeps__Header req;
    zeps__header__init(&req);
    req.op = ZEPS__OP__PULL;
    req.req_id = req_id;
    req.table = t->id;
    if (!buf) {
        zp_reply_error(s, identity, &req, ZEPS_ENOMEM, "cannot allocate %zu bytes for %zu rows",
                       len, n);
        return;
    }
    uint32_t *versions = (uint32_t *)(buf + n * dim);
    zp_move_note(s, t, ids, n); /* a touch: a moving row is sent again */
    zp_sparse_pull(t->rows->store, ids, n, clock, buf, versions);
    if (!tier_ok(s, identity, &req, t)) { /* the rows it could not bring are not answered */
        free(buf);
        return;
    }
    if (s->cons->rows_past) /* bsp: a worker redoing a round */
        s->cons->rows_past(s, t, clock, ids, n, buf, versions);
    zp_turns_rows(s, t, rank, ids, n, buf, versions);
    zp_turns_take(s, t, rank);
    Zeps__Header rep;
    zp_reply_init(s, NULL, &rep);
    rep.op = ZEPS__OP__PULL;
    rep.req_id = req_id;
    rep.table = t->id;
    rep.count = n;
    rep.data_version = t->version; /* pushes applied to the table on this shard */
    rep.clock = s->workers.min_clock;
    t->stats.pulls++;
    t->stats.keys_pulled += n;
    zp_reply_send(s, identity, &rep, buf, len, free_reply, NULL); /* takes buf */
}

/* Checks shared by PULL and PUSH: one payload frame of `bytes` (or, with
 * `at_least`, more than that), 1 to ZP_SPARSE_MAX_KEYS ids, all of this
 * shard. Returns the ids or NULL after replying with an error. */
static const uint64_t *checked_ids(zp_server *s, zp_request *r, zp_table *t, size_t bytes,
                                   bool at_least)
{
    const Zeps__Header *h = r->h;
    const char *op = zp_wire_op_name(h->op);
    if (r->npayload != 1) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "%s of sparse table '%s' must carry exactly one frame, got %d", op, t->name,
                       r->npayload);
        return NULL;
    }
    if (h->count == 0 || h->count > ZP_SPARSE_MAX_KEYS) {
        zp_reply_error(s, r->identity, h, ZEPS_ERANGE,
                       "%s of sparse table '%s' names %" PRIu64 " ids; 1 to %d per request", op,
                       t->name, h->count, ZP_SPARSE_MAX_KEYS);
        return NULL;
    }
    size_t len = zmq_msg_size(r->payload);
    if (at_least ? len <= bytes : len != bytes) {
        zp_reply_error(s, r->identity, h, ZEPS_ESIZE,
                       "%s of %" PRIu64 " ids to sparse table '%s' (dim %u) carries %zu bytes, "
                       "expected %s%zu",
                       op, h->count, t->name, t->rows->dim, len, at_least ? "more than " : "",
                       bytes);
        return NULL;
    }
    const uint64_t *ids = zp_rows_ids(t->rows, zmq_msg_data(r->payload), (size_t)h->count);
    ptrdiff_t bad = zp_owner_foreign(s, ids, (size_t)h->count);
    if (bad >= 0) {
        char what[128];
        snprintf(what, sizeof(what), "%s of sparse table '%s'", op, t->name);
        zp_owner_refuse(s, r->identity, h, what, ids[bad], (size_t)bad);
        return NULL;
    }
    bad = zp_move_frozen(s, ids, (size_t)h->count);
    /* a push where the mode holds pushes in rounds, before the last page:
     * held as any, and its rows of the slots handed over (on_push) */
    bool held = h->op == ZEPS__OP__PUSH && s->cons->rows_handed && s->move && !s->move->drained;
    if (bad >= 0 && !held) { /* a move's cut-over: answered at its commit or abort (op/move.c) */
        char what[96];
        snprintf(what, sizeof(what), "%s of sparse table '%s'", op, t->name);
        zp_move_park(s, r->identity, h, ids[bad], (size_t)bad, what);
        return NULL;
    }
    return ids;
}

/* Whether `bytes` of rows (a pull's reply, a compressed push decoded) fit
 * max_message_mb; replies ETOOBIG if not. Ids are small, rows need not be:
 * without this, 8 bytes of id could ask for 16 KiB of rows (dim 4096). */
static bool rows_fit(zp_server *s, zp_request *r, const zp_table *t, uint64_t bytes)
{
    if (bytes <= s->cfg.max_message_bytes)
        return true;
    zp_reply_error(s, r->identity, r->h, ZEPS_ETOOBIG,
                   "%s of %" PRIu64 " rows of sparse table '%s' (dim %u) is %" PRIu64
                   " bytes of rows, over max_message_mb (%" PRIu64 " bytes); use smaller batches",
                   zp_wire_op_name(r->h->op), r->h->count, t->name, t->rows->dim, bytes,
                   s->cfg.max_message_bytes);
    return false;
}

/* Whether the rows the ids would create fit the shard's limits
 * (state/quota.c); false after replying ENOMEM. A parked pull was checked
 * when it arrived. */
static bool rows_room(zp_server *s, zp_request *r, const zp_table *t, const uint64_t *ids, size_t n)
{
    char err[512];
    if (zp_quota_room_for(&s->quota, s->tables, s->ntables, t, n))
        return true; /* even if every id is new: no lookups */
    uint64_t fresh = zp_quota_new_rows(t, ids, n);
    if (fresh == 0 || zp_quota_check_rows(&s->quota, s->tables, s->ntables, t, fresh, s->shard, err,
                                          sizeof(err)) == 0)
        return true;
    zp_reply_error(s, r->identity, r->h, ZEPS_ENOMEM, "%s", err);
    return false;
}

bool zp_sparse_ops_room(zp_server *s, zp_request *r, const zp_table *t, const uint64_t *ids,
                        size_t n)
{
    return rows_room(s, r, t, ids, n);
}

/* Whether parked pull p names a row of a move's slots in its cut-over:
 * their held bsp pushes are handed over, so the source's rows may miss a
 * round; it is answered at the commit (EMOVED) or the abort. */
static bool frozen_rows(const zp_server *s, const zp_table *t, const zp_parked *p)
{
    if (!s->move || !s->move->frozen || !p->has_keys)
        return false;
    const uint64_t *ids =
        zp_rows_ids(t->rows, zmq_msg_data((zmq_msg_t *)&p->keys), (size_t)p->count);
    return zp_move_frozen(s, ids, (size_t)p->count) >= 0;
}

static bool rows_ready(const zp_server *s, const zp_table *t, const zp_parked *p)
{
    return p->cold_tag == 0 && s->cons->rows_pull_ready(s, t, p->rank, p->clock) &&
           zp_turns_rows_mine(s, t, p->rank, p->clock) && !frozen_rows(s, t, p);
}

static void rows_serve(zp_server *s, zp_table *t, zp_parked *p)
{
    const uint64_t *ids = zp_rows_ids(t->rows, zmq_msg_data(&p->keys), (size_t)p->count);
    send_rows(s, &p->identity, p->req_id, t, p->rank, p->clock, ids, (size_t)p->count,
              (zp_now_s() - p->since_s) * 1e6);
}

static const zp_parked_path rows_path = {.ready = rows_ready, .serve = rows_serve};

/* ------------------------------------------------------- cold rows
 *
 * A pull of a table with a cold tier whose ids are not all hot is parked
 * while libuv's pool reads the others (one MultiGet, tier/fetch.c); the
 * shard serves other requests meanwhile. When the read is in, its rows are
 * made hot (untouched) and the pull is served as any parked one, with its
 * touches then. A row evicted again before that, or written while it was
 * read, is read on the loop at the touch (counted: tier_sync_reads), so
 * the answer is always exact. Pushes do not wait: their rows are usually
 * hot (the pull before them brought them). A fetch's tag is the table's
 * id above bit 40 and its count of fetches below. */

#define TAG_SHIFT 40
/* Ids a cold read takes at most (one batched MultiGet call of the store,
 * tier/rocks.h): a pull's cold ids are read in pieces, each made hot in a
 * loop turn of its own as it comes back, so the loop serves other
 * requests between them (docs/sparse.md, acceptance 4). */
#define PIECE 256

/* A parked pull answered: its rank has one fewer waiting; free it. */
static void unpark(zp_server *s, zp_parked *p)
{
    if (p->rank < (uint32_t)s->nworkers && s->workers.w[p->rank].parked > 0)
        s->workers.w[p->rank].parked--;
    zp_parked_free(p);
}

/* Back on the loop: the rows read made hot, their pulls served if ready. */
static void cold_fetched(zp_fetch *f, void *arg)
{
    zp_server *s = arg;
    uint64_t tag = zp_fetch_tag(f);
    zp_table *t = s->tables[tag >> TAG_SHIFT];
    bool stale =
        (tag & ((1ull << TAG_SHIFT) - 1)) <= (t->rows->fetch_floor & ((1ull << TAG_SHIFT) - 1));
    for (size_t i = 0; i < zp_fetch_count(f) && !stale; i++) {
        const void *rec = zp_fetch_record(f, i);
        if (rec != NULL)
            zp_sparse_install(t->rows->store, zp_fetch_id(f, i), rec);
    }
    if (zp_fetch_error(f) != NULL) /* the touches read again and stop the tier if it fails */
        zp_warn("table '%s': a cold read failed: %s", t->name, zp_fetch_error(f));
    for (zp_parked *p = t->parked.head; p != NULL; p = p->next)
        if (p->cold_tag == tag && --p->cold_pieces == 0)
            p->cold_tag = 0;
    /* the ids read and found nowhere are new while nothing else runs: the
     * pulls served now make their rows without reading them again */
    size_t nabs = 0;
    uint64_t *abs = zp_alloc((zp_fetch_count(f) + 1) * sizeof(uint64_t));
    for (size_t i = 0; i < zp_fetch_count(f) && !stale; i++)
        if (zp_fetch_absent(f, i))
            abs[nabs++] = zp_fetch_id(f, i);
    zp_sparse_hint_absent(t->rows->store, abs, nabs);
    free(abs);
    zp_fetch_free(&f);
    zp_parked *p;
    while ((p = zp_parked_take_ready(&t->parked, s, t))) {
        p->path->serve(s, t, p);
        unpark(s, p);
    }
    zp_sparse_hint_absent(t->rows->store, NULL, 0);
}

/* Queue pull r of table t (its ids: a new reference to the payload) until
 * it can be served; cold_tag names the cold read it waits for (0: none). */
static void park_pull(zp_request *r, zp_worker *w, zp_table *t, uint64_t cold_tag, uint32_t pieces)
{
    const Zeps__Header *h = r->h;
    w->parked++;
    zp_parked *p = zp_parked_new(r->identity);
    p->path = &rows_path;
    zmq_msg_init(&p->keys);
    zmq_msg_copy(&p->keys, r->payload);
    p->has_keys = true;
    p->req_id = h->req_id;
    p->rank = h->rank;
    p->seq = h->seq;
    p->count = h->count;
    p->clock = h->clock;
    p->since_s = zp_now_s();
    p->cold_tag = cold_tag;
    p->cold_pieces = pieces;
    zp_parked_push(&t->parked, p); /* the queue takes p */
}

/* Park pull r of tiered t if some of its ids are neither hot nor held
 * unwritten by the tier (those are made hot now) nor new to it
 * (zp_tier_may_hold: never demoted, nothing to read) and the tier holds rows,
 * while they are read in pieces of PIECE: true once parked (or refused:
 * too many waiting), false to serve it as usual. */
static bool park_cold(zp_server *s, zp_request *r, zp_worker *w, zp_table *t, const uint64_t *ids,
                      size_t n)
{
    if (!s->has_loop || zp_tiered_cold_rows(t->rows) == 0)
        return false;
    uint64_t *miss = zp_alloc(n * sizeof(uint64_t));
    void *rec = zp_alloc(zp_tier_record_bytes(t->rows->tier));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (zp_sparse_pin(t->rows->store, ids[i]))
            continue;
        /* a row demoted but not yet written comes back from RAM, at once;
         * one deleted there is not in the tier */
        int held = zp_tier_held(t->rows->tier, ids[i], rec);
        if (held > 0)
            zp_sparse_install(t->rows->store, ids[i], rec);
        else if (held == 0 && zp_tier_may_hold(t->rows->tier, ids[i]))
            miss[k++] = ids[i]; /* else a new id: its touch makes it, no read */
    }
    free(rec);
    const Zeps__Header *h = r->h;
    uint64_t tag =
        (uint64_t)t->id << TAG_SHIFT | ((t->rows->fetches + 1) & ((1ull << TAG_SHIFT) - 1));
    int rc = k == 0 ? -1 : zp_request_may_park(s, r, w);
    uint32_t pieces = 0;
    for (size_t at = 0; rc == 0 && at < k; at += PIECE, pieces++) {
        size_t m = k - at < PIECE ? k - at : PIECE;
        /* libuv refusing the work leaves the reads to the loop: the pieces
         * started still come back (and find no pull waiting for them) */
        if (zp_fetch_start(&s->loop, t->rows->tier, miss + at, m, tag, cold_fetched, s) != 0)
            rc = -1;
    }
    free(miss);
    if (pieces > 0)
        t->rows->fetches++; /* the tag is taken, even by the pieces of a park that failed */
    /* all hot, or no fetch: served as usual, unless refused (replied) */
    if (rc != 0)
        return k > 0 && w->parked >= ZP_PARKED_MAX;
    t->rows->cold_parked++;
    zp_workers_record(w, h->seq);
    w->pulls++;
    park_pull(r, w, t, tag, pieces);
    return true;
}

void zp_sparse_ops_on_pull(zp_server *s, zp_request *r, zp_worker *w, zp_table *t)
{
    const Zeps__Header *h = r->h;
    size_t n = (size_t)h->count;
    const uint64_t *ids = checked_ids(s, r, t, n * sizeof(uint64_t), false);
    if (!ids || !rows_fit(s, r, t, (uint64_t)n * (t->rows->dim + 1) * sizeof(float)) ||
        !rows_room(s, r, t, ids, n) || !tier_ok(s, r->identity, h, t))
        return;
    char err[512];
    int rc = zp_turns_rows_ready(s, t, h->rank, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "PULL of sparse table '%s': %s", t->name, err);
        return;
    }
    if (t->rows->tier != NULL && park_cold(s, r, w, t, ids, n))
        return;
    bool ready = s->cons->rows_pull_ready(s, t, h->rank, h->clock) &&
                 zp_turns_rows_mine(s, t, h->rank, h->clock);
    if (!ready && zp_request_may_park(s, r, w) != 0)
        return;
    zp_workers_record(w, h->seq);
    w->pulls++;
    if (ready) {
        send_rows(s, r->identity, h->req_id, t, h->rank, h->clock, ids, n, 0.0);
        return;
    }
    park_pull(r, w, t, 0, 0);
}

typedef struct moved_ctx {
    zp_server *s;
    zp_table *t;
} moved_ctx;

/* Whether parked pull p names an id the shard's map no longer gives it. */
static bool parked_moved(const zp_parked *p, void *arg)
{
    moved_ctx *m = arg;
    if (!p->has_keys)
        return false;
    const uint64_t *ids =
        zp_rows_ids(m->t->rows, zmq_msg_data((zmq_msg_t *)&p->keys), (size_t)p->count);
    return zp_owner_foreign(m->s, ids, (size_t)p->count) >= 0;
}

void zp_sparse_ops_refuse_moved(zp_server *s)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        moved_ctx m = {s, t};
        zp_parked *p;
        while (t->rows && (p = zp_parked_take_if(&t->parked, parked_moved, &m))) {
            const uint64_t *ids = zp_rows_ids(t->rows, zmq_msg_data(&p->keys), (size_t)p->count);
            ptrdiff_t bad = zp_owner_foreign(s, ids, (size_t)p->count);
            Zeps__Header req;
            zeps__header__init(&req);
            req.op = ZEPS__OP__PULL;
            req.req_id = p->req_id;
            req.rank = p->rank;
            req.seq = p->seq;
            req.table = t->id;
            char what[128];
            snprintf(what, sizeof(what), "PULL of sparse table '%s'", t->name);
            zp_owner_refuse(s, &p->identity, &req, what, ids[bad], (size_t)bad);
            unpark(s, p);
        }
    }
}

/* The gradients as aligned floats: in place when the frame allows it. */
static const float *aligned_grads(zp_table *t, const unsigned char *data, size_t nvals)
{
    if (((uintptr_t)data & 3u) == 0)
        return (const float *)data;
    float *g = zp_rows_grads(t->rows, nvals);
    if (g)
        memcpy(g, data, nvals * sizeof(float));
    return g;
}

/* A compressed push's rows, validated against their codec and decoded into
 * the table's scratch; NULL after replying with an error. */
static const float *decoded_grads(zp_server *s, zp_request *r, zp_table *t, const void *buf,
                                  size_t len)
{
    const Zeps__Header *h = r->h;
    size_t nvals = (size_t)h->count * t->rows->dim;
    const zp_codec_ops *codec = zp_codec_by_id(h->codec);
    if (!codec) {
        zp_reply_error(s, r->identity, h, ZEPS_EPROTO,
                       "unknown codec %u in a PUSH to sparse table '%s'", h->codec, t->name);
        return NULL;
    }
    double t0 = zp_now_s();
    char err[300];
    int rc = codec->validate(buf, len, nvals, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s push to sparse table '%s' from worker %u: %s",
                       codec->name, t->name, h->rank, err);
        return NULL;
    }
    if (!rows_fit(s, r, t, (uint64_t)nvals * sizeof(float)))
        return NULL;
    float *g = zp_rows_grads(t->rows, nvals);
    if (!g) {
        zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                       "cannot allocate %zu bytes to decode a push to sparse table '%s'",
                       nvals * sizeof(float), t->name);
        return NULL;
    }
    codec->decode(buf, len, nvals, g);
    t->stats.decode_s += zp_now_s() - t0;
    return g;
}

/* The checks of a sparse PUSH up to its gradients: ids (of this shard,
 * distinct), payload size, gradients (raw: in place when aligned;
 * compressed: validated and decoded), finite. Fills *g and returns the ids,
 * or NULL after replying with an error. */
static const uint64_t *checked_push(zp_server *s, zp_request *r, zp_table *t, const float **g)
{
    const Zeps__Header *h = r->h;
    size_t n = (size_t)h->count, dim = t->rows->dim;
    size_t vbytes = (h->flags & ZP_FLAG_ROW_VERSIONS) ? n * sizeof(uint32_t) : 0;
    /* raw: ids, rows, versions exactly; compressed: ids, a payload, versions */
    size_t fixed = n * sizeof(uint64_t) + vbytes;
    const uint64_t *ids = h->codec ? checked_ids(s, r, t, fixed, true)
                                   : checked_ids(s, r, t, fixed + n * dim * sizeof(float), false);
    if (!ids)
        return NULL;
    ptrdiff_t rep = zp_rows_check_push(t->rows, ids, n);
    if (rep >= 0) {
        zp_reply_error(s, r->identity, h, ZEPS_EINVAL,
                       "PUSH to sparse table '%s' names id %" PRIu64 " twice (position %td); "
                       "sum repeated ids first",
                       t->name, ids[rep], rep);
        return NULL;
    }
    const unsigned char *rows =
        (const unsigned char *)zmq_msg_data(r->payload) + n * sizeof(uint64_t);
    size_t rows_len = zmq_msg_size(r->payload) - fixed;
    *g = h->codec ? decoded_grads(s, r, t, rows, rows_len) : aligned_grads(t, rows, n * dim);
    if (!*g) {
        if (!h->codec) /* a misaligned raw frame we could not copy */
            zp_reply_error(s, r->identity, h, ZEPS_ENOMEM,
                           "cannot allocate %zu bytes for a push to sparse table '%s'",
                           n * dim * sizeof(float), t->name);
        return NULL;
    }
    if (s->cfg.reject_nonfinite && !zp_finite_all(*g, n * dim)) {
        zp_reply_error(s, r->identity, h, ZEPS_ENONFINITE,
                       "PUSH to sparse table '%s' from worker %u contains NaN or Inf; nothing "
                       "applied",
                       t->name, h->rank);
        return NULL;
    }
    return ids;
}

/* Count a push of n ids carrying `wire` bytes (raw: `raw`). */
static void count_push(zp_table *t, zp_worker *w, size_t n, size_t wire, size_t raw)
{
    t->version++;
    t->stats.pushes++;
    t->stats.keys_pushed += n;
    w->pushes++;
    t->stats.push_bytes_wire += wire;
    t->stats.push_bytes_raw += raw;
    w->push_bytes_wire += wire;
    w->push_bytes_raw += raw;
}

/* A backup replaying a bsp round entry (op/batch.c): the push without its
 * rows, which are in its round's merge (given to the table by the entry);
 * its clock checks, duplicate window, hold and counters as on the primary,
 * which checked its rows. */
static int phantom_push(zp_server *s, zp_request *r, zp_worker *w, zp_table *t,
                        uint32_t *reply_flags)
{
    const Zeps__Header *h = r->h;
    size_t n = (size_t)h->count, dim = t->rows->dim;
    if (!tier_ok(s, r->identity, h, t) || zp_request_clock(s, r) != 0)
        return -1;
    zp_rows_push rp = {.rank = h->rank, .n = n, .clock = h->clock}; /* ids NULL: no rows */
    size_t dropped;
    char err[512];
    int rc = s->cons->push_rows(s, t, &rp, &dropped, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return -1;
    }
    zp_workers_record(w, h->seq);
    t->stats.dropped += dropped;
    w->dropped += dropped;
    *reply_flags = dropped ? ZP_FLAG_DROPPED : 0;
    size_t vbytes = (h->flags & ZP_FLAG_ROW_VERSIONS) ? n * sizeof(uint32_t) : 0;
    count_push(t, w, n, r->wire, n * sizeof(uint64_t) + vbytes + n * dim * sizeof(float));
    return 0;
}

int zp_sparse_ops_on_push(zp_server *s, zp_request *r, zp_worker *w, zp_table *t,
                          uint32_t *reply_flags)
{
    if (r->phantom)
        return phantom_push(s, r, w, t, reply_flags);
    const Zeps__Header *h = r->h;
    size_t n = (size_t)h->count, dim = t->rows->dim;
    const float *g;
    const uint64_t *ids = checked_push(s, r, t, &g);
    if (!ids)
        return -1;
    if (!tier_ok(s, r->identity, h, t) || zp_request_clock(s, r) != 0 ||
        !rows_room(s, r, t, ids, n))
        return -1;
    size_t len = zmq_msg_size(r->payload);
    bool versions = (h->flags & ZP_FLAG_ROW_VERSIONS) != 0;
    size_t vbytes = versions ? n * sizeof(uint32_t) : 0;
    zp_rows_push rp = {
        .rank = h->rank, .ids = ids, .n = n, .cand = t->rows->cand, .g = g, .clock = h->clock};
    if (versions)
        rp.read_versions = zp_rows_versions(
            t->rows, (const unsigned char *)zmq_msg_data(r->payload) + len - vbytes, n);
    if (t->rows->kept.hist) /* staleness on demand: the rows as they were */
        zp_rowvers_note(&t->rows->kept, t->rows->store, ids, n);
    size_t dropped;
    char err[512];
    int rc = s->cons->push_rows(s, t, &rp, &dropped, err, sizeof(err));
    if (rc == 0 && zp_tiered_error(t->rows) != NULL)
        rc = zp_errors_set(err, sizeof(err), ZEPS_EIO, "PUSH of sparse table '%s' failed: %s",
                           t->name, zp_tiered_error(t->rows));
    if (rc != 0) {
        zp_reply_error(s, r->identity, h, rc, "%s", err);
        return -1;
    }
    zp_move_note(s, t, ids, n);         /* a moving row changed: it is sent again */
    if (zp_move_frozen(s, ids, n) >= 0) /* held in the cut-over: its rows of M go on */
        zp_handover_take_table(s, t);
    zp_workers_record(w, h->seq);
    t->stats.dropped += dropped;
    w->dropped += dropped;
    *reply_flags = dropped ? ZP_FLAG_DROPPED : 0;
    zp_rows_trim(t->rows);
    count_push(t, w, n, len, n * sizeof(uint64_t) + vbytes + n * dim * sizeof(float));
    /* held for its bsp round: a replicated primary logs it with the round
     * (repl/rbatch.h), without its rows */
    if (s->cons->rounds && dropped == 0)
        zp_rnote_round_sparse(s, t->id, h->clock, len);
    return 0;
}
