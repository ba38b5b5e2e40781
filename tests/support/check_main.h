/*
 * check_main.h - the one way every Check suite of zeps runs: all test
 * cases, normal output, exit status 0 only if nothing failed, every scratch
 * folder the tests made removed afterwards (scratch.h).
 */
#ifndef ZT_CHECK_MAIN_H
#define ZT_CHECK_MAIN_H

#include <check.h>
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

#endif
