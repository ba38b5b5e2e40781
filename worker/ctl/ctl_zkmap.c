/*
 * ctl_zkmap.c - see ctl_zkmap.h. ZooKeeper's single-threaded C client
 * (the one the shards use) has asynchronous calls only: each call here
 * sends one and turns the client's crank (zookeeper_interest, poll,
 * zookeeper_process) until its completion ran or the timeout passed.
 */
#include "ctl_zkmap.h"

#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "now.h"
#include "slotmap.h"
#include "zeps.h"

#ifdef ZEPS_HAVE_ZOOKEEPER
#include <zookeeper/zookeeper.h>

struct zp_ctl_zkmap {
    zhandle_t *zh;
    char hosts[ZP_PATH_MAX];
    int timeout_ms, nshards;
    char name[80];
    char slots[160], epoch_node[200]; /* the map's node, the source's epoch node */
    int32_t version, source_version;  /* as read at begin (-1: no node) */
    /* the call in flight: its completion's result */
    bool done;
    int rc;
    int32_t got_version;
    uint8_t *data;
    size_t len;
};

static void quiet(const char *message)
{
    (void)message; /* the client logs each failed connect; the caller says what failed */
}

/* Turn the client until z->done or the timeout: 0 or ZEPS_ETIMEDOUT. */
static int wait_done(zp_ctl_zkmap *z)
{
    double until = zp_now_s() + z->timeout_ms / 1000.0;
    while (!z->done) {
        int fd = -1, interest = 0;
        struct timeval tv = {0, 0};
        zookeeper_interest(z->zh, &fd, &interest, &tv);
        long left = (long)((until - zp_now_s()) * 1000);
        if (left <= 0)
            return ZEPS_ETIMEDOUT;
        long ms = tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
        struct pollfd p = {.fd = fd,
                           .events = (short)(((interest & ZOOKEEPER_READ) ? POLLIN : 0) |
                                             ((interest & ZOOKEEPER_WRITE) ? POLLOUT : 0))};
        int n = poll(&p, fd >= 0 ? 1 : 0, (int)(ms < 10 ? 10 : ms < left ? ms : left));
        int ev = n > 0 ? ((p.revents & (POLLIN | POLLERR | POLLHUP)) ? ZOOKEEPER_READ : 0) |
                             ((p.revents & POLLOUT) ? ZOOKEEPER_WRITE : 0)
                       : 0;
        zookeeper_process(z->zh, ev);
    }
    return 0;
}

static void on_state(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    (void)zh, (void)path;
    zp_ctl_zkmap *z = ctx;
    if (type == ZOO_SESSION_EVENT && state == ZOO_CONNECTED_STATE)
        z->done = true;
}

/* A new session (the first, or after the last expired while the tool was
 * stopped: the commit is conditional on versions, not on a session). */
static int connect_zk(zp_ctl_zkmap *z, char *err, size_t errlen)
{
    if (z->zh)
        zookeeper_close(z->zh);
    z->done = false;
    z->zh = zookeeper_init2(z->hosts, on_state, z->timeout_ms > 4000 ? z->timeout_ms : 4000, NULL,
                            z, ZOO_NO_LOG_CLIENTENV, quiet);
    if (z->zh && wait_done(z) == 0)
        return 0;
    snprintf(err, errlen,
             "no session with ZooKeeper at %s within %d ms (the slot map of a replicated "
             "cluster is committed there)",
             z->hosts, z->timeout_ms);
    return ZEPS_ETIMEDOUT;
}

int zp_ctl_zkmap_open(zp_ctl_zkmap **out, const zp_config *cfg, int timeout_ms, char *err,
                      size_t errlen)
{
    zp_ctl_zkmap *z = zp_alloc_zeroed(1, sizeof(*z));
    z->timeout_ms = timeout_ms;
    z->nshards = cfg->num_shards;
    snprintf(z->hosts, sizeof(z->hosts), "%s", cfg->coord_zookeeper);
    snprintf(z->name, sizeof(z->name), "%.64s", cfg->coord_name);
    snprintf(z->slots, sizeof(z->slots), "/zeps/%s/slots", z->name);
    int rc = connect_zk(z, err, errlen);
    if (rc != 0) {
        zp_ctl_zkmap_close(&z);
        return rc;
    }
    *out = z;
    return 0;
}

void zp_ctl_zkmap_close(zp_ctl_zkmap **zp)
{
    zp_ctl_zkmap *z = *zp;
    if (!z)
        return;
    if (z->zh)
        zookeeper_close(z->zh);
    free(z->data);
    free(z);
    *zp = NULL;
}

static void on_get(int rc, const char *val, int len, const struct Stat *st, const void *data)
{
    zp_ctl_zkmap *z = (zp_ctl_zkmap *)data;
    z->done = true;
    z->rc = rc;
    z->got_version = rc == ZOK ? st->version : -1;
    free(z->data);
    z->data = NULL;
    z->len = rc == ZOK && val && len > 0 ? (size_t)len : 0;
    if (z->len) {
        z->data = zp_alloc(z->len);
        memcpy(z->data, val, z->len);
    }
}

/* Read node `path` into z (data, len, got_version: -1 if none): 0 or the
 * error with err. */
static int get(zp_ctl_zkmap *z, const char *path, char *err, size_t errlen)
{
    z->done = false;
    int rc = zoo_aget(z->zh, path, 0, on_get, z);
    if (rc == ZOK && (rc = wait_done(z)) == 0 && (z->rc == ZOK || z->rc == ZNONODE))
        return 0;
    snprintf(err, errlen, "ZooKeeper: reading %s: %s", path,
             rc == ZEPS_ETIMEDOUT ? "no answer" : zerror(rc ? rc : z->rc));
    return ZEPS_ETRANSPORT;
}

