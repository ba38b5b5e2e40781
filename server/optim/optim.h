/*
 * optim.h - the server's optimizers: one ops table per optimizer, serving
 * both dense slices and sparse rows.
 *
 * Each optimizer is one file (sgd.c, momentum.c, adagrad.c, adam.c,
 * ftrl.c) defining a `const zp_optim_ops`; optim.c holds the registry
 * (lookup by name), the checks of hyper-parameters and the lists of names.
 * Adding an optimizer is one file plus one line in optim.c's registry.
 *
 * Two kernels per optimizer, because the two kinds of table ask different
 * things of it:
 * - `apply` updates a contiguous slice of a dense table in f32. It must give
 *   every element the same bits wherever a slice starts or ends (the shard
 *   count must not change a result) and on every x86-64 CPU: the kernels are
 *   our own loops with a fixed operation order, built with
 *   -ffp-contract=off; where a fused multiply-add is wanted it is written
 *   as fmaf(), which IEEE 754 defines exactly (vec.h).
 * - `apply_row` updates one row of a sparse table (dim values, a few) in
 *   double arithmetic, stored back as f32 after each step.
 * An optimizer that has no kernel for a kind leaves it NULL, and
 * zp_optim_validate refuses it for that kind with a clear message.
 *
 * Nothing here keeps state of its own, so any thread may call it; the
 * caller serialises updates to one slice or row. The gradient is never
 * written: it may be a ZeroMQ receive buffer.
 */
#ifndef ZP_OPTIM_H
#define ZP_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hyper.h"

/* What a declaration applies the optimizer to. */
typedef enum zp_optim_kind {
    ZP_OPTIM_SLICE = 0, /* dense table slices: apply */
    ZP_OPTIM_ROW = 1,   /* sparse table rows: apply_row */
} zp_optim_kind;

/* Which hyper-parameters an optimizer reads (zp_optim_ops.uses). */
enum {
    ZP_OPTIM_USES_MOMENTUM = 1 << 0,
    ZP_OPTIM_USES_BETAS = 1 << 1,
    ZP_OPTIM_USES_EPS = 1 << 2,
    ZP_OPTIM_USES_FTRL = 1 << 3, /* l1, l2, ftrl_beta */
};

typedef struct zp_optim_ops {
    const char *name;
    int state_per_param; /* floats of state per parameter (slice) or value (row) */
    unsigned uses;       /* ZP_OPTIM_USES_* */
    /* The update is w -= lr * scale * g with no state and no weight decay
     * term, so a compressed gradient may be added straight into w
     * (zp_codec_ops.decode_add) instead of being decoded first. */
    bool linear;

    /* Dense slices: one update of w[0..n) from g[0..n). State block k of
     * element i is state[k * stride + i] (stride >= n: a sub-range of a
     * slice passes the slice's length, so blocks keep their place). `step`
     * is the number of updates applied before this one (Adam's bias
     * correction uses step + 1). `scale` multiplies the gradient first (1
     * for plain updates; 1/N for a BSP average, a staleness weight later).
     * NULL if the optimizer is for rows only. */
    void (*apply)(float *w, float *state, const float *g, size_t n, size_t stride,
                  const zp_hyper *h, uint64_t step, float scale);

    /* Sparse rows: one update of w[0..n) and its state (block k at s + k *
     * stride, stride >= n: a row's columns [a, a + n) pass the row's dim and
     * s + a, so blocks keep their place) from g[0..n) times scale; `step`
     * is the row's version before the update. NULL if the optimizer is for
     * slices only. */
    void (*apply_row)(const zp_hyper *h, uint32_t n, uint32_t stride, float *w, float *s,
                      const float *g, float scale, uint32_t step);

    /* Dense slices, optional: `apply` from a gradient the caller gives up,
     * checked for NaN/Inf in the same pass. Returns true after the same
     * update `apply` makes; false if some g[i] was NaN or Inf, with w and
     * state bit for bit as before. g is overwritten either way (the kernel
     * keeps old values there to put them back). Only an optimizer whose
     * old values fit in g's place (one float per element: sgd) has one;
     * zp_optim_apply_checked falls back to a check then `apply`. */
    bool (*apply_keep)(float *w, float *state, float *g, size_t n, size_t stride,
                       const zp_hyper *h, uint64_t step, float scale);
} zp_optim_ops;

extern const zp_optim_ops zp_sgd_ops;
extern const zp_optim_ops zp_momentum_ops;
extern const zp_optim_ops zp_adagrad_ops;
extern const zp_optim_ops zp_adam_ops;
extern const zp_optim_ops zp_ftrl_ops;

/* `o->apply` if every g[i] (i < n) is finite; nothing otherwise. With
 * `g_own` (g itself, writable, which the caller gives up: it is garbage
 * afterwards) and an optimizer that has apply_keep, the gradient is read
 * once; otherwise it is checked first, then applied. Returns true if
 * applied, false if nothing was (w and state unchanged). The arguments are
 * `apply`'s. Thread-safe as `apply` is. */
bool zp_optim_apply_checked(const zp_optim_ops *o, float *w, float *state, const float *g,
                            float *g_own, size_t n, size_t stride, const zp_hyper *h,
                            uint64_t step, float scale);

/* Look up by name ("sgd", "momentum", "adagrad", "adam", "ftrl"); NULL if
 * unknown or name is NULL. The table returned is static. Thread-safe. */
const zp_optim_ops *zp_optim_find(const char *name);

/* The names of the optimizers that have a kernel for `kind`, as
 * "sgd, momentum, ..." into buf (always terminated). Thread-safe. */
void zp_optim_names(zp_optim_kind kind, char *buf, size_t len);

/* Check a dense slice's optimizer and hyper-parameters: known, has a slice
 * kernel, finite, lr > 0, 0 <= momentum < 1, 0 <= beta < 1, eps > 0,
 * weight_decay >= 0 (only the parameters the optimizer reads besides lr and
 * weight_decay). Returns 0 or ZEPS_EOPTIM with a message naming the
 * optimizer and the first bad parameter in err (errlen bytes, always
 * terminated; err may be NULL). Thread-safe. */
int zp_optim_validate(const char *name, const zp_hyper *h, char *err, size_t errlen);

#endif
