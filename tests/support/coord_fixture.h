/*
 * coord_fixture.h - what the coordination layer's tests share
 * (test_coord.c, test_zk_session.c): replicas of one shard as zp_coord
 * instances on libuv loops of the test process, what their callbacks were
 * told, loops run until a condition holds, a real ZooKeeper (zkserver.h)
 * and zkCli.sh against it, bare sessions (zk_session.h), and the checked
 * fixture each test runs in (`fx`: its loop, and its ZooKeeper). Every
 * function asserts with Check: call them from a test or a fixture.
 */
#ifndef ZT_COORD_FIXTURE_H
#define ZT_COORD_FIXTURE_H

#include <arpa/inet.h>
#include <check.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coord.h"
#include "zk_session.h"
#include "zkserver.h"

#define SESSION_MS 1000

typedef struct rep {
    zp_coord *c;
    int replica;
    int events[ZP_COORD_UNREACHABLE + 1];
    double event_at[ZP_COORD_UNREACHABLE + 1]; /* when each kind was last heard */
    char why[256];
    char me[ZP_COORD_MEMBER_MAX], primary[ZP_COORD_MEMBER_MAX];
    uint64_t epoch;
    bool is_primary, ever_primary;
    int roles;
    int isr_n, isr_calls;
    char isr[ZP_COORD_ISR_MAX][ZP_COORD_MEMBER_MAX];
    int32_t isr_version;
    uint64_t isr_epoch;
    int done_calls, done_rc;
    int32_t done_version;
} rep;

static inline double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline void on_session(void *arg, zp_coord_session ev, const char *why)
{
    rep *r = arg;
    r->events[ev]++;
    r->event_at[ev] = now_s();
    snprintf(r->why, sizeof(r->why), "%s", why);
}

static inline void on_role(void *arg, const zp_coord_view *v)
{
    rep *r = arg;
    r->roles++;
    snprintf(r->me, sizeof(r->me), "%s", v->me);
    snprintf(r->primary, sizeof(r->primary), "%s", v->primary);
    r->epoch = v->epoch;
    r->is_primary = v->is_primary;
    r->ever_primary |= v->is_primary;
}

static inline void on_isr(void *arg, const zp_coord_isr *s)
{
    rep *r = arg;
    r->isr_calls++;
    r->isr_n = s->n;
    r->isr_version = s->version;
    r->isr_epoch = s->epoch;
    for (int i = 0; i < s->n; i++)
        snprintf(r->isr[i], sizeof(r->isr[i]), "%s", s->members[i]);
}

static inline void on_done(void *arg, int rc, int32_t version)
{
    rep *r = arg;
    r->done_calls++;
    r->done_rc = rc;
    r->done_version = version;
}

/* A loop with a 20 ms tick, so a UV_RUN_ONCE never blocks for long. */
typedef struct loop {
    uv_loop_t l;
    uv_timer_t tick;
} loop;

static inline void on_tick(uv_timer_t *t)
{
    (void)t;
}

static inline void loop_init(loop *lp)
{
    ck_assert_int_eq(uv_loop_init(&lp->l), 0);
    uv_timer_init(&lp->l, &lp->tick);
    uv_timer_start(&lp->tick, on_tick, 20, 20);
}

/* Close the loop: everything the coords held must be gone by then. */
static inline void loop_fini(loop *lp)
{
    uv_close((uv_handle_t *)&lp->tick, NULL);
    double t0 = now_s();
    while (uv_run(&lp->l, UV_RUN_NOWAIT) && now_s() - t0 < 10)
        ;
    ck_assert_int_eq(uv_loop_close(&lp->l), 0);
}

/* Run the loops given until `cond` holds, for `secs` at most. */
#define WAIT_FOR(secs, cond, ...)                                                                  \
    do {                                                                                           \
        loop *lps_[] = {__VA_ARGS__};                                                              \
        double t0_ = now_s();                                                                      \
        while (!(cond) && now_s() - t0_ < (secs))                                                  \
            for (size_t i_ = 0; i_ < sizeof(lps_) / sizeof(lps_[0]); i_++)                         \
                uv_run(&lps_[i_]->l,                                                               \
                       sizeof(lps_) / sizeof(lps_[0]) > 1 ? UV_RUN_NOWAIT : UV_RUN_ONCE);          \
        ck_assert_msg((cond), "not within %.1f s: %s", (double)(secs), #cond);                     \
    } while (0)

/* The session timeout rep_start asks for (a test may set another). */
static int session_ms = SESSION_MS;
/* The snapshot the replicas rep_start begins say they restored (NULL: none). */
static const char *rep_restored;

static inline void rep_start(rep *r, loop *lp, const char *hosts, int replica, int connect_ms)
{
    memset(r, 0, sizeof(*r));
    r->replica = replica;
    r->isr_version = -1;
    char ep[64], err[256] = "";
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", 7000 + replica);
    zp_coord_opts o = {.backend = "zookeeper",
                       .hosts = hosts,
                       .cluster = "t",
                       .shard = 0,
                       .replica = replica,
                       .endpoint = ep,
                       .session_timeout_ms = session_ms,
                       .connect_timeout_ms = connect_ms,
                       .restored = rep_restored};
    zp_coord_cbs cbs = {.session = on_session, .role = on_role, .isr = on_isr, .arg = r};
    int rc = zp_coord_new(&r->c, &lp->l, &o, &cbs, err, sizeof(err));
    ck_assert_msg(rc == 0, "zp_coord_new: %s", err);
}

static inline bool agree(const rep *r, const rep *primary, uint64_t epoch)
{
    return r->me[0] && strcmp(r->primary, primary->me) == 0 && r->epoch == epoch &&
           r->is_primary == (r == primary);
}

static inline void start_zk(zt_zk *zk)
{
    ck_assert_int_eq(zt_zk_start(zk), 0);
    printf("ZooKeeper serving %.2f s after its start\n", zk->start_s);
}

/* Run the loop for `secs`: time for something to happen, or to show
 * that it does not. */
static inline void run_for(loop *lp, double secs)
{
    double t0 = now_s();
    while (now_s() - t0 < secs)
        uv_run(&lp->l, UV_RUN_ONCE);
}

/* Run zkCli.sh against `hosts`, `cmds` (lines) on its standard input;
 * its output into out (NULL: thrown away). */
static inline void zk_cli(const char *hosts, const char *cmds, char *out, size_t len)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "printf '%squit\\n' | /usr/share/zookeeper/bin/zkCli.sh -server %s 2>&1", cmds, hosts);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[512];
    size_t at = 0;
    if (out)
        out[0] = '\0';
    while (fgets(line, sizeof(line), p))
        if (out && line[0] == '[' && strncmp(line, "[zk:", 4) != 0 &&
            at + strlen(line) < len) /* a listing: "[a, b]" */
            at += (size_t)snprintf(out + at, len - at, "%s", line);
    ck_assert_int_eq(pclose(p), 0);
}

