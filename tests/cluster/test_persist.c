/*
 * test_persist.c - snapshots of running shards and restore, with real
 * processes: a BSP job snapshots a consistent cut every 4 clocks (written
 * by a forked child while the shards keep serving); the servers are killed
 * with SIGKILL and restarted, and must come back with exactly the state after
 * that clock (bit for bit against a single-process reference); with the
 * newest set's file corrupted they fall back to the previous set and say
 * why; SIGTERM writes a final snapshot and exits 0.
 */
#include <check.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bsp_ref.h"
#include "check_main.h"
#include "harness.h"
#include "mathenv.h"
#include "now.h"
#include "zeps.h"

#define SNAP_EXTRA "  snapshot_dir = \"@DIR@/snap\";\n  snapshot_every_clocks = 4;"

/* Pull the whole table as a fresh rank-0 client at `clock`; check every
 * shard's version. */
static void pull_all(const zt_cluster *cl, int64_t clock, float *out)
{
    zeps_client *c = zt_client(cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &zt_bsp_spec, &t), 0);
    ck_assert_int_eq(zeps_pull(c, t, out, 0, ZT_BSP_LEN, clock), 0);
    for (int k = 0; k < cl->nservers; k++)
        ck_assert_uint_eq(zeps_pulled_version(c, t, k), (uint64_t)clock);
    zeps_client_destroy(&c);
}

static void restart_all(zt_cluster *cl, int sig)
{
    for (int k = 0; k < cl->nservers; k++)
        zt_server_kill(cl, k, sig);
    for (int k = 0; k < cl->nservers; k++)
        ck_assert_int_eq(zt_server_start(cl, k), 0);
}

static void expect_reference(const float *got, int steps)
{
    float ref[ZT_BSP_LEN];
    zt_bsp_reference(2, steps, ref);
    for (int i = 0; i < ZT_BSP_LEN; i++)
        ck_assert_msg(memcmp(&got[i], &ref[i], sizeof(float)) == 0,
                      "element %d after restoring clock %d: %.9g, reference %.9g", i, steps,
                      got[i], ref[i]);
}

