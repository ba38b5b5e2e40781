/*
 * req.c - libzeps: the request engine, the layer every other part of the
 * library builds on (only shard.c is below it).
 *
 * A request (zp_req, the caller's zeps_req) is cut by the layer above into
 * one sub-request per shard it touches; all of them are sent at once and
 * collected in zeps_wait(), which polls every shard socket, matches replies
 * by request id, and resends what has been unanswered for the request
 * timeout. Resends go out on the same socket (ZeroMQ reconnects by itself),
 * with the same sequence number, so the server recognises a duplicate and
 * never applies it twice. A pull or barrier the server parks is kept alive
 * by its PARKED answers to those resends, so a long BSP wait is not mistaken
 * for a dead server, while a server that answers nothing fails the request
 * with ZEPS_ETIMEDOUT after max_retries.
 *
 * A reply is written where its sub-request says (a destination buffer, a
 * scatter of sparse rows, a kept frame for views, version counters), so the
 * engine never calls back into the layers that built the request.
 *
 * A shard's transport (xport.h) carries each request: on the shard's
 * DEALER, or for a co-located shard in a shared-memory segment and on the
 * connection it was attached on; replies are read from both the same way.
 *
 * Push payloads are handed to ZeroMQ without copying; a counter in the
 * request drops as ZeroMQ releases each frame, and zeps_wait() returns only
 * when it is zero, so the caller may reuse its buffer afterwards. When a
 * request fails, the shard's socket is closed (linger 0) and opened again
 * (shard.c), which makes ZeroMQ drop and release whatever it still queued.
 *
 * What a restarted shard means depends on the cluster's consistency mode;
 * the engine asks only the capability bits the HELLO reply carried
 * (ZP_CAP_ROLLBACK), never the mode's name. A CURVE key a shard refuses
 * (its monitor reports ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) fails the requests
 * waiting on that shard at once with ZEPS_EREFUSED and a message that says
 * what to fix, instead of timing out after every retry.
 *
 * In a replicated cluster (c->fo, failover.c) an ENOTPRIMARY reply, a lost
 * or refused connection and an unanswered request are handed to the
 * failover, which may move the shard's socket to the primary. A moved
 * shard gets HELLO first (same incarnation); its other requests are held
 * until that is answered, then resent with their sequence numbers, as
 * after an async shard restart: the duplicate window applies a resend once.
 * Held requests still spend their retries, so they fail (with what each
 * replica said) rather than wait for a primary forever.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "config.h"
#include "curve.h"
#include "log.h"
#include "alloc.h"
#include "now.h"
#include "rowcopy.h"
#include "wire.h"
#include "client.h"
#include "failover.h"
#include "giveup.h"
#include "join.h"
#include "payload.h"
#include "redirect.h"
#include "req.h"
#include "shard.h"
#include "xport.h"
#include "zeps.h"

static void sub_fill_header(const zeps_client *c, const zp_req_sub *s, Zeps__Header *h)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = (Zeps__Op)s->req->op;
    h->req_id = s->req_id;
    h->rank = c->rank;
    h->incarnation = c->incarnation;
    h->seq = s->seq;
    h->table = s->table;
    h->clock = s->req->clock;
    h->data_version = s->data_version;
    h->offset = s->offset;
    h->count = s->count;
    h->flags = s->flags;
    h->codec = s->codec;
    h->spec = (Zeps__TableSpec *)s->req->spec;
    h->cut_set = s->req->cut_set;
    h->recovery = s->req->recovery;
    h->evict_rank = s->req->evict_rank;
    h->state_per_value = s->spv;
    if (s->req->op == ZEPS__OP__CLOCK && c->shards[s->shard].maps) { /* a newer map comes back */
        h->slot_epoch = zp_slotmap_epoch(c->slots);
        h->flags |= ZP_FLAG_MAP;
    }
    if (s->compressed) {
        h->view_id = s->view_id;
        h->codec_fraction = s->cparams.fraction;
        h->codec_count = s->cparams.count;
        h->codec_block = s->cparams.block;
        h->codec_seed = s->cparams.seed;
    }
}

