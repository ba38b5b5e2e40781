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
 *     create permission, by zkCli.sh): the replica registers nowhere.
 */
#include <arpa/inet.h>
#include <check.h>
#include <malloc.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "check_main.h"
#include "coord.h"
#include "harness.h"
#include "zeps_errors.h"
#include "zkserver.h"

#define SESSION_MS 1000

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

/* Cut this process's connections to the ZooKeeper on `port` (as a broken
 * network would): the clients see them closed and connect again, their
 * sessions kept. Returns how many were cut. */
static int drop_connections(int port)
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

/* The heap in use (glibc's count; 0 under AddressSanitizer, whose leak
 * check covers what this measures). */
static long heap_used(void)
{
    return (long)mallinfo2().uordblks;
}

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

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void on_session(void *arg, zp_coord_session ev, const char *why)
{
    rep *r = arg;
    r->events[ev]++;
    r->event_at[ev] = now_s();
    snprintf(r->why, sizeof(r->why), "%s", why);
}

static void on_role(void *arg, const zp_coord_view *v)
{
    rep *r = arg;
    r->roles++;
    snprintf(r->me, sizeof(r->me), "%s", v->me);
    snprintf(r->primary, sizeof(r->primary), "%s", v->primary);
    r->epoch = v->epoch;
    r->is_primary = v->is_primary;
    r->ever_primary |= v->is_primary;
}

static void on_isr(void *arg, const zp_coord_isr *s)
{
    rep *r = arg;
    r->isr_calls++;
    r->isr_n = s->n;
    r->isr_version = s->version;
    r->isr_epoch = s->epoch;
    for (int i = 0; i < s->n; i++)
        snprintf(r->isr[i], sizeof(r->isr[i]), "%s", s->members[i]);
}

static void on_done(void *arg, int rc, int32_t version)
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

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

static void loop_init(loop *lp)
{
    ck_assert_int_eq(uv_loop_init(&lp->l), 0);
    uv_timer_init(&lp->l, &lp->tick);
    uv_timer_start(&lp->tick, on_tick, 20, 20);
}

/* Close the loop: everything the coords held must be gone by then. */
static void loop_fini(loop *lp)
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

static void rep_start(rep *r, loop *lp, const char *hosts, int replica, int connect_ms)
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
                       .connect_timeout_ms = connect_ms};
    zp_coord_cbs cbs = {.session = on_session, .role = on_role, .isr = on_isr, .arg = r};
    int rc = zp_coord_new(&r->c, &lp->l, &o, &cbs, err, sizeof(err));
    ck_assert_msg(rc == 0, "zp_coord_new: %s", err);
}

