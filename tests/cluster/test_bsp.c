/*
 * test_bsp.c - BSP with real processes: bit-for-bit determinism, pulls that
 * wait for their round, and the barrier.
 *
 * N worker processes train a table through S real shards. Each sleeps a
 * random time before every push, seeded from its pid and the clock, so
 * pushes reach the shards in different orders on every run. The final
 * parameters must be bit-identical across repeated runs and equal to a
 * single-process reference that sums the same per-worker gradients in rank
 * order and applies the same optimizer.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "mathenv.h"
#include "bsp_ref.h"
#include "harness.h"
#include "zeps.pb-c.h"
#include "optim.h"
#include "now.h"
#include "init.h"
#include "zeps.h"

#define L ZT_BSP_LEN
#define STEPS 12

/* Run the cluster once; the final parameters go to out. */
static void run_cluster(int nworkers, int nservers, float *out)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, nservers, nworkers, "bsp", NULL, NULL), 0);
    ck_assert_int_eq(zt_bsp_run_workers(&cl, nworkers, STEPS), 0);
    zeps_client *c = zt_client(&cl, 0); /* rank 0 again, new incarnation */
    ck_assert_ptr_nonnull(c);
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &zt_bsp_spec, &t), 0);
    ck_assert_int_eq(zeps_pull(c, t, out, 0, L, STEPS), 0);
    for (int k = 0; k < nservers; k++)
        ck_assert_uint_eq(zeps_pulled_version(c, t, k), STEPS); /* one update per round */
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

static const int layouts[][2] = {{1, 1}, {2, 1}, {3, 2}, {4, 3}};

START_TEST(test_deterministic)
{
    int n = layouts[_i][0], s = layouts[_i][1];
    float *a = malloc(L * sizeof(float)), *b = malloc(L * sizeof(float));
    float *ref = malloc(L * sizeof(float));
    run_cluster(n, s, a);
    run_cluster(n, s, b);
    zt_bsp_reference(n, STEPS, ref);
    ck_assert_msg(memcmp(a, b, L * sizeof(float)) == 0, "N=%d S=%d: two runs differ", n, s);
    int diff = -1;
    for (int i = 0; i < L && diff < 0; i++)
        if (memcmp(&a[i], &ref[i], sizeof(float)) != 0)
            diff = i;
    ck_assert_msg(diff < 0, "N=%d S=%d: element %d is %.9g, reference %.9g", n, s, diff,
                  diff >= 0 ? a[diff] : 0, diff >= 0 ? ref[diff] : 0);
    /* and training moved the parameters */
    float init[L];
    zp_init_fill(init, 0, L, ZP_INIT_NORMAL, zt_bsp_spec.init_scale, zt_bsp_spec.seed);
    ck_assert(memcmp(init, a, sizeof(init)) != 0);
    free(a);
    free(b);
    free(ref);
}
END_TEST

