/*
 * join.c - libzeps: reaching a shard that joined at run time (see
 * join.h; docs/elastic.md, "Adding a shard").
 *
 * A client knows the cluster file's shards from its start; a shard that
 * joins later (zepsctl shards add) is named, with its endpoint, in every
 * slot map from then on, and the client meets such a map in a HELLO reply
 * or an EMOVED. Before it takes the map (redirect.c) it connects to each
 * new shard, says HELLO and declares its tables there, so that a
 * redirect's pieces can go there at once with the table's id on that
 * shard. These few requests go on the new socket alone and are awaited
 * there, outside the engine's queues: nothing else is in flight on it, and
 * the other shards' answers wait in their sockets meanwhile. A new shard
 * holds no dense slice: dense tables stay on the cluster file's shards
 * (c->ndense). A joined shard the map retires gets its socket and no
 * request. The answer to HELLO is taken the same way for every shard
 * (zp_join_hello: here for the joined ones, by the engine for the file's).
 */
#include "join.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "alloc.h"
#include "client.h"
#include "fail.h"
#include "log.h"
#include "now.h"
#include "shard.h"
#include "wire.h"
#include "xport.h"

/* The poll set for n shards (shard sockets, then with CURVE their
 * monitors), rebuilt from the shards' sockets: a slot that moves keeps
 * what it was polled for. */
static void poll_set_resize(zeps_client *c, int n)
{
    int old = c->nshards, mon = c->curve ? 1 : 0;
    zmq_pollitem_t *items = zp_alloc_zeroed((size_t)(n + mon * n), sizeof(zmq_pollitem_t));
    for (int i = 0; i < n + mon * n; i++)
        items[i].fd = -1; /* a slot without a socket polls nothing (not stdin) */
    for (int k = 0; k < n && k < old; k++) {
        items[k] = c->items[k];
        if (mon)
            items[n + k] = c->items[old + k];
    }
    free(c->items);
    c->items = items;
    c->npoll = n + mon * n;
}

/* Send h to shard k and await its answer there until `until` (seconds,
 * zp_now_s): 0 with *rep (the caller frees it), or the error with c->err. */
static int ask(zeps_client *c, int k, Zeps__Header *h, double until, Zeps__Header **rep)
{
    zp_shard *sh = &c->shards[k];
    h->version = ZP_PROTOCOL_VERSION;
    h->rank = c->rank;
    h->incarnation = c->incarnation;
    h->req_id = ++c->next_req_id;
    h->seq = ++sh->next_seq;
    if (zp_wire_send_header(sh->sock, h, 0) != 0)
        return zp_fail(c, ZEPS_ETRANSPORT, "%s to shard %d at %s: %s", zp_wire_op_name(h->op), k,
                       sh->endpoint, zmq_strerror(zmq_errno()));
    for (;;) {
        long left = (long)((until - zp_now_s()) * 1000);
        zmq_pollitem_t it = {.socket = sh->sock, .events = ZMQ_POLLIN};
        if (left <= 0 || zmq_poll(&it, 1, left) != 1)
            return zp_fail(c, ZEPS_ETIMEDOUT,
                           "shard %d at %s, which the slot map says joined the cluster, did not "
                           "answer %s in time (is it running, with the cluster's keys?)",
                           k, sh->endpoint, zp_wire_op_name(h->op));
        zp_frames f;
        if (zp_wire_frames_recv(sh->sock, &f, 0) != 0)
            continue;
        Zeps__Header *r = f.n >= 1 ? zp_wire_unpack_header(&f.f[0]) : NULL;
        zp_wire_frames_close(&f);
        if (!r || r->req_id != h->req_id) {
            if (r)
                zeps__header__free_unpacked(r, NULL);
            continue;
        }
        if (r->op == ZEPS__OP__ERROR && (r->flags & ZP_FLAG_PARKED)) {
            /* HELLO: a live incarnation holds the rank (docs/faults.md);
             * ask again, as the engine does, until the budget ends */
            zeps__header__free_unpacked(r, NULL);
            zmq_poll(NULL, 0, 200);
            h->req_id = ++c->next_req_id;
            if (zp_wire_send_header(sh->sock, h, 0) != 0)
                return zp_fail(c, ZEPS_ETRANSPORT, "HELLO to shard %d at %s: %s", k, sh->endpoint,
                               zmq_strerror(zmq_errno()));
            continue;
        }
        if (r->op == ZEPS__OP__ERROR) {
            int rc = zp_fail(c, r->error ? r->error : ZEPS_EINTERNAL, "shard %d at %s: %s", k,
                             sh->endpoint, r->error_text ? r->error_text : "?");
            zeps__header__free_unpacked(r, NULL);
            return rc;
        }
        *rep = r;
        return 0;
    }
}

int zp_join_hello(zeps_client *c, int k, const Zeps__Header *h)
{
    zp_shard *sh = &c->shards[k];
    if (sh->incarnation && sh->incarnation != h->incarnation)
        zp_info("shard %d has a new incarnation %" PRIx64 " (was %" PRIx64 "): it restarted", k,
                h->incarnation, sh->incarnation);
    sh->incarnation = h->incarnation;
    sh->moved = 0; /* the replica moved to knows us now: rehello resends the rest */
    sh->held[0] = '\0';
    sh->hello_clock = h->clock;
    sh->need_hello = 0;
    sh->rejoined = (h->flags & ZP_FLAG_REJOINED) != 0;
    zp_xport_shm_hello(c, k, h); /* shared memory, if offered and allowed */
    c->nworkers = (int)h->num_workers;
    c->caps = h->caps & ~ZP_CAP_MAPS; /* the mode's bits (zeps_consistency) */
    sh->maps = (h->caps & ZP_CAP_MAPS) != 0;
    snprintf(c->consistency, sizeof(c->consistency), "%s", h->consistency ? h->consistency : "");
    if (h->shard != (uint32_t)k || h->num_shards != (uint32_t)c->ndense)
        return zp_fail(c, ZEPS_ECONFIG,
                       "%s answered as shard %u of %u, but the cluster lists it as shard %d "
                       "of %d",
                       sh->endpoint, h->shard, h->num_shards, k, c->ndense);
    return 0;
}

