/*
 * restore.c - a shard's state put back from a snapshot: the newest
 * restorable set at start-up, and a bsp rollback to a cut on request
 * (docs/snapshots.md, docs/faults.md). Each table's kind reads its own part
 * of the record (table/). A rollback says whether it changed anything;
 * answering what waited on the old state is the op layer's (op/admin.c).
 */
#include "restore.h"
#include "tiered.h"

#include <errno.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "errors.h"
#include "folder.h"
#include "log.h"
#include "server.h"
#include "snapshot.h"
#include "zeps_errors.h"

/* This state now comes from recovery `id` (a restart, or a rollback for
 * one) at the cut `clock`. */
static void note_recovery(zp_server *s, uint64_t id, int64_t clock)
{
    s->recovery = id;
    memmove(&s->recoveries[1], &s->recoveries[0], sizeof(s->recoveries) - sizeof(s->recoveries[0]));
    s->recoveries[0].id = id;
    s->recoveries[0].clock = clock;
}

/* The cut of recovery `id` if this shard took part in it, else -1. */
static int64_t recovery_cut(const zp_server *s, uint64_t id)
{
    for (int i = 0; i < ZP_RECOVERIES_KEPT; i++)
        if (s->recoveries[i].id == id)
            return s->recoveries[i].clock;
    return -1;
}

static void log_skip(void *arg, const char *msg)
{
    (void)arg;
    zp_warn("restore: %s", msg);
}

/* Table `st` of set `setid` (the shard's own snapshot: a tiered table's
 * cold tier comes from the set's checkpoint; a state transfer, setid
 * UINT64_MAX, has none). */
static int restore_table(zp_server *s, const zp_snap_table *st, uint64_t setid, char *err,
                         size_t errlen)
{
    zp_table *t;
    int rc = zp_table_declared_from_snap(&t, s->ntables, st, s->nworkers, err, errlen);
    if (rc != 0)
        return rc;
    /* a cold tier before the hot rows: a hot row the table has no room for
     * (a set resharded onto fewer shards) is demoted to it, not dropped,
     * and a hot row's out-of-date copy in it is marked as it loads */
    if (t->rows && t->rows->spec->tier)
        rc = setid == UINT64_MAX
                 ? zp_errors_set(err, errlen, ZEPS_EDATA,
                                 "table '%s' has a cold tier: it is not transferred to a replica",
                                 t->name)
                 : zp_tiered_restore(t->rows, s->cfg.tier_dir, s->cfg.snapshot_dir, setid, t->name,
                                     s->shard, s->nshards, err, errlen);
    if (rc == 0)
        rc = zp_table_load_snap(t, st, err, errlen);
    if (rc != 0) {
        zp_table_destroy(&t);
        return rc;
    }
    zp_table_append(&s->tables, &s->ntables, &s->cap_tables, t); /* s takes t */
    return 0;
}

/* The workers of the snapshot, who must say HELLO again before anything
 * they send is accepted: that is how they learn this shard restarted. */
static void restore_workers(zp_server *s, const zp_snapshot *snap)
{
    for (uint32_t i = 0; i < snap->nworker_recs; i++) {
        const zp_snap_worker *sw = &snap->workers[i];
        if (sw->rank >= (uint32_t)s->nworkers)
            continue;
        zp_worker *w = &s->workers.w[sw->rank];
        w->joined = false;
        w->rehello = sw->joined;
        w->left = sw->left;
        w->incarnation = sw->incarnation;
        w->clock = sw->clock;
        w->max_seq = sw->max_seq;
        w->window = sw->window;
        if (sw->clock > s->workers.max_clock)
            s->workers.max_clock = sw->clock;
    }
}

/* The slot map of the set (its newest file's: zp_manifest_find_restorable
 * checked the set) becomes the shard's, replacing the cluster file's or
 * the default one: after a move it is newer, and the rows are where it
 * says. A set older than the cluster file's map is refused: its rows are
 * where an older map put them. Nothing changes on error. */
