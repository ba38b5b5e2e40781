/*
 * follow.c - see follow.h. An entry is applied only if it comes from the
 * primary this replica follows, at the epoch it knows, and is the next
 * LSN; anything else is refused (logged once per link) and the link is
 * made again from the last entry applied, so a gap is never skipped.
 */
#include "follow.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "curve.h"
#include "log.h"
#include "now.h"
#include "rmsg.h"
#include "server.h"
#include "zeps_errors.h"

#define FOLLOW_RETRY_S 0.5 /* a FOLLOW unanswered, or refused, is sent again after this */
#define APPLY_BATCH    256 /* entries applied per loop turn, at most */

static void on_poll_closed(uv_handle_t *h)
{
    free(h);
}

static void link_close(zp_follow *f)
{
    if (f->poll) {
        uv_poll_stop(f->poll);
        uv_close((uv_handle_t *)f->poll, on_poll_closed);
        f->poll = NULL;
    }
    if (f->sock) {
        zmq_close(f->sock);
        f->sock = NULL;
    }
    f->accepted = false;
    f->endpoint[0] = '\0';
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    zp_server *s = h->data;
    s->follow.kick(s);
}

/* Send FOLLOW: this replica, its member node, the log it holds and where
 * it ends. */
static void ask(zp_server *s)
{
    zp_follow *f = &s->follow;
    Zeps__Header h;
    zp_rmsg_header(s, &h, ZEPS__OP__FOLLOW, f->epoch);
    h.member = s->role.me;
    f->asked_s = zp_now_s();
    f->accepted = false;
    if (zp_wire_send_header(f->sock, &h, ZMQ_DONTWAIT) != 0)
        zp_debug("FOLLOW to %s not sent: %s", f->endpoint, zmq_strerror(zmq_errno()));
}

static void link_open(zp_server *s)
{
    zp_follow *f = &s->follow;
    const zp_role *role = &s->role;
    f->sock = zmq_socket(s->zctx, ZMQ_DEALER);
    int zero = 0, linger = 0;
    zmq_setsockopt(f->sock, ZMQ_SNDHWM, &zero, sizeof(zero));
    zmq_setsockopt(f->sock, ZMQ_RCVHWM, &zero, sizeof(zero));
    zmq_setsockopt(f->sock, ZMQ_LINGER, &linger, sizeof(linger));
    char err[512] = "";
    if (zp_curve_apply_server_pair(&s->cfg, f->sock, err, sizeof(err)) != 0) {
        zp_error("cannot follow the primary over CURVE: %s", err);
        zmq_close(f->sock);
        f->sock = NULL;
        return;
    }
    char ep[ZP_ENDPOINT_MAX + 16];
    zp_wire_canonical_endpoint(role->primary_endpoint, ep, sizeof(ep));
    int fd = -1;
    size_t len = sizeof(fd);
    if (zmq_connect(f->sock, ep) != 0 || zmq_getsockopt(f->sock, ZMQ_FD, &fd, &len) != 0) {
        zp_error("cannot follow the primary at %s: %s", role->primary_endpoint,
                 zmq_strerror(zmq_errno()));
        zmq_close(f->sock);
        f->sock = NULL;
        return;
    }
    f->poll = malloc(sizeof(*f->poll));
    uv_poll_init(&s->loop, f->poll, fd);
    f->poll->data = s;
    uv_poll_start(f->poll, UV_READABLE, on_poll);
    snprintf(f->endpoint, sizeof(f->endpoint), "%s", role->primary_endpoint);
    f->epoch = role->epoch;
    snprintf(f->member, sizeof(f->member), "%s", role->me);
    f->why[0] = '\0';
    zp_info("following the primary, replica %d at %s (epoch %" PRIu64 "), from entry %" PRIu64,
            role->primary_replica, f->endpoint, f->epoch, s->repl.lsn);
    ask(s);
}

static void refuse(zp_server *s, const char *fmt, uint64_t a, uint64_t b)
{
    zp_follow *f = &s->follow;
    char why[256];
    snprintf(why, sizeof(why), fmt, a, b);
    f->refused++;
    if (strcmp(why, f->why) != 0)
        zp_warn("replication from %s: %s", f->endpoint, why);
    snprintf(f->why, sizeof(f->why), "%s", why);
}

/* One entry: [REPLICATE header][the request's header][payloads]. Checks
 * it and keeps it in this replica's log: returns 1 if it is to be applied
 * now, 0 if not (applied already, or of an older epoch), -1 if the link
 * must be made again from the last entry applied. */
static int take_entry(zp_server *s, zp_frames *m, const Zeps__Header *h)
{
    zp_follow *f = &s->follow;
    if (h->epoch != f->epoch || h->log_base != s->repl.base) {
        refuse(s, "an entry of epoch %" PRIu64 " refused: this replica follows epoch %" PRIu64,
               h->epoch, f->epoch);
        return h->epoch > f->epoch ? -1 : 0;
    }
    if (h->lsn <= s->repl.lsn)
        return 0; /* sent again after a new FOLLOW: applied already */
    if (h->lsn != s->repl.lsn + 1 || m->n < 2) {
        refuse(s, "entry %" PRIu64 " refused: the next is %" PRIu64, h->lsn, s->repl.lsn + 1);
        return -1;
    }
    /* first: the handler may move the frames; the entry keeps the epoch it was logged at */
    zp_rlog_keep(&s->repl, &m->f[1], m->n - 1, h->lsn, h->lsn_epoch ? h->lsn_epoch : h->epoch);
    return 1;
}

