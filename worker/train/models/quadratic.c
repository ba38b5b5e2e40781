/*
 * quadratic.c - "quadratic": f(x) = 1/2 ||A x - b||^2, a problem whose
 * answer is known, for testing optimizers and consistency modes.
 *
 * The Hessian H = A^T A = Q diag(lambda) Q^T has eigenvalues log-spaced from
 * 1/kappa to 1 (so L = 1, mu = 1/kappa, condition number kappa = cfg->condition)
 * and a random orthogonal Q. We store A = diag(sqrt(lambda)) Q^T, so A's rows
 * are Q's columns scaled; x* ~ N(0, 1) (rounded to float so a worker can hold
 * it exactly) and b = A x*. Everything is generated in double from cfg->seed
 * alone, so every worker builds the same problem without talking to anyone,
 * and grad() returns the FULL gradient A^T (A x - b): there is no data to
 * partition, workers differ only in when they compute. Building costs
 * O(d^3) (Gram-Schmidt) and d^2 doubles of memory, so d is meant to stay in the
 * hundreds or low thousands.
 */
#include "alloc.h"
#include "errors.h"
#include "model.h"
#include "rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "mnist.h"
#include "zeps_errors.h"

#define STREAM_QUADRATIC 0x7175616472ull /* "quadr" */
#define QUAD_MAX_DIM     32768           /* d^2 doubles = 8 GiB: beyond any sane test */

struct zp_model {
    int d;
    int iterations;
    double *a;     /* d x d, row-major */
    double *b;     /* d */
    double *xstar; /* d, float-representable */
    double *x;     /* scratch: the parameters in double */
    double *r;     /* scratch: A x - b */
    double *g;     /* scratch: A^T r */
};

/* Fill the d x d row-major u with a random matrix with orthonormal rows:
 * Gaussian rows, each orthogonalised against the previous ones with classical
 * Gram-Schmidt applied twice (as stable as modified Gram-Schmidt, but two
 * dgemv calls per pass instead of j dot products). */
static void random_orthogonal(double *u, int d, zp_rng *rng, double *c)
{
    for (int j = 0; j < d; j++) {
        double *row = u + (size_t)j * d;
        double norm = 0.0;
        do {
            for (int k = 0; k < d; k++)
                row[k] = zp_rng_normal(rng);
            for (int pass = 0; pass < 2 && j > 0; pass++) {
                /* c = U[0:j] row;  row -= U[0:j]^T c */
                cblas_dgemv(CblasRowMajor, CblasNoTrans, j, d, 1.0, u, d, row, 1, 0.0, c, 1);
                cblas_dgemv(CblasRowMajor, CblasTrans, j, d, -1.0, u, d, c, 1, 1.0, row, 1);
            }
            norm = cblas_dnrm2(d, row, 1);
        } while (norm < 1e-6); /* a row in the span of the others: draw again */
        cblas_dscal(d, 1.0 / norm, row, 1);
    }
}

static void quad_destroy(zp_model **mp)
{
    if (mp == NULL || *mp == NULL)
        return;
    zp_model *m = *mp;
    free(m->a);
    free(m->b);
    free(m->xstar);
    free(m->x);
    free(m->r);
    free(m->g);
    free(m);
    *mp = NULL;
}

