/*
 * persist.c - snapshots of a running shard (restore.c puts them back).
 *
 * A snapshot never pauses the shard: the server describes its state (a
 * zp_snapshot record pointing at the live tables, each table's kind
 * describing its own part), fork()s, and the child writes that
 * copy-on-write image with common/snapshot while the parent
 * keeps serving (the Redis BGSAVE way). The parent reaps the child from its
 * timer. Copy-on-write is the kernel's: the child sees memory as it was at
 * fork() whatever the parent applies next.
 *
 * Which state, and which set it belongs to (sets group one file per shard):
 * - a mode with cuts (ZP_CAP_CUTS: bsp) and snapshot_every_clocks = K: a
 *   consistent cut, which the policy's cut hook reads. When the last
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
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"
#include "log.h"
#include "now.h"
#include "server.h"
#include "snapshot.h"
#include "tiered.h"
#include "zeps_errors.h"

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Leave out of a packed sparse table every row the shard's map does not
 * give it: the rows a move's target imported before the commit gave it
 * their slots. Until then they are the source's, whose file holds them
 * (docs/elastic.md, "Snapshots"). The rows are packed into st->owned_bytes
 * (after the declaration), which this compacts in place. */
static void drop_foreign(const zp_server *s, zp_snap_table *st)
{
    uint8_t *rows = st->owned_bytes + st->spec_len;
    uint64_t n, kept = 0, rec = ZP_SNAP_ROW_LEN(st->length, st->state_per_param);
    memcpy(&n, rows, 8);
    for (uint64_t i = 0; i < n; i++) {
        uint8_t *at = rows + ZP_SNAP_ROWS_HDR + i * rec;
        uint64_t id;
        memcpy(&id, at, 8);
        if (zp_slotmap_owner(s->slots, id) != s->shard)
            continue;
        if (kept != i)
            memmove(rows + ZP_SNAP_ROWS_HDR + kept * rec, at, (size_t)rec);
        kept++;
    }
    memcpy(rows, &kept, 8);
    st->rows_len = ZP_SNAP_ROWS_HDR + kept * rec;
}

/* Serialise what the writer copies (sparse rows) into snap. Runs in the
 * writer: the forked child, or in-process at exit. */
static void pack(const zp_server *s, zp_snapshot *snap)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        s->tables[i]->kind->pack(s->tables[i], &snap->tables[i]);
        /* only a move's target holds rows of slots it does not own */
        if (s->move && snap->tables[i].kind == 1)
            drop_foreign(s, &snap->tables[i]);
    }
}

/* The cold tiers of the shard's tiered tables checkpointed beside set
 * setid's file, now: with the record made right after, on the loop's
 * thread with nothing between, both tiers are of one cut. 0, or an error
 * (the set then gets no file from this shard). */
static int checkpoint_tiers(const zp_server *s, uint64_t setid, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < s->ntables; i++) {
        zp_table *t = s->tables[i];
        int rc = t->rows && t->rows->tier
                     ? zp_tiered_checkpoint(t->rows, s->cfg.snapshot_dir, setid, t->name, s->shard,
                                            s->nshards, err, errlen)
                     : 0;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The shard's state as a record pointing at live memory (the caller frees
 * the record, never the arrays). */
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
    if (zp_slotmap_epoch(s->slots) > 0) { /* the rows' map; the default's is no map */
        size_t len = zp_slotmap_wire_size(s->slots);
        uint8_t *wire = zp_alloc(len);
        zp_slotmap_encode(s->slots, wire);
        snap->owned_map = wire; /* freed with the record */
        snap->slotmap = wire;
        snap->slotmap_len = len;
    }
    for (uint32_t i = 0; i < s->ntables; i++) {
        const zp_table *t = s->tables[i];
        zp_snap_table *st = &snap->tables[i];
        zp_table_describe(t, st);
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
    if (zp_manifest_set_complete(cfg->snapshot_dir, snap->h.setid, snap->h.nshards, why,
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
        p->last_done_s = zp_now_s();
        p->last_setid = w->setid;
        zp_info("snapshot set %016" PRIx64 " (%s, clock %" PRId64 ") written in %.3f s", w->setid,
                w->why, w->clock, took);
    } else {
        p->failures++;
        p->last_failed_setid = w->setid;
        zp_error("snapshot set %016" PRIx64 " (%s) failed after %.3f s (child status %d)", w->setid,
                 w->why, took, st);
    }
    w->pid = 0;
}

void zp_persist_reap(zp_server *s, int block)
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

/* In the writer child: die with the shard. A writer that outlived a
 * SIGKILLed shard went on completing sets of the state the restarted shard
 * had just rolled the job back from, and their completion pruned the set
 * restored (snapshot_keep), so the other shards could not roll back to it
 * ("cannot roll back to clock C: ... cannot open"; found by the chaos
 * test). A dead shard writes nothing more, as after a power loss; the
 * temporary file of a writer killed mid-way is never part of a set. */
static void die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(1); /* the parent is gone already (or it cannot be watched) */
}

/* In the writer child: close every inherited descriptor but stdin, stdout
 * and stderr. The child opens what it writes by path; what it would keep
 * otherwise includes the shard's listening socket, so a shard SIGKILLed
 * while a writer ran could not be restarted on its address until the
 * writer finished ("Address already in use": found by the chaos test). */
static void close_inherited(void)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
        close(fd);
}

