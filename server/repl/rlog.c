/*
 * rlog.c - see rlog.h. The primary's side of replication: entries kept in a
 * ring bounded by cluster.replication.log_mb, streamed to followers inside
 * a window of ZP_REPL_WINDOW unacknowledged entries, and the replies of
 * logged requests held (packed, with their identity and payload) until
 * every backup of the in-sync set has acknowledged their LSN. Under bsp
 * the dense pushes of an open round wait in the round batch (rbatch.h)
 * with their replies, and are logged as one entry once their rounds have
 * closed, or one by one ahead of anything else logged (a flush).
 */
#include "rlog.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "log.h"
#include "now.h"
#include "rmsg.h"
#include "server.h"
#include "zeps_errors.h"

void zp_rlog_init(zp_repl *r, const zp_config *cfg)
{
    memset(r, 0, sizeof(*r));
    r->on = cfg->replicas > 1;
    r->wake_s = -1;
    r->max_bytes = (size_t)cfg->repl_log_mb << 20;
    r->max_lag_s = cfg->repl_max_lag_ms / 1000.0;
}

static void entry_close(zp_repl_entry *e)
{
    for (int i = 0; i < e->n; i++)
        zmq_msg_close(&e->f[i]);
    e->n = 0;
}

void zp_rlog_fini(zp_repl *r)
{
    for (size_t i = 0; i < r->count; i++)
        entry_close(&r->ring[(r->first + i) % r->cap]);
    free(r->ring);
    for (size_t i = 0; i < r->nheld; i++)
        zp_rbatch_held_close(&r->held[(r->headheld + i) % r->capheld]);
    free(r->held);
    zp_rbatch_fini(&r->batch);
    free(r->note_sum);
    free(r->note_rows.p);
    for (int i = 0; i < ZP_MAX_REPLICAS; i++)
        if (r->followers[i].on) {
            zmq_msg_close(&r->followers[i].identity);
            zp_xfer_end(&r->followers[i]);
        }
    memset(r, 0, sizeof(*r));
}

bool zp_rlog_logged(const Zeps__Header *h)
{
    switch (h->op) {
    case ZEPS__OP__HELLO:
    case ZEPS__OP__DECLARE:
    case ZEPS__OP__PUSH:
    case ZEPS__OP__CLOCK:
    case ZEPS__OP__BYE:
    case ZEPS__OP__EVICT:
    case ZEPS__OP__FINISH:
    case ZEPS__OP__TUNE:
    case ZEPS__OP__PUT:
    case ZEPS__OP__SLOTS:
        return true;
    case ZEPS__OP__MOVE: /* what a move changes here: the rows it takes, the map */
        return h->move_step == ZP_MOVE_IMPORT || h->move_step == ZP_MOVE_PUT ||
               h->move_step == ZP_MOVE_COMMIT || h->move_step == ZP_MOVE_ABORT;
    default:
        return false;
    }
}

void zp_rlog_skip(zp_server *s)
{
    if (s->repl.pending && s->repl.error == 0)
        s->repl.error = ZEPS_ESTATE; /* a marker only: nothing is replied */
}

/* The entry of `lsn` if the ring still has it. */
static zp_repl_entry *entry_at(zp_repl *r, uint64_t lsn)
{
    if (r->count == 0)
        return NULL;
    uint64_t oldest = r->ring[r->first].lsn;
    if (lsn < oldest || lsn >= oldest + r->count)
        return NULL;
    return &r->ring[(r->first + (size_t)(lsn - oldest)) % r->cap];
}

static void ring_grow(zp_repl *r)
{
    size_t cap = r->cap ? r->cap * 2 : 1024;
    zp_repl_entry *ring = zp_alloc_zeroed(cap, sizeof(*ring));
    for (size_t i = 0; i < r->count; i++)
        memcpy(&ring[i], &r->ring[(r->first + i) % r->cap], sizeof(*ring)); /* zmq_msg_t moves */
    free(r->ring);
    r->ring = ring;
    r->cap = cap;
    r->first = 0;
}

/* The oldest entries go once the log holds more than log_mb: a follower
 * that still needed them must then be sent the whole state
 * (docs/replication.md). */
static void ring_trim(zp_repl *r)
{
    while (r->count > 1 && r->bytes > r->max_bytes) {
        zp_repl_entry *e = &r->ring[r->first];
        r->bytes -= e->bytes;
        entry_close(e);
        r->first = (r->first + 1) % r->cap;
        r->count--;
    }
}

