/*
 * persist.c - snapshots of a running shard, and restore at start-up.
 *
 * A snapshot never pauses the shard: the server describes its state (a
 * zp_snapshot record pointing at the live tables), fork()s, and the child
 * writes that copy-on-write image with server/snapshot.c while the parent
 * keeps serving (the Redis BGSAVE way). The parent reaps the child from its
 * timer. Copy-on-write is the kernel's: the child sees memory as it was at
 * fork() whatever the parent applies next.
 *
 * Which state, and which set it belongs to (sets group one file per shard):
 * - bsp with snapshot_every_clocks = K: a consistent cut. When the last
 *   table of this shard closes round c with c a multiple of K, no table can
 *   have applied anything of round c + 1 yet (a worker pushes c + 1 only
 *   after its pulls of c + 1 returned, which needs every table's round c),
 *   so the state is exactly "after clock c" on every shard, and every shard
 *   names the set c: no coordinator is needed.
 * - other modes with snapshot_every_s = T: a point in time; the set is the
 *   period index floor(wall time / T), so shards with synchronised clocks
 *   agree; the per-worker sequence windows recorded say which requests each
 *   snapshot contains (docs/snapshots.md).
 * - on SIGTERM/SIGINT (snapshot_on_exit): written in-process before exit,
 *   named like the periodic sets (bsp: the cut clock when consistent).
 */
#include "persist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "server.h"
#include "snapshot.h"
#include "util.h"
#include "zeps_errors.h"

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The shard's state as a record pointing at live memory (the caller frees
 * the record, never the arrays). */
static void reap(zp_server *s, int block);

static zp_snapshot *describe(const zp_server *s, int64_t clock, uint64_t setid)
{
    /* Sparse tables are not in snapshots yet (docs/sparse.md): only dense
     * tables are written, in declaration order. */
    uint32_t ndense = 0;
    for (uint32_t i = 0; i < s->ntables; i++)
        ndense += s->tables[i]->sparse == NULL;
    zp_snapshot *snap = zp_snapshot_new(ndense, (uint32_t)s->nworkers);
    snap->h.shard = (uint32_t)s->shard;
    snap->h.nshards = (uint32_t)s->nshards;
    snap->h.nworkers = (uint32_t)s->nworkers;
    snprintf(snap->h.consistency, sizeof(snap->h.consistency), "%s", s->cons->name);
    snap->h.clock = clock;
    snap->h.setid = setid;
    snap->h.created_ns = (uint64_t)(wall_s() * 1e9);
    snap->h.incarnation = s->incarnation;
    for (uint32_t i = 0, k = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        if (t->sparse)
            continue;
        zp_snap_table *st = &snap->tables[k++];
        snprintf(st->name, sizeof(st->name), "%s", t->name);
        st->length = t->length;
        st->begin = t->begin;
        st->end = t->end;
        snprintf(st->optimizer, sizeof(st->optimizer), "%s", t->optimizer);
        st->hyper = t->hyper;
        st->init = (uint32_t)t->init;
        st->init_scale = t->init_scale;
        st->seed = t->seed;
        st->has_staleness = t->has_staleness;
        st->staleness = t->staleness;
        st->version = t->version;
        st->round = t->round;
        st->state_per_param = (uint32_t)t->opt->state_per_param;
        st->params = t->params->data;
        st->state = t->state;
    }
    for (int r = 0; r < s->nworkers; r++) {
        const zp_worker *w = &s->workers.w[r];
        zp_snap_worker *sw = &snap->workers[r];
        sw->rank = (uint32_t)r;
        sw->joined = w->joined;
        sw->left = w->left;
        sw->incarnation = w->incarnation;
        sw->clock = w->clock;
        sw->max_seq = w->max_seq;
        sw->window = w->window;
    }
    return snap;
}

/* Write the record and, if this file completed its set, record the set and
 * prune old ones. Runs in the forked child, or in-process at exit. */
static int write_set(const zp_config *cfg, const zp_snapshot *snap, char *err, size_t errlen)
{
    char path[ZP_PATH_MAX + 128];
    int rc = zp_snapshot_write(cfg->snapshot_dir, snap, path, sizeof(path), err, errlen);
    if (rc != 0)
        return rc;
    char why[512];
    if (zp_snapshot_set_complete(cfg->snapshot_dir, snap->h.setid, snap->h.nshards, why,
                                 sizeof(why)) != 0)
        return 0; /* other shards' files are still to come: they will record it */
    rc = zp_manifest_add_set(cfg->snapshot_dir, snap->h.setid, snap->h.nshards, err, errlen);
    if (rc == 0)
        rc = zp_manifest_prune(cfg->snapshot_dir, (unsigned)cfg->snapshot_keep, NULL, err, errlen);
    return rc;
}