/* Whether s waits for its shard's HELLO: the shard moved to another
 * replica (failover.c), which must hear HELLO before anything else. */
static int held(const zeps_client *c, const zp_req_sub *s)
{
    return c->shards[s->shard].moved && s->req->op != ZEPS__OP__HELLO;
}

/* Send (or resend) one sub-request. A failed send is left to the retry
 * timer; a held one goes out after the HELLO (rehello). */
static void sub_send(zeps_client *c, zp_req_sub *s)
{
    zp_shard *sh = &c->shards[s->shard];
    Zeps__Header h;
    sub_fill_header(c, s, &h);
    int frame = !ZP_XPORT(sh)->place(sh, s, &h) && s->data; /* or in the transport (copied) */
    s->deadline_ns = zp_now_ns() + (uint64_t)c->opt.request_timeout_ms * 1000000ull;
    if (!s->sent_ns)
        s->sent_ns = zp_now_ns();
    if (held(c, s))
        return;
    if (c->drop_sends > 0 && s->req->op != ZEPS__OP__HELLO) {
        c->drop_sends--; /* lost on the wire: only a resend can deliver it */
        zp_debug("fault injection: %s to shard %d dropped", zp_wire_op_name(s->req->op), s->shard);
        return;
    }
    ZP_XPORT(sh)->send(sh, s, &h, frame);
}

/* Take s out of the list at *pp; 1 if it was there. */
static int unlink_in(zp_req_sub **pp, const zp_req_sub *s)
{
    for (; *pp; pp = &(*pp)->next)
        if (*pp == s)
            return (*pp = s->next, 1);
    return 0;
}

/* Take s out of its shard's list of outstanding subs, or out of the
 * redirected ones waiting to be split (c->moved). */
static void sub_unlink(zeps_client *c, zp_req_sub *s)
{
    zp_shard *sh = &c->shards[s->shard];
    if (unlink_in(&sh->out, s))
        sh->nout--;
    else
        unlink_in(&c->moved, s);
}

static void sub_finish(zeps_client *c, zp_req_sub *s, int err)
{
    if (s->done)
        return;
    s->done = 1;
    ZP_XPORT(&c->shards[s->shard])->done(&c->shards[s->shard], s);
    sub_unlink(c, s);
    s->req->ndone++;
    if (err && !s->req->err)
        s->req->err = err;
    zp_req_sub *p = s->parent; /* a redirect's piece answers for its parent */
    if (!p)
        return;
    if (err && !p->piece_err)
        p->piece_err = err;
    if (--p->pieces > 0)
        return;
    if (!p->piece_err && p->scatter.replied)
        (*p->scatter.replied)++;
    sub_finish(c, p, p->piece_err);
}

/* --- replies --- */

static zp_req_sub *find_sub(zp_shard *sh, uint64_t req_id)
{
    for (zp_req_sub *s = sh->out; s; s = s->next)
        if (s->req_id == req_id)
            return s;
    return NULL;
}

/* Shard k answered ERESTARTED: it was restored from a snapshot (it
 * restarted, or rolled back under bsp) since this worker last said HELLO.
 * When the cluster's mode has ZP_CAP_ROLLBACK (bsp) the whole job goes back
 * to the cut the reply names, so every
 * outstanding request is failed with ERESTARTED (progress() does it, outside
 * the receive loop) and the caller resumes through zeps_rollback(). In the
 * other modes (no ZP_CAP_ROLLBACK) the library says HELLO again and resends the shard's
 * outstanding requests with their sequence numbers: the shard restored the
 * duplicate window, so what it already holds is not applied twice. Returns
 * nonzero if sub s is to be finished with the error. */
