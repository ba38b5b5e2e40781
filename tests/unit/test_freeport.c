/*
 * test_freeport.c - the free-port picker (common/freeport.c): a port is
 * below the ephemeral range and bindable, and never one of the last 64 the
 * process picked. 640 picks: without the memory of recent picks two of 64
 * in a row coincide with probability 1 - e^(-640 * 63 / 12768), about 96 %
 * of runs (a cluster file of a test once got one port twice that way).
 */
#include <check.h>

#include "check_main.h"
#include "freeport.h"

START_TEST(test_recent_ports_not_picked_again)
{
    enum { N = 640, RECENT = 64 };
    static int port[N];
    for (int i = 0; i < N; i++) {
        port[i] = zp_freeport_pick();
        ck_assert_int_ge(port[i], 20000);
        ck_assert_int_lt(port[i], 65536);
        for (int j = i - RECENT + 1 > 0 ? i - RECENT + 1 : 0; j < i; j++)
            ck_assert_msg(port[j] != port[i], "pick %d gave port %d again (pick %d)", i, port[i],
                          j);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("freeport");
    TCase *tc = tcase_create("freeport");
    tcase_add_test(tc, test_recent_ports_not_picked_again);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
