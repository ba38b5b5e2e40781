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
 *     once, and the replica connects soon after ZooKeeper serves.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "check_main.h"
#include "coord_fixture.h"

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

/* The member listing that starts a join answered with an error (here the
 * members node without the read permission: NOAUTH): the replica is not
 * registered, and at the next resumed session it joins again and is
 * elected. */
START_TEST(test_join_listing_refused)
{
    zt_zk zk;
    start_zk(&zk);
    zk_cli(zk.hosts,
           "create /zeps\\ncreate /zeps/t\\ncreate /zeps/t/shards\\ncreate /zeps/t/shards/0\\n"
           "create /zeps/t/shards/0/members\\nsetAcl /zeps/t/shards/0/members world:anyone:cdwa\\n",
           NULL, 0);
    loop lp;
    loop_init(&lp);
    rep r;
    session_ms = 4000;
    rep_start(&r, &lp, zk.hosts, 0, 5000);
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1, &lp);
    double t0 = now_s();
    while (now_s() - t0 < 2) /* time to register, which it cannot */
        uv_run(&lp.l, UV_RUN_ONCE);
    ck_assert_int_eq(r.roles, 0);
    zk_cli_running(zk.hosts, "setAcl /zeps/t/shards/0/members world:anyone:cdrwa\\n", &lp);
    ck_assert_int_eq(r.roles, 0); /* nothing asks again until the session resumes */
    ck_assert_int_eq(drop_connections(zk.port), 1);
    WAIT_FOR(10, r.events[ZP_COORD_RESUMED] == 1 && r.is_primary && r.epoch == 1, &lp);
    ck_assert_int_eq(r.events[ZP_COORD_EXPIRED], 0); /* an expiry would start afresh */
    zp_coord_destroy(&r.c);
    loop_fini(&lp);
    session_ms = SESSION_MS;
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A join the client refuses at once (as it refuses any request on an
 * expired handle) costs nothing: refused at every resumed session, the
 * heap stays flat; accepted again, the replica joins and is elected. */
START_TEST(test_join_refused_at_once)
{
    zt_zk zk;
    start_zk(&zk);
    loop lp;
    loop_init(&lp);
    rep r;
    session_ms = 4000;
    refuse_listings = true;
    rep_start(&r, &lp, zk.hosts, 0, 5000);
    WAIT_FOR(10, listings_refused == 1, &lp);
    enum { WARM = 3, DROPS = 40 };
    long before = 0;
    for (int i = 1; i <= WARM + DROPS; i++) {
        if (i == WARM + 1)
            before = heap_used();
        ck_assert_int_eq(drop_connections(zk.port), 1);
        WAIT_FOR(10, r.events[ZP_COORD_RESUMED] == i && listings_refused == i + 1, &lp);
    }
    long grown = heap_used() - before;
    printf("heap after %d refused joins: %+ld bytes\n", DROPS, grown);
    ck_assert_msg(grown < DROPS * 64, "%d refused joins grew the heap by %ld bytes", DROPS, grown);
    ck_assert_int_eq(r.roles, 0);
    refuse_listings = false;
    ck_assert_int_eq(drop_connections(zk.port), 1);
    WAIT_FOR(10, r.is_primary && r.epoch == 1, &lp);
    ck_assert_int_eq(r.events[ZP_COORD_EXPIRED], 0);
    zp_coord_destroy(&r.c);
    loop_fini(&lp);
    session_ms = SESSION_MS;
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A resumed session costs one evaluation (six reads): the node watches
 * ignore the session's own events, which the session callback handles. */
START_TEST(test_resume_evaluates_once)
{
    zt_zk zk;
    start_zk(&zk);
    loop lp;
    loop_init(&lp);
    rep r;
    session_ms = 4000;
    rep_start(&r, &lp, zk.hosts, 0, 5000);
    WAIT_FOR(10, r.is_primary && r.epoch == 1 && r.isr_calls > 0, &lp);
    double t0 = now_s();
    while (now_s() - t0 < 0.5)
        uv_run(&lp.l, UV_RUN_ONCE);
    int reads = member_reads;
    ck_assert_int_eq(drop_connections(zk.port), 1);
    WAIT_FOR(10, r.events[ZP_COORD_RESUMED] == 1, &lp);
    t0 = now_s();
    while (now_s() - t0 < 1)
        uv_run(&lp.l, UV_RUN_ONCE);
    ck_assert_int_eq(r.events[ZP_COORD_SUSPENDED], 1);
    ck_assert_int_eq(member_reads - reads, 1);
    ck_assert(r.is_primary && r.epoch == 1);
    zp_coord_destroy(&r.c);
    loop_fini(&lp);
    session_ms = SESSION_MS;
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* The client's socket may be descriptor 0 (a daemon started with its
 * standard input closed): it is polled like any other. */
START_TEST(test_socket_on_descriptor_zero)
{
    zt_zk zk;
    start_zk(&zk);
    loop lp;
    loop_init(&lp);
    int saved = dup(0);
    ck_assert_int_ge(saved, 0);
    close(0);
    rep r;
    rep_start(&r, &lp, zk.hosts, 0, 5000);
    WAIT_FOR(10, r.is_primary && r.epoch == 1, &lp);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    ck_assert_int_eq(getpeername(0, (struct sockaddr *)&a, &len), 0);
    ck_assert_int_eq(ntohs(a.sin_port), zk.port);
    zp_coord_destroy(&r.c);
    loop_fini(&lp);
    ck_assert_int_eq(dup2(saved, 0), 0);
    close(saved);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* ZooKeeper down when the replica starts: each refused connection is
 * noticed at once and tried again within a second or so, so the replica
 * connects soon after ZooKeeper serves, not after its client's own
 * connection timeout (two thirds of the session timeout asked: 40 s). */
START_TEST(test_zookeeper_late)
{
    zt_zk zk;
    start_zk(&zk);
    zt_zk_stop(&zk, SIGTERM);
    loop lp;
    loop_init(&lp);
    rep r;
    session_ms = 60000;
    rep_start(&r, &lp, zk.hosts, 0, 1000);
    session_ms = SESSION_MS;
    WAIT_FOR(10, r.events[ZP_COORD_UNREACHABLE] == 1, &lp);
    ck_assert_int_eq(zt_zk_restart(&zk), 0);
    double t1 = now_s();
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1 && r.is_primary && r.epoch == 1, &lp);
    printf("connected %.3f s after a late ZooKeeper answered\n", now_s() - t1);
    zp_coord_destroy(&r.c);
    loop_fini(&lp);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("zk_session");
    TCase *tc = tcase_create("zookeeper");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_join_listing_refused);
    tcase_add_test(tc, test_join_refused_at_once);
    tcase_add_test(tc, test_resume_evaluates_once);
    tcase_add_test(tc, test_socket_on_descriptor_zero);
    tcase_add_test(tc, test_zookeeper_late);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