static int on_restarted(zeps_client *c, int k, zp_req_sub *s, const Zeps__Header *h)
{
    zp_shard *sh = &c->shards[k];
    if (!sh->need_hello)
        zp_warn("shard %d was restored from snapshot set %016" PRIx64 " (clock %lld)%s", k,
                h->cut_set, (long long)h->cut,
                (c->caps & ZP_CAP_ROLLBACK) ? ": resuming the job from that cut"
                                            : ": saying HELLO again");
    sh->need_hello = 1;
    c->stats.restarts++;
    if (c->caps & ZP_CAP_ROLLBACK) {
        c->resume_clock = h->cut;
        c->resume_set = h->cut_set;
        c->resume_recovery = h->recovery;
        c->abort_all = 1;
        zp_fail(c, ZEPS_ERESTARTED,
                "shard %d was restored from snapshot set %016" PRIx64 ": resume from clock %lld", k,
                h->cut_set, (long long)h->cut);
        return 1;
    }
    s->deadline_ns = UINT64_MAX; /* resent after the HELLO (progress) */
    return 0;
}

/* The HELLO reply of shard k: its incarnation, where this worker resumes,
 * and what the cluster's consistency mode implies (caps). */
_Static_assert(ZEPS_CAP_CUTS == ZP_CAP_CUTS && ZEPS_CAP_ROLLBACK == ZP_CAP_ROLLBACK &&
                   ZEPS_CAP_BOUND == ZP_CAP_BOUND,
               "zeps.h's capability bits are the wire's");

/* Shard k moved to another replica (failover.c): what ZeroMQ queued went
 * with the old socket. A HELLO waiting there goes out again at once; the
 * rest waits for a HELLO's answer (progress starts one if none waits). */
static void on_moved(zeps_client *c, int k)
{
    for (zp_req_sub *s = c->shards[k].out; s; s = s->next)
        if (s->req->op == ZEPS__OP__HELLO)
            sub_send(c, s);
}

/* An ERROR reply h to sub s of shard k that is not s's answer: a restored
 * shard (ERESTARTED: s is resent after a HELLO, or failed with the job's
 * rollback), a backup (ENOTPRIMARY in a replicated cluster: s waits for
 * the primary, which the failover finds), a HELLO refused while a live
 * incarnation holds the rank (asked again). Returns 1 if it was one of
 * those (handled), 0 for an ordinary error. h stays the caller's. */
static int on_error_waits(zeps_client *c, int k, zp_req_sub *s, const Zeps__Header *h)
{
    zp_shard *sh = &c->shards[k];
    if (h->error == ZEPS_ERESTARTED && c->rank != ZEPS_RANK_TOOL && s->req->op != ZEPS__OP__HELLO) {
        if (on_restarted(c, k, s, h))
            sub_finish(c, s, ZEPS_ERESTARTED);
        return 1;
    }
    if (h->error == ZEPS_ENOTPRIMARY && c->fo) {
        if (zp_failover_on_notprimary(c, k, h))
            on_moved(c, k);
        return 1;
    }
    if (s->req->op == ZEPS__OP__HELLO && (h->flags & ZP_FLAG_PARKED)) {
        /* a live incarnation holds the rank (docs/faults.md): ask again later */
        if (!sh->held[0])
            zp_warn("shard %d: %s; asking again until hello_timeout_ms", k, h->error_text);
        snprintf(sh->held, sizeof(sh->held), "%s", h->error_text ? h->error_text : "rank held");
        return 1;
    }
    return 0;
}

/* The map c took retires shards whose HELLO waits: done (the map answers
 * for them) instead of retried until hello_timeout_ms. */
static void drop_retired_hellos(zeps_client *c)
{
    for (int k = 0; k < c->nshards; k++)
        for (zp_req_sub *s = c->shards[k].out, *next; s && !zp_client_live(c, k); s = next) {
            next = s->next;
            if (s->req->op != ZEPS__OP__HELLO)
                continue;
            zp_info("shard %d is retired (slot map epoch %" PRIu64 "): not waiting for it", k,
                    zp_slotmap_epoch(c->slots));
            sub_finish(c, s, 0);
        }
}

/* The answer h (frames m) to sub s of shard k, of s's own op: what it
 * carries goes where s says. 0 or the error (c->err). */
