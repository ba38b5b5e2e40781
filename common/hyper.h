/*
 * hyper.h - an optimizer's hyper-parameters as a table declares them.
 *
 * A plain record shared by the server's optimizers (server/optim/), which
 * read it, and the snapshot format (common/snapshot/), which stores the
 * first six fields of dense tables; it lives here so that the snapshot
 * format needs no server code. Values are f32, as declared: the row kernels
 * widen them to double, the slice kernels use them as they are.
 * zp_optim_validate (server/optim/optim.h) says which fields each optimizer
 * reads.
 */
#ifndef ZP_HYPER_H
#define ZP_HYPER_H

typedef struct zp_hyper {
    float lr;
    float momentum;     /* momentum mu */
    float beta1, beta2; /* adam */
    float eps;          /* adagrad, adam */
    float weight_decay; /* L2: g += wd * w before the update */
    float l1, l2;       /* ftrl (sparse rows only) */
    float ftrl_beta;    /* ftrl */
} zp_hyper;

/* Replace zero momentum, beta1, beta2 and eps with 0.9, 0.9, 0.999 and
 * 1e-8; the other fields are left alone. (So a declaration cannot ask for
 * exactly 0 of these.) Thread-safe. */
void zp_hyper_defaults(zp_hyper *h);

#endif