static int restore_slots(zp_server *s, const zp_snapshot *snap, uint64_t setid, char *err,
                         size_t errlen)
{
    uint64_t have = zp_slotmap_epoch(s->slots), got = snap->slotmap ? snap->h.slot_epoch : 0;
    const char *dir = s->cfg.snapshot_dir;
    if (got < have)
        return zp_errors_set(err, errlen, ZEPS_EDATA,
                             "snapshot set %016" PRIx64 " in %s was written under slot map epoch "
                             "%" PRIu64 ", older than this shard's map (epoch %" PRIu64
                             ", cluster.slot_map '%s'): its rows are where the older map put "
                             "them; start with the map it was written under, or reshard it "
                             "(zepsctl snapshot reshard, docs/snapshots.md)",
                             setid, dir, got, have, s->cfg.slot_map);
    if (!snap->slotmap)
        return 0;
    zp_slotmap *next = NULL;
    char why[256];
    if (zp_slotmap_decode(&next, snap->slotmap, (size_t)snap->slotmap_len, s->nshards, why,
                          sizeof(why)) != 0)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "snapshot set %016" PRIx64 " in %s: %s",
                             setid, dir, why);
    if (got == have) {
        size_t len = zp_slotmap_wire_size(s->slots);
        uint8_t *mine = zp_alloc(len);
        zp_slotmap_encode(s->slots, mine);
        bool same = len == snap->slotmap_len && memcmp(mine, snap->slotmap, len) == 0;
        free(mine);
        if (!same) {
            zp_slotmap_destroy(&next);
            return zp_errors_set(err, errlen, ZEPS_EDATA,
                                 "snapshot set %016" PRIx64 " in %s: its slot map of epoch %" PRIu64
                                 " names other owners than cluster.slot_map '%s' of the same "
                                 "epoch",
                                 setid, dir, got, s->cfg.slot_map);
        }
    }
    zp_info("restore: slot map of epoch %" PRIu64 " from set %016" PRIx64
            " (this shard owns %u of %u slots; the cluster file's map: epoch %" PRIu64 ")",
            got, setid, zp_slotmap_count(next, s->shard), zp_slotmap_slots(next), have);
    zp_slotmap_destroy(&s->slots);
    s->slots = next;
    return 0;
}

/* The map of the whole state a primary sent (zp_restore_transfer) becomes
 * the replica's as it is, newer or older than its own: a replica may have
 * taken a map its deposed primary never had acknowledged; a state without
 * a map is at the cluster's start map. Nothing changes on error. */
static int transfer_slots(zp_server *s, const zp_snapshot *snap, char *err, size_t errlen)
{
    zp_slotmap *next = NULL;
    char why[256];
    int rc = snap->slotmap ? zp_slotmap_decode(&next, snap->slotmap, (size_t)snap->slotmap_len,
                                               s->nshards, why, sizeof(why))
                           : zp_slotmap_start(&next, s->cfg.slot_map, s->nshards, why, sizeof(why));
    if (rc != 0)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "the primary's whole state: %s", why);
    if (zp_slotmap_epoch(next) != zp_slotmap_epoch(s->slots))
        zp_info("whole state: slot map epoch %" PRIu64 " (was %" PRIu64 ")", zp_slotmap_epoch(next),
                zp_slotmap_epoch(s->slots));
    zp_slotmap_destroy(&s->slots);
    s->slots = next;
    return 0;
}

int zp_restore_transfer(zp_server *s, const char *path, char *err, size_t errlen)
{
    zp_snapshot *snap = NULL;
    int rc = zp_snapshot_read(path, &snap, err, errlen);
    if (rc != 0)
        return rc;
    if (snap->h.nworkers != (uint32_t)s->nworkers || snap->h.shard != (uint32_t)s->shard ||
        snap->h.nshards != (uint32_t)s->nshards) {
        rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                           "%s is shard %u of %u with %u workers, this replica is shard %d of %d "
                           "with %d",
                           path, snap->h.shard, snap->h.nshards, snap->h.nworkers, s->shard,
                           s->nshards, s->nworkers);
        zp_snapshot_free(&snap);
        return rc;
    }
    /* the primary's map too: a move may have changed it since the
     * cluster file's (docs/elastic.md, "Moves with replicas") */
    rc = transfer_slots(s, snap, err, errlen);
    if (rc != 0) {
        zp_snapshot_free(&snap);
        return rc;
    }
    for (uint32_t i = 0; i < s->ntables; i++)
        zp_table_destroy(&s->tables[i]);
    s->ntables = 0;
    for (uint32_t i = 0; i < snap->ntables && rc == 0; i++)
        rc = restore_table(s, &snap->tables[i], UINT64_MAX, err, errlen);
    for (uint32_t i = 0; i < snap->nworker_recs && rc == 0; i++) {
        const zp_snap_worker *sw = &snap->workers[i];
        if (sw->rank >= (uint32_t)s->nworkers)
            continue;
        zp_worker *w = &s->workers.w[sw->rank];
        w->joined = sw->joined; /* as on the primary: a transfer is not a restart */
        w->rehello = false;
        w->left = sw->left;
        w->incarnation = sw->incarnation;
        w->clock = sw->clock;
        w->max_seq = sw->max_seq;
        w->window = sw->window;
        w->seq_hi = sw->max_seq;    /* the highest seen, as far as the record knows */
        w->hello_clock = sw->clock; /* not in the record: a closed round's push is dropped */
    }
    zp_workers_update_bounds(&s->workers, s->cfg.lost_continue);
    zp_snapshot_free(&snap);
    return rc;
}

