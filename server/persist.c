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
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* A sparse table's meta and declaration; its rows are packed later, by
 * pack_rows, in the writer (the forked child), so the shard does not pause
 * to copy them. */
static void describe_sparse(const zp_table *t, zp_snap_table *st)
{
    const Zeps__TableSpec *d = t->sparse_spec;
    snprintf(st->name, sizeof(st->name), "%s", t->name);
    st->kind = 1;
    st->length = t->dim;
    snprintf(st->optimizer, sizeof(st->optimizer), "%s", d->optimizer ? d->optimizer : "");
    int init = zp_init_from_name(d->init);
    st->init = init < 0 ? 0 : (uint32_t)init;
    st->init_scale = d->init_scale;
    st->seed = d->seed;
    st->version = t->version;
    st->round = t->round;
    st->state_per_param = (uint32_t)zp_sparse_state_per_value(t->sparse);
    size_t len = zeps__table_spec__get_packed_size(d);
    uint8_t *spec = zp_xmalloc(len ? len : 1);
    zeps__table_spec__pack(d, spec);
    st->owned_bytes = spec; /* freed with the record; pack_rows replaces it */
    st->spec = spec;
    st->spec_len = len;
}

/* Serialise the rows of every sparse table of s into snap (declaration and
 * rows in one owned buffer). Runs in the writer: the forked child (glibc's
 * malloc is usable after fork), or in-process at exit. */
static void pack_rows(const zp_server *s, zp_snapshot *snap)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        zp_snap_table *st = &snap->tables[i];
        if (!t->sparse)
            continue;
        zp_sparse_counters c;
        zp_sparse_get_counters(t->sparse, &c);
        uint32_t dim = t->dim, spp = st->state_per_param;
        uint64_t rec = ZP_SNAP_ROW_LEN(dim, spp), n = 0;
        size_t len = ZP_SNAP_ROWS_HDR + (size_t)(c.rows * rec);
        uint8_t *mem = zp_xmalloc(st->spec_len + len);
        memcpy(mem, st->spec, st->spec_len);
        uint8_t *rows = mem + st->spec_len, *at = rows + ZP_SNAP_ROWS_HDR;
        uint64_t cursor = 0;
        zp_sparse_row row;
        while (n < c.rows && zp_sparse_next(t->sparse, &cursor, &row)) {
            memcpy(at, &row.id, 8);
            memcpy(at + 8, &row.version, 4);
            memcpy(at + 12, &row.freq, 4);
            memcpy(at + 16, &row.last_clock, 8);
            memcpy(at + 24, row.values, (size_t)dim * 4);
            if (spp)
                memcpy(at + 24 + (size_t)dim * 4, row.state, (size_t)dim * spp * 4);
            at += rec;
            n++;
        }
        /* little-endian host (snapshot.c asserts it) */
        uint64_t hdr[8] = {n, (uint64_t)dim | (uint64_t)spp << 32, c.created, c.not_admitted,
                           c.pushes_skipped, c.evicted_ttl, c.evicted_capacity, 0};
        memcpy(rows, hdr, sizeof(hdr));
        free(st->owned_bytes);
        st->owned_bytes = mem;
        st->spec = mem;
        st->rows = rows;
        st->rows_len = ZP_SNAP_ROWS_HDR + n * rec;
    }
}

