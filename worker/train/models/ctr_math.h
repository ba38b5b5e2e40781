/*
 * ctr_math.h - the ctr model's mathematics: logistic regression over
 * sparse ids plus a factorization machine over their embeddings plus a
 * linear term over the dense features.
 *
 *   z = b + sum_j u_j x_j                          dense part (a dense table)
 *     + sum_i w_i a_i                              linear part (column 0 of a row)
 *     + 1/2 sum_d [(sum_i v_id a_i)^2 - sum_i v_id^2 a_i^2]   FM (columns 1..D)
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
 *   rows[p * (1 + dim) ..]: the row of position p, its linear weight w_i
 *   then its embedding v_i (one sparse table with a lead column);
 *   dw[0..ndense): dense weights, dw[ndense]: the intercept.
 * Writes each example's logit to logit (if not NULL). If grows is not NULL,
 * writes the gradient of the MEAN loss over the batch: gdense (ndense + 1)
 * as it is, grows per position, laid out as rows (the caller or the server
 * sums positions of one id), times row_scale (nb gives the gradient of the
 * summed loss, in the same pass). Returns the mean logloss. */
double zp_ctr_math_pass(const zp_ctr_data *d, const size_t *ex, size_t nb, uint32_t dim,
                        const float *rows, const float *dw, float *logit, float *grows,
                        double row_scale, float *gdense);

#endif