/* A pull for clock 1 waits until every worker pushed clock 0. */
START_TEST(test_pull_waits_for_round)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp", NULL, NULL), 0);
    zeps_client *c0 = zt_client(&cl, 0), *c1 = zt_client(&cl, 1);
    uint32_t t0, t1;
    zeps_table_spec sp = {.name = "v", .length = 10, .optimizer = "sgd", .lr = 1.0};
    ck_assert_int_eq(zeps_declare(c0, &sp, &t0), 0);
    ck_assert_int_eq(zeps_declare(c1, &sp, &t1), 0);
    float g[10], v[10];
    for (int i = 0; i < 10; i++)
        g[i] = 1.0f;
    ck_assert_int_eq(zeps_push(c0, t0, g, 0, 10, 0), 0);
    zeps_req *r;
    ck_assert_int_eq(zeps_pull_start(c0, t0, v, 0, 10, 1, &r), 0);
    /* rank 1 has not pushed: the pull must still be parked after 1.5 s,
     * longer than the client's request timeout (it keeps it alive). */
    struct timespec ts = {1, 500000000};
    nanosleep(&ts, NULL);
    Zeps__ShardStats *st = zt_stats(c1, 0);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(st->tables[0]->parked, 1);
    ck_assert_uint_eq(st->tables[0]->version, 0);
    zeps__shard_stats__free_unpacked(st, NULL);
    for (int i = 0; i < 10; i++)
        g[i] = 3.0f;
    ck_assert_int_eq(zeps_push(c1, t1, g, 0, 10, 0), 0);
    ck_assert_int_eq(zeps_wait(&r), 0);
    for (int i = 0; i < 10; i++)
        ck_assert_float_eq(v[i], -2.0f); /* 0 - 1.0 * (1 + 3) / 2 */
    /* a push for a round that is not being collected is refused */
    ck_assert_int_eq(zeps_push(c0, t0, g, 0, 10, 5), ZEPS_ECLOCK);
    zeps_client_destroy(&c0);
    zeps_client_destroy(&c1);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_barrier)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 3, "bsp", NULL, NULL), 0);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t kids[2];
    for (int r = 1; r <= 2; r++) {
        kids[r - 1] = fork();
        if (kids[r - 1] == 0) {
            close(fds[0]);
            if (r == 2)
                sleep(2); /* the last to arrive */
            zeps_client *c = zt_client(&cl, (uint32_t)r);
            if (!c || zeps_barrier(c) != 0)
                _exit(1);
            double now = zp_now_s();
            if (write(fds[1], &now, sizeof(now)) != sizeof(now))
                _exit(2);
            zeps_client_destroy(&c);
            _exit(0);
        }
    }
    close(fds[1]);
    zeps_client *c0 = zt_client(&cl, 0);
    double t0 = zp_now_s();
    ck_assert_int_eq(zeps_barrier(c0), 0);
    double waited = zp_now_s() - t0;
    ck_assert_msg(waited > 1.5, "barrier released after %.2f s, before the last worker", waited);
    for (int i = 0; i < 2; i++) {
        double t;
        ck_assert_int_eq(read(fds[0], &t, sizeof(t)), sizeof(t));
        int st = zt_wait(kids[i], 30);
        ck_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(fds[0]);
    zeps_client_destroy(&c0);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Worker 1's first incarnation, a child process: clocks 0 .. DIE_AT - 1 as
 * usual; at DIE_AT it pulls and pushes shard 0's slice only, as a worker
 * SIGKILLed after that part left and before the rest did, and dies. */
#define DIE_AT 3
static void first_incarnation(const zt_cluster *cl)
{
    zeps_client *c = zt_client(cl, 1);
    uint32_t t;
    if (!c || zeps_declare(c, &zt_bsp_spec, &t) != 0)
        _exit(10);
    for (int64_t k = 0; k < DIE_AT; k++)
        if (zt_bsp_worker_step(c, 1, t, k) != 0)
            _exit(11);
    float w[L], g[L];
    if (zeps_pull(c, t, w, 0, L, DIE_AT) != 0)
        _exit(12);
    zt_bsp_gradient(w, g, 1, DIE_AT);
    /* shard 0 of 2 holds [0, L / 2) (docs/protocol.md, dense slices) */
    if (zeps_push(c, t, g, 0, L / 2, DIE_AT) != 0)
        _exit(13);
    raise(SIGKILL);
}

/* docs/faults.md, "A bsp worker killed between its shards' pushes": shard
 * 0 closes round DIE_AT with the dead incarnation's push; shard 1 waits for
 * it. The new incarnation resumes at DIE_AT and pulls it again: shard 0
 * must answer with round DIE_AT's values (kept for that), not with the
 * next round's, or its gradient for shard 1 is computed from other values
 * and the job ends with other bits. Loop 1: the new incarnation's pulls are
 * compressed pulls (codec "none": the full values, through the shard's
 * compressed-pull path). */
START_TEST(test_worker_dies_between_its_shards)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp", ZT_SHORT_LEASE, NULL), 0);
    pid_t kids[2];
    if ((kids[0] = fork()) == 0)
        zt_bsp_worker(&cl, 0, STEPS);
    if ((kids[1] = fork()) == 0)
        first_incarnation(&cl);
    int st = zt_wait(kids[1], 60);
    ck_assert_msg(st >= 0 && WIFSIGNALED(st), "worker 1's first incarnation: status %d", st);
    zeps_client *c = zt_client_replacing(&cl, 1);
    ck_assert_ptr_nonnull(c);
    ck_assert(zeps_rejoined(c));
    ck_assert_int_eq(zeps_resume_clock(c), DIE_AT);
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &zt_bsp_spec, &t), 0);
    zeps_codec_opts none = {.codec = "none"};
    if (_i == 1)
        ck_assert_int_eq(zeps_set_pull_codec(c, t, &none), 0);
    /* both shards answer with round DIE_AT's values: version DIE_AT (one a round) */
    float w0[L];
    ck_assert_int_eq(zeps_pull(c, t, w0, 0, L, DIE_AT), 0);
    for (int k = 0; k < 2; k++)
        ck_assert_uint_eq(zeps_pulled_version(c, t, k), DIE_AT);
    for (int64_t k = DIE_AT; k < STEPS; k++)
        ck_assert_int_eq(zt_bsp_worker_step(c, 1, t, k), 0);
    float x[L], ref[L];
    ck_assert_int_eq(zeps_pull(c, t, x, 0, L, STEPS), 0);
    st = zt_wait(kids[0], 60);
    ck_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    zt_bsp_reference(2, STEPS, ref);
    int differ = 0;
    for (int i = 0; i < L; i++)
        differ += memcmp(&x[i], &ref[i], sizeof(float)) != 0;
    ck_assert_msg(differ == 0, "%d of %d elements differ from the undisturbed run", differ, L);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    Suite *s = suite_create("bsp");
    TCase *tc = tcase_create("processes");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_deterministic, 0, (int)(sizeof(layouts) / sizeof(layouts[0])));
    tcase_add_test(tc, test_pull_waits_for_round);
    tcase_add_test(tc, test_barrier);
    tcase_add_loop_test(tc, test_worker_dies_between_its_shards, 0, 2);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
