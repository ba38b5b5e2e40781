/*
 * ctr_local.h - the ctr model trained in one process, without servers: the
 * rows (linear weight, then embedding, as in ctr_rows) in a local hash map, the same per-position
 * passes (worker/train/models/ctr_math.c) and Adagrad applied once per distinct id per
 * batch with the summed gradient, as a zeps server does. The tests use it
 * to show that the model and the generated data are sound on their own.
 */
#ifndef ZT_CTR_LOCAL_H
#define ZT_CTR_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "ctr_data.h"

typedef struct zt_ctr_local_opts {
    uint32_t dim; /* embedding dimension */
    int epochs;
    size_t batch;
    double lr_sparse;  /* Adagrad step of the linear sparse table */
    double lr_emb;     /* ... and of the embedding table */
    double lr_dense;   /* Adagrad step of the dense table */
    double init_scale; /* embeddings start N(0, init_scale^2); linear rows at 0 */
    double l2;         /* weight decay added to the sparse gradients */
    uint64_t seed;
} zt_ctr_local_opts;

typedef struct zt_ctr_local_result {
    double auc, logloss, accuracy;
    size_t rows; /* distinct ids touched */
    double seconds;
} zt_ctr_local_result;

/* Train on `train`, evaluate on `test`. Returns 0. */
int zt_ctr_local_train(const zp_ctr_data *train, const zp_ctr_data *test,
                       const zt_ctr_local_opts *o, zt_ctr_local_result *out);

#endif
