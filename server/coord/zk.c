/*
 * zk.c - the ZooKeeper backend of the coordination layer (zp_zk_ops):
 * the shard's nodes, this replica's membership, the election, the epoch
 * and the in-sync set, over one session of zk_session.c.
 *
 * Every session runs the same steps, each started by the completion of
 * the one before: make the shard's persistent nodes (`tree`), register
 * this replica as an ephemeral sequential member (`join`), then
 * `evaluate` - six reads sent at once (members, primary with an exists
 * watch, its data, the in-sync set, the epoch, the clean-exit record),
 * decided on when the last answers. ZooKeeper answers a session's
 * requests in order, and the watches set by the reads fire on any change
 * after them, so a decision
 * is never made on a view that cannot be corrected: a change during an
 * evaluation marks it dirty and it runs again.
 *
 * The election is one atomic multi-operation: the epoch node set to e+1
 * if still at the version read, the in-sync set rewritten (the members of
 * the old set still alive, led by the new primary) if still at its
 * version, and the ephemeral `primary` node created (an election on the
 * clean-exit record also checks the record's version). It fails as a whole
 * if another replica moved first or the old primary's session still holds
 * `primary`; then the watches bring the next evaluation. Only the live
 * member with the lowest sequence among the in-sync set tries (elect.c),
 * so a change costs each member a few reads and one write in all. When no
 * member of the in-sync set lives, zk_clean.c decides on the clean-exit
 * record instead.
 *
 * Requests carry a small `req` with the session generation they belong
 * to: an answer from a session that expired since is dropped, and the
 * client answers every request exactly once (with ZCLOSING at close), so
 * each `req` is freed in its completion.
 */
#include "zk.h"

#include "elect.h"
#include "zk_impl.h"
#include "zk_session.h"
#include "znode.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"
#include "log.h"
#include "now.h"
#include "rng.h"
#include "zeps_errors.h"

static void evaluate(zk *z);

static void on_watch(zhandle_t *h, int type, int state, const char *path, void *ctx)
{
    (void)h, (void)state;
    zk *z = ctx;
    if (type == ZOO_SESSION_EVENT || z->closing)
        return;
    zp_debug("shard %d: %s changed (event %d)", z->shard, path ? path : "?", type);
    evaluate(z);
}

/* ---- the tree and the member node ---------------------------------- */

static void join(zk *z);

static void on_tree(int rc, const char *value, const void *data)
{
    (void)value;
    zk *z = zp_zk_req_live(data);
    bool last = ((const req *)data)->last;
    free((void *)data);
    if (!z)
        return;
    if (rc != ZOK && rc != ZNODEEXISTS) {
        z->tree_failed = true; /* made again at the next (re)connection */
        zp_warn("shard %d: cannot make the coordination nodes: %s", z->shard, zerror(rc));
    }
    if (!last)
        return;
    z->tree_done = !z->tree_failed;
    if (z->tree_done)
        join(z);
}

/* The persistent nodes, parents first, sent at once (answered in order). */
static void tree(zk *z)
{
    z->tree_failed = false;
    for (int i = 0; i <= ZP_ZNODE_TREE; i++) {
        req *r = zp_zk_req_new(z);
        r->last = i == ZP_ZNODE_TREE;
        /* the in-sync set last: "0", epoch 0 naming nobody (any member may
         * win the first election) */
        const char *path = i < ZP_ZNODE_TREE ? z->paths.tree[i] : z->paths.isr;
        const char *val = i == ZP_ZNODE_TREE || strcmp(path, z->paths.epoch) == 0 ? "0" : "";
        if (zoo_acreate(zp_zk_req_handle(z), path, val, (int)strlen(val), &ZOO_OPEN_ACL_UNSAFE,
                        ZOO_PERSISTENT, on_tree, r) != ZOK)
            free(r);
    }
    zp_zk_session_kick(z->sess);
}