static int on_answer(zeps_client *c, int k, zp_req_sub *s, const Zeps__Header *h, zp_frames *m)
{
    zp_req *r = s->req;
    int err = 0;
    switch (r->op) {
    case ZEPS__OP__PULL:
        err = zp_payload_pull(c, s, h, m);
        if (err == 0 && s->version_out) /* the version pulled (a sparse table's pushes) */
            *s->version_out = h->data_version;
        break;
    case ZEPS__OP__HELLO:
        err = zp_join_hello(c, k, h);
        break;
    case ZEPS__OP__DECLARE:
        s->table = h->table;
        s->offset = h->offset;
        s->count = h->count;
        break;
    case ZEPS__OP__SCAN:
        err = zp_payload_scan(c, s, h, m);
        break;
    case ZEPS__OP__PUSH:
        c->stats.pushes_acked++;
        if (h->flags & ZP_FLAG_DROPPED)
            c->stats.dropped++;
        break;
    case ZEPS__OP__STATS:
        zp_payload_stats(r, h);
        break;
    default:
        break;
    }
    /* a newer map with HELLO (a map file's: known before the first
     * request) or CLOCK (a move this worker's ids never met) */
    if (err == 0 && (r->op == ZEPS__OP__HELLO || r->op == ZEPS__OP__CLOCK) &&
        h->slot_epoch > zp_slotmap_epoch(c->slots)) {
        zp_redirect_learn(c, k, m);
        drop_retired_hellos(c);
    }
    return err;
}

static void on_reply(zeps_client *c, int k, zp_frames *m)
{
    zp_shard *sh = &c->shards[k];
    Zeps__Header *h = m->n >= 1 ? zp_wire_unpack_header(&m->f[0]) : NULL;
    if (!h) {
        zp_warn("shard %d sent a reply that is not a zeps header; ignored", k);
        return;
    }
    char why[256]; /* a payload in shared memory becomes m's frame, released with m */
    int err = ZP_XPORT(sh)->resolve(sh, h, m, why, sizeof(why));
    zp_req_sub *s = find_sub(sh, h->req_id);
    if (!s) {
        zeps__header__free_unpacked(h, NULL); /* a late answer to a resend: already done */
        return;
    }
    zp_req *r = s->req;
    if (err) {
        zp_fail(c, err, "shard %d: %s", k, why);
    } else if (h->op == ZEPS__OP__ERROR && h->error == ZEPS_EMOVED &&
               zp_redirect_take(c, k, s, m)) {
        /* sent again split by owner (progress): off the shard's list */
        ZP_XPORT(sh)->done(sh, s);
        sub_unlink(c, s);
        s->next = c->moved;
        c->moved = s;
        zeps__header__free_unpacked(h, NULL);
        return;
    } else if (h->op == ZEPS__OP__ERROR && on_error_waits(c, k, s, h)) {
        zeps__header__free_unpacked(h, NULL);
        return;
    } else if (h->op == ZEPS__OP__ERROR) {
        err = h->error ? h->error : ZEPS_EINTERNAL;
        zp_fail(c, err, "shard %d: %s", k, h->error_text ? h->error_text : zeps_strerror(err));
    } else if (h->flags & ZP_FLAG_PARKED) {
        zp_giveup_parked(c, s, k, h); /* wait on, retries start over */
        zeps__header__free_unpacked(h, NULL);
        return;
    } else if (h->version != ZP_PROTOCOL_VERSION || (int)h->op != r->op) {
        err = zp_fail(c, ZEPS_EPROTO, "shard %d answered %s with %s (protocol %u)", k,
                      zp_wire_op_name(r->op), zp_wire_op_name(h->op), h->version);
    } else {
        err = on_answer(c, k, s, h, m);
    }
    zeps__header__free_unpacked(h, NULL);
    sub_finish(c, s, err);
}

/* Receive everything waiting on shard k: on its DEALER, then on its attach
 * connection if its requests go there (xport.h). */
static void drain_shard(zeps_client *c, int k)
{
    zp_frames m;
    while (zp_wire_frames_recv(c->shards[k].sock, &m, ZMQ_DONTWAIT) == 0 ||
           zp_xport_shm_recv(c, k, &m) == 1) {
        on_reply(c, k, &m);
        zp_wire_frames_close(&m);
    }
}