/* Keep frames f[0..n) as entry `lsn` (new references to the same bytes). */
static void ring_append(zp_repl *r, uint64_t lsn, uint64_t epoch, zmq_msg_t *f, int n)
{
    if (r->count == r->cap)
        ring_grow(r);
    zp_repl_entry *e = &r->ring[(r->first + r->count) % r->cap];
    e->lsn = lsn;
    e->epoch = epoch;
    e->n = n;
    e->bytes = sizeof(*e);
    for (int i = 0; i < n; i++) {
        zmq_msg_init(&e->f[i]);
        zmq_msg_copy(&e->f[i], &f[i]);
        e->bytes += zmq_msg_size(&f[i]);
        r->log_bytes += zmq_msg_size(&f[i]);
    }
    r->count++;
    r->bytes += e->bytes;
    r->epoch = epoch;
    ring_trim(r);
}

static bool same_identity(zmq_msg_t *a, zmq_msg_t *b)
{
    return zmq_msg_size(a) == zmq_msg_size(b) &&
           memcmp(zmq_msg_data(a), zmq_msg_data(b), zmq_msg_size(a)) == 0;
}

static zp_repl_follower *follower_of(zp_repl *r, const char *member)
{
    for (int i = 0; i < ZP_MAX_REPLICAS; i++)
        if (r->followers[i].on && strcmp(r->followers[i].member, member) == 0)
            return &r->followers[i];
    return NULL;
}

static void follower_off(zp_repl_follower *f, const char *why)
{
    if (!f->on)
        return;
    zp_warn("replica %d (%s) no longer follows: %s", f->replica, f->member, why);
    zmq_msg_close(&f->identity);
    zp_xfer_end(f);
    f->on = false;
}

/* Send entry e to follower f through the shard's ROUTER: [its identity]
 * [REPLICATE header: epoch, lsn] [the request's frames]. -1 if it is gone. */