/* Reap writer w if it finished (or, with `block`, when it does). */
static void reap_one(zp_persist *p, zp_writer *w, int block)
{
    if (w->pid <= 0)
        return;
    int st;
    pid_t r;
    while ((r = waitpid(w->pid, &st, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
        ;
    if (r == 0)
        return;
    double took = zp_now_s() - w->started;
    if (r == w->pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        p->written++;
        p->last_duration_s = took;
        p->last_setid = w->setid;
        zp_info("snapshot set %016" PRIx64 " (%s, clock %" PRId64 ") written in %.3f s",
                w->setid, w->why, w->clock, took);
    } else {
        p->failures++;
        zp_error("snapshot set %016" PRIx64 " (%s) failed after %.3f s (child status %d)",
                 w->setid, w->why, took, st);
    }
    w->pid = 0;
}

static void reap(zp_server *s, int block)
{
    for (int i = 0; i < ZP_PERSIST_WRITERS; i++)
        reap_one(&s->persist, &s->persist.writers[i], block);
}

/* A free writer slot; with all busy, wait for the oldest writer. */
static zp_writer *free_slot(zp_persist *p)
{
    zp_writer *oldest = &p->writers[0];
    for (int i = 0; i < ZP_PERSIST_WRITERS; i++) {
        if (p->writers[i].pid <= 0)
            return &p->writers[i];
        if (p->writers[i].started < oldest->started)
            oldest = &p->writers[i];
    }
    zp_warn("all %d snapshot writers busy: waiting for set %016" PRIx64, ZP_PERSIST_WRITERS,
            oldest->setid);
    reap_one(p, oldest, 1);
    return oldest;
}

int zp_persist_start(zp_server *s, int64_t clock, uint64_t setid, const char *why)
{
    zp_persist *p = &s->persist;
    if (!s->cfg.snapshot_dir[0])
        return ZEPS_ESTATE;
    zp_writer *w = free_slot(p);
    zp_snapshot *snap = describe(s, clock, setid);
    zp_trace_flush(s->trace); /* the child must not inherit unflushed trace rows */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char err[1024];
        int rc = write_set(&s->cfg, snap, err, sizeof(err));
        if (rc != 0)
            fprintf(stderr, "snapshot set %016" PRIx64 ": %s\n", setid, err);
        _exit(rc == 0 ? 0 : 1);
    }
    zp_snapshot_free(&snap);
    if (pid < 0) {
        zp_error("snapshot (%s): fork failed: %s", why, strerror(errno));
        p->failures++;
        return ZEPS_EIO;
    }
    w->pid = pid;
    w->setid = setid;
    w->clock = clock;
    w->started = zp_now_s();
    snprintf(w->why, sizeof(w->why), "%s", why);
    zp_info("snapshot set %016" PRIx64 " (%s, clock %" PRId64 ") started in child %d", setid, why,
            clock, (int)pid);
    return 0;
}

/* Under bsp, the round every table of this shard has closed, if they agree
 * (a consistent cut); -1 otherwise. */
static int64_t bsp_cut(const zp_server *s)
{
    if (s->cfg.consistency != ZP_CONSISTENCY_BSP || s->ntables == 0)
        return -1;
    int64_t r = -1;
    for (uint32_t i = 0; i < s->ntables; i++) {
        if (s->tables[i]->sparse)
            continue;
        if (r >= 0 && s->tables[i]->round != r)
            return -1;
        r = s->tables[i]->round;
    }
    return r;
}

void zp_persist_on_round(zp_server *s)
{
    int k = s->cfg.snapshot_every_clocks;
    if (!s->cfg.snapshot_dir[0] || k <= 0)
        return;
    int64_t c = bsp_cut(s);
    if (c > 0 && c % k == 0 && c > s->persist.last_cut)
        if (zp_persist_start(s, c, (uint64_t)c, "every clocks") == 0)
            s->persist.last_cut = c;
}

void zp_persist_tick(zp_server *s)
{
    reap(s, 0);
    double every = s->cfg.snapshot_every_s;
    if (!s->cfg.snapshot_dir[0] || every <= 0 || s->ntables == 0)
        return;
    uint64_t period = (uint64_t)(wall_s() / every);
    if (period > s->persist.last_period) {
        if (s->persist.last_period != 0 &&
            zp_persist_start(s, bsp_cut(s), period, "every seconds") != 0)
            return;
        s->persist.last_period = period;
    }
}

int zp_persist_final(zp_server *s)
{
    if (!s->cfg.snapshot_dir[0] || !s->cfg.snapshot_on_exit || s->ntables == 0)
        return 0;
    reap(s, 1); /* snapshots in flight finish first */
    int64_t cut = bsp_cut(s);
    uint64_t setid = cut >= 0 ? (uint64_t)cut
                              : (uint64_t)(wall_s() / (s->cfg.snapshot_every_s > 0
                                                          ? s->cfg.snapshot_every_s
                                                          : 1.0));
    zp_snapshot *snap = describe(s, cut, setid);
    char err[1024];
    double t0 = zp_now_s();
    int rc = write_set(&s->cfg, snap, err, sizeof(err));
    zp_snapshot_free(&snap);
    if (rc != 0) {
        zp_error("final snapshot set %016" PRIx64 " failed: %s", setid, err);
        return rc;
    }
    zp_info("final snapshot set %016" PRIx64 " (clock %" PRId64 ") written in %.3f s", setid, cut,
            zp_now_s() - t0);
    return 0;
}

static void log_skip(void *arg, const char *msg)
{
    (void)arg;
    zp_warn("restore: %s", msg);
}

/* Recreate one table from its snapshot record. */
static int restore_table(zp_server *s, const zp_snap_table *st, char *err, size_t errlen)
{
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = (char *)st->name;
    spec.kind = st->kind;
    spec.length = st->length;
    spec.optimizer = (char *)st->optimizer;
    spec.lr = st->hyper.lr;
    spec.momentum = st->hyper.momentum;
    spec.beta1 = st->hyper.beta1;
    spec.beta2 = st->hyper.beta2;
    spec.eps = st->hyper.eps;
    spec.weight_decay = st->hyper.weight_decay;
    spec.init = (char *)zp_init_name((zp_init_kind)st->init);
    spec.init_scale = st->init_scale;
    spec.seed = st->seed;
    spec.has_staleness = st->has_staleness;
    spec.staleness = st->staleness;
    zp_table *t;
    int rc = zp_table_new(&t, s->ntables, &spec, s->shard, s->nshards, s->nworkers, err, errlen);
    if (rc != 0)
        return rc;
    if (t->begin != st->begin || t->end != st->end ||
        (uint32_t)t->opt->state_per_param != st->state_per_param) {
        zp_table_destroy(&t);
        return zp_seterr(err, errlen, ZEPS_EDATA,
                         "table '%s' in the snapshot does not fit this shard's slice", st->name);
    }
    /* the declaration went through float once already: keep the exact values */
    t->hyper = st->hyper;
    memcpy(t->params->data, st->params, t->n * sizeof(float));
    if (t->state)
        memcpy(t->state, st->state, (size_t)st->state_per_param * t->n * sizeof(float));
    t->version = st->version;
    t->round = st->round;
    if (s->ntables == s->cap_tables) {
        s->cap_tables = s->cap_tables ? 2 * s->cap_tables : 8;
        s->tables = zp_xrealloc(s->tables, s->cap_tables * sizeof(*s->tables));
    }
    s->tables[s->ntables++] = t;
    return 0;
}

int zp_persist_restore(zp_server *s, char *err, size_t errlen)
{
    const char *dir = s->cfg.snapshot_dir;
    if (!dir[0])
        return 0;
    if (mkdir(dir, 0750) != 0 && errno != EEXIST)
        return zp_seterr(err, errlen, ZEPS_EIO, "snapshot_dir %s: %s", dir, strerror(errno));
    zp_snapshot *snap = NULL;
    uint64_t setid = 0;
    int rc = zp_snapshot_find_restorable(dir, (uint32_t)s->shard, (uint32_t)s->nshards, &snap,
                                         &setid, log_skip, s, err, errlen);
    if (rc != 0)
        return rc;
    if (!snap) {
        zp_info("restore: no snapshot set in %s: starting empty", dir);
        return 0;
    }
    if (snap->h.nworkers != (uint32_t)s->nworkers) {
        uint32_t had = snap->h.nworkers;
        zp_snapshot_free(&snap);
        return zp_seterr(err, errlen, ZEPS_EDATA,
                         "snapshot set %016" PRIx64 " in %s is of a cluster of %u workers, this "
                         "one has %d",
                         setid, dir, had, s->nworkers);
    }
    for (uint32_t i = 0; i < snap->ntables && rc == 0; i++)
        rc = restore_table(s, &snap->tables[i], err, errlen);
    for (uint32_t i = 0; i < snap->nworker_recs && rc == 0; i++) {
        const zp_snap_worker *sw = &snap->workers[i];
        if (sw->rank >= (uint32_t)s->nworkers)
            continue;
        zp_worker *w = &s->workers.w[sw->rank];
        w->joined = sw->joined;
        w->left = sw->left;
        w->incarnation = sw->incarnation;
        w->clock = sw->clock;
        w->max_seq = sw->max_seq;
        w->window = sw->window;
        if (sw->clock > s->max_clock)
            s->max_clock = sw->clock;
    }
    if (rc == 0) {
        s->persist.last_setid = setid;
        s->persist.last_cut = snap->h.clock;
        zp_info("restored snapshot set %016" PRIx64 " from %s: clock %" PRId64
                ", %u tables, %u workers, written by incarnation %016" PRIx64,
                setid, dir, snap->h.clock, snap->ntables, snap->nworker_recs,
                snap->h.incarnation);
        for (uint32_t i = 0; i < s->ntables; i++)
            zp_info("restored table '%s': version %" PRIu64 ", round %lld", s->tables[i]->name,
                    s->tables[i]->version, (long long)s->tables[i]->round);
    }
    zp_snapshot_free(&snap);
    return rc;
}
