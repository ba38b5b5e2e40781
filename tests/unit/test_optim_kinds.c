/*
 * test_optim_kinds.c - one optimizer ops table for dense slices and sparse
 * rows (server/optim/).
 *
 * Every optimizer with both kernels is applied to a slice and, row by row,
 * to the same values with the same gradients; the two must follow the same
 * formulas (the slice kernel works in f32, the row kernel in double, so they
 * agree to f32 rounding, not bit for bit). Then which kernels exist, what
 * validation says of the missing ones, and the vector step every slice
 * kernel is built on: one exact fused multiply-add per element.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "mathenv.h"
#include "optim.h"
#include "vec.h"
#include "zeps_errors.h"

#define DIM   8u
#define ROWS  64u
#define STEPS 25

static float rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) % 20000) / 10000.0f - 1.0f;
}

/* Relative agreement of f32 slice results with rows (sgd and adam rows
 * compute in double, then round). */
static void expect_near(const char *opt, const char *what, size_t i, float slice, float row)
{
    double tol = 2e-5 * fabs((double)row) + 1e-6; /* floor: values that cancel to ~0 */
    ck_assert_msg(fabs((double)slice - (double)row) <= tol, "%s: %s[%zu] slice %.9g row %.9g",
                  opt, what, i, (double)slice, (double)row);
}

static const char *const both_kinds[] = {"sgd", "adagrad", "adam"};

START_TEST(test_slice_equals_rows)
{
    const zp_optim_ops *o = zp_optim_find(both_kinds[_i]);
    ck_assert_ptr_nonnull(o);
    ck_assert_ptr_nonnull(o->apply);
    ck_assert_ptr_nonnull(o->apply_row);
    const size_t n = (size_t)ROWS * DIM;
    const int sp = o->state_per_param;
    zp_hyper h = {.lr = 0.05f, .weight_decay = 0.01f};
    zp_hyper_defaults(&h);
    float *ws = malloc(n * sizeof(float)), *wr = malloc(n * sizeof(float));
    float *ss = calloc((size_t)sp * n + 1, sizeof(float));
    float *sr = calloc((size_t)sp * n + 1, sizeof(float)); /* row r's state at sr + r*sp*DIM */
    float *g = malloc(n * sizeof(float));
    uint64_t seed = 7;
    for (size_t i = 0; i < n; i++)
        ws[i] = wr[i] = rnd(&seed);
    for (int step = 0; step < STEPS; step++) {
        for (size_t i = 0; i < n; i++)
            g[i] = rnd(&seed);
        o->apply(ws, ss, g, n, n, &h, (uint64_t)step, 0.5f);
        for (uint32_t r = 0; r < ROWS; r++)
            o->apply_row(&h, DIM, DIM, wr + (size_t)r * DIM, sr + (size_t)r * sp * DIM,
                         g + (size_t)r * DIM, 0.5f, (uint32_t)step);
    }
    if (strcmp(o->name, "adagrad") == 0) { /* the row runs the slice's own f32 loop */
        ck_assert_mem_eq(ws, wr, n * sizeof(float));
        ck_assert_mem_eq(ss, sr, n * sizeof(float));
    }
    for (size_t i = 0; i < n; i++) {
        expect_near(o->name, "w", i, ws[i], wr[i]);
        size_t r = i / DIM, j = i % DIM;
        for (int k = 0; k < sp; k++) /* slice block k of element i vs row r's block k */
            expect_near(o->name, "state", i, ss[(size_t)k * n + i],
                        sr[(r * (size_t)sp + (size_t)k) * DIM + j]);
    }
    free(ws);
    free(wr);
    free(ss);
    free(sr);
    free(g);
}
END_TEST

/* A row updated in two calls, columns [0, a) and [a, DIM) with the row's
 * dim as the state stride, ends the same bits as one call over the row:
 * what a sparse table with lead columns (sparse.c) relies on. Every row
 * optimizer, including the two with two state blocks (adam, ftrl). */
static const char *const row_kinds[] = {"sgd", "adagrad", "adam", "ftrl"};

