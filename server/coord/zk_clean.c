/*
 * zk_clean.c - a whole shard restarted, in the ZooKeeper backend
 * (docs/replication.md, "A whole shard restarted"): the clean-exit record
 * a primary stopping on a signal writes after its final snapshot, and the
 * election on it when no member of the in-sync set lives.
 *
 * The record (`clean`: epoch, member, snapshot) is written with one multi
 * that first checks the epoch node at the version this primary's election
 * left, so a deposed primary cannot write one. It is honoured only at the
 * epoch it names: any later election moves the epoch and voids it (the
 * node stays, void, until the next clean exit replaces it). When zk.c's rule finds no live member
 * of the in-sync set, this file reads every live member's node (what each restored at start), asks
 * elect.c for the member that restored exactly the record's snapshot, and
 * that member takes over with zk.c's multi (the `stand` callback). Otherwise it logs why the
 * shard waits and what the operator can do.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elect.h"
#include "log.h"
#include "zeps_errors.h"
#include "zk_impl.h"

/* Log why no member is elected, once per reason (zk.c clears it when a
 * primary appears). */
static void waiting(zk *z, zp_elect_clean_why why)
{
    char msg[900];
    int at = 0;
    if (why == ZP_ELECT_CLEAN_NONE)
        at = snprintf(msg, sizeof(msg),
                      "no clean-exit record (the last primary did not stop on SIGTERM/SIGINT "
                      "with a final snapshot: killed, or snapshot_dir or snapshot_on_exit off)");
    else if (why == ZP_ELECT_CLEAN_VOID)
        at = snprintf(msg, sizeof(msg),
                      "the clean-exit record is of epoch %" PRIu64 ", older than epoch %" PRIu64
                      " (a later primary may have acknowledged updates its snapshot lacks)",
                      z->ev.clean.epoch, z->ev.epoch);
    else {
        at = snprintf(msg, sizeof(msg),
                      "no live replica restored snapshot %s, which the clean-exit record of "
                      "epoch %" PRIu64 " names (restored:",
                      z->ev.clean.snapshot, z->ev.clean.epoch);
        for (int i = 0; i < z->cl.n && at > 0 && (size_t)at < sizeof(msg); i++)
            at += snprintf(msg + at, sizeof(msg) - (size_t)at, " %s",
                           z->cl.restored[i][0] ? z->cl.restored[i] : "nothing");
        if (at > 0 && (size_t)at < sizeof(msg))
            snprintf(msg + at, sizeof(msg) - (size_t)at, ")");
    }
    if (strcmp(msg, z->cl.last_why) == 0)
        return;
    snprintf(z->cl.last_why, sizeof(z->cl.last_why), "%s", msg);
    zp_warn("shard %d: no primary: no in-sync replica alive (in-sync set of epoch %" PRIu64
            ", %d members), and %s. Waiting for a replica of that set; if all are gone for "
            "good, start the shard under a fresh coordination.name: it restores the newest "
            "snapshot set, without the updates acknowledged after it (docs/operations.md, "
            "\"A whole shard restarted\")",
            z->shard, z->ev.isr.epoch, z->ev.isr.n, msg);
}

/* Every member's contents are in: elect on the record, or say why not. */
static void choose(zk *z)
{
    if (z->ev.running || z->ev.dirty || z->ev.has_primary || z->cl.failed)
        return; /* a newer evaluation decides (a read failed: the resume evaluates again) */
    const char *live[MAX_LIVE], *restored[MAX_LIVE];
    for (int i = 0; i < z->cl.n; i++) {
        live[i] = z->cl.live[i];
        restored[i] = z->cl.restored[i];
    }
    zp_elect_clean_why why;
    int pick = zp_elect_pick_clean(live, restored, z->cl.n, &z->ev.clean, z->ev.epoch, &why);
    if (pick < 0) {
        waiting(z, why);
        return;
    }
    if (strcmp(live[pick], z->me) != 0)
        return; /* that member stands; its take-over's watches bring the next evaluation */
    zp_info("shard %d: no in-sync replica alive; the primary of epoch %" PRIu64 " (%s) stopped "
            "cleanly with snapshot %s, which this replica restored: standing on that record",
            z->shard, z->ev.clean.epoch, z->ev.clean.member, z->ev.clean.snapshot);
    z->cl.stand(z);
}

