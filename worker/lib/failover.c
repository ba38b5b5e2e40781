/*
 * failover.c - libzeps: following each shard's primary in a replicated
 * cluster; see failover.h for what the engine tells it and what it answers.
 *
 * Per shard it keeps the R endpoints of the cluster file, the replica the
 * shard's socket points at (`cur`) and, while it searches, one probe socket
 * per replica. Two ways lead to the primary:
 *
 *   - a redirect: the current replica answers ENOTPRIMARY naming the
 *     primary (replica index, endpoint, epoch); the shard moves there at
 *     once. A redirect is believed only if it names another replica, at an
 *     epoch newer than the one that brought the shard to `cur` (two stale
 *     backups cannot send a client back and forth), and not the `suspect`;
 *   - a search, when the redirect names nobody believable, when the
 *     connection to the current replica closes or is refused, or when a
 *     request goes unanswered: every replica is asked at once with a
 *     HELLO as a tool (rank 0xffffffff: no registration, no sequence
 *     number, nothing changed on the shard), again after 100 ms, then
 *     every 150, 225 and 250 ms. The replica that serves it is the
 *     primary; a backup's ENOTPRIMARY naming a primary is followed too.
 *     A search lasts as long as one request may wait for a silent shard
 *     ((max_retries + 1) x request_timeout_ms) and starts again on the next
 *     trigger, so nothing waits for it forever.
 *
 * The suspect is the replica the search began with (its connection lost,
 * or it said it is not primary): only its own answer is believed, never a
 * backup's word for it. Right after a primary dies its backups still name
 * it (they learn of the death only when ZooKeeper expires its session), and
 * following them would send the client back to a dead endpoint.
 *
 * Ownership: the failover owns its probe sockets (closed when a search
 * ends and in zp_failover_destroy) and fills, but does not own, the
 * client's poll slots for them. Moving a shard's socket is shard.c's work;
 * the engine's requests are never touched here.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "alloc.h"
#include "client.h"
#include "config.h"
#include "failover.h"
#include "log.h"
#include "now.h"
#include "shard.h"
#include "wire.h"
#include "zeps.h"

#define PROBE_FIRST_MS 100  /* the pause before asking again */
#define PROBE_MAX_MS   250  /* ... growing by half up to this */
#define PROBE_STALE_MS 1000 /* an unanswered probe is dropped and sent again after this */
#define SAID_MAX       200

typedef struct fo_replica {
    char endpoint[ZP_ENDPOINT_MAX];
    void *probe;         /* a DEALER to it while the shard searches, else NULL */
    uint64_t asked_ns;   /* when its unanswered probe went out; 0: none unanswered */
    char said[SAID_MAX]; /* what it answered in this search ("": not asked yet) */
    int notprimary;      /* ... and that was ENOTPRIMARY */
} fo_replica;

typedef struct fo_shard {
    fo_replica rep[ZP_MAX_REPLICAS];
    int cur;            /* the replica the shard's socket points at */
    uint64_t cur_epoch; /* the epoch a redirect named `cur` primary at; 0: not told */
    int suspect;        /* only its own answer is believed (above); -1: none */
    int searching;      /* probes go out */
    int searched;       /* asked since the primary was last found: zp_failover_why */
    uint64_t since_ns;  /* when that began */
    uint64_t until_ns;  /* when this search gives up */
    uint64_t next_ns;   /* when the next probes go out */
    int backoff_ms;
} fo_shard;

struct zp_failover {
    int nshards, replicas;
    zmq_pollitem_t *items; /* borrowed: replica r of shard k probes at [k * replicas + r] */
    uint64_t next_id;      /* the probes' request ids */
    fo_shard shards[];
};

int zp_failover_npoll(int nshards, int replicas)
{
    return nshards * replicas;
}

zp_failover *zp_failover_new(zeps_client *c, const char *const *eps, int replicas,
                             zmq_pollitem_t *items)
{
    zp_failover *f = zp_alloc_zeroed(1, sizeof(*f) + (size_t)c->nshards * sizeof(fo_shard));
    f->nshards = c->nshards;
    f->replicas = replicas;
    f->items = items;
    for (int i = 0; i < c->nshards * replicas; i++)
        items[i] = (zmq_pollitem_t){.socket = NULL, .fd = -1}; /* not fd 0 (stdin) */
    for (int k = 0; k < c->nshards; k++) {
        f->shards[k].suspect = -1;
        for (int r = 0; r < replicas; r++)
            snprintf(f->shards[k].rep[r].endpoint, ZP_ENDPOINT_MAX, "%s", eps[k * replicas + r]);
    }
    return f;
}

