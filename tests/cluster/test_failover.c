/*
 * test_failover.c - libzeps finds and follows a replicated shard's primary
 * (worker/lib/failover.c, docs/replication.md), with real zeps-server
 * processes and a real ZooKeeper (tests/support/zkserver.h): one shard, two
 * replicas, session timeout 1 s.
 *
 *   - replica 1 started first is primary, replica 0 a backup: a client,
 *     which asks servers[0][0] first, is refused ENOTPRIMARY and follows the
 *     redirect; HELLO, DECLARE, PUSH and PULL work; one redirect counted;
 *   - the primary SIGKILLed under a connected client: the same client
 *     object reaches the new primary once it is elected, well before its
 *     (long) request timeout; the time from the kill to the first request
 *     the new primary served is printed and bounded. The same with the
 *     primary frozen (SIGSTOP: a machine gone silent, its connections
 *     open), which only the heartbeats reveal. Written to hold
 *     whether or not the new primary has the old one's data (replication
 *     of state is a separate increment): it declares again and accepts a
 *     pull of either the replicated or the fresh values;
 *   - no primary at all (ZooKeeper and the primary killed: the backup
 *     cannot be elected; then both replicas dead): the call ends within
 *     its retry budget with an error naming the shard, both replicas and
 *     what each said; the client's log says the connection was lost (a
 *     disconnect is never taken for a refused connect).
 */
#define _GNU_SOURCE /* timegm */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "scratch.h"
#include "wire.h"
#include "zeps.h"
#include "zeps_errors.h"
#include "replset.h"
#include "zkserver.h"

#define SESSION_MS 1000
#define LEN        8

typedef zt_rset rset;

/* One shard of two replicas, coordinated by `hosts`; the workers' request
 * timeout and retries as given. */
static void rset_write(rset *rs, const char *hosts, int request_timeout_ms, int max_retries)
{
    char lines[400];
    memset(rs, 0, sizeof(*rs));
    snprintf(lines, sizeof(lines),
             "  workers = 1;\n  consistency = \"async\";\n  hello_timeout_ms = 10000;\n"
             "  request_timeout_ms = %d;\n  max_retries = %d;",
             request_timeout_ms, max_retries);
    zt_rset_write(rs, "failover", hosts, "t", SESSION_MS, lines);
}

static double wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The wall-clock time of the first line of replica r's log that contains
 * `needle` (the log's UTC timestamps, to the millisecond); -1 if none. */
static double log_time(const rset *rs, int r, const char *needle)
{
    char path[400], line[1024];
    snprintf(path, sizeof(path), "%s/replica-%d.log", rs->dir, r);
    FILE *f = fopen(path, "r");
    double t = -1;
    struct tm tm;
    int ms;
    while (f && t < 0 && fgets(line, sizeof(line), f)) {
        memset(&tm, 0, sizeof(tm));
        if (strstr(line, needle) &&
            sscanf(line, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                   &tm.tm_min, &tm.tm_sec, &ms) == 7) {
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            t = (double)timegm(&tm) + ms * 1e-3;
        }
    }
    if (f)
        fclose(f);
    return t;
}

/* The client's log (its stderr) while a call runs: redirected to `path`
 * from stderr_to until stderr_back, then read whole by slurp (the
 * caller frees it; "" if none). */
static int stderr_to(const char *path)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(dup2(fileno(f), 2), 0);
    fclose(f);
    return saved;
}

static void stderr_back(int saved)
{
    fflush(stderr);
    ck_assert_int_ge(dup2(saved, 2), 0);
    close(saved);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 16);
    size_t n = f ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

static const zeps_table_spec spec = {.name = "w", .length = LEN, .optimizer = "sgd", .lr = 1.0};

/* Push g[i] = -(i * scale + add) and pull: with lr 1 the table gains that. */
static void push_pull(zeps_client *c, uint32_t tid, float scale, float add, float *v)
{
    float g[LEN];
    for (int i = 0; i < LEN; i++)
        g[i] = -((float)i * scale + add);
    ck_assert_msg(zeps_push(c, tid, g, 0, LEN, 0) == 0, "push: %s", zeps_last_error(c));
    ck_assert_msg(zeps_pull(c, tid, v, 0, LEN, 0) == 0, "pull: %s", zeps_last_error(c));
}