int zp_restore_newest(zp_server *s, char *err, size_t errlen)
{
    const char *dir = s->cfg.snapshot_dir;
    s->persist.requested_cut = -1;
    s->restored_clock = -1;
    if (!dir[0])
        return 0;
    int rc = zp_folder_ready("snapshot_dir", dir, err, errlen);
    if (rc != 0)
        return rc;
    zp_snapshot *snap = NULL;
    uint64_t setid = 0;
    rc = zp_manifest_find_restorable(dir, (uint32_t)s->shard, (uint32_t)s->nshards, &snap, &setid,
                                     log_skip, s, err, errlen);
    if (rc != 0)
        return rc;
    if (!snap) {
        zp_info("restore: no snapshot set in %s: starting empty", dir);
        return 0;
    }
    if (snap->h.nworkers != (uint32_t)s->nworkers) {
        uint32_t had = snap->h.nworkers;
        zp_snapshot_free(&snap);
        return zp_errors_set(err, errlen, ZEPS_EDATA,
                             "snapshot set %016" PRIx64
                             " in %s is of a cluster of %u workers, this "
                             "one has %d",
                             setid, dir, had, s->nworkers);
    }
    rc = restore_slots(s, snap, setid, err, errlen);
    for (uint32_t i = 0; i < snap->ntables && rc == 0; i++)
        rc = restore_table(s, &snap->tables[i], setid, err, errlen);
    if (rc == 0)
        restore_workers(s, snap);
    if (rc == 0) {
        s->persist.last_setid = setid;
        s->persist.last_cut = snap->h.clock;
        note_recovery(s, s->incarnation, snap->h.clock);
        s->epoch++;
        s->restored_clock = snap->h.clock;
        s->restored_set = setid;
        s->restored_by = snap->h.incarnation;
        s->restored_created_ns = snap->h.created_ns;
        /* the other shards may roll back to it while writers of the
         * abandoned timeline complete newer sets: no prune may delete it */
        char perr[512];
        if (zp_manifest_pin(dir, setid, perr, sizeof(perr)) != 0)
            zp_warn("restore: cannot pin set %016" PRIx64 " against pruning: %s", setid, perr);
        zp_info("restored snapshot set %016" PRIx64 " from %s: clock %" PRId64
                ", %u tables, %u workers, written by incarnation %016" PRIx64,
                setid, dir, snap->h.clock, snap->ntables, snap->nworker_recs, snap->h.incarnation);
        for (uint32_t i = 0; i < s->ntables; i++)
            zp_info("restored table '%s': version %" PRIu64 ", round %lld", s->tables[i]->name,
                    s->tables[i]->version, (long long)s->tables[i]->round.closed);
    }
    zp_snapshot_free(&snap);
    return rc;
}

/* A rollback's checks before anything changes: the mode rolls back, every
 * table has reached the cut, and the file holds the cut of these tables.
 * On success *out owns the record read. */
