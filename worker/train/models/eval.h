/*
 * eval.h - the result of evaluating a model (zp_eval): what every model
 * returns and the data readers that evaluate for them (mnist.h) fill, on
 * its own so that the readers need nothing else of the models.
 */
#ifndef ZP_EVAL_H
#define ZP_EVAL_H

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

#endif
