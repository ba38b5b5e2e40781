/*
 * test_coord.c - the coordination layer (server/coord/) against a real
 * ZooKeeper (tests/support/zkserver.h), no mock: replicas of one shard as
 * zp_coord instances on libuv loops of this process.
 *
 *   - the first replica is elected at epoch 1; closing the primary's
 *     session elects the next live member in sync by sequence, at epoch 2,
 *     and every replica agrees;
 *   - a member outside the in-sync set is passed over;
 *   - a primary frozen past its session timeout (its loop not run: a GC
 *     pause, a stopped VM) is replaced; the new epoch fences the old one,
 *     its write of the in-sync set does not land, and when it runs again it
 *     hears EXPIRED, then learns the new primary on a new session;
 *   - ZooKeeper killed and started again: both replicas are suspended, then
 *     resume their sessions; no failover, nothing hangs;
 *   - no ZooKeeper at all: UNREACHABLE after the connect timeout;
 *   - a tree ZooKeeper refuses to make (a node made beforehand without the
 *     create permission, by zkCli.sh): the replica registers nowhere;
 *   - a primary's role (server/repl/role.c) writes the in-sync set anew
 *     as members join and leave, prompted by nothing else;
 *   - an unknown backend, a bad cluster name, hosts the client refuses:
 *     refused with their words, and the refusals leak nothing;
 *   - the in-sync set gone, a clean-exit record nobody live restored, and
 *     so many live members that the reason logged does not fit its buffer:
 *     cut, never written past (the binary wraps snprintf and counts a size
 *     no buffer has: one that wrapped below zero);
 *   - 64 live members, as many as a replica keeps (63 made beforehand by a
 *     session of the test's own): read and decided on without a read or
 *     write past those lists (under ZEPS_ASAN).
 * The session beneath (connections cut or refused, joins refused): see
 * test_zk_session.c.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "coord_fixture.h"
#include "harness.h"
#include "role.h"
#include "zk_session.h"
#include "zeps_errors.h"

/* snprintf as everything in this binary calls it (linked with
 * --wrap=snprintf: tests/cluster/CMakeLists.txt): a size past INT_MAX is
 * one that wrapped below zero (a length subtracted from a buffer's size it
 * passed). Counted and refused, as nothing would be written in bounds. */
static int wrapped_sizes;

int __wrap_snprintf(char *buf, size_t len, const char *fmt, ...);

