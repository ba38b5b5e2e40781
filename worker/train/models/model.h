/*
 * model.h - built-in training models of zeps-worker, as an ops table.
 *
 * A model owns its data partition and computes gradients; it does not talk to
 * the network. Its parameters are a small list of tables (zp_table_def) that
 * the training loop (train.c) declares on the servers and moves:
 *  - a model of dense tables only: the loop pulls each table whole (read in
 *    place, or copied into one float buffer: step.h), calls grad() and
 *    pushes the gradient buffers back;
 *    evaluate() scores the pulled buffers.
 *  - a model with sparse tables (dim > 0) also has the batch hooks: the loop
 *    asks batch_pick() which ids minibatch `step` reads, pulls those rows of
 *    every sparse table (one per position) and the dense tables whole, calls
 *    batch_grad() and pushes the per-position gradients (libzeps sums the
 *    positions of one id). Evaluating works the same way in chunks of the
 *    test set: eval_ids(), rows pulled, eval_chunk(), eval_finish().
 * Adding a model is adding one file with a `const zp_model_ops` and one line
 * in model.c.
 */
#ifndef ZP_MODEL_H
#define ZP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "eval.h"
#include "zeps.h"

#define ZP_MODEL_MAX_TABLES 18 /* mlp at depth 8: two per layer */

typedef struct zp_model zp_model;             /* each model defines its own struct */
typedef struct zp_model_batch zp_model_batch; /* sparse models: one minibatch */

/* One parameter table of a model. init is "zeros" | "constant" | "uniform" |
 * "normal" with init_scale as in zeps_table_spec. A dense table (dim 0) of
 * `length` takes its optimizer from the training section; a sparse table
 * (dim > 0, rows of dim values by id) is declared with `sparse` (the loop
 * fills in name, dim and seed). */
typedef struct zp_table_def {
    char name[ZP_NAME_MAX];
    uint64_t length;
    const char *init;
    double init_scale;
    uint32_t dim;
    zeps_sparse_spec sparse;
} zp_table_def;

typedef struct zp_model_ops {
    const char *name;
    int reports_auc; /* its evaluation fills zp_eval.auc (final_auc in the result) */

    /* Build the model for worker `rank` of `num_workers`: load or generate
     * data (its own partition of the training set; test set whole), from the
     * training section of cfg. On error returns a zeps_err and writes a message
     * into err. On success *out owns the model. */
    int (*create)(zp_model **out, const zp_config *cfg, int rank, int num_workers, char *err,
                  size_t errlen);
    void (*destroy)(zp_model **mp);

    /* Parameter tables, in a fixed order; returns how many (<= ZP_MODEL_MAX_TABLES). */
    int (*tables)(const zp_model *m, zp_table_def *defs);

    /* Iterations that make one epoch of this worker's partition. */
    int (*steps_per_epoch)(const zp_model *m);

    /* Examples processed by one call of grad() (for examples/s). */
    int (*batch_examples)(const zp_model *m);

    /* Gradient of the loss on minibatch `step` (0-based, global over epochs;
     * the model maps it into its partition, reshuffling every epoch from the
     * seed) at parameters w[t] (one buffer per table), written to g[t].
     * Returns the mean minibatch loss. Deterministic for the same inputs.
     * grad() and evaluate() read w and never write it: w[t] may be the
     * pulled values where ZeroMQ received them (step.h), valid for the call. */
    double (*grad)(zp_model *m, float *const *w, float *const *g, int64_t step);

    /* Evaluate parameters w on the test set (or against x* for quadratic). */
    int (*evaluate)(zp_model *m, float *const *w, zp_eval *out);

    /* --- models with sparse tables; NULL for dense-only models --- */

    /* A minibatch holder (the loop keeps two: one step's pushes are in flight
     * while the next one's pulls start); the caller owns it. */
    zp_model_batch *(*batch_new)(zp_model *m);
    void (*batch_free)(zp_model_batch **bp);

    /* Pick minibatch `step` (0-based, global over epochs) into b. *ids gets
     * the id of each of its *npos positions (owned by b, valid until the
     * next pick into b); returns the number of examples. */
    size_t (*batch_pick)(zp_model *m, zp_model_batch *b, int64_t step, const uint64_t **ids,
                         size_t *npos);

    /* Gradient of minibatch b: w[t] holds a dense table whole, or a sparse
     * table's rows, one per position of b; g[t] gets the gradient laid out
     * the same way. Returns the mean minibatch loss. */
    double (*batch_grad)(zp_model *m, zp_model_batch *b, float *const *w, float *const *g);

    /* Evaluation in chunks: the number of chunks; the ids of chunk k's
     * positions (owned by m, valid until the next call); its scoring at w
     * (laid out as for batch_grad); and, after every chunk, the result. */
    size_t (*eval_chunks)(const zp_model *m);
    void (*eval_ids)(zp_model *m, size_t k, const uint64_t **ids, size_t *npos);
    void (*eval_chunk)(zp_model *m, size_t k, float *const *w);
    int (*eval_finish)(zp_model *m, zp_eval *out);
} zp_model_ops;

/* Look up a model by name; NULL if unknown. */
const zp_model_ops *zp_model_find(const char *name);

/* Comma-separated list of the model names, for messages. */
const char *zp_model_names(void);

extern const zp_model_ops zp_quadratic_ops;
extern const zp_model_ops zp_softmax_ops;
extern const zp_model_ops zp_mlp_ops;
extern const zp_model_ops zp_ctr_ops;

#endif
