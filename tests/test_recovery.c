/*
 * test_recovery.c - a client across a server restart, and snapshots on
 * request, with real processes (docs/faults.md).
 *
 * async: a shard snapshotted on request (SNAPSHOT op), then SIGKILLed and
 * restarted, holds exactly the snapshot's state; the same client object,
 * which still has the old server incarnation, gets ERESTARTED, says HELLO
 * again and resends transparently; a push sent while the shard is down is
 * applied exactly once.
 *
 * bsp: `zepsctl snapshot take` on a cluster standing at one cut writes that
 * cut on every shard; after SIGKILL of both shards the restart holds the
 * state after that clock bit for bit (single-process reference). A worker
 * whose shard rolled back (ROLLBACK) gets ERESTARTED with the cut.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "bsp_ref.h"
#include "check_main.h"
#include "harness.h"
#include "mathenv.h"
#include "zeps.h"

static int log_has(const zt_cluster *cl, int k, const char *needle)
{
    char path[400], line[1024];
    snprintf(path, sizeof(path), "%s/server-%d.log", cl->dir, k);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int found = 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* Poll a server log for `needle` (10 s). */
static int wait_log(const zt_cluster *cl, int k, const char *needle)
{
    for (int i = 0; i < 200; i++) {
        if (log_has(cl, k, needle))
            return 1;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

#define N 8

static const zeps_table_spec plain = {
    .name = "x", .length = N, .optimizer = "sgd", .lr = 1.0, .init = "zeros"};

static void expect_all(zeps_client *c, uint32_t t, float v)
{
    float x[N];
    ck_assert_int_eq(zeps_pull(c, t, x, 0, N, 0), 0);
    for (int i = 0; i < N; i++)
        ck_assert_msg(x[i] == v, "element %d is %g, expected %g", i, x[i], v);
}

START_TEST(test_async_restart)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", "  snapshot_dir = \"@DIR@/snap\";", NULL),
                     0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &plain, &t), 0);
    float g[N];
    for (int i = 0; i < N; i++)
        g[i] = 1.0f;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(zeps_push(c, t, g, 0, N, i), 0);

    /* SNAPSHOT on request, from a tool: point in time, set 0x64 */
    zeps_client *tool = zt_client(&cl, ZEPS_RANK_TOOL);
    ck_assert_ptr_nonnull(tool);
    ck_assert_int_eq(zeps_snapshot_request(tool, -1, 100), 0);
    zeps_client_destroy(&tool);
    ck_assert(wait_log(&cl, 0, "snapshot set 0000000000000064 (on request, clock -1) written"));

    /* two more pushes the snapshot does not hold: lost with the crash */
    for (int i = 3; i < 5; i++)
        ck_assert_int_eq(zeps_push(c, t, g, 0, N, i), 0);
    expect_all(c, t, -5.0f);

    zt_server_kill(&cl, 0, SIGKILL);
    /* sent while the shard is down: queued by ZeroMQ, answered ERESTARTED by
     * the new shard, resent after HELLO, applied once */
    zeps_req *r;
    ck_assert_int_eq(zeps_push_start(c, t, g, 0, N, 5, &r), 0);
    ck_assert_int_eq(zt_server_start(&cl, 0), 0);
    ck_assert(log_has(&cl, 0, "restored snapshot set 0000000000000064"));
    ck_assert_int_eq(zeps_wait(&r), 0);
    expect_all(c, t, -4.0f); /* -3 restored, then exactly one push */

    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_ge(cs.restarts, 1);
    /* the client kept its incarnation: the shard knows it as before */
    ck_assert(log_has(&cl, 0, "restored snapshot set"));
    ck_assert(!log_has(&cl, 0, "worker 0 rejoined with a new incarnation"));
    ck_assert_int_eq(zeps_push(c, t, g, 0, N, 6), 0);
    expect_all(c, t, -5.0f);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static void pull_all(const zt_cluster *cl, int64_t clock, float *out)
{
    zeps_client *c = zt_client(cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &zt_bsp_spec, &t), 0);
    ck_assert_int_eq(zeps_pull(c, t, out, 0, ZT_BSP_LEN, clock), 0);
    zeps_client_destroy(&c);
}