int __wrap_snprintf(char *buf, size_t len, const char *fmt, ...)
{
    if (len > INT_MAX) {
        wrapped_sizes++;
        errno = EOVERFLOW;
        return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return n;
}

/* Write the in-sync set from primary p and wait for its answer. */
static int isr_write(rep *p, loop *lp, const char *const *m, int n, int32_t version)
{
    int calls = p->done_calls;
    int rc = zp_coord_isr_set(p->c, m, n, version, on_done, p);
    if (rc != 0)
        return rc;
    WAIT_FOR(5, p->done_calls > calls, lp);
    return p->done_rc;
}

/* Replica 0 elected first (epoch 1), then 1 and 2 join as backups. */
static void three(loop *lp, const char *hosts, rep r[3])
{
    rep_start(&r[0], lp, hosts, 0, 5000);
    WAIT_FOR(10, r[0].is_primary && r[0].epoch == 1, lp);
    rep_start(&r[1], lp, hosts, 1, 5000);
    WAIT_FOR(10, agree(&r[1], &r[0], 1), lp);
    rep_start(&r[2], lp, hosts, 2, 5000);
    WAIT_FOR(10, agree(&r[2], &r[0], 1), lp);
    ck_assert(!r[1].ever_primary && !r[2].ever_primary);
    ck_assert_int_eq(r[0].events[ZP_COORD_CONNECTED], 1);
}

START_TEST(test_election_and_failover)
{
    rep r[3];
    three(&fx.lp, fx.zk.hosts, r);
    /* the first election put the primary alone in the set */
    WAIT_FOR(5, r[0].isr_calls > 0, &fx.lp);
    ck_assert_int_eq(r[0].isr_n, 1);
    ck_assert_str_eq(r[0].isr[0], r[0].me);
    ck_assert_uint_eq(r[0].isr_epoch, 1);
    const char *all[] = {r[0].me, r[1].me, r[2].me};
    WAIT_FOR(5, agree(&r[0], &r[0], 1) && agree(&r[1], &r[0], 1) && agree(&r[2], &r[0], 1), &fx.lp);
    int roles[3] = {r[0].roles, r[1].roles, r[2].roles};
    ck_assert_int_eq(isr_write(&r[0], &fx.lp, all, 3, r[0].isr_version), 0);
    WAIT_FOR(5, r[1].isr_n == 3 && r[2].isr_n == 3, &fx.lp);
    for (int i = 0; i < 3; i++) /* the same primary at the same epoch: no role callback */
        ck_assert_int_eq(r[i].roles, roles[i]);
    /* the same write again, on the version it replaced: refused */
    ck_assert_int_eq(isr_write(&r[0], &fx.lp, all, 3, r[0].done_version - 1), ZEPS_ESTALE);
    /* a backup may not write it */
    ck_assert_int_eq(zp_coord_isr_set(r[1].c, all, 3, r[1].isr_version, on_done, &r[1]),
                     ZEPS_ESTATE);
    /* an empty set, or one past the bound, is the caller's error */
    const char *many[ZP_COORD_ISR_MAX + 1];
    for (int i = 0; i <= ZP_COORD_ISR_MAX; i++)
        many[i] = r[0].me;
    ck_assert_int_eq(zp_coord_isr_set(r[0].c, all, 0, r[0].done_version, on_done, &r[0]),
                     ZEPS_EINVAL);
    ck_assert_int_eq(
        zp_coord_isr_set(r[0].c, many, ZP_COORD_ISR_MAX + 1, r[0].done_version, on_done, &r[0]),
        ZEPS_EINVAL);

    double t0 = now_s();
    zp_coord_destroy(&r[0].c); /* its session closes: its nodes go now */
    WAIT_FOR(10, agree(&r[1], &r[1], 2) && agree(&r[2], &r[1], 2), &fx.lp);
    printf("failover after a closed session: %.3f s\n", now_s() - t0);
    ck_assert(!r[2].ever_primary);
    /* the new primary rewrote the set at its epoch, without the dead */
    WAIT_FOR(5, r[2].isr_epoch == 2, &fx.lp);
    ck_assert_int_eq(r[2].isr_n, 2);
    ck_assert_str_eq(r[2].isr[0], r[1].me);
    ck_assert_str_eq(r[2].isr[1], r[2].me);
    ck_assert(zp_coord_is_stale(r[2].c, 1));
    ck_assert(!zp_coord_is_stale(r[2].c, 2));

    zp_coord_destroy(&r[1].c);
    zp_coord_destroy(&r[2].c);
}
END_TEST

/* The clean-exit record: a backup may not write it, the primary may (and
 * a malformed name is refused before anything is sent). */
START_TEST(test_clean_record_primary_only)
{
    rep r[3];
    three(&fx.lp, fx.zk.hosts, r);
    const char *snap = "0000000000000001-0000000000000002-3";
    ck_assert_int_eq(zp_coord_clean_set(r[1].c, snap, on_done, &r[1]), ZEPS_ESTATE);
    ck_assert_int_eq(zp_coord_clean_set(r[0].c, "", on_done, &r[0]), ZEPS_EINVAL);
    int calls = r[0].done_calls;
    ck_assert_int_eq(zp_coord_clean_set(r[0].c, snap, on_done, &r[0]), 0);
    WAIT_FOR(5, r[0].done_calls > calls, &fx.lp);
    ck_assert_int_eq(r[0].done_rc, 0);
    /* the next primary replaces the record, void since its election */
    WAIT_FOR(5, r[0].isr_calls > 0, &fx.lp);
    const char *all[] = {r[0].me, r[1].me, r[2].me};
    ck_assert_int_eq(isr_write(&r[0], &fx.lp, all, 3, r[0].isr_version), 0);
    WAIT_FOR(5, r[1].isr_n == 3, &fx.lp);
    zp_coord_destroy(&r[0].c);
    WAIT_FOR(10, agree(&r[1], &r[1], 2), &fx.lp);
    calls = r[1].done_calls;
    WAIT_FOR(5, zp_coord_clean_set(r[1].c, snap, on_done, &r[1]) == 0, &fx.lp);
    WAIT_FOR(5, r[1].done_calls > calls, &fx.lp);
    ck_assert_int_eq(r[1].done_rc, 0);
    zp_coord_destroy(&r[1].c);
    zp_coord_destroy(&r[2].c);
}
END_TEST

/* A member outside the in-sync set is never elected, though its
 * sequence is lower than the one that is. */
START_TEST(test_out_of_sync_passed_over)
{
    rep r[3];
    three(&fx.lp, fx.zk.hosts, r);
    WAIT_FOR(5, r[0].isr_calls > 0, &fx.lp);
    const char *some[] = {r[0].me, r[2].me};
    ck_assert_int_eq(isr_write(&r[0], &fx.lp, some, 2, r[0].isr_version), 0);
    WAIT_FOR(5, r[1].isr_n == 2, &fx.lp);
    zp_coord_destroy(&r[0].c);
    WAIT_FOR(10, agree(&r[1], &r[2], 2) && agree(&r[2], &r[2], 2), &fx.lp);
    ck_assert(!r[1].ever_primary);
    zp_coord_destroy(&r[1].c);
    zp_coord_destroy(&r[2].c);
}
END_TEST

START_TEST(test_frozen_primary_fenced)
{
    loop *la = &fx.lp; /* the primary's */
    loop lb;           /* the backup's */
    loop_init(&lb);
    rep a, b;
    rep_start(&a, la, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, a.is_primary && a.epoch == 1 && a.isr_calls > 0, la);
    rep_start(&b, &lb, fx.zk.hosts, 1, 5000);
    WAIT_FOR(10, agree(&b, &a, 1), la, &lb);
    const char *both[] = {a.me, b.me};
    int calls = a.done_calls;
    ck_assert_int_eq(zp_coord_isr_set(a.c, both, 2, a.isr_version, on_done, &a), 0);
    WAIT_FOR(5, a.done_calls > calls && b.isr_n == 2, la, &lb);
    ck_assert_int_eq(a.done_rc, 0);
    int32_t seen = b.isr_version;

    /* a freezes: only b's loop runs; a's session expires on the server */
    double t0 = now_s();
    WAIT_FOR(10, agree(&b, &b, 2), &lb);
    printf("take-over from a frozen primary (session %d ms): %.3f s\n", SESSION_MS, now_s() - t0);
    ck_assert(zp_coord_is_stale(b.c, 1));
    WAIT_FOR(5, b.isr_version != seen && b.isr_epoch == 2, &lb);
    ck_assert_int_eq(b.isr_n, 1); /* a is gone from the set */
    /* a wakes up believing it is the primary of epoch 1 and writes the set
     * on the version it knew: the write does not land */
    ck_assert(a.is_primary && a.epoch == 1);
    int32_t now_version = b.isr_version;
    calls = a.done_calls;
    double t1 = now_s();
    ck_assert_int_eq(zp_coord_isr_set(a.c, both, 2, a.done_version, on_done, &a), 0);
    WAIT_FOR(10, a.done_calls > calls, la, &lb);
    ck_assert_msg(a.done_rc == ZEPS_ECLOSED || a.done_rc == ZEPS_ESTALE, "rc %d", a.done_rc);
    /* nor does a clean-exit record, if its view still let it send one */
    calls = a.done_calls;
    if (zp_coord_clean_set(a.c, "0000000000000001-0000000000000002-3", on_done, &a) == 0) {
        WAIT_FOR(10, a.done_calls > calls, la, &lb);
        ck_assert_msg(a.done_rc == ZEPS_ECLOSED || a.done_rc == ZEPS_ESTALE, "rc %d", a.done_rc);
    }
    WAIT_FOR(10, a.events[ZP_COORD_EXPIRED] == 1 && !a.is_primary, la, &lb);
    printf("frozen primary told EXPIRED %.3f s after it ran again\n",
           a.event_at[ZP_COORD_EXPIRED] - t1);
    /* ... then joins again on a new session, as a backup of epoch 2 */
    WAIT_FOR(10, a.events[ZP_COORD_CONNECTED] == 2 && agree(&a, &b, 2), la, &lb);
    ck_assert(zp_coord_is_stale(a.c, 1));
    ck_assert_int_eq(b.isr_version, now_version);
    ck_assert(!b.events[ZP_COORD_SUSPENDED] && !b.events[ZP_COORD_EXPIRED]);

    zp_coord_destroy(&a.c);
    zp_coord_destroy(&b.c);
    loop_fini(&lb);
}
END_TEST

/* Sessions of 3 s (the tests' ZooKeeper allows up to 4): a replica must
 * reconnect within its session timeout of ZooKeeper's return, which a
 * loaded machine delayed past 1 s (an expiry, once in 3 at a load of 10). */
START_TEST(test_zookeeper_restart)
{
    session_ms = 3000;
    rep a, b;
    rep_start(&a, &fx.lp, fx.zk.hosts, 0, 1000);
    WAIT_FOR(10, a.is_primary && a.epoch == 1, &fx.lp);
    rep_start(&b, &fx.lp, fx.zk.hosts, 1, 1000);
    WAIT_FOR(10, agree(&b, &a, 1), &fx.lp);

    zt_zk_stop(&fx.zk, SIGKILL);
    double t0 = now_s();
    WAIT_FOR(10, a.events[ZP_COORD_SUSPENDED] == 1 && b.events[ZP_COORD_SUSPENDED] == 1, &fx.lp);
    printf("suspended %.3f s after ZooKeeper was killed\n", now_s() - t0);
    /* down for longer than the session timeout and the connect timeout */
    WAIT_FOR(10, now_s() - t0 > 2.0 * session_ms / 1000, &fx.lp);
    ck_assert_int_eq(a.events[ZP_COORD_UNREACHABLE], 1);
    ck_assert(a.is_primary && a.epoch == 1); /* no failover while it is down */
    ck_assert_int_eq(zt_zk_restart(&fx.zk), 0);
    double t1 = now_s();
    WAIT_FOR(15,
             (a.events[ZP_COORD_RESUMED] || a.events[ZP_COORD_CONNECTED] == 2) &&
                 (b.events[ZP_COORD_RESUMED] || b.events[ZP_COORD_CONNECTED] == 2),
             &fx.lp);
    printf("back %.3f s after ZooKeeper answered again (down %.2f s): a %s, b %s\n", now_s() - t1,
           t1 - t0, a.events[ZP_COORD_RESUMED] ? "resumed" : "new session",
           b.events[ZP_COORD_RESUMED] ? "resumed" : "new session");
    /* ZooKeeper restores the sessions with a fresh timeout: both resume,
     * and the primary keeps its epoch */
    ck_assert_int_eq(a.events[ZP_COORD_EXPIRED] + b.events[ZP_COORD_EXPIRED], 0);
    WAIT_FOR(5, agree(&a, &a, 1) && agree(&b, &a, 1), &fx.lp);
    ck_assert(!b.ever_primary);

    zp_coord_destroy(&a.c);
    zp_coord_destroy(&b.c);
}
END_TEST

START_TEST(test_zookeeper_absent)
{
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", zt_free_port());
    loop lp; /* its own: how soon it closes is measured */
    loop_init(&lp);
    rep a;
    double t0 = now_s();
    rep_start(&a, &lp, hosts, 0, 1000);
    WAIT_FOR(10, a.events[ZP_COORD_UNREACHABLE] == 1, &lp);
    double took = now_s() - t0;
    printf("UNREACHABLE after %.3f s: %s\n", took, a.why);
    ck_assert(took >= 0.95 && took < 3);
    ck_assert_ptr_nonnull(strstr(a.why, hosts));
    ck_assert_int_eq(a.events[ZP_COORD_CONNECTED], 0);
    ck_assert(!a.me[0] && !a.is_primary);
    t0 = now_s();
    zp_coord_destroy(&a.c);
    loop_fini(&lp);
    ck_assert(now_s() - t0 < 2);
}
END_TEST

START_TEST(test_tree_refused)
{
    /* shard 0's node without the create permission, its members node made */
    zk_cli(fx.zk.hosts,
           "create /zeps\\ncreate /zeps/t\\ncreate /zeps/t/shards\\ncreate /zeps/t/shards/0\\n"
           "create /zeps/t/shards/0/members\\nsetAcl /zeps/t/shards/0 world:anyone:rwda\\n",
           NULL, 0);
    rep r;
    session_ms = 4000; /* the most ZooKeeper grants here: a member node outlives zkCli.sh */
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1, &fx.lp);
    run_for(&fx.lp, 3); /* time to register, which it must not */
    char ls[256];
    zk_cli(fx.zk.hosts, "ls /zeps/t/shards/0/members\\n", ls, sizeof(ls));
    ck_assert_msg(strcmp(ls, "[]\n") == 0, "members: %s", ls);
    ck_assert_int_eq(r.roles, 0);
    zp_coord_destroy(&r.c);
}
END_TEST