static zp_snapshot *describe(const zp_server *s, int64_t clock, uint64_t setid)
{
    /* Every table, in declaration order (table ids are that order). */
    zp_snapshot *snap = zp_snapshot_new(s->ntables, (uint32_t)s->nworkers);
    snap->h.shard = (uint32_t)s->shard;
    snap->h.nshards = (uint32_t)s->nshards;
    snap->h.nworkers = (uint32_t)s->nworkers;
    snprintf(snap->h.consistency, sizeof(snap->h.consistency), "%s", s->cons->name);
    snap->h.clock = clock;
    snap->h.setid = setid;
    snap->h.created_ns = (uint64_t)(wall_s() * 1e9);
    snap->h.incarnation = s->incarnation;
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        zp_snap_table *st = &snap->tables[i];
        if (t->sparse) {
            describe_sparse(t, st);
            continue;
        }
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
        /* the writer yields the CPU to the serving parent (docs/snapshots.md) */
        if (s->cfg.snapshot_nice > 0 && setpriority(PRIO_PROCESS, 0, s->cfg.snapshot_nice) != 0)
            fprintf(stderr, "snapshot writer: setpriority: %s\n", strerror(errno));
        pack_rows(s, snap);
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

int64_t zp_server_cut(const zp_server *s)
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

static int64_t bsp_cut(const zp_server *s)
{
    return zp_server_cut(s);
}

/* Largest power of two <= x (x >= 1), at least 1. */
static uint64_t pow2_floor(double x)
{
    uint64_t p = 1;
    while (x >= 2.0 * (double)p && p < (1ull << 40))
        p <<= 1;
    return p;
}

/* Young/Daly: interval = sqrt(2 x MTBF x time to snapshot), from the last
 * snapshot's measured duration. Shards measure separately, so the interval
 * is rounded down to a power of two (of clocks under bsp, of seconds
 * otherwise) and sets are named by multiples of it: a multiple of 2^j is a
 * multiple of every smaller power, so the sets at multiples of the largest
 * interval any shard chose are written by every shard and complete, with
 * no coordinator (a shard that chose a shorter interval also writes sets
 * the others skip; those stay incomplete and are pruned). */
static void auto_update(zp_server *s)
{
    zp_persist *p = &s->persist;
    if (s->cfg.snapshot_mtbf_s <= 0 || p->written == 0)
        return;
    double d = p->last_duration_s > 1e-3 ? p->last_duration_s : 1e-3;
    double interval = sqrt(2.0 * s->cfg.snapshot_mtbf_s * d);
    if (s->cfg.consistency == ZP_CONSISTENCY_BSP) {
        if (p->round_s <= 0)
            return;
        int64_t k = (int64_t)pow2_floor(interval / p->round_s);
        if (k != p->auto_every_clocks)
            zp_info("auto snapshots: interval %.3f s = sqrt(2 x MTBF %g s x last snapshot %.3f s)"
                    ", %.4f s per clock: every %lld clocks",
                    interval, s->cfg.snapshot_mtbf_s, d, p->round_s, (long long)k);
        p->auto_every_clocks = k;
    } else {
        uint64_t t = pow2_floor(interval);
        if (t != p->auto_period_s)
            zp_info("auto snapshots: interval %.3f s = sqrt(2 x MTBF %g s x last snapshot %.3f s)"
                    ": every %llu s",
                    interval, s->cfg.snapshot_mtbf_s, d, (unsigned long long)t);
        p->auto_period_s = t;
    }
    p->auto_interval_s = interval;
}

void zp_persist_on_round(zp_server *s)
{
    zp_persist *p = &s->persist;
    if (!s->cfg.snapshot_dir[0])
        return;
    int64_t c = bsp_cut(s);
    if (c <= 0 || c <= p->last_cut)
        return;
    double now = zp_now_s();
    if (p->last_round_at > 0) {
        double d = now - p->last_round_at;
        p->round_s = p->round_s > 0 ? 0.9 * p->round_s + 0.1 * d : d;
    }
    p->last_round_at = now;
    int k = s->cfg.snapshot_every_clocks;
    const char *why = NULL;
    if (k > 0 && c % k == 0)
        why = "every clocks";
    else if (p->requested_cut >= 0 && c == p->requested_cut)
        why = "on request";
    else if (s->cfg.snapshot_mtbf_s > 0 &&
             (p->written == 0 ? c == 1 : p->auto_every_clocks > 0 && c % p->auto_every_clocks == 0))
        why = "auto";
    if (!why)
        return;
    if (p->requested_cut >= 0 && c >= p->requested_cut)
        p->requested_cut = -1;
    if (zp_persist_start(s, c, (uint64_t)c, why) == 0)
        p->last_cut = c;
}

int zp_persist_request(zp_server *s, int64_t clock, uint64_t setid, char *err, size_t errlen)
{
    zp_persist *p = &s->persist;
    if (!s->cfg.snapshot_dir[0])
        return zp_seterr(err, errlen, ZEPS_ESTATE, "shard %d has no snapshot_dir", s->shard);
    if (s->cfg.consistency != ZP_CONSISTENCY_BSP) {
        if (setid == 0)
            setid = (uint64_t)wall_s();
        if (zp_persist_start(s, -1, setid, "on request") != 0)
            return zp_seterr(err, errlen, ZEPS_EIO, "shard %d: cannot start a snapshot", s->shard);
        return 0;
    }
    int64_t c = bsp_cut(s);
    /* The parameters change only when a round closes, so while every table
     * stands at round `clock` the state is exactly "after clock clock". */
    if (c == clock) {
        if (clock == p->last_cut)
            return 0; /* that cut is written already */
        if (zp_persist_start(s, clock, (uint64_t)clock, "on request") != 0)
            return zp_seterr(err, errlen, ZEPS_EIO, "shard %d: cannot start a snapshot", s->shard);
        p->last_cut = clock;
        return 0;
    }
    for (uint32_t i = 0; i < s->ntables; i++)
        if (s->tables[i]->round > clock)
            return zp_seterr(err, errlen, ZEPS_ECLOCK,
                             "shard %d: table '%s' is already past clock %lld (round %lld)",
                             s->shard, s->tables[i]->name, (long long)clock,
                             (long long)s->tables[i]->round);
    p->requested_cut = clock;
    zp_info("snapshot requested at clock %lld: armed", (long long)clock);
    return 0;
}

void zp_persist_tick(zp_server *s)
{
    reap(s, 0);
    if (!s->cfg.snapshot_dir[0] || s->ntables == 0)
        return;
    auto_update(s);
    uint64_t secs = (uint64_t)wall_s();
    if (s->cfg.snapshot_mtbf_s > 0 && s->cfg.consistency != ZP_CONSISTENCY_BSP) {
        /* before the first measurement: every 16 s, aligned, so shards agree */
        uint64_t t = s->persist.auto_period_s ? s->persist.auto_period_s : 16;
        uint64_t setid = secs / t * t;
        if (setid > s->persist.auto_last && zp_persist_start(s, -1, setid, "auto") == 0)
            s->persist.auto_last = setid;
    }
    double every = s->cfg.snapshot_every_s;
    if (every <= 0)
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
    pack_rows(s, snap);
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
/* A sparse table from its snapshot record: declared from the recorded
 * declaration as table `id`, then every row put back as it was (values,
 * optimizer state, version, touches, last clock). *out owns it. */
static int sparse_from_snap(zp_server *s, uint32_t id, const zp_snap_table *st, zp_table **out,
                            char *err, size_t errlen)
{
    Zeps__TableSpec *spec = zeps__table_spec__unpack(NULL, (size_t)st->spec_len, st->spec);
    if (!spec || spec->kind != 1 || strcmp(spec->name, st->name) != 0) {
        if (spec)
            zeps__table_spec__free_unpacked(spec, NULL);
        return zp_seterr(err, errlen, ZEPS_EDATA,
                         "sparse table '%s': the recorded declaration does not decode", st->name);
    }
    zp_table *t;
    int rc = zp_table_new(&t, id, spec, s->shard, s->nshards, s->nworkers, err, errlen);
    zeps__table_spec__free_unpacked(spec, NULL);
    if (rc != 0)
        return rc;
    uint32_t dim = t->dim, spp = (uint32_t)zp_sparse_state_per_value(t->sparse);
    if (dim != st->length || spp != st->state_per_param) {
        zp_table_destroy(&t);
        return zp_seterr(err, errlen, ZEPS_EDATA,
                         "sparse table '%s': rows of dim %" PRIu64 " with %u state floats, the "
                         "declaration makes %u and %u",
                         st->name, st->length, st->state_per_param, dim, spp);
    }
    uint64_t n, rec = ZP_SNAP_ROW_LEN(dim, spp);
    memcpy(&n, st->rows, 8);
    float *vals = zp_xmalloc((size_t)dim * (1 + spp) * sizeof(float));
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *r = st->rows + ZP_SNAP_ROWS_HDR + i * rec;
        zp_sparse_row row = {.values = vals, .state = vals + dim};
        memcpy(&row.id, r, 8);
        memcpy(&row.version, r + 8, 4);
        memcpy(&row.freq, r + 12, 4);
        memcpy(&row.last_clock, r + 16, 8);
        memcpy(vals, r + 24, (size_t)dim * (1 + spp) * sizeof(float)); /* aligned copy */
        zp_sparse_put(t->sparse, &row);
    }
    free(vals);
    /* the table's history, as recorded (header: u64 rows, u32 dim, u32
     * state, then created, not_admitted, pushes_skipped, evicted_ttl,
     * evicted_capacity) */
    zp_sparse_counters hist = {0};
    memcpy(&hist.created, st->rows + 16, 8);
    memcpy(&hist.not_admitted, st->rows + 24, 8);
    memcpy(&hist.pushes_skipped, st->rows + 32, 8);
    memcpy(&hist.evicted_ttl, st->rows + 40, 8);
    memcpy(&hist.evicted_capacity, st->rows + 48, 8);
    zp_sparse_set_history(t->sparse, &hist);
    t->version = st->version;
    t->round = st->round;
    *out = t;
    return 0;
}

static int restore_table(zp_server *s, const zp_snap_table *st, char *err, size_t errlen)
{
    if (st->kind == 1) {
        zp_table *t;
        int rc = sparse_from_snap(s, s->ntables, st, &t, err, errlen);
        if (rc != 0)
            return rc;
        if (s->ntables == s->cap_tables) {
            s->cap_tables = s->cap_tables ? 2 * s->cap_tables : 8;
            s->tables = zp_xrealloc(s->tables, s->cap_tables * sizeof(*s->tables));
        }
        s->tables[s->ntables++] = t;
        return 0;
    }
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
    s->persist.requested_cut = -1;
    s->restored_clock = -1;
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
        /* A worker of the snapshot must say HELLO again before anything it
         * sends is accepted: that is how it learns this shard restarted. */
        w->joined = false;
        w->rehello = sw->joined;
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
        s->epoch++;
        s->restored_clock = snap->h.clock;
        s->restored_set = setid;
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

int zp_persist_rollback(zp_server *s, int64_t clock, uint64_t setid, uint32_t requester, char *err,
                        size_t errlen)
{
    int64_t cut = bsp_cut(s);
    if (cut == clock)
        return 0; /* already there: another worker asked first, or this shard restarted */
    if (s->cfg.consistency != ZP_CONSISTENCY_BSP)
        return zp_seterr(err, errlen, ZEPS_ESTATE, "shard %d: rollback is for bsp only", s->shard);
    for (uint32_t i = 0; i < s->ntables; i++)
        if (s->tables[i]->round < clock)
            return zp_seterr(err, errlen, ZEPS_ECLOCK,
                             "shard %d: table '%s' is at round %lld, behind the cut %lld to roll "
                             "back to",
                             s->shard, s->tables[i]->name, (long long)s->tables[i]->round,
                             (long long)clock);
    char path[ZP_PATH_MAX + 128];
    if (!s->cfg.snapshot_dir[0] || zp_snapshot_path(path, sizeof(path), s->cfg.snapshot_dir, setid,
                                                    (uint32_t)s->shard, (uint32_t)s->nshards) != 0)
        return zp_seterr(err, errlen, ZEPS_EDATA, "shard %d: no snapshot_dir to roll back from",
                         s->shard);
    reap(s, 1); /* a writer in flight may be writing this very set */
    zp_snapshot *snap = NULL;
    char why[1024];
    int rc = zp_snapshot_read(path, &snap, why, sizeof(why));
    if (rc != 0)
        return zp_seterr(err, errlen, rc, "shard %d: cannot roll back to clock %lld: %s", s->shard,
                         (long long)clock, why);
    if (snap->h.clock != clock || snap->ntables != s->ntables) {
        rc = zp_seterr(err, errlen, ZEPS_EDATA,
                       "shard %d: %s holds clock %lld and %u tables, not clock %lld and %u",
                       s->shard, path, (long long)snap->h.clock, snap->ntables, (long long)clock,
                       s->ntables);
        zp_snapshot_free(&snap);
        return rc;
    }
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_snap_table *st = &snap->tables[i];
        const zp_table *t = s->tables[i];
        bool sparse = t->sparse != NULL;
        if (strcmp(st->name, t->name) != 0 || st->kind != (sparse ? 1u : 0u) ||
            st->begin != t->begin || st->end != t->end ||
            (!sparse && st->state_per_param != (uint32_t)t->opt->state_per_param)) {
            rc = zp_seterr(err, errlen, ZEPS_EDATA,
                           "shard %d: table %u of %s is '%s' [%llu, %llu), this shard has '%s'",
                           s->shard, i, path, st->name, (unsigned long long)st->begin,
                           (unsigned long long)st->end, t->name);
            zp_snapshot_free(&snap);
            return rc;
        }
    }
    for (uint32_t i = 0; i < s->ntables && rc == 0; i++) {
        const zp_snap_table *st = &snap->tables[i];
        zp_table *t = s->tables[i];
        if (!t->sparse) {
            zp_table_reset_to(t, st->params, st->state, st->version, st->round);
            continue;
        }
        /* sparse: a fresh store from the snapshot replaces the live one */
        zp_table *fresh;
        rc = sparse_from_snap(s, i, st, &fresh, err, errlen);
        if (rc != 0)
            break; /* cannot happen after the checks above but a bad declaration */
        zp_sparse *old = t->sparse;
        t->sparse = fresh->sparse;
        fresh->sparse = old;
        t->version = fresh->version;
        t->round = fresh->round;
        zp_table_destroy(&fresh);
    }
    if (rc != 0) {
        zp_snapshot_free(&snap);
        return rc;
    }
    for (uint32_t i = 0; i < snap->nworker_recs; i++) {
        const zp_snap_worker *sw = &snap->workers[i];
        if (sw->rank >= (uint32_t)s->nworkers)
            continue;
        zp_worker *w = &s->workers.w[sw->rank];
        w->clock = sw->clock;
        if (sw->rank == requester)
            continue; /* it asked: it knows, and it keeps its sequence numbers */
        if (w->joined || w->rehello) {
            w->joined = false;
            w->rehello = true;
        }
    }
    s->max_clock = clock;
    s->epoch++;
    s->rollbacks++;
    s->restored_clock = clock;
    s->restored_set = setid;
    s->persist.last_cut = clock;
    s->persist.requested_cut = -1;
    zp_info("rolled back to snapshot set %016" PRIx64 " (clock %lld) at the request of worker %u",
            setid, (long long)clock, requester);
    zp_snapshot_free(&snap);
    zp_server_abort_waiting(s, clock, setid);
    return 0;
}
