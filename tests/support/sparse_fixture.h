/*
 * sparse_fixture.h - what the sparse store's tests share (test_sparse: the
 * store and its optimizers; test_sparse_evict: admission and eviction):
 * base_opts for a small table, make for a table that must be created,
 * counters for its counters now, and ZT_SPARSE_ADD to give each test its own case. Static inline helpers that
 * assert with Check: call them from a test. The caller owns every table
 * make returns (zp_sparse_destroy).
 */
#ifndef ZT_SPARSE_FIXTURE_H
#define ZT_SPARSE_FIXTURE_H

#include <check.h>
#include "sparse.h"

static inline zp_sparse_opts base_opts(const char *optim, uint32_t dim)
{
    zp_sparse_opts o = {
        .dim = dim,
        .optimizer = optim,
        .lr = 0.1f,
        .init = ZP_INIT_UNIFORM,
        .init_scale = 0.05,
        .seed = 42,
    };
    return o;
}

static inline zp_sparse *make(const zp_sparse_opts *o)
{
    char err[256] = "";
    zp_sparse *t = NULL;
    int rc = zp_sparse_new(&t, o, err, sizeof err);
    ck_assert_msg(rc == 0, "zp_sparse_new: %s", err);
    return t;
}

static inline zp_sparse_counters counters(const zp_sparse *t)
{
    zp_sparse_counters c;
    zp_sparse_get_counters(t, &c);
    return c;
}

/* One test case per test, so CK_RUN_CASE=<name> runs one. */
#define ZT_SPARSE_ADD(s, fn)                                                                       \
    do {                                                                                           \
        TCase *tc = tcase_create(#fn + 5);                                                         \
        tcase_set_timeout(tc, 120);                                                                \
        tcase_add_test(tc, fn);                                                                    \
        suite_add_tcase(s, tc);                                                                    \
    } while (0)

#endif