static int quad_create(zp_model **out, const zp_config *cfg, int rank, int num_workers, char *err,
                       size_t errlen)
{
    (void)rank;
    (void)num_workers;
    int d = cfg->dim;
    double kappa = cfg->condition;
    if (d < 1 || d > QUAD_MAX_DIM)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "training.dim must be in 1..%d, not %d",
                             QUAD_MAX_DIM, d);
    if (!isfinite(kappa) || kappa < 1.0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "training.condition must be a finite number >= 1, not %g", kappa);
    if (cfg->iterations < 1)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "training.iterations must be >= 1, not %d",
                             cfg->iterations);

    zp_model *m = zp_alloc_zeroed(1, sizeof(*m));
    m->d = d;
    m->iterations = cfg->iterations;
    m->a = malloc((size_t)d * d * sizeof(double));
    if (m->a == NULL) {
        quad_destroy(&m);
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "quadratic: cannot allocate a %dx%d matrix",
                             d, d);
    }
    m->b = zp_alloc_zeroed((size_t)d, sizeof(double));
    m->xstar = zp_alloc_zeroed((size_t)d, sizeof(double));
    m->x = zp_alloc_zeroed((size_t)d, sizeof(double));
    m->r = zp_alloc_zeroed((size_t)d, sizeof(double));
    m->g = zp_alloc_zeroed((size_t)d, sizeof(double));

    zp_rng rng;
    zp_rng_seed(&rng, cfg->seed, STREAM_QUADRATIC, (uint64_t)d);
    random_orthogonal(m->a, d, &rng, m->g);
    for (int i = 0; i < d; i++) {
        /* lambda_i = kappa^(t - 1), t = i / (d - 1): 1/kappa ... exactly 1 */
        double t = d > 1 ? (double)i / (d - 1) : 1.0;
        double lambda = exp((t - 1.0) * log(kappa));
        cblas_dscal(d, sqrt(lambda), m->a + (size_t)i * d, 1);
    }
    for (int i = 0; i < d; i++)
        m->xstar[i] = (double)(float)zp_rng_normal(&rng);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, d, d, 1.0, m->a, d, m->xstar, 1, 0.0, m->b, 1);
    memset(m->g, 0, (size_t)d * sizeof(double));
    *out = m;
    return 0;
}

static int quad_tables(const zp_model *m, zp_table_def *defs)
{
    memset(&defs[0], 0, sizeof(defs[0]));
    snprintf(defs[0].name, sizeof(defs[0].name), "x");
    defs[0].length = (uint64_t)m->d;
    defs[0].init = "zeros";
    defs[0].init_scale = 0.0;
    return 1;
}

static int quad_steps_per_epoch(const zp_model *m)
{
    return m->iterations;
}

static int quad_batch_examples(const zp_model *m)
{
    (void)m;
    return 1;
}

/* r = A x - b for the float parameters x; returns f(x) = 1/2 ||r||^2. */
static double residual(zp_model *m, const float *x)
{
    for (int i = 0; i < m->d; i++)
        m->x[i] = x[i];
    memcpy(m->r, m->b, (size_t)m->d * sizeof(double));
    cblas_dgemv(CblasRowMajor, CblasNoTrans, m->d, m->d, 1.0, m->a, m->d, m->x, 1, -1.0, m->r, 1);
    return 0.5 * cblas_ddot(m->d, m->r, 1, m->r, 1);
}

static double quad_grad(zp_model *m, float *const *w, float *const *g, int64_t step)
{
    (void)step; /* the full gradient: the same at every step */
    double f = residual(m, w[0]);
    cblas_dgemv(CblasRowMajor, CblasTrans, m->d, m->d, 1.0, m->a, m->d, m->r, 1, 0.0, m->g, 1);
    for (int i = 0; i < m->d; i++)
        g[0][i] = (float)m->g[i];
    return f;
}

static int quad_evaluate(zp_model *m, float *const *w, zp_eval *out)
{
    double f = residual(m, w[0]);
    double dist = 0.0, norm = 0.0;
    for (int i = 0; i < m->d; i++) {
        double e = m->x[i] - m->xstar[i];
        dist += e * e;
        norm += m->xstar[i] * m->xstar[i];
    }
    memset(out, 0, sizeof(*out));
    out->loss = f;
    out->accuracy = NAN;
    out->distance = sqrt(dist);
    out->rel_distance = norm > 0.0 ? sqrt(dist / norm) : sqrt(dist);
    out->examples = 1;
    return 0;
}

const zp_model_ops zp_quadratic_ops = {
    .name = "quadratic",
    .create = quad_create,
    .destroy = quad_destroy,
    .tables = quad_tables,
    .steps_per_epoch = quad_steps_per_epoch,
    .batch_examples = quad_batch_examples,
    .grad = quad_grad,
    .evaluate = quad_evaluate,
};
