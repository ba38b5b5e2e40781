/*
 * test_optim.c - unit tests for server/optim/ (the slice kernels).
 *
 * Each optimizer is run for several steps on random data and compared,
 * weights and state, against a plain double-precision reference written
 * here from the textbook formulas, under a few hyper-parameter settings
 * (scale != 1, weight decay, a large eps, Adam resumed at a late step). The
 * gradient lives in pages made read-only during apply(), so a write into it
 * crashes the test. Then lookup, validation and defaults; and the kernels'
 * bench, whose weights and state must end finite, and whose figures are
 * those of the runs it timed (a clock of the test's stands in).
 */
#include <check.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check_main.h"
#include "kbench.h"
#include "mathenv.h"
#include "now.h"
#include "optim.h"
#include "zeps_errors.h"

/* The monotonic clock as everything in this binary reads it (linked with
 * --wrap=zp_now_ns: tests/unit/CMakeLists.txt): the real one, or while
 * `fake_ns` is set a clock that moves 1 ms at each reading. */
static uint64_t fake_ns;

uint64_t __real_zp_now_ns(void);
uint64_t __wrap_zp_now_ns(void);

uint64_t __wrap_zp_now_ns(void)
{
    if (fake_ns)
        return fake_ns += 1000000;
    return __real_zp_now_ns();
}

/* xorshift64*: reproducible data without libc rand() state. */
typedef struct rng {
    uint64_t s;
} rng;

static float rnd(rng *r, float lo, float hi)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    uint64_t x = r->s * 2685821657736338717ULL;
    return lo + (hi - lo) * (float)((x >> 40) * (1.0 / 16777216.0));
}

/* One parameter's update in double, straight from the formulas. */
static void ref_elem(const char *name, double *w, double *s1, double *s2, double g,
                     const zp_hyper *h, uint64_t step, double scale)
{
    double wd = h->weight_decay;
    double ge = scale * g + (wd != 0 ? wd * *w : 0);

    if (strcmp(name, "sgd") == 0) {
        *w -= h->lr * ge;
    } else if (strcmp(name, "momentum") == 0) {
        *s1 = h->momentum * *s1 + ge;
        *w -= h->lr * *s1;
    } else if (strcmp(name, "adagrad") == 0) {
        *s1 += ge * ge;
        *w -= h->lr * ge / (sqrt(*s1) + h->eps);
    } else if (strcmp(name, "adam") == 0) {
        double t = (double)step + 1;
        *s1 = h->beta1 * *s1 + (1 - (double)h->beta1) * ge;
        *s2 = h->beta2 * *s2 + (1 - (double)h->beta2) * ge * ge;
        double mhat = *s1 / (1 - pow(h->beta1, t));
        double vhat = *s2 / (1 - pow(h->beta2, t));
        *w -= h->lr * mhat / (sqrt(vhat) + h->eps);
    } else {
        ck_abort_msg("no reference for %s", name);
    }
}

/* |got - want| small relative to want, with an absolute floor relative to
 * the array's magnitude `mag` (so values that cancel to ~0 still compare). */
static void expect_close(const char *what, size_t i, float got, double want, double mag)
{
    double tol = 1e-6 * (fabs(want) + 0.1 * mag);
    ck_assert_msg(fabs((double)got - want) <= tol, "%s[%zu] = %.9g, reference %.9g (tol %.3g)",
                  what, i, (double)got, want, tol);
}

typedef struct setting {
    float scale, wd, eps;
    float momentum, beta1, beta2;
    uint64_t step0; /* step of the first update */
} setting;