static int rollback_read(zp_server *s, int64_t clock, uint64_t setid, zp_snapshot **out, char *err,
                         size_t errlen)
{
    if (!(s->cons->caps & ZP_CAP_ROLLBACK))
        return zp_errors_set(err, errlen, ZEPS_ESTATE, "shard %d: rollback is for bsp only",
                             s->shard);
    for (uint32_t i = 0; i < s->ntables; i++)
        if (!zp_table_empty_slice(s->tables[i]) && s->tables[i]->round.closed < clock)
            return zp_errors_set(
                err, errlen, ZEPS_ECLOCK,
                "shard %d: table '%s' is at round %lld, behind the cut %lld to roll "
                "back to",
                s->shard, s->tables[i]->name, (long long)s->tables[i]->round.closed,
                (long long)clock);
    char path[ZP_PATH_MAX + 128];
    if (!s->cfg.snapshot_dir[0] || zp_snapshot_path(path, sizeof(path), s->cfg.snapshot_dir, setid,
                                                    (uint32_t)s->shard, (uint32_t)s->nshards) != 0)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "shard %d: no snapshot_dir to roll back from",
                             s->shard);
    zp_persist_reap(s, 1); /* a writer in flight may be writing this very set */
    zp_snapshot *snap = NULL;
    char why[1024];
    int rc = zp_snapshot_read(path, &snap, why, sizeof(why));
    if (rc != 0)
        return zp_errors_set(err, errlen, rc, "shard %d: cannot roll back to clock %lld: %s",
                             s->shard, (long long)clock, why);
    if (snap->h.clock != clock || snap->ntables != s->ntables)
        rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                           "shard %d: %s holds clock %lld and %u tables, not clock %lld and %u",
                           s->shard, path, (long long)snap->h.clock, snap->ntables,
                           (long long)clock, s->ntables);
    for (uint32_t i = 0; i < s->ntables && rc == 0; i++) {
        const zp_snap_table *st = &snap->tables[i];
        const zp_table *t = s->tables[i];
        if (strcmp(st->name, t->name) != 0 || !t->kind->fits(t, st))
            rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                               "shard %d: table %u of %s is '%s' [%llu, %llu), this shard has '%s'",
                               s->shard, i, path, st->name, (unsigned long long)st->begin,
                               (unsigned long long)st->end, t->name);
    }
    if (rc != 0) {
        zp_snapshot_free(&snap);
        return rc;
    }
    *out = snap;
    return 0;
}

/* Every worker's clock back to the cut's; all but the requester must say
 * HELLO again (it asked: it knows, and it keeps its sequence numbers). */
static void rollback_workers(zp_server *s, const zp_snapshot *snap, uint32_t requester)
{
    for (uint32_t i = 0; i < snap->nworker_recs; i++) {
        const zp_snap_worker *sw = &snap->workers[i];
        if (sw->rank >= (uint32_t)s->nworkers)
            continue;
        zp_worker *w = &s->workers.w[sw->rank];
        w->clock = sw->clock;
        if (sw->rank == requester)
            continue;
        if (w->joined || w->rehello) {
            w->joined = false;
            w->rehello = true;
        }
    }
}

int zp_restore_rollback(zp_server *s, int64_t clock, uint64_t setid, uint64_t recovery,
                        uint32_t requester, bool *rolled_back, char *err, size_t errlen)
{
    *rolled_back = false;
    int64_t done = recovery != 0 ? recovery_cut(s, recovery) : -1;
    if (done >= 0 && done != clock)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "shard %d: recovery %016" PRIx64 " went back to clock %lld, not %lld",
                             s->shard, recovery, (long long)done, (long long)clock);
    if (done >= 0)
        return 0; /* done already: another worker asked first, or this shard restarted */
    /* Standing at the cut is not being at it: a shard that reached it by
     * training may hold pushes for the open round sent before the recovery,
     * which the workers redo (kept, they were refused as pushed twice, or
     * closed the round before the redone pulls: docs/faults.md). Only a
     * state that came from this cut (restored, or rolled back to it) and
     * has closed no round since holds nothing from before a recovery to it. */
    if (s->cons->cut(s) == clock && (recovery == 0 || s->restored_clock == clock)) {
        if (recovery != 0)
            note_recovery(s, recovery, clock);
        return 0; /* already there */
    }
    zp_snapshot *snap = NULL;
    int rc = rollback_read(s, clock, setid, &snap, err, errlen);
    for (uint32_t i = 0; i < s->ntables && rc == 0; i++) {
        zp_table *t = s->tables[i];
        rc = zp_table_reset(t, &snap->tables[i], err, errlen);
        if (rc == 0 && t->rows && t->rows->spec->tier) /* and its cold rows, from the set */
            rc = zp_tiered_rollback(t->rows, s->cfg.tier_dir, s->cfg.snapshot_dir, setid, t->name,
                                    s->shard, s->nshards, err, errlen);
    }
    if (rc != 0) {
        if (snap)
            zp_snapshot_free(&snap);
        return rc;
    }
    rollback_workers(s, snap, requester);
    note_recovery(s, recovery, clock);
    s->workers.max_clock = clock;
    s->epoch++;
    s->rollbacks++;
    s->restored_clock = clock;
    s->restored_set = setid;
    s->persist.last_cut = clock;
    s->persist.requested_cut = -1;
    zp_info("rolled back to snapshot set %016" PRIx64 " (clock %lld) at the request of worker %u",
            setid, (long long)clock, requester);
    zp_snapshot_free(&snap);
    *rolled_back = true;
    return 0;
}