/* zk_cli, with loop `lp` run meanwhile (its sessions kept alive). */
static inline void zk_cli_running(const char *hosts, const char *cmds, loop *lp)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "printf '%squit\\n' | /usr/share/zookeeper/bin/zkCli.sh -server %s >/dev/null 2>&1",
             cmds, hosts);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    bool done = false;
    WAIT_FOR(60, done || (done = waitpid(pid, &st, WNOHANG) == pid), lp);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zkCli.sh: status %d", st);
}

/* Cut this process's connections to the ZooKeeper on `port` (as a broken
 * network would): the clients see them closed and connect again, their
 * sessions kept. Returns how many were cut. */
static inline int drop_connections(int port)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++) {
        struct sockaddr_in a;
        socklen_t len = sizeof(a);
        if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET &&
            ntohs(a.sin_port) == port && shutdown(fd, SHUT_RDWR) == 0)
            n++;
    }
    return n;
}

static inline void on_closed(void *arg)
{
    (*(int *)arg)++;
}

/* A bare session (zk_session.h, a 4 s session timeout) to `hosts` on lp,
 * its events counted in r (zeroed first). The caller owns the session:
 * session_close it. */
static inline zp_zk_session *session_open(rep *r, loop *lp, const char *hosts, int connect_ms)
{
    memset(r, 0, sizeof(*r));
    zp_zk_session *s = NULL;
    char err[256] = "";
    int rc =
        zp_zk_session_new(&s, &lp->l, hosts, 4000, connect_ms, on_session, r, err, sizeof(err));
    ck_assert_msg(rc == 0, "zp_zk_session_new: %s", err);
    return s;
}

/* Close *sp (this call takes it) and run lp until the session says it is
 * closed. */
static inline void session_close(zp_zk_session **sp, loop *lp)
{
    int closed = 0;
    zp_zk_session_close(sp, on_closed, &closed);
    WAIT_FOR(10, closed == 1, lp);
}

/* The heap in use (glibc's count; 0 under AddressSanitizer, whose leak
 * check covers what this measures). */
static inline long heap_used(void)
{
    return (long)mallinfo2().uordblks;
}

/* What each test runs in (Check's checked fixtures, set up and torn down
 * in the test's own process): a loop, and for the tests of a case given
 * fx_zk_setup a real ZooKeeper. */
typedef struct coord_fx {
    zt_zk zk; /* not started (pid 0) under fx_loop_setup */
    loop lp;
} coord_fx;

static coord_fx fx;

static inline void fx_loop_setup(void)
{
    memset(&fx, 0, sizeof(fx));
    loop_init(&fx.lp);
}

static inline void fx_zk_setup(void)
{
    memset(&fx, 0, sizeof(fx));
    start_zk(&fx.zk);
    loop_init(&fx.lp);
}

/* Close the loop (whatever the test's replicas and sessions held must be
 * gone by then), stop ZooKeeper if it runs, and put back what a test may
 * have changed for rep_start. */
static inline void fx_teardown(void)
{
    loop_fini(&fx.lp);
    zt_zk_stop(&fx.zk, SIGTERM);
    session_ms = SESSION_MS;
    rep_restored = NULL;
}

/* A case of suite s whose tests run in the fixture, with a ZooKeeper
 * ("zookeeper") or without ("no_zookeeper"), 60 s each. */
static inline TCase *fx_case(Suite *s, bool zookeeper)
{
    TCase *tc = tcase_create(zookeeper ? "zookeeper" : "no_zookeeper");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, zookeeper ? fx_zk_setup : fx_loop_setup, fx_teardown);
    suite_add_tcase(s, tc);
    return tc;
}

#endif