static int send_entry(zp_server *s, zp_repl_follower *f, zp_repl_entry *e)
{
    Zeps__Header h;
    zp_rmsg_header(s, &h, ZEPS__OP__REPLICATE, s->role.epoch);
    h.lsn = e->lsn;
    h.lsn_epoch = e->epoch;
    if (zp_rmsg_send_to(s, &f->identity, &h, true) != 0)
        return -1;
    for (int i = 0; i < e->n; i++) {
        zmq_msg_t c;
        zmq_msg_init(&c);
        zmq_msg_copy(&c, &e->f[i]);
        if (zmq_msg_send(&c, s->sock, (i + 1 < e->n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&c);
            return -1;
        }
    }
    s->bytes_out += e->bytes;
    return 0;
}

/* Send f what it lacks, inside the window. */
static void pump_follower(zp_server *s, zp_repl_follower *f)
{
    zp_repl *r = &s->repl;
    if (f->on && f->xfer.phase != ZP_XFER_NONE && zp_xfer_pump(s, f))
        return; /* the whole state first */
    while (f->on && f->sent < r->lsn && f->sent - f->acked < ZP_REPL_WINDOW) {
        zp_repl_entry *e = entry_at(r, f->sent + 1);
        if (!e) {
            zp_info("replica %d: entry %" PRIu64 " is no longer in the log (log_mb)", f->replica,
                    f->sent + 1);
            zp_xfer_begin(s, f);
            return;
        }
        if (send_entry(s, f, e) != 0) {
            follower_off(f, "its connection is gone");
            return;
        }
        f->sent++;
    }
}

/* --- replies held for acks=all --- */

/* A new reply at the end of the held ring (counted in nheld), zeroed. */
static zp_repl_held *held_slot(zp_repl *r)
{
    if (r->nheld == r->capheld) {
        size_t cap = r->capheld ? r->capheld * 2 : 256;
        zp_repl_held *h = zp_alloc_zeroed(cap, sizeof(*h));
        for (size_t i = 0; i < r->nheld; i++)
            h[i] = r->held[(r->headheld + i) % r->capheld];
        free(r->held);
        r->held = h;
        r->capheld = cap;
        r->headheld = 0;
    }
    zp_repl_held *h = &r->held[(r->headheld + r->nheld) % r->capheld];
    memset(h, 0, sizeof(*h));
    r->nheld++;
    return h;
}

static size_t hold_send(void *server, zmq_msg_t *identity, const Zeps__Header *rep,
                        const void *data, size_t len, zmq_free_fn *ffn, void *hint)
{
    zp_server *s = server;
    zp_repl *r = &s->repl;
    zp_repl_held *h = held_slot(r);
    if (rep->req_id == r->req_id && same_identity(identity, r->identity) &&
        (rep->op == ZEPS__OP__ERROR || (rep->flags & ZP_FLAG_PARKED)))
        r->error = rep->op == ZEPS__OP__ERROR ? rep->error : ZEPS_EPROTO;
    else if (rep->req_id == r->req_id && same_identity(identity, r->identity) &&
             (rep->flags & ZP_FLAG_DUPLICATE))
        r->duplicate = true;
    h->at_s = zp_now_s();
    zmq_msg_init(&h->identity);
    zmq_msg_copy(&h->identity, identity);
    h->header_len = zeps__header__get_packed_size(rep);
    h->header = zp_alloc_zeroed(1, h->header_len ? h->header_len : 1);
    zeps__header__pack(rep, h->header);
    h->len = len;
    h->ffn = ffn;
    h->hint = hint;
    h->data = (void *)data;
    if (data && !ffn) { /* borrowed: keep a copy */
        h->data = zp_alloc_zeroed(1, len ? len : 1);
        memcpy(h->data, data, len);
    }
    r->held_total++;
    return 0;
}

/* Send a held reply now; the entry is consumed. */
static void held_send(zp_server *s, zp_repl_held *h)
{
    zmq_msg_t hdr;
    Zeps__Header *rep = NULL;
    zmq_msg_init_data(&hdr, h->header, h->header_len, NULL, NULL);
    rep = zp_wire_unpack_header(&hdr);
    zmq_msg_close(&hdr);
    if (rep) {
        s->bytes_out +=
            zp_reply_socket_send(s, &h->identity, rep, h->data, h->len, h->ffn, h->hint);
        zeps__header__free_unpacked(rep, NULL);
        if (!h->ffn)
            free(h->data);
    } else if (h->ffn) {
        h->ffn(h->data, h->hint);
    } else {
        free(h->data);
    }
    h->data = NULL;
    h->ffn = NULL;
    zmq_msg_close(&h->identity);
    free(h->header);
}

/* The last LSN every backup of the in-sync set has applied (the log's end
 * if the set is this replica alone); 0 until the set is known. */
static uint64_t in_sync_lsn(zp_server *s)
{
    zp_repl *r = &s->repl;
    const zp_role *role = &s->role;
    if (role->isr.version < 0)
        return 0;
    uint64_t lsn = r->lsn;
    for (int i = 0; i < role->isr.n; i++) {
        if (strcmp(role->isr.m[i], role->me) == 0)
            continue;
        zp_repl_follower *f = follower_of(r, role->isr.m[i]);
        uint64_t a = f ? f->acked : 0;
        if (a < lsn)
            lsn = a;
    }
    return lsn;
}

/* Send the held replies whose entries every in-sync backup has; drop them
 * all if this replica no longer serves (the workers resend to the next
 * primary). */
static void release(zp_server *s)
{
    zp_repl *r = &s->repl;
    bool serves = zp_role_serves(&s->role);
    uint64_t upto = serves ? in_sync_lsn(s) : 0;
    if (upto > r->released)
        r->released = upto;
    while (r->nheld > 0) {
        zp_repl_held *h = &r->held[r->headheld];
        if (serves && h->lsn > upto)
            break;
        if (serves)
            held_send(s, h);
        else
            zp_rbatch_held_close(h);
        r->headheld = (r->headheld + 1) % r->capheld;
        r->nheld--;
    }
}

bool zp_rlog_begin(zp_server *s, zmq_msg_t *f, int n, zmq_msg_t *identity, const Zeps__Header *h)
{
    zp_repl *r = &s->repl;
    if (!r->on || !zp_role_serves(&s->role))
        return false;
    r->entry.n = n;
    for (int i = 0; i < n; i++) {
        zmq_msg_init(&r->entry.f[i]);
        zmq_msg_copy(&r->entry.f[i], &f[i]);
    }
    r->pending = true;
    r->identity = identity;
    r->req_id = h->req_id;
    r->rank = h->rank;
    r->seq = h->seq;
    r->error = 0;
    r->duplicate = false;
    r->held_from = r->nheld;
    r->sink = s->sink;
    s->sink = (zp_reply_sink){.send = hold_send, .arg = s};
    return true;
}

/* Log frames f[0..n) as the next entry (new references); its LSN. */
static uint64_t log_entry(zp_server *s, zmq_msg_t *f, int n)
{
    zp_repl *r = &s->repl;
    ring_append(r, ++r->lsn, s->role.epoch, f, n);
    return r->lsn;
}

/* Put batch replies back on the held ring: each waits for entry
 * first + its index (a flush), or for `first` alone (one round entry). */
static void batch_release(zp_repl *r, uint64_t first, bool one)
{
    double now = zp_now_s();
    for (size_t i = 0; i < r->batch.nheld; i++) {
        zp_repl_held *h = held_slot(r);
        *h = r->batch.held[i];
        h->lsn = one ? first : first + h->lsn;
        h->at_s = now; /* its entry exists from now: the lag rule counts from here */
    }
    r->batch.nheld = 0;
}

/* Log the batch's pushes one by one, as they arrived (anything else to be
 * logged comes after them). */
static void flush(zp_server *s)
{
    zp_repl *r = &s->repl;
    if (r->batch.n == 0)
        return;
    uint64_t first = r->lsn + 1;
    for (size_t i = 0; i < r->batch.n; i++)
        log_entry(s, r->batch.items[i].e.f, r->batch.items[i].e.n);
    r->flushed += r->batch.npush;
    batch_release(r, first, false);
    zp_rbatch_clear(&r->batch);
}

/* Log the batch as one round entry: every round it holds has closed. */
static void emit(zp_server *s)
{
    zp_repl *r = &s->repl;
    zmq_msg_t f[3];
    int n = zp_rbatch_entry(&r->batch, f);
    uint64_t lsn = log_entry(s, f, n);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&f[i]);
    r->round_entries++;
    r->round_pushes += r->batch.npush;
    batch_release(r, lsn, true);
    zp_rbatch_clear(&r->batch);
}

