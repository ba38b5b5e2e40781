/*
 * train.h - the training loop of zeps-worker: a model (model.h) driven
 * through the client library (zeps.h).
 */
#ifndef ZP_TRAIN_H
#define ZP_TRAIN_H

#include <stdint.h>

#include "config.h"
#include "model.h"

typedef struct zp_train_result {
    int rank;
    int epochs;
    int64_t iterations;
    int64_t examples;
    double wall_s;     /* from the first pull to the end of the last push */
    double compute_s;  /* gradient computation and injected delays */
    double comm_s;     /* blocked on the parameter servers */
    double eval_s;     /* evaluations (rank 0) */
    zp_eval final;     /* rank 0: evaluation of the final parameters */
    int evaluated;     /* final is valid */
} zp_train_result;

/* Train worker `rank` of the cluster in cfg (read from cfg->path). Progress
 * goes to stderr through the log. Returns 0 or a zeps_err. */
int zp_train_run(const zp_config *cfg, int rank, zp_train_result *out);

/* Write a result as JSON to `path` (flat keys, see docs/operations.md). */
int zp_train_write_json(const zp_config *cfg, const zp_train_result *r, const char *path);

#endif
