/*
 * client.c - libzeps: a client's lifecycle (see zeps.h).
 *
 * zeps_client_new_endpoints checks the options and CURVE keys, opens one
 * socket per shard (shard.c), says HELLO to every shard (req.c) and learns
 * from the answers where this worker resumes, how many workers there are
 * and what the cluster's consistency mode implies (caps); destroying says
 * BYE (best effort, bounded) and frees everything the client owns. Also
 * the accessors of what HELLO and the engine learned. A cluster file with
 * replicated shards gives the client every replica's endpoint, and the
 * client a failover (failover.c) that finds each shard's primary.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "alloc.h"
#include "client.h"
#include "control.h"
#include "config.h"
#include "curve.h"
#include "errors.h"
#include "failover.h"
#include "log.h"
#include "req.h"
#include "rng.h"
#include "shard.h"
#include "tables.h"
#include "wire.h"
#include "xport.h"
#include "zeps.h"

/* Close every socket, then the context, then free what the client owns. */
static void client_free(zeps_client *c)
{
    for (int k = 0; k < c->nshards; k++) {
        zp_shard_close(c, k);
        if (c->shards[k].xp) /* the shard detaches the segment when this closes */
            c->shards[k].xp->close(&c->shards[k]);
    }
    zp_failover_destroy(&c->fo); /* its probes, before the context */
    explicit_bzero(c->curve_secret, sizeof(c->curve_secret));
    if (c->zctx)
        zmq_ctx_term(c->zctx);
    zp_tables_free(c);
    zp_sparse_build_free(c);
    zp_slotmap_destroy(&c->slots);
    free(c->shards);
    free(c->items);
    free(c->bell_items);
    free(c);
}

/* Copy and check the CURVE keys of c->opt (all three or none). */
static int curve_setup(zeps_client *c)
{
    const char *keys[3] = {c->opt.curve_server_key, c->opt.curve_public_key,
                           c->opt.curve_secret_key};
    char *dst[3] = {c->curve_server, c->curve_public, c->curve_secret};
    static const char *const names[3] = {"curve_server_key", "curve_public_key",
                                         "curve_secret_key"};
    int given = 0;
    for (int i = 0; i < 3; i++)
        given += keys[i] != NULL && keys[i][0] != '\0';
    c->opt.curve_server_key = c->opt.curve_public_key = c->opt.curve_secret_key = NULL;
    if (given == 0)
        return 0;
    for (int i = 0; i < 3; i++) {
        uint8_t raw[32];
        if (!keys[i] || strlen(keys[i]) != ZP_CURVE_KEY_LEN || !zmq_z85_decode(raw, keys[i]))
            return zp_fail(c, ZEPS_EINVAL,
                           "zeps_options.%s must be a %d-character Z85 key when CURVE is used "
                           "(set all three keys or none)",
                           names[i], ZP_CURVE_KEY_LEN);
        memcpy(dst[i], keys[i], ZP_CURVE_KEY_LEN + 1);
    }
    if (!zmq_has("curve"))
        return zp_fail(c, ZEPS_ETRANSPORT, "this libzmq was built without CURVE");
    c->curve = true;
    return 0;
}

/* Why the last zeps_client_new* of this thread failed: there is no client
 * to hold it (zeps_last_error(NULL) returns it). */
static _Thread_local char new_err[1024];

/* Log a constructor's failure, keep its text for zeps_last_error(NULL) and
 * return rc. */
static int new_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int new_fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(new_err, sizeof(new_err), fmt, ap);
    va_end(ap);
    zp_error("%s", new_err);
    return rc;
}

/* The client's poll set: the shard sockets, their monitors (CURVE or
 * replicated shards), the failover's probe slots (replicated shards). */
static void poll_set_alloc(zeps_client *c)
{
    int n = c->nshards;
    c->npoll = n + (c->curve || c->replicas >= 2 ? n : 0) +
               (c->replicas >= 2 ? zp_failover_npoll(n, c->replicas) : 0);
    c->items = zp_alloc_zeroed((size_t)c->npoll, sizeof(zmq_pollitem_t));
    for (int i = n; i < c->npoll; i++)
        c->items[i].fd = -1; /* a slot without a socket polls nothing (not stdin) */
}

/* zeps_client_new_endpoints for shards of `replicas` endpoints each
 * (endpoints[k * replicas + r] is replica r of shard k), with `flag` (may be
 * NULL) interrupting the HELLO wait as zeps_client_set_interrupt does every
 * later wait. */
