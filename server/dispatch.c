/*
 * dispatch.c - a received message to its op handler (op/). The header is
 * decoded and what every op shares is checked here (protocol version,
 * frame count, flag bits, a stopping shard, which ops a tool may send); then a table
 * indexed by op names the handler. Every message gets exactly one reply,
 * an ERROR one when it is wrong; nothing from the network is asserted.
 */
#include "dispatch.h"

#include <stdio.h>

#include "now.h"
#include "ops.h"
#include "server.h"
#include "wire.h"
#include "zeps_errors.h"

typedef void (*zp_op_handler)(zp_server *s, zp_request *r);

/* A PUSH: a worker's, or a bsp round entry of the primary's log (flag
 * ROUND; batch.c replays its pushes through zp_push_on). */
static void on_push(zp_server *s, zp_request *r)
{
    if (r->h->flags & ZP_FLAG_ROUND)
        zp_batch_on(s, r);
    else
        zp_push_on(s, r);
}

/* A MOVE: a tool's step, or a move's source asking this shard what
 * became of the move (step ASK, op/move_ask.c, which ends moves through
 * op/move.c: so it is reached from here, not from there). */
static void on_move(zp_server *s, zp_request *r)
{
    if (r->h->move_step == ZP_MOVE_ASK)
        zp_move_ask_on(s, r);
    else
        zp_move_op_on(s, r);
}

static const zp_op_handler handlers[] = {
    [ZEPS__OP__FOLLOW] = zp_replicate_on_follow,
    [ZEPS__OP__REPLICATE] = zp_replicate_on_ack,
    [ZEPS__OP__HELLO] = zp_hello_on,
    [ZEPS__OP__DECLARE] = zp_declare_on,
    [ZEPS__OP__PULL] = zp_pull_on,
    [ZEPS__OP__PUSH] = on_push,
    [ZEPS__OP__CLOCK] = zp_clock_on_clock,
    [ZEPS__OP__BARRIER] = zp_clock_on_barrier,
    [ZEPS__OP__STATS] = zp_stats_on,
    [ZEPS__OP__BYE] = zp_admin_on_bye,
    [ZEPS__OP__ROLLBACK] = zp_admin_on_rollback,
    [ZEPS__OP__SNAPSHOT] = zp_admin_on_snapshot,
    [ZEPS__OP__EVICT] = zp_admin_on_evict,
    [ZEPS__OP__FINISH] = zp_admin_on_finish,
    [ZEPS__OP__TUNE] = zp_declare_on_tune,
    [ZEPS__OP__SCAN] = zp_scan_on,
    [ZEPS__OP__PUT] = zp_scan_on_put,
    [ZEPS__OP__SLOTS] = zp_owner_on_slots,
    [ZEPS__OP__MOVE] = on_move,
};
/* every op has its own slot in the metrics' per-op counters (server.h) */
_Static_assert(sizeof(handlers) / sizeof(handlers[0]) <= ZP_SERVER_OPS,
               "ZP_SERVER_OPS must cover every op");

/* Ops a tool (rank 0xffffffff, no HELLO of its own) may send. */
static bool tool_op(int op)
{
    return op == ZEPS__OP__HELLO || op == ZEPS__OP__STATS || op == ZEPS__OP__DECLARE ||
           op == ZEPS__OP__SNAPSHOT || op == ZEPS__OP__EVICT || op == ZEPS__OP__FOLLOW ||
           op == ZEPS__OP__REPLICATE || op == ZEPS__OP__SLOTS || op == ZEPS__OP__MOVE;
}

/* With CURVE and bound keys: the rank h claims must be one the message's
 * key may speak as (its ZAP User-Id names the key). 0, or -1 after replying
 * ERANK; nothing else happens for a refused request. */
static int check_key(zp_server *s, const zp_frames *m, zmq_msg_t *identity, const Zeps__Header *h)
{
    if (!s->zap.enabled || !s->zap.bound || s->applying)
        return 0;
    const char *uid = zmq_msg_gets((zmq_msg_t *)&m->f[1], "User-Id");
    const zp_bind *b = zp_zap_binding(&s->zap, uid);
    if (b && zp_bind_allows(b, h->rank))
        return 0;
    char may[160], as[32];
    if (b)
        zp_bind_describe(b, may, sizeof(may));
    if (h->rank == 0xffffffffu)
        snprintf(as, sizeof(as), "a tool");
    else
        snprintf(as, sizeof(as), "worker %u", h->rank);
    s->key_refused++;
    zp_reply_error(s, identity, h, ZEPS_ERANK, "CURVE key %.8s... may speak as %s, not as %s",
                   uid ? uid : "?", b ? may : "nothing (no longer in the allow-list)", as);
    return -1;
}

/* The flag bits a request of `op` may carry (wire.h); any other bit is
 * refused, so a bit given a meaning later is never silently ignored by an
 * older shard. */
static uint32_t request_flags(const zp_server *s, int op)
{
    switch (op) {
    case ZEPS__OP__PUSH: /* a round entry comes from the primary's log only */
        return ZP_FLAG_CLOCK | ZP_FLAG_ROW_VERSIONS | (s->applying ? ZP_FLAG_ROUND : 0);
    case ZEPS__OP__CLOCK:
        return ZP_FLAG_MAP | (s->applying ? ZP_FLAG_LOST : 0);
    case ZEPS__OP__PULL:
        return ZP_FLAG_PULL_DELTA;
    case ZEPS__OP__BYE:
        return ZP_FLAG_DONE;
    case ZEPS__OP__REPLICATE:
        return ZP_FLAG_STATE;
    case ZEPS__OP__HELLO:
        return ZP_FLAG_RESUME;
    case ZEPS__OP__STATS:
        return ZP_FLAG_SPECS;
    case ZEPS__OP__MOVE:
        return ZP_FLAG_HELD; /* a PUT of round records (move/handover.h) */
    default:
        return 0;
    }
}

