/*
 * step.h - the tables of a training run and the requests of one step
 * (step.c), for the loop in train.c. Internal to zeps-worker.
 */
#ifndef ZP_STEP_H
#define ZP_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "model.h"
#include "zeps.h"

/* Dense models: what one step holds while its requests are in flight. Two
 * alternate (slot[clock % 2]): step c's pushes are still in flight when
 * step c + 1's pulls start. */
typedef struct zp_step_slot {
    zeps_req *pulls[ZP_MODEL_MAX_TABLES];
    int view[ZP_MODEL_MAX_TABLES]; /* pulls[i] is a view pull */
} zp_step_slot;

typedef struct zp_trainer {
    const zp_config *cfg;
    int rank;
    zeps_client *client;
    const zp_model_ops *ops;
    zp_model *model;
    int sparse; /* the model has sparse tables (and the batch hooks) */
    int ntables;
    zp_table_def defs[ZP_MODEL_MAX_TABLES];
    uint32_t ids[ZP_MODEL_MAX_TABLES];
    float *w[ZP_MODEL_MAX_TABLES]; /* dense tables: the buffer copying pulls fill */
    /* Dense tables: what the model reads, w[i] or the values of view[i].
     * A table pulled as a view (by_view[i]: training.pull_views, no
     * compressed pull) that arrived in one part is read where ZeroMQ
     * received it: wr[i] points into view[i], which the trainer owns from
     * the wait of a pull to the start of the table's next pull (or
     * zp_step_fini), so it outlives every grad() and evaluate() of that
     * step. One that arrived in several parts (one per shard) is copied
     * into w[i], view[i] released at once, and by_view[i] cleared: the
     * models read each table as one contiguous matrix (sgemm over a split
     * K would sum in another order), so its later pulls are copying ones.
     * pulled_in_place / pulled_copied count the bytes of each. */
    float *wr[ZP_MODEL_MAX_TABLES];
    zeps_view *view[ZP_MODEL_MAX_TABLES];
    int by_view[ZP_MODEL_MAX_TABLES];
    uint64_t pulled_in_place, pulled_copied;
    float *g[ZP_MODEL_MAX_TABLES]; /* dense tables: the gradient */
    float *m[ZP_MODEL_MAX_TABLES]; /* worker_momentum: the velocity pushed instead of g */
    zp_step_slot slot[2];          /* dense models */
    /* sparse models: the steps go through a pipe (zeps.h, zeps_pipe) that owns
     * their batches, rows and gradients; the minibatch of each fed step is
     * one of nmb (prefetch + 2) in a ring, handed through the pipe as `user` */
    zeps_pipe *pipe;
    zeps_pipe_step *cur; /* the step being computed, between wait and push */
    struct zp_step_mb *mbs;
    int nmb;
    uint64_t nfed;
    int64_t total; /* steps of the run: none is fed past it */
    struct zp_wmetrics *metrics; /* the worker's metrics endpoint, or NULL (wmetrics.h) */
} zp_trainer;

/* A sparse model's minibatch of one fed step. */
typedef struct zp_step_mb {
    zp_model_batch *mb;
    size_t examples;
} zp_step_mb;

/* Declare the model's tables (dense ones with the configured codecs) and
 * allocate the buffers. Returns 0 or a zeps_err (logged). */
int zp_step_declare(zp_trainer *t);

/* Start the pulls of step `clock` (sparse models: pick its minibatch first,
 * and the next `prefetch` steps' too, after forgetting what was in flight;
 * t->total must be set). */
int zp_step_start(zp_trainer *t, int64_t clock);

/* Sparse models, after zp_step_push of step `clock`: pick the minibatch
 * that enters the pipe now (step clock + prefetch + 1, if the run has it)
 * and start its pulls as the pipe allows. A no-op for dense models, whose
 * zp_step_push starts the next pulls. */
int zp_step_feed(zp_trainer *t, int64_t clock);

/* Wait for step `clock`'s pulls; wait_all: for every pull still out. */
int zp_step_wait(zp_trainer *t, int64_t clock);
void zp_step_wait_all(zp_trainer *t);

/* The end of the steps: wait for every push still in flight and return the
 * first error (sparse models' pushes may be unanswered, max_inflight). */
int zp_step_drain(zp_trainer *t);

/* The gradient of step `clock` at what its pulls brought; returns the
 * minibatch loss and, in *examples, the examples it covered. */
double zp_step_grad(zp_trainer *t, int64_t clock, size_t *examples);

/* Push step `clock`'s gradients, say the clock is finished and (pull_next)
 * start step clock + 1's pulls, all in flight together; then wait for the
 * pushes and the clock. Messages to one shard keep their order, so the
 * pulls see this worker's own pushes. */
int zp_step_push(zp_trainer *t, int64_t clock, int pull_next);

/* How the dense tables' buffers stand when evaluating at a clock. */
typedef enum zp_step_eval {
    ZP_EVAL_PULLED,    /* step clock's pulls were waited for: evaluate them */
    ZP_EVAL_IN_FLIGHT, /* they are in flight: wait, evaluate, start them again */
    ZP_EVAL_PULL,      /* nothing is in flight: pull, then evaluate */
} zp_step_eval;

/* Evaluate the parameters as of `clock` into *out. A sparse model always
 * pulls what its test set needs into buffers of its own, leaving the step's
 * pulls alone. Returns 0 or a zeps_err. */
int zp_step_evaluate(zp_trainer *t, int64_t clock, zp_step_eval how, zp_eval *out);

/* Free every buffer and batch of t (not the client or the model). */
void zp_step_fini(zp_trainer *t);

#endif