/* Send what was logged, release what the backups have. */
static void after_logging(zp_server *s)
{
    zp_repl *r = &s->repl;
    for (int i = 0; i < ZP_MAX_REPLICAS; i++)
        if (r->followers[i].on)
            pump_follower(s, &r->followers[i]);
    release(s);
}

/* The request just handled joins the round batch, with its replies and
 * the merges of the sparse rounds it closed: a push of a round, or a plain
 * request (a CLOCK). */
static void batch_add(zp_server *s, bool push)
{
    zp_repl *r = &s->repl;
    if (push && r->note_sparse)
        zp_rbatch_add_sparse(&r->batch, r->entry.f, r->entry.n, r->note_table, r->note_round,
                             r->note_wire);
    else if (push)
        zp_rbatch_add(&r->batch, r->entry.f, r->entry.n, r->note_table, r->note_wire, &r->note_sum,
                      r->note_nsum);
    else
        zp_rbatch_add_plain(&r->batch, r->entry.f, r->entry.n);
    zp_rbatch_sender(&r->batch, r->rank, r->seq);
    zp_rbatch_attach_rows(&r->batch, &r->note_rows);
    for (size_t i = r->held_from; i < r->nheld; i++)
        zp_rbatch_hold(&r->batch, &r->held[(r->headheld + i) % r->capheld]);
    r->nheld = r->held_from; /* moved out, not freed */
    if (zp_rbatch_ready(&r->batch))
        emit(s);
}

/* Flush the batch ahead of the request being logged, whose replies (held
 * from held_from on) stay after the batch's on the held ring. */
static void flush_before(zp_server *s)
{
    zp_repl *r = &s->repl;
    if (r->batch.n == 0)
        return;
    size_t mine = r->nheld - r->held_from;
    zp_repl_held *tmp = mine ? zp_alloc_zeroed(mine, sizeof(*tmp)) : NULL;
    for (size_t i = 0; i < mine; i++)
        tmp[i] = r->held[(r->headheld + r->held_from + i) % r->capheld];
    r->nheld = r->held_from;
    flush(s);
    for (size_t i = 0; i < mine; i++)
        *held_slot(r) = tmp[i];
    free(tmp);
    r->held_from = r->nheld - mine;
}