static void on_created(int rc, const char *value, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    z->joining = false;
    if (rc != ZOK) {
        zp_warn("shard %d: cannot register replica %d: %s", z->shard, z->replica, zerror(rc));
        return; /* a connection loss: join looks for the node at the next resume */
    }
    const char *slash = strrchr(value, '/');
    snprintf(z->me, sizeof(z->me), "%s", slash ? slash + 1 : value);
    zp_info("shard %d: replica %d registered as %s", z->shard, z->replica, z->me);
    evaluate(z);
}

/* This process's member node may exist already (a create answered by a
 * connection loss may have been applied): adopt it, else create it (a new
 * session's: the expired one's node went with it). */
static void on_members(int rc, const struct String_vector *v, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    if (rc != ZOK) {
        z->joining = false;
        return;
    }
    char prefix[ZP_COORD_MEMBER_MAX], path[ZP_ZNODE_PATH_MAX + ZP_COORD_MEMBER_MAX], val[400];
    zp_znode_member_prefix(prefix, sizeof(prefix), z->incarnation);
    for (int i = 0; i < v->count; i++)
        if (strncmp(v->data[i], prefix, strlen(prefix)) == 0) {
            z->joining = false;
            snprintf(z->me, sizeof(z->me), "%s", v->data[i]);
            zp_info("shard %d: replica %d is %s (kept across a reconnection)", z->shard, z->replica,
                    z->me);
            evaluate(z);
            return;
        }
    snprintf(path, sizeof(path), "%s/%s", z->paths.members, prefix);
    zp_znode_member m = {.replica = z->replica};
    snprintf(m.endpoint, sizeof(m.endpoint), "%s", z->endpoint);
    snprintf(m.restored, sizeof(m.restored), "%s", z->restored);
    if (zp_znode_member_format(val, sizeof(val), &m) != 0) {
        z->joining = false;
        return;
    }
    req *r = zp_zk_req_new(z);
    if (zoo_acreate(zp_zk_req_handle(z), path, val, (int)strlen(val), &ZOO_OPEN_ACL_UNSAFE,
                    ZOO_EPHEMERAL_SEQUENTIAL, on_created, r) != ZOK) {
        free(r);
        z->joining = false;
    }
    zp_zk_session_kick(z->sess);
}

static void join(zk *z)
{
    if (z->joining || z->me[0])
        return;
    z->joining = true;
    req *r = zp_zk_req_new(z);
    if (zoo_aget_children(zp_zk_req_handle(z), z->paths.members, 0, on_members, r) != ZOK) {
        free(r);
        z->joining = false;
    }
    zp_zk_session_kick(z->sess);
}

/* ---- telling the callbacks ----------------------------------------- */

static void view_fill(zk *z, zp_coord_view *v)
{
    memset(v, 0, sizeof(*v));
    v->epoch = z->told.max_epoch;
    v->primary_replica = -1;
    v->primary_endpoint = "";
    v->me = z->me;
    if (z->told.has) {
        snprintf(v->primary, sizeof(v->primary), "%s", z->told.primary.member);
        v->primary_replica = z->told.primary.replica;
        v->primary_endpoint = z->told.primary.endpoint;
        v->is_primary = z->told.is_primary;
    }
}

/* Tell the role callback if who is primary, or at which epoch, changed. */
static void tell_role(zk *z, bool has, const zp_znode_primary *p)
{
    bool mine = has && z->me[0] && strcmp(p->member, z->me) == 0;
    if (has == z->told.has && mine == z->told.is_primary &&
        (!has ||
         (p->epoch == z->told.primary.epoch && strcmp(p->member, z->told.primary.member) == 0)))
        return;
    z->told.has = has;
    z->told.is_primary = mine;
    if (has) {
        z->told.primary = *p;
        if (p->epoch > z->told.max_epoch)
            z->told.max_epoch = p->epoch;
    }
    if (mine)
        zp_info("shard %d: replica %d (%s) is the primary at epoch %" PRIu64, z->shard, z->replica,
                z->me, p->epoch);
    else if (has)
        zp_info("shard %d: primary is replica %d (%s) at epoch %" PRIu64 ", %s", z->shard,
                p->replica, p->member, p->epoch, p->endpoint);
    zp_coord_view v;
    view_fill(z, &v);
    if (z->cbs.role)
        z->cbs.role(z->cbs.arg, &v);
}

