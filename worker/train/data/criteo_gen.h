/*
 * criteo_gen.h - a Criteo-format click log drawn from a hidden model.
 *
 * The real Criteo sets (Kaggle display advertising, 45M lines; the 1TB
 * click logs) cannot be downloaded here, so zeps ships a generator that
 * writes files in their format - label, 13 integer fields, 26 categorical
 * fields as 8-hex-digit strings, tab-separated, empty fields for missing
 * values - from a ground-truth model whose own scores are known. A trained
 * model can then be judged against the best achievable AUC, and against a
 * model that sees only the integer fields.
 *
 * The hidden model: per categorical field a vocabulary (sizes shaped like
 * the Kaggle set's, times a scale), values drawn Zipf(s) by rank, a weight
 * per (field, value) that shrinks for rare values (rare ids carry little
 * signal, as in real logs, and cannot be learnt from a few sightings
 * anyway), optional low-rank pairwise interactions between fields (what a
 * factorization machine can learn), and a linear term over log(1 + x) of
 * the integer fields. label ~ Bernoulli(sigmoid(logit)). Everything is a
 * function of --seed: example i of a split has its own generator, and the
 * weights are drawn from generators keyed by (field, rank).
 */
#ifndef ZP_CRITEO_GEN_H
#define ZP_CRITEO_GEN_H

#include <stddef.h>
#include <stdint.h>

#define ZP_CRITEO_NDENSE 13
#define ZP_CRITEO_NCAT   26

typedef struct zp_criteo_gen_opts {
    const char *out_dir;  /* writes train.txt, test.txt, truth.json here (created) */
    uint64_t train, test; /* examples per split */
    uint64_t seed;
    double zipf;              /* exponent s of the rank distribution, > 1 (1.1) */
    double scale;             /* vocabulary sizes times this (1.0 = Kaggle-like, up to 10M) */
    int interaction_rank;     /* rank of the pairwise term (0 = none) */
    double interaction_scale; /* std-dev of the interaction factors (0.05) */
    double bias;              /* the truth's intercept (-1.6: about 25% positives) */
    double rare_k0;           /* weights of rank k scale as 1/sqrt(1 + k/rare_k0) (100) */
    int progress;             /* report progress on stderr */
} zp_criteo_gen_opts;

/* Fill *o with the defaults above (out_dir NULL, 1M train, 100k test, seed 1). */
void zp_criteo_gen_defaults(zp_criteo_gen_opts *o);

/* What the generator measured; the same goes to truth.json. */
typedef struct zp_criteo_truth {
    uint64_t train, test;
    uint64_t distinct[ZP_CRITEO_NCAT]; /* distinct values seen per field (missing counts as one) */
    uint64_t distinct_total;
    uint64_t vocab[ZP_CRITEO_NCAT];
    double pos_rate_train, pos_rate_test;
    double truth_logloss, truth_auc; /* the hidden model on the test split */
    double dense_logloss,
        dense_auc; /* logistic regression on the 13 integer fields, fitted on train */
    double seconds;
} zp_criteo_truth;

/* Generate the data set. Returns 0, or ZEPS_EINVAL (bad options) / ZEPS_EIO
 * (a file could not be written) with a message in err. Files are written
 * under temporary names, fsynced and renamed, so a set that exists is
 * complete. */
int zp_criteo_gen_write(const zp_criteo_gen_opts *o, zp_criteo_truth *out, char *err,
                        size_t errlen);

#endif
