/*
 * ctr_math.h - the ctr model's mathematics: logistic regression over
 * sparse ids plus a factorization machine over their embeddings plus a
 * linear term over the dense features.
 *
 *   z = b + sum_j u_j x_j                          dense part (a dense table)
 *     + sum_i w_i a_i                              linear part (sparse, dim 1)
 *     + 1/2 sum_d [(sum_i v_id a_i)^2 - sum_i v_id^2 a_i^2]   FM (sparse, dim D)
 *   loss = logloss(sigmoid(z), y)
 *
 * i runs over the example's ids with weights a_i (1 for criteo), j over
 * its dense features. The FM term is the sum over pairs i < k of
 * <v_i, v_k> a_i a_k computed in O(n D) by the square-of-sums trick.
 *
 * The functions work on rows laid out per position: the ids of a batch of
 * examples concatenated in order (zp_ctr_math_batch_ids), row p of every table
 * for position p - exactly what zeps_sbatch pulls and what its push sums
 * back per distinct id. Nothing here talks to the network, so the tests
 * check the gradient by finite differences and train in-process with it.
 */
#ifndef ZP_CTR_MATH_H
#define ZP_CTR_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "ctr_data.h"

/* The positions of examples ex[0..nb) of d: writes their ids, in order,
 * into ids (room for zp_ctr_math_batch_positions) and returns how many. */
size_t zp_ctr_math_batch_positions(const zp_ctr_data *d, const size_t *ex, size_t nb);
size_t zp_ctr_math_batch_ids(const zp_ctr_data *d, const size_t *ex, size_t nb, uint64_t *ids);

/* Forward (and backward) pass over examples ex[0..nb) of d.
 *   lin[p], emb[p * dim ..]: rows of the linear and embedding tables for
 *   position p; dw[0..ndense): dense weights, dw[ndense]: the intercept.
 * Writes each example's logit to logit (if not NULL). If glin is not NULL,
 * writes the gradient of the MEAN loss over the batch: glin/gemb per
 * position (the caller or the server sums positions of one id), gdense
 * (ndense + 1). Returns the mean logloss. */
double zp_ctr_math_pass(const zp_ctr_data *d, const size_t *ex, size_t nb, uint32_t dim,
                        const float *lin, const float *emb, const float *dw, float *logit,
                        float *glin, float *gemb, float *gdense);

#endif
