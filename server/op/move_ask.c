/*
 * move_ask.c - the window between a move's two commits, without
 * coordination (docs/elastic.md, "What each failure does"): the target
 * commits when it takes the move's map (SLOTS), the source when it gets
 * COMMIT, one round trip later. A source whose cut-over bound or tool's
 * lease ends after its last rows were sent cannot tell by time whether
 * the target committed in between, so it asks the target (MOVE step ASK,
 * docs/protocol.md "Moving slots") instead of guessing:
 *
 * - committed: the source commits as at COMMIT (its parked requests
 *   answered EMOVED naming the target);
 * - not committed: the target ends its part first (it drops what it
 *   imported, and refuses a SLOTS of that map from then on: a tool's late
 *   commit cannot land), answers so, and the source aborts;
 * - no answer: nobody can tell, so the source keeps the slots' requests
 *   parked (their clients time out and resend) and asks again, waiting
 *   twice as long each time up to ASK_MAX_S, each time said in its log and
 *   in STATS, until the target answers or an operator sends COMMIT or
 *   ABORT (zepsctl shards resolve).
 *
 * Before the last rows were sent the target cannot have committed (a tool
 * sends SLOTS only after a ROWS page after FREEZE came back empty, the
 * same check COMMIT makes), and the source aborts by time as before. With
 * coordination the map in ZooKeeper decides (zkmap.c) and nothing here
 * runs. The question goes on a DEALER of its own, polled on the loop's
 * tick (100 ms), and made anew for every ask so nothing queues behind a
 * dead target.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "curve.h"
#include "log.h"
#include "move.h"
#include "now.h"
#include "ops.h"
#include "server.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps_errors.h"

#define ASK_FIRST_S 0.25 /* the first answer is awaited this long ... */
#define ASK_MAX_S   4.0  /* ... then twice as long each time, up to this */

/* Close the link to the target, if any. */
static void link_close(zp_move *m)
{
    if (m->ask_sock)
        zmq_close(m->ask_sock); /* linger 0: an unsent question is dropped */
    m->ask_sock = NULL;
}

/* The endpoint of shard k: the map's for a shard that joined at run
 * time, the cluster file's otherwise. */
static const char *endpoint_of(const zp_server *s, int k)
{
    const char *ep = zp_slotmap_endpoint(s->slots, k);
    return ep ? ep : zp_config_endpoint(&s->cfg, k, 0);
}

