/*
 * ctr_metrics.c - logloss, AUC and accuracy of CTR predictions.
 *
 * AUC is the rank-sum (Mann-Whitney U) statistic: sort the scores once,
 * give each run of equal scores its mean rank, and sum the ranks of the
 * positives. That is exact with ties and O(n log n), which matters for
 * held-out sets of millions of examples; tests compare it with the
 * quadratic pair count.
 */
#include "ctr_metrics.h"

#include <math.h>
#include <stdlib.h>

#include "alloc.h"

double zp_ctr_metrics_logloss(const float *logit, const float *label, size_t n)
{
    if (n == 0)
        return NAN;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double z = logit[i];
        /* -log sigmoid(z) = log(1 + e^-z) = softplus(-z); for y = 0 the
         * loss is softplus(z). softplus(x) = max(x, 0) + log1p(e^-|x|). */
        double x = label[i] > 0.5f ? -z : z;
        sum += fmax(x, 0.0) + log1p(exp(-fabs(x)));
    }
    return sum / (double)n;
}

typedef struct scored {
    float score;
    float label;
} scored;

static int by_score(const void *a, const void *b)
{
    float x = ((const scored *)a)->score, y = ((const scored *)b)->score;
    return (x > y) - (x < y);
}

double zp_ctr_metrics_auc(const float *score, const float *label, size_t n)
{
    scored *s = zp_alloc((n ? n : 1) * sizeof(*s));
    size_t npos = 0;
    for (size_t i = 0; i < n; i++) {
        s[i].score = score[i];
        s[i].label = label[i];
        npos += label[i] > 0.5f;
    }
    size_t nneg = n - npos;
    if (npos == 0 || nneg == 0) {
        free(s);
        return NAN;
    }
    qsort(s, n, sizeof(*s), by_score);
    double rank_sum = 0; /* sum of the (1-based, tie-averaged) ranks of positives */
    for (size_t i = 0; i < n;) {
        size_t j = i;
        size_t pos = 0;
        while (j < n && s[j].score == s[i].score) {
            pos += s[j].label > 0.5f;
            j++;
        }
        /* ranks i+1 .. j share their mean */
        rank_sum += (double)pos * ((double)(i + 1) + (double)j) / 2.0;
        i = j;
    }
    free(s);
    double u = rank_sum - (double)npos * ((double)npos + 1) / 2.0;
    return u / ((double)npos * (double)nneg);
}

double zp_ctr_metrics_accuracy(const float *logit, const float *label, size_t n)
{
    if (n == 0)
        return NAN;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += (logit[i] > 0) == (label[i] > 0.5f);
    return (double)ok / (double)n;
}
