/*
 * ctl_bench_repl.c - `zepsctl bench --replicas 2`: the replicated shard
 * beside the plain one. A one-node ZooKeeper (ctl_zk.c, as `zepsctl local
 * --replicas` starts its own) in <dir>/zookeeper, and one shard of two
 * zeps-server replicas on loopback whose cluster file's coordination group
 * names it. Replica 0 is started first and waited for as primary, then
 * replica 1, until the primary's STATS say in_sync = 2: from then on every
 * push is acknowledged only once the backup has it in its log, which it
 * applies at once (acks=all, docs/replication.md), which is the cost
 * measured. Its client (b->zr) is driven through zp_ctl_bench_zeps_r2_ops,
 * as a fourth cell of each repetition, so that the machine's noise falls
 * on r=1 and r=2 alike.
 *
 * This file also prints the r=2 / r=1 ratios against the bars and
 * writes the r=2 cell into the JSON.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "freeport.h"
#include "config.h"
#include "ctl.h"
#include "ctl_bench.h"
#include "ctl_probe.h"
#include "ctl_zk.h"
#include "now.h"
#include "zeps.pb-c.h"

#define REPL_MAX_LAG_MS 10000 /* a backup slowed by the machine stays in the set */
#define REPL_WAIT_S     30.0  /* for the election and the backup's catching up */

static void nap_ms(int ms)
{
    struct timespec t = {0, (long)ms * 1000000L};
    nanosleep(&t, NULL);
}

/* Whether replica r of cfg answers STATS as `role` with at least `in_sync`
 * replicas in the in-sync set; *seen says what it answered. */
static bool replica_is(const zp_config *cfg, int r, const char *role, uint32_t in_sync, char *seen,
                       size_t len)
{
    zp_curve_client_keys keys;
    memset(&keys, 0, sizeof keys);
    answer a;
    memset(&a, 0, sizeof a);
    zp_ctl_probe(cfg, &keys, 0, 1, r, zp_now_s() + 1.0, 1000, &a);
    Zeps__ShardStats *st = a.buf ? zeps__shard_stats__unpack(NULL, a.len, a.buf) : NULL;
    bool ok = st && strcmp(st->role, role) == 0 && st->in_sync >= in_sync;
    if (st)
        snprintf(seen, len, "%s, %u in sync", st->role, st->in_sync);
    else
        snprintf(seen, len, "no answer: %s", a.why);
    zeps__shard_stats__free_unpacked(st, NULL);
    free(a.buf);
    return ok;
}

/* Wait until replica 0 is primary with in_sync replicas in its set; fail
 * at once if a replica exits. */
static int wait_primary(bench *b, const zp_config *cfg, uint32_t in_sync)
{
    char seen[400] = "no answer";
    double t0 = zp_now_s();
    while (zp_now_s() - t0 < REPL_WAIT_S && !zp_ctl_bench_stop) {
        for (int r = 0; r < 2; r++) {
            int status;
            if (b->replica[r] > 0 && zp_spawn_wait(b->replica[r], 0, &status) == 1) {
                b->replica[r] = 0;
                fprintf(stderr, "bench: replica %d of the replicated shard exited at start-up\n",
                        r);
                return ZEPS_EIO;
            }
        }
        if (replica_is(cfg, 0, "primary", in_sync, seen, sizeof seen))
            return 0;
        nap_ms(50);
    }
    fprintf(stderr, "bench: replica 0 was not primary with %u in sync within %.0f s (%s)\n",
            in_sync, REPL_WAIT_S, seen);
    return zp_ctl_bench_stop ? ZEPS_ECLOSED : ZEPS_ETIMEDOUT;
}

/* ZooKeeper in <dir>/zookeeper on a free port; its "host:port" into hosts. */
static int zk_open(bench *b, char *hosts, size_t len)
{
    char zdir[128];
    int port = zp_freeport_pick();
    if (port <= 0) {
        fprintf(stderr, "bench: no free loopback port for ZooKeeper\n");
        return ZEPS_EIO;
    }
    snprintf(zdir, sizeof zdir, "%s/zookeeper", b->dir);
    snprintf(hosts, len, "127.0.0.1:%d", port);
    zp_ctl_zk_opts o = {
        .dir = zdir, .port = port, .who = "bench", .why = "--replicas", .stop = &zp_ctl_bench_stop};
    double took = zp_ctl_zk_start(&o, &b->zk);
    if (took < 0)
        return zp_ctl_bench_stop ? ZEPS_ECLOSED : ZEPS_EIO;
    fprintf(stderr, "bench: ZooKeeper serving on %s after %.1f s\n", hosts, took);
    return 0;
}

