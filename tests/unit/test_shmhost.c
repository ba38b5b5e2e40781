/*
 * test_shmhost.c - the shard's side of the shared-memory transport on its
 * own (server/xport/shmhost.c): its abstract unix socket's name, the
 * tokens, and a start that cannot bind (the name taken by another shard of
 * the same incarnation) refused with the reason and no descriptor left
 * open. The attach protocol itself runs with real processes in test_shm.
 */
#include <check.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "check_main.h"
#include "shmhost.h"
#include "zeps_errors.h"

/* The lowest free descriptor number. */
static int lowest_free_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(fd, 0);
    close(fd);
    return fd;
}

START_TEST(test_name_and_tokens)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    zp_shmhost x;
    char err[256];
    ck_assert_int_eq(zp_shmhost_start(&x, &loop, 3, 0xabcdefull, err, sizeof(err)), 0);
    ck_assert(x.on);
    ck_assert_str_eq(x.name, "@zeps-shm-0000000000abcdef-3");
    uint64_t t = zp_shmhost_token(&x, 1, 7);
    ck_assert_uint_eq(t & 1, 1);
    ck_assert_uint_eq(zp_shmhost_token(&x, 1, 7), t);
    ck_assert_uint_ne(zp_shmhost_token(&x, 2, 7), t);
    ck_assert_uint_ne(zp_shmhost_token(&x, 1, 8), t);
    zp_shmhost_stop(&x);
    ck_assert(!x.on);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(x.lfd, -1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_name_taken)
{
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    zp_shmhost a, b;
    char err[256] = "";
    uint64_t inc = 0x5eed0000ull + (uint64_t)getpid();
    ck_assert_int_eq(zp_shmhost_start(&a, &loop, 0, inc, err, sizeof(err)), 0);
    int free_fd = lowest_free_fd();
    ck_assert_int_eq(zp_shmhost_start(&b, &loop, 0, inc, err, sizeof(err)), ZEPS_ETRANSPORT);
    ck_assert_msg(strstr(err, a.name) && strstr(err, "in use"), "%s", err);
    ck_assert(!b.on);
    ck_assert_int_eq(b.lfd, -1);
    ck_assert_int_eq(lowest_free_fd(), free_fd); /* its socket was closed */
    zp_shmhost_stop(&b);                         /* a host that never started: nothing to do */
    zp_shmhost_stop(&a);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shmhost");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_name_and_tokens);
    tcase_add_test(tc, test_name_taken);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
