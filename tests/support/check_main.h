/*
 * check_main.h - the one way every Check suite of zeps runs: all test
 * cases, normal output, exit status 0 only if nothing failed, every scratch
 * folder the tests made removed afterwards (scratch.h); zt_run_cases
 * makes the suite from a table of its cases.
 */
#ifndef ZT_CHECK_MAIN_H
#define ZT_CHECK_MAIN_H

#include <check.h>
#include <stddef.h>
#include <stdlib.h>

#include "scratch.h"

static inline int zt_run_suite(Suite *s)
{
    zt_scratch_begin();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    zt_scratch_end();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#define ZT_CASE_TESTS 16 /* the tests of one case at the most */

/* A test case: its name (CK_RUN_CASE=<name> runs it alone), its timeout
 * in seconds (0: Check's default), and its tests in order, up to the
 * first NULL. */
typedef struct zt_case {
    const char *name;
    double timeout_s;
    const TTest *tests[ZT_CASE_TESTS];
} zt_case;

/* zt_run_suite of the suite `name` made of cases[0..n). */
static inline int zt_run_cases(const char *name, const zt_case *cases, size_t n)
{
    Suite *s = suite_create(name);
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(cases[i].name);
        if (cases[i].timeout_s > 0)
            tcase_set_timeout(tc, cases[i].timeout_s);
        for (size_t k = 0; k < ZT_CASE_TESTS && cases[i].tests[k]; k++)
            tcase_add_test(tc, cases[i].tests[k]);
        suite_add_tcase(s, tc);
    }
    return zt_run_suite(s); /* which frees s with its runner */
}

#endif