static uint64_t redirects(const zeps_client *c)
{
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    return st.redirects;
}

/* A client asks replica 0 first; replica 1 is primary: it follows. */
START_TEST(test_follows_redirect)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts, 2000, 10);
    zt_rset_start(&rs, 1);
    zt_rset_wait(&rs, 1, "primary", 1, -1, 20);
    zt_rset_start(&rs, 0);
    zt_rset_wait(&rs, 0, "backup", 1, -1, 20);
    zt_rset_wait(&rs, 1, "primary", 1, 2, 20);

    zeps_client *c = NULL;
    ck_assert_msg(zeps_client_new(&c, rs.conf, 0) == 0, "%s", zeps_last_error(NULL));
    ck_assert_uint_eq(redirects(c), 1);
    uint32_t tid;
    ck_assert_msg(zeps_declare(c, &spec, &tid) == 0, "%s", zeps_last_error(c));
    float v[LEN];
    push_pull(c, tid, 1, 0, v);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(v[i] == (float)i, "v[%d] = %g", i, v[i]);
    ck_assert_uint_eq(redirects(c), 1);
    zeps_client_destroy(&c);

    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* The replica a client asks first is not running (its connects are
 * refused) and the other is primary: the search finds it and the HELLO
 * waiting for an answer goes there at once, not after its request timeout
 * of 10 s: no retry is counted, one redirect is. */
START_TEST(test_first_replica_down)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts, 10000, 2);
    zt_rset_start(&rs, 1);
    zt_rset_wait(&rs, 1, "primary", 1, -1, 20);

    zeps_client *c = NULL;
    ck_assert_msg(zeps_client_new(&c, rs.conf, 0) == 0, "%s", zeps_last_error(NULL));
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    ck_assert_uint_eq(st.redirects, 1);
    ck_assert_uint_eq(st.retries, 0);
    uint32_t tid;
    ck_assert_msg(zeps_declare(c, &spec, &tid) == 0, "%s", zeps_last_error(c));
    zeps_client_destroy(&c);

    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* The primary lost under a connected client: SIGKILL (its connections
 * close: the socket monitor sees it) or SIGSTOP (a machine gone silent:
 * only heartbeats see it). The client follows the new primary much sooner
 * than its request timeout of 10 s. */
static void primary_lost(int sig)
{
    const char *how = sig == SIGKILL ? "killed" : "frozen";
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts, 10000, 2);
    zt_rset_start(&rs, 0);
    zt_rset_wait(&rs, 0, "primary", 1, -1, 20);
    zt_rset_start(&rs, 1);
    zt_rset_wait(&rs, 1, "backup", 1, -1, 20);
    zt_rset_wait(&rs, 0, "primary", 1, 2, 20); /* replica 1 may be elected */

    zeps_client *c = NULL;
    ck_assert_msg(zeps_client_new(&c, rs.conf, 0) == 0, "%s", zeps_last_error(NULL));
    ck_assert_uint_eq(redirects(c), 0);
    uint32_t tid;
    ck_assert_msg(zeps_declare(c, &spec, &tid) == 0, "%s", zeps_last_error(c));
    float v[LEN];
    push_pull(c, tid, 1, 0, v); /* v[i] = i */

    double t0 = zt_now_s(), wall0 = wall_s();
    if (sig == SIGKILL)
        zt_rset_kill(&rs, 0, SIGKILL);
    else
        ck_assert_int_eq(kill(rs.pid[0], SIGSTOP), 0);
    /* the first request after it: declared again (idempotent: the new
     * primary holds the table, replicated, under the same id) */
    uint32_t tid2;
    ck_assert_msg(zeps_declare(c, &spec, &tid2) == 0, "declare after the primary %s: %s", how,
                  zeps_last_error(c));
    double took = zt_now_s() - t0;
    /* the election, from replica 1's log: the client's part is what follows */
    double elected = log_time(&rs, 1, "-> primary at epoch 2") - wall0;
    printf("primary %s: first request served by the new primary %.3f s after it; elected after "
           "%.3f s, so %.3f s after the election (session timeout %d ms)\n",
           how, took, elected, took - elected, SESSION_MS);
    fflush(stdout);
    ck_assert_msg(took < 5.0, "the client reached the new primary only after %.3f s", took);
    /* a kill is seen at once, a freeze after the heartbeat timeout (1.5 s) */
    ck_assert_msg(elected > 0 && (sig != SIGKILL || took - elected < 1.0),
                  "the client reached the new primary %.3f s after its election", took - elected);
    ck_assert_uint_eq(tid2, tid);
    ck_assert_uint_eq(redirects(c), 1);
    zt_rset_wait(&rs, 1, "primary", 2, -1, 1);

    /* push and pull there: the pushed values on top of the replicated
     * table's v[i] = i (the primary acknowledged it only once its backup
     * had it) */
    push_pull(c, tid, 0, 1, v);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(v[i] == (float)i + 1.0f, "v[%d] = %g, not the replicated %d + 1", i, v[i], i);
    ck_assert_uint_eq(redirects(c), 1);
    zeps_client_destroy(&c);

    if (sig == SIGSTOP)
        zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}