/* The cluster file of the replicated shard: two endpoints on free ports
 * (ep0: replica 0), the coordination group naming ZooKeeper at hosts. */
static int write_conf(bench *b, const char *path, const char *hosts, char ep[2][64])
{
    char servers[160], extra[400];
    int port[2] = {zp_freeport_pick(), zp_freeport_pick()};
    for (int tries = 0; port[1] == port[0] && tries < 10; tries++)
        port[1] = zp_freeport_pick();
    if (port[0] <= 0 || port[1] <= 0 || port[0] == port[1]) {
        fprintf(stderr, "bench: no free loopback ports for the replicas\n");
        return ZEPS_EIO;
    }
    for (int r = 0; r < 2; r++)
        snprintf(ep[r], 64, "tcp://127.0.0.1:%d", port[r]);
    snprintf(servers, sizeof servers, "( [ \"%s\", \"%s\" ] )", ep[0], ep[1]);
    char log_mb[32] = "";
    if (b->o.log_mb > 0)
        snprintf(log_mb, sizeof log_mb, " log_mb = %d;", b->o.log_mb);
    snprintf(extra, sizeof extra,
             "  replicas = 2;\n"
             "  coordination = { zookeeper = \"%s\"; name = \"bench\"; "
             "session_timeout_ms = %d; };\n"
             "  replication = { max_lag_ms = %d;%s };\n",
             hosts, REPL_SESSION_MS, REPL_MAX_LAG_MS, log_mb);
    return zp_ctl_bench_zeps_write_conf(b, path, servers, extra);
}

/* Start replica r with its log in <dir>/replica-<r>.log. */
static int start_replica(bench *b, const char *conf, int r)
{
    char log[128];
    snprintf(log, sizeof log, "%s/replica-%d.log", b->dir, r);
    return zp_ctl_bench_zeps_spawn(&b->replica[r], conf, log, r);
}

int zp_ctl_bench_repl_open(bench *b)
{
    char hosts[64], conf[128], ep[2][64] = {"", ""}, err[1024];
    zp_config *cfg = zp_alloc_zeroed(1, sizeof *cfg);
    snprintf(conf, sizeof conf, "%s/cluster-r2.conf", b->dir);
    int rc = zk_open(b, hosts, sizeof hosts);
    if (rc == 0)
        rc = write_conf(b, conf, hosts, ep);
    if (rc == 0 && zp_config_load(cfg, conf, err, sizeof err) != 0) {
        fprintf(stderr, "bench: %s\n", err);
        rc = ZEPS_EINVAL;
    }
    double t0 = zp_now_s();
    if (rc == 0)
        rc = start_replica(b, conf, 0);
    if (rc == 0)
        rc = wait_primary(b, cfg, 1);
    if (rc == 0)
        rc = start_replica(b, conf, 1);
    if (rc == 0)
        rc = wait_primary(b, cfg, 2);
    if (rc == 0)
        fprintf(stderr,
                "bench: replicated shard ready after %.1f s: replica 0 primary, 2 in sync\n",
                zp_now_s() - t0);
    if (rc == 0)
        rc = zp_ctl_bench_zeps_connect(b, &b->zr, ep[0], NULL);
    if (rc != 0 && !zp_ctl_bench_stop) {
        fprintf(stderr, "bench: the replicas' and ZooKeeper's logs are in %s (kept)\n", b->dir);
        b->o.keep = true;
    }
    free(cfg);
    return rc;
}

/* How often the primary's log says the in-sync set shrank after it first
 * held both replicas (a backup left it: pushes were then acknowledged
 * without waiting for it). */