static void probe_close(zp_failover *f, int k, int r)
{
    fo_replica *rp = &f->shards[k].rep[r];
    if (rp->probe)
        zmq_close(rp->probe);
    rp->probe = NULL;
    rp->asked_ns = 0;
    f->items[k * f->replicas + r] = (zmq_pollitem_t){.socket = NULL, .fd = -1};
}

static void search_stop(zp_failover *f, int k)
{
    for (int r = 0; r < f->replicas; r++)
        probe_close(f, k, r);
    f->shards[k].searching = 0;
}

void zp_failover_destroy(zp_failover **fp)
{
    zp_failover *f = *fp;
    if (!f)
        return;
    *fp = NULL;
    for (int k = 0; k < f->nshards; k++)
        search_stop(f, k);
    free(f);
}

/* Start asking shard k's replicas who is primary (unless it already does);
 * `suspect` becomes the suspect. A search forgets what the replicas said
 * in the last one; the time counts from the first since a primary served. */
static void search_start(zeps_client *c, int k, int suspect, const char *why)
{
    fo_shard *fs = &c->fo->shards[k];
    fs->suspect = suspect;
    if (fs->searching)
        return;
    uint64_t now = zp_now_ns();
    for (int r = 0; r < c->fo->replicas; r++) {
        fs->rep[r].said[0] = '\0';
        fs->rep[r].notprimary = 0;
    }
    if (!fs->searched)
        fs->since_ns = now;
    fs->searching = fs->searched = 1;
    fs->until_ns =
        now + (uint64_t)(c->opt.max_retries + 1) * (uint64_t)c->opt.request_timeout_ms * 1000000u;
    fs->next_ns = now;
    fs->backoff_ms = PROBE_FIRST_MS;
    zp_info("shard %d: %s; asking its %d replicas which is primary", k, why, c->fo->replicas);
}

/* Point shard k's socket at replica p, the primary (named at `epoch`; 0:
 * it answered as primary itself). The engine says HELLO there next. */
static void move_to(zeps_client *c, int k, int p, uint64_t epoch)
{
    fo_shard *fs = &c->fo->shards[k];
    zp_shard *sh = &c->shards[k];
    if (epoch)
        zp_info("shard %d: primary is now replica %d at %s (epoch %" PRIu64 ")", k, p,
                fs->rep[p].endpoint, epoch);
    else
        zp_info("shard %d: primary is now replica %d at %s (it answered as primary)", k, p,
                fs->rep[p].endpoint);
    fs->cur = p;
    fs->cur_epoch = epoch;
    zp_shard_move(c, k, fs->rep[p].endpoint);
    sh->moved = 1;
    sh->incarnation = 0; /* another process, not a restart of the same one */
    c->stats.redirects++;
}

/* Shard k's primary is replica p: the search ends. Returns 1 if the shard
 * moved (p is not the replica it points at). */
static int found(zeps_client *c, int k, int p, uint64_t epoch)
{
    fo_shard *fs = &c->fo->shards[k];
    search_stop(c->fo, k);
    fs->searched = 0;
    fs->suspect = -1;
    if (p == fs->cur) {
        if (epoch > fs->cur_epoch)
            fs->cur_epoch = epoch;
        return 0;
    }
    move_to(c, k, p, epoch);
    return 1;
}

/* The replica an ENOTPRIMARY reply from replica `from` names as primary,
 * or -1 (none, or one that is not among shard k's). The index wins over
 * the endpoint text: the cluster file's endpoint is the one to reach. */
static int named(const zp_failover *f, int k, const Zeps__Header *h, int from)
{
    int p = -1;
    if (h->primary_replica >= 0 && h->primary_replica < f->replicas)
        p = h->primary_replica;
    for (int r = 0; p < 0 && h->primary && h->primary[0] && r < f->replicas; r++)
        if (strcmp(f->shards[k].rep[r].endpoint, h->primary) == 0)
            p = r;
    return p == from ? -1 : p;
}