static int hello(zeps_client *c, int k, double until)
{
    Zeps__Header h, *r;
    zeps__header__init(&h);
    h.op = ZEPS__OP__HELLO;
    int rc = ask(c, k, &h, until, &r);
    if (rc != 0)
        return rc;
    rc = zp_join_hello(c, k, r);
    zeps__header__free_unpacked(r, NULL);
    return rc;
}

/* Declare every table of c on shard k, recording its id there (a dense
 * one holds nothing on a shard that joins until a move brings a piece). */
static int declare_all(zeps_client *c, int k, double until)
{
    for (uint32_t i = 0; i < c->ntables; i++) {
        zp_table *ti = &c->tables[i];
        if (!ti->spec)
            continue;
        Zeps__TableSpec *spec = zeps__table_spec__unpack(NULL, ti->spec_len, ti->spec);
        if (!spec)
            return zp_fail(c, ZEPS_EINTERNAL, "table '%s': its declaration does not unpack",
                           ti->name);
        Zeps__Header h, *r;
        zeps__header__init(&h);
        h.op = ZEPS__OP__DECLARE;
        h.spec = spec;
        int rc = ask(c, k, &h, until, &r);
        uint32_t lead = spec->lead_cols;
        zeps__table_spec__free_unpacked(spec, NULL);
        if (rc != 0)
            return rc;
        ti->ids[k] = r->table;
        if (ti->dim && r->count != lead) /* dense: count is the elements held (none yet) */
            rc = zp_fail(c, ZEPS_EPROTO,
                         "shard %d keeps %" PRIu64 " lead columns of table '%s', "
                         "not %u",
                         k, r->count, ti->name, lead);
        zeps__header__free_unpacked(r, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Tell shard k the clock this worker ended last: a shard that joins knows
 * no worker's clock, and under ssp a pull there waits for the slowest
 * worker's; without this, workers whose pulls wait there before their next
 * CLOCK would wait for each other. */
static int clock_there(zeps_client *c, int k, double until)
{
    if (c->clock_sent < 0 || c->rank == ZEPS_RANK_TOOL)
        return 0;
    Zeps__Header h, *r;
    zeps__header__init(&h);
    h.op = ZEPS__OP__CLOCK;
    h.clock = c->clock_sent;
    int rc = ask(c, k, &h, until, &r);
    if (rc == 0)
        zeps__header__free_unpacked(r, NULL);
    return rc;
}

/* Reach joined shard k (== c->nshards) at endpoint ep; one the map
 * retires gets its socket (every shard index has one) and no request. */
static int join_one(zeps_client *c, int k, const char *ep, bool retired)
{
    zp_shard *sh = &c->shards[k];
    memset(sh, 0, sizeof(*sh));
    snprintf(sh->endpoint, sizeof(sh->endpoint), "%s", ep);
    poll_set_resize(c, k + 1);
    c->nshards = k + 1;
    int budget = c->opt.hello_timeout_ms; /* a rank held by a live incarnation waits */
    double until = zp_now_s() + budget / 1000.0;
    int rc = zp_shard_open(c, k) != 0
                 ? zp_fail(c, ZEPS_ETRANSPORT, "cannot connect to joined shard %d at %s: %s", k, ep,
                           zmq_strerror(zmq_errno()))
                 : 0;
    if (rc == 0 && retired) {
        zp_info("shard %d (%s) joined the cluster and is retired: no request goes there", k, ep);
        return 0;
    }
    if (rc == 0)
        rc = hello(c, k, until);
    if (rc == 0)
        rc = declare_all(c, k, until);
    if (rc == 0)
        rc = clock_there(c, k, until);
    if (rc != 0) {
        zp_shard_close(c, k);
        poll_set_resize(c, k);
        c->nshards = k;
        memset(sh, 0, sizeof(*sh));
        return rc;
    }
    zp_info("shard %d joined the cluster at %s: connected, %u tables known there", k, ep,
            c->ntables);
    return 0;
}

int zp_join_map(zeps_client *c, const zp_slotmap *map)
{
    int want = zp_slotmap_shards(map);
    if (want < c->nshards)
        return zp_fail(c, ZEPS_EPROTO,
                       "a slot map of %d shards; this client knows %d (a map lists every shard "
                       "that joined)",
                       want, c->nshards);
    if (want > c->nshards && (c->replicas >= 2 || want > ZP_MAX_SHARDS))
        return zp_fail(c, ZEPS_EINVAL,
                       "the slot map names %d shards, %d joined at run time: not built for "
                       "replicated shards (docs/elastic.md)",
                       want, want - c->ndense);
    for (int k = c->nshards; k < want; k++) {
        int rc = join_one(c, k, zp_slotmap_endpoint(map, k), zp_slotmap_retired(map, k));
        if (rc != 0)
            return rc;
    }
    return 0;
}
