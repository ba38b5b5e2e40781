/*
 * test_zk_session.c - the coordination layer (server/coord/) over the
 * ZooKeeper session beneath it, against a real ZooKeeper
 * (tests/support/coord_fixture.h), no mock but for two calls of the client
 * the binary wraps:
 *
 *   - a join whose member listing ZooKeeper refuses (no read permission) is
 *     tried again at the next resumed session (the connection cut by the
 *     test), and the replica is elected;
 *   - a join the client refuses at once, as on an expired handle, costs
 *     nothing (the heap stays flat over 40 of them) and is tried again;
 *   - a resumed session costs one evaluation, not one per node watch;
 *   - the client's socket on descriptor 0 (standard input closed) works;
 *   - ZooKeeper started after the replica: a refused connection is seen at
 *     once, and the replica connects soon after ZooKeeper serves; no
 *     primary is known meanwhile.
 *
 * and the session itself (zk_session.h), with three more calls wrapped:
 *
 *   - closed, connected or not, it says so once, after the loop closed its
 *     handles;
 *   - a poll the loop refuses on the client's socket costs nothing (the
 *     heap stays flat over 300 of them) and is tried again: it connects;
 *   - a session the client finds expired by itself is begun again, and a
 *     new session that does not connect is said unreachable again.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "check_main.h"
#include "coord_fixture.h"
#include "zk_session.h"

/* Two calls of the ZooKeeper client, as the coordination layer makes them,
 * seen by the tests: the binary is linked with --wrap for both
 * (tests/cluster/CMakeLists.txt). A member listing (join's) may be refused
 * as the client refuses any request on an expired handle; the watched
 * listing of the members is counted: each evaluation makes one. */
static bool refuse_listings;
static int listings_refused, member_reads;

int __real_zoo_aget_children(zhandle_t *zh, const char *path, int watch, strings_completion_t c,
                             const void *data);
int __wrap_zoo_aget_children(zhandle_t *zh, const char *path, int watch, strings_completion_t c,
                             const void *data);
int __real_zoo_awget_children(zhandle_t *zh, const char *path, watcher_fn w, void *wctx,
                              strings_completion_t c, const void *data);
int __wrap_zoo_awget_children(zhandle_t *zh, const char *path, watcher_fn w, void *wctx,
                              strings_completion_t c, const void *data);

int __wrap_zoo_aget_children(zhandle_t *zh, const char *path, int watch, strings_completion_t c,
                             const void *data)
{
    if (refuse_listings) {
        listings_refused++;
        return ZINVALIDSTATE;
    }
    return __real_zoo_aget_children(zh, path, watch, c, data);
}

int __wrap_zoo_awget_children(zhandle_t *zh, const char *path, watcher_fn w, void *wctx,
                              strings_completion_t c, const void *data)
{
    member_reads++;
    return __real_zoo_awget_children(zh, path, w, wctx, c, data);
}

/* Three more calls, wrapped likewise: a poll on the client's socket the
 * loop may refuse (as libuv refuses a descriptor it cannot watch), and a
 * readiness check that may find the session expired by itself (the client
 * answers ZINVALIDSTATE and its state says so) once. */
static bool refuse_polls, fake_expiry, state_expired;
static int polls_refused;

int __real_uv_poll_init_socket(uv_loop_t *l, uv_poll_t *h, uv_os_sock_t fd);
int __wrap_uv_poll_init_socket(uv_loop_t *l, uv_poll_t *h, uv_os_sock_t fd);
int __real_zookeeper_interest(zhandle_t *zh, int *fd, int *interest, struct timeval *tv);
int __wrap_zookeeper_interest(zhandle_t *zh, int *fd, int *interest, struct timeval *tv);
int __real_zoo_state(zhandle_t *zh);
int __wrap_zoo_state(zhandle_t *zh);

int __wrap_uv_poll_init_socket(uv_loop_t *l, uv_poll_t *h, uv_os_sock_t fd)
{
    if (refuse_polls) {
        polls_refused++;
        return UV_EBADF;
    }
    return __real_uv_poll_init_socket(l, h, fd);
}

int __wrap_zookeeper_interest(zhandle_t *zh, int *fd, int *interest, struct timeval *tv)
{
    if (fake_expiry) {
        fake_expiry = false;
        state_expired = true; /* the state asked next says so */
        return ZINVALIDSTATE;
    }
    return __real_zookeeper_interest(zh, fd, interest, tv);
}

int __wrap_zoo_state(zhandle_t *zh)
{
    if (state_expired) {
        state_expired = false;
        return ZOO_EXPIRED_SESSION_STATE;
    }
    return __real_zoo_state(zh);
}

/* The member listing that starts a join answered with an error (here the
 * members node without the read permission: NOAUTH): the replica is not
 * registered, and at the next resumed session it joins again and is
 * elected. */