START_TEST(test_cut_restore_fallback)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp", SNAP_EXTRA, NULL), 0);
    ck_assert_int_eq(zt_bsp_run_workers(&cl, 2, 10), 0);
    /* both shards' writers of clock 8 finished (the last one records the set) */
    const char *done = "snapshot set 0000000000000008 (every clocks, clock 8) written";
    for (int i = 0; i < 200 && !(zt_log_has(&cl, 0, done) && zt_log_has(&cl, 1, done)); i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    ck_assert(zt_log_has(&cl, 0, done) && zt_log_has(&cl, 1, done));

    /* crash: no final snapshot; the restart must find clock 8 */
    restart_all(&cl, SIGKILL);
    ck_assert(zt_log_has(&cl, 0, "restored snapshot set 0000000000000008"));
    ck_assert(zt_log_has(&cl, 1, "restored snapshot set 0000000000000008"));
    float w[ZT_BSP_LEN];
    pull_all(&cl, 8, w);
    expect_reference(w, 8);

    /* corrupt shard 0's file of set 8: it must fall back to set 4, and say so */
    char path[512];
    snprintf(path, sizeof(path), "%s/snap/set-0000000000000008/shard-0-of-2.zsnap", cl.dir);
    zt_server_kill(&cl, 0, SIGKILL);
    zt_server_kill(&cl, 1, SIGKILL);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    struct stat sb;
    ck_assert_int_eq(fstat(fd, &sb), 0);
    unsigned char byte;
    ck_assert_int_eq(pread(fd, &byte, 1, sb.st_size / 2), 1);
    byte ^= 0x40;
    ck_assert_int_eq(pwrite(fd, &byte, 1, sb.st_size / 2), 1);
    close(fd);
    ck_assert_int_eq(zt_server_start(&cl, 0), 0);
    ck_assert_int_eq(zt_server_start(&cl, 1), 0);
    ck_assert(zt_log_has(&cl, 0, "shard-0-of-2.zsnap"));
    /* zepsctl sees it too, and fails on it */
    char cmd[1024], bin[512];
    snprintf(cmd, sizeof(cmd), "%s snapshot inspect %s/snap > %s/inspect.out 2>&1",
             zt_bin("zepsctl", bin, sizeof(bin)), cl.dir, cl.dir);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    snprintf(path, sizeof(path), "%s/inspect.out", cl.dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char text[8192];
    size_t nread = fread(text, 1, sizeof(text) - 1, f);
    text[nread] = 0;
    fclose(f);
    ck_assert_ptr_nonnull(strstr(text, "2 complete set(s)"));
    ck_assert_ptr_nonnull(strstr(text, "CRC mismatch"));
    ck_assert(zt_log_has(&cl, 0, "restored snapshot set 0000000000000004"));
    /* shard 1's own file of set 8 is fine, but the cluster must restore one
     * cut: it sees shard 0's file is bad (it reads the shared directory),
     * says so, and restores set 4 too */
    ck_assert(zt_log_has(&cl, 1, "restored snapshot set 0000000000000004"));
    ck_assert(zt_log_has(&cl, 1, "shard 0's file is not usable"));
    pull_all(&cl, 4, w);
    expect_reference(w, 4);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* async: SIGTERM writes a final snapshot (exit 0); the restart has every
 * update that was acknowledged before it. */
START_TEST(test_final_snapshot)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", "  snapshot_dir = \"@DIR@/snap\";", NULL),
                     0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_table_spec sp = {.name = "v", .length = 100, .optimizer = "momentum", .lr = 0.5};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    float g[100], before[100], after[100];
    for (int i = 0; i < 100; i++)
        g[i] = (float)i;
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(zeps_push(c, t, g, 0, 100, k), 0);
    ck_assert_int_eq(zeps_pull(c, t, before, 0, 100, 3), 0);
    zeps_client_destroy(&c);
    double t0 = zp_now_s();
    int st = zt_server_kill(&cl, 0, SIGTERM);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    ck_assert_msg(zp_now_s() - t0 < 5.0, "SIGTERM took %.1f s", zp_now_s() - t0);
    ck_assert(zt_log_has(&cl, 0, "final snapshot set"));
    ck_assert_int_eq(zt_server_start(&cl, 0), 0);
    c = zt_client(&cl, 0);
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    ck_assert_int_eq(zeps_pull(c, t, after, 0, 100, 3), 0);
    ck_assert(memcmp(before, after, sizeof(before)) == 0);
    ck_assert_uint_eq(zeps_pulled_version(c, t, 0), 3);
    /* the optimizer state came back too: one more step moves as it would have */
    ck_assert_int_eq(zeps_push(c, t, g, 0, 100, 3), 0);
    ck_assert_int_eq(zeps_pull(c, t, after, 0, 100, 4), 0);
    /* momentum 0.9: v = 0.9*v + g with v after 3 steps = 2.71 g; w -= 0.5 * 3.439 g */
    for (int i = 0; i < 100; i++)
        ck_assert_float_eq_tol(after[i], before[i] - 0.5f * 3.439f * g[i], 1e-3f * (1 + i));
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* One more BSP round (clock 8, both ranks pushing g) on cluster cl, then
 * the whole table. */
static void round_then_pull(const zt_cluster *cl, float *out)
{
    zeps_client *c[2];
    uint32_t t[2];
    float g[ZT_BSP_LEN];
    for (int i = 0; i < ZT_BSP_LEN; i++)
        g[i] = 0.01f * (float)(i % 13) - 0.05f;
    for (int r = 0; r < 2; r++) {
        c[r] = zt_client(cl, (uint32_t)r);
        ck_assert_ptr_nonnull(c[r]);
        ck_assert_int_eq(zeps_declare(c[r], &zt_bsp_spec, &t[r]), 0);
    }
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(zeps_push(c[r], t[r], g, 0, ZT_BSP_LEN, 8), 0);
    ck_assert_int_eq(zeps_pull(c[0], t[0], out, 0, ZT_BSP_LEN, 9), 0);
    for (int r = 0; r < 2; r++)
        zeps_client_destroy(&c[r]);
}

/* A set of S = 2 resharded onto S' = 3 and S' = 1 (zepsctl snapshot
 * reshard): clusters of those sizes started from it hold identical values,
 * and identical optimizer state (one more Adam round gives identical bits). */
START_TEST(test_reshard)
{
    zt_cluster a;
    ck_assert_int_eq(zt_cluster_start(&a, 2, 2, "bsp", SNAP_EXTRA, NULL), 0);
    ck_assert_int_eq(zt_bsp_run_workers(&a, 2, 8), 0);
    const char *done = "snapshot set 0000000000000008 (every clocks, clock 8) written";
    for (int i = 0; i < 200 && !(zt_log_has(&a, 0, done) && zt_log_has(&a, 1, done)); i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    float ref[ZT_BSP_LEN], after_a[ZT_BSP_LEN];
    pull_all(&a, 8, ref);
    expect_reference(ref, 8);
    round_then_pull(&a, after_a);

    const int sizes[] = {3, 1};
    for (int i = 0; i < 2; i++) {
        char cmd[1024], bin[512], extra[512];
        snprintf(cmd, sizeof(cmd), "%s snapshot reshard %s/snap %s/snap%d %d > %s/reshard%d.out 2>&1",
                 zt_bin("zepsctl", bin, sizeof(bin)), a.dir, a.dir, sizes[i], sizes[i], a.dir,
                 sizes[i]);
        int st = system(cmd);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reshard to %d failed", sizes[i]);
        snprintf(extra, sizeof(extra), "  snapshot_dir = \"%s/snap%d\";", a.dir, sizes[i]);
        zt_cluster b;
        ck_assert_int_eq(zt_cluster_start(&b, sizes[i], 2, "bsp", extra, NULL), 0);
        ck_assert(zt_log_has(&b, 0, "restored snapshot set 0000000000000008"));
        float w[ZT_BSP_LEN], after_b[ZT_BSP_LEN];
        pull_all(&b, 8, w);
        ck_assert_msg(memcmp(w, ref, sizeof(w)) == 0, "S'=%d: values differ", sizes[i]);
        round_then_pull(&b, after_b);
        ck_assert_msg(memcmp(after_a, after_b, sizeof(after_a)) == 0,
                      "S'=%d: one more adam round differs: optimizer state not carried", sizes[i]);
        ck_assert_int_eq(zt_cluster_stop(&b), 0);
    }
    ck_assert_int_eq(zt_cluster_stop(&a), 0);
}
END_TEST

/* Wait until both shards logged `line` (a writer finishes after the round). */
static bool both_logged(const zt_cluster *cl, const char *line)
{
    for (int i = 0; i < 200 && !(zt_log_has(cl, 0, line) && zt_log_has(cl, 1, line)); i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return zt_log_has(cl, 0, line) && zt_log_has(cl, 1, line);
}

/* A table shorter than the shard count (a 1-element bias on 2 shards) has
 * an empty slice on shard 0: no push reaches it there, and it must not hold
 * back shard 0's cuts (it did: shard 0 wrote no set, and a restart found no
 * complete one). Both shards write every cut; shard 0 killed and restarted
 * restores the newest and the job goes on. */
START_TEST(test_empty_slice_cuts)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "bsp",
                                      "  snapshot_dir = \"@DIR@/snap\";\n"
                                      "  snapshot_every_clocks = 2;",
                                      NULL),
                     0);
    zeps_client *c = zt_client(&cl, 0);
    zeps_table_spec ws = {.name = "w", .length = 8, .optimizer = "sgd", .lr = 0.5};
    zeps_table_spec bs = {.name = "b", .length = 1, .optimizer = "sgd", .lr = 0.5};
    uint32_t w, b;
    ck_assert_int_eq(zeps_declare(c, &ws, &w), 0);
    ck_assert_int_eq(zeps_declare(c, &bs, &b), 0);
    float g[8] = {1, 1, 1, 1, 1, 1, 1, 1}, v[8];
    for (int k = 0; k < 6; k++) {
        ck_assert_int_eq(zeps_push(c, w, g, 0, 8, k), 0);
        ck_assert_int_eq(zeps_push(c, b, g, 0, 1, k), 0);
        ck_assert_int_eq(zeps_clock(c, k), 0);
    }
    zeps_client_destroy(&c);
    ck_assert(both_logged(&cl, "snapshot set 0000000000000006 (every clocks, clock 6) written"));
    zt_server_kill(&cl, 0, SIGKILL);
    ck_assert_int_eq(zt_server_start(&cl, 0), 0);
    ck_assert(zt_log_has(&cl, 0, "restored snapshot set 0000000000000006"));
    c = zt_client(&cl, 0);
    ck_assert_int_eq(zeps_declare(c, &ws, &w), 0);
    ck_assert_int_eq(zeps_declare(c, &bs, &b), 0);
    ck_assert_int_eq(zeps_pull(c, w, v, 0, 8, 6), 0);
    for (int i = 0; i < 8; i++)
        ck_assert_float_eq(v[i], -3.0f); /* 6 rounds of -0.5 */
    ck_assert_int_eq(zeps_pull(c, b, v, 0, 1, 6), 0);
    ck_assert_float_eq(v[0], -3.0f);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    Suite *s = suite_create("persist");
    TCase *tc = tcase_create("processes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_cut_restore_fallback);
    tcase_add_test(tc, test_final_snapshot);
    tcase_add_test(tc, test_reshard);
    tcase_add_test(tc, test_empty_slice_cuts);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
