/*
 * test_sparse_lead.c - lead columns of a sparse table (server/table/
 * sparse.c): the first lead_cols values of every row with their own step
 * and initializer. Their bad values are in test_sparse.c (test_bad_opts).
 */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "sparse.h"
#include "sparse_fixture.h"

/* A table of dim 6 whose first 2 columns are lead columns (lead_lr, normal
 * 0.3) is, column for column, a dim-2 table with lr lead_lr and init
 * normal 0.3 beside a dim-6 table with the table's lr and init (uniform
 * 0.05): the same bits, from the first values on and after the same
 * pushes, for adam (two state blocks: the stride must be the row's dim)
 * and adagrad. */
START_TEST(test_lead_cols)
{
    const char *const names[] = {"adam", "adagrad"};
    const uint32_t dim = 6, a = 2;
    const uint64_t ids[] = {3, 99, 1ull << 40, 5};
    const size_t n = sizeof ids / sizeof ids[0];
    for (int k = 0; k < 2; k++) {
        zp_sparse_opts o = base_opts(names[k], dim), lo = base_opts(names[k], a);
        o.lead_cols = a;
        o.lead_lr = 0.37f;
        o.lead_init = lo.init = ZP_INIT_NORMAL;
        o.lead_init_scale = lo.init_scale = 0.3;
        lo.lr = 0.37f;
        zp_sparse_opts ro = base_opts(names[k], dim);
        zp_sparse *t = make(&o), *tl = make(&lo), *tr = make(&ro);
        float g[4 * 6], gl[4 * 2];
        uint64_t seed = 5;
        for (int step = 0; step < 7; step++) {
            for (size_t i = 0; i < n * dim; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                g[i] = (float)((seed >> 40) % 2000) / 1000.0f - 1.0f;
            }
            for (size_t i = 0; i < n; i++)
                memcpy(&gl[i * a], &g[i * dim], a * sizeof(float));
            ck_assert_uint_eq(zp_sparse_push(t, ids, n, g, 0.5f, step, NULL, NULL, NULL), n);
            zp_sparse_push(tl, ids, n, gl, 0.5f, step, NULL, NULL, NULL);
            zp_sparse_push(tr, ids, n, g, 0.5f, step, NULL, NULL, NULL);
        }
        for (size_t i = 0; i < n; i++) {
            zp_sparse_row r, rl, rr;
            ck_assert(zp_sparse_get(t, ids[i], &r) && zp_sparse_get(tl, ids[i], &rl) &&
                      zp_sparse_get(tr, ids[i], &rr));
            ck_assert_mem_eq(r.values, rl.values, a * sizeof(float));
            ck_assert_mem_eq(r.values + a, rr.values + a, (dim - a) * sizeof(float));
            for (int b = 0; b < zp_sparse_state_per_value(t); b++) {
                ck_assert_mem_eq(r.state + b * dim, rl.state + b * a, a * sizeof(float));
                ck_assert_mem_eq(r.state + b * dim + a, rr.state + b * dim + a,
                                 (dim - a) * sizeof(float));
            }
            ck_assert(r.values[0] != rr.values[0]); /* the lead step differs */
        }
        /* a fresh row: element k of the lead init, then of the table's */
        float f[6], fl[2], fr[6];
        zp_sparse_init_row(t, 777, f);
        zp_sparse_init_row(tl, 777, fl);
        zp_sparse_init_row(tr, 777, fr);
        ck_assert(f[0] != 0 && f[0] != fr[0]);
        ck_assert_mem_eq(f, fl, a * sizeof(float));
        ck_assert_mem_eq(f + a, fr + a, (dim - a) * sizeof(float));
        zp_sparse_destroy(&t);
        zp_sparse_destroy(&tl);
        zp_sparse_destroy(&tr);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sparse_lead");
    ZT_SPARSE_ADD(s, test_lead_cols);
    return zt_run_suite(s);
}
