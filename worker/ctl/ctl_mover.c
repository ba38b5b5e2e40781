/*
 * ctl_mover.c - the live move of a slot set as a tool drives it
 * (docs/elastic.md, "Live migration"): `zepsctl shards move` makes one
 * (ctl_shards.c), `zepsctl shards rebalance` one at a time
 * (ctl_rebalance.c); ctl_mover.h is the interface.
 *
 * The tool drives the MOVE steps of docs/protocol.md ("Moving slots") on
 * raw DEALER sockets, one request in flight but for pages (copy): BEGIN
 * at the source and IMPORT at the target with the map to commit (the
 * source's map with the slots given to the target, one epoch up); then
 * pages of rows from the
 * source (ROWS) put to the target (PUT), round after round, until what
 * changed meanwhile is small; FREEZE at the source and its last rows;
 * SLOTS with the map to the target and every other shard; COMMIT at the
 * source. Any failure before the target took the map sends ABORT to both
 * (and a tool that dies is aborted by the shards' lease): nothing changes.
 * With coordination (replicated shards) the commit point is the write of
 * the map to ZooKeeper instead (ctl_zkmap.c), which the shards watch;
 * SLOTS and COMMIT then only hasten it. Every request waits at most
 * --timeout-ms.
 */
#include "ctl_mover.h"
#include "ctl_mover_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "alloc.h"
#include "config.h"
#include "ctl_interrupt.h"
#include "ctl_pace.h"
#include "ctl_primary.h"
#include "ctl_zkmap.h"
#include "curve.h"
#include "exitcode.h"
#include "now.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"
#include "zeps.pb-c.h"

/* Send h (+ payload) to shard k and wait for its reply to h's req_id:
 * 0 with *rep (the caller frees it) and, if data is not NULL, its payload
 * frame; the error code with m->err otherwise (*rep NULL). */
static int rpc_send(mv *m, int k, Zeps__Header *h, const void *payload, size_t len)
{
    h->version = ZP_PROTOCOL_VERSION;
    h->rank = 0xffffffffu;
    h->req_id = ++m->req_id;
    size_t hl = zeps__header__get_packed_size(h);
    uint8_t *hb = zp_alloc(hl);
    zeps__header__pack(h, hb);
    int rc = zmq_send(m->sock[k], hb, hl, payload ? ZMQ_SNDMORE : 0);
    free(hb);
    if (rc >= 0 && payload)
        rc = zmq_send(m->sock[k], payload, len, 0);
    if (rc < 0) {
        snprintf(m->err, sizeof(m->err), "%s to shard %d: send failed: %s", zp_wire_op_name(h->op),
                 k, zmq_strerror(zmq_errno()));
        return ZEPS_ETRANSPORT;
    }
    return 0;
}

/* "/STEP" for a MOVE step, else "". */
static const char *step_name(const Zeps__Header *h)
{
    static const char *const names[] = {"/?",   "/BEGIN",  "/IMPORT", "/ROWS",
                                        "/PUT", "/FREEZE", "/COMMIT", "/ABORT"};
    if (h->op != ZEPS__OP__MOVE)
        return "";
    return h->move_step < sizeof(names) / sizeof(names[0]) ? names[h->move_step] : names[0];
}