static int new_endpoints(zeps_client **out, const char *const *endpoints, int num_shards,
                         int replicas, uint32_t rank, const zeps_options *opt, volatile int *flag)
{
    new_err[0] = '\0';
    if (!out || !endpoints || num_shards < 1 || num_shards > ZP_MAX_SHARDS)
        return new_fail(ZEPS_EINVAL, "zeps_client_new_endpoints: %d endpoints (1..%d)", num_shards,
                        ZP_MAX_SHARDS);
    zeps_client *c = zp_alloc_zeroed(1, sizeof(*c));
    if (opt)
        c->opt = *opt;
    if (c->opt.request_timeout_ms <= 0)
        c->opt.request_timeout_ms = 2000;
    if (c->opt.max_retries <= 0)
        c->opt.max_retries = 10;
    if (c->opt.hello_timeout_ms <= 0)
        c->opt.hello_timeout_ms = 30000;
    c->rank = rank;
    c->interrupt = flag;
    c->done_clock = -1;
    c->clock_sent = -1;
    c->incarnation = c->opt.incarnation ? c->opt.incarnation : zp_rng_random64() | 1u;
    c->nshards = num_shards;
    c->ndense = num_shards;
    int rc = curve_setup(c);
    if (rc != 0) {
        new_fail(rc, "%s", c->err);
        free(c);
        return rc;
    }
    if (zp_slotmap_new_default(&c->slots, num_shards) != 0) {
        free(c);
        return new_fail(ZEPS_EINVAL, "%d shards: a cluster has 1 to %d", num_shards,
                        ZP_SLOTS_DEFAULT);
    }
    c->replicas = replicas;
    /* room for the shards that may join (join.c): an element never moves,
     * so a pointer to one stays good while the engine takes a map */
    c->shards = zp_alloc_zeroed(ZP_MAX_SHARDS, sizeof(zp_shard));
    poll_set_alloc(c);
    if (replicas >= 2)
        c->fo = zp_failover_new(c, endpoints, replicas, c->items + 2 * num_shards);
    c->zctx = zmq_ctx_new();
    if (!c->zctx) {
        zp_failover_destroy(&c->fo);
        zp_slotmap_destroy(&c->slots);
        free(c->shards);
        free(c->items);
        free(c);
        return new_fail(ZEPS_ETRANSPORT, "cannot make a ZeroMQ context: %s",
                        zmq_strerror(zmq_errno()));
    }
    for (int k = 0; k < num_shards; k++) {
        const char *ep = endpoints[k * replicas]; /* replica 0: where workers look first */
        snprintf(c->shards[k].endpoint, sizeof(c->shards[k].endpoint), "%s", ep);
        if (zp_shard_open(c, k) != 0) {
            new_fail(ZEPS_ETRANSPORT, "cannot connect to shard %d at %s: %s", k, ep,
                     zmq_strerror(zmq_errno()));
            client_free(c);
            return ZEPS_ETRANSPORT;
        }
    }
    rc = zp_control_hello_all(c);
    c->drop_sends = c->opt.fault_drop_sends;
    c->resume_clock = INT64_MAX;
    for (int k = 0; k < num_shards; k++)
        if (c->shards[k].hello_clock < c->resume_clock)
            c->resume_clock = c->shards[k].hello_clock;
    if (c->resume_clock < 0 || rank == ZEPS_RANK_TOOL)
        c->resume_clock = 0;
    if (rc != 0) {
        new_fail(rc, "%s", c->err);
        client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int zeps_client_new_endpoints(zeps_client **out, const char *const *endpoints, int num_shards,
                              uint32_t rank, const zeps_options *opt)
{
    return new_endpoints(out, endpoints, num_shards, 1, rank, opt, opt ? opt->interrupt : NULL);
}

int zeps_client_new_replicas(zeps_client **out, const char *const *endpoints, int num_shards,
                             int replicas, uint32_t rank, const zeps_options *opt)
{
    if (replicas < 1 || replicas > ZP_MAX_REPLICAS)
        return new_fail(ZEPS_EINVAL, "zeps_client_new_replicas: %d replicas (1..%d)", replicas,
                        ZP_MAX_REPLICAS);
    return new_endpoints(out, endpoints, num_shards, replicas, rank, opt,
                         opt ? opt->interrupt : NULL);
}

int zeps_client_new_interruptible(zeps_client **out, const char *cluster_file, uint32_t rank,
                                  volatile int *flag)
{
    new_err[0] = '\0';
    if (!cluster_file)
        return new_fail(ZEPS_EINVAL, "zeps_client_new: no cluster file");
    zp_config *cfg = zp_alloc(sizeof(*cfg));
    char err[1024];
    int rc = zp_config_load(cfg, cluster_file, err, sizeof(err));
    if (rc == 0 && rank != ZEPS_RANK_TOOL && rank >= (uint32_t)cfg->num_workers)
        rc = zp_errors_set(err, sizeof(err), ZEPS_ERANK,
                           "rank %u is outside the cluster of %d workers in %s", rank,
                           cfg->num_workers, cluster_file);
    zp_curve_client_keys keys;
    if (rc == 0)
        rc = zp_curve_load_client(cfg, &keys, err, sizeof(err));
    if (rc != 0) {
        free(cfg);
        return new_fail(rc, "%s", err);
    }
    zeps_options opt = {
        .request_timeout_ms = cfg->request_timeout_ms,
        .max_retries = cfg->max_retries,
        .hello_timeout_ms = cfg->hello_timeout_ms,
        .num_workers = cfg->num_workers,
        .max_message_bytes = cfg->max_message_bytes,
        .transport = strcmp(cfg->transport, "auto") == 0 ? ZEPS_TRANSPORT_AUTO : ZEPS_TRANSPORT_TCP,
        .shm_segment_bytes = cfg->shm_area_bytes,
        .curve_server_key = keys.server_public,
        .curve_public_key = keys.client_public,
        .curve_secret_key = keys.client_secret,
    };
    /* every replica's endpoint, shard by shard (one per shard with replicas = 1) */
    const char *eps[ZP_MAX_SHARDS + ZP_MAX_REPLICA_ENDPOINTS];
    int n = 0;
    for (int k = 0; k < cfg->num_shards; k++)
        for (int r = 0; r < cfg->replicas; r++)
            eps[n++] = zp_config_endpoint(cfg, k, r); /* the file holds at most that many */
    rc = new_endpoints(out, eps, cfg->num_shards, cfg->replicas, rank, &opt, flag);
    explicit_bzero(&keys, sizeof(keys));
    free(cfg);
    return rc;
}

int zeps_client_new(zeps_client **out, const char *cluster_file, uint32_t rank)
{
    return zeps_client_new_interruptible(out, cluster_file, rank, NULL);
}

void zeps_client_destroy(zeps_client **cp)
{
    zeps_client *c = *cp;
    if (!c)
        return;
    *cp = NULL;
    /* A process stopping on a signal still says BYE (its interrupt flag is
     * set by then), so the shards do not wait for it in silence. */
    c->interrupt = NULL;
    if (c->rank != ZEPS_RANK_TOOL) {
        /* Best effort and bounded: a gone server must not hold us up. */
        int saved_t = c->opt.request_timeout_ms;
        c->opt.request_timeout_ms = 500;
        zp_req *r = zp_req_new(c, ZEPS__OP__BYE, c->nshards);
        r->clock = c->done_clock;
        for (int k = 0; k < c->nshards; k++) {
            if (!zp_client_live(c, k))
                continue;
            zp_req_sub *s = zp_req_add(r, k);
            s->max_retries = 1;
            s->flags = c->done_clock >= 0 ? ZP_FLAG_DONE : 0;
            zp_req_send(r, s);
        }
        zeps_wait(&r);
        c->opt.request_timeout_ms = saved_t;
    }
    client_free(c);
}

void zeps_client_set_done(zeps_client *c, int64_t clock)
{
    if (c)
        c->done_clock = clock < 0 ? -1 : clock;
}

int64_t zeps_resume_clock(const zeps_client *c)
{
    return c ? c->resume_clock : 0;
}

int zeps_rejoined(const zeps_client *c)
{
    for (int k = 0; c && k < c->nshards; k++)
        if (c->shards[k].rejoined)
            return 1;
    return 0;
}

int zeps_num_shards(const zeps_client *c)
{
    return c ? c->nshards : 0;
}

const char *zeps_consistency(const zeps_client *c, uint32_t *caps)
{
    if (caps != NULL)
        *caps = c ? c->caps : 0;
    return c ? c->consistency : "";
}

int zeps_num_workers(const zeps_client *c)
{
    return c ? c->nworkers : 0;
}

uint32_t zeps_rank(const zeps_client *c)
{
    return c ? c->rank : 0;
}

void zeps_client_get_stats(const zeps_client *c, zeps_client_stats *out)
{
    if (c && out)
        *out = c->stats;
}

void zeps_client_set_interrupt(zeps_client *c, volatile int *flag)
{
    if (c)
        c->interrupt = flag;
}

const char *zeps_last_error(const zeps_client *c)
{
    return c ? c->err : new_err;
}