/* The checks every op shares; 0, or -1 after replying. */
static int check_common(zp_server *s, const zp_frames *m, zmq_msg_t *identity,
                        const Zeps__Header *h)
{
    if (h->version != ZP_PROTOCOL_VERSION)
        zp_reply_error(s, identity, h, ZEPS_EVERSION,
                       "protocol version %u is not supported; this server speaks version %d",
                       h->version, ZP_PROTOCOL_VERSION);
    else if (m->dropped)
        zp_reply_error(s, identity, h, ZEPS_EPROTO, "message has %d frames; at most %d",
                       m->n + m->dropped, ZP_MAX_FRAMES);
    else if (h->flags & ~request_flags(s, h->op))
        zp_reply_error(s, identity, h, ZEPS_EPROTO,
                       "unknown flag bits 0x%x in a %s request (it may carry 0x%x)",
                       h->flags & ~request_flags(s, h->op), zp_wire_op_name(h->op),
                       request_flags(s, h->op));
    else if (s->stopping && h->op != ZEPS__OP__STATS)
        zp_reply_error(s, identity, h, ZEPS_ECLOSED, "shard %d is shutting down", s->shard);
    else if (!zp_role_serves(&s->role) && h->op != ZEPS__OP__STATS && !s->applying) /* a backup */
        zp_reply_not_primary(s, identity, h);
    else if (h->rank == 0xffffffffu && !tool_op(h->op))
        zp_reply_error(
            s, identity, h, ZEPS_ERANK,
            "tools may only send HELLO, DECLARE, STATS, SNAPSHOT, EVICT, SLOTS and MOVE");
    else
        return 0;
    return -1;
}

/* A payload in the client's shared-memory segment becomes the message's
 * payload frame (xport/shmhost.h), so no handler knows which transport
 * carried it; a bad descriptor is refused before any handler runs, so it
 * is applied nowhere. 0, or -1 after replying. */
static int resolve_shm(zp_server *s, zp_frames *m, zmq_msg_t *identity, const Zeps__Header *h)
{
    char err[256];
    size_t before = m->bytes;
    int rc = zp_shmhost_resolve(&s->shm, identity, h, m, err, sizeof(err));
    if (rc != 0) {
        zp_reply_error(s, identity, h, rc, "%s", err);
        return -1;
    }
    s->bytes_in += m->bytes - before;
    return 0;
}

void zp_dispatch(zp_server *s, zp_frames *m)
{
    s->requests++;
    s->bytes_in += m->bytes;
    zmq_msg_t *identity = &m->f[0];
    if (m->n < 2) {
        s->op_requests[0]++;
        zp_reply_error(s, identity, NULL, ZEPS_EPROTO, "message has no header frame");
        return;
    }
    Zeps__Header *h = zp_wire_unpack_header(&m->f[1]);
    if (!h) {
        s->op_requests[0]++;
        zp_reply_error(s, identity, NULL, ZEPS_EPROTO,
                       "header frame of %zu bytes is not a valid zeps.Header",
                       zmq_msg_size(&m->f[1]));
        return;
    }
    unsigned op = (unsigned)h->op;
    bool known = op < sizeof(handlers) / sizeof(handlers[0]) && handlers[op];
    unsigned slot = known && op < ZP_SERVER_OPS ? op : 0;
    uint64_t t0 = zp_now_ns();
    s->op_requests[slot]++;
    if (check_common(s, m, identity, h) == 0 && check_key(s, m, identity, h) == 0 &&
        resolve_shm(s, m, identity, h) == 0) {
        zp_request r = {
            .identity = identity,
            .h = h,
            .payload = m->n > 2 ? &m->f[2] : NULL,
            .npayload = m->n - 2 + m->dropped,
        };
        /* a primary keeps what may change state before it is applied (its
         * handler may move the payload out), logs it if it was accepted,
         * and holds the replies until the backups have it */
        bool logged = known && zp_rlog_logged(h) && !s->applying &&
                      zp_rlog_begin(s, &m->f[1], m->n - 1, identity, h);
        if (known)
            handlers[op](s, &r);
        else
            zp_reply_error(s, identity, h, ZEPS_EOP, "unknown or unexpected op %d", (int)h->op);
        if (logged)
            zp_rlog_end(s);
    }
    /* handling time on this shard (a parked pull's wait is pull_wait_us) */
    zp_hist_add_log2(&s->op_handle_us[slot], (zp_now_ns() - t0) / 1000);
    zeps__header__free_unpacked(h, NULL);
}

static size_t discard(void *arg, zmq_msg_t *identity, const Zeps__Header *rep, const void *data,
                      size_t len, zmq_free_fn *ffn, void *hint)
{
    (void)arg;
    (void)identity;
    (void)rep;
    (void)len;
    if (ffn)
        ffn((void *)data, hint);
    return 0;
}

void zp_dispatch_entry(zp_server *s, zmq_msg_t *f, int n)
{
    zp_frames m = {.n = n + 1};
    zmq_msg_init(&m.f[0]); /* no identity: nobody is answered */
    for (int i = 0; i < n; i++) {
        zmq_msg_init(&m.f[i + 1]);
        zmq_msg_copy(&m.f[i + 1], &f[i]);
        m.bytes += zmq_msg_size(&f[i]);
    }
    zp_reply_sink own = s->sink;
    s->sink = (zp_reply_sink){.send = discard};
    s->applying = true;
    zp_dispatch(s, &m);
    s->applying = false;
    s->sink = own;
    zp_wire_frames_close(&m);
}