/* The reply to h (sent by rpc_send to shard k), as rpc. */
static int rpc_recv(mv *m, int k, const Zeps__Header *h, Zeps__Header **rep, zmq_msg_t *data)
{
    *rep = NULL;
    double until = zp_now_s() + m->o.timeout_ms / 1000.0;
    for (;;) {
        zmq_pollitem_t it = {.socket = m->sock[k], .events = ZMQ_POLLIN};
        long left = (long)((until - zp_now_s()) * 1000);
        int got =
            left > 0 && !(zp_ctl_interrupt_taken() && !m->aborting) ? zmq_poll(&it, 1, left) : 0;
        if (got < 0 && zmq_errno() == EINTR && !zp_ctl_interrupt_taken())
            continue;
        if (zp_ctl_interrupt_taken() && !m->aborting) {
            snprintf(m->err, sizeof(m->err), "interrupted (%s) waiting for shard %d",
                     zp_ctl_interrupt_taken() == SIGINT ? "SIGINT" : "SIGTERM", k);
            return ZEPS_ECLOSED;
        }
        if (got != 1) {
            snprintf(m->err, sizeof(m->err), "shard %d (%s) did not answer %s%s within %d ms", k,
                     m->ep[k], zp_wire_op_name(h->op), step_name(h), m->o.timeout_ms);
            return ZEPS_ETIMEDOUT;
        }
        zp_frames f;
        if (zp_wire_frames_recv(m->sock[k], &f, 0) != 0)
            continue;
        Zeps__Header *r = f.n >= 1 ? zp_wire_unpack_header(&f.f[0]) : NULL;
        if (!r || r->req_id != h->req_id) { /* a late answer to an earlier request */
            if (r)
                zeps__header__free_unpacked(r, NULL);
            zp_wire_frames_close(&f);
            continue;
        }
        if (r->op == ZEPS__OP__ERROR) {
            snprintf(m->err, sizeof(m->err), "shard %d: %s (%s)", k,
                     r->error_text ? r->error_text : "?", zeps_errname(r->error));
            int code = r->error ? r->error : ZEPS_EINTERNAL;
            zeps__header__free_unpacked(r, NULL);
            zp_wire_frames_close(&f);
            return code;
        }
        if (data) {
            zmq_msg_init(data);
            if (f.n >= 2)
                zmq_msg_move(data, &f.f[1]);
        }
        zp_wire_frames_close(&f);
        *rep = r;
        return 0;
    }
}

static int rpc(mv *m, int k, Zeps__Header *h, const void *payload, size_t len, Zeps__Header **rep,
               zmq_msg_t *data)
{
    *rep = NULL;
    int rc = rpc_send(m, k, h, payload, len);
    return rc != 0 ? rc : rpc_recv(m, k, h, rep, data);
}

/* A MOVE step to shard k with an optional payload; as rpc. */
static int step(mv *m, int k, uint32_t st, uint32_t peer, uint32_t bound, const void *payload,
                size_t len, Zeps__Header **rep, zmq_msg_t *data)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.op = ZEPS__OP__MOVE;
    h.move_step = st;
    h.move_peer = peer;
    h.move_bound_ms = bound;
    return rpc(m, k, &h, payload, len, rep, data);
}

/* A socket to shard k (the next: k == m->n) at ep, with the cluster's
 * CURVE keys. */