static void tell_isr(zk *z)
{
    if (z->ev.isr_version == z->told.isr_version)
        return;
    z->told.isr_version = z->ev.isr_version;
    const char *names[ZP_COORD_ISR_MAX];
    for (int i = 0; i < z->ev.isr.n; i++)
        names[i] = z->ev.isr.m[i];
    zp_coord_isr s = {
        .epoch = z->ev.isr.epoch, .version = z->ev.isr_version, .n = z->ev.isr.n, .members = names};
    if (z->cbs.isr)
        z->cbs.isr(z->cbs.arg, &s);
}

/* Tell the members callback if the live members changed. */
static void tell_members(zk *z)
{
    bool same = z->ev.nlive == z->told.nlive;
    for (int i = 0; same && i < z->ev.nlive; i++)
        same = strcmp(z->ev.live[i], z->told.live[i]) == 0;
    if (same)
        return;
    const char *names[MAX_LIVE];
    z->told.nlive = z->ev.nlive;
    for (int i = 0; i < z->ev.nlive; i++) {
        memcpy(z->told.live[i], z->ev.live[i], ZP_COORD_MEMBER_MAX);
        names[i] = z->told.live[i];
    }
    if (z->cbs.members)
        z->cbs.members(z->cbs.arg, names, z->ev.nlive);
}

/* ---- evaluation and election ---------------------------------------- */

static void decide(zk *z);

/* One read answered: `ok` says whether it may be used. */
static void read_done(zk *z, bool ok)
{
    if (!ok)
        z->ev.failed = true;
    if (--z->ev.pending > 0)
        return;
    z->ev.running = false;
    if (!z->ev.failed && !z->ev.dirty)
        decide(z);
    else if (z->ev.dirty)
        evaluate(z);
    /* failed: a connection loss; the resume evaluates again */
}

static void on_live(int rc, const struct String_vector *v, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    z->ev.nlive = 0;
    for (int i = 0; rc == ZOK && i < v->count && z->ev.nlive < MAX_LIVE; i++)
        snprintf(z->ev.live[z->ev.nlive++], ZP_COORD_MEMBER_MAX, "%s", v->data[i]);
    read_done(z, rc == ZOK);
}

static void on_exists(int rc, const struct Stat *st, const void *data)
{
    (void)st;
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (z)
        read_done(z, rc == ZOK || rc == ZNONODE);
}

static void on_primary(int rc, const char *val, int len, const struct Stat *st, const void *data)
{
    (void)st;
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    z->ev.has_primary = rc == ZOK;
    if (rc == ZOK && zp_znode_primary_parse(val, len, &z->ev.primary) != 0) {
        zp_warn("shard %d: %s holds what zeps did not write: ignored", z->shard, z->paths.primary);
        z->ev.has_primary = false;
    }
    read_done(z, rc == ZOK || rc == ZNONODE);
}

static void on_isr(int rc, const char *val, int len, const struct Stat *st, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    bool ok = rc == ZOK && zp_znode_isr_parse(val, len, &z->ev.isr) == 0;
    if (rc == ZOK && !ok)
        zp_warn("shard %d: %s holds what zeps did not write", z->shard, z->paths.isr);
    if (ok)
        z->ev.isr_version = st->version;
    read_done(z, ok);
}

static void on_epoch(int rc, const char *val, int len, const struct Stat *st, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    bool ok = rc == ZOK && zp_znode_epoch_parse(val, len, &z->ev.epoch) == 0;
    if (ok)
        z->ev.epoch_version = st->version;
    read_done(z, ok);
}

