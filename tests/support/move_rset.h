/*
 * move_rset.h - two shards of two replicas each, with a real ZooKeeper,
 * for the tests of live moves between replicated shards (move_rset.c):
 * test_move_replicas and test_zkmap. Every call asserts with Check: call
 * them from a test.
 */
#ifndef ZT_MOVE_RSET_H
#define ZT_MOVE_RSET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "move_fixture.h"
#include "replset.h"
#include "slotmap.h"
#include "zkserver.h"

#define ZT_RCL_SESSION_MS 2000
#define ZT_RCL_WORKERS    3

typedef struct zt_rcl {
    zt_zk zk;
    zt_rset rs[2];
    zt_cluster cl;                 /* the cluster file and folder, for move_fixture.h */
    pid_t workers[ZT_RCL_WORKERS]; /* zt_rcl_up_pushing's worker processes */
} zt_rcl;

/* cl's endpoint of shard k (raw requests go there): replica r's. */
void zt_rcl_endpoint(zt_rcl *c, int k, int r);

/* Two shards of two replicas, each replica 0 primary at epoch 1 and its
 * backup in sync; `extra` lines in the cluster group. */
void zt_rcl_up(zt_rcl *c, const char *tag, const char *extra);

/* zt_rcl_up (no extra lines) with the ZT_RCL_WORKERS worker processes of
 * zt_move_workers_start pushing, their pids in c->workers: back once
 * shard 0's table has 3 pushes a worker. The caller ends them
 * (zt_rcl_workers_end). */
void zt_rcl_up_pushing(zt_rcl *c, const char *tag);

/* Every worker of zt_rcl_up_pushing still runs. */
void zt_rcl_workers_run(const zt_rcl *c);

/* End the workers of zt_rcl_up_pushing (zt_move_workers_end), print
 * "<sum> pushes answered through <what>" and check the counter oracle. */
void zt_rcl_workers_end(const zt_rcl *c, const char *what);

/* Stop every replica and the ZooKeeper. */
void zt_rcl_down(zt_rcl *c);

/* Kill shard k's primary (replica r) with -9 and wait until the other
 * replica is primary at the next epoch. */
void zt_rcl_fail_over(zt_rcl *c, int k);

/* Start shard k's dead replica again and wait until it is in sync. */
void zt_rcl_back_to_two(zt_rcl *c, int k);

/* The map of shard 0's slots among `set` given to shard 1, one epoch up
 * from the default map of 2, into *next; the ids of ids[0..n) it moves. */
uint64_t zt_rcl_moved_map(const char *set, const uint64_t *ids, size_t n, zp_slotmap **next);

/* Every shard's primary holds the map of epoch `epoch` and exactly the
 * rows of ids[0..n) that `map` gives it. */
void zt_rcl_check_placed(const zt_rcl *c, const uint64_t *ids, size_t n, const zp_slotmap *map,
                         uint64_t epoch);

/* zt_rcl_check_placed for the oracle's NIDS ids (zt_move_ids, seed 0):
 * under the default map of 2 at epoch 0 if `moved` is NULL, else under
 * zt_rcl_moved_map(moved) at epoch 1 (which must move some of them). */
void zt_rcl_check_oracle_placed(const zt_rcl *c, const char *moved);

/* Wait until shard 0's table has at least n pushes. */
void zt_rcl_wait_pushes(const zt_rcl *c, uint64_t n);

/* Every worker waits on a parked push: neither shard applies one in
 * 300 ms (each worker's push spans both shards and blocks until every
 * piece is answered). */
void zt_rcl_check_all_parked(const zt_rcl *c);

/* Wait until shard k's primary holds exactly the rows of ids[0..n) that
 * map d gives it, within secs. */
void zt_rcl_wait_owned(const zt_rcl *c, int k, const uint64_t *ids, size_t n, const zp_slotmap *d,
                       double secs);

#endif