START_TEST(test_primary_killed)
{
    primary_lost(SIGKILL);
}
END_TEST

START_TEST(test_primary_frozen)
{
    primary_lost(SIGSTOP);
}
END_TEST

/* Every replica of the shard frozen (SIGSTOP) past its session, as a
 * stalled ZooKeeper or a paused host does to all sessions at once: each
 * makes its member node again (a new sequence number) when thawed, the
 * in-sync set still naming the old nodes. The same processes are elected
 * again (znode.h: nodes are named by the process's incarnation), and the
 * client carries on with every push it saw acknowledged. */
START_TEST(test_every_session_expired)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts, 1000, 30);
    zt_rset_up(&rs);
    zeps_client *c = NULL;
    ck_assert_msg(zeps_client_new(&c, rs.conf, 0) == 0, "%s", zeps_last_error(NULL));
    uint32_t tid;
    ck_assert_msg(zeps_declare(c, &spec, &tid) == 0, "%s", zeps_last_error(c));
    float v[LEN];
    push_pull(c, tid, 1, 0, v); /* v[i] = i */
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(kill(rs.pid[r], SIGSTOP), 0);
    zt_sleep_ms(3 * SESSION_MS);
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(kill(rs.pid[r], SIGCONT), 0);
    double t0 = zt_now_s();
    push_pull(c, tid, 0, 1, v); /* served once a replica is primary again */
    double took = zt_now_s() - t0;
    printf("every session expired: the client served again %.3f s after the thaw\n", took);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(v[i] == (float)i + 1.0f, "v[%d] = %g, not %d + 1", i, v[i], i);
    /* settled: one primary, the other its backup, at a new epoch (a
     * loaded machine may take a while to thaw the second) */
    char roles[2][16] = {"", ""};
    uint64_t epochs[2] = {0, 0};
    for (double until = zt_now_s() + 15; zt_now_s() < until; zt_sleep_ms(100)) {
        for (int r = 0; r < 2; r++) {
            Zeps__Header *h = zt_rset_stats(&rs, r);
            ck_assert_ptr_nonnull(h);
            snprintf(roles[r], sizeof(roles[r]), "%s", h->stats->role);
            epochs[r] = h->stats->epoch;
            zeps__header__free_unpacked(h, NULL);
        }
        if (epochs[0] == epochs[1] && epochs[0] >= 2 && strcmp(roles[0], roles[1]) != 0 &&
            (strcmp(roles[0], "primary") == 0 || strcmp(roles[1], "primary") == 0))
            break;
    }
    ck_assert_msg(epochs[0] == epochs[1] && epochs[0] >= 2 && strcmp(roles[0], roles[1]) != 0,
                  "replica 0 %s at epoch %llu, replica 1 %s at epoch %llu", roles[0],
                  (unsigned long long)epochs[0], roles[1], (unsigned long long)epochs[1]);
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Replica r's STATS after ZooKeeper went away: the first state it reports
 * other than "connected" is "suspended" (serving on, no failover), before
 * any later one ("unreachable" once the connect timeout passed). */