/* An unknown backend (a misspelt one not sent to install the ZooKeeper
 * client), a bad cluster name, hosts the client refuses: refused with
 * their words. */
START_TEST(test_refusals)
{
    zp_coord *c = NULL;
    char err[256] = "";
    zp_coord_cbs cbs = {0};
    zp_coord_opts o = {.backend = "etcd", .hosts = "127.0.0.1:1", .cluster = "t"};
    ck_assert_int_eq(zp_coord_new(&c, &fx.lp.l, &o, &cbs, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "etcd"));
    ck_assert_ptr_null(strstr(err, "C client"));
    o.backend = "zookeepes"; /* misspelt: no word of the ZooKeeper client's install */
    ck_assert_int_eq(zp_coord_new(&c, &fx.lp.l, &o, &cbs, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "'zookeepes' is not available") && !strstr(err, "C client"), "%s",
                  err);
    o.backend = "zookeeper";
    o.cluster = "a/b";
    ck_assert_int_eq(zp_coord_new(&c, &fx.lp.l, &o, &cbs, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "a/b"));
    ck_assert_ptr_null(c);
    /* hosts the ZooKeeper client refuses (a port that is no number; not a
     * missing port, whose refusal leaks in the client itself): its words,
     * and nothing of them kept: refused again and again, the heap stays flat */
    o.cluster = "t";
    static char hosts[4096];
    memset(hosts, 'h', sizeof(hosts) - 1);
    memcpy(hosts + sizeof(hosts) - 3, ":x", 2);
    o.hosts = hosts;
    ck_assert_int_eq(zp_coord_new(&c, &fx.lp.l, &o, &cbs, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "refused hosts 'hhh"));
    long before = 0;
    for (int i = 0; i < 100; i++) { /* the first 50 warm the allocator's caches up */
        if (i == 50)
            before = heap_used();
        ck_assert_int_eq(zp_coord_new(&c, &fx.lp.l, &o, &cbs, err, sizeof(err)), ZEPS_EINVAL);
    }
    long grown = heap_used() - before;
    ck_assert_msg(grown < (long)sizeof(hosts), "50 refusals grew the heap by %ld bytes", grown);
    ck_assert_ptr_null(c);
}
END_TEST

