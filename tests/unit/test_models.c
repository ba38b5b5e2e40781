/*
 * test_models.c - the built-in models and their data: the registry, worker
 * partitions and
 * per-epoch minibatch order, gradients against finite differences, the
 * quadratic's spectrum and optimum, bit-for-bit determinism, and a short
 * training run that shows the mlp learns.
 *
 * Needs the dataset-fashion-mnist package (the files in DATA_DIR). Run with
 * OPENBLAS_NUM_THREADS=1; main() also pins OpenBLAS to one thread.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <zlib.h>

#include "check_main.h"
#include "mathenv.h"
#include "config.h"
#include "mnist.h"
#include "model.h"
#include "rng.h"
#include "zeps_errors.h"

#define DATA_DIR "/usr/share/datasets/fashion-mnist"

/* ---- helpers ---------------------------------------------------------------- */

static void test_config(zp_config *cfg, const char *model)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->model, sizeof(cfg->model), "%s", model);
    snprintf(cfg->data_dir, sizeof(cfg->data_dir), "%s", DATA_DIR);
    cfg->num_workers = 1;
    cfg->batch_size = 32;
    cfg->hidden = 16;
    cfg->depth = 1;
    cfg->iterations = 100;
    cfg->dim = 20;
    cfg->condition = 10.0;
    cfg->seed = 1;
}

/* A model and one parameter and one gradient buffer per table. */
typedef struct fixture {
    const zp_model_ops *ops;
    zp_model *m;
    int ntables;
    zp_table_def defs[ZP_MODEL_MAX_TABLES];
    float *w[ZP_MODEL_MAX_TABLES];
    float *g[ZP_MODEL_MAX_TABLES];
} fixture;

/* Create the model, allocate its tables and initialise them as the servers
 * would: zeros, or normal(0, init_scale) from a fixed seed. */
static void fixture_init(fixture *f, const zp_config *cfg, int rank, int num_workers)
{
    char err[512] = "";
    memset(f, 0, sizeof(*f));
    f->ops = zp_model_find(cfg->model);
    ck_assert_ptr_nonnull(f->ops);
    int rc = f->ops->create(&f->m, cfg, rank, num_workers, err, sizeof(err));
    ck_assert_msg(rc == 0, "create %s: %s: %s", cfg->model, zeps_errname(rc), err);
    f->ntables = f->ops->tables(f->m, f->defs);
    ck_assert_int_ge(f->ntables, 1);
    ck_assert_int_le(f->ntables, ZP_MODEL_MAX_TABLES);
    zp_rng rng;
    zp_rng_seed(&rng, 42, 0, 0);
    for (int t = 0; t < f->ntables; t++) {
        size_t n = (size_t)f->defs[t].length;
        f->w[t] = calloc(n, sizeof(float));
        f->g[t] = calloc(n, sizeof(float));
        ck_assert(f->w[t] != NULL && f->g[t] != NULL);
        if (strcmp(f->defs[t].init, "normal") == 0)
            for (size_t i = 0; i < n; i++)
                f->w[t][i] = (float)(f->defs[t].init_scale * zp_rng_normal(&rng));
        else
            ck_assert_str_eq(f->defs[t].init, "zeros");
    }
}

