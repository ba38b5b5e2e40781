/*
 * gate.h - a job's worker processes held by the test at a clock, so that
 * the test changes the cluster (moves, adds, removes) while the job runs
 * and every run does the same clocks (test_bsp_move, test_dense_bsp). A
 * file `limit` in the cluster's folder holds the clock the workers may
 * not start; the test raises it and waits for the slowest worker's clock
 * on shard 0 (STATS). Every call asserts with Check: call them from a
 * test, or (zt_gate_pass) from a worker it forked.
 */
#ifndef ZT_GATE_H
#define ZT_GATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "zeps.h"

typedef struct zt_gate {
    int workers;   /* the job's worker processes, ranks 0.. */
    int64_t steps; /* its clocks: the limit never passes them */
    int64_t ahead; /* clocks the workers may run past the test's last look */
} zt_gate;

/* A worker about to start clock k: waits (up to 120 s) until the limit,
 * read anew at every clock (a test may lower it to hold the workers), is
 * past k; *limit keeps the last limit read. */
void zt_gate_pass(const zt_cluster *cl, int64_t k, int *limit);

/* Let the workers start clocks below k (at most g->steps). */
void zt_gate_write(const zt_gate *g, const zt_cluster *cl, int64_t k);

/* The slowest worker's clock on shard `shard`, -1 before all g->workers
 * said HELLO. */
int64_t zt_gate_min_clock(const zt_gate *g, zeps_client *tool, int shard);

/* Let the workers run g->ahead clocks past where they are now (or past
 * at_least), and wait until the slowest ended clock at_least - 1 (-1:
 * only let them run). */
void zt_gate_wait_clock(const zt_gate *g, const zt_cluster *cl, zeps_client *tool,
                        int64_t at_least);

/* Fork g->workers processes running worker(cl, w, slow), each ending
 * with _exit; their pids into pids. */
void zt_gate_start(const zt_gate *g, const zt_cluster *cl, pid_t *pids,
                   void (*worker)(const zt_cluster *cl, int w, bool slow), bool slow);

/* A bsp cluster of two shards for g->workers workers started into *cl
 * (the caller stops it: zt_cluster_stop), and zt_gate_start on it. */
void zt_gate_up(const zt_gate *g, zt_cluster *cl, pid_t *pids,
                void (*worker)(const zt_cluster *cl, int w, bool slow), bool slow);

/* zt_gate_wait_clock until the slowest worker ended n more clocks than
 * it has now. */
void zt_gate_clocks(const zt_gate *g, const zt_cluster *cl, zeps_client *tool, int64_t n);

/* Let the workers run to the end and wait for each to exit 0 (120 s). */
void zt_gate_end(const zt_gate *g, const zt_cluster *cl, const pid_t *pids);

/* Check that every worker still runs and the slowest has not reached the
 * job's last clock (what the test did came mid-job), then zt_gate_end. */
void zt_gate_end_mid_job(const zt_gate *g, const zt_cluster *cl, zeps_client *tool,
                         const pid_t *pids);

#endif
