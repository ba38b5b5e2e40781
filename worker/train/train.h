/*
 * train.h - the training loop of zeps-worker (train.c): a model (model.h)
 * driven through the client library (zeps.h); its injected delays
 * (delay.c) and its result (result.c).
 */
#ifndef ZP_TRAIN_H
#define ZP_TRAIN_H

#include <stdint.h>

#include "config.h"
#include "zeps.h"
#include "model.h"

/* One point of the convergence curve: rank 0's evaluation of the parameters
 * it pulled for step `step`. accuracy is NAN for quadratic; distance and
 * rel_distance are NAN for classifiers (as zp_eval). */
typedef struct zp_curve_point {
    int64_t step;
    double loss;
    double rel_distance;
    double distance;
    double accuracy;
    uint64_t version; /* updates applied to the first table's slice on shard 0 when pulled */
    uint64_t bytes_out, bytes_in; /* payload bytes this worker pushed / pulled so far (wire) */
    double t_s;                   /* seconds since training started */
} zp_curve_point;

/* A growable array of curve points; {0} is an empty curve. */
typedef struct zp_curve {
    zp_curve_point *points;
    size_t n, cap;
} zp_curve;

typedef struct zp_train_result {
    int rank;
    int epochs;
    int64_t iterations;
    int64_t examples;
    double wall_s;    /* from the first pull to the end of the last push */
    double compute_s; /* gradient computation and injected delays */
    double comm_s;    /* blocked on the parameter servers */
    double eval_s;    /* evaluations (rank 0) */
    zp_eval final;    /* rank 0: evaluation of the final parameters */
    int evaluated;    /* final is valid */
    int diverged;     /* stopped: the loss became non-finite or exceeded 1e30 */
    int stopped;      /* stopped early by zp_train_request_stop (a signal) */
    int64_t diverged_step;
    int reached_target;     /* rank 0: a curve point reached training.target_accuracy or
                               target_rel_distance */
    int64_t target_step;    /* the step of that curve point */
    int finished;           /* another worker reached the target (a pull answered EFINISHED) */
    int64_t finished_step;  /* the step whose pull was answered so: not taken */
    zp_curve curve;         /* rank 0 with eval_every_steps > 0; owned by the result */
    zeps_client_stats comm; /* the client's byte counters at the end */
    uint64_t pulled_in_place; /* dense pull bytes the model read where they were received */
    uint64_t pulled_copied;   /* dense pull bytes copied into the worker's buffers */
    int has_auc;            /* the model reports AUC (final.auc); the JSON then has final_auc */
    int started;            /* the model was made and every shard answered HELLO: an error
                               after this is a failure while training, not at start-up */
} zp_train_result;

/* Train worker `rank` of the cluster in cfg (read from cfg->path). Progress
 * goes to stderr through the log. Returns 0 or a zeps_err; *out is filled
 * either way, and the caller releases it with zp_result_fini. */
int zp_train_run(const zp_config *cfg, int rank, zp_train_result *out);

/* Free what a result owns (its curve); the struct itself stays the caller's.
 * Safe on a zeroed result and twice in a row. */
void zp_result_fini(zp_train_result *r);

/* Ask a running zp_train_run to stop at its next step (it then returns
 * ZEPS_ECLOSED with what it has). Async-signal-safe: only sets a flag. */
void zp_train_request_stop(void);

/* Whether zp_train_run has started talking to the shards (its first HELLO):
 * before that a stop has nothing to tell anyone and may end the process at
 * once. Async-signal-safe. */
int zp_train_talking(void);

/* Write a result as JSON to `path` (flat keys, see docs/operations.md, then
 * "curve": [[step, loss, rel_distance, distance, accuracy, version], ...], with null
 * for a value that does not apply). */
int zp_result_write_json(const zp_config *cfg, const zp_train_result *r, const char *path);

/* The injected compute delay, in ms, of worker `rank` at step `step`: from
 * delay_dist (fixed: delay_ms; uniform: delay_ms + U[0, delay_jitter_ms);
 * lognormal: delay_ms * exp(delay_sigma * N(0,1))), times slow_factor if
 * rank is one of slow_ranks. A pure function of (cfg, rank, step): its
 * random draw comes from a generator seeded with (seed, rank, step), so it
 * does not depend on the steps taken before. Any thread. */
double zp_delay_ms(const zp_config *cfg, int rank, int64_t step);

/* Sleep for step `step`'s injected compute delay (zp_delay_ms);
 * retried across signals. */
void zp_delay_inject(const zp_config *cfg, int rank, int64_t step);

/* Log once what delay worker `rank` injects, if any. */
void zp_delay_log(const zp_config *cfg, int rank);

/* Whether `rank` records a curve point at step `step`: rank 0 only, with
 * eval_every_steps > 0, at step 0 and every eval_every_steps steps after. */
int zp_train_curve_due(const zp_config *cfg, int rank, int64_t step);

/* Append the evaluation `e` at `step` to curve c (growing it; aborts on out
 * of memory like every small allocation of zeps). */
void zp_result_curve_add(zp_curve *c, int64_t step, uint64_t version, const zp_eval *e);

#endif