/* Keep what replica r of a shard answered (an ERROR h) for the error text. */
static void note(fo_shard *fs, int r, const Zeps__Header *h)
{
    snprintf(fs->rep[r].said, SAID_MAX, "%s (%s)", h->error_text ? h->error_text : "",
             zeps_errname((int)h->error));
    fs->rep[r].notprimary = h->error == ZEPS_ENOTPRIMARY;
}

int zp_failover_on_notprimary(zeps_client *c, int k, const Zeps__Header *h)
{
    fo_shard *fs = &c->fo->shards[k];
    int from = fs->cur;
    int p = named(c->fo, k, h, from);
    if (p >= 0 && p != fs->suspect && h->epoch > fs->cur_epoch)
        return found(c, k, p, h->epoch);
    if (!fs->searching) {
        char why[SAID_MAX + 96];
        snprintf(why, sizeof(why), "replica %d names no primary to follow (%s)", from,
                 h->error_text ? h->error_text : "");
        search_start(c, k, from, why);
    }
    fs->suspect = from;
    note(fs, from, h);
    return 0;
}

void zp_failover_on_lost(zeps_client *c, int k, uint16_t event)
{
    fo_shard *fs = &c->fo->shards[k];
    bool lost = event == ZMQ_EVENT_DISCONNECTED;
    /* a refused connect repeats every reconnect interval: it matters only
     * while requests wait, and only once per search */
    if (!lost && (c->shards[k].nout == 0 || (fs->searching && fs->suspect == fs->cur)))
        return;
    char why[ZP_ENDPOINT_MAX + 64];
    snprintf(why, sizeof(why), "connection to replica %d at %s %s", fs->cur,
             fs->rep[fs->cur].endpoint, lost ? "lost" : "refused");
    search_start(c, k, fs->cur, why);
    snprintf(fs->rep[fs->cur].said, SAID_MAX, "%s",
             lost ? "connection lost" : "connection refused");
}

void zp_failover_on_timeout(zeps_client *c, int k)
{
    fo_shard *fs = &c->fo->shards[k];
    if (fs->searching)
        return;
    char why[ZP_ENDPOINT_MAX + 64];
    snprintf(why, sizeof(why), "replica %d at %s did not answer within %d ms", fs->cur,
             fs->rep[fs->cur].endpoint, c->opt.request_timeout_ms);
    search_start(c, k, fs->cur, why);
}

/* Whether an ERROR of code e means the replica got past the shard's role
 * check (docs/protocol.md: version, frames, flags, stopping, role come
 * first): it serves, so it is primary. */
static bool serves_error(uint32_t e)
{
    return e != ZEPS_ENOTPRIMARY && e != ZEPS_ECLOSED && e != ZEPS_EVERSION && e != ZEPS_EPROTO;
}

/* Replica r of shard k answered a probe (h). Returns 1 if the shard moved. */
static int on_probe(zeps_client *c, int k, int r, const Zeps__Header *h)
{
    fo_shard *fs = &c->fo->shards[k];
    fs->rep[r].asked_ns = 0;
    if (h->op == ZEPS__OP__HELLO || (h->op == ZEPS__OP__ERROR && serves_error(h->error)))
        return found(c, k, r, h->epoch);
    if (h->op != ZEPS__OP__ERROR) {
        snprintf(fs->rep[r].said, SAID_MAX, "answered HELLO with %s", zp_wire_op_name(h->op));
        return 0;
    }
    note(fs, r, h);
    int p = h->error == ZEPS_ENOTPRIMARY ? named(c->fo, k, h, r) : -1;
    if (p >= 0 && p != fs->suspect)
        return found(c, k, p, h->epoch);
    return 0;
}

/* Read every answer waiting on shard k's probes. Returns 1 if it moved. */
static int drain_probes(zeps_client *c, int k)
{
    fo_shard *fs = &c->fo->shards[k];
    for (int r = 0; r < c->fo->replicas && fs->searching; r++) {
        zp_frames m;
        while (fs->rep[r].probe && zp_wire_frames_recv(fs->rep[r].probe, &m, ZMQ_DONTWAIT) == 0) {
            Zeps__Header *h = m.n >= 1 ? zp_wire_unpack_header(&m.f[0]) : NULL;
            zp_wire_frames_close(&m);
            if (!h)
                continue;
            int moved = on_probe(c, k, r, h);
            zeps__header__free_unpacked(h, NULL);
            if (!fs->searching) /* found: the probes are closed */
                return moved;
        }
    }
    return 0;
}