START_TEST(test_join_listing_refused)
{
    zk_cli(fx.zk.hosts,
           "create /zeps\\ncreate /zeps/t\\ncreate /zeps/t/shards\\ncreate /zeps/t/shards/0\\n"
           "create /zeps/t/shards/0/members\\nsetAcl /zeps/t/shards/0/members world:anyone:cdwa\\n",
           NULL, 0);
    rep r;
    session_ms = 4000;
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1, &fx.lp);
    run_for(&fx.lp, 2); /* time to register, which it cannot */
    ck_assert_int_eq(r.roles, 0);
    zk_cli_running(fx.zk.hosts, "setAcl /zeps/t/shards/0/members world:anyone:cdrwa\\n", &fx.lp);
    ck_assert_int_eq(r.roles, 0); /* nothing asks again until the session resumes */
    ck_assert_int_eq(drop_connections(fx.zk.port), 1);
    WAIT_FOR(10, r.events[ZP_COORD_RESUMED] == 1 && r.is_primary && r.epoch == 1, &fx.lp);
    ck_assert_int_eq(r.events[ZP_COORD_EXPIRED], 0); /* an expiry would start afresh */
    zp_coord_destroy(&r.c);
}
END_TEST

/* A join the client refuses at once (as it refuses any request on an
 * expired handle) costs nothing: refused at every resumed session, the
 * heap stays flat; accepted again, the replica joins and is elected. */
START_TEST(test_join_refused_at_once)
{
    rep r;
    session_ms = 4000;
    refuse_listings = true;
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, listings_refused == 1, &fx.lp);
    enum { WARM = 3, DROPS = 40 };
    long before = 0;
    for (int i = 1; i <= WARM + DROPS; i++) {
        if (i == WARM + 1)
            before = heap_used();
        ck_assert_int_eq(drop_connections(fx.zk.port), 1);
        WAIT_FOR(10, r.events[ZP_COORD_RESUMED] == i && listings_refused == i + 1, &fx.lp);
    }
    long grown = heap_used() - before;
    printf("heap after %d refused joins: %+ld bytes\n", DROPS, grown);
    ck_assert_msg(grown < DROPS * 64, "%d refused joins grew the heap by %ld bytes", DROPS, grown);
    ck_assert_int_eq(r.roles, 0);
    refuse_listings = false;
    ck_assert_int_eq(drop_connections(fx.zk.port), 1);
    WAIT_FOR(10, r.is_primary && r.epoch == 1, &fx.lp);
    ck_assert_int_eq(r.events[ZP_COORD_EXPIRED], 0);
    zp_coord_destroy(&r.c);
}
END_TEST

/* A resumed session costs one evaluation (six reads): the node watches
 * ignore the session's own events, which the session callback handles. */
START_TEST(test_resume_evaluates_once)
{
    rep r;
    session_ms = 4000;
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, r.is_primary && r.epoch == 1 && r.isr_calls > 0, &fx.lp);
    run_for(&fx.lp, 0.5);
    int reads = member_reads;
    ck_assert_int_eq(drop_connections(fx.zk.port), 1);
    WAIT_FOR(10, r.events[ZP_COORD_RESUMED] == 1, &fx.lp);
    run_for(&fx.lp, 1);
    ck_assert_int_eq(r.events[ZP_COORD_SUSPENDED], 1);
    ck_assert_int_eq(member_reads - reads, 1);
    ck_assert(r.is_primary && r.epoch == 1);
    zp_coord_destroy(&r.c);
}
END_TEST

/* The client's socket may be descriptor 0 (a daemon started with its
 * standard input closed): it is polled like any other. */
START_TEST(test_socket_on_descriptor_zero)
{
    int saved = dup(0);
    ck_assert_int_ge(saved, 0);
    close(0);
    rep r;
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, r.is_primary && r.epoch == 1, &fx.lp);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    ck_assert_int_eq(getpeername(0, (struct sockaddr *)&a, &len), 0);
    ck_assert_int_eq(ntohs(a.sin_port), fx.zk.port);
    zp_coord_destroy(&r.c);
    /* standard input back once the client has closed its socket there */
    WAIT_FOR(10, getpeername(0, (struct sockaddr *)&a, &len) != 0, &fx.lp);
    ck_assert_int_eq(dup2(saved, 0), 0);
    close(saved);
}
END_TEST

/* ZooKeeper down when the replica starts: each refused connection is
 * noticed at once and tried again within a second or so, so the replica
 * connects soon after ZooKeeper serves, not after its client's own
 * connection timeout (two thirds of the session timeout asked: 40 s). */