void zp_rlog_end(zp_server *s)
{
    zp_repl *r = &s->repl;
    if (!r->pending)
        return;
    s->sink = r->sink;
    r->pending = false;
    bool batched = (r->note || r->note_sparse) && r->error == 0;
    bool joins = r->note_clock && r->error == 0 && r->batch.n > 0 && r->batch.n < ZP_RBATCH_MAX;
    if (batched || joins) {
        batch_add(s, batched);
        r->note = r->note_clock = r->note_sparse = false;
        entry_close(&r->entry);
        after_logging(s);
        return;
    }
    r->note = r->note_clock = r->note_sparse = false;
    free(r->note_sum);
    r->note_sum = NULL;
    r->note_rows.len = 0; /* logged alone or refused: a backup merges what it holds */
    r->note_rows.nrec = 0;
    uint64_t lsn = 0; /* a refused request: its replies wait for nothing */
    if (r->error == 0 && r->duplicate) {
        /* applied nowhere, so not logged (a backup whose window lacks the
         * seq, one refused EMOVED here, would apply it); answered once
         * everything logged before it is acknowledged */
        flush_before(s);
        lsn = r->lsn;
    } else if (r->error == 0) {
        flush_before(s); /* its requests were applied before this one */
        lsn = log_entry(s, r->entry.f, r->entry.n);
    }
    entry_close(&r->entry);
    for (size_t i = r->held_from; i < r->nheld; i++)
        r->held[(r->headheld + i) % r->capheld].lsn = lsn;
    if (lsn)
        after_logging(s);
    else
        release(s);
}

void zp_rlog_own(zp_server *s, const Zeps__Header *h, const void *payload, size_t len)
{
    if (!s->repl.on || !zp_role_serves(&s->role))
        return;
    zmq_msg_t f[2];
    zmq_msg_init_size(&f[0], zeps__header__get_packed_size(h));
    zeps__header__pack(h, zmq_msg_data(&f[0]));
    zmq_msg_init_size(&f[1], payload ? len : 0);
    memcpy(zmq_msg_data(&f[1]), payload ? payload : "", payload ? len : 0);
    flush(s);
    log_entry(s, f, payload ? 2 : 1);
    zmq_msg_close(&f[0]);
    zmq_msg_close(&f[1]);
    after_logging(s);
}

void zp_rlog_lost(zp_server *s, uint32_t rank)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__CLOCK;
    h.flags = ZP_FLAG_LOST;
    h.rank = rank;
    zp_rlog_own(s, &h, NULL, 0);
}

/* Whether this log's entry `lsn` is the one the follower has (logged at
 * `epoch`): the same position is not enough, a deposed primary's last
 * entries may differ from its successor's. Entry 0 is the start. */
static bool same_entry(zp_repl *r, uint64_t lsn, uint64_t epoch)
{
    if (lsn == 0)
        return true;
    if (lsn > r->lsn)
        return false;
    if (lsn == r->lsn)
        return epoch == r->epoch;
    const zp_repl_entry *e = entry_at(r, lsn);
    return e && e->epoch == epoch;
}

static bool is_live(const zp_role *role, const char *member)
{
    for (int i = 0; i < role->nlive; i++)
        if (strcmp(role->live[i], member) == 0)
            return true;
    return false;
}

int zp_rlog_follow(zp_server *s, zmq_msg_t *identity, const Zeps__Header *h, char *err,
                   size_t errlen)
{
    zp_repl *r = &s->repl;
    const char *m = h->member ? h->member : "";
    if (h->epoch != s->role.epoch)
        return zp_errors_set(err, errlen, ZEPS_ESTALE,
                             "shard %d: a FOLLOW at epoch %" PRIu64 ", this primary's is %" PRIu64,
                             s->shard, h->epoch, s->role.epoch);
    if (h->replica >= (uint32_t)s->role.replicas || h->replica == (uint32_t)s->replica ||
        !is_live(&s->role, m))
        return zp_errors_set(err, errlen, ZEPS_ERANK,
                             "shard %d: a FOLLOW from replica %u as member '%s', which is not a "
                             "live member of this shard's replica set",
                             s->shard, h->replica, m);
    bool from_log = h->log_base == r->base && same_entry(r, h->lsn, h->lsn_epoch) &&
                    (h->lsn == r->lsn || entry_at(r, h->lsn + 1));
    zp_repl_follower *f = &r->followers[h->replica];
    if (f->on)
        zmq_msg_close(&f->identity);
    zp_xfer_end(f);
    memset(f, 0, sizeof(*f));
    f->on = true;
    f->replica = (int)h->replica;
    snprintf(f->member, sizeof(f->member), "%s", m);
    zmq_msg_init(&f->identity);
    zmq_msg_copy(&f->identity, identity);
    if (from_log) {
        f->acked = f->sent = f->target = h->lsn;
        f->since_s = h->lsn == r->lsn ? zp_now_s() : 0;
        zp_info("replica %u (%s) follows from entry %" PRIu64 " of %" PRIu64, h->replica, m, h->lsn,
                r->lsn);
    } else {
        zp_info("replica %u (%s) holds entry %" PRIu64 " of log %016" PRIx64
                "; this log %016" PRIx64 " ends at %" PRIu64 " and keeps entries from %" PRIu64,
                h->replica, m, h->lsn, h->log_base, r->base, r->lsn,
                r->count ? r->ring[r->first].lsn : r->lsn + 1);
        zp_xfer_begin(s, f);
    }
    pump_follower(s, f);
    return 0;
}

