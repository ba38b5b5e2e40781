/*
 * test_zkmap.c - the slot map in ZooKeeper as the single commit point of
 * a move (docs/elastic.md, "The map in ZooKeeper"): two shards of two
 * replicas each, real zeps-server processes, a real ZooKeeper, three real
 * worker processes pushing the counter oracle's ids all along, and the
 * real `zepsctl shards move`, stopped at a step by its fault hook
 * (ZEPS_FAULT_MOVE):
 *
 *   - test_commit_from_the_watch: the tool stopped right after the
 *     target's SLOTS (the map written to ZooKeeper before it), then
 *     killed with -9, so the source never gets its COMMIT: the source's
 *     primary commits from the node's watch within 2 s (its cut-over
 *     bound is 8 s), its backup too (the source's primary is then killed
 *     and the workers go on through the new one); every push a worker was
 *     answered for is counted once, and each shard holds the map of epoch
 *     1 and exactly its rows;
 *   - test_both_commit_from_the_watch: the same with the tool stopped
 *     right after its write to ZooKeeper, before the target's SLOTS: the
 *     target commits its import from the watch too;
 *   - test_target_late_from_the_watch: the same, the target taking the
 *     node's map 300 ms after its watch brought it (fault hook
 *     ZEPS_FAULT_MAP_LATE_MS), so the source commits first: the pushes of
 *     the moving slots it answers EMOVED are refused by the target too,
 *     with its older map, until it takes the map; the workers wait for
 *     it (docs/elastic.md, "A shard behind the map") and finish, every
 *     push counted once;
 *   - test_fence_beats_the_tool: the tool stopped after the last rows and
 *     before its write of the map; the source's cut-over bound (3 s) and
 *     the target's lease (5 s) pass, each fences the node and aborts; the
 *     tool, let go, finds its conditional write refused and exits 1 saying
 *     so; nothing changed: map epoch 0, every push counted once; the
 *     next move reads the map the fence left in the node and commits;
 *   - test_elected_takes_the_map: the source's primary stopped (SIGSTOP)
 *     just before the tool writes the map, so neither it nor its backup's
 *     log ever has the commit; its backup, elected, takes the map from
 *     ZooKeeper before it serves; the stopped primary is killed with -9;
 *     the tool ends with 0 (the source's COMMIT unanswered); every push
 *     counted once, each shard at epoch 1 with exactly its rows.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "move_rset.h"
#include "slotmap.h"
#include "zeps.h"

/* zepsctl shards move of shard 0's slots below 2048 to shard 1 with
 * --cutover-ms bound_ms and --lease-ms lease_ms, stopping itself at
 * `fault` (ZEPS_FAULT_MOVE); returns once it stopped, its log at
 * <dir>/move.log. */
static pid_t stopped_move(zt_rcl *c, const char *fault, char *bound_ms, char *lease_ms, char *log,
                          size_t len)
{
    snprintf(log, len, "%s/move.log", c->cl.dir);
    char bin[512];
    zt_bin("zepsctl", bin, sizeof(bin));
    char *argv[] = {bin,      "shards",      "move", "--config",     c->cl.conf, "--from",
                    "0",      "--to",        "1",    "--slots",      "0-2047",   "--page",
                    "512",    "--threshold", "64",   "--cutover-ms", bound_ms,   "--lease-ms",
                    lease_ms, NULL};
    setenv("ZEPS_FAULT_MOVE", fault, 1);
    pid_t pid = zt_spawn(bin, argv, log);
    unsetenv("ZEPS_FAULT_MOVE");
    ck_assert_int_gt(pid, 0);
    int st = 0;
    double t0 = zt_now_s();
    pid_t got;
    while ((got = waitpid(pid, &st, WNOHANG | WUNTRACED)) == 0 && zt_now_s() - t0 < 60)
        zt_sleep_ms(20);
    zt_move_print_file(log);
    ck_assert_msg(got == pid && WIFSTOPPED(st), "zepsctl did not stop at '%s' (status 0x%x)", fault,
                  st);
    return pid;
}