/* A new DEALER to the target, connected; NULL with why. */
static void *link_open(zp_server *s, const char *ep, char *why, size_t len)
{
    char cep[ZP_ENDPOINT_MAX + 16];
    void *sock = zmq_socket(s->zctx, ZMQ_DEALER);
    int linger = 0;
    if (!sock) {
        snprintf(why, len, "%s", zmq_strerror(zmq_errno()));
        return NULL;
    }
    zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
    if (zp_curve_apply_server_pair(&s->cfg, sock, why, len) != 0)
        goto fail;
    zp_wire_canonical_endpoint(ep, cep, sizeof(cep));
    if (zmq_connect(sock, cep) != 0) {
        snprintf(why, len, "%s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    return sock;
fail:
    zmq_close(sock);
    return NULL;
}

/* Send ASK with the move's map on a new link; 0, or -1 with why. */
static int ask(zp_server *s, char *why, size_t len)
{
    zp_move *m = s->move;
    link_close(m);
    m->ask_sock = link_open(s, endpoint_of(s, m->peer), why, len);
    if (!m->ask_sock)
        return -1;
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__MOVE;
    h.rank = 0xffffffffu; /* as a tool: the servers' own key may speak so */
    h.req_id = m->asks;
    h.shard = (uint32_t)s->shard;
    h.move_step = ZP_MOVE_ASK;
    h.move_peer = (uint32_t)s->shard; /* the source asking */
    size_t n = zp_slotmap_wire_size(m->next);
    uint8_t *wire = zp_alloc(n);
    zp_slotmap_encode(m->next, wire);
    int rc = zp_wire_send_header(m->ask_sock, &h, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc == 0)
        rc = zp_wire_send_data(m->ask_sock, wire, n, NULL, NULL, ZMQ_DONTWAIT);
    free(wire);
    if (rc != 0)
        snprintf(why, len, "%s", zmq_strerror(zmq_errno()));
    return rc;
}

/* The target's answer, if one came: 1 committed, 0 not; -1 none yet (an
 * error answer is logged and counts as none). */
static int answer(zp_server *s)
{
    zp_move *m = s->move;
    zp_frames f;
    int got = -1;
    while (got < 0 && m->ask_sock && zp_wire_frames_recv(m->ask_sock, &f, ZMQ_DONTWAIT) == 0) {
        Zeps__Header *h = f.n > 0 ? zp_wire_unpack_header(&f.f[0]) : NULL;
        zp_wire_frames_close(&f);
        if (h && h->error)
            zp_warn("move of %u slots to shard %d: shard %d answered ASK with an error (%s): %s",
                    m->nmoving, m->peer, m->peer, zeps_strerror(h->error),
                    h->error_text ? h->error_text : "");
        else if (h && h->op == ZEPS__OP__MOVE)
            got = h->count == 1;
        if (h)
            zeps__header__free_unpacked(h, NULL);
    }
    return got;
}

/* Ask (again), said in the log and in STATS. */
static void ask_again(zp_server *s, double now)
{
    zp_move *m = s->move;
    const char *ep = endpoint_of(s, m->peer);
    char why[256] = "";
    m->ask_wait_s = m->asks == 0 ? ASK_FIRST_S : m->ask_wait_s * 2;
    m->ask_wait_s = m->ask_wait_s > ASK_MAX_S ? ASK_MAX_S : m->ask_wait_s;
    if (m->asks == 0) {
        const char *by =
            now - m->heard_s > m->lease_s ? "the tool's lease" : "the cut-over's bound";
        m->doubt_s = now;
        zp_warn("move of %u slots to shard %d ends by time (%s): asking shard %d at %s whether "
                "it committed the map of epoch %" PRIu64 " before aborting",
                m->nmoving, m->peer, by, m->peer, ep, zp_slotmap_epoch(m->next));
    } else {
        zp_error("move of %u slots to shard %d in doubt for %.1f s: shard %d at %s did not "
                 "answer whether it committed the map of epoch %" PRIu64 " (asked %u times); "
                 "the slots' requests stay parked until it answers or an operator resolves it "
                 "(zepsctl shards resolve --from %d --to %d --outcome commit|abort)",
                 m->nmoving, m->peer, now - m->doubt_s, m->peer, ep, zp_slotmap_epoch(m->next),
                 m->asks, s->shard, m->peer);
    }
    m->asks++;
    m->ask_s = now;
    if (ask(s, why, sizeof(why)) != 0)
        zp_error("move of %u slots to shard %d: cannot ask it at %s: %s", m->nmoving, m->peer, ep,
                 why);
}

bool zp_move_ask(zp_server *s)
{
    zp_move *m = s->move;
    if (s->role.coord || m->role != ZP_MOVE_SOURCE || !m->frozen || !m->drained)
        return false; /* the target cannot have committed: abort by time */
    double now = zp_now_s();
    int got = answer(s);
    if (got == 1) {
        zp_warn("move of %u slots to shard %d: shard %d committed the map of epoch %" PRIu64
                " (asked after %.1f s): committing here as at COMMIT",
                m->nmoving, m->peer, m->peer, zp_slotmap_epoch(m->next), now - m->doubt_s);
        zp_move_op_commit(s);
    } else if (got == 0) {
        char why[96];
        snprintf(why, sizeof(why), "ended by time, and shard %d, asked, had not committed it",
                 m->peer);
        zp_move_op_abort(s, why);
    } else {
        if (m->asks == 0 || now - m->ask_s >= m->ask_wait_s)
            ask_again(s, now);
        snprintf(m->doubt, sizeof(m->doubt), /* for STATS, as of this tick */
                 "move of %u slots to shard %d in doubt for %.1f s: asked %u times whether it "
                 "committed the map of epoch %" PRIu64 "; requests of the slots parked",
                 m->nmoving, m->peer, now - m->doubt_s, m->asks, zp_slotmap_epoch(m->next));
    }
    return true;
}

/* Whether `map` (newer than `next`) still gives shard a a slot that
 * `next` gives to shard b: then the move of `next` (from a to b) has not
 * committed. A source in doubt is in no other move, so no later map gave
 * it back a slot of the move. */
static bool still_gives(const zp_slotmap *map, const zp_slotmap *next, int a, int b)
{
    for (uint32_t k = 0; k < zp_slotmap_slots(next); k++)
        if (zp_slotmap_slot_owner(next, k) == b && zp_slotmap_slot_owner(map, k) == a)
            return true;
    return false;
}

/* The target's side: not committed, so its part of that move ends (if it
 * still has one) and a SLOTS of the map is refused from now on. */
static void fence(zp_server *s, zp_slotmap **next, int a)
{
    zp_move *m = s->move;
    if (m && m->role == ZP_MOVE_TARGET && m->peer == a && zp_slotmap_same(*next, m->next))
        zp_move_op_abort(s, "its source asked what became of it: not committed here");
    if (zp_slotmap_epoch(*next) <= zp_slotmap_epoch(s->slots))
        return; /* a SLOTS of it is refused as not newer anyway */
    zp_slotmap_destroy(&s->fenced);
    s->fenced = *next; /* the shard owns it */
    *next = NULL;
    s->fenced_source = a;
}

void zp_move_ask_on(zp_server *s, zp_request *r)
{
    const Zeps__Header *h = r->h;
    zp_slotmap *next = NULL;
    char why[384] = "one frame (the move's map) expected";
    int rc = r->npayload == 1
                 ? zp_slotmap_decode(&next, zmq_msg_data(r->payload), zmq_msg_size(r->payload),
                                     s->nshards, why, sizeof(why))
                 : ZEPS_EPROTO;
    int a = (int)h->move_peer;
    if (rc == 0 && (zp_slotmap_slots(next) != zp_slotmap_slots(s->slots) || a == s->shard)) {
        snprintf(why, sizeof(why), "a map of %u slots from shard %d; shard %d's has %u",
                 zp_slotmap_slots(next), a, s->shard, zp_slotmap_slots(s->slots));
        rc = ZEPS_EINVAL;
    }
    if (rc != 0) {
        zp_slotmap_destroy(&next);
        zp_reply_error(s, r->identity, h, rc, "MOVE ASK: %s", why);
        return;
    }
    uint64_t epoch = zp_slotmap_epoch(next);
    uint64_t have = zp_slotmap_epoch(s->slots);
    bool done = have == epoch ? zp_slotmap_same(s->slots, next) /* that very map */
                              : have > epoch && !still_gives(s->slots, next, a, s->shard);
    if (!done)
        fence(s, &next, a);
    zp_warn("shard %d asked what became of its move to this shard (map epoch %" PRIu64 "): %s", a,
            epoch,
            done ? "committed here" : "not committed here; a SLOTS of that map is refused now");
    zp_slotmap_destroy(&next);
    Zeps__Header rep;
    zp_reply_init(s, h, &rep);
    rep.count = done;
    rep.cursor = zp_slotmap_epoch(s->slots);
    zp_reply_send(s, r->identity, &rep, NULL, 0, NULL, NULL);
}