/* No in-sync member alive, a clean-exit record of this epoch that no live
 * member restored, and 16 live members with long snapshot names: the
 * reason each logs (every member's restored file) does not fit its buffer
 * and is cut there, nothing written past it; nobody is elected. */
START_TEST(test_long_waiting_reason)
{
    enum { N = 16 };
    rep p;
    rep_start(&p, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, p.is_primary && p.epoch == 1, &fx.lp);
    char snap[ZP_COORD_SNAP_MAX];
    zp_coord_snapshot_name(snap, sizeof(snap), 1, 2, 3);
    ck_assert_int_eq(zp_coord_clean_set(p.c, snap, on_done, &p), 0);
    WAIT_FOR(5, p.done_calls == 1, &fx.lp);
    ck_assert_int_eq(p.done_rc, 0);
    static rep r[N];
    char names[N][ZP_COORD_SNAP_MAX];
    for (int i = 0; i < N; i++) {
        zp_coord_snapshot_name(names[i], sizeof(names[i]), 0xff00 + (uint64_t)i, UINT64_MAX,
                               UINT64_MAX);
        rep_restored = names[i];
        rep_start(&r[i], &fx.lp, fx.zk.hosts, 1 + i, 5000);
        WAIT_FOR(10, agree(&r[i], &p, 1), &fx.lp);
    }
    int before = wrapped_sizes;
    zp_coord_destroy(&p.c);
    WAIT_FOR(10, r[N - 1].primary[0] == '\0', &fx.lp);
    run_for(&fx.lp, 1.5); /* time for every member to read the others and decide */
    for (int i = 0; i < N; i++)
        ck_assert_msg(!r[i].ever_primary && r[i].primary[0] == '\0',
                      "replica %d elected on a record it did not restore", 1 + i);
    ck_assert_msg(wrapped_sizes == before, "%d writes past the reason's buffer",
                  wrapped_sizes - before);
    for (int i = 0; i < N; i++)
        zp_coord_destroy(&r[i].c);
}
END_TEST

