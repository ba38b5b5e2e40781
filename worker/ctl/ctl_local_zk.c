/*
 * ctl_local_zk.c - `zepsctl local --replicas R`: the replicas' side of a
 * local run. A one-node ZooKeeper in the run directory (<dir>/zookeeper:
 * zoo.cfg, data, zookeeper.log; started by ctl_zk.c, as `zepsctl bench
 * --replicas` starts its own); and the wait for every shard's first
 * replica to be elected primary, so that workers, which reach replica 0 of
 * each shard, find a primary there (libzeps does not follow redirects yet).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "ctl_local.h"
#include "ctl_probe.h"
#include "ctl_zk.h"
#include "curve.h"
#include "now.h"
#include "zeps.pb-c.h"

static void nap_ms(int ms)
{
    struct timespec t = {0, (long)ms * 1000000L};
    nanosleep(&t, NULL);
}

bool zp_ctl_local_zk_start(local_run *r)
{
    char zdir[ZP_PATH_MAX + 16];
    snprintf(zdir, sizeof(zdir), "%s/zookeeper", r->dir);
    zp_ctl_zk_opts o = {.dir = zdir,
                        .port = r->zk_port,
                        .who = "zepsctl local",
                        .why = "--replicas",
                        .sigmask = &r->oldmask};
    double took = zp_ctl_zk_start(&o, &r->zk_pid);
    r->zk_running = r->zk_pid > 0;
    if (took < 0)
        return false;
    printf("zeps local: ZooKeeper serving on 127.0.0.1:%d after %.1f s (%s)\n", r->zk_port, took,
           zdir);
    fflush(stdout);
    return true;
}

/* Whether replica 0 of every shard says it is primary now, with at least
 * in_sync replicas in its in-sync set. */
static bool primaries(const local_run *r, const zp_curve_client_keys *keys, uint32_t in_sync)
{
    int n = r->cfg->num_shards;
    answer *a = zp_alloc_zeroed((size_t)n, sizeof(*a));
    zp_ctl_probe(r->cfg, keys, 0, n, 0, zp_now_s() + 1.0, 1000, a);
    bool all = true;
    for (int k = 0; k < n; k++) {
        Zeps__ShardStats *st =
            a[k].buf ? zeps__shard_stats__unpack(NULL, a[k].len, a[k].buf) : NULL;
        all &= st && strcmp(st->role, "primary") == 0 && st->in_sync >= in_sync;
        zeps__shard_stats__free_unpacked(st, NULL);
        free(a[k].buf);
    }
    free(a);
    return all;
}

bool zp_ctl_local_zk_wait_primaries(local_run *r, int in_sync, double timeout_s)
{
    zp_curve_client_keys keys;
    char err[512];
    if (zp_curve_load_client(r->cfg, &keys, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl local: %s\n", err);
        return false;
    }
    double t0 = zp_now_s();
    bool ok;
    while (!(ok = primaries(r, &keys, (uint32_t)in_sync)) && zp_now_s() - t0 < timeout_s)
        nap_ms(100);
    explicit_bzero(&keys, sizeof(keys));
    if (!ok)
        fprintf(stderr,
                "zepsctl local: replica 0 of every shard was not primary with %d replica(s) "
                "in sync within %.0f s; see the servers' logs in %s\n",
                in_sync, timeout_s, r->dir);
    return ok;
}
