/*
 * optim.h - server-side optimizers as an ops table.
 *
 * An optimizer updates a contiguous slice of parameters from a gradient of the
 * same length, keeping `state_per_param` floats of state per parameter (e.g.
 * Adam's m and v) in one buffer laid out as state_per_param consecutive
 * blocks of n floats. Dense vector work goes through OpenBLAS where it fits
 * (saxpy/sscal); the rest are plain loops the compiler vectorises.
 */
#ifndef ZP_OPTIM_H
#define ZP_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "hyper.h"

typedef struct zp_optim_ops {
    const char *name;
    int state_per_param; /* floats of state per parameter */

    /* Apply one update to w[0..n) with gradient g[0..n). State block k of
     * element i is state[k * stride + i] (stride >= n: a sub-range of a slice
     * passes the slice's length, so blocks keep their place). `step` is the
     * number of updates applied
     * before this one (Adam's bias correction uses step + 1). `scale`
     * multiplies the gradient first (1 for plain updates; 1/N for a BSP average,
     * a staleness weight later). g is read only. */
    void (*apply)(float *w, float *state, const float *g, size_t n, size_t stride,
                  const zp_hyper *h, uint64_t step, float scale);
} zp_optim_ops;

/* Look up by name ("sgd", "momentum", "adagrad", "adam"); NULL if unknown. */
const zp_optim_ops *zp_optim_find(const char *name);

/* Check hyper-parameters for the named optimizer: finite, lr > 0,
 * 0 <= momentum < 1, 0 <= beta < 1, eps > 0, weight_decay >= 0. Returns 0 or
 * ZEPS_EOPTIM with a message in err. */
int zp_optim_validate(const char *name, const zp_hyper *h, char *err, size_t errlen);

/* Fill in defaults for zero fields: momentum 0.9, beta1 0.9, beta2 0.999, eps 1e-8.
 * (So a declaration cannot ask for exactly 0 of these; validation checks only
 * the parameters the named optimizer reads.) */
void zp_hyper_defaults(zp_hyper *h);

#endif