/* Nodes made by a session of the test's own, created in order (parents
 * first): what ZooKeeper answers each is counted, ZNODEEXISTS as made. */
static int nodes_answered, nodes_refused;

static void on_node_made(int rc, const char *value, const void *data)
{
    (void)value, (void)data;
    nodes_answered++;
    nodes_refused += rc != ZOK && rc != ZNODEEXISTS;
}

static void make_nodes(loop *lp, const char *hosts, char paths[][96], const char *const *vals,
                       int n)
{
    rep r;
    zp_zk_session *s = session_open(&r, lp, hosts, 5000);
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1, lp);
    nodes_answered = nodes_refused = 0;
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(zoo_acreate(zp_zk_session_handle(s), paths[i], vals[i],
                                     (int)strlen(vals[i]), &ZOO_OPEN_ACL_UNSAFE, 0, on_node_made,
                                     NULL),
                         ZOK);
    zp_zk_session_kick(s);
    WAIT_FOR(10, nodes_answered == n, lp);
    ck_assert_int_eq(nodes_refused, 0);
    session_close(&s, lp);
}

/* As many live members as a replica keeps (64: 63 made beforehand, the
 * lowest sequences, and the replica's own): it reads them all and waits
 * for the lowest, which is not itself, without reading or writing past
 * the lists it keeps of them (the sanitizers' tree, ZEPS_ASAN, says so). */
