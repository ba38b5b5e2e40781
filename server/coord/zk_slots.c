/*
 * zk_slots.c - the cluster's slot map node in the ZooKeeper backend
 * (/zeps/<name>/slots; docs/elastic.md, "The map in ZooKeeper"): a watch
 * that hands each version of the node to the `slots` callback, and the
 * read and the conditional write with which a shard fences the node when
 * its part of a move ends by time. The node holds the slot map's wire
 * form; this file never decodes it (the shard does, server/op/zkmap.c).
 *
 * The watch is armed at every new or resumed session before anything
 * else is sent (zk.c), and again from each of its events: ZooKeeper
 * answers a session's requests in order and delivers a watch event before
 * the answer to any request sent after the change, so a replica that wins
 * an election has heard the map written before its election's reads.
 */
#include <stdlib.h>
#include <string.h>

#include "zeps_errors.h"
#include "zk_impl.h"

static void arm(zk *z);

static void on_watch(zhandle_t *h, int type, int state, const char *path, void *ctx)
{
    (void)h, (void)state, (void)path;
    zk *z = ctx;
    if (type != ZOO_SESSION_EVENT && !z->closing)
        arm(z); /* read it again, which watches again */
}

static void tell(zk *z, const char *val, int len, int32_t version)
{
    if (z->cbs.slots)
        z->cbs.slots(z->cbs.arg, val, val && len > 0 ? (size_t)len : 0, version);
}

static void on_exists(int rc, const struct Stat *st, const void *data)
{
    (void)st;
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (z && rc == ZOK)
        arm(z); /* made between the read and this */
    else if (z && rc == ZNONODE)
        tell(z, NULL, 0, -1);
}

static void on_read(int rc, const char *val, int len, const struct Stat *st, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    if (rc == ZOK) {
        tell(z, val, len, st->version);
        return;
    }
    if (rc != ZNONODE)
        return; /* a connection loss: the resume arms it again */
    /* a read of a missing node sets no watch; an exists does */
    req *r = zp_zk_req_new(z);
    if (zoo_awexists(zp_zk_req_handle(z), z->paths.slots, on_watch, z, on_exists, r) != ZOK)
        free(r);
    zp_zk_session_kick(z->sess);
}

static void arm(zk *z)
{
    req *r = zp_zk_req_new(z);
    if (zoo_awget(zp_zk_req_handle(z), z->paths.slots, on_watch, z, on_read, r) != ZOK)
        free(r);
    zp_zk_session_kick(z->sess);
}

void zp_zk_slots_watch(zk *z)
{
    arm(z);
}

static void on_got(int rc, const char *val, int len, const struct Stat *st, const void *data)
{
    const req *r = data;
    zk *z = zp_zk_req_live(data);
    bool closing = r->z->closing;
    zp_coord_got got = r->got;
    void *arg = r->arg;
    free((void *)data);
    if (closing)
        return; /* no callback after destroy */
    if (z && rc == ZOK)
        got(arg, 0, val, val && len > 0 ? (size_t)len : 0, st->version);
    else if (z && rc == ZNONODE)
        got(arg, 0, NULL, 0, -1);
    else
        got(arg, !z || zp_zk_req_write_rc(rc) == ZEPS_ECLOSED ? ZEPS_ECLOSED : ZEPS_EIO, NULL, 0,
            -1);
}

static bool connected(zk *z)
{
    zp_coord_stats st;
    zp_zk_session_stats(z->sess, &st);
    return st.connected;
}

int zp_zk_slots_get(void *impl, zp_coord_got got, void *arg)
{
    zk *z = impl;
    if (!connected(z))
        return ZEPS_ESTATE;
    req *r = zp_zk_req_new(z);
    r->got = got;
    r->arg = arg;
    if (zoo_aget(zp_zk_req_handle(z), z->paths.slots, 0, on_got, r) != ZOK) {
        free(r);
        return ZEPS_ESTATE;
    }
    zp_zk_session_kick(z->sess);
    return 0;
}

/* A write's end: a node made meanwhile is a version moved (ESTALE). */
static void written(int rc, const void *data)
{
    zk *z;
    zp_coord_done done;
    void *arg;
    int out = zp_zk_req_end_write(data, rc, &z, &done, &arg);
    if (out < 0)
        return;
    if (rc == ZNODEEXISTS && out == ZEPS_EIO)
        out = ZEPS_ESTALE;
    if (done)
        done(arg, out, -1);
}

static void on_set(int rc, const struct Stat *st, const void *data)
{
    (void)st;
    written(rc, data);
}

static void on_made(int rc, const char *value, const void *data)
{
    (void)value;
    written(rc, data);
}

int zp_zk_slots_set(void *impl, const void *map, size_t len, int32_t version, zp_coord_done done,
                    void *arg)
{
    zk *z = impl;
    if (!connected(z))
        return ZEPS_ESTATE;
    req *r = zp_zk_req_new(z);
    r->done = done;
    r->arg = arg;
    zhandle_t *h = zp_zk_req_handle(z);
    int rc = version < 0 ? zoo_acreate(h, z->paths.slots, map, (int)len, &ZOO_OPEN_ACL_UNSAFE,
                                       ZOO_PERSISTENT, on_made, r)
                         : zoo_aset(h, z->paths.slots, map, (int)len, version, on_set, r);
    if (rc != ZOK) {
        free(r);
        return ZEPS_ESTATE;
    }
    zp_zk_session_kick(z->sess);
    return 0;
}