/* Resend or fail every outstanding sub past its deadline. In a replicated
 * cluster a HELLO unanswered, or any request unanswered twice (a parked
 * pull's resend is answered PARKED), makes the failover ask the replicas. */
static void check_deadlines(zeps_client *c)
{
    uint64_t now = zp_now_ns();
    for (int k = 0; k < c->nshards; k++) {
        zp_shard *sh = &c->shards[k];
        int failed = 0;
        for (zp_req_sub *s = sh->out, *next; s; s = next) {
            next = s->next;
            if (s->deadline_ns > now)
                continue;
            if (s->retries >= s->max_retries) {
                sub_finish(c, s, zp_giveup_error(c, k, s));
                failed = 1;
                continue;
            }
            if (c->fo && !held(c, s) && (s->req->op == ZEPS__OP__HELLO || s->retries >= 1))
                zp_failover_on_timeout(c, k);
            s->retries++;
            c->stats.retries += !held(c, s);
            if (s->req->op == ZEPS__OP__HELLO)
                zp_info("waiting for shard %d at %s (attempt %d of %d)", k, sh->endpoint,
                        s->retries + 1, s->max_retries + 1);
            else
                zp_debug("resending %s %" PRIu64 " to shard %d (retry %d)",
                         zp_wire_op_name(s->req->op), s->seq, k, s->retries);
            sub_send(c, s);
        }
        if (failed) {
            /* Drop what ZeroMQ still queues for this shard (and the buffers it
             * references); whatever is still outstanding goes out again. */
            zp_shard_reset(c, k);
            for (zp_req_sub *s = sh->out; s; s = s->next)
                sub_send(c, s);
        }
    }
}

/* ZP_CAP_ROLLBACK, a shard restarted: every outstanding request fails with ERESTARTED;
 * the sockets are reset so ZeroMQ drops (and releases) what it queued. */
static void abort_outstanding(zeps_client *c)
{
    c->abort_all = 0;
    while (c->moved)
        sub_finish(c, c->moved, ZEPS_ERESTARTED);
    for (int k = 0; k < c->nshards; k++) {
        zp_shard *sh = &c->shards[k];
        if (!sh->out)
            continue;
        while (sh->out)
            sub_finish(c, sh->out, ZEPS_ERESTARTED);
        zp_shard_reset(c, k);
    }
}

/* Say HELLO again to shard k (same rank and incarnation), then resend what
 * is outstanding there. */
static void rehello(zeps_client *c, int k)
{
    c->in_rehello = 1;
    zp_shard *sh = &c->shards[k];
    zp_req *r = zp_req_new(c, ZEPS__OP__HELLO, 1);
    zp_req_sub *s = zp_req_add(r, k);
    s->flags = ZP_FLAG_RESUME; /* the resends below keep their seqs: no fence for them */
    /* a restarted shard may take a while to come back; a new primary is
     * up already, and held requests must not outwait their own budget */
    s->max_retries =
        sh->moved ? c->opt.max_retries : c->opt.hello_timeout_ms / c->opt.request_timeout_ms + 1;
    zp_req_send(r, s);
    int rc = zp_req_finish(r);
    zp_req_free(r);
    c->in_rehello = 0;
    if (rc != 0) {
        zp_warn("HELLO again to shard %d failed: %s", k, c->err);
        /* held for a HELLO that failed: fail them with its error (c->err)
         * instead of saying HELLO again at once, over and over */
        while (sh->moved && sh->out)
            sub_finish(c, sh->out, rc);
        return;
    }
    for (zp_req_sub *o = c->shards[k].out; o; o = o->next)
        sub_send(c, o);
}

/* Read shard k's monitor. A refused key fails what waits on the shard at
 * once (retrying cannot help); other handshake failures are kept for the
 * timeout message. */
