/*
 * ctl_mover_say.c - what the mover says (ctl_mover_impl.h): the lines a
 * move ends with, as docs/commands.md shows them, and its words on a
 * commit in ZooKeeper that a shard did not hasten or that went unconfirmed.
 */
#include <inttypes.h>
#include <stdio.h>

#include "exitcode.h"
#include "zeps_errors.h"

#include "ctl_mover_impl.h"

void zp_ctl_mover_say_report(const mv *m, uint64_t cut_rows, double cut_ms, double secs,
                             const char *src, uint64_t epoch)
{
    printf("cut-over: %" PRIu64 " rows and %" PRIu64 " held bsp pushes in %.1f ms (the longest "
           "a request of the slots waited)\n",
           cut_rows, m->held, cut_ms);
    printf("moved: %" PRIu64 " rows sent (%.1f MB) in %" PRIu64
           " rounds, %.2f s (%.0f rows/s, %.1f MB/s); shard %d %s; slot map epoch %" PRIu64 "\n",
           m->rows, m->bytes / 1e6, m->rounds, secs, m->rows / (secs > 0 ? secs : 1),
           m->bytes / 1e6 / (secs > 0 ? secs : 1), m->o.from, src, epoch);
    if (m->pace.limit > 0)
        printf("paced: at most %g MB/s (--max-mb-s); the busiest second held %.2f MB; %.2f s "
               "waited\n",
               m->o.max_mb_s, m->pace.peak / 1e6, m->pace.slept);
    printf("summary: rows=%" PRIu64 " bytes=%" PRIu64 " rounds=%" PRIu64
           " seconds=%.3f cutover_ms=%.1f epoch=%" PRIu64 "\n",
           m->rows, m->bytes, m->rounds, secs, cut_ms, epoch);
}

/* With the map committed in ZooKeeper, shard k's answer (rc) to the SLOTS
 * or COMMIT that hastens it: ESTALE says it took the map from the node
 * already; another failure is said, and the shard takes it from there. */
void zp_ctl_mover_say_hasten(const mv *m, int k, int rc, const char *what)
{
    if (m->zk && rc != 0 && rc != ZEPS_ESTALE)
        fprintf(stderr,
                "zepsctl shards move: %s to shard %d: %s; the map is committed in ZooKeeper, "
                "which the shard watches\n",
                what, k, m->err);
}

/* The map's write to ZooKeeper was not confirmed, and the node could not
 * be read: no ABORT (the write may have landed), the shards decide by the
 * node when their parts end by time. */
int zp_ctl_mover_say_undecided(const mv *m)
{
    fprintf(stderr,
            "zepsctl shards move: %s\nzepsctl shards move: not aborted: each shard of the move "
            "reads the node when its part ends by time, and commits or aborts by it\n",
            m->err);
    return ZP_EXIT_FAILED;
}
