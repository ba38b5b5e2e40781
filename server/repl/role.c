/*
 * role.c - see role.h. The coord's callbacks are the only writers of the
 * role: `on_role` when who is primary (or the epoch) changes, `on_session`
 * when the session does. Neither stops the shard itself (a coord callback
 * must not destroy the coord): an unreachable service at start-up sets
 * `start_failed`, which the shard's housekeeping timer reads.
 */
#include "role.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "zeps_errors.h"

void zp_role_init(zp_role *r, const zp_config *cfg, int shard, int replica)
{
    memset(r, 0, sizeof(*r));
    r->replicas = cfg->replicas;
    r->replica = replica;
    r->shard = shard;
    r->primary_replica = cfg->replicas > 1 ? -1 : replica;
    r->kind = cfg->replicas > 1 ? ZP_ROLE_NONE : ZP_ROLE_PRIMARY;
    r->session = cfg->replicas > 1 ? ZP_ROLE_SESSION_CONNECTING : ZP_ROLE_SESSION_OFF;
    r->isr.version = -1;
    r->zkmap.version = -1;
}

static bool in_isr(const zp_role *r, const char *m)
{
    for (int i = 0; i < r->isr.n; i++)
        if (strcmp(r->isr.m[i], m) == 0)
            return true;
    return false;
}

static void on_isr_written(void *arg, int rc, int32_t version)
{
    zp_role *r = arg;
    r->isr.writing = false;
    if (rc == 0)
        r->isr.writes++;
    (void)version; /* the isr callback brings the set and its version */
}

/* Primary only: make the in-sync set this replica and the live members
 * the replication log's rule admits (r->in_sync; every live member when
 * none is set). */
void zp_role_sync_isr(zp_role *r)
{
    if (r->kind != ZP_ROLE_PRIMARY || r->fenced || !r->coord || r->isr.writing ||
        r->isr.version < 0 || r->nlive == 0 || !r->me[0])
        return;
    const char *want[ZP_COORD_ISR_MAX];
    int n = 0;
    bool same = r->isr.epoch == r->epoch && in_isr(r, r->me);
    want[n++] = r->me;
    for (int i = 0; i < r->nlive && n < ZP_COORD_ISR_MAX; i++) {
        const char *m = r->live[i];
        bool was = in_isr(r, m);
        if (strcmp(m, r->me) == 0 || (r->in_sync && !r->in_sync(r->in_sync_arg, m, was)))
            continue;
        want[n++] = m;
        same &= was;
    }
    if (same && n == r->isr.n)
        return;
    if (zp_coord_isr_set(r->coord, want, n, r->isr.version, on_isr_written, r) == 0) {
        r->isr.writing = true;
        zp_info("in-sync set: %d replica(s)%s (was %d)", n,
                r->in_sync ? ", the caught-up members" : ", the live members", r->isr.n);
    }
}

static void on_isr(void *arg, const zp_coord_isr *s)
{
    zp_role *r = arg;
    r->isr.n = 0;
    for (int i = 0; i < s->n && i < ZP_COORD_ISR_MAX; i++)
        snprintf(r->isr.m[r->isr.n++], ZP_COORD_MEMBER_MAX, "%s", s->members[i]);
    r->isr.version = s->version;
    r->isr.epoch = s->epoch;
    zp_role_sync_isr(r);
}

static void on_members(void *arg, const char *const *live, int n)
{
    zp_role *r = arg;
    r->nlive = 0;
    for (int i = 0; i < n && r->nlive < ZP_COORD_ISR_MAX; i++)
        snprintf(r->live[r->nlive++], ZP_COORD_MEMBER_MAX, "%s", live[i]);
    zp_role_sync_isr(r);
}

/* The slot map node's bytes: kept (the coord's are valid during the call
 * only) and handed to the shard. */
static void on_slots(void *arg, const void *map, size_t len, int32_t version)
{
    zp_role *r = arg;
    free(r->zkmap.map);
    r->zkmap.map = len ? zp_alloc(len) : NULL;
    if (len)
        memcpy(r->zkmap.map, map, len);
    r->zkmap.len = len;
    r->zkmap.version = version;
    r->zkmap.read = true;
    if (r->slots_heard)
        r->slots_heard(r->slots_arg);
}

static void on_role(void *arg, const zp_coord_view *v)
{
    zp_role *r = arg;
    bool elected = v->is_primary && (r->kind != ZP_ROLE_PRIMARY || r->fenced);
    zp_role_kind kind = v->is_primary             ? ZP_ROLE_PRIMARY
                        : v->primary_replica >= 0 ? ZP_ROLE_BACKUP
                                                  : ZP_ROLE_NONE;
    if (kind != r->kind || v->epoch != r->epoch)
        r->role_changes++;
    if (kind == ZP_ROLE_PRIMARY && r->fenced) {
        r->fenced = false;
        zp_info("elected again at epoch %" PRIu64 ": no longer fenced", v->epoch);
    } else if (kind == ZP_ROLE_BACKUP && r->fenced) { /* it follows the primary that replaced it */
        r->fenced = false;
        zp_info("a backup of replica %d at epoch %" PRIu64 ": no longer fenced", v->primary_replica,
                v->epoch);
    }
    if (kind != r->kind)
        zp_info("role: %s -> %s at epoch %" PRIu64, zp_role_kind_name(r->kind),
                zp_role_kind_name(kind), v->epoch);
    r->kind = kind;
    r->epoch = v->epoch;
    r->primary_replica = v->primary_replica;
    snprintf(r->primary_endpoint, sizeof(r->primary_endpoint), "%s", v->primary_endpoint);
    snprintf(r->me, sizeof(r->me), "%s", v->me ? v->me : "");
    if (elected && r->zkmap.read && r->slots_heard) /* the newest map before it serves */
        r->slots_heard(r->slots_arg);
    zp_role_sync_isr(r);
}

