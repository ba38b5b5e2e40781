/*
 * optim.c - the four server-side optimizers (sgd, momentum, adagrad, adam)
 * behind the zp_optim_ops table, plus hyper-parameter defaults and checks.
 *
 * Every update is memory-bound, so the shape follows the memory traffic:
 * sgd and momentum are a handful of BLAS-1 calls (cblas_saxpy/cblas_sscal),
 * which OpenBLAS runs with its own kernels; adagrad and adam are single
 * fused passes over w, g and the state, written as restrict-qualified
 * loops with no calls but sqrtf so that gcc -O2 -ftree-vectorize turns them
 * into SIMD code - provided this file is built with -fno-math-errno: gcc 12
 * otherwise keeps a scalar errno path beside each sqrtf and will not
 * vectorise (neither __attribute__((optimize)) nor a pragma switches that
 * off; checked with -fopt-info-vec). The results are the same either way,
 * as sqrtf only sees non-negative sums of squares.
 *
 * The gradient is never written: it may be a ZeroMQ receive buffer. The
 * effective gradient is scale * g + weight_decay * w, the weight-decay term
 * left out entirely when weight_decay is 0 (so 0 * Inf never becomes NaN).
 * Nothing here keeps state of its own, so any thread may call it; the caller
 * serialises updates to one slice.
 */
#include "optim.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "zeps_errors.h"

/* CBLAS takes an int length; longer slices go through in chunks of this. */
#define BLAS_CHUNK ((size_t)1 << 30)

/* y += a * x over n floats, for any size_t n. */
static void axpy(size_t n, float a, const float *x, float *y)
{
    while (n > 0) {
        size_t k = n < BLAS_CHUNK ? n : BLAS_CHUNK;
        cblas_saxpy((int)k, a, x, 1, y, 1);
        x += k;
        y += k;
        n -= k;
    }
}

/* x *= a over n floats, for any size_t n. */
static void scal(size_t n, float a, float *x)
{
    while (n > 0) {
        size_t k = n < BLAS_CHUNK ? n : BLAS_CHUNK;
        cblas_sscal((int)k, a, x, 1);
        x += k;
        n -= k;
    }
}

/* sgd: w -= lr * (scale*g + wd*w), i.e. w = (1 - lr*wd)*w - lr*scale*g. */
static void sgd_apply(float *w, float *state, const float *g, size_t n, size_t stride,
                      const zp_hyper *h, uint64_t step, float scale)
{
    if (n == 0)
        return;
    if (h->weight_decay != 0.0f)
        scal(n, 1.0f - h->lr * h->weight_decay, w);
    axpy(n, -h->lr * scale, g, w);
}

/* momentum (heavy ball): v = mu*v + (scale*g + wd*w); w -= lr*v. */
static void momentum_apply(float *w, float *state, const float *g, size_t n, size_t stride,
                      const zp_hyper *h, uint64_t step, float scale)
{
    float *v = state;

    if (n == 0)
        return;
    scal(n, h->momentum, v);
    axpy(n, scale, g, v);
    if (h->weight_decay != 0.0f)
        axpy(n, h->weight_decay, w, v); /* w before this step's update */
    axpy(n, -h->lr, v, w);
}

/* The adagrad loop; `wd` is a separate argument so each call below gets a
 * copy specialised for wd == 0 or not, keeping the loop branch-free. */
static inline void adagrad_loop(float *restrict w, float *restrict G, const float *restrict g,
                                size_t n, float lr, float eps, float scale, float wd, int use_wd)
{
    for (size_t i = 0; i < n; i++) {
        float gi = scale * g[i];
        if (use_wd)
            gi += wd * w[i];
        G[i] += gi * gi;
        w[i] -= lr * gi / (sqrtf(G[i]) + eps);
    }
}

/* adagrad: G += g^2; w -= lr * g / (sqrt(G) + eps). */
static void adagrad_apply(float *w, float *state, const float *g, size_t n, size_t stride,
                      const zp_hyper *h, uint64_t step, float scale)
{
    if (h->weight_decay != 0.0f)
        adagrad_loop(w, state, g, n, h->lr, h->eps, scale, h->weight_decay, 1);
    else
        adagrad_loop(w, state, g, n, h->lr, h->eps, scale, 0.0f, 0);
}

/* The adam loop over m, v; see adagrad_loop for `use_wd`. */
static inline void adam_loop(float *restrict w, float *restrict m, float *restrict v,
                             const float *restrict g, size_t n, const zp_hyper *h, float bc1inv,
                             float bc2inv, float scale, int use_wd)
{
    const float lr = h->lr, eps = h->eps, wd = h->weight_decay;
    const float b1 = h->beta1, b2 = h->beta2;
    const float c1 = 1.0f - b1, c2 = 1.0f - b2;

    for (size_t i = 0; i < n; i++) {
        float gi = scale * g[i];
        if (use_wd)
            gi += wd * w[i];
        m[i] = b1 * m[i] + c1 * gi;
        v[i] = b2 * v[i] + c2 * gi * gi;
        w[i] -= lr * (m[i] * bc1inv) / (sqrtf(v[i] * bc2inv) + eps);
    }
}

/* adam: m = b1*m + (1-b1)g; v = b2*v + (1-b2)g^2; with t = step + 1,
 * w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps). */