static int isr_shrinks(const bench *b)
{
    char path[128], line[1024];
    snprintf(path, sizeof path, "%s/replica-0.log", b->dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    bool both = false;
    while (f && fgets(line, sizeof line, f)) {
        both |= strstr(line, "in-sync set: 2 replica") != NULL;
        n += both && strstr(line, "in-sync set: 1 replica") != NULL;
    }
    if (f)
        fclose(f);
    return n;
}

void zp_ctl_bench_repl_close(bench *b)
{
    zeps_client_destroy(&b->zr.c);
    if (b->replica[0] > 0 || b->replica[1] > 0) {
        int n = isr_shrinks(b);
        if (n > 0)
            fprintf(stderr,
                    "bench: warning: the backup left the in-sync set %d time(s) during the run "
                    "(see %s/replica-0.log): some r=2 pushes were not waited for\n",
                    n, b->dir);
    }
    /* the backup first: the primary then need not be replaced; ZooKeeper
     * last, after the sessions were closed */
    stop_child(&b->replica[1], SIGTERM, "zeps-server (replica 1)");
    stop_child(&b->replica[0], SIGTERM, "zeps-server (replica 0)");
    int status;
    if (b->zk > 0 && zp_spawn_stop(b->zk, SIGTERM, 5.0, &status) == 0)
        fprintf(stderr, "bench: ZooKeeper did not stop within 5 s; killed it\n");
    b->zk = 0; /* the JVM exits 143 on SIGTERM: that is its clean stop */
}

/* The line of the bars: which sizes they concern, and whether met. */
static void print_bars(const bench *b)
{
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_R2].v;
        if (b->o.sizes[si] == (4u << 20)) {
            double q = ratio(r[F_PUSH], z[F_PUSH]);
            printf("  dense push 4 MB: %.3f (aim >= %.2f: %s)\n", q, REPL_PUSH_AIM,
                   q >= REPL_PUSH_AIM ? "met" : "missed");
        }
        if (b->o.sizes[si] == 64) {
            double p50 = ratio(r[F_PUSH_P50], z[F_PUSH_P50]);
            double p99 = ratio(r[F_PUSH_P99], z[F_PUSH_P99]);
            printf("  64 B push round trip: p50 %.3f, p99 %.3f (aim <= %.1f: %s at p50, %s at "
                   "p99)\n",
                   p50, p99, REPL_RTT_AIM, p50 <= REPL_RTT_AIM ? "met" : "missed",
                   p99 <= REPL_RTT_AIM ? "met" : "missed");
        }
    }
}

void zp_ctl_bench_repl_print(const bench *b)
{
    char lbl[32], m[4][16];
    printf("\nreplicated shard (2 replicas, acks=all) vs one replica, same run; "
           "ratio = r=2 / r=1:\n");
    printf("%7s | %-20s | %-20s | %-20s | %-20s\n", "", "push MB/s", "pull MB/s", "push RTT p50 µs",
           "push RTT p99 µs");
    printf("%7s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s\n", "size", "r=1", "r=2",
           "ratio", "r=1", "r=2", "ratio", "r=1", "r=2", "ratio", "r=1", "r=2", "ratio");
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_R2].v;
        snprintf(m[0], 16, z[F_PUSH] < 100 ? "%.1f" : "%.0f", z[F_PUSH]);
        snprintf(m[1], 16, r[F_PUSH] < 100 ? "%.1f" : "%.0f", r[F_PUSH]);
        snprintf(m[2], 16, z[F_PULL] < 100 ? "%.1f" : "%.0f", z[F_PULL]);
        snprintf(m[3], 16, r[F_PULL] < 100 ? "%.1f" : "%.0f", r[F_PULL]);
        printf("%7s | %6s %6s %6.2f | %6s %6s %6.2f | %6.0f %6.0f %6.2f | %6.0f %6.0f %6.2f\n",
               size_label(b->o.sizes[si], lbl, sizeof lbl), m[0], m[1], ratio(r[F_PUSH], z[F_PUSH]),
               m[2], m[3], ratio(r[F_PULL], z[F_PULL]), z[F_PUSH_P50], r[F_PUSH_P50],
               ratio(r[F_PUSH_P50], z[F_PUSH_P50]), z[F_PUSH_P99], r[F_PUSH_P99],
               ratio(r[F_PUSH_P99], z[F_PUSH_P99]));
    }
    printf("\nr=2 / r=1:\n");
    print_bars(b);
}

void zp_ctl_bench_repl_json(const bench *b, FILE *f, int si)
{
    const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_R2].v;
    fprintf(f,
            "      \"ratio_r2\": {\"push\": %.3f, \"pull\": %.3f, \"push_pull\": %.3f, "
            "\"push_rtt_p50\": %.3f, \"push_rtt_p99\": %.3f},\n",
            ratio(r[F_PUSH], z[F_PUSH]), ratio(r[F_PULL], z[F_PULL]), ratio(r[F_BOTH], z[F_BOTH]),
            ratio(r[F_PUSH_P50], z[F_PUSH_P50]), ratio(r[F_PUSH_P99], z[F_PUSH_P99]));
}
