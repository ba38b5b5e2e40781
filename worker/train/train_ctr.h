/*
 * train_ctr.h - the training loop of the ctr model (sparse tables), which
 * zp_train_run hands over to when training.model is "ctr".
 */
#ifndef ZP_TRAIN_CTR_H
#define ZP_TRAIN_CTR_H

#include "config.h"
#include "train.h"

/* Train worker `rank` on the ctr model in cfg (training.ctr). Same contract
 * as zp_train_run: 0 or a zeps_err; *out filled either way; rank 0's
 * out->final holds the test logloss (loss), accuracy and AUC. Stops with
 * ZEPS_ECLOSED once *stop is nonzero (a signal handler may set it). */
int zp_train_ctr_run(const zp_config *cfg, int rank, zp_train_result *out, volatile int *stop);

#endif