static void fixture_fini(fixture *f)
{
    for (int t = 0; t < f->ntables; t++) {
        free(f->w[t]);
        free(f->g[t]);
    }
    f->ops->destroy(&f->m);
    ck_assert_ptr_null(f->m);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

START_TEST(create_reports_missing_data)
{
    zp_config cfg;
    test_config(&cfg, "mlp");
    snprintf(cfg.data_dir, sizeof(cfg.data_dir), "/nonexistent/zeps");
    char err[512] = "";
    zp_model *m = NULL;
    int rc = zp_mlp_ops.create(&m, &cfg, 0, 1, err, sizeof(err));
    ck_assert_int_eq(rc, ZEPS_EDATA);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err, "/nonexistent/zeps/train-images-idx3-ubyte.gz") != NULL &&
                      strstr(err, "apt-get install dataset-fashion-mnist") != NULL,
                  "%s", err);

    test_config(&cfg, "mlp");
    cfg.hidden = 0;
    ck_assert_int_eq(zp_mlp_ops.create(&m, &cfg, 0, 1, err, sizeof(err)), ZEPS_ECONFIG);
    test_config(&cfg, "mlp");
    cfg.depth = 9; /* more hidden layers than the tables a model may have */
    ck_assert_int_eq(zp_mlp_ops.create(&m, &cfg, 0, 1, err, sizeof(err)), ZEPS_ECONFIG);
    test_config(&cfg, "softmax");
    cfg.batch_size = 0;
    ck_assert_int_eq(zp_softmax_ops.create(&m, &cfg, 0, 1, err, sizeof(err)), ZEPS_ECONFIG);
    test_config(&cfg, "softmax");
    ck_assert_int_eq(zp_softmax_ops.create(&m, &cfg, 4, 4, err, sizeof(err)), ZEPS_ERANK);
    test_config(&cfg, "quadratic");
    cfg.condition = 0.5;
    ck_assert_int_eq(zp_quadratic_ops.create(&m, &cfg, 0, 1, err, sizeof(err)), ZEPS_ECONFIG);
    cfg.condition = 10;
    cfg.dim = 0;
    ck_assert_int_eq(zp_quadratic_ops.create(&m, &cfg, 0, 1, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_null(m);
}
END_TEST

/* ---- registry ----------------------------------------------------------------- */

START_TEST(registry_finds_models)
{
    const char *names[] = {"quadratic", "softmax", "mlp"};
    for (int i = 0; i < 3; i++) {
        const zp_model_ops *ops = zp_model_find(names[i]);
        ck_assert_ptr_nonnull(ops);
        ck_assert_str_eq(ops->name, names[i]);
        ck_assert_ptr_nonnull(strstr(zp_model_names(), names[i]));
        ck_assert(ops->create && ops->destroy && ops->tables && ops->steps_per_epoch &&
                  ops->batch_examples && ops->grad && ops->evaluate);
    }
    /* ctr (sparse tables) has the batch and chunked-evaluation hooks instead
     * of grad and evaluate */
    const zp_model_ops *ctr = zp_model_find("ctr");
    ck_assert_ptr_nonnull(ctr);
    ck_assert_ptr_nonnull(strstr(zp_model_names(), "ctr"));
    ck_assert(ctr->create && ctr->destroy && ctr->tables && ctr->steps_per_epoch &&
              ctr->batch_new && ctr->batch_free && ctr->batch_pick && ctr->batch_grad &&
              ctr->eval_chunks && ctr->eval_ids && ctr->eval_chunk && ctr->eval_finish &&
              ctr->reports_auc);
    ck_assert_ptr_null(zp_model_find("resnet"));
    ck_assert_ptr_null(zp_model_find(""));
    ck_assert_ptr_null(zp_model_find(NULL));
}
END_TEST

/* ---- partitions and minibatches ------------------------------------------------- */

static void check_partitions(uint64_t seed, int total, int n, int workers)
{
    uint8_t *seen = calloc((size_t)total, 1);
    uint32_t *part = calloc((size_t)(n / workers + 1), sizeof(uint32_t));
    int sum = 0;
    for (int r = 0; r < workers; r++) {
        int k = zp_mnist_partition(seed, total, n, r, workers, part);
        ck_assert_int_ge(k, n / workers);
        ck_assert_int_le(k, n / workers + 1);
        for (int i = 0; i < k; i++) {
            ck_assert_uint_lt(part[i], (unsigned)total);
            ck_assert_msg(!seen[part[i]], "example %u in two partitions", part[i]);
            seen[part[i]] = 1;
        }
        sum += k;
    }
    ck_assert_int_eq(sum, n);
    free(seen);
    free(part);
}

START_TEST(partitions_disjoint_and_cover)
{
    check_partitions(1, ZP_MNIST_TRAIN, ZP_MNIST_TRAIN, 4); /* covers all: sum == n, disjoint */
    check_partitions(7, ZP_MNIST_TRAIN, 1001, 4);
    check_partitions(7, 10, 10, 3);

    /* same seed, same partition; another seed, another */
    uint32_t a[15001], b[15001];
    int ka = zp_mnist_partition(1, ZP_MNIST_TRAIN, ZP_MNIST_TRAIN, 2, 4, a);
    int kb = zp_mnist_partition(1, ZP_MNIST_TRAIN, ZP_MNIST_TRAIN, 2, 4, b);
    ck_assert_int_eq(ka, 15000);
    ck_assert_int_eq(kb, 15000);
    ck_assert(memcmp(a, b, sizeof(uint32_t) * 15000) == 0);
    zp_mnist_partition(2, ZP_MNIST_TRAIN, ZP_MNIST_TRAIN, 2, 4, b);
    ck_assert(memcmp(a, b, sizeof(uint32_t) * 15000) != 0);
}
END_TEST

/* A fingerprint of one example, to compare batches without indices. */
static double fingerprint(const float *x, uint8_t y)
{
    double s = y * 1e6;
    for (int j = 0; j < ZP_MNIST_PIXELS; j++)
        s += x[j] * (j + 1);
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

START_TEST(minibatches_cover_partition_each_epoch)
{
    zp_config cfg;
    test_config(&cfg, "softmax");
    cfg.max_train_examples = 1000;
    cfg.batch_size = 50;
    char err[512];
    zp_mnist_data *d = NULL;
    int rc = zp_mnist_data_new(&d, &cfg, 1, 4, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(zp_mnist_data_part_size(d), 250);
    ck_assert_int_eq(zp_mnist_data_steps(d), 5);

    double fp[3][250];
    const float *x;
    const uint8_t *y;
    for (int e = 0; e < 3; e++)
        for (int s = 0; s < 5; s++) {
            zp_mnist_data_batch(d, e * 5 + s, &x, &y);
            for (int i = 0; i < 50; i++)
                fp[e][s * 50 + i] = fingerprint(x + i * 784, y[i]);
        }
    /* a new order each epoch ... */
    ck_assert(memcmp(fp[0], fp[1], sizeof(fp[0])) != 0);
    ck_assert(memcmp(fp[1], fp[2], sizeof(fp[0])) != 0);
    /* ... of the same examples */
    for (int e = 0; e < 3; e++)
        qsort(fp[e], 250, sizeof(double), cmp_double);
    ck_assert(memcmp(fp[0], fp[1], sizeof(fp[0])) == 0);
    ck_assert(memcmp(fp[0], fp[2], sizeof(fp[0])) == 0);
    for (int i = 1; i < 250; i++) /* no example twice in an epoch */
        ck_assert(fp[0][i] != fp[0][i - 1]);

    /* a step's batch does not depend on what was asked before */
    double first[50], again[50];
    zp_mnist_data_batch(d, 7, &x, &y);
    for (int i = 0; i < 50; i++)
        first[i] = fingerprint(x + i * 784, y[i]);
    zp_mnist_data_batch(d, 123, &x, &y);
    zp_mnist_data_batch(d, 7, &x, &y);
    for (int i = 0; i < 50; i++)
        again[i] = fingerprint(x + i * 784, y[i]);
    ck_assert(memcmp(first, again, sizeof(first)) == 0);
    zp_mnist_data_destroy(&d);
    ck_assert_ptr_null(d);

    /* another rank sees other examples */
    rc = zp_mnist_data_new(&d, &cfg, 2, 4, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s", err);
    for (int s = 0; s < 5; s++) {
        zp_mnist_data_batch(d, s, &x, &y);
        for (int i = 0; i < 50; i++) {
            double f = fingerprint(x + i * 784, y[i]);
            ck_assert(bsearch(&f, fp[0], 250, sizeof(double), cmp_double) == NULL);
        }
    }
    zp_mnist_data_destroy(&d);
}
END_TEST

/* ---- gradients -------------------------------------------------------------------- */

/* Central differences on the coordinates of table t with the largest
 * gradients and a few random ones, against grad(). */
static void check_gradient(fixture *f, int t, double eps, double rtol, double atol)
{
    size_t n = (size_t)f->defs[t].length;
    f->ops->grad(f->m, f->w, f->g, 0);
    float *ana = malloc(n * sizeof(float));
    memcpy(ana, f->g[t], n * sizeof(float));
    float *scratch[ZP_MODEL_MAX_TABLES];
    for (int i = 0; i < f->ntables; i++)
        scratch[i] = malloc((size_t)f->defs[i].length * sizeof(float));

    size_t coords[8];
    int nc = 0;
    for (int pick = 0; pick < 4 && (size_t)pick < n; pick++) { /* the 4 largest */
        size_t best = 0;
        float bestv = -1.0f;
        for (size_t i = 0; i < n; i++) {
            int taken = 0;
            for (int c = 0; c < nc; c++)
                taken |= coords[c] == i;
            if (!taken && fabsf(ana[i]) > bestv) {
                bestv = fabsf(ana[i]);
                best = i;
            }
        }
        coords[nc++] = best;
    }
    zp_rng rng;
    zp_rng_seed(&rng, 3, (uint64_t)t, 0);
    while (nc < 8)
        coords[nc++] = zp_rng_below(&rng, (uint32_t)n);

    for (int c = 0; c < nc; c++) {
        size_t i = coords[c];
        float w0 = f->w[t][i];
        f->w[t][i] = w0 + (float)eps;
        double up = f->ops->grad(f->m, f->w, scratch, 0);
        f->w[t][i] = w0 - (float)eps;
        double down = f->ops->grad(f->m, f->w, scratch, 0);
        f->w[t][i] = w0;
        double num = (up - down) / (2 * eps);
        ck_assert_msg(fabs(num - ana[i]) <= rtol * fabs(num) + atol,
                      "table %s[%zu]: analytic %.6g numeric %.6g", f->defs[t].name, i, ana[i], num);
    }
    for (int i = 0; i < f->ntables; i++)
        free(scratch[i]);
    free(ana);
}

START_TEST(softmax_gradient_matches_differences)
{
    zp_config cfg;
    test_config(&cfg, "softmax");
    cfg.max_train_examples = 2000;
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    ck_assert_int_eq(f.ntables, 2);
    ck_assert_str_eq(f.defs[0].name, "W");
    ck_assert_uint_eq(f.defs[0].length, 7840);
    ck_assert_str_eq(f.defs[1].name, "b");
    ck_assert_uint_eq(f.defs[1].length, 10);
    zp_rng rng; /* away from zero so the classes differ */
    zp_rng_seed(&rng, 5, 0, 0);
    for (int i = 0; i < 7840; i++)
        f.w[0][i] = (float)(0.05 * zp_rng_normal(&rng));
    for (int t = 0; t < 2; t++)
        check_gradient(&f, t, 1e-2, 1e-2, 2e-4);
    fixture_fini(&f);
}
END_TEST

START_TEST(mlp_gradient_matches_differences)
{
    zp_config cfg;
    test_config(&cfg, "mlp");
    cfg.max_train_examples = 2000;
    cfg.hidden = 16;
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    ck_assert_int_eq(f.ntables, 4);
    const char *names[] = {"w1", "b1", "w2", "b2"};
    const uint64_t lens[] = {784 * 16, 16, 16 * 10, 10};
    for (int t = 0; t < 4; t++) {
        ck_assert_str_eq(f.defs[t].name, names[t]);
        ck_assert_uint_eq(f.defs[t].length, lens[t]);
    }
    ck_assert_str_eq(f.defs[0].init, "normal");
    ck_assert(fabs(f.defs[0].init_scale - sqrt(2.0 / 784)) < 1e-12);
    ck_assert(fabs(f.defs[2].init_scale - sqrt(2.0 / 16)) < 1e-12);
    for (int i = 0; i < 16; i++) /* nonzero biases so they are tested too */
        f.w[1][i] = 0.01f * (float)(i % 5);
    for (int t = 0; t < 4; t++)
        check_gradient(&f, t, 1e-3, 1e-2, 5e-4);
    fixture_fini(&f);
}
END_TEST

/* depth 3: three hidden layers of 12, tables w1 b1 .. w4 b4, every one
 * against central differences (the backward pass through stacked ReLUs). */
START_TEST(deep_mlp_gradient_matches_differences)
{
    zp_config cfg;
    test_config(&cfg, "mlp");
    cfg.max_train_examples = 2000;
    cfg.hidden = 12;
    cfg.depth = 3;
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    ck_assert_int_eq(f.ntables, 8);
    const char *names[] = {"w1", "b1", "w2", "b2", "w3", "b3", "w4", "b4"};
    const uint64_t lens[] = {784 * 12, 12, 12 * 12, 12, 12 * 12, 12, 12 * 10, 10};
    for (int t = 0; t < 8; t++) {
        ck_assert_str_eq(f.defs[t].name, names[t]);
        ck_assert_uint_eq(f.defs[t].length, lens[t]);
    }
    ck_assert(fabs(f.defs[2].init_scale - sqrt(2.0 / 12)) < 1e-12);
    for (int t = 1; t < 8; t += 2) /* nonzero biases so they are tested too */
        for (uint64_t i = 0; i < f.defs[t].length; i++)
            f.w[t][i] = 0.01f * (float)(i % 5);
    for (int t = 0; t < 8; t++)
        check_gradient(&f, t, 1e-3, 1e-2, 5e-4);
    fixture_fini(&f);
}
END_TEST

START_TEST(grad_is_deterministic)
{
    const char *models[] = {"quadratic", "softmax", "mlp"};
    for (int k = 0; k < 3; k++) {
        zp_config cfg;
        test_config(&cfg, models[k]);
        cfg.max_train_examples = 1000;
        fixture f, f2;
        fixture_init(&f, &cfg, 1, 2);
        fixture_init(&f2, &cfg, 1, 2); /* a second instance: as another process would */
        for (int t = 0; t < f.ntables; t++)
            for (uint64_t i = 0; i < f.defs[t].length; i++)
                f.w[t][i] = f2.w[t][i] = 0.01f * (float)((i * 7 + t) % 13) - 0.05f;
        double l1 = f.ops->grad(f.m, f.w, f.g, 37);
        float *copy[ZP_MODEL_MAX_TABLES];
        for (int t = 0; t < f.ntables; t++) {
            copy[t] = malloc(f.defs[t].length * sizeof(float));
            memcpy(copy[t], f.g[t], f.defs[t].length * sizeof(float));
        }
        f.ops->grad(f.m, f.w, f.g, 5); /* another step in between */
        double l2 = f.ops->grad(f.m, f.w, f.g, 37);
        double l3 = f2.ops->grad(f2.m, f2.w, f2.g, 37);
        ck_assert(memcmp(&l1, &l2, sizeof(double)) == 0);
        ck_assert(memcmp(&l1, &l3, sizeof(double)) == 0);
        for (int t = 0; t < f.ntables; t++) {
            size_t bytes = f.defs[t].length * sizeof(float);
            ck_assert_msg(memcmp(copy[t], f.g[t], bytes) == 0, "%s", models[k]);
            ck_assert_msg(memcmp(copy[t], f2.g[t], bytes) == 0, "%s", models[k]);
            free(copy[t]);
        }
        fixture_fini(&f);
        fixture_fini(&f2);
    }
}
END_TEST

/* ---- quadratic ------------------------------------------------------------------- */

START_TEST(quadratic_gradient_and_optimum)
{
    zp_config cfg;
    test_config(&cfg, "quadratic");
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    int d = cfg.dim;
    ck_assert_int_eq(f.ntables, 1);
    ck_assert_str_eq(f.defs[0].name, "x");
    ck_assert_uint_eq(f.defs[0].length, (uint64_t)d);
    ck_assert_int_eq(f.ops->steps_per_epoch(f.m), cfg.iterations);
    ck_assert_int_eq(f.ops->batch_examples(f.m), 1);

    /* gradient vs central differences (f is quadratic: exact up to rounding) */
    float *x = f.w[0];
    for (int i = 0; i < d; i++)
        x[i] = (float)(0.1 * i - 1.0);
    f.ops->grad(f.m, f.w, f.g, 0);
    float *scratch[1] = {malloc(d * sizeof(float))};
    for (int i = 0; i < d; i++) {
        float x0 = x[i];
        x[i] = x0 + 0.125f;
        double up = f.ops->grad(f.m, f.w, scratch, 0);
        x[i] = x0 - 0.125f;
        double down = f.ops->grad(f.m, f.w, scratch, 0);
        x[i] = x0;
        double num = (up - down) / 0.25;
        ck_assert_msg(fabs(num - f.g[0][i]) < 1e-5 * (1 + fabs(num)), "x[%d]: %g vs %g", i,
                      f.g[0][i], num);
    }

    /* Recover x* through evaluate(): ||e_i - x*||^2 = 1 - 2 x*_i + ||x*||^2. */
    zp_eval ev;
    memset(x, 0, d * sizeof(float));
    ck_assert_int_eq(f.ops->evaluate(f.m, f.w, &ev), 0);
    ck_assert(isnan(ev.accuracy));
    ck_assert(fabs(ev.rel_distance - 1.0) < 1e-12);
    double nstar2 = ev.distance * ev.distance;
    double *xstar = malloc(d * sizeof(double));
    for (int i = 0; i < d; i++) {
        x[i] = 1.0f;
        f.ops->evaluate(f.m, f.w, &ev);
        x[i] = 0.0f;
        xstar[i] = (1.0 + nstar2 - ev.distance * ev.distance) / 2.0;
    }
    for (int i = 0; i < d; i++)
        x[i] = (float)xstar[i];
    f.ops->evaluate(f.m, f.w, &ev);
    ck_assert_msg(ev.distance < 1e-5, "distance at x* %g", ev.distance);
    ck_assert_msg(ev.loss < 1e-10, "f(x*) = %g", ev.loss);
    double floss = f.ops->grad(f.m, f.w, f.g, 0);
    ck_assert(floss == ev.loss);
    ck_assert(cblas_snrm2(d, f.g[0], 1) < 1e-5);
    free(xstar);
    free(scratch[0]);
    fixture_fini(&f);
}
END_TEST

/* H v = grad(v) - grad(0): the gradient is affine. */
static void hessian_times(fixture *f, const double *v, double *hv, float *g0)
{
    int d = (int)f->defs[0].length;
    for (int i = 0; i < d; i++)
        f->w[0][i] = (float)v[i];
    f->ops->grad(f->m, f->w, f->g, 0);
    for (int i = 0; i < d; i++)
        hv[i] = (double)f->g[0][i] - g0[i];
}

START_TEST(quadratic_spectrum)
{
    zp_config cfg;
    test_config(&cfg, "quadratic");
    cfg.dim = 50;
    cfg.condition = 100;
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    int d = cfg.dim;
    float *g0 = malloc(d * sizeof(float));
    f.ops->grad(f.m, f.w, f.g, 0); /* at x = 0 */
    memcpy(g0, f.g[0], d * sizeof(float));
    double *v = malloc(d * sizeof(double)), *hv = malloc(d * sizeof(double));
    zp_rng rng;
    zp_rng_seed(&rng, 9, 0, 0);

    /* ||H v|| <= ||v|| (L = 1) and v.Hv >= ||v||^2 / kappa (mu = 1/kappa) */
    for (int trial = 0; trial < 20; trial++) {
        for (int i = 0; i < d; i++)
            v[i] = zp_rng_normal(&rng);
        hessian_times(&f, v, hv, g0);
        double nv = cblas_dnrm2(d, v, 1), nhv = cblas_dnrm2(d, hv, 1);
        ck_assert_msg(nhv <= nv * (1 + 1e-5), "||Hv|| %g > ||v|| %g", nhv, nv);
        ck_assert(cblas_ddot(d, v, 1, hv, 1) >= nv * nv / cfg.condition * (1 - 1e-3));
    }

    /* power iteration: the largest eigenvalue is 1 */
    for (int i = 0; i < d; i++)
        v[i] = zp_rng_normal(&rng);
    double lambda = 0;
    for (int it = 0; it < 2000; it++) {
        double nv = cblas_dnrm2(d, v, 1);
        cblas_dscal(d, 1.0 / nv, v, 1);
        hessian_times(&f, v, hv, g0);
        lambda = cblas_ddot(d, v, 1, hv, 1);
        memcpy(v, hv, d * sizeof(double));
    }
    ck_assert_msg(fabs(lambda - 1.0) < 1e-3, "lambda_max %g", lambda);

    /* the same seed gives the same problem, another seed another */
    zp_eval e1, e2;
    memset(f.w[0], 0, d * sizeof(float));
    f.ops->evaluate(f.m, f.w, &e1);
    fixture f2;
    cfg.seed = 2;
    fixture_init(&f2, &cfg, 0, 1);
    f2.ops->evaluate(f2.m, f2.w, &e2);
    ck_assert(e1.distance != e2.distance);
    fixture_fini(&f2);

    free(v);
    free(hv);
    free(g0);
    fixture_fini(&f);
}
END_TEST

START_TEST(quadratic_gradient_descent_converges)
{
    zp_config cfg;
    test_config(&cfg, "quadratic");
    cfg.dim = 20;
    cfg.condition = 10;
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    zp_eval ev;
    f.ops->evaluate(f.m, f.w, &ev);
    double f0 = ev.loss, prev = f0;
    for (int it = 0; it < 200; it++) {
        double loss = f.ops->grad(f.m, f.w, f.g, it);
        ck_assert(loss <= prev * (1 + 1e-6)); /* step 1/L never increases f */
        prev = loss;
        cblas_saxpy(cfg.dim, -1.0f, f.g[0], 1, f.w[0], 1);
    }
    f.ops->evaluate(f.m, f.w, &ev);
    ck_assert_msg(ev.rel_distance < 1e-3, "rel_distance %g after 200 steps", ev.rel_distance);
    ck_assert(ev.loss < 1e-6 * f0);
    fixture_fini(&f);
}
END_TEST

/* ---- training ------------------------------------------------------------------------ */

START_TEST(mlp_learns_in_one_epoch)
{
    zp_config cfg;
    test_config(&cfg, "mlp");
    cfg.hidden = 64;
    cfg.batch_size = 64;
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    int steps = f.ops->steps_per_epoch(f.m);
    ck_assert_int_eq(steps, 60000 / 64);

    zp_eval ev;
    ck_assert_int_eq(f.ops->evaluate(f.m, f.w, &ev), 0);
    ck_assert_int_eq(ev.examples, 10000);
    ck_assert(ev.accuracy < 0.3); /* random init: about chance */
    double t0 = seconds(), loss = 0;
    for (int s = 0; s < steps; s++) {
        loss = f.ops->grad(f.m, f.w, f.g, s);
        ck_assert(isfinite(loss));
        for (int t = 0; t < f.ntables; t++)
            cblas_saxpy((int)f.defs[t].length, -0.1f, f.g[t], 1, f.w[t], 1);
    }
    double t1 = seconds();
    ck_assert_int_eq(f.ops->evaluate(f.m, f.w, &ev), 0);
    double t2 = seconds();
    printf("mlp hidden 64 batch 64: %d steps in %.2f s, evaluate %.2f s; "
           "last batch loss %.3f, test loss %.3f accuracy %.4f\n",
           steps, t1 - t0, t2 - t1, loss, ev.loss, ev.accuracy);
    ck_assert_msg(ev.accuracy > 0.8, "accuracy %g", ev.accuracy);
    fixture_fini(&f);
}
END_TEST

START_TEST(softmax_learns)
{
    zp_config cfg;
    test_config(&cfg, "softmax");
    cfg.batch_size = 64;
    cfg.max_train_examples = 12800;
    fixture f;
    fixture_init(&f, &cfg, 0, 1);
    for (int s = 0; s < f.ops->steps_per_epoch(f.m); s++) {
        f.ops->grad(f.m, f.w, f.g, s);
        for (int t = 0; t < f.ntables; t++)
            cblas_saxpy((int)f.defs[t].length, -0.1f, f.g[t], 1, f.w[t], 1);
    }
    zp_eval ev;
    f.ops->evaluate(f.m, f.w, &ev);
    ck_assert_msg(ev.accuracy > 0.7, "accuracy %g", ev.accuracy);
    ck_assert(ev.loss < 1.0);
    fixture_fini(&f);
}
END_TEST

static Suite *models_suite(void)
{
    Suite *s = suite_create("models");
    TCase *tc = tcase_create("data");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, create_reports_missing_data);
    tcase_add_test(tc, registry_finds_models);
    tcase_add_test(tc, partitions_disjoint_and_cover);
    tcase_add_test(tc, minibatches_cover_partition_each_epoch);
    suite_add_tcase(s, tc);

    tc = tcase_create("gradients");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, softmax_gradient_matches_differences);
    tcase_add_test(tc, mlp_gradient_matches_differences);
    tcase_add_test(tc, deep_mlp_gradient_matches_differences);
    tcase_add_test(tc, grad_is_deterministic);
    tcase_add_test(tc, quadratic_gradient_and_optimum);
    tcase_add_test(tc, quadratic_spectrum);
    tcase_add_test(tc, quadratic_gradient_descent_converges);
    suite_add_tcase(s, tc);

    tc = tcase_create("training");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mlp_learns_in_one_epoch);
    tcase_add_test(tc, softmax_learns);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    return zt_run_suite(models_suite());
}