/* The primary's answer to FOLLOW, or an error. */
static void answer(zp_server *s, const Zeps__Header *h)
{
    zp_follow *f = &s->follow;
    if (h->op == ZEPS__OP__FOLLOW) {
        f->accepted = true;
        f->why[0] = '\0';
        return;
    }
    f->refused++;
    const char *text = h->error_text ? h->error_text : "";
    if (strcmp(text, f->why) != 0)
        zp_warn("the primary at %s refused to be followed (%s): %s", f->endpoint,
                zeps_errname(h->error), text);
    snprintf(f->why, sizeof(f->why), "%s", text);
}

/* Tell the primary how many bytes of its state this replica has. */
static void ack_state(zp_server *s, uint64_t got)
{
    zp_follow *f = &s->follow;
    Zeps__Header h;
    zp_rmsg_header(s, &h, ZEPS__OP__REPLICATE, f->epoch);
    h.flags = ZP_FLAG_STATE;
    h.offset = got;
    zp_wire_send_header(f->sock, &h, ZMQ_DONTWAIT);
}

/* A chunk of the primary's whole state; -1 if the link must be made again. */
static int take_chunk(zp_server *s, zp_frames *m, const Zeps__Header *h)
{
    uint64_t got = 0;
    if (h->epoch != s->follow.epoch)
        return 0;
    int rc = zp_xfer_take(s, h, m, &got);
    if (rc == 0)
        ack_state(s, got);
    if (rc == 1) {
        zp_rlog_reset(&s->repl, h->lsn, h->lsn_epoch, h->log_base); /* the log follows from there */
        ack_state(s, h->count);
    }
    return rc < 0 ? -1 : 0;
}

/* Tell the primary how far this replica's log goes (every entry in it is
 * applied, or is being applied in this call: see apply_entry). */
static void ack(zp_server *s)
{
    zp_follow *f = &s->follow;
    if (!f->sock || s->repl.lsn == f->acked)
        return;
    Zeps__Header h;
    zp_rmsg_header(s, &h, ZEPS__OP__REPLICATE, f->epoch);
    if (zp_wire_send_header(f->sock, &h, ZMQ_DONTWAIT) == 0)
        f->acked = s->repl.lsn;
}

/* Take an entry and apply it. The last entry waiting is acknowledged
 * before it is applied, so that the primary's reply, and the worker's
 * next request, overlap this replica's apply instead of waiting for it
 * (entries that arrived together get one acknowledgement, the last's).
 * What the acknowledgement promises holds all the same: the entry is in
 * this replica's log, and it is applied in this very call, before the
 * loop does anything else (a role change, a FOLLOW, a request), so an
 * acknowledged entry outlives the primary as an applied one would
 * (docs/replication.md, "acks=all"). Returns what take_entry did. */
static int apply_entry(zp_server *s, zp_frames *m, const Zeps__Header *h)
{
    int rc = take_entry(s, m, h);
    if (rc <= 0)
        return rc;
    if (!zp_follow_pending(s))
        ack(s);
    s->follow.apply(s, &m->f[1], m->n - 1);
    return 0;
}

/* Apply what arrived, at most APPLY_BATCH entries; 1 if more wait. */
static int drain(zp_server *s)
{
    zp_follow *f = &s->follow;
    for (int i = 0; i < APPLY_BATCH && f->sock; i++) {
        zp_frames m;
        if (zp_wire_frames_recv(f->sock, &m, ZMQ_DONTWAIT) != 0)
            return 0;
        Zeps__Header *h = m.n >= 1 ? zp_wire_unpack_header(&m.f[0]) : NULL;
        int again = 0;
        if (h && h->op == ZEPS__OP__REPLICATE && (h->flags & ZP_FLAG_STATE))
            again = take_chunk(s, &m, h);
        else if (h && h->op == ZEPS__OP__REPLICATE)
            again = apply_entry(s, &m, h);
        else if (h)
            answer(s, h);
        if (h)
            zeps__header__free_unpacked(h, NULL);
        zp_wire_frames_close(&m);
        if (again) {
            ask(s);
            return 0;
        }
    }
    return f->sock != NULL;
}

int zp_follow_check(zp_server *s)
{
    zp_follow *f = &s->follow;
    const zp_role *role = &s->role;
    if (!s->repl.on || s->stopping)
        return 0;
    bool want = role->kind == ZP_ROLE_BACKUP && role->primary_endpoint[0] && role->me[0];
    if (f->sock &&
        (!want || role->epoch != f->epoch || strcmp(role->primary_endpoint, f->endpoint) != 0 ||
         strcmp(role->me, f->member) != 0))
        link_close(f);
    if (want && !f->sock)
        link_open(s);
    if (!f->sock)
        return 0;
    int more = drain(s);
    ack(s);
    if (!f->accepted && zp_now_s() - f->asked_s > FOLLOW_RETRY_S)
        ask(s);
    /* what arrived since drain's last receive: the loop's check handle
     * reads ZMQ_EVENTS after this turn (server.c), as after every turn */
    return more;
}

int zp_follow_pending(zp_server *s)
{
    zp_follow *f = &s->follow;
    int events = 0;
    size_t len = sizeof(events);
    if (!f->sock || zmq_getsockopt(f->sock, ZMQ_EVENTS, &events, &len) != 0)
        return 0;
    return (events & ZMQ_POLLIN) != 0;
}

void zp_follow_stop(zp_server *s)
{
    link_close(&s->follow);
    zp_xfer_in_fini(&s->follow.xin);
}