int zp_ctl_zkmap_begin(zp_ctl_zkmap *z, int source, uint64_t have, char *err, size_t errlen)
{
    snprintf(z->epoch_node, sizeof(z->epoch_node), "/zeps/%s/shards/%d/epoch", z->name, source);
    int rc = get(z, z->epoch_node, err, errlen);
    z->source_version = z->got_version;
    if (rc == 0 && z->got_version < 0) {
        snprintf(err, errlen, "ZooKeeper holds no %s: shard %d has never elected a primary",
                 z->epoch_node, source);
        return ZEPS_ETIMEDOUT;
    }
    if (rc == 0)
        rc = get(z, z->slots, err, errlen);
    z->version = z->got_version;
    zp_slotmap *map = NULL;
    if (rc == 0 && z->len &&
        zp_slotmap_decode(&map, z->data, z->len, z->nshards, err, errlen) != 0) {
        snprintf(err + strlen(err), errlen - strlen(err), " (in %s)", z->slots);
        return ZEPS_EPROTO;
    }
    if (map && zp_slotmap_epoch(map) > have) {
        snprintf(err, errlen,
                 "ZooKeeper holds the slot map of epoch %" PRIu64 ", shard %d still %" PRIu64
                 ": it has not taken it yet; try again",
                 zp_slotmap_epoch(map), source, have);
        rc = ZEPS_ETIMEDOUT;
    }
    zp_slotmap_destroy(&map);
    return rc;
}

static void on_multi(int rc, const void *data)
{
    zp_ctl_zkmap *z = (zp_ctl_zkmap *)data;
    z->done = true;
    z->rc = rc;
}

int zp_ctl_zkmap_commit(zp_ctl_zkmap *z, const void *wire, size_t len, char *err, size_t errlen)
{
    zoo_op_t ops[2];
    zoo_op_result_t res[2];
    zoo_check_op_init(&ops[0], z->epoch_node, z->source_version);
    if (z->version < 0)
        zoo_create_op_init(&ops[1], z->slots, wire, (int)len, &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT,
                           NULL, 0);
    else
        zoo_set_op_init(&ops[1], z->slots, wire, (int)len, z->version, NULL);
    /* The write goes in a session of its own. The one begin read in was
     * not served while the tool copied (this client turns only inside
     * these calls), and a client that heard nothing for 2/3 of its
     * session's timeout drops the connection at its next turn, failing
     * what it just sent (ZOPERATIONTIMEOUT): a copy that outlasted that
     * lost its commit. Once more in another if this one expires. */
    int rc = ZINVALIDSTATE;
    for (int i = 0; i < 2; i++) {
        if (connect_zk(z, err, errlen) != 0) {
            if (i == 0)
                return ZEPS_ETIMEDOUT; /* nothing sent */
            break;
        }
        z->done = false;
        rc = zoo_amulti(z->zh, 2, ops, res, on_multi, z);
        if (rc == ZOK && (rc = wait_done(z)) == 0)
            rc = z->rc; /* ZooKeeper's answer */
        if (rc != ZINVALIDSTATE && rc != ZSESSIONEXPIRED)
            break;
    }
    if (rc == ZOK)
        return 0;
    /* A write sent in a session that expired may have landed before the
     * second one was refused for the version it changed: the node says. */
    char why[256];
    bool landed =
        get(z, z->slots, why, sizeof(why)) == 0 && z->len == len && memcmp(z->data, wire, len) == 0;
    if (landed)
        return 0;
    if (rc == ZBADVERSION || rc == ZNODEEXISTS || rc == ZNONODE) {
        snprintf(err, errlen,
                 "the slot map in ZooKeeper (%s) or the source's primary changed since the move "
                 "began: a shard of the move fenced the map when its part ended by time (the "
                 "lease or the cut-over's bound), another move committed, or the source failed "
                 "over; the move did not commit",
                 z->slots);
        return ZEPS_ESTALE;
    }
    snprintf(err, errlen, "ZooKeeper did not confirm the commit of the slot map (%s): %s", z->slots,
             rc == ZEPS_ETIMEDOUT ? "no answer" : zerror(rc));
    return ZEPS_EIO;
}

#else /* built without ZooKeeper's client */

int zp_ctl_zkmap_open(zp_ctl_zkmap **out, const zp_config *cfg, int timeout_ms, char *err,
                      size_t errlen)
{
    (void)out, (void)cfg, (void)timeout_ms;
    snprintf(err, errlen,
             "this zepsctl was built without ZooKeeper's client: it cannot commit "
             "a move of a replicated cluster (bash deploy/install-deps.sh zk, then "
             "build again)");
    return ZEPS_ECONFIG;
}

void zp_ctl_zkmap_close(zp_ctl_zkmap **zp)
{
    *zp = NULL;
}

int zp_ctl_zkmap_begin(zp_ctl_zkmap *z, int source, uint64_t have, char *err, size_t errlen)
{
    (void)z, (void)source, (void)have, (void)err, (void)errlen;
    return ZEPS_ECONFIG;
}

int zp_ctl_zkmap_commit(zp_ctl_zkmap *z, const void *wire, size_t len, char *err, size_t errlen)
{
    (void)z, (void)wire, (void)len, (void)err, (void)errlen;
    return ZEPS_ECONFIG;
}
#endif