START_TEST(test_bsp_take_and_rollback)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp", "  snapshot_dir = \"@DIR@/snap\";", NULL),
                     0);
    ck_assert_int_eq(zt_bsp_run_workers(&cl, 2, 6), 0);

    /* every shard stands at cut 6: zepsctl snapshot take writes that cut */
    char cmd[1024], bin[512];
    snprintf(cmd, sizeof(cmd), "%s snapshot take --config %s --timeout 20 > %s/take.out 2>&1",
             zt_bin("zepsctl", bin, sizeof(bin)), cl.conf, cl.dir);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl snapshot take failed");
    ck_assert(log_has(&cl, 0, "snapshot set 0000000000000006 (on request, clock 6)"));
    ck_assert(log_has(&cl, 1, "snapshot set 0000000000000006 (on request, clock 6)"));

    /* a client of rank 1 from before the crash */
    zeps_client *c1 = zt_client(&cl, 1);
    ck_assert_ptr_nonnull(c1);
    uint32_t t1;
    ck_assert_int_eq(zeps_declare(c1, &zt_bsp_spec, &t1), 0);

    for (int k = 0; k < 2; k++)
        zt_server_kill(&cl, k, SIGKILL);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(zt_server_start(&cl, k), 0);
    ck_assert(log_has(&cl, 0, "restored snapshot set 0000000000000006"));
    ck_assert(log_has(&cl, 1, "restored snapshot set 0000000000000006"));
    float w[ZT_BSP_LEN], ref[ZT_BSP_LEN];
    pull_all(&cl, 6, w);
    zt_bsp_reference(2, 6, ref);
    for (int i = 0; i < ZT_BSP_LEN; i++)
        ck_assert_msg(memcmp(&w[i], &ref[i], sizeof(float)) == 0,
                      "element %d after the requested cut: %.9g, reference %.9g", i, w[i], ref[i]);

    /* the old client learns the cut from ERESTARTED, rolls back (a no-op
     * here: both shards stand at it) and carries on */
    float x[ZT_BSP_LEN];
    ck_assert_int_eq(zeps_pull(c1, t1, x, 0, ZT_BSP_LEN, 6), ZEPS_ERESTARTED);
    ck_assert_int_eq(zeps_resume_clock(c1), 6);
    ck_assert_int_eq(zeps_rollback(c1, 6), 0);
    ck_assert_int_eq(zeps_pull(c1, t1, x, 0, ZT_BSP_LEN, 6), 0);
    ck_assert(memcmp(x, ref, sizeof(x)) == 0);
    /* a cut the shards never wrote cannot be rolled back to */
    ck_assert_int_ne(zeps_rollback(c1, 3), 0);
    zeps_client_destroy(&c1);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* auto (Young/Daly): a first snapshot at clock 1 measures the duration,
 * then the interval is chosen, logged, and complete sets follow. */
START_TEST(test_bsp_auto)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp",
                                      "  snapshot_dir = \"@DIR@/snap\";\n"
                                      "  snapshot_mtbf_s = 0.05;\n  snapshot_on_exit = false;",
                                      NULL),
                     0);
    ck_assert_int_eq(zt_bsp_run_workers(&cl, 2, 40), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert(wait_log(&cl, k, "(auto, clock 1) written"));
        ck_assert(wait_log(&cl, k, "auto snapshots: interval"));
    }
    char cmd[1024], bin[512];
    snprintf(cmd, sizeof(cmd), "%s snapshot inspect %s/snap > %s/inspect.out 2>&1",
             zt_bin("zepsctl", bin, sizeof(bin)), cl.dir, cl.dir);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* a restart restores an auto cut after clock 1 */
    for (int k = 0; k < 2; k++)
        zt_server_kill(&cl, k, SIGKILL);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(zt_server_start(&cl, k), 0);
    ck_assert(log_has(&cl, 0, "restored snapshot set"));
    ck_assert(!log_has(&cl, 0, "restored snapshot set 0000000000000001 "));
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    zp_mathenv_setup(argv);
    Suite *s = suite_create("recovery");
    TCase *tc = tcase_create("recovery");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_async_restart);
    tcase_add_test(tc, test_bsp_take_and_rollback);
    tcase_add_test(tc, test_bsp_auto);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
