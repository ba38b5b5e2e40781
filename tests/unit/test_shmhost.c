/*
 * test_shmhost.c - the shard's side of the shared-memory transport on its
 * own (server/xport/shmhost.c): its abstract unix socket's name, the
 * tokens, and a start that cannot bind (the name taken by another shard of
 * the same incarnation) refused with the reason and no descriptor left
 * open. The attach protocol itself runs with real processes in test_shm.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
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

/* shmhost.c's MAX_CONNS: the connections a shard keeps at once. */
enum { MAX_CONNS = 4096 };

/* A connection to x's socket (the caller closes it); -1 if refused by
 * the kernel. */
static int dial(const zp_shmhost *x)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(x->name); /* "@...": the abstract namespace */
    memcpy(sa.sun_path + 1, x->name + 1, n - 1);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa,
                           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Turn x's loop until it has kept or refused `want` connections in all
 * (30 s at most: a loaded machine is slow, a lost connection a failure). */
static void settle(zp_shmhost *x, uint64_t want)
{
    time_t end = time(NULL) + 30;
    while ((uint64_t)x->nconns + x->refused < want) {
        ck_assert_msg(time(NULL) < end, "%d kept and %llu refused, not %llu", x->nconns,
                      (unsigned long long)x->refused, (unsigned long long)want);
        uv_run(x->loop, UV_RUN_NOWAIT);
    }
}

/* A child that becomes user `nobody`, connects to x and waits for the
 * shard to close the connection; its exit status says what it saw. */
static pid_t dial_as_nobody(const zp_shmhost *x)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(30);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        int fd = dial(x);
        char b;
        _exit(fd >= 0 && read(fd, &b, 1) == 0 ? 0 : 3); /* 0: closed by the shard */
    }
    return pid;
}

/* Whether this process may become user `nobody` (root, not forbidden by
 * the container): a child tries. */
static bool can_become_nobody(void)
{
    if (geteuid() != 0)
        return false;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(setgid(65534) == 0 && setuid(65534) == 0 ? 0 : 2);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

START_TEST(test_another_user_refused)
{
    if (!can_become_nobody())
        return; /* only a process that can is another user */
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    zp_shmhost x;
    char err[256];
    ck_assert_int_eq(
        zp_shmhost_start(&x, &loop, 5, 0x0dd0000ull + (uint64_t)getpid(), err, sizeof(err)), 0);
    pid_t pid = dial_as_nobody(&x);
    settle(&x, 1);
    ck_assert_uint_eq(x.refused, 1);
    ck_assert_int_eq(x.nconns, 0);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's status %d", st);
    zp_shmhost_stop(&x);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

/* Room for n more descriptors, or 0 if the hard limit has none. */
static int room_for(rlim_t n)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur >= n)
        return 1;
    if (rl.rlim_max < n)
        return 0;
    rl.rlim_cur = n;
    return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

START_TEST(test_past_the_limit_refused)
{
    if (!room_for(2 * MAX_CONNS + 64))
        return; /* both ends of MAX_CONNS + 1 connections do not fit */
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    zp_shmhost x;
    char err[256];
    ck_assert_int_eq(
        zp_shmhost_start(&x, &loop, 6, 0x11300000ull + (uint64_t)getpid(), err, sizeof(err)), 0);
    static int fds[MAX_CONNS + 1];
    for (int i = 0; i <= MAX_CONNS; i++) {
        fds[i] = dial(&x);
        ck_assert_msg(fds[i] >= 0, "connection %d: %s", i, strerror(errno));
        if (i % 32 == 31 || i == MAX_CONNS)
            settle(&x, (uint64_t)i + 1); /* the listen backlog is 64 */
    }
    ck_assert_int_eq(x.nconns, MAX_CONNS);
    ck_assert_uint_eq(x.refused, 1); /* the last one */
    char b;
    ck_assert_int_eq(read(fds[MAX_CONNS], &b, 1), 0); /* closed by the shard */
    for (int i = 0; i <= MAX_CONNS; i++)
        close(fds[i]);
    time_t end = time(NULL) + 30;
    while (x.nconns > 0 && time(NULL) < end)
        uv_run(&loop, UV_RUN_NOWAIT); /* each end of file closes its connection */
    ck_assert_int_eq(x.nconns, 0);
    zp_shmhost_stop(&x);
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
    tcase_add_test(tc, test_another_user_refused);
    tcase_add_test(tc, test_past_the_limit_refused);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