START_TEST(test_members_at_capacity)
{
    enum { FAKE = 63, PARENTS = 5 };
    static char paths[PARENTS + FAKE][96];
    const char *vals[PARENTS + FAKE];
    const char *parents[PARENTS] = {"/zeps", "/zeps/t", "/zeps/t/shards", "/zeps/t/shards/0",
                                    "/zeps/t/shards/0/members"};
    for (int i = 0; i < PARENTS; i++) {
        snprintf(paths[i], sizeof(paths[i]), "%s", parents[i]);
        vals[i] = "";
    }
    for (int i = 0; i < FAKE; i++) {
        snprintf(paths[PARENTS + i], sizeof(paths[0]), "/zeps/t/shards/0/members/m-1-%010d", i);
        vals[PARENTS + i] = "9 tcp://127.0.0.1:9 -";
    }
    make_nodes(&fx.lp, fx.zk.hosts, paths, vals, PARENTS + FAKE);
    rep r;
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(10, r.isr_calls > 0, &fx.lp);
    run_for(&fx.lp, 1);
    ck_assert(!r.ever_primary && r.primary[0] == '\0'); /* m-1-0000000000 would stand */
    zp_coord_destroy(&r.c);
}
END_TEST

/* A primary's role (server/repl/role.c) rewrites the in-sync set as the
 * live members change, with nothing else to prompt it (no shard, no
 * requests): the backup that joined is admitted, and once its session is
 * closed the set is the primary alone. */
START_TEST(test_role_isr_follows_members)
{
    zp_config cfg;
    zp_config_keys_defaults(&cfg);
    cfg.replicas = 2;
    snprintf(cfg.coord_zookeeper, sizeof(cfg.coord_zookeeper), "%s", fx.zk.hosts);
    snprintf(cfg.coord_name, sizeof(cfg.coord_name), "t");
    cfg.coord_session_timeout_ms = 4000;
    cfg.coord_connect_timeout_ms = 5000;
    zp_role r[2];
    for (int i = 0; i < 2; i++) {
        char ep[64], err[256] = "";
        snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", 7000 + i);
        zp_role_init(&r[i], &cfg, 0, i);
        int rc = zp_role_start(&r[i], &fx.lp.l, &cfg, ep, (uint64_t)i + 1, "", err, sizeof(err));
        ck_assert_msg(rc == 0, "%s", err);
        WAIT_FOR(10, r[i].me[0], &fx.lp); /* registered in this order: replica 0 is elected */
    }
    WAIT_FOR(20, r[0].kind == ZP_ROLE_PRIMARY && r[0].nlive == 2 && r[0].isr.n == 2, &fx.lp);
    zp_role_stop(&r[1]);
    WAIT_FOR(20, r[0].nlive == 1 && r[0].isr.n == 1 && !r[0].isr.writing, &fx.lp);
    ck_assert_str_eq(r[0].isr.m[0], r[0].me);
    zp_role_stop(&r[0]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coord");
    TCase *tc = fx_case(s, true);
    tcase_add_test(tc, test_election_and_failover);
    tcase_add_test(tc, test_out_of_sync_passed_over);
    tcase_add_test(tc, test_clean_record_primary_only);
    tcase_add_test(tc, test_frozen_primary_fenced);
    tcase_add_test(tc, test_zookeeper_restart);
    tcase_add_test(tc, test_tree_refused);
    tcase_add_test(tc, test_long_waiting_reason);
    tcase_add_test(tc, test_members_at_capacity);
    tcase_add_test(tc, test_role_isr_follows_members);
    TCase *alone = fx_case(s, false);
    tcase_add_test(alone, test_zookeeper_absent);
    tcase_add_test(alone, test_refusals);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