static void on_clean(int rc, const char *val, int len, const struct Stat *st, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    z->ev.has_clean = rc == ZOK;
    if (rc == ZOK && zp_znode_clean_parse(val, len, &z->ev.clean) != 0) {
        zp_warn("shard %d: %s holds what zeps did not write: not honoured", z->shard,
                z->paths.clean);
        z->ev.has_clean = false;
    }
    if (rc == ZOK)
        z->ev.clean_version = st->version;
    read_done(z, rc == ZOK || rc == ZNONODE);
}

/* Read what the election depends on, with watches on what can change it;
 * decide once every read answered. One evaluation at a time: a trigger
 * during one makes it run again. */
static void evaluate(zk *z)
{
    if (z->ev.running || z->closing || !z->me[0]) {
        z->ev.dirty = true;
        return;
    }
    z->ev.running = true;
    z->ev.dirty = z->ev.failed = false;
    z->ev.pending = EVAL_READS;
    zhandle_t *h = zp_zk_req_handle(z);
    req *r[EVAL_READS];
    for (int i = 0; i < EVAL_READS; i++)
        r[i] = zp_zk_req_new(z);
    int rc[EVAL_READS] = {
        zoo_awget_children(h, z->paths.members, on_watch, z, on_live, r[0]),
        zoo_awexists(h, z->paths.primary, on_watch, z, on_exists, r[1]),
        zoo_aget(h, z->paths.primary, 0, on_primary, r[2]),
        zoo_awget(h, z->paths.isr, on_watch, z, on_isr, r[3]),
        zoo_aget(h, z->paths.epoch, 0, on_epoch, r[4]),
        zoo_aget(h, z->paths.clean, 0, on_clean, r[5]),
    };
    for (int i = 0; i < EVAL_READS; i++)
        if (rc[i] != ZOK) { /* not sent (no session): answered never */
            free(r[i]);
            read_done(z, false);
        }
    zp_zk_session_kick(z->sess);
}

static void on_elected(int rc, const void *data)
{
    zk *z = zp_zk_req_live(data);
    free((void *)data);
    if (!z)
        return;
    z->electing = false;
    if (rc == ZOK) {
        z->elections++;
        zp_debug("shard %d: election won", z->shard);
    } else {
        zp_debug("shard %d: election lost or undone: %s", z->shard, zerror(rc));
    }
    evaluate(z); /* reads the primary node: the role callback follows from it */
}

/* The atomic take-over: epoch e+1 (which voids any clean-exit record: it
 * is honoured at its own epoch only), the in-sync set rewritten, `primary`
 * made, and, standing `on_record`, the clean-exit record still at the
 * version read; each only if nothing moved since the evaluation read it. */
static void elect(zk *z, bool on_record)
{
    if (z->electing)
        return;
    const char *live[MAX_LIVE];
    for (int i = 0; i < z->ev.nlive; i++)
        live[i] = z->ev.live[i];
    zp_znode_isr next;
    zp_znode_primary p = {.epoch = z->ev.epoch + 1, .replica = z->replica};
    snprintf(p.member, sizeof(p.member), "%s", z->me);
    snprintf(p.endpoint, sizeof(p.endpoint), "%s", z->endpoint);
    zp_elect_next_isr(&next, &z->ev.isr, live, z->ev.nlive, z->me, p.epoch);
    char epoch_txt[32], isr_txt[ZP_COORD_ISR_MAX * (ZP_COORD_MEMBER_MAX + 1) + 32], prim_txt[512];
    snprintf(epoch_txt, sizeof(epoch_txt), "%" PRIu64, p.epoch);
    if (zp_znode_isr_format(isr_txt, sizeof(isr_txt), &next) != 0 ||
        zp_znode_primary_format(prim_txt, sizeof(prim_txt), &p) != 0)
        return;
    zoo_op_t ops[4];
    zoo_set_op_init(&ops[0], z->paths.epoch, epoch_txt, (int)strlen(epoch_txt), z->ev.epoch_version,
                    NULL);
    zoo_set_op_init(&ops[1], z->paths.isr, isr_txt, (int)strlen(isr_txt), z->ev.isr_version, NULL);
    zoo_create_op_init(&ops[2], z->paths.primary, prim_txt, (int)strlen(prim_txt),
                       &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0);
    int nops = 3;
    if (on_record) /* the record read: one rewritten since fails the take-over */
        zoo_check_op_init(&ops[nops++], z->paths.clean, z->ev.clean_version);
    req *r = zp_zk_req_new(z);
    z->electing = true;
    zp_info("shard %d: replica %d (%s) stands for primary at epoch %" PRIu64, z->shard, z->replica,
            z->me, p.epoch);
    if (zoo_amulti(zp_zk_req_handle(z), nops, ops, r->res, on_elected, r) != ZOK) {
        free(r);
        z->electing = false;
    }
    zp_zk_session_kick(z->sess);
}