static void on_member_data(int rc, const char *val, int len, const struct Stat *st,
                           const void *data)
{
    (void)st;
    const req *r = data;
    zk *z = zp_zk_req_live(data);
    uint64_t round = r->round;
    int idx = r->idx;
    free((void *)data);
    if (!z || round != z->cl.round)
        return;
    zp_znode_member m;
    z->cl.restored[idx][0] = '\0'; /* gone since, or unreadable: restored nothing */
    if (rc == ZOK && zp_znode_member_parse(val, len, &m) == 0)
        snprintf(z->cl.restored[idx], ZP_COORD_SNAP_MAX, "%s", m.restored);
    else if (rc != ZOK && rc != ZNONODE)
        z->cl.failed = true;
    if (--z->cl.pending == 0)
        choose(z);
}

void zp_zk_clean_consider(zk *z, zp_zk_stand_fn stand)
{
    z->cl.stand = stand;
    if (!z->ev.has_clean) { /* nothing to read */
        waiting(z, ZP_ELECT_CLEAN_NONE);
        return;
    }
    z->cl.round++;
    z->cl.failed = false;
    z->cl.n = z->ev.nlive;
    z->cl.pending = z->ev.nlive;
    for (int i = 0; i < z->ev.nlive; i++)
        memcpy(z->cl.live[i], z->ev.live[i], ZP_COORD_MEMBER_MAX);
    if (z->cl.n == 0) {
        choose(z);
        return;
    }
    for (int i = 0; i < z->cl.n; i++) {
        char path[ZP_ZNODE_PATH_MAX + ZP_COORD_MEMBER_MAX + 1];
        snprintf(path, sizeof(path), "%s/%s", z->paths.members, z->cl.live[i]);
        req *r = zp_zk_req_new(z);
        r->round = z->cl.round;
        r->idx = i;
        if (zoo_aget(zp_zk_req_handle(z), path, 0, on_member_data, r) != ZOK) {
            free(r); /* no session: the next one evaluates again */
            z->cl.failed = true;
            z->cl.round++;
            return;
        }
    }
    zp_zk_session_kick(z->sess);
}

static void on_clean_set(int rc, const void *data)
{
    zk *z;
    zp_coord_done done;
    void *arg;
    int out = zp_zk_req_end_write(data, rc, &z, &done, &arg);
    if (out < 0)
        return;
    if (out == 0)
        zp_info("shard %d: clean-exit record written at epoch %" PRIu64, z->shard,
                z->told.primary.epoch);
    else
        zp_warn("shard %d: clean-exit record not written (%s): a restart of every replica "
                "will wait for a replica of the in-sync set",
                z->shard,
                out == ZEPS_ESTALE ? "the epoch moved: this replica is no longer primary"
                                   : zerror(rc));
    if (done)
        done(arg, out, -1);
}

int zp_zk_clean_set(void *impl, const char *snapshot, zp_coord_done done, void *arg)
{
    zk *z = impl;
    zp_coord_stats st;
    zp_zk_session_stats(z->sess, &st);
    if (!st.connected || !z->told.is_primary || z->ev.epoch != z->told.primary.epoch)
        return ZEPS_ESTATE;
    zp_znode_clean c = {.epoch = z->told.primary.epoch};
    snprintf(c.member, sizeof(c.member), "%s", z->me);
    snprintf(c.snapshot, sizeof(c.snapshot), "%s", snapshot);
    char txt[256];
    if (zp_znode_clean_format(txt, sizeof(txt), &c) != 0)
        return ZEPS_EINVAL;
    zoo_op_t ops[2];
    /* the epoch node where this primary's election left it: a deposed
     * primary (or one whose view is old) writes nothing */
    zoo_check_op_init(&ops[0], z->paths.epoch, z->ev.epoch_version);
    if (z->ev.has_clean) /* a record this epoch's take-over did not see: replaced */
        zoo_set_op_init(&ops[1], z->paths.clean, txt, (int)strlen(txt), z->ev.clean_version, NULL);
    else
        zoo_create_op_init(&ops[1], z->paths.clean, txt, (int)strlen(txt), &ZOO_OPEN_ACL_UNSAFE,
                           ZOO_PERSISTENT, NULL, 0);
    req *r = zp_zk_req_new(z);
    r->done = done;
    r->arg = arg;
    if (zoo_amulti(zp_zk_req_handle(z), 2, ops, r->res, on_clean_set, r) != ZOK) {
        free(r);
        return ZEPS_ESTATE;
    }
    zp_zk_session_kick(z->sess);
    return 0;
}