static void adam_apply(float *w, float *state, const float *g, size_t n, size_t stride,
                      const zp_hyper *h, uint64_t step, float scale)
{
    /* The corrections in double: 1 - b2^t is tiny for small t and b2 near 1. */
    double t = (double)step + 1.0;
    float bc1inv = (float)(1.0 / (1.0 - pow(h->beta1, t)));
    float bc2inv = (float)(1.0 / (1.0 - pow(h->beta2, t)));
    float *m = state, *v = state + stride;

    if (h->weight_decay != 0.0f)
        adam_loop(w, m, v, g, n, h, bc1inv, bc2inv, scale, 1);
    else
        adam_loop(w, m, v, g, n, h, bc1inv, bc2inv, scale, 0);
}

static const zp_optim_ops sgd_ops = {
    .name = "sgd",
    .state_per_param = 0,
    .apply = sgd_apply,
};

static const zp_optim_ops momentum_ops = {
    .name = "momentum",
    .state_per_param = 1,
    .apply = momentum_apply,
};

static const zp_optim_ops adagrad_ops = {
    .name = "adagrad",
    .state_per_param = 1,
    .apply = adagrad_apply,
};

static const zp_optim_ops adam_ops = {
    .name = "adam",
    .state_per_param = 2,
    .apply = adam_apply,
};

/* Which hyper-parameters each optimizer reads, so validate() checks those only. */
enum { USES_MOMENTUM = 1 << 0, USES_BETAS = 1 << 1, USES_EPS = 1 << 2 };

static const struct optim_entry {
    const zp_optim_ops *ops;
    unsigned uses;
} optimizers[] = {
    {&sgd_ops, 0},
    {&momentum_ops, USES_MOMENTUM},
    {&adagrad_ops, USES_EPS},
    {&adam_ops, USES_BETAS | USES_EPS},
};

#define NOPTIM (sizeof(optimizers) / sizeof(optimizers[0]))

static const struct optim_entry *find_entry(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < NOPTIM; i++)
        if (strcmp(optimizers[i].ops->name, name) == 0)
            return &optimizers[i];
    return NULL;
}

/* Look up an optimizer by name; NULL if unknown (or name is NULL). The
 * returned table is static. Thread-safe. */
const zp_optim_ops *zp_optim_find(const char *name)
{
    const struct optim_entry *e = find_entry(name);
    return e ? e->ops : NULL;
}

/* 0 if x is finite and `ok` (the caller's range test); otherwise ZEPS_EOPTIM
 * and "<optim>: <what> = <x> must be <range or finite>" in err. */
static int check(const char *optim, const char *what, float x, int ok, const char *range, char *err,
                 size_t errlen)
{
    if (isfinite(x) && ok)
        return 0;
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s: %s = %g must be %s", optim, what, (double)x,
                 isfinite(x) ? range : "finite");
    return ZEPS_EOPTIM;
}

/* Check the hyper-parameters the named optimizer uses (lr and weight_decay
 * always; momentum, beta1/beta2, eps where read). Returns 0 or ZEPS_EOPTIM
 * with a message naming the optimizer and the first bad parameter in err
 * (errlen bytes, always terminated; err may be NULL). Thread-safe. */
int zp_optim_validate(const char *name, const zp_hyper *h, char *err, size_t errlen)
{
    const struct optim_entry *e = find_entry(name);
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (e == NULL) {
        if (err != NULL && errlen > 0) {
            int off =
                snprintf(err, errlen, "unknown optimizer '%s' (known:", name ? name : "(null)");
            for (size_t i = 0; i < NOPTIM && off >= 0 && (size_t)off < errlen; i++)
                off += snprintf(err + off, errlen - (size_t)off, "%s %s", i ? "," : "",
                                optimizers[i].ops->name);
            if (off >= 0 && (size_t)off < errlen)
                snprintf(err + off, errlen - (size_t)off, ")");
        }
        return ZEPS_EOPTIM;
    }
    name = e->ops->name;
    if ((rc = check(name, "lr", h->lr, h->lr > 0.0f, "> 0", err, errlen)) != 0)
        return rc;
    if ((rc = check(name, "weight_decay", h->weight_decay, h->weight_decay >= 0.0f, ">= 0", err,
                    errlen)) != 0)
        return rc;
    if ((e->uses & USES_MOMENTUM) &&
        (rc = check(name, "momentum", h->momentum, h->momentum >= 0.0f && h->momentum < 1.0f,
                    "in [0, 1)", err, errlen)) != 0)
        return rc;
    if ((e->uses & USES_BETAS) &&
        (rc = check(name, "beta1", h->beta1, h->beta1 >= 0.0f && h->beta1 < 1.0f, "in [0, 1)", err,
                    errlen)) != 0)
        return rc;
    if ((e->uses & USES_BETAS) &&
        (rc = check(name, "beta2", h->beta2, h->beta2 >= 0.0f && h->beta2 < 1.0f, "in [0, 1)", err,
                    errlen)) != 0)
        return rc;
    if ((e->uses & USES_EPS) &&
        (rc = check(name, "eps", h->eps, h->eps > 0.0f, "> 0", err, errlen)) != 0)
        return rc;
    return 0;
}

/* Replace zero momentum, beta1, beta2 and eps with 0.9, 0.9, 0.999 and 1e-8;
 * lr and weight_decay are left alone. Thread-safe. */
void zp_hyper_defaults(zp_hyper *h)
{
    if (h->momentum == 0.0f)
        h->momentum = 0.9f;
    if (h->beta1 == 0.0f)
        h->beta1 = 0.9f;
    if (h->beta2 == 0.0f)
        h->beta2 = 0.999f;
    if (h->eps == 0.0f)
        h->eps = 1e-8f;
}
