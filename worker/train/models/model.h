/*
 * model.h - built-in training models of zeps-worker, as an ops table.
 *
 * A model owns its data partition and computes gradients; it does not talk to
 * the network. Its parameters are a small list of dense tables (zp_table_def)
 * that the worker declares on the servers; the worker pulls them into one
 * float buffer per table, calls grad(), and pushes the gradient buffers back.
 * Adding a model is adding one file with a `const zp_model_ops` and one line
 * in model.c.
 */
#ifndef ZP_MODEL_H
#define ZP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define ZP_MODEL_MAX_TABLES 8

typedef struct zp_model zp_model; /* each model defines its own struct */

/* One parameter table of a model. init is "zeros" | "constant" | "uniform" |
 * "normal" with init_scale as in zeps_table_spec. */
typedef struct zp_table_def {
    char name[ZP_NAME_MAX];
    uint64_t length;
    const char *init;
    double init_scale;
} zp_table_def;

/* Result of an evaluation. For classifiers: accuracy and loss on the test
 * set. For quadratic: loss = f(x), distance = ||x - x*||, rel_distance =
 * ||x - x*|| / ||x*||; accuracy = NAN. */
typedef struct zp_eval {
    double loss;
    double accuracy;
    double distance;
    double rel_distance;
    int examples;
    double auc; /* ctr: ROC AUC on the test set (others leave it 0) */
} zp_eval;

typedef struct zp_model_ops {
    const char *name;

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
     * Returns the mean minibatch loss. Deterministic for the same inputs. */
    double (*grad)(zp_model *m, float *const *w, float *const *g, int64_t step);

    /* Evaluate parameters w on the test set (or against x* for quadratic). */
    int (*evaluate)(zp_model *m, float *const *w, zp_eval *out);
} zp_model_ops;

/* Look up a model by name; NULL if unknown. */
const zp_model_ops *zp_model_find(const char *name);

/* Comma-separated list of the model names, for messages. */
const char *zp_model_names(void);

extern const zp_model_ops zp_model_quadratic;
extern const zp_model_ops zp_model_softmax;
extern const zp_model_ops zp_model_mlp;

#endif