/* The clean-exit rule picked this replica (zk_clean.c). */
static void stand_on_record(zk *z)
{
    elect(z, true);
}

static void decide(zk *z)
{
    z->cl.last_why[0] = z->ev.has_primary ? '\0' : z->cl.last_why[0];
    tell_isr(z);
    tell_members(z);
    if (z->ev.has_primary) {
        tell_role(z, true, &z->ev.primary);
        return;
    }
    tell_role(z, false, NULL);
    const char *live[MAX_LIVE];
    for (int i = 0; i < z->ev.nlive; i++)
        live[i] = z->ev.live[i];
    int pick = zp_elect_pick(live, z->ev.nlive, &z->ev.isr);
    if (pick < 0)
        zp_zk_clean_consider(z, stand_on_record); /* every in-sync member is gone */
    else if (strcmp(live[pick], z->me) == 0)
        elect(z, false);
}

/* ---- the in-sync set written by the primary -------------------------- */

static void on_isr_set(int rc, const struct Stat *st, const void *data)
{
    zk *z;
    zp_coord_done done;
    void *arg;
    int out = zp_zk_req_end_write(data, rc, &z, &done, &arg);
    if (out < 0)
        return;
    if (out == 0)
        z->isr_writes++;
    else if (out == ZEPS_ESTALE)
        z->isr_refused++;
    if (out != 0)
        zp_info("shard %d: in-sync set not written: %s", z->shard,
                out == ZEPS_ESTALE ? "it changed since the version this write was based on"
                                   : zerror(rc));
    if (done)
        done(arg, out, out == 0 ? st->version : -1);
}

static int zk_isr_set(void *impl, const char *const *members, int n, int32_t version,
                      zp_coord_done done, void *arg)
{
    zk *z = impl;
    zp_coord_stats st;
    zp_zk_session_stats(z->sess, &st);
    if (!st.connected || !z->told.is_primary) {
        z->isr_refused++;
        return ZEPS_ESTATE;
    }
    if (n <= 0 || n > ZP_COORD_ISR_MAX)
        return ZEPS_EINVAL;
    zp_znode_isr s = {.epoch = z->told.primary.epoch};
    bool has_me = false;
    for (int i = 0; i < n; i++) {
        if (zp_znode_seq(members[i]) < 0 || strlen(members[i]) >= ZP_COORD_MEMBER_MAX)
            return ZEPS_EINVAL;
        has_me |= strcmp(members[i], z->me) == 0;
        snprintf(s.m[s.n++], ZP_COORD_MEMBER_MAX, "%s", members[i]);
    }
    char txt[ZP_COORD_ISR_MAX * (ZP_COORD_MEMBER_MAX + 1) + 32];
    if (!has_me || zp_znode_isr_format(txt, sizeof(txt), &s) != 0)
        return ZEPS_EINVAL;
    req *r = zp_zk_req_new(z);
    r->done = done;
    r->arg = arg;
    if (zoo_aset(zp_zk_req_handle(z), z->paths.isr, txt, (int)strlen(txt), version, on_isr_set,
                 r) != ZOK) {
        free(r);
        return ZEPS_ESTATE;
    }
    zp_zk_session_kick(z->sess);
    return 0;
}

