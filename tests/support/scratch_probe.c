/*
 * scratch_probe.c - a Check program for tests/system/test_scratch.sh: its
 * one test makes a scratch folder and a file in it, prints the folder's
 * path, and fails an assertion when $ZT_PROBE_FAIL is set and not empty. The script then
 * looks for what is left.
 */
#include <stdio.h>
#include <stdlib.h>

#include "check_main.h"

START_TEST(test_make_then_maybe_fail)
{
    char dir[512], file[600];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "probe"), 0);
    snprintf(file, sizeof(file), "%s/data", dir);
    zt_scratch_write(file, "x\n");
    printf("scratch folder %s\n", dir);
    fflush(stdout);
    const char *fail = getenv("ZT_PROBE_FAIL");
    ck_assert_msg(!fail || !*fail, "failing on purpose (ZT_PROBE_FAIL)");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scratch_probe");
    TCase *tc = tcase_create("probe");
    tcase_add_test(tc, test_make_then_maybe_fail);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
