/*
 * take.c - zeps_snapshot_take: a snapshot of the whole cluster, asked for
 * and waited for (zepsctl snapshot take and the Python binding's
 * Client.snapshot()). What each shard does is the shards' (SNAPSHOT,
 * docs/snapshots.md); here is only where to ask for it and how to see it
 * done, both from the shards' STATS: the mode's caps (a consistent cut or
 * a point in time, never the mode's name), the rounds each table closed,
 * and the last set each shard wrote.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "client.h"
#include "now.h"
#include "req.h"
#include "wire.h"
#include "zeps.h"
#include "zeps.pb-c.h"

#define TAKE_POLL_NS 100000000L /* STATS every 0.1 s while waiting */

/* Each shard's statistics into st[0..n) (NULL where one did not answer);
 * how many did not. */
static int shard_stats(zeps_client *c, int n, Zeps__ShardStats **st)
{
    int bad = 0;
    for (int k = 0; k < n; k++) {
        void *buf = NULL;
        size_t len = 0;
        st[k] = zeps_stats_raw(c, k, &buf, &len) == 0 ? zeps__shard_stats__unpack(NULL, len, buf)
                                                      : NULL;
        free(buf);
        bad += st[k] == NULL;
    }
    return bad;
}

static void free_stats(Zeps__ShardStats **st, int n)
{
    for (int k = 0; k < n; k++)
        if (st[k])
            zeps__shard_stats__free_unpacked(st[k], NULL);
}

/* The cut of a shard (ZP_CAP_CUTS): the fewest rounds a table with
 * elements there closed. A sparse table (no slice) closes no rounds, nor
 * does a dense table's empty slice (a table shorter than the shard count):
 * counted, they would hold the cut at 0 and the take would wait for a
 * clock no worker pushes. -1 when no table counts. */
static int64_t stats_cut(const Zeps__ShardStats *st)
{
    int64_t lo = -1;
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        if (t->slice_end > t->slice_begin && (lo < 0 || (int64_t)t->rounds < lo))
            lo = (int64_t)t->rounds;
    }
    return lo;
}

/* Ask every shard for one set: with ZP_CAP_CUTS at the clock every shard
 * stands at, or else the next one (which every shard reaches); otherwise
 * now. A shard that moved past the cut meanwhile (ECLOCK): the next one. */
static int request(zeps_client *c, int n, int64_t *target, uint64_t *setid)
{
    Zeps__ShardStats *st[ZP_MAX_SHARDS];
    int rc = ZEPS_ECLOCK;
    for (int attempt = 0; attempt < 5 && rc == ZEPS_ECLOCK; attempt++) {
        if (shard_stats(c, n, st) != 0) {
            free_stats(st, n);
            return zp_fail(c, ZEPS_ETIMEDOUT, "snapshot: a shard did not answer STATS");
        }
        int64_t lo = INT64_MAX, hi = -1;
        for (int k = 0; k < n; k++) {
            int64_t cut = stats_cut(st[k]);
            lo = cut < lo ? cut : lo;
            hi = cut > hi ? cut : hi;
        }
        bool cuts = (st[0]->caps & ZP_CAP_CUTS) != 0;
        free_stats(st, n);
        *target = cuts ? (lo == hi ? hi : hi + 1) : -1;
        *setid = cuts ? (uint64_t)*target : (uint64_t)time(NULL);
        rc = zeps_snapshot_request(c, *target, *setid);
    }
    return rc;
}

/* 1 if every shard wrote set `setid` (or one restored from it), 0 if not
 * yet, -1 (recorded with zp_fail) if a shard's writer of it failed: no
 * wait brings that file. */
static int all_written(zeps_client *c, int n, uint64_t setid)
{
    Zeps__ShardStats *st[ZP_MAX_SHARDS];
    int done = shard_stats(c, n, st) == 0;
    for (int k = 0; k < n && done == 1; k++) {
        if (st[k]->last_failed_set == setid && st[k]->last_snapshot_set < setid) {
            zp_fail(c, ZEPS_EIO,
                    "snapshot set %016" PRIx64 ": shard %d's writer failed (its log says why: "
                    "a full disk, or snapshot_dir not writable?)",
                    setid, k);
            done = -1;
        } else {
            done = st[k]->last_snapshot_set >= setid &&
                   (st[k]->snapshots_written > 0 || st[k]->restored_clock >= 0);
        }
    }
    free_stats(st, n);
    return done;
}

int zeps_snapshot_take(zeps_client *c, double timeout_s, int64_t *clock, uint64_t *setid)
{
    if (!c || !(timeout_s > 0))
        return ZEPS_EINVAL;
    int n = zeps_num_shards(c);
    int64_t target;
    uint64_t set;
    int rc = request(c, n, &target, &set);
    if (rc != 0)
        return rc;
    double deadline = zp_now_s() + timeout_s;
    while ((rc = all_written(c, n, set)) != 1) {
        if (rc < 0)
            return ZEPS_EIO;
        if (c->interrupt && *c->interrupt)
            return zp_fail(c, ZEPS_ECLOSED,
                           "interrupted while waiting for snapshot set "
                           "%016" PRIx64,
                           set);
        if (zp_now_s() >= deadline)
            return zp_fail(c, ZEPS_ETIMEDOUT,
                           "snapshot set %016" PRIx64 " not written by every shard after "
                           "%g s%s",
                           set, timeout_s,
                           target >= 0 ? " (has every worker reached that clock?)" : "");
        struct timespec ts = {0, TAKE_POLL_NS};
        nanosleep(&ts, NULL);
    }
    if (clock)
        *clock = target;
    if (setid)
        *setid = set;
    return 0;
}