static void on_session(void *arg, zp_coord_session ev, const char *why)
{
    zp_role *r = arg;
    snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
    switch (ev) {
    case ZP_COORD_CONNECTED:
    case ZP_COORD_RESUMED:
        r->session = ZP_ROLE_SESSION_CONNECTED;
        r->connected_once = true;
        zp_info("coordination session %s%s%s", ev == ZP_COORD_CONNECTED ? "made" : "resumed",
                r->why[0] ? ": " : "", r->why);
        return;
    case ZP_COORD_SUSPENDED:
        r->session = ZP_ROLE_SESSION_SUSPENDED;
        zp_warn("coordination session suspended (%s): serving on as %s, no failover until it "
                "is back",
                r->why, zp_role_kind_name(r->kind));
        return;
    case ZP_COORD_EXPIRED:
        r->session = ZP_ROLE_SESSION_EXPIRED;
        /* a write of the set in flight went with the session, and its
         * answer may never come (seen: a primary re-elected after every
         * session expired wrote its set never again, its backup kept out) */
        r->isr.writing = false;
        if (r->kind == ZP_ROLE_PRIMARY)
            r->fenced = true; /* another replica may be primary now */
        zp_error("coordination session expired (%s): %s; rejoining as a new member", r->why,
                 r->fenced ? "this primary is fenced and stops serving" : "was not primary");
        return;
    case ZP_COORD_UNREACHABLE:
        r->session = ZP_ROLE_SESSION_UNREACHABLE;
        if (!r->connected_once)
            r->start_failed = true;
        zp_error("%s%s", r->why,
                 r->connected_once ? "; serving on, no failover until it answers" : "");
        return;
    }
}

int zp_role_start(zp_role *r, uv_loop_t *loop, const zp_config *cfg, const char *endpoint,
                  uint64_t incarnation, const char *restored, char *err, size_t errlen)
{
    if (r->replicas <= 1)
        return 0;
    zp_coord_opts o = {
        .backend = "zookeeper",
        .hosts = cfg->coord_zookeeper,
        .cluster = cfg->coord_name,
        .shard = r->shard,
        .replica = r->replica,
        .incarnation = incarnation,
        .endpoint = endpoint,
        .restored = restored,
        .session_timeout_ms = cfg->coord_session_timeout_ms,
        .connect_timeout_ms = cfg->coord_connect_timeout_ms,
    };
    zp_coord_cbs cbs = {
        .session = on_session,
        .role = on_role,
        .isr = on_isr,
        .members = on_members,
        .slots = on_slots,
        .arg = r,
    };
    int rc = zp_coord_new(&r->coord, loop, &o, &cbs, err, errlen);
    if (rc == 0)
        zp_info("replica %d of %d: asking ZooKeeper at %s who is primary (/zeps/%s, session "
                "timeout %d ms)",
                r->replica, r->replicas, cfg->coord_zookeeper, cfg->coord_name,
                cfg->coord_session_timeout_ms);
    return rc;
}

static void on_left(void *arg, int rc, int32_t version)
{
    (void)version;
    zp_role *r = arg;
    if (r->leave.done)
        r->leave.done(r->leave.arg, rc);
}

int zp_role_leave(zp_role *r, const char *snapshot, void (*done)(void *arg, int rc), void *arg)
{
    if (!r->coord || r->kind != ZP_ROLE_PRIMARY || r->fenced)
        return ZEPS_ESTATE;
    r->leave.done = done;
    r->leave.arg = arg;
    return zp_coord_clean_set(r->coord, snapshot, on_left, r);
}

void zp_role_stop(zp_role *r)
{
    zp_coord_destroy(&r->coord);
    free(r->zkmap.map);
    r->zkmap.map = NULL;
    r->zkmap.len = 0;
}

bool zp_role_serves(const zp_role *r)
{
    return r->kind == ZP_ROLE_PRIMARY && !r->fenced;
}

void zp_role_refusal(const zp_role *r, char *buf, size_t len)
{
    if (r->kind == ZP_ROLE_BACKUP)
        snprintf(buf, len,
                 "shard %d replica %d is a backup at epoch %" PRIu64
                 "; the primary is replica %d at %s",
                 r->shard, r->replica, r->epoch, r->primary_replica, r->primary_endpoint);
    else
        snprintf(buf, len,
                 "shard %d replica %d is not primary and knows no primary (coordination "
                 "session %s, epoch %" PRIu64 "): try again shortly",
                 r->shard, r->replica, zp_role_session_name(r->session), r->epoch);
}

const char *zp_role_kind_name(zp_role_kind k)
{
    static const char *const names[] = {"primary", "backup", "none"};
    return (unsigned)k < 3 ? names[k] : "unknown";
}

const char *zp_role_session_name(zp_role_session s)
{
    static const char *const names[] = {"off",       "connecting", "connected",
                                        "suspended", "expired",    "unreachable"};
    return (unsigned)s < 6 ? names[s] : "unknown";
}

int zp_role_in_sync(const zp_role *r)
{
    return r->replicas <= 1 ? 1 : r->isr.n;
}

void zp_role_coord_stats(const zp_role *r, zp_coord_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (r->coord)
        zp_coord_stats_get(r->coord, st);
}