static void expect_suspended(zt_rset *rs, int r)
{
    char seen[32] = "connected";
    for (double t0 = zt_now_s(); strcmp(seen, "connected") == 0 && zt_now_s() - t0 < 15.0;) {
        Zeps__Header *h = zt_rset_stats(rs, r);
        if (h) {
            snprintf(seen, sizeof(seen), "%s", h->stats->coord_session);
            zeps__header__free_unpacked(h, NULL);
        }
        zt_sleep_ms(20);
    }
    ck_assert_msg(strcmp(seen, "suspended") == 0,
                  "replica %d's coordination session went from connected to '%s'", r, seen);
}

/* No primary to be found: the call ends within its retry budget, saying
 * which replicas were asked and what each said. */
START_TEST(test_no_primary)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts, 500, 3); /* a budget of (3 + 1) x 0.5 s */
    zt_rset_start(&rs, 0);
    zt_rset_wait(&rs, 0, "primary", 1, -1, 20);
    zt_rset_start(&rs, 1);
    zt_rset_wait(&rs, 1, "backup", 1, -1, 20);
    zt_rset_wait(&rs, 0, "primary", 1, 2, 20); /* replica 1 may be elected */

    zeps_client *c = NULL;
    ck_assert_msg(zeps_client_new(&c, rs.conf, 0) == 0, "%s", zeps_last_error(NULL));
    uint32_t tid;
    ck_assert_msg(zeps_declare(c, &spec, &tid) == 0, "%s", zeps_last_error(c));
    float v[LEN];
    push_pull(c, tid, 1, 0, v);

    /* without ZooKeeper nobody is elected: the backup keeps naming the
     * dead primary, which the client must not take for an answer */
    zt_zk_stop(&zk, SIGKILL);
    expect_suspended(&rs, 1);
    zt_rset_kill(&rs, 0, SIGKILL);
    float g[LEN] = {0};
    char logp[400];
    snprintf(logp, sizeof(logp), "%s/client-stderr.log", rs.dir);
    int saved = stderr_to(logp);
    double t0 = zt_now_s();
    int rc = zeps_push(c, tid, g, 0, LEN, 0);
    double took = zt_now_s() - t0;
    stderr_back(saved);
    char *log = slurp(logp);
    fputs(log, stderr);
    const char *err = zeps_last_error(c);
    printf("no primary (backup alive): %s after %.2f s: %s\n", zeps_errname(rc), took, err);
    /* the socket's monitor saw the connection lost, and the search began
     * so (its reconnects refused since are not news in that search) */
    char lost[160];
    snprintf(lost, sizeof(lost), "connection to replica 0 at %s lost", rs.ep[0]);
    ck_assert_msg(strstr(log, lost) && !strstr(log, "refused"), "no '%s', or a refusal, in: %s",
                  lost, log);
    free(log);
    ck_assert_int_eq(rc, ZEPS_ENOTPRIMARY);
    ck_assert_msg(took > 1.0 && took < 4.0, "gave up after %.2f s", took);
    char want[3][160];
    snprintf(want[0], sizeof(want[0]), "shard 0");
    snprintf(want[1], sizeof(want[1]), "replica 0 at %s: connection lost", rs.ep[0]);
    snprintf(want[2], sizeof(want[2]), "replica 1 at %s: shard 0 replica 1 is a backup", rs.ep[1]);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(strstr(err, want[i]) != NULL, "no '%s' in: %s", want[i], err);

    /* both replicas dead: nothing answers at all */
    zt_rset_kill(&rs, 1, SIGKILL);
    t0 = zt_now_s();
    rc = zeps_push(c, tid, g, 0, LEN, 0);
    took = zt_now_s() - t0;
    err = zeps_last_error(c);
    printf("no primary (both dead): %s after %.2f s: %s\n", zeps_errname(rc), took, err);
    ck_assert_int_eq(rc, ZEPS_ETIMEDOUT);
    ck_assert_msg(took > 1.0 && took < 4.0, "gave up after %.2f s", took);
    ck_assert_msg(strstr(err, "replica 0 at") && strstr(err, "replica 1 at") &&
                      strstr(err, "no answer"),
                  "%s", err);
    ck_assert_uint_eq(redirects(c), 0);
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("failover");
    TCase *tc = tcase_create("failover");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_follows_redirect);
    tcase_add_test(tc, test_first_replica_down);
    tcase_add_test(tc, test_primary_killed);
    tcase_add_test(tc, test_primary_frozen);
    tcase_add_test(tc, test_every_session_expired);
    tcase_add_test(tc, test_no_primary);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