bool zp_rlog_acked(zp_server *s, zmq_msg_t *identity, const Zeps__Header *h)
{
    zp_repl *r = &s->repl;
    uint64_t lsn = h->lsn;
    for (int i = 0; i < ZP_MAX_REPLICAS; i++) {
        zp_repl_follower *f = &r->followers[i];
        if (!f->on || !same_identity(&f->identity, identity))
            continue;
        if (h->flags & ZP_FLAG_STATE) {
            zp_xfer_acked(s, f, h->offset);
            pump_follower(s, f);
            return true;
        }
        if (lsn > f->sent)
            return false; /* acknowledges what it was never sent */
        if (lsn > f->acked)
            f->acked = lsn;
        if (f->acked >= f->target) {
            f->since_s = zp_now_s();
            f->target = r->lsn;
        }
        pump_follower(s, f);
        release(s);
        return true;
    }
    return false;
}

bool zp_rlog_in_sync(zp_server *s, const char *member, bool in_set)
{
    zp_repl *r = &s->repl;
    zp_repl_follower *f = follower_of(r, member);
    double now = zp_now_s();
    if (!in_set)
        return f && f->since_s > 0 && now - f->since_s <= r->max_lag_s;
    if (r->nheld == 0)
        return true;
    const zp_repl_held *old = &r->held[r->headheld];
    return !(now - old->at_s > r->max_lag_s && (f ? f->acked : 0) < old->lsn);
}

void zp_rlog_pump(zp_server *s)
{
    zp_repl *r = &s->repl;
    if (!r->on)
        return;
    if (!zp_role_serves(&s->role)) {
        for (int i = 0; i < ZP_MAX_REPLICAS; i++)
            follower_off(&r->followers[i], "this replica is not primary any more");
        zp_rbatch_fini(&r->batch); /* unanswered: the workers resend to the next primary */
        release(s);
        return;
    }
    for (int i = 0; i < ZP_MAX_REPLICAS; i++)
        if (r->followers[i].on)
            pump_follower(s, &r->followers[i]);
    release(s);
    zp_role_sync_isr(&s->role);
    r->wake_s = -1;
    double patience = zp_rbatch_ready(&r->batch)
                          ? -1
                          : zp_rbatch_patience(&r->batch, &s->workers, s->cfg.lost_continue);
    if (patience < 0)
        return;
    double wait = r->batch.last_s + patience - zp_now_s();
    if (wait > 0) {
        r->wake_s = wait;
        return;
    }
    zp_debug("round batch of %zu requests flushed: its sparse round waits for its replies",
             r->batch.n);
    flush(s);
    after_logging(s);
}

uint64_t zp_rlog_lag(const zp_repl *r)
{
    uint64_t lag = 0;
    for (int i = 0; i < ZP_MAX_REPLICAS; i++)
        if (r->followers[i].on && r->lsn - r->followers[i].acked > lag)
            lag = r->lsn - r->followers[i].acked;
    return lag;
}

size_t zp_rlog_held_count(const zp_repl *r)
{
    return r->nheld;
}

void zp_rlog_reset(zp_repl *r, uint64_t lsn, uint64_t epoch, uint64_t base)
{
    for (size_t i = 0; i < r->count; i++)
        entry_close(&r->ring[(r->first + i) % r->cap]);
    r->first = r->count = r->bytes = 0;
    r->lsn = lsn;
    r->epoch = epoch;
    r->base = base;
}

void zp_rlog_keep(zp_repl *r, zmq_msg_t *f, int n, uint64_t lsn, uint64_t epoch)
{
    ring_append(r, lsn, epoch, f, n);
    r->lsn = lsn;
    r->applied++;
}
