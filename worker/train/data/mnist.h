/*
 * mnist.h - data for the built-in models: the IDX reader for (Fashion-)MNIST,
 * each worker's partition of the training set and its per-epoch minibatches,
 * the softmax cross-entropy both classifiers share, and the small seeded
 * random generator every model uses.
 *
 * The softmax and mlp models differ only in their forward/backward pass, so
 * everything about examples lives here once: which examples a worker owns
 * (a seeded permutation of the whole training set cut into num_workers
 * contiguous blocks), the order it visits them in (reshuffled every epoch from
 * (seed, rank, epoch) so that grad(step) depends only on step), and how the
 * test set is walked for evaluate(). Nothing here uses threads or global state:
 * the same config, rank and step always give the same bytes.
 */
#ifndef ZP_MNIST_H
#define ZP_MNIST_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "eval.h"

#define ZP_MNIST_PIXELS     784 /* 28 x 28 */
#define ZP_MNIST_CLASSES    10
#define ZP_MNIST_TRAIN      60000
#define ZP_MNIST_EVAL_CHUNK 500 /* test examples per forward pass in evaluate() */

/* ---- IDX files -------------------------------------------------------------- */

/* A labelled image set in memory: n examples of dim floats in [0, 1], row
 * after row (x[i*dim .. (i+1)*dim)), and n labels. A plain data holder, so
 * its fields are public. */
typedef struct zp_dataset {
    int n;
    int dim; /* rows * cols */
    int rows, cols;
    float *x;
    uint8_t *y;
} zp_dataset;

/* Read a gzipped IDX image file (magic 0x00000803) and label file (magic
 * 0x00000801) into *ds. If keep is non-NULL only examples keep[0..nkeep) are
 * kept, in that order (indices must be < the file's count); otherwise all.
 * Checks magics, that the counts agree, sizes, labels < ZP_MNIST_CLASSES and
 * short reads. Returns 0, or ZEPS_EDATA (ZEPS_ENOMEM) with a message naming
 * the file in err; a missing file's message says which package provides it.
 * On success *ds owns its buffers (free with zp_mnist_dataset_fini); on error *ds is
 * left empty. */
int zp_mnist_read(zp_dataset *ds, const char *images_path, const char *labels_path,
                  const uint32_t *keep, int nkeep, char *err, size_t errlen);

/* Free the buffers of *ds and zero it; tolerates an empty *ds. */
void zp_mnist_dataset_fini(zp_dataset *ds);

/* ---- partitions and minibatches --------------------------------------------- */

/* The training examples worker `rank` of `num_workers` owns: a permutation
 * of 0..total-1 seeded from `seed`, cut to its first n, of which the worker
 * takes the contiguous block [rank*n/N, (rank+1)*n/N). Writes the block to
 * out (room for n / num_workers + 1 entries) and returns its length. */
int zp_mnist_partition(uint64_t seed, int total, int n, int rank, int num_workers, uint32_t *out);

/* One worker's training partition, test set and minibatch sampler. */
typedef struct zp_mnist_data zp_mnist_data;

/* Load the training partition and the whole test set from cfg->data_dir
 * (train-* and t10k-* files), with cfg->seed, cfg->batch_size and
 * cfg->max_train_examples. Returns 0 with *out owned by the caller, or a
 * zeps_err with a message in err. */
int zp_mnist_data_new(zp_mnist_data **out, const zp_config *cfg, int rank, int num_workers,
                      char *err, size_t errlen);
void zp_mnist_data_destroy(zp_mnist_data **dp);

/* Minibatch size, steps per epoch (partition / batch, at least 1) and the
 * number of training examples this worker owns. */
int zp_mnist_data_batch_size(const zp_mnist_data *d);
int zp_mnist_data_steps(const zp_mnist_data *d);
int zp_mnist_data_part_size(const zp_mnist_data *d);

/* The minibatch of global step `step`: batch_size examples, consecutive in
 * this epoch's order of the partition (wrapping if the partition is smaller
 * than a batch). *x and *y point into a buffer of d that the next call
 * overwrites. */
void zp_mnist_data_batch(zp_mnist_data *d, int64_t step, const float **x, const uint8_t **y);

/* Softmax cross-entropy over ZP_MNIST_CLASSES classes for n rows of logits.
 * Returns the SUM of the n losses (in double). If dlogits is non-NULL writes
 * scale * (softmax - onehot) into it (may alias logits). If correct is
 * non-NULL adds the number of rows whose argmax equals the label. */
double zp_mnist_xent(const float *logits, const uint8_t *y, int n, float scale, float *dlogits,
                     int *correct);

/* A model's forward pass for evaluation: write n rows of ZP_MNIST_CLASSES
 * logits for the n examples x (n <= ZP_MNIST_EVAL_CHUNK) at parameters w. */
typedef void (*zp_mnist_forward_fn)(void *ctx, float *const *w, const float *x, int n,
                                    float *logits);

/* Walk the whole test set in chunks through fwd and fill *out with the mean
 * loss and accuracy (distance fields 0). Returns 0. */
int zp_mnist_evaluate(zp_mnist_data *d, zp_mnist_forward_fn fwd, void *ctx, float *const *w,
                      zp_eval *out);

#endif
