/*
 * ctr_metrics.h - the figures a click-through-rate model is judged by:
 * logloss and ROC AUC of predicted logits against 0/1 labels.
 *
 * Shared by the training loop (held-out evaluation), the data generator
 * (the ground truth's own figures) and the tests, so every number in a
 * report is computed by the same code.
 */
#ifndef ZP_CTR_METRICS_H
#define ZP_CTR_METRICS_H

#include <math.h>
#include <stddef.h>

/* Mean binary cross-entropy of sigmoid(logit[i]) against label[i] (0 or 1),
 * computed from the logits in a form that neither overflows nor takes
 * log(0). NAN for n == 0. */
double zp_ctr_metrics_logloss(const float *logit, const float *label, size_t n);

/* ROC AUC: the probability that a random positive example scores above a
 * random negative one, ties counting one half. Sorts a copy of the scores
 * (O(n log n)); tied scores get their average rank. NAN when the labels are
 * all 0 or all 1. Labels are 0 or 1 (anything > 0.5 is a positive). */
double zp_ctr_metrics_auc(const float *score, const float *label, size_t n);

/* Share of examples whose logit has the label's sign (logit > 0 <=> 1). */
double zp_ctr_metrics_accuracy(const float *logit, const float *label, size_t n);

/* The logistic function, written to be exact at both tails. */
static inline double zp_sigmoid(double z)
{
    if (z >= 0)
        return 1.0 / (1.0 + exp(-z));
    double e = exp(z);
    return e / (1.0 + e);
}

#endif