START_TEST(test_row_split_same_bits)
{
    const zp_optim_ops *o = zp_optim_find(row_kinds[_i]);
    ck_assert_ptr_nonnull(o->apply_row);
    const uint32_t sp = (uint32_t)o->state_per_param, a = 3;
    zp_hyper h = {.lr = 0.05f, .weight_decay = 0.01f, .l1 = 0.01f, .l2 = 0.1f, .ftrl_beta = 1};
    zp_hyper_defaults(&h);
    float w1[DIM], w2[DIM], s1[2 * DIM] = {0}, s2[2 * DIM] = {0}, g[DIM];
    uint64_t seed = 11;
    for (uint32_t j = 0; j < DIM; j++)
        w1[j] = w2[j] = rnd(&seed);
    for (uint32_t step = 0; step < STEPS; step++) {
        for (uint32_t j = 0; j < DIM; j++)
            g[j] = rnd(&seed);
        o->apply_row(&h, DIM, DIM, w1, s1, g, 0.5f, step);
        o->apply_row(&h, a, DIM, w2, s2, g, 0.5f, step);
        o->apply_row(&h, DIM - a, DIM, w2 + a, s2 + a, g + a, 0.5f, step);
    }
    ck_assert_mem_eq(w1, w2, sizeof w1);
    ck_assert_mem_eq(s1, s2, sp * DIM * sizeof(float));
}
END_TEST

/* The kernels that exist, and what a declaration of a missing one hears. */
START_TEST(test_kinds)
{
    char names[128], err[200];
    zp_hyper h = {.lr = 0.1f};
    zp_hyper_defaults(&h);

    zp_optim_names(ZP_OPTIM_SLICE, names, sizeof names);
    ck_assert_str_eq(names, "sgd, momentum, adagrad, adam");
    zp_optim_names(ZP_OPTIM_ROW, names, sizeof names);
    ck_assert_str_eq(names, "sgd, adagrad, adam, ftrl");
    ck_assert_ptr_null(zp_optim_find("momentum")->apply_row);
    ck_assert_ptr_null(zp_optim_find("ftrl")->apply);
    ck_assert_int_eq(zp_optim_validate("ftrl", &h, err, sizeof err), ZEPS_EOPTIM);
    ck_assert_msg(strstr(err, "sparse tables only") != NULL, "%s", err);
    /* only sgd may take a compressed gradient straight into w */
    ck_assert(zp_optim_find("sgd")->linear);
    ck_assert(!zp_optim_find("momentum")->linear);
    ck_assert(!zp_optim_find("adagrad")->linear);
    ck_assert(!zp_optim_find("adam")->linear);
    /* a short buffer is cut and terminated */
    char tiny[6];
    zp_optim_names(ZP_OPTIM_ROW, tiny, sizeof tiny);
    ck_assert_int_eq(tiny[sizeof tiny - 1], '\0');
}
END_TEST

/* y = fma(a, x, y), one rounding, for every element and every length: the
 * same bits as fmaf however the loop is vectorised, and not the bits of a
 * separate multiply and add (which differ for some of these inputs). */
START_TEST(test_vec_axpy_is_fma)
{
    const size_t n = 1037;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    float *want = malloc(n * sizeof(float));
    uint64_t seed = 3;
    const float a = -0.0123456f;
    size_t unfused_differs = 0;
    for (size_t len = 0; len <= n; len += len < 40 ? 1 : 331) {
        for (size_t i = 0; i < n; i++) {
            x[i] = rnd(&seed);
            y[i] = rnd(&seed);
            want[i] = i < len ? fmaf(a, x[i], y[i]) : y[i];
            volatile float p = a * x[i];
            unfused_differs += i < len && (float)(p + y[i]) != want[i];
        }
        zp_vec_axpy(len, a, x, y);
        ck_assert_msg(memcmp(y, want, n * sizeof(float)) == 0, "axpy of length %zu", len);
    }
    ck_assert_uint_gt(unfused_differs, 0); /* the test can tell the two apart */
    free(x);
    free(y);
    free(want);
}
END_TEST

static Suite *kinds_suite(void)
{
    Suite *s = suite_create("optim_kinds");
    TCase *tc = tcase_create("kinds");
    tcase_add_loop_test(tc, test_slice_equals_rows, 0,
                        (int)(sizeof(both_kinds) / sizeof(both_kinds[0])));
    tcase_add_loop_test(tc, test_row_split_same_bits, 0,
                        (int)(sizeof(row_kinds) / sizeof(row_kinds[0])));
    tcase_add_test(tc, test_kinds);
    tcase_add_test(tc, test_vec_axpy_is_fma);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    return zt_run_suite(kinds_suite());
}