/* Shard k's primary's slot map epoch. */
static uint64_t epoch_of(const zt_rcl *c, int k)
{
    zeps_client *t = zt_move_tool(&c->cl);
    uint64_t e = 0;
    zt_move_rows(t, k, &e);
    zeps_client_destroy(&t);
    return e;
}

/* The tool stopped at `fault` and killed with -9 (tag: the cluster's
 * name): every shard at epoch 1 from the watch within 2 s, then the
 * source's primary killed; the oracle and the rows. */
static void commit_from_the_watch(const char *tag, const char *fault, const char *late_ms)
{
    zt_rcl c;
    if (late_ms) /* the target takes the node's map late (server/op/zkmap.c) */
        setenv("ZEPS_FAULT_MAP_LATE_MS", late_ms, 1);
    zt_rcl_up(&c, tag, "");
    unsetenv("ZEPS_FAULT_MAP_LATE_MS");
    pid_t pids[ZT_RCL_WORKERS];
    zt_move_workers_start(&c.cl, ZT_RCL_WORKERS, pids);
    zt_rcl_wait_pushes(&c, 3 * ZT_RCL_WORKERS);
    char log[400];
    pid_t tool = stopped_move(&c, fault, "8000", "10000", log, sizeof(log));
    double t0 = zt_now_s();
    ck_assert_int_eq(kill(tool, SIGKILL), 0); /* A never gets its COMMIT */
    zt_wait(tool, 15);
    while ((epoch_of(&c, 0) != 1 || epoch_of(&c, 1) != 1) && zt_now_s() - t0 < 2.0)
        zt_sleep_ms(50);
    double took = zt_now_s() - t0;
    printf("source and target at map epochs %llu and %llu %.2f s after the tool was killed\n",
           (unsigned long long)epoch_of(&c, 0), (unsigned long long)epoch_of(&c, 1), took);
    for (int k = 0; k < 2; k++)
        ck_assert_msg(epoch_of(&c, k) == 1,
                      "shard %d did not commit from ZooKeeper within 2 s (the bound is 8 s)", k);
    zt_move_workers_run(pids, ZT_RCL_WORKERS);
    zt_sleep_ms(500);
    zt_rcl_fail_over(&c, 0); /* its backup took the commit from its log */
    zt_sleep_ms(500);
    long weighted = 0, sum = zt_move_workers_end(&c.cl, ZT_RCL_WORKERS, pids, &weighted);
    printf("%ld pushes answered through the move and a failover of the source\n", sum);
    zt_move_check_oracle(&c.cl, sum, weighted);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *next = NULL;
    ck_assert_uint_gt(zt_rcl_moved_map("0-2047", ids, NIDS, &next), 0);
    zt_rcl_check_placed(&c, ids, NIDS, next, 1);
    zp_slotmap_destroy(&next);
    zt_rcl_down(&c);
}

START_TEST(test_commit_from_the_watch)
{
    commit_from_the_watch("zkwatch", "after-target", NULL);
}
END_TEST

START_TEST(test_both_commit_from_the_watch)
{
    commit_from_the_watch("zkboth", "after-commit", NULL);
}
END_TEST

START_TEST(test_target_late_from_the_watch)
{
    commit_from_the_watch("zklate", "after-commit", "300");
}
END_TEST