static bool agree(const rep *r, const rep *primary, uint64_t epoch)
{
    return r->me[0] && strcmp(r->primary, primary->me) == 0 && r->epoch == epoch &&
           r->is_primary == (r == primary);
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

static void start_zk(zt_zk *zk)
{
    ck_assert_int_eq(zt_zk_start(zk), 0);
    printf("ZooKeeper serving %.2f s after its start\n", zk->start_s);
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
    zt_zk zk;
    start_zk(&zk);
    loop lp;
    loop_init(&lp);
    rep r[3];
    three(&lp, zk.hosts, r);
    /* the first election put the primary alone in the set */
    WAIT_FOR(5, r[0].isr_calls > 0, &lp);
    ck_assert_int_eq(r[0].isr_n, 1);
    ck_assert_str_eq(r[0].isr[0], r[0].me);
    ck_assert_uint_eq(r[0].isr_epoch, 1);
    const char *all[] = {r[0].me, r[1].me, r[2].me};
    WAIT_FOR(5, agree(&r[0], &r[0], 1) && agree(&r[1], &r[0], 1) && agree(&r[2], &r[0], 1), &lp);
    int roles[3] = {r[0].roles, r[1].roles, r[2].roles};
    ck_assert_int_eq(isr_write(&r[0], &lp, all, 3, r[0].isr_version), 0);
    WAIT_FOR(5, r[1].isr_n == 3 && r[2].isr_n == 3, &lp);
    for (int i = 0; i < 3; i++) /* the same primary at the same epoch: no role callback */
        ck_assert_int_eq(r[i].roles, roles[i]);
    /* the same write again, on the version it replaced: refused */
    ck_assert_int_eq(isr_write(&r[0], &lp, all, 3, r[0].done_version - 1), ZEPS_ESTALE);
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
    WAIT_FOR(10, agree(&r[1], &r[1], 2) && agree(&r[2], &r[1], 2), &lp);
    printf("failover after a closed session: %.3f s\n", now_s() - t0);
    ck_assert(!r[2].ever_primary);
    /* the new primary rewrote the set at its epoch, without the dead */
    WAIT_FOR(5, r[2].isr_epoch == 2, &lp);
    ck_assert_int_eq(r[2].isr_n, 2);
    ck_assert_str_eq(r[2].isr[0], r[1].me);
    ck_assert_str_eq(r[2].isr[1], r[2].me);
    ck_assert(zp_coord_is_stale(r[2].c, 1));
    ck_assert(!zp_coord_is_stale(r[2].c, 2));

    zp_coord_destroy(&r[1].c);
    zp_coord_destroy(&r[2].c);
    loop_fini(&lp);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A member outside the in-sync set is never elected, though its
 * sequence is lower than the one that is. */
/* The clean-exit record: a backup may not write it, the primary may (and
 * a malformed name is refused before anything is sent). */
START_TEST(test_clean_record_primary_only)
{
    zt_zk zk;
    start_zk(&zk);
    loop lp;
    loop_init(&lp);
    rep r[3];
    three(&lp, zk.hosts, r);
    const char *snap = "0000000000000001-0000000000000002-3";
    ck_assert_int_eq(zp_coord_clean_set(r[1].c, snap, on_done, &r[1]), ZEPS_ESTATE);
    ck_assert_int_eq(zp_coord_clean_set(r[0].c, "", on_done, &r[0]), ZEPS_EINVAL);
    int calls = r[0].done_calls;
    ck_assert_int_eq(zp_coord_clean_set(r[0].c, snap, on_done, &r[0]), 0);
    WAIT_FOR(5, r[0].done_calls > calls, &lp);
    ck_assert_int_eq(r[0].done_rc, 0);
    /* the next primary replaces the record, void since its election */
    WAIT_FOR(5, r[0].isr_calls > 0, &lp);
    const char *all[] = {r[0].me, r[1].me, r[2].me};
    ck_assert_int_eq(isr_write(&r[0], &lp, all, 3, r[0].isr_version), 0);
    WAIT_FOR(5, r[1].isr_n == 3, &lp);
    zp_coord_destroy(&r[0].c);
    WAIT_FOR(10, agree(&r[1], &r[1], 2), &lp);
    calls = r[1].done_calls;
    WAIT_FOR(5, zp_coord_clean_set(r[1].c, snap, on_done, &r[1]) == 0, &lp);
    WAIT_FOR(5, r[1].done_calls > calls, &lp);
    ck_assert_int_eq(r[1].done_rc, 0);
    zp_coord_destroy(&r[1].c);
    zp_coord_destroy(&r[2].c);
    loop_fini(&lp);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

START_TEST(test_out_of_sync_passed_over)
{
    zt_zk zk;
    start_zk(&zk);
    loop lp;
    loop_init(&lp);
    rep r[3];
    three(&lp, zk.hosts, r);
    WAIT_FOR(5, r[0].isr_calls > 0, &lp);
    const char *some[] = {r[0].me, r[2].me};
    ck_assert_int_eq(isr_write(&r[0], &lp, some, 2, r[0].isr_version), 0);
    WAIT_FOR(5, r[1].isr_n == 2, &lp);
    zp_coord_destroy(&r[0].c);
    WAIT_FOR(10, agree(&r[1], &r[2], 2) && agree(&r[2], &r[2], 2), &lp);
    ck_assert(!r[1].ever_primary);
    zp_coord_destroy(&r[1].c);
    zp_coord_destroy(&r[2].c);
    loop_fini(&lp);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

START_TEST(test_frozen_primary_fenced)
{
    zt_zk zk;
    start_zk(&zk);
    loop la, lb; /* the primary's, the backup's */
    loop_init(&la);
    loop_init(&lb);
    rep a, b;
    rep_start(&a, &la, zk.hosts, 0, 5000);
    WAIT_FOR(10, a.is_primary && a.epoch == 1 && a.isr_calls > 0, &la);
    rep_start(&b, &lb, zk.hosts, 1, 5000);
    WAIT_FOR(10, agree(&b, &a, 1), &la, &lb);
    const char *both[] = {a.me, b.me};
    int calls = a.done_calls;
    ck_assert_int_eq(zp_coord_isr_set(a.c, both, 2, a.isr_version, on_done, &a), 0);
    WAIT_FOR(5, a.done_calls > calls && b.isr_n == 2, &la, &lb);
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
    WAIT_FOR(10, a.done_calls > calls, &la, &lb);
    ck_assert_msg(a.done_rc == ZEPS_ECLOSED || a.done_rc == ZEPS_ESTALE, "rc %d", a.done_rc);
    /* nor does a clean-exit record, if its view still let it send one */
    calls = a.done_calls;
    if (zp_coord_clean_set(a.c, "0000000000000001-0000000000000002-3", on_done, &a) == 0) {
        WAIT_FOR(10, a.done_calls > calls, &la, &lb);
        ck_assert_msg(a.done_rc == ZEPS_ECLOSED || a.done_rc == ZEPS_ESTALE, "rc %d", a.done_rc);
    }
    WAIT_FOR(10, a.events[ZP_COORD_EXPIRED] == 1 && !a.is_primary, &la, &lb);
    printf("frozen primary told EXPIRED %.3f s after it ran again\n",
           a.event_at[ZP_COORD_EXPIRED] - t1);
    /* ... then joins again on a new session, as a backup of epoch 2 */
    WAIT_FOR(10, a.events[ZP_COORD_CONNECTED] == 2 && agree(&a, &b, 2), &la, &lb);
    ck_assert(zp_coord_is_stale(a.c, 1));
    ck_assert_int_eq(b.isr_version, now_version);
    ck_assert(!b.events[ZP_COORD_SUSPENDED] && !b.events[ZP_COORD_EXPIRED]);

    zp_coord_destroy(&a.c);
    zp_coord_destroy(&b.c);
    loop_fini(&la);
    loop_fini(&lb);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Sessions of 3 s (the tests' ZooKeeper allows up to 4): a replica must
 * reconnect within its session timeout of ZooKeeper's return, which a
 * loaded machine delayed past 1 s (an expiry, once in 3 at a load of 10). */
START_TEST(test_zookeeper_restart)
{
    zt_zk zk;
    start_zk(&zk);
    session_ms = 3000;
    loop lp;
    loop_init(&lp);
    rep a, b;
    rep_start(&a, &lp, zk.hosts, 0, 1000);
    WAIT_FOR(10, a.is_primary && a.epoch == 1, &lp);
    rep_start(&b, &lp, zk.hosts, 1, 1000);
    WAIT_FOR(10, agree(&b, &a, 1), &lp);

    zt_zk_stop(&zk, SIGKILL);
    double t0 = now_s();
    WAIT_FOR(10, a.events[ZP_COORD_SUSPENDED] == 1 && b.events[ZP_COORD_SUSPENDED] == 1, &lp);
    printf("suspended %.3f s after ZooKeeper was killed\n", now_s() - t0);
    /* down for longer than the session timeout and the connect timeout */
    WAIT_FOR(10, now_s() - t0 > 2.0 * session_ms / 1000, &lp);
    ck_assert_int_eq(a.events[ZP_COORD_UNREACHABLE], 1);
    ck_assert(a.is_primary && a.epoch == 1); /* no failover while it is down */
    ck_assert_int_eq(zt_zk_restart(&zk), 0);
    double t1 = now_s();
    WAIT_FOR(15,
             (a.events[ZP_COORD_RESUMED] || a.events[ZP_COORD_CONNECTED] == 2) &&
                 (b.events[ZP_COORD_RESUMED] || b.events[ZP_COORD_CONNECTED] == 2),
             &lp);
    printf("back %.3f s after ZooKeeper answered again (down %.2f s): a %s, b %s\n", now_s() - t1,
           t1 - t0, a.events[ZP_COORD_RESUMED] ? "resumed" : "new session",
           b.events[ZP_COORD_RESUMED] ? "resumed" : "new session");
    /* ZooKeeper restores the sessions with a fresh timeout: both resume,
     * and the primary keeps its epoch */
    ck_assert_int_eq(a.events[ZP_COORD_EXPIRED] + b.events[ZP_COORD_EXPIRED], 0);
    WAIT_FOR(5, agree(&a, &a, 1) && agree(&b, &a, 1), &lp);
    ck_assert(!b.ever_primary);

    zp_coord_destroy(&a.c);
    zp_coord_destroy(&b.c);
    loop_fini(&lp);
    zt_zk_stop(&zk, SIGTERM);
    session_ms = SESSION_MS;
}
END_TEST

START_TEST(test_zookeeper_absent)
{
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", zt_free_port());
    loop lp;
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

/* Run zkCli.sh against `hosts`, `cmds` (lines) on its standard input;
 * its output into out (NULL: thrown away). */
static void zk_cli(const char *hosts, const char *cmds, char *out, size_t len)
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
static void zk_cli_running(const char *hosts, const char *cmds, loop *lp)
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

START_TEST(test_tree_refused)
{
    zt_zk zk;
    start_zk(&zk);
    /* shard 0's node without the create permission, its members node made */
    zk_cli(zk.hosts,
           "create /zeps\\ncreate /zeps/t\\ncreate /zeps/t/shards\\ncreate /zeps/t/shards/0\\n"
           "create /zeps/t/shards/0/members\\nsetAcl /zeps/t/shards/0 world:anyone:rwda\\n",
           NULL, 0);
    loop lp;
    loop_init(&lp);
    rep r;
    session_ms = 4000; /* the most ZooKeeper grants here: a member node outlives zkCli.sh */
    rep_start(&r, &lp, zk.hosts, 0, 5000);
    session_ms = SESSION_MS;
    WAIT_FOR(10, r.events[ZP_COORD_CONNECTED] == 1, &lp);
    double t0 = now_s();
    while (now_s() - t0 < 3) /* time to register, which it must not */
        uv_run(&lp.l, UV_RUN_ONCE);
    char ls[256];
    zk_cli(zk.hosts, "ls /zeps/t/shards/0/members\\n", ls, sizeof(ls));
    ck_assert_msg(strcmp(ls, "[]\n") == 0, "members: %s", ls);
    ck_assert_int_eq(r.roles, 0);
    zp_coord_destroy(&r.c);
    loop_fini(&lp);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* An unknown backend, a bad cluster name, hosts the client refuses:
 * refused with their words. */
START_TEST(test_refusals)
{
    loop lp;
    loop_init(&lp);
    zp_coord *c = NULL;
    char err[256] = "";
    zp_coord_cbs cbs = {0};
    zp_coord_opts o = {.backend = "etcd", .hosts = "127.0.0.1:1", .cluster = "t"};
    ck_assert_int_eq(zp_coord_new(&c, &lp.l, &o, &cbs, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_ptr_nonnull(strstr(err, "etcd"));
    o.backend = "zookeeper";
    o.cluster = "a/b";
    ck_assert_int_eq(zp_coord_new(&c, &lp.l, &o, &cbs, err, sizeof(err)), ZEPS_ECONFIG);
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
    ck_assert_int_eq(zp_coord_new(&c, &lp.l, &o, &cbs, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "refused hosts 'hhh"));
    long before = 0;
    for (int i = 0; i < 100; i++) { /* the first 50 warm the allocator's caches up */
        if (i == 50)
            before = heap_used();
        ck_assert_int_eq(zp_coord_new(&c, &lp.l, &o, &cbs, err, sizeof(err)), ZEPS_EINVAL);
    }
    long grown = heap_used() - before;
    ck_assert_msg(grown < (long)sizeof(hosts), "50 refusals grew the heap by %ld bytes", grown);
    ck_assert_ptr_null(c);
    loop_fini(&lp);
}
END_TEST

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
    Suite *s = suite_create("coord");
    TCase *tc = tcase_create("zookeeper");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_election_and_failover);
    tcase_add_test(tc, test_out_of_sync_passed_over);
    tcase_add_test(tc, test_clean_record_primary_only);
    tcase_add_test(tc, test_frozen_primary_fenced);
    tcase_add_test(tc, test_zookeeper_restart);
    tcase_add_test(tc, test_zookeeper_absent);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_tree_refused);
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