static void drain_monitor(zeps_client *c, int k)
{
    zp_shard *sh = &c->shards[k];
    uint16_t event;
    uint32_t value;
    while (zp_shard_monitor_read(c, k, &event, &value)) {
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
            snprintf(sh->handshake, sizeof(sh->handshake),
                     "the shard refused this client's CURVE key (ZAP status %u)", value);
            int failed = 0;
            for (zp_req_sub *s = sh->out, *next; s; s = next) {
                next = s->next;
                zp_fail(c, ZEPS_EREFUSED,
                        "shard %d (%s) refused our key %.8s... (ZAP status %u): add its .pub "
                        "file to the server's curve_allow_dir",
                        k, sh->endpoint, c->curve_public, value);
                sub_finish(c, s, ZEPS_EREFUSED);
                failed = 1;
            }
            if (failed) {
                zp_shard_reset(c, k); /* drops (and releases) what ZeroMQ still queued */
                return;               /* the monitor was replaced */
            }
        } else if (c->fo &&
                   (event == ZMQ_EVENT_DISCONNECTED || event == ZMQ_EVENT_CONNECT_RETRIED)) {
            zp_failover_on_lost(c, k, event);
        } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
                   event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            snprintf(sh->handshake, sizeof(sh->handshake),
                     "the CURVE handshake failed (%s, code %u); check curve_server_public",
                     event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error" : "no detail",
                     value);
        }
    }
}

/* Whether a HELLO to shard k waits for its answer. */
static int hello_waits(const zeps_client *c, int k)
{
    for (const zp_req_sub *s = c->shards[k].out; s; s = s->next)
        if (s->req->op == ZEPS__OP__HELLO)
            return 1;
    return 0;
}

/* Replicated clusters: the failover's probes; shards it moved. */
static void failover_progress(zeps_client *c)
{
    int moved[ZP_MAX_SHARDS];
    int n = zp_failover_poll(c, moved);
    for (int i = 0; i < n; i++)
        on_moved(c, moved[i]);
}

/* Wait up to timeout_ms for replies and handle them, then deadlines. */
static void progress(zeps_client *c, long timeout_ms)
{
    uint64_t now = zp_now_ns(), next = c->fo ? zp_failover_next_ns(c) : UINT64_MAX;
    for (int k = 0; k < c->nshards; k++)
        for (zp_req_sub *s = c->shards[k].out; s; s = s->next)
            if (s->deadline_ns < next)
                next = s->deadline_ns;
    for (zp_req_sub *s = c->moved; s; s = s->next) { /* a piece waiting for a shard behind */
        /* its wait over but no room at its owner yet: a reply makes room,
         * so poll at least 1 ms rather than spin */
        uint64_t at = s->split_ns > now ? s->split_ns : now + 1000000ull;
        if (s->split_ns && at < next)
            next = at;
    }
    if (next != UINT64_MAX) {
        long until = next > now ? (long)((next - now) / 1000000ull) + 1 : 0;
        if (until < timeout_ms)
            timeout_ms = until;
    }
    int n = zp_xport_shm_poll(c, timeout_ms);
    if (n > 0) {
        for (int k = 0; k < c->nshards; k++)
            if (c->items[k].revents & ZMQ_POLLIN)
                drain_shard(c, k);
        for (int k = 0; k < c->nshards; k++)
            if (c->shards[k].monitor && (c->items[c->nshards + k].revents & ZMQ_POLLIN))
                drain_monitor(c, k);
    }
    if (c->fo)
        failover_progress(c);
    if (c->abort_all)
        abort_outstanding(c);
    /* redirected subs (EMOVED): sent again to their owners, room permitting,
     * a piece refused by a shard behind the map once its wait is over */
    now = zp_now_ns();
    for (zp_req_sub **pp = &c->moved, *s; (s = *pp) != NULL;) {
        zp_req *f = s->split_ns > now ? NULL : zp_redirect_split(c, s);
        if (!f) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        for (int i = 0; i < f->nsub; i++)
            zp_req_send(f, &f->subs[i]);
    }
    /* a restarted shard (async modes) or a moved one, in any mode: HELLO */
    for (int k = 0; k < c->nshards && !c->in_rehello; k++)
        if ((c->shards[k].need_hello && !(c->caps & ZP_CAP_ROLLBACK)) ||
            (c->shards[k].moved && !hello_waits(c, k)))
            rehello(c, k);
    check_deadlines(c);
}

/* --- requests --- */