static const setting settings[] = {
    {.scale = 1.0f, .wd = 0.0f, .eps = 1e-8f, .momentum = 0.9f, .beta1 = 0.9f, .beta2 = 0.999f},
    {.scale = 0.3f, .wd = 0.05f, .eps = 0.1f, .momentum = 0.7f, .beta1 = 0.8f, .beta2 = 0.99f},
    {.scale = 2.5f,
     .wd = 0.0f,
     .eps = 1e-3f,
     .momentum = 0.5f,
     .beta1 = 0.85f,
     .beta2 = 0.995f,
     .step0 = 1000},
    {.scale = 0.125f, .wd = 0.2f, .eps = 1e-8f, .momentum = 0.0f, .beta1 = 0.0f, .beta2 = 0.9f},
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* Run `steps` updates of optimizer `name` over n parameters and compare
 * every `stride`-th one (and the last) with the reference. */
static void run_compare(const char *name, size_t n, size_t stride, int steps, const setting *st)
{
    const zp_optim_ops *ops = zp_optim_find(name);
    ck_assert_ptr_nonnull(ops);
    zp_hyper h = {.lr = 0.05f,
                  .momentum = st->momentum,
                  .beta1 = st->beta1,
                  .beta2 = st->beta2,
                  .eps = st->eps,
                  .weight_decay = st->wd};
    int sp = ops->state_per_param;
    size_t nref = (n - 1) / stride + 2; /* sampled indices, plus n-1 */
    size_t gbytes = n * sizeof(float);
    rng r = {.s = 0x9E3779B97F4A7C15ULL ^ n ^ ((uint64_t)steps << 32)};

    float *w = malloc(n * sizeof *w);
    float *w0 = malloc(n * sizeof *w0);
    float *state = calloc((size_t)sp * n + 1, sizeof *state);
    float *g = mmap(NULL, gbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    float *gcopy = malloc(gbytes);
    double *rw = malloc(nref * sizeof *rw), *r1 = calloc(nref, sizeof *r1);
    double *r2 = calloc(nref, sizeof *r2);
    size_t *idx = malloc(nref * sizeof *idx);
    ck_assert(w && w0 && state && g != MAP_FAILED && gcopy && rw && r1 && r2 && idx);

    size_t k = 0;
    for (size_t i = 0; i < n; i += stride)
        idx[k++] = i;
    if (k > 0 && idx[k - 1] != n - 1)
        idx[k++] = n - 1;
    for (size_t i = 0; i < n; i++)
        w[i] = w0[i] = rnd(&r, -1.0f, 1.0f);
    for (size_t j = 0; j < k; j++)
        rw[j] = w[idx[j]];

    for (int s = 0; s < steps; s++) {
        uint64_t step = st->step0 + (uint64_t)s;
        ck_assert_int_eq(mprotect(g, gbytes, PROT_READ | PROT_WRITE), 0);
        for (size_t i = 0; i < n; i++)
            g[i] = rnd(&r, -1.0f, 1.0f);
        memcpy(gcopy, g, gbytes);
        ck_assert_int_eq(mprotect(g, gbytes, PROT_READ), 0); /* a write now crashes */
        ops->apply(w, state, g, n, n, &h, step, st->scale);
        ck_assert_msg(memcmp(g, gcopy, gbytes) == 0, "%s wrote into g", name);
        for (size_t j = 0; j < k; j++)
            ref_elem(name, &rw[j], &r1[j], &r2[j], g[idx[j]], &h, step, st->scale);
    }

    double mw = 0, m1 = 0, m2 = 0;
    for (size_t j = 0; j < k; j++) {
        mw = fmax(mw, fabs(rw[j]));
        m1 = fmax(m1, fabs(r1[j]));
        m2 = fmax(m2, fabs(r2[j]));
    }
    double moved = 0;
    for (size_t j = 0; j < k; j++) {
        size_t i = idx[j];
        expect_close("w", i, w[i], rw[j], mw);
        if (sp >= 1)
            expect_close("state0", i, state[i], r1[j], m1);
        if (sp >= 2)
            expect_close("state1", i, state[n + i], r2[j], m2);
        moved = fmax(moved, fabs((double)w[i] - w0[i]));
    }
    /* The comparison above means something only if the weights moved. */
    ck_assert_msg(moved > 1e-2, "%s: weights barely moved (%g)", name, moved);
    ck_assert_msg(state[(size_t)sp * n] == 0.0f, "%s wrote past its state", name);

    free(w);
    free(w0);
    free(state);
    munmap(g, gbytes);
    free(gcopy);
    free(rw);
    free(r1);
    free(r2);
    free(idx);
}

static const char *const names[] = {"sgd", "momentum", "adagrad", "adam"};

/* Looped over the 4 optimizers x NSETTINGS settings. */
START_TEST(test_matches_reference)
{
    const char *name = names[_i / NSETTINGS];
    run_compare(name, 1003, 1, 6, &settings[_i % NSETTINGS]);
}
END_TEST

/* A large, odd-sized slice: exercises BLAS and vector tails; sampled check. */
START_TEST(test_large)
{
    run_compare(names[_i], ((size_t)1 << 22) + 5, 4097, 2, &settings[1]);
}
END_TEST

START_TEST(test_single_element)
{
    run_compare(names[_i], 1, 1, 20, &settings[1]);
}
END_TEST

/* n == 0 touches nothing, also with NULL buffers. */
START_TEST(test_empty)
{
    const zp_optim_ops *ops = zp_optim_find(names[_i]);
    zp_hyper h = {.lr = 0.1f, .weight_decay = 0.1f};
    float w[1] = {42.0f}, state[2] = {7.0f, 8.0f}, g[1] = {1.0f};

    ck_assert_ptr_nonnull(ops);
    zp_hyper_defaults(&h);
    ops->apply(NULL, NULL, NULL, 0, 0, &h, 0, 1.0f);
    ops->apply(w, state, g, 0, 0, &h, 0, 1.0f);
    ck_assert_float_eq(w[0], 42.0f);
    ck_assert_float_eq(state[0], 7.0f);
    ck_assert_float_eq(state[1], 8.0f);
}
END_TEST

/* Hand-computed first steps, independent of the reference code above. */
START_TEST(test_known_values)
{
    zp_hyper h = {.lr = 0.5f, .momentum = 0.5f, .beta1 = 0.5f, .beta2 = 0.75f, .eps = 1.0f};
    const float g[1] = {2.0f};
    float w[1], s[2];

    w[0] = 1.0f;
    zp_optim_find("sgd")->apply(w, NULL, g, 1, 1, &h, 0, 1.0f);
    ck_assert_float_eq_tol(w[0], 0.0f, 1e-7); /* 1 - 0.5*2 */

    w[0] = 1.0f, s[0] = 1.0f;
    zp_optim_find("momentum")->apply(w, s, g, 1, 1, &h, 0, 1.0f);
    ck_assert_float_eq_tol(s[0], 2.5f, 1e-7);   /* 0.5*1 + 2 */
    ck_assert_float_eq_tol(w[0], -0.25f, 1e-7); /* 1 - 0.5*2.5 */

    w[0] = 1.0f, s[0] = 5.0f;
    zp_optim_find("adagrad")->apply(w, s, g, 1, 1, &h, 0, 1.0f);
    ck_assert_float_eq_tol(s[0], 9.0f, 1e-6);  /* 5 + 4 */
    ck_assert_float_eq_tol(w[0], 0.75f, 1e-7); /* 1 - 0.5*2/(3+1) */

    w[0] = 1.0f, s[0] = 0.0f, s[1] = 0.0f;
    zp_optim_find("adam")->apply(w, s, g, 1, 1, &h, 0, 1.0f);
    ck_assert_float_eq_tol(s[0], 1.0f, 1e-7);     /* 0.5*2 */
    ck_assert_float_eq_tol(s[1], 1.0f, 1e-7);     /* 0.25*4 */
    ck_assert_float_eq_tol(w[0], 2.0f / 3, 1e-7); /* mhat 2, vhat 4: 1 - 0.5*2/(2+1) */
}
END_TEST

START_TEST(test_find)
{
    static const int spp[] = {0, 1, 1, 2};
    for (size_t i = 0; i < 4; i++) {
        const zp_optim_ops *ops = zp_optim_find(names[i]);
        ck_assert_ptr_nonnull(ops);
        ck_assert_str_eq(ops->name, names[i]);
        ck_assert_int_eq(ops->state_per_param, spp[i]);
        ck_assert_ptr_nonnull(ops->apply);
    }
    ck_assert_ptr_ne(zp_optim_find("sgd"), zp_optim_find("adam"));
    ck_assert_ptr_null(zp_optim_find("rmsprop"));
    ck_assert_ptr_null(zp_optim_find(""));
    ck_assert_ptr_null(zp_optim_find("SGD"));
    ck_assert_ptr_null(zp_optim_find("adamw"));
    ck_assert_ptr_null(zp_optim_find(NULL));
}
END_TEST

static zp_hyper good(void)
{
    zp_hyper h = {.lr = 0.01f};
    zp_hyper_defaults(&h);
    return h;
}

/* Expect rejection with a message containing `a` and `b`. */
static void expect_bad(const char *name, zp_hyper h, const char *a, const char *b)
{
    char err[256];
    memset(err, 'x', sizeof err);
    ck_assert_int_eq(zp_optim_validate(name, &h, err, sizeof err), ZEPS_EOPTIM);
    ck_assert_ptr_nonnull(memchr(err, '\0', sizeof err));
    ck_assert_msg(strstr(err, a) && strstr(err, b), "message '%s' lacks '%s' or '%s'", err, a, b);
}

START_TEST(test_validate_accepts)
{
    char err[128];
    zp_hyper h = good();
    for (size_t i = 0; i < 4; i++)
        ck_assert_int_eq(zp_optim_validate(names[i], &h, err, sizeof err), 0);
    ck_assert_str_eq(err, "");

    /* Edges of the allowed ranges. */
    h.momentum = 0.0f, h.beta1 = 0.0f, h.beta2 = 0.0f, h.weight_decay = 0.0f;
    ck_assert_int_eq(zp_optim_validate("momentum", &h, err, sizeof err), 0);
    ck_assert_int_eq(zp_optim_validate("adam", &h, err, sizeof err), 0);
    h = good();
    h.momentum = 0.999f, h.beta2 = 0.9999f, h.weight_decay = 1e-4f, h.lr = 10.0f;
    ck_assert_int_eq(zp_optim_validate("momentum", &h, err, sizeof err), 0);
    ck_assert_int_eq(zp_optim_validate("adam", &h, err, sizeof err), 0);

    /* Only the parameters an optimizer uses are checked. */
    h = good();
    h.momentum = 5.0f, h.beta1 = -1.0f, h.eps = 0.0f;
    ck_assert_int_eq(zp_optim_validate("sgd", &h, NULL, 0), 0);
    h = good();
    h.beta2 = 2.0f;
    ck_assert_int_eq(zp_optim_validate("momentum", &h, NULL, 0), 0);
    ck_assert_int_eq(zp_optim_validate("adam", &h, NULL, 0), ZEPS_EOPTIM);
}
END_TEST

START_TEST(test_validate_lr)
{
    for (size_t i = 0; i < 4; i++) {
        zp_hyper h = good();
        h.lr = 0.0f;
        expect_bad(names[i], h, names[i], "lr");
        h.lr = -0.1f;
        expect_bad(names[i], h, names[i], "lr");
        h.lr = NAN;
        expect_bad(names[i], h, "lr", "finite");
        h.lr = INFINITY;
        expect_bad(names[i], h, "lr", "finite");
    }
    char err[128];
    zp_hyper h = good();
    h.lr = 0.0f;
    zp_optim_validate("sgd", &h, err, sizeof err);
    ck_assert_str_eq(err, "sgd: lr = 0 must be > 0");
}
END_TEST

START_TEST(test_validate_momentum)
{
    zp_hyper h = good();
    h.momentum = 1.0f;
    expect_bad("momentum", h, "momentum:", "momentum = 1 must be in [0, 1)");
    h.momentum = -0.1f;
    expect_bad("momentum", h, "momentum:", "momentum = -0.1");
    h.momentum = NAN;
    expect_bad("momentum", h, "momentum = nan", "finite");
}
END_TEST

START_TEST(test_validate_betas_eps_wd)
{
    char err[128];
    zp_hyper h = good();
    h.beta2 = 1.5f;
    ck_assert_int_eq(zp_optim_validate("adam", &h, err, sizeof err), ZEPS_EOPTIM);
    ck_assert_str_eq(err, "adam: beta2 = 1.5 must be in [0, 1)");
    h = good();
    h.beta1 = 1.0f;
    expect_bad("adam", h, "adam", "beta1");
    h.beta1 = -0.5f;
    expect_bad("adam", h, "adam", "beta1");
    h = good();
    h.beta2 = 1.0f;
    expect_bad("adam", h, "adam", "beta2");

    for (int i = 0; i < 2; i++) {
        const char *name = i ? "adam" : "adagrad";
        h = good();
        h.eps = 0.0f;
        expect_bad(name, h, name, "eps = 0 must be > 0");
        h.eps = -1e-8f;
        expect_bad(name, h, name, "eps");
        h.eps = INFINITY;
        expect_bad(name, h, name, "eps");
    }

    for (size_t i = 0; i < 4; i++) {
        h = good();
        h.weight_decay = -0.01f;
        expect_bad(names[i], h, names[i], "weight_decay");
        h.weight_decay = NAN;
        expect_bad(names[i], h, names[i], "weight_decay");
    }
}
END_TEST

START_TEST(test_validate_unknown)
{
    char err[128], tiny[8];
    zp_hyper h = good();
    expect_bad("rmsprop", h, "rmsprop", "sgd, momentum, adagrad, adam");
    expect_bad("", h, "unknown", "adam");
    ck_assert_int_eq(zp_optim_validate(NULL, &h, err, sizeof err), ZEPS_EOPTIM);
    /* A short buffer is truncated and terminated; NULL err is fine. */
    memset(tiny, 'x', sizeof tiny);
    ck_assert_int_eq(zp_optim_validate("rmsprop", &h, tiny, sizeof tiny), ZEPS_EOPTIM);
    ck_assert_int_eq(tiny[sizeof tiny - 1], '\0');
    ck_assert_int_eq(zp_optim_validate("rmsprop", &h, NULL, 0), ZEPS_EOPTIM);
    h.lr = -1.0f;
    memset(tiny, 'x', sizeof tiny);
    ck_assert_int_eq(zp_optim_validate("adam", &h, tiny, sizeof tiny), ZEPS_EOPTIM);
    ck_assert_int_eq(tiny[sizeof tiny - 1], '\0');
}
END_TEST

START_TEST(test_defaults)
{
    zp_hyper h = {.lr = 0.3f};
    zp_hyper_defaults(&h);
    ck_assert_float_eq(h.lr, 0.3f);
    ck_assert_float_eq(h.momentum, 0.9f);
    ck_assert_float_eq(h.beta1, 0.9f);
    ck_assert_float_eq(h.beta2, 0.999f);
    ck_assert_float_eq(h.eps, 1e-8f);
    ck_assert_float_eq(h.weight_decay, 0.0f);

    zp_hyper k = {.lr = 0.1f,
                  .momentum = 0.5f,
                  .beta1 = 0.6f,
                  .beta2 = 0.7f,
                  .eps = 1e-3f,
                  .weight_decay = 0.01f};
    zp_hyper_defaults(&k);
    ck_assert_float_eq(k.momentum, 0.5f);
    ck_assert_float_eq(k.beta1, 0.6f);
    ck_assert_float_eq(k.beta2, 0.7f);
    ck_assert_float_eq(k.eps, 1e-3f);
    ck_assert_float_eq(k.weight_decay, 0.01f);
}
END_TEST

/* Sharding must not change a single bit: an update applied over [0,k) and
 * [k,n) separately (as two shards, with the slice length as state stride)
 * equals the update applied over [0,n) at once, for several split points
 * that hit vector-loop tails. */
START_TEST(test_split_bit_identical)
{
    static const char *const optim_names[] = {"sgd", "momentum", "adagrad", "adam"};
    const zp_optim_ops *ops = zp_optim_find(optim_names[_i]);
    const size_t n = 1031;
    const size_t splits[] = {1, 7, 16, 513, 1030};
    zp_hyper h = {.lr = 0.05f, .weight_decay = 0.01f};
    zp_hyper_defaults(&h);
    int sp = ops->state_per_param;
    for (size_t si = 0; si < sizeof(splits) / sizeof(splits[0]); si++) {
        size_t k = splits[si];
        float *w1 = malloc(n * sizeof(float)), *w2 = malloc(n * sizeof(float));
        float *s1 = calloc((size_t)sp * n + 1, sizeof(float));
        float *s2 = calloc((size_t)sp * n + 1, sizeof(float));
        float *g = malloc(n * sizeof(float));
        uint64_t seed = 99;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            w1[i] = w2[i] = (float)((seed >> 40) % 2000) / 1000.0f - 1.0f;
        }
        for (int step = 0; step < 5; step++) {
            for (size_t i = 0; i < n; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                g[i] = (float)((seed >> 40) % 2000) / 1000.0f - 1.0f;
            }
            ops->apply(w1, s1, g, n, n, &h, (uint64_t)step, 0.25f);
            ops->apply(w2, s2, g, k, n, &h, (uint64_t)step, 0.25f);
            ops->apply(w2 + k, s2 + k, g + k, n - k, n, &h, (uint64_t)step, 0.25f);
        }
        ck_assert_msg(memcmp(w1, w2, n * sizeof(float)) == 0, "%s: split at %zu changed w",
                      optim_names[_i], k);
        ck_assert_msg(memcmp(s1, s2, (size_t)sp * n * sizeof(float)) == 0,
                      "%s: split at %zu changed state", optim_names[_i], k);
        free(w1);
        free(w2);
        free(s1);
        free(s2);
        free(g);
    }
}
END_TEST

/* The kernels' bench (optim/kbench.c, `zeps-server --bench-apply`) on two
 * small sizes, its buffers taken from a heap that fills each new block
 * with 0xfe bytes (glibc's M_PERTURB), so that a float it left unset is
 * -1.7e38 (adagrad's square root of it NaN): a table per size, and every
 * weight and optimizer state finite at the end (no "error:" line, 0). */
START_TEST(test_kbench_small)
{
    static const size_t sizes[] = {1000, 4099};
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(out);
    mallopt(M_PERTURB, 1);
    int rc = zp_kbench_run(out, sizes, 2, 3);
    mallopt(M_PERTURB, 0);
    fclose(out);
    ck_assert_msg(rc == 0 && strstr(text, "error") == NULL, "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "\n1000 floats"));
    ck_assert_ptr_nonnull(strstr(text, "\n4099 floats"));
    ck_assert_ptr_nonnull(strstr(text, "adam fused check"));
    free(text);
}
END_TEST

/* The bench's figures are the timed runs': with a clock that moves 1 ms
 * at each reading, every kernel takes 1.000 ms (the runs' time, not
 * memory the runs never wrote), so every ratio is 1.000. */
START_TEST(test_kbench_timed)
{
    static const size_t sizes[] = {1000};
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(out);
    fake_ns = 1;
    int rc = zp_kbench_run(out, sizes, 1, 3);
    fake_ns = 0;
    fclose(out);
    ck_assert_int_eq(rc, 0);
    const char *saxpy = strstr(text, "saxpy (OpenBLAS)");
    double ms = 0;
    ck_assert(saxpy && sscanf(saxpy + strlen("saxpy (OpenBLAS)"), "%lf", &ms) == 1);
    ck_assert_msg(ms == 1.0, "%s", text);
    ck_assert_msg(strstr(text, "momentum 1.000 adagrad 1.000 adam 1.000") != NULL, "%s", text);
    free(text);
}
END_TEST

static Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("update");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_matches_reference, 0, (int)(4 * NSETTINGS));
    tcase_add_loop_test(tc, test_large, 0, 4);
    tcase_add_loop_test(tc, test_single_element, 0, 4);
    tcase_add_loop_test(tc, test_empty, 0, 4);
    tcase_add_test(tc, test_known_values);
    tcase_add_loop_test(tc, test_split_bit_identical, 0, 4);
    tcase_add_test(tc, test_kbench_small);
    tcase_add_test(tc, test_kbench_timed);
    suite_add_tcase(s, tc);

    tc = tcase_create("api");
    tcase_add_test(tc, test_find);
    tcase_add_test(tc, test_validate_accepts);
    tcase_add_test(tc, test_validate_lr);
    tcase_add_test(tc, test_validate_momentum);
    tcase_add_test(tc, test_validate_betas_eps_wd);
    tcase_add_test(tc, test_validate_unknown);
    tcase_add_test(tc, test_defaults);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    return zt_run_suite(optim_suite());
}