START_TEST(test_zookeeper_late)
{
    zt_zk_stop(&fx.zk, SIGTERM);
    rep r;
    session_ms = 60000;
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 1000);
    WAIT_FOR(10, r.events[ZP_COORD_UNREACHABLE] == 1, &fx.lp);
    zp_coord_view v;
    zp_coord_view_get(r.c, &v);
    ck_assert_msg(v.primary_replica == -1 && v.primary[0] == '\0' && !v.is_primary,
                  "no primary known, yet the view says replica %d ('%s')", v.primary_replica,
                  v.primary);
    ck_assert_int_eq(zt_zk_restart(&fx.zk), 0);
    double t1 = now_s();
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1 && r.is_primary && r.epoch == 1, &fx.lp);
    printf("connected %.3f s after a late ZooKeeper answered\n", now_s() - t1);
    zp_coord_destroy(&r.c);
}
END_TEST

/* A loopback address where nothing listens: a port held by a socket bound
 * but not listening, so every connection is refused. Returns the socket. */
static int dead_hosts(char *hosts, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    snprintf(hosts, len, "127.0.0.1:%d", ntohs(a.sin_port));
    return fd;
}

/* A session closed, connected or not, says so once, after the loop closed
 * its handles (its owner frees itself then: zk.c's destroy). */
START_TEST(test_session_closed_once)
{
    char dead[64];
    int held = dead_hosts(dead, sizeof(dead));
    for (int i = 0; i < 4; i++) {
        rep r;
        zp_zk_session *s = session_open(&r, &fx.lp, i % 2 ? dead : fx.zk.hosts, 300);
        if (i % 2)
            WAIT_FOR(10, r.events[ZP_COORD_UNREACHABLE] == 1, &fx.lp);
        else
            WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1, &fx.lp);
        int closed = 0;
        zp_zk_session_close(&s, on_closed, &closed);
        ck_assert_ptr_null(s);
        ck_assert_int_eq(closed, 0); /* the loop closes the handles first */
        WAIT_FOR(10, closed == 1, &fx.lp);
        for (int k = 0; k < 5; k++)
            uv_run(&fx.lp.l, UV_RUN_NOWAIT);
        ck_assert_int_eq(closed, 1);
    }
    close(held);
}
END_TEST

/* The loop refusing to poll the client's socket (libuv refuses a
 * descriptor it cannot watch): each refusal costs nothing, the timer tries
 * again, and once the loop accepts the session connects. */
START_TEST(test_poll_refused)
{
    rep r;
    refuse_polls = true;
    polls_refused = 0;
    zp_zk_session *s = session_open(&r, &fx.lp, fx.zk.hosts, 5000);
    ck_assert_int_ge(polls_refused, 1);
    enum { WARM = 20, KICKS = 300 };
    long before = 0;
    for (int i = 0; i < WARM + KICKS; i++) {
        if (i == WARM)
            before = heap_used();
        zp_zk_session_kick(s);
        uv_run(&fx.lp.l, UV_RUN_NOWAIT);
    }
    long grown = heap_used() - before;
    printf("heap after %d refused polls: %+ld bytes\n", KICKS, grown);
    ck_assert_int_ge(polls_refused, WARM + KICKS);
    ck_assert_msg(grown < (long)(KICKS * sizeof(uv_poll_t)) / 4,
                  "%d refused polls grew the heap by %ld bytes", KICKS, grown);
    ck_assert_int_eq(r.events[ZP_COORD_CONNECTED], 0); /* nothing polled, nothing read */
    refuse_polls = false;
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1, &fx.lp);
    session_close(&s, &fx.lp);
}
END_TEST

/* Expired by the client's own reckoning (no event): the handle is closed
 * and a new session begun; if that one does not connect either, the
 * session is said unreachable again, connect_timeout_ms after the new
 * start, as after any outage. */
START_TEST(test_unreachable_again_after_renewal)
{
    char dead[64];
    int held = dead_hosts(dead, sizeof(dead));
    rep r;
    zp_zk_session *s = session_open(&r, &fx.lp, dead, 300);
    WAIT_FOR(10, r.events[ZP_COORD_UNREACHABLE] == 1, &fx.lp);
    run_for(&fx.lp, 0.5); /* said once per outage */
    ck_assert_int_eq(r.events[ZP_COORD_UNREACHABLE], 1);
    fake_expiry = true;
    WAIT_FOR(10, !fake_expiry && !state_expired, &fx.lp);
    WAIT_FOR(10, r.events[ZP_COORD_UNREACHABLE] == 2, &fx.lp);
    ck_assert_int_eq(r.events[ZP_COORD_CONNECTED], 0);
    session_close(&s, &fx.lp);
    close(held);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("zk_session");
    TCase *tc = fx_case(s, true);
    tcase_add_test(tc, test_join_listing_refused);
    tcase_add_test(tc, test_join_refused_at_once);
    tcase_add_test(tc, test_resume_evaluates_once);
    tcase_add_test(tc, test_socket_on_descriptor_zero);
    tcase_add_test(tc, test_zookeeper_late);
    tcase_add_test(tc, test_session_closed_once);
    tcase_add_test(tc, test_poll_refused);
    tcase_add_test(fx_case(s, false), test_unreachable_again_after_renewal);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
