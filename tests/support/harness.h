/*
 * harness.h - helpers for tests that run real zeps processes.
 *
 * A zt_cluster is S zeps-server processes started from a generated cluster
 * file in a private temporary directory, on ipc:// endpoints inside it, so
 * tests never collide on ports. Children get PR_SET_PDEATHSIG, so a test that
 * dies on a failed assertion takes its servers with it.
 */
#ifndef ZT_HARNESS_H
#define ZT_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#include "zeps.h"
#include "zeps.pb-c.h"

#define ZT_MAX_SERVERS 8

typedef struct zt_cluster {
    char dir[256];
    char conf[320];
    int nservers, nworkers;
    pid_t pids[ZT_MAX_SERVERS];
    char endpoints[ZT_MAX_SERVERS][300];
    /* replicated shards (set by the test, e.g. from replset.h): with
     * replicas == 2, zt_client* follow each shard's primary among these */
    int replicas;
    char replica_endpoints[ZT_MAX_SERVERS][2][64];
} zt_cluster;

/* A loopback TCP port free right now, for tests that need tcp://
 * endpoints: zp_freeport_pick (common/freeport.h), below the kernel's
 * ephemeral range (lib.sh free_port picks the same way). */
int zt_free_port(void);

/* Path of a zeps binary ("zeps-server"): $ZEPS_BINDIR/name. */
const char *zt_bin(const char *name, char *buf, size_t len);

/* Write the cluster file (cluster section with `extra` lines appended inside
 * it, then `training` text if not NULL; "@DIR@" in either stands for the
 * cluster's directory) and start the servers; waits until each answers
 * HELLO. Returns 0 or -1. */
int zt_cluster_start(zt_cluster *c, int nservers, int nworkers, const char *consistency,
                     const char *extra, const char *training);

/* The same with the servers' per-update trace on: trace_dir is the
 * cluster's own directory (read <dir>/trace-shard<k>.csv). */
int zt_cluster_start_traced(zt_cluster *c, int nservers, int nworkers, const char *consistency,
                            const char *extra);

/* SIGTERM every server, wait (bounded), SIGKILL stragglers, remove the dir.
 * Returns the number of servers that did not exit 0 on SIGTERM. */
int zt_cluster_stop(zt_cluster *c);

/* Stop server k with `sig` and wait for it (10 s, then SIGKILL); returns
 * its wait status. */
int zt_server_kill(zt_cluster *c, int k, int sig);

/* Wait (up to timeout_s) until no process of this cluster is left: the
 * snapshot writers a killed server forked finish on their own and may
 * still complete a set; a test that restarts every shard waits for them,
 * or shards started in between could see different newest sets. Returns
 * 1 when none is left. */
int zt_cluster_quiet(const zt_cluster *c, double timeout_s);

/* Start server k again with the same cluster file (its log is appended);
 * waits until it answers HELLO. Returns 0 or -1. */
int zt_server_start(zt_cluster *c, int k);

/* Start shard k past the cluster file's servers with `zeps-server --shard
 * k --join endpoint` (docs/elastic.md, "Adding a shard"; "%d" in endpoint
 * stands for k); zt_cluster_stop stops it too. Waits until it answers
 * HELLO. Returns 0 or -1. */
int zt_server_join(zt_cluster *c, int k, const char *endpoint);

/* Start a program with argv, output appended to `log` (NULL: inherit). */
pid_t zt_spawn(const char *path, char *const argv[], const char *log);

/* Wait for pid up to timeout_s; returns its wait status, or -1 on timeout
 * (the process is then killed). */
int zt_wait(pid_t pid, double timeout_s);

/* A client for worker `rank` of the cluster (with the cluster file's CURVE
 * client keys when it sets them). */
zeps_client *zt_client(const zt_cluster *c, uint32_t rank);
/* Cluster lines for a job whose worker is killed and replaced: the dead
 * one's lease (lost_worker_timeout_s) runs out after 1 s of silence, and
 * the job waits for its replacement. */
#define ZT_SHORT_LEASE "  lost_worker_timeout_s = 1.0;\n  lost_worker_wait_s = 120.0;"

/* A new incarnation of worker `rank` replacing one that died: HELLO is
 * refused until the dead one's lease ran out, and asked again (30 s at
 * most). NULL if it never got in. */
zeps_client *zt_client_replacing(const zt_cluster *c, uint32_t rank);

/* The same with the caller's options (its CURVE keys are taken from the
 * cluster file when it sets them); NULL on failure. */
zeps_client *zt_client_opts(const zt_cluster *c, uint32_t rank, zeps_options *opt);

/* Shard k's statistics, decoded; NULL on failure. Free with
 * zeps__shard_stats__free_unpacked(st, NULL). */
Zeps__ShardStats *zt_stats(zeps_client *c, int k);

/* c's client statistics (zeps_client_get_stats), by value. */
zeps_client_stats zt_client_stats(const zeps_client *c);

/* A raw DEALER socket connected to shard k (linger 0; with the cluster
 * file's CURVE client keys when it sets them). */
void *zt_raw_socket(void *zctx, const zt_cluster *c, int k);

/* Whether server k's log has a line containing `needle` (now), and the
 * same polled every 50 ms for up to 10 s. */
int zt_log_has(const zt_cluster *c, int k, const char *needle);
int zt_wait_log(const zt_cluster *c, int k, const char *needle);

/* Send header h (and one payload frame if payload is not NULL) on a raw
 * socket and return the reply's header (free with
 * zeps__header__free_unpacked), or NULL if none came within 5 s. */
Zeps__Header *zt_raw_request(void *raw, const Zeps__Header *h, const void *payload, size_t len);

#endif