START_TEST(test_fence_beats_the_tool)
{
    zt_rcl c;
    zt_rcl_up(&c, "zkfence", "");
    pid_t pids[ZT_RCL_WORKERS];
    zt_move_workers_start(&c.cl, ZT_RCL_WORKERS, pids);
    zt_rcl_wait_pushes(&c, 3 * ZT_RCL_WORKERS);
    char log[400];
    /* a bound of 3 s: the tool stops short of half of it even on a busy machine */
    pid_t tool = stopped_move(&c, "before-commit", "3000", "5000", log, sizeof(log));
    zt_sleep_ms(7000); /* the source's bound and the target's lease pass */
    ck_assert_int_eq(kill(tool, SIGCONT), 0);
    int st = zt_wait(tool, 60);
    zt_move_print_file(log);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1,
                  "zepsctl: status 0x%x, not exit 1", st);
    ck_assert(zt_move_file_has(log, "changed since the move began"));
    ck_assert(zt_move_file_has(log, "aborted; the slot map is unchanged"));
    zt_move_workers_run(pids, ZT_RCL_WORKERS);
    zt_sleep_ms(500);
    long weighted = 0, sum = zt_move_workers_end(&c.cl, ZT_RCL_WORKERS, pids, &weighted);
    printf("%ld pushes answered through the fenced move\n", sum);
    zt_move_check_oracle(&c.cl, sum, weighted);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    zt_rcl_check_placed(&c, ids, NIDS, d, 0);
    zp_slotmap_destroy(&d);
    /* the node the fence left holds a map: the next move reads it and commits */
    snprintf(log, sizeof(log), "%s/move-again.log", c.cl.dir);
    char *args[] = {"shards", "move", "--config", c.cl.conf, "--from", "0",
                    "--to",   "1",    "--slots",  "0-2047",  NULL};
    st = zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    zp_slotmap *next = NULL;
    ck_assert_uint_gt(zt_rcl_moved_map("0-2047", ids, NIDS, &next), 0);
    zt_rcl_check_placed(&c, ids, NIDS, next, 1);
    zp_slotmap_destroy(&next);
    zt_rcl_down(&c);
}
END_TEST

/* A new primary of the source that never had the COMMIT in its log takes
 * the map from ZooKeeper before it serves. */
START_TEST(test_elected_takes_the_map)
{
    zt_rcl c;
    zt_rcl_up(&c, "zkelect", "");
    pid_t pids[ZT_RCL_WORKERS];
    zt_move_workers_start(&c.cl, ZT_RCL_WORKERS, pids);
    zt_rcl_wait_pushes(&c, 3 * ZT_RCL_WORKERS);
    char log[400];
    pid_t tool = stopped_move(&c, "before-commit", "20000", "30000", log, sizeof(log));
    int a = zt_rset_primary(&c.rs[0]);
    uint64_t epoch = zt_rset_epoch(&c.rs[0], a);
    ck_assert_int_eq(kill(c.rs[0].pid[a], SIGSTOP), 0); /* it never sees the map */
    ck_assert_int_eq(kill(tool, SIGCONT), 0);           /* which the tool now writes */
    zt_rset_wait(&c.rs[0], 1 - a, "primary", epoch + 1, -1, 30);
    zt_rset_kill(&c.rs[0], a, SIGKILL);
    zt_rcl_endpoint(&c, 0, 1 - a);
    int st = zt_wait(tool, 60);
    zt_move_print_file(log);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl: status 0x%x", st);
    zt_move_workers_run(pids, ZT_RCL_WORKERS);
    zt_sleep_ms(500);
    long weighted = 0, sum = zt_move_workers_end(&c.cl, ZT_RCL_WORKERS, pids, &weighted);
    printf("%ld pushes answered through the move and the source's failover\n", sum);
    zt_move_check_oracle(&c.cl, sum, weighted);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zp_slotmap *next = NULL;
    ck_assert_uint_gt(zt_rcl_moved_map("0-2047", ids, NIDS, &next), 0);
    zt_rcl_check_placed(&c, ids, NIDS, next, 1);
    zp_slotmap_destroy(&next);
    zt_rcl_down(&c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("zkmap");
    struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"watch", test_commit_from_the_watch},
        {"watch_both", test_both_commit_from_the_watch},
        {"watch_late", test_target_late_from_the_watch},
        {"fence", test_fence_beats_the_tool},
        {"elected", test_elected_takes_the_map},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name); /* CK_RUN_CASE=<name> runs one */
        tcase_set_timeout(tc, 180);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
