/*
 * test_errors.c - the error table: every code has a distinct name and text,
 * and the numbers that travel on the wire are stable.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "zeps_errors.h"

START_TEST(test_names_and_texts)
{
    /* The codes are not contiguous (numbers are reserved per feature): walk
     * the table itself. */
    static const int codes[] = {
#define X_(name, num, text) num,
        ZEPS_ERROR_TABLE(X_)
#undef X_
    };
    int n = (int)(sizeof(codes) / sizeof(codes[0]));
    for (int a = 0; a < n; a++) {
        int i = codes[a];
        ck_assert_str_ne(zeps_errname(i), "UNKNOWN");
        ck_assert_str_ne(zeps_strerror(i), "unknown error");
        for (int b = 0; b < a; b++) {
            int j = codes[b];
            ck_assert_str_ne(zeps_errname(i), zeps_errname(j));
            ck_assert_str_ne(zeps_strerror(i), zeps_strerror(j));
        }
    }
    ck_assert_str_eq(zeps_errname(ZEPS_ERR_COUNT_), "UNKNOWN");
    ck_assert_str_eq(zeps_strerror(-1), "unknown error");
}
END_TEST

START_TEST(test_wire_numbers_stable)
{
    /* These numbers are part of the protocol (docs/protocol.md). */
    ck_assert_int_eq(ZEPS_OK, 0);
    ck_assert_int_eq(ZEPS_EPROTO, 3);
    ck_assert_int_eq(ZEPS_EVERSION, 4);
    ck_assert_int_eq(ZEPS_ETABLE, 6);
    ck_assert_int_eq(ZEPS_ESIZE, 9);
    ck_assert_int_eq(ZEPS_ENONFINITE, 10);
    ck_assert_str_eq(zeps_errname(ZEPS_ENONFINITE), "ENONFINITE");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_names_and_texts);
    tcase_add_test(tc, test_wire_numbers_stable);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
