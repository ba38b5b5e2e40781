/*
 * bsp_ref.h - a deterministic BSP training job for tests: worker processes
 * that train one table through real servers, and the same training done in
 * one process as the reference their result must equal bit for bit.
 */
#ifndef ZT_BSP_REF_H
#define ZT_BSP_REF_H

#include <stdint.h>

#include "harness.h"
#include "zeps.h"

#define ZT_BSP_LEN 1003 /* elements of the table */

/* The table every worker declares (adam, seeded normal init). */
extern const zeps_table_spec zt_bsp_spec;

/* In a forked child: train as rank r for `steps` clocks, sleeping a random
 * 0-3 ms before each push so pushes arrive in a different order each run.
 * Exits 0 on success, 10+ on failure; never returns. */
void zt_bsp_worker(const zt_cluster *cl, int r, int steps) __attribute__((noreturn));

/* Fork `n` such workers and wait for them; returns how many failed. */
int zt_bsp_run_workers(const zt_cluster *cl, int n, int steps);

/* Worker r's gradient of clock k from the parameters w it pulled. */
void zt_bsp_gradient(const float *w, float *g, int r, int64_t k);

/* Worker r's part of clock k on its client c: pull at k, push the gradient
 * of what it pulled, CLOCK k. Returns 0 or the first call's zeps_err. */
int zt_bsp_worker_step(zeps_client *c, int r, uint32_t t, int64_t k);

/* Clock k of the job for n clients of ranks 0..n-1 in this process (each
 * with table t declared): every client pulls at k, then each pushes its
 * gradient (all in flight at once, as separate processes would send
 * them) and says CLOCK k. Returns 0 or the first call's zeps_err. */
int zt_bsp_step(zeps_client *const *cs, int n, uint32_t t, int64_t k);

/* The parameters after `steps` clocks of n workers, in one process: the
 * per-worker gradients summed in rank order, averaged, applied by the same
 * optimizer code. */
void zt_bsp_reference(int nworkers, int steps, float *w);

#endif
