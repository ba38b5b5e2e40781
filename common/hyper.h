/*
 * hyper.h - an optimizer's hyper-parameters as a table declares them.
 *
 * A plain record shared by the server's optimizers (server/optim/), which
 * read it, and the snapshot format (common/snapshot/), which stores it; it
 * lives here so that the snapshot format needs no server code. Values are
 * f32, as the server keeps them; zp_optim_validate (server/optim/optim.h)
 * says which fields each optimizer reads.
 */
#ifndef ZP_HYPER_H
#define ZP_HYPER_H

typedef struct zp_hyper {
    float lr;
    float momentum;     /* momentum mu */
    float beta1, beta2; /* adam */
    float eps;          /* adagrad, adam */
    float weight_decay; /* L2: g += wd * w before the update */
} zp_hyper;

#endif
