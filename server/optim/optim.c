/*
 * optim.c - the optimizer registry: lookup by name, the lists of names, and
 * the checks of a dense slice's hyper-parameters (optim.h).
 *
 * The kernels are one file per optimizer; this file only knows their ops
 * tables. Sparse tables check their own hyper-parameters (table/sparse.c:
 * zero means "default" there) but find their optimizer here too.
 */
#include "optim.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "finite.h"
#include "zeps_errors.h"

/* The registry, in the order names are listed. */
static const zp_optim_ops *const registry[] = {
    &zp_sgd_ops, &zp_momentum_ops, &zp_adagrad_ops, &zp_adam_ops, &zp_ftrl_ops,
};

#define NOPTIM (sizeof(registry) / sizeof(registry[0]))

const zp_optim_ops *zp_optim_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < NOPTIM; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

static bool has_kernel(const zp_optim_ops *o, zp_optim_kind kind)
{
    return kind == ZP_OPTIM_ROW ? o->apply_row != NULL : o->apply != NULL;
}

void zp_optim_names(zp_optim_kind kind, char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < NOPTIM && off < len; i++) {
        if (!has_kernel(registry[i], kind))
            continue;
        int k = snprintf(buf + off, len - off, "%s%s", off ? ", " : "", registry[i]->name);
        if (k < 0)
            return;
        off += (size_t)k;
    }
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

static int unknown(const char *name, char *err, size_t errlen)
{
    char known[128];

    zp_optim_names(ZP_OPTIM_SLICE, known, sizeof known);
    if (err != NULL && errlen > 0) {
        const zp_optim_ops *o = zp_optim_find(name);
        if (o != NULL)
            snprintf(err, errlen, "optimizer '%s' is for sparse tables only (dense: %s)", name,
                     known);
        else
            snprintf(err, errlen, "unknown optimizer '%s' (known: %s)", name ? name : "(null)",
                     known);
    }
    return ZEPS_EOPTIM;
}

int zp_optim_validate(const char *name, const zp_hyper *h, char *err, size_t errlen)
{
    const zp_optim_ops *o = zp_optim_find(name);
    unsigned u;
    int rc;

    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (o == NULL || !has_kernel(o, ZP_OPTIM_SLICE))
        return unknown(name, err, errlen);
    name = o->name;
    u = o->uses;
    if ((rc = check(name, "lr", h->lr, h->lr > 0.0f, "> 0", err, errlen)) != 0 ||
        (rc = check(name, "weight_decay", h->weight_decay, h->weight_decay >= 0.0f, ">= 0", err,
                    errlen)) != 0)
        return rc;
    if ((u & ZP_OPTIM_USES_MOMENTUM) &&
        (rc = check(name, "momentum", h->momentum, h->momentum >= 0.0f && h->momentum < 1.0f,
                    "in [0, 1)", err, errlen)) != 0)
        return rc;
    if ((u & ZP_OPTIM_USES_BETAS) &&
        ((rc = check(name, "beta1", h->beta1, h->beta1 >= 0.0f && h->beta1 < 1.0f, "in [0, 1)",
                     err, errlen)) != 0 ||
         (rc = check(name, "beta2", h->beta2, h->beta2 >= 0.0f && h->beta2 < 1.0f, "in [0, 1)",
                     err, errlen)) != 0))
        return rc;
    if ((u & ZP_OPTIM_USES_EPS) &&
        (rc = check(name, "eps", h->eps, h->eps > 0.0f, "> 0", err, errlen)) != 0)
        return rc;
    return 0;
}

bool zp_optim_apply_checked(const zp_optim_ops *o, float *w, float *state, const float *g,
                            float *g_own, size_t n, size_t stride, const zp_hyper *h,
                            uint64_t step, float scale)
{
    if (g_own && o->apply_keep)
        return o->apply_keep(w, state, g_own, n, stride, h, step, scale);
    if (!zp_finite_all(g, n))
        return false;
    o->apply(w, state, g, n, stride, h, step, scale);
    return true;
}
