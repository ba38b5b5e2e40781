/*
 * replset.h - one shard of two replicas for tests (replset.c): real
 * zeps-server processes on loopback ports, coordinated by a real ZooKeeper
 * (zkserver.h), their cluster file, their STATS, and waiting for a role.
 * Used by test_failover, test_replication (and what else starts a
 * replicated shard by hand). Every call asserts with Check: call them
 * from a test.
 */
#ifndef ZT_REPLSET_H
#define ZT_REPLSET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "zeps.pb-c.h"

typedef struct zt_rset {
    int shard; /* which shard of the cluster file these replicas are (0 unless
                  zt_rset_write_shards) */
    char dir[256], conf[320];
    char conf0[340]; /* replica 0's own cluster file, when not "" */
    char ep[2][64];
    pid_t pid[2];
    void *zctx;
} zt_rset;

/* Monotonic seconds, and a nap. */
double zt_now_s(void);
void zt_sleep_ms(int ms);

/* Write rs->conf: one shard, replicas at rs->ep, ZooKeeper `hosts`, the
 * cluster's name in it, `session_ms`, and `extra` lines inside `cluster`
 * (workers, consistency...). The first call (rs zeroed) makes the folder
 * (a scratch dir named `tag`), the endpoints and a ZeroMQ context; later
 * calls rewrite the file with the same endpoints. */
void zt_rset_write(zt_rset *rs, const char *tag, const char *hosts, const char *name,
                   int session_ms, const char *extra);

/* Shards 0..n-1 of two replicas each in one cluster file (n <= 4), as
 * zt_rset_write: rs[k] is shard k, every rs[k] shares rs[0]'s folder and
 * file (rs[] zeroed on the first call; each has a ZeroMQ context). */
void zt_rset_write_shards(zt_rset *rs, int n, const char *tag, const char *hosts, const char *name,
                          int session_ms, const char *extra);

/* Start replica r (its log: <dir>/replica-<r>.log for shard 0, else
 * <dir>/replica-<shard>.<r>.log; appended to). */
void zt_rset_start(zt_rset *rs, int r);

/* Whether replica r (without snapshot_dir) has its state-transfer folder
 * in $TMPDIR: only while a transfer runs. */
bool zt_rset_transfer_dir_left(const zt_rset *rs, int r);

/* Send `sig` to replica r and wait for it (15 s); stopped by another
 * signal than SIGKILL it must exit 0 and leave no transfer folder. */
void zt_rset_kill(zt_rset *rs, int r, int sig);

/* SIGTERM every replica still running, wait, end the context. */
void zt_rset_stop(zt_rset *rs);

/* Replica r's STATS reply (free with zeps__header__free_unpacked), NULL
 * if it did not answer. */
Zeps__Header *zt_rset_stats(zt_rset *rs, int r);

/* The clock worker `rank` is at as replica r holds it (its STATS; -1: the
 * worker is not listed). */
int64_t zt_rset_worker_clock(zt_rset *rs, int r, uint32_t rank);

/* The replica that says it is primary now (abort if none), and the
 * epoch replica r says. */
int zt_rset_primary(zt_rset *rs);
uint64_t zt_rset_epoch(zt_rset *rs, int r);

/* Wait until replica r says `role` at `epoch` with `in_sync` replicas in
 * the in-sync set (-1: any); the seconds it took, or abort. */
double zt_rset_wait(zt_rset *rs, int r, const char *role, uint64_t epoch, int in_sync, double secs);

/* Replica 0 primary at epoch 1, then replica 1 started and in sync. */
void zt_rset_up(zt_rset *rs);

#endif