/* Ask replica r of shard k who is primary, unless its last probe is still
 * fresh and unanswered (an older one is dropped with its socket). */
static void probe_send(zeps_client *c, int k, int r, uint64_t now)
{
    zp_failover *f = c->fo;
    fo_replica *rp = &f->shards[k].rep[r];
    if (rp->asked_ns && now - rp->asked_ns < PROBE_STALE_MS * 1000000ull)
        return;
    if (rp->asked_ns && rp->notprimary) { /* silent since: that no longer holds */
        snprintf(rp->said, SAID_MAX, "no answer");
        rp->notprimary = 0;
    }
    if (rp->asked_ns)
        probe_close(f, k, r);
    if (!rp->probe && !(rp->probe = zp_shard_probe_open(c, rp->endpoint))) {
        snprintf(rp->said, SAID_MAX, "no socket to it: %s", zmq_strerror(zmq_errno()));
        return;
    }
    f->items[k * f->replicas + r] = (zmq_pollitem_t){.socket = rp->probe, .events = ZMQ_POLLIN};
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__HELLO;
    h.req_id = ++f->next_id;
    h.rank = ZEPS_RANK_TOOL;
    h.incarnation = c->incarnation;
    if (zp_wire_send_header(rp->probe, &h, ZMQ_DONTWAIT) != 0)
        return;
    rp->asked_ns = now;
    if (!rp->said[0])
        snprintf(rp->said, SAID_MAX, "no answer");
}

/* Shard k's search is due: give up at its end, else ask every replica. */
static void search_tick(zeps_client *c, int k, uint64_t now)
{
    fo_shard *fs = &c->fo->shards[k];
    if (now >= fs->until_ns) {
        search_stop(c->fo, k);
        zp_warn("shard %d: no primary found in %.1f s of asking its replicas; asking again "
                "when the next request waits",
                k, (double)(now - fs->since_ns) * 1e-9);
        return;
    }
    for (int r = 0; r < c->fo->replicas; r++)
        probe_send(c, k, r, now);
    fs->next_ns = now + (uint64_t)fs->backoff_ms * 1000000u;
    fs->backoff_ms = fs->backoff_ms * 3 / 2 < PROBE_MAX_MS ? fs->backoff_ms * 3 / 2 : PROBE_MAX_MS;
}

int zp_failover_poll(zeps_client *c, int *moved)
{
    int n = 0;
    uint64_t now = zp_now_ns();
    for (int k = 0; k < c->fo->nshards; k++) {
        fo_shard *fs = &c->fo->shards[k];
        if (fs->searching && drain_probes(c, k))
            moved[n++] = k;
        else if (fs->searching && now >= fs->next_ns)
            search_tick(c, k, now);
    }
    return n;
}

uint64_t zp_failover_next_ns(const zeps_client *c)
{
    uint64_t next = UINT64_MAX;
    for (int k = 0; k < c->fo->nshards; k++)
        if (c->fo->shards[k].searching && c->fo->shards[k].next_ns < next)
            next = c->fo->shards[k].next_ns;
    return next;
}

int zp_failover_why(const zeps_client *c, int k, char *buf, size_t len)
{
    const fo_shard *fs = &c->fo->shards[k];
    if (!fs->searched || len == 0)
        return 0;
    size_t off = (size_t)snprintf(buf, len, "no primary found in %.1f s of asking",
                                  (double)(zp_now_ns() - fs->since_ns) * 1e-9);
    int refused = 0;
    for (int r = 0; r < c->fo->replicas; r++) {
        refused |= fs->rep[r].notprimary;
        if (off < len)
            off += (size_t)snprintf(buf + off, len - off, "%s replica %d at %s: %s", r ? ";" : ":",
                                    r, fs->rep[r].endpoint,
                                    fs->rep[r].said[0] ? fs->rep[r].said : "not asked");
    }
    return refused ? ZEPS_ENOTPRIMARY : ZEPS_ETIMEDOUT;
}
