/*
 * test_optim_checked.c - unit tests for the checked apply of dense slices
 * (zp_optim_apply_checked, the sgd kernel that reads a gradient once, and
 * the momentum kernel fused into one pass).
 *
 * A push with one NaN or Inf must change nothing: each optimizer is given a
 * gradient with a bad value first, in a middle chunk, and as the very last
 * element (the last chunk of the fused kernel, where an undo that missed the
 * chunk in hand, or a check that ran after the apply, would show), and its
 * weights and state must keep their bits. A good gradient must give exactly
 * the bits of `apply`.
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

/* Three fused chunks (4096 floats) and a tail, so every path has a middle
 * chunk, a last chunk and a vector remainder. */
#define N (3 * 4096 + 37)

static const char *const names[] = {"sgd", "momentum", "adagrad", "adam"};
#define NNAMES (sizeof(names) / sizeof(names[0]))

static float val(uint32_t i, uint32_t seed)
{
    uint32_t x = i * 2654435761u + seed * 40503u;
    x ^= x >> 13;
    return ((float)(x % 2001) - 1000.0f) * 1e-3f;
}

static zp_hyper hyper(int wd)
{
    return (zp_hyper){.lr = 0.05f,
                      .momentum = 0.9f,
                      .beta1 = 0.9f,
                      .beta2 = 0.999f,
                      .eps = 1e-6f,
                      .weight_decay = wd ? 0.01f : 0.0f};
}

typedef struct slice {
    float w[N], s[2 * N], g[N];
} slice;

static void fill(slice *a, uint32_t seed)
{
    for (uint32_t i = 0; i < N; i++) {
        a->w[i] = val(i, seed);
        a->g[i] = val(i, seed + 1) * 0.1f;
        a->s[i] = fabsf(val(i, seed + 2)) * 0.01f;
        a->s[N + i] = fabsf(val(i, seed + 3)) * 0.01f;
    }
}

/* A good gradient: the checked apply (consuming g, or not) gives the bits
 * of apply, for every optimizer, with and without weight decay, at a few
 * steps so state builds up. */
START_TEST(test_good_matches_apply)
{
    const zp_optim_ops *o = zp_optim_find(names[_i % NNAMES]);
    int wd = _i / (int)NNAMES;
    zp_hyper h = hyper(wd);
    static slice a, b, c;
    fill(&a, 11);
    b = a;
    c = a;
    for (uint64_t step = 0; step < 3; step++) {
        float gown[N];
        memcpy(gown, a.g, sizeof gown);
        o->apply(a.w, a.s, a.g, N, N, &h, step, 0.5f);
        ck_assert(zp_optim_apply_checked(o, b.w, b.s, gown, gown, N, N, &h, step, 0.5f));
        ck_assert(zp_optim_apply_checked(o, c.w, c.s, c.g, NULL, N, N, &h, step, 0.5f));
    }
    ck_assert_msg(memcmp(a.w, b.w, sizeof a.w) == 0, "%s wd=%d: consuming path, weights", o->name,
                  wd);
    ck_assert_msg(memcmp(a.s, b.s, sizeof a.s) == 0, "%s wd=%d: consuming path, state", o->name,
                  wd);
    ck_assert_msg(memcmp(a.w, c.w, sizeof a.w) == 0, "%s wd=%d: checking path", o->name, wd);
    ck_assert(memcmp(a.s, c.s, sizeof a.s) == 0);
}
END_TEST

/* A bad value anywhere: nothing changes, bit for bit, weights and state. */
START_TEST(test_bad_applies_nothing)
{
    static const size_t where[] = {0, 4096 + 5, N - 1, 3 * 4096 - 1, 3 * 4096};
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    const zp_optim_ops *o = zp_optim_find(names[_i % NNAMES]);
    int wd = (_i / (int)NNAMES) % 2, own = _i / (2 * (int)NNAMES);
    zp_hyper h = hyper(wd);
    static slice a, before;
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++)
        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) {
            fill(&a, 5 + (uint32_t)k);
            a.g[where[k]] = bad[j];
            before = a;
            bool ok = zp_optim_apply_checked(o, a.w, a.s, a.g, own ? a.g : NULL, N, N, &h, 4,
                                             1.0f);
            ck_assert_msg(!ok, "%s: a bad value at %zu was applied", o->name, where[k]);
            ck_assert_msg(memcmp(a.w, before.w, sizeof a.w) == 0,
                          "%s wd=%d own=%d: weights changed by a refused gradient (bad at %zu)",
                          o->name, wd, own, where[k]);
            ck_assert_msg(memcmp(a.s, before.s, sizeof a.s) == 0,
                          "%s wd=%d own=%d: state changed by a refused gradient (bad at %zu)",
                          o->name, wd, own, where[k]);
            if (!own)
                ck_assert(memcmp(a.g, before.g, sizeof a.g) == 0); /* not consumed */
        }
}
END_TEST

/* The one-pass momentum kernel makes the roundings of the four BLAS-1
 * steps it replaced: v *= mu; v = fma(scale, g, v); v = fma(wd, w, v);
 * w = fma(-lr, v, w). */
START_TEST(test_momentum_as_blas1)
{
    int wd = _i;
    zp_hyper h = hyper(wd);
    static slice a, b;
    fill(&a, 21);
    b = a;
    for (uint64_t step = 0; step < 4; step++) {
        zp_momentum_ops.apply(a.w, a.s, a.g, N, N, &h, step, 0.25f);
        zp_vec_scal(N, h.momentum, b.s);
        zp_vec_axpy(N, 0.25f, b.g, b.s);
        if (wd)
            zp_vec_axpy(N, h.weight_decay, b.w, b.s);
        zp_vec_axpy(N, -h.lr, b.s, b.w);
    }
    ck_assert(memcmp(a.w, b.w, sizeof a.w) == 0);
    ck_assert(memcmp(a.s, b.s, sizeof a.s) == 0);
}
END_TEST

/* Empty and one-element slices go through every path. */
START_TEST(test_small)
{
    zp_hyper h = hyper(0);
    for (size_t i = 0; i < NNAMES; i++) {
        const zp_optim_ops *o = zp_optim_find(names[i]);
        float w = 1.0f, s[2] = {0, 0}, g = 0.5f, bad = NAN;
        ck_assert(zp_optim_apply_checked(o, NULL, NULL, NULL, NULL, 0, 0, &h, 0, 1.0f));
        ck_assert(zp_optim_apply_checked(o, &w, s, &g, &g, 1, 1, &h, 0, 1.0f));
        ck_assert(w < 1.0f);
        float w0 = w;
        ck_assert(!zp_optim_apply_checked(o, &w, s, &bad, &bad, 1, 1, &h, 1, 1.0f));
        ck_assert(w == w0);
    }
}
END_TEST

static Suite *checked_suite(void)
{
    Suite *s = suite_create("optim_checked");
    TCase *tc = tcase_create("checked");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_good_matches_apply, 0, (int)(2 * NNAMES));
    tcase_add_loop_test(tc, test_bad_applies_nothing, 0, (int)(4 * NNAMES));
    tcase_add_loop_test(tc, test_momentum_as_blas1, 0, 2);
    tcase_add_test(tc, test_small);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    return zt_run_suite(checked_suite());
}