int zp_persist_start(zp_server *s, int64_t clock, uint64_t setid, const char *why)
{
    zp_persist *p = &s->persist;
    if (!s->cfg.snapshot_dir[0])
        return ZEPS_ESTATE;
    zp_writer *w = free_slot(p);
    char cerr[1024];
    if (checkpoint_tiers(s, setid, cerr, sizeof cerr) != 0) {
        zp_error("snapshot set %016" PRIx64 " (%s): %s", setid, why, cerr);
        p->failures++;
        return ZEPS_EIO;
    }
    zp_snapshot *snap = describe(s, clock, setid);
    zp_trace_flush(s->trace); /* the child must not inherit unflushed trace rows */
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        char err[1024];
        die_with_parent(parent);
        close_inherited();
        /* the writer yields the CPU to the serving parent (docs/snapshots.md) */
        if (s->cfg.snapshot_nice > 0 && setpriority(PRIO_PROCESS, 0, s->cfg.snapshot_nice) != 0)
            fprintf(stderr, "snapshot writer: setpriority: %s\n", strerror(errno));
        pack(s, snap);
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

pid_t zp_persist_fork_file(zp_server *s, const char *dir, uint64_t setid)
{
    zp_snapshot *snap = describe(s, -1, setid);
    zp_trace_flush(s->trace);
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        char err[1024], path[ZP_PATH_MAX + 128];
        die_with_parent(parent);
        close_inherited();
        pack(s, snap);
        int rc = zp_snapshot_write(dir, snap, path, sizeof(path), err, sizeof(err));
        if (rc != 0)
            fprintf(stderr, "state file %016" PRIx64 ": %s\n", setid, err);
        _exit(rc == 0 ? 0 : 1);
    }
    zp_snapshot_free(&snap);
    if (pid < 0)
        zp_error("state file: fork failed: %s", strerror(errno));
    return pid;
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
    if ((s->cons->caps & ZP_CAP_CUTS)) {
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
    int64_t c = s->cons->cut(s);
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
        return zp_errors_set(err, errlen, ZEPS_ESTATE, "shard %d has no snapshot_dir", s->shard);
    if (!(s->cons->caps & ZP_CAP_CUTS)) {
        if (setid == 0)
            setid = (uint64_t)wall_s();
        if (zp_persist_start(s, -1, setid, "on request") != 0)
            return zp_errors_set(err, errlen, ZEPS_EIO, "shard %d: cannot start a snapshot",
                                 s->shard);
        return 0;
    }
    int64_t c = s->cons->cut(s);
    /* The parameters change only when a round closes, so while every table
     * stands at round `clock` the state is exactly "after clock clock". */
    if (c == clock) {
        if (clock == p->last_cut)
            return 0; /* that cut is written already */
        if (zp_persist_start(s, clock, (uint64_t)clock, "on request") != 0)
            return zp_errors_set(err, errlen, ZEPS_EIO, "shard %d: cannot start a snapshot",
                                 s->shard);
        p->last_cut = clock;
        return 0;
    }
    for (uint32_t i = 0; i < s->ntables; i++)
        if (s->tables[i]->round.closed > clock)
            return zp_errors_set(err, errlen, ZEPS_ECLOCK,
                                 "shard %d: table '%s' is already past clock %lld (round %lld)",
                                 s->shard, s->tables[i]->name, (long long)clock,
                                 (long long)s->tables[i]->round.closed);
    p->requested_cut = clock;
    zp_info("snapshot requested at clock %lld: armed", (long long)clock);
    return 0;
}

void zp_persist_tick(zp_server *s)
{
    zp_persist_reap(s, 0);
    if (!s->cfg.snapshot_dir[0] || s->ntables == 0)
        return;
    auto_update(s);
    uint64_t secs = (uint64_t)wall_s();
    if (s->cfg.snapshot_mtbf_s > 0 && !(s->cons->caps & ZP_CAP_CUTS)) {
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
            zp_persist_start(s, s->cons->cut(s), period, "every seconds") != 0)
            return;
        s->persist.last_period = period;
    }
}

int zp_persist_final(zp_server *s)
{
    if (!s->cfg.snapshot_dir[0] || !s->cfg.snapshot_on_exit || s->ntables == 0)
        return 0;
    zp_persist_reap(s, 1); /* snapshots in flight finish first */
    int64_t cut = s->cons->cut(s);
    uint64_t setid =
        cut >= 0
            ? (uint64_t)cut
            : (uint64_t)(wall_s() / (s->cfg.snapshot_every_s > 0 ? s->cfg.snapshot_every_s : 1.0));
    char err[1024];
    double t0 = zp_now_s();
    int rc = checkpoint_tiers(s, setid, err, sizeof err);
    if (rc != 0) {
        zp_error("final snapshot set %016" PRIx64 " failed: %s", setid, err);
        return rc;
    }
    zp_snapshot *snap = describe(s, cut, setid);
    pack(s, snap);
    rc = write_set(&s->cfg, snap, err, sizeof(err));
    uint64_t created_ns = snap->h.created_ns;
    zp_snapshot_free(&snap);
    if (rc != 0) {
        zp_error("final snapshot set %016" PRIx64 " failed: %s", setid, err);
        return rc;
    }
    zp_info("final snapshot set %016" PRIx64 " (clock %" PRId64 ") written in %.3f s", setid, cut,
            zp_now_s() - t0);
    s->persist.final.written = true;
    s->persist.final.setid = setid;
    s->persist.final.created_ns = created_ns;
    return 0;
}