/* ---- the session's news, the lifecycle ------------------------------- */

static void on_session(void *arg, zp_coord_session ev, const char *why)
{
    zk *z = arg;
    if (ev == ZP_COORD_EXPIRED) {
        /* the member node and, if held, `primary` are gone with it; answers
         * still due from the old session are dropped (live_zk) */
        z->gen++;
        z->me[0] = '\0';
        z->joining = z->electing = false;
        z->cl.round++; /* member reads of the old session: dropped */
        z->ev.running = z->ev.dirty = false;
        z->ev.pending = 0;
    }
    if (z->cbs.session)
        z->cbs.session(z->cbs.arg, ev, why);
    if (ev == ZP_COORD_EXPIRED)
        tell_role(z, false, NULL);
    else if (ev == ZP_COORD_CONNECTED || ev == ZP_COORD_RESUMED) {
        zp_zk_slots_watch(z); /* first: its answer comes before the election's */
        if (!z->tree_done)
            tree(z);
        else if (!z->me[0])
            join(z);
        else
            evaluate(z); /* reads answered by the connection loss are read again */
    }
}

static int zk_create(void **impl, uv_loop_t *loop, const zp_coord_opts *o, const zp_coord_cbs *cbs,
                     char *err, size_t errlen)
{
    if (!o->hosts || !o->hosts[0])
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "no ZooKeeper hosts given");
    if (o->replica < 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "replica %d is negative", o->replica);
    const char *ep = o->endpoint ? o->endpoint : "";
    if (strlen(ep) >= 256 || strchr(ep, ' '))
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "endpoint '%s' cannot be published", ep);
    if (o->restored && strlen(o->restored) >= ZP_COORD_SNAP_MAX)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "snapshot name '%s' is too long",
                             o->restored);
    zk *z = zp_alloc_zeroed(1, sizeof(*z));
    int rc = zp_znode_paths_make(&z->paths, o->cluster ? o->cluster : "", o->shard, err, errlen);
    if (rc != 0) {
        free(z);
        return rc;
    }
    z->cbs = *cbs;
    z->shard = o->shard;
    z->replica = o->replica;
    z->incarnation = o->incarnation
                         ? o->incarnation
                         : zp_rng_mix64(zp_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)z);
    snprintf(z->endpoint, sizeof(z->endpoint), "%s", ep);
    snprintf(z->restored, sizeof(z->restored), "%s", o->restored ? o->restored : "");
    z->told.isr_version = -1;
    z->told.nlive = -1;
    int timeout = o->session_timeout_ms > 0 ? o->session_timeout_ms : 10000;
    int connect = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : timeout;
    rc = zp_zk_session_new(&z->sess, loop, o->hosts, timeout, connect, on_session, z, err, errlen);
    if (rc != 0) {
        free(z);
        return rc;
    }
    *impl = z;
    return 0;
}

static void zk_freed(void *arg)
{
    free(arg);
}

static void zk_destroy(void *impl)
{
    zk *z = impl;
    z->closing = true; /* completions run by the close see it and do nothing */
    zp_zk_session_close(&z->sess, zk_freed, z);
}

static void zk_view(void *impl, zp_coord_view *v)
{
    view_fill(impl, v);
}

static void zk_stats(void *impl, zp_coord_stats *st)
{
    zk *z = impl;
    zp_zk_session_stats(z->sess, st);
    st->elections = z->elections;
    st->isr_writes = z->isr_writes;
    st->isr_refused = z->isr_refused;
}

const zp_coord_ops zp_zk_ops = {
    .name = "zookeeper",
    .create = zk_create,
    .destroy = zk_destroy,
    .isr_set = zk_isr_set,
    .clean_set = zp_zk_clean_set,
    .view = zk_view,
    .stats = zk_stats,
    .slots_get = zp_zk_slots_get,
    .slots_set = zp_zk_slots_set,
};