static int open_socket(mv *m, int k, const char *ep)
{
    m->sock[k] = zmq_socket(m->zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(m->sock[k], ZMQ_LINGER, &zero, sizeof(zero));
    if (m->keys.server_public[0])
        zp_curve_apply_client(m->sock[k], m->keys.server_public, m->keys.client_public,
                              m->keys.client_secret);
    snprintf(m->ep[k], sizeof(m->ep[k]), "%s", ep);
    m->n = k + 1;
    if (zmq_connect(m->sock[k], ep) != 0) {
        snprintf(m->err, sizeof(m->err), "cannot connect to shard %d at %s: %s", k, ep,
                 zmq_strerror(zmq_errno()));
        return ZEPS_ETRANSPORT;
    }
    return 0;
}

static int open_sockets(mv *m)
{
    if (zp_curve_load_client(&m->cfg, &m->keys, m->err, sizeof(m->err)) != 0)
        return ZEPS_ECONFIG;
    char ep[ZP_MAX_SHARDS][ZP_ENDPOINT_MAX];
    for (int k = 0; k < m->cfg.num_shards; k++)
        snprintf(ep[k], sizeof(ep[k]), "%s", m->cfg.servers[k]);
    if (m->cfg.replicas > 1) { /* the steps go to the primaries */
        int rc =
            zp_ctl_primary_find(&m->cfg, &m->keys, m->o.timeout_ms, ep, m->err, sizeof(m->err));
        if (rc != 0 && !m->o.stopped_ok)
            return rc;
    }
    m->zctx = zmq_ctx_new();
    for (int k = 0; k < m->cfg.num_shards; k++)
        if (open_socket(m, k, ep[k]) != 0)
            return ZEPS_ETRANSPORT;
    return 0;
}

static void close_sockets(mv *m)
{
    for (int k = 0; k < m->n; k++)
        if (m->sock[k])
            zmq_close(m->sock[k]);
    if (m->zctx)
        zmq_ctx_term(m->zctx);
}

/* Shard k's map (its HELLO carries it unless it is the default). */
static int source_map(mv *m, int k, zp_slotmap **out)
{
    Zeps__Header h, *rep;
    zeps__header__init(&h);
    h.op = ZEPS__OP__HELLO;
    zmq_msg_t data;
    int rc = rpc(m, k, &h, NULL, 0, &rep, &data);
    if (rc != 0)
        return rc;
    zeps__header__free_unpacked(rep, NULL);
    if (zmq_msg_size(&data) == 0)
        rc = zp_slotmap_new_default(out, m->cfg.num_shards);
    else
        rc = zp_slotmap_decode(out, zmq_msg_data(&data), zmq_msg_size(&data), m->cfg.num_shards,
                               m->err, sizeof(m->err));
    zmq_msg_close(&data);
    return rc;
}

/* The map to commit: the source's with its slots among those of --slots
 * given to the target (*nslots of them); ZEPS_EINVAL with m->err when
 * --slots is malformed, names a slot past the map's or none of the
 * source's. */
static int next_map(mv *m, const zp_slotmap *cur, zp_slotmap **next, uint32_t *nslots)
{
    uint32_t n = zp_slotmap_slots(cur), count = 0;
    uint8_t *which = zp_alloc(n);
    int rc = 0;
    if (m->which)
        memcpy(which, m->which, n);
    else if (zp_slotmap_parse_set(m->o.slots, n, which, m->err, sizeof(m->err)) < 0)
        rc = ZEPS_EINVAL;
    for (uint32_t k = 0; rc == 0 && k < n; k++) {
        which[k] = which[k] && zp_slotmap_slot_owner(cur, k) == m->o.from;
        count += which[k];
    }
    if (rc == 0 && count == 0) {
        snprintf(m->err, sizeof(m->err),
                 "no slot of '%s' is on shard %d at map epoch %" PRIu64 ": nothing to move",
                 m->o.slots ? m->o.slots : "the set", m->o.from, zp_slotmap_epoch(cur));
        rc = ZEPS_EINVAL;
    }
    if (rc == 0)
        rc = zp_slotmap_moved(cur, which, m->o.to, next);
    free(which);
    *nslots = count;
    return rc;
}

/* The pages in flight: up to ZP_MV_WINDOW ROWS asked of the source ahead,
 * and as many PUTs at the target not yet acknowledged (each side answers
 * in order), so the source reads, the target writes and both sockets
 * carry pages at once. Rings of headers (req ids) and their sizes. */
enum { ZP_MV_WINDOW = 4 };
typedef struct flight {
    Zeps__Header ask[ZP_MV_WINDOW], put[ZP_MV_WINDOW];
    int a0, na, p0, np;
    bool cutover; /* its pages are never paced, nor counted in the pace */
} flight;

/* Ask the source for one more page. */
static int page_ask(mv *m, flight *f)
{
    Zeps__Header *h = &f->ask[(f->a0 + f->na++) % ZP_MV_WINDOW];
    zeps__header__init(h);
    h->op = ZEPS__OP__MOVE;
    h->move_step = ZP_MOVE_ROWS;
    h->move_peer = (uint32_t)m->o.to;
    h->count = m->o.page;
    return rpc_send(m, m->o.from, h, NULL, 0);
}

/* Read the target's oldest unanswered PUT acknowledgement. */
static int put_ack(mv *m, flight *f)
{
    Zeps__Header *ack;
    int i = f->p0;
    f->p0 = (f->p0 + 1) % ZP_MV_WINDOW;
    f->np--;
    int rc = rpc_recv(m, m->o.to, &f->put[i], &ack, NULL);
    if (rc == 0)
        zeps__header__free_unpacked(ack, NULL);
    return rc;
}

/* Read the source's oldest page: *n rows, *left still to send, *round the
 * source's round; put it to the target, its acknowledgement read later. */
static int page_put(mv *m, flight *f, uint64_t *n, uint64_t *left, uint64_t *round)
{
    Zeps__Header *rep;
    zmq_msg_t data;
    int rc = rpc_recv(m, m->o.from, &f->ask[f->a0], &rep, &data);
    f->a0 = (f->a0 + 1) % ZP_MV_WINDOW;
    f->na--;
    if (rc != 0)
        return rc;
    *n = rep->count;
    *left = rep->cursor;
    *round = rep->offset;
    if (rep->count > 0 && f->np == ZP_MV_WINDOW)
        rc = put_ack(m, f);
    if (rc == 0 && rep->count > 0) {
        int i = (f->p0 + f->np++) % ZP_MV_WINDOW;
        Zeps__Header *p = &f->put[i];
        zeps__header__init(p);
        p->op = ZEPS__OP__MOVE;
        p->move_step = ZP_MOVE_PUT;
        p->move_peer = (uint32_t)m->o.from;
        p->move_table = rep->move_table;
        p->count = rep->count;
        p->state_per_value = rep->state_per_value;
        p->flags = rep->flags & ZP_FLAG_HELD; /* bsp pushes held for open rounds, not rows */
        rc = rpc_send(m, m->o.to, p, zmq_msg_data(&data), zmq_msg_size(&data));
        if (rep->flags & ZP_FLAG_HELD) { /* sent; the copy ends only once every PUT was acked */
            m->held += rep->count;
        } else {
            m->rows += rep->count;
            m->bytes += zmq_msg_size(&data);
        }
        if (!f->cutover)
            zp_ctl_pace_note_rows(&m->pace, zp_now_s(), zmq_msg_size(&data), rep->count, m->o.page);
        p->move_table = NULL; /* rep's, freed below; the ack is matched by req_id */
    }
    zeps__header__free_unpacked(rep, NULL);
    zmq_msg_close(&data);
    return rc;
}

/* Copy rounds until at most --threshold rows are left (or --max-rounds
 * passed); with `last` (the cut-over: never paced), until nothing is
 * left. Pages asked past that end are put all the same (a row read is
 * always written). Pages are asked at --max-mb-s's pace. Prints each
 * round as it ends. */
static int copy(mv *m, bool last, double t0)
{
    uint64_t shown = m->rounds;
    flight f = {.cutover = last};
    int rc = 0;
    for (bool more = true; rc == 0 && (more || f.na > 0);) {
        while (rc == 0 && more && f.na < ZP_MV_WINDOW && (last || zp_ctl_pace_ask(&m->pace, f.na)))
            rc = page_ask(m, &f);
        uint64_t n, left, round, rows = m->rows, bytes = m->bytes;
        if (rc != 0 || (rc = page_put(m, &f, &n, &left, &round)) != 0)
            break;
        more = more && !(n == 0 && left == 0) &&
               (last || !(round >= 2 && (left <= m->o.threshold || round > m->o.max_rounds)));
        if (round > m->rounds)
            m->rounds = round;
        if (round > shown && shown > 0) {
            printf("round %" PRIu64 ": %" PRIu64 " rows (%.2f MB) sent, %.2f s in; round %" PRIu64
                   " holds %" PRIu64 " rows changed meanwhile\n",
                   shown, rows - m->round_rows, (bytes - m->round_bytes) / 1e6, zp_now_s() - t0,
                   round, n + left);
            if (m->pace.limit > 0 && !last)
                printf("  paced: %.2f MB in the last second (--max-mb-s %g), %.2f s waited\n",
                       zp_ctl_pace_bytes(&m->pace, zp_now_s()) / 1e6, m->o.max_mb_s, m->pace.slept);
            fflush(stdout);
        }
        if (round > shown) {
            shown = round;
            m->round_rows = rows;
            m->round_bytes = bytes;
        }
    }
    while (rc == 0 && f.np > 0) /* after a failure, late answers are skipped by req_id */
        rc = put_ack(m, &f);
    return rc;
}

/* Abort both sides (best effort, said so) and return `code`. */
static int abort_move(mv *m, int code)
{
    fprintf(stderr, "zepsctl shards move: %s\n", m->err);
    m->aborting = true;
    int ends[2] = {m->o.from, m->o.to}, peers[2] = {m->o.to, m->o.from};
    for (int i = 0; i < 2; i++) {
        Zeps__Header *rep;
        char keep[1024];
        snprintf(keep, sizeof(keep), "%s", m->err);
        if (step(m, ends[i], ZP_MOVE_ABORT, (uint32_t)peers[i], 0, NULL, 0, &rep, NULL) == 0)
            zeps__header__free_unpacked(rep, NULL);
        else
            fprintf(stderr,
                    "zepsctl shards move: abort at shard %d: %s (its lease ends the move)\n",
                    ends[i], m->err);
        snprintf(m->err, sizeof(m->err), "%s", keep);
    }
    fprintf(stderr, "zepsctl shards move: aborted; the slot map is unchanged\n");
    m->aborting = false;
    return zp_ctl_interrupt_taken() ? zp_ctl_interrupt_status() : code;
}

/* SLOTS with map `wire` to shard k. */
static int send_slots(mv *m, int k, const void *wire, size_t len)
{
    Zeps__Header h, *rep;
    zeps__header__init(&h);
    h.op = ZEPS__OP__SLOTS;
    int rc = rpc(m, k, &h, wire, len, &rep, NULL);
    if (rc == 0)
        zeps__header__free_unpacked(rep, NULL);
    return rc;
}

/* A test's fault hook: with ZEPS_FAULT_MOVE=<point> the tool stops itself
 * (SIGSTOP) there, so that a test can kill it or let a shard's bound pass
 * at that very step (docs/elastic.md, "The map in ZooKeeper"). */
static void fault(const char *point)
{
    const char *f = getenv("ZEPS_FAULT_MOVE");
    if (f && strcmp(f, point) == 0) {
        fprintf(stderr, "zepsctl shards move: ZEPS_FAULT_MOVE=%s: stopping here\n", point);
        fflush(stderr);
        raise(SIGSTOP);
    }
}

static int commit(mv *m, const void *wire, size_t len, uint64_t epoch, double t0, double c0,
                  uint64_t before);

/* Cut-over and commit, once the copy is done. */
static int cutover(mv *m, const void *wire, size_t len, uint64_t epoch, double t0)
{
    Zeps__Header *rep;
    double c0 = zp_now_s();
    int rc =
        step(m, m->o.from, ZP_MOVE_FREEZE, (uint32_t)m->o.to, m->o.cutover_ms, NULL, 0, &rep, NULL);
    if (rc != 0)
        return abort_move(m, ZP_EXIT_FAILED);
    zeps__header__free_unpacked(rep, NULL);
    uint64_t before = m->rows;
    if ((rc = copy(m, true, t0)) != 0)
        return abort_move(m, ZP_EXIT_FAILED);
    /* the commit: the target, then at once the source (the window between
     * the two is one round trip; docs/elastic.md "What each failure
     * does"), then the others, which hold no row of the slots */
    if ((zp_now_s() - c0) * 1e3 > m->o.cutover_ms / 2.0) {
        snprintf(m->err, sizeof(m->err),
                 "the cut-over's last rows took %.0f ms, over half its bound (--cutover-ms %u): "
                 "not committing so close to the source's abort",
                 (zp_now_s() - c0) * 1e3, m->o.cutover_ms);
        return abort_move(m, ZP_EXIT_FAILED);
    }
    zp_ctl_interrupt_hold(true); /* from here every step of the commit goes out */
    if (zp_ctl_interrupt_taken()) {
        zp_ctl_interrupt_hold(false);
        snprintf(m->err, sizeof(m->err), "interrupted before the commit");
        return abort_move(m, ZP_EXIT_FAILED);
    }
    fault("before-commit");
    rc = commit(m, wire, len, epoch, t0, c0, before);
    zp_ctl_interrupt_hold(false);
    return rc;
}

/* The commit (signals held): the map to ZooKeeper with coordination, SLOTS
 * to the target, COMMIT to the source, SLOTS to the others; the summary. */
static int commit(mv *m, const void *wire, size_t len, uint64_t epoch, double t0, double c0,
                  uint64_t before)
{
    Zeps__Header *rep;
    int rc;
    if (m->zk && (rc = zp_ctl_zkmap_commit(m->zk, wire, len, m->err, sizeof(m->err))) != 0)
        return rc == ZEPS_ESTALE ? abort_move(m, ZP_EXIT_FAILED) : zp_ctl_mover_say_undecided(m);
    fault("after-commit");
    if ((rc = send_slots(m, m->o.to, wire, len)) != 0 && !m->zk)
        return abort_move(m, ZP_EXIT_FAILED);
    zp_ctl_mover_say_hasten(m, m->o.to, rc, "SLOTS");
    fault("after-target");
    rc = step(m, m->o.from, ZP_MOVE_COMMIT, (uint32_t)m->o.to, 0, wire, len, &rep, NULL);
    double cut_ms = (zp_now_s() - c0) * 1e3, secs = zp_now_s() - t0;
    zp_ctl_mover_say_hasten(m, m->o.from, rc, "COMMIT");
    if (rc != 0 && !m->zk) {
        fprintf(stderr,
                "zepsctl shards move: shard %d took the map of epoch %" PRIu64
                " but the source did not commit: %s\nshard %d asks it when its cut-over's bound "
                "ends and commits by the answer; in doubt (zepsctl status), zepsctl shards "
                "resolve (docs/elastic.md, \"What each failure does\")\n",
                m->o.to, epoch, m->err, m->o.from);
        return ZP_EXIT_FAILED;
    }
    for (int k = 0; k < m->n; k++) /* a retired shard may be stopped for good */
        if (k != m->o.from && k != m->o.to && !m->retired[k] && send_slots(m, k, wire, len) != 0)
            fprintf(stderr,
                    "zepsctl shards move: shard %d did not take the map (%s): it holds no row "
                    "of the slots; its clients are redirected by the source\n",
                    k, m->err);
    char src[96]; /* what the source said; unanswered, it takes the map from ZooKeeper */
    snprintf(src, sizeof(src), rep ? "dropped %" PRIu64 " rows" : "takes the map from ZooKeeper",
             rep ? rep->count : 0);
    if (rep)
        zeps__header__free_unpacked(rep, NULL);
    zp_ctl_mover_say_report(m, m->rows - before, cut_ms, secs, src, epoch);
    return ZP_EXIT_OK;
}

static int run(mv *m)
{
    zp_slotmap *cur = NULL, *next = NULL;
    uint32_t nslots = 0;
    int rc = source_map(m, m->o.from, &cur);
    if (rc == 0 && m->zk) /* what the commit is conditional on */
        rc = zp_ctl_zkmap_begin(m->zk, m->o.from, zp_slotmap_epoch(cur), m->err, sizeof(m->err));
    if (rc == 0)
        rc = next_map(m, cur, &next, &nslots);
    zp_slotmap_destroy(&cur);
    if (rc != 0) {
        fprintf(stderr, "zepsctl shards move: %s\n", m->err);
        return rc == ZEPS_ETIMEDOUT || rc == ZEPS_ETRANSPORT ? ZP_EXIT_FAILED : ZP_EXIT_SETUP;
    }
    size_t len = zp_slotmap_wire_size(next);
    void *wire = zp_alloc(len);
    zp_slotmap_encode(next, wire);
    uint64_t epoch = zp_slotmap_epoch(next);
    zp_slotmap_destroy(&next);
    Zeps__Header *rep;
    double t0 = zp_now_s();
    rc = step(m, m->o.from, ZP_MOVE_BEGIN, (uint32_t)m->o.to, m->o.lease_ms, wire, len, &rep, NULL);
    if (rc != 0) {
        fprintf(stderr, "zepsctl shards move: %s\n", m->err);
        free(wire);
        return rc == ZEPS_ETIMEDOUT || rc == ZEPS_ETRANSPORT ? ZP_EXIT_FAILED : ZP_EXIT_SETUP;
    }
    printf("moving %u slots from shard %d to shard %d (map epoch %" PRIu64 " to commit): %" PRIu64
           " rows\n",
           nslots, m->o.from, m->o.to, epoch, rep->count);
    zeps__header__free_unpacked(rep, NULL);
    rc =
        step(m, m->o.to, ZP_MOVE_IMPORT, (uint32_t)m->o.from, m->o.lease_ms, wire, len, &rep, NULL);
    if (rc == 0) {
        zeps__header__free_unpacked(rep, NULL);
        rc = copy(m, false, t0);
        rc = rc == 0 ? cutover(m, wire, len, epoch, t0) : abort_move(m, ZP_EXIT_FAILED);
    } else {
        rc = abort_move(m, rc == ZEPS_ETIMEDOUT || rc == ZEPS_ETRANSPORT ? ZP_EXIT_FAILED
                                                                         : ZP_EXIT_SETUP);
    }
    free(wire);
    return rc;
}

int zp_ctl_mover_new(zp_mover **out, const zp_mv_opts *o, char *err, size_t errlen)
{
    mv *m = zp_alloc_zeroed(1, sizeof(*m));
    m->o = *o;
    zp_ctl_pace_init(&m->pace, o->max_mb_s);
    zp_ctl_interrupt_arm();
    if (zp_config_load(&m->cfg, o->conf, err, errlen) != 0) {
        free(m);
        return ZEPS_ECONFIG;
    }
    int rc = open_sockets(m);
    if (rc == 0 && m->cfg.replicas > 1)
        rc = zp_ctl_zkmap_open(&m->zk, &m->cfg, o->timeout_ms, m->err, sizeof(m->err));
    if (rc == 0 && o->joined && zp_ctl_mover_joined(m) != 0)
        m->err[0] = '\0'; /* shard 0 did not answer: each step then says which shard failed */
    if (rc != 0) {
        snprintf(err, errlen, "%s", m->err);
        close_sockets(m);
        zp_ctl_zkmap_close(&m->zk);
        free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void zp_ctl_mover_destroy(zp_mover **mp)
{
    if (!mp || !*mp)
        return;
    close_sockets(*mp);
    zp_ctl_zkmap_close(&(*mp)->zk);
    free(*mp);
    *mp = NULL;
}

int zp_ctl_mover_shards(const zp_mover *m)
{
    return m->n;
}

int zp_ctl_mover_base(const zp_mover *m)
{
    return m->cfg.num_shards;
}

const char *zp_ctl_mover_endpoint(const zp_mover *m, int k)
{
    return m->ep[k];
}

int zp_ctl_mover_connect(zp_mover *m, const char *endpoint)
{
    if (m->n >= ZP_MAX_SHARDS) {
        snprintf(m->err, sizeof(m->err), "%d shards already (at most %d)", m->n, ZP_MAX_SHARDS);
        return ZEPS_EINVAL;
    }
    return open_socket(m, m->n, endpoint);
}

int zp_ctl_mover_joined(zp_mover *m)
{
    /* the newest map among the file's shards: one restarted after it was
     * removed holds an older map, which may not name the joined shards */
    zp_slotmap *map = NULL;
    int rc = ZEPS_ETIMEDOUT;
    for (int k = 0; k < m->cfg.num_shards; k++) {
        zp_slotmap *got = NULL;
        if ((map && zp_slotmap_retired(map, k)) || source_map(m, k, &got) != 0)
            continue; /* a retired shard may be stopped for good: not waited for */
        if (!map || zp_slotmap_epoch(got) > zp_slotmap_epoch(map)) {
            zp_slotmap_destroy(&map);
            map = got;
        } else {
            zp_slotmap_destroy(&got);
        }
        rc = 0;
    }
    for (int k = m->n; rc == 0 && k < zp_slotmap_shards(map); k++)
        rc = open_socket(m, k, zp_slotmap_endpoint(map, k));
    for (int k = 0; rc == 0 && k < zp_slotmap_shards(map); k++)
        m->retired[k] = zp_slotmap_retired(map, k);
    zp_slotmap_destroy(&map);
    return rc;
}

bool zp_ctl_mover_retired(const zp_mover *m, int k)
{
    return m->retired[k] != 0;
}

const zp_config *zp_ctl_mover_config(const zp_mover *m)
{
    return &m->cfg;
}

int zp_ctl_mover_rpc(zp_mover *m, int k, Zeps__Header *h, const void *payload, size_t len,
                     Zeps__Header **rep, zmq_msg_t *data)
{
    return rpc(m, k, h, payload, len, rep, data);
}

int zp_ctl_mover_slots(zp_mover *m, int k, const zp_slotmap *map)
{
    size_t len = zp_slotmap_wire_size(map);
    void *wire = zp_alloc(len);
    zp_slotmap_encode(map, wire);
    int rc = send_slots(m, k, wire, len);
    free(wire);
    return rc;
}

const char *zp_ctl_mover_err(const zp_mover *m)
{
    return m->err;
}

int zp_ctl_mover_map(zp_mover *m, int k, zp_slotmap **out)
{
    return source_map(m, k, out);
}

int zp_ctl_mover_move(zp_mover *m, int from, int to, const uint8_t *which, const char *slots)
{
    m->o.from = from;
    m->o.to = to;
    m->o.slots = slots;
    m->which = which;
    m->rows = m->bytes = m->rounds = m->round_rows = m->round_bytes = m->held = 0;
    m->pace.peak = 0; /* per move; the sliding second goes on from the move before */
    m->pace.slept = 0;
    if (zp_ctl_interrupt_taken()) {
        fprintf(stderr, "zepsctl shards: interrupted: no further move begun\n");
        return zp_ctl_interrupt_status();
    }
    int rc = run(m);
    m->which = NULL;
    return rc;
}