/* Add a sub-request for shard k and send it. */
zp_req_sub *zp_req_add(zp_req *r, int k)
{
    zeps_client *c = r->c;
    while (c->shards[k].nout >= ZP_REQ_MAX_IN_FLIGHT)
        progress(c, 10);
    zp_req_sub *s = &r->subs[r->nsub++];
    memset(s, 0, sizeof(*s));
    s->req = r;
    s->shard = k;
    s->req_id = ++c->next_req_id;
    s->seq = ++c->shards[k].next_seq;
    s->max_retries = c->opt.max_retries;
    return s;
}

void zp_req_send(zp_req *r, zp_req_sub *s)
{
    zeps_client *c = r->c;
    zp_shard *sh = &c->shards[s->shard];
    zp_req_sub **tail = &sh->out; /* at most ZP_REQ_MAX_IN_FLIGHT */
    while (*tail)
        tail = &(*tail)->next;
    s->next = NULL;
    *tail = s;
    sh->nout++;
    c->stats.requests++;
    sub_send(c, s);
}

/* Interrupted: fail r's outstanding sub-requests with ZEPS_ECLOSED, and
 * its redirects' pieces (r->follow's, freed with r: none may stay on a
 * shard's list or on c->moved); reset their shards' sockets, so ZeroMQ
 * drops (and releases) what it queued. */
static void give_up(zeps_client *c, zp_req *r)
{
    zp_fail(c, ZEPS_ECLOSED, "interrupted while waiting for %s", zp_wire_op_name(r->op));
    for (zp_req *q = r; q; q = q->follow)
        for (int i = 0; i < q->nsub; i++) {
            zp_req_sub *s = &q->subs[i];
            if (s->done)
                continue;
            sub_finish(c, s, ZEPS_ECLOSED);
            zp_shard_reset(c, s->shard);
            for (zp_req_sub *o = c->shards[s->shard].out; o; o = o->next)
                sub_send(c, o);
        }
}

/* Payload frames ZeroMQ still holds of r and its redirects' pieces. */
static int zrefs(zp_req *r)
{
    int n = 0;
    for (; r; r = r->follow)
        n += atomic_load_explicit(&r->zrefs, memory_order_acquire);
    return n;
}

/* Wait until every sub-request of r is answered (or failed) and ZeroMQ has
 * released r's payloads. Returns r's first error; r stays allocated. */
int zp_req_finish(zp_req *r)
{
    zeps_client *c = r->c;
    uint64_t t0 = zp_now_ns();
    while (r->ndone < r->nsub) {
        if (c->interrupt && *c->interrupt) {
            give_up(c, r);
            break;
        }
        progress(c, 1000);
    }
    /* ZeroMQ releases a payload once it is written out; the reply proves it
     * was received, so this is at most a few microseconds. If it lingers
     * (a failed request), drop the queues that hold it. */
    uint64_t spin_until = zp_now_ns() + 100000000ull;
    while (zrefs(r) > 0) {
        if (zp_now_ns() > spin_until) {
            for (zp_req *q = r; q; q = q->follow)
                for (int i = 0; i < q->nsub; i++)
                    zp_shard_reset(c, q->subs[i].shard);
            for (int k = 0; k < c->nshards; k++)
                for (zp_req_sub *s = c->shards[k].out; s; s = s->next)
                    sub_send(c, s);
            spin_until = UINT64_MAX;
        }
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
    c->stats.wait_s += (double)(zp_now_ns() - t0) * 1e-9;
    return r->err;
}

void zp_req_free(zp_req *r)
{
    if (r->follow)
        zp_req_free(r->follow);
    for (int i = 0; i < r->nsub; i++) {
        if (r->subs[i].has_frame)
            zmq_msg_close(&r->subs[i].frame);
        free(r->subs[i].encoded); /* ZeroMQ released it: req_finish waited */
        free(r->subs[i].jmap);
    }
    free(r->stats_buf);
    free(r);
}

int zeps_wait(zp_req **rp)
{
    if (!rp || !*rp)
        return ZEPS_EINVAL;
    zp_req *r = *rp;
    *rp = NULL;
    int err = zp_req_finish(r);
    zp_req_free(r);
    return err;
}
