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
 *     counted once, each shard at epoch 1 with exactly its rows;
 *   - test_commit_after_a_stall: the tool stopped before its write of
 *     the map for 3.3 s (past 2/3 of its ZooKeeper session's 4 s), then
 *     let go: it commits (exit 0), each shard at epoch 1 with exactly
 *     its rows, which hold what was pushed before the move.
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
    char *args[] = {"shards", "move",       "--config",    c->cl.conf, "--from",
                    "0",      "--to",       "1",           "--slots",  "0-2047",
                    "--page", "512",        "--threshold", "64",       "--cutover-ms",
                    bound_ms, "--lease-ms", lease_ms,      NULL};
    setenv("ZEPS_FAULT_MOVE", fault, 1);
    pid_t pid = zt_move_zepsctl_start(log, args);
    unsetenv("ZEPS_FAULT_MOVE");
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

/* stopped_move at before-commit, let go after stall_ms: it exits with
 * `code` (its log at <dir>/move.log, into log[0..len)). */
static void stalled_move(zt_rcl *c, char *bound_ms, char *lease_ms, int stall_ms, int code,
                         char *log, size_t len)
{
    pid_t tool = stopped_move(c, "before-commit", bound_ms, lease_ms, log, len);
    zt_sleep_ms(stall_ms);
    ck_assert_int_eq(kill(tool, SIGCONT), 0);
    zt_move_zepsctl_exits(tool, log, 60, code);
}

/* The workers of zt_rcl_up_pushing still push; 500 ms on they end and
 * the oracle is checked (zt_rcl_workers_end, `what` the print's). */
static void workers_checked(zt_rcl *c, const char *what)
{
    zt_rcl_workers_run(c);
    zt_sleep_ms(500);
    zt_rcl_workers_end(c, what);
}

/* The tool stopped at `fault` and killed with -9 (tag: the cluster's
 * name): every shard at epoch 1 from the watch within 2 s, then the
 * source's primary killed; the oracle and the rows. */
static void commit_from_the_watch(const char *tag, const char *fault, const char *late_ms)
{
    zt_rcl c;
    if (late_ms) /* the target takes the node's map late (server/op/zkmap.c) */
        setenv("ZEPS_FAULT_MAP_LATE_MS", late_ms, 1);
    zt_rcl_up_pushing(&c, tag); /* the workers do not read the hook */
    unsetenv("ZEPS_FAULT_MAP_LATE_MS");
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
    zt_rcl_workers_run(&c);
    zt_sleep_ms(500);
    zt_rcl_fail_over(&c, 0); /* its backup took the commit from its log */
    zt_sleep_ms(500);
    zt_rcl_workers_end(&c, "the move and a failover of the source");
    zt_rcl_check_oracle_placed(&c, "0-2047");
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
    zt_rcl_up_pushing(&c, "zkfence");
    char log[400];
    /* a bound of 3 s: the tool stops short of half of it even on a busy
     * machine; in 7 s the source's bound and the target's lease pass */
    stalled_move(&c, "3000", "5000", 7000, 1, log, sizeof(log));
    ck_assert(zt_move_file_has(log, "changed since the move began"));
    char r0[450], r1[450]; /* with coordination the bound ends it after the last page too */
    snprintf(r0, sizeof(r0), "%s/replica-0.log", c.rs[0].dir);
    snprintf(r1, sizeof(r1), "%s/replica-1.log", c.rs[0].dir);
    ck_assert(zt_move_file_has(r0, "ends by time (the cut-over's bound)") ||
              zt_move_file_has(r1, "ends by time (the cut-over's bound)"));
    ck_assert(zt_move_file_has(log, "aborted; the slot map is unchanged"));
    workers_checked(&c, "the fenced move");
    zt_rcl_check_oracle_placed(&c, NULL);
    /* the node the fence left holds a map: the next move reads it and commits */
    char *args[] = {"shards", "move", "--config", c.cl.conf, "--from", "0",
                    "--to",   "1",    "--slots",  "0-2047",  NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&c.cl, "move-again", args), 0);
    zt_rcl_check_oracle_placed(&c, "0-2047");
    zt_rcl_down(&c);
}
END_TEST

/* The tool stopped before its write of the map for 3.3 s, nothing
 * changed meanwhile (a bound and a lease far longer): a copy that long
 * leaves the tool's ZooKeeper session (4 s, the most this ZooKeeper
 * grants) unserved past 2/3 of its timeout, when the client drops the
 * connection at its next turn with what it just sent. Let go, it writes
 * the map in a session of its own and the move commits (exit 0); written
 * in the old one, it failed with "operation timeout" (exit 1). The rows
 * are pushed before the move, not during it: a push parked through the
 * stall and answered EMOVED by the source, which took the map from its
 * watch, can reach the target before the target took it, and the client
 * gives up on a piece refused by a shard whose map is older than the one
 * it split the piece by (worker/lib/redirect.c). */
START_TEST(test_commit_after_a_stall)
{
    zt_rcl c;
    zt_rcl_up(&c, "zkstall", "");
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zeps_client *w = zt_client(&c.cl, 0);
    ck_assert_ptr_nonnull(w);
    uint32_t t = zt_move_declare(w);
    zt_move_populate(w, t, ids, NIDS);
    char log[400];
    stalled_move(&c, "20000", "30000", 3300, 0, log, sizeof(log));
    zt_rcl_check_oracle_placed(&c, "0-2047");
    zt_move_check_values(w, t, ids, NIDS, 1);
    zeps_client_destroy(&w);
    zt_rcl_down(&c);
}
END_TEST

/* A new primary of the source that never had the COMMIT in its log takes
 * the map from ZooKeeper before it serves. */
START_TEST(test_elected_takes_the_map)
{
    zt_rcl c;
    zt_rcl_up_pushing(&c, "zkelect");
    char log[400];
    pid_t tool = stopped_move(&c, "before-commit", "20000", "30000", log, sizeof(log));
    int a = zt_rset_primary(&c.rs[0]);
    uint64_t epoch = zt_rset_epoch(&c.rs[0], a);
    ck_assert_int_eq(kill(c.rs[0].pid[a], SIGSTOP), 0); /* it never sees the map */
    ck_assert_int_eq(kill(tool, SIGCONT), 0);           /* which the tool now writes */
    zt_rset_wait(&c.rs[0], 1 - a, "primary", epoch + 1, -1, 30);
    zt_rset_kill(&c.rs[0], a, SIGKILL);
    zt_rcl_endpoint(&c, 0, 1 - a);
    zt_move_zepsctl_exits(tool, log, 60, 0);
    workers_checked(&c, "the move and the source's failover");
    zt_rcl_check_oracle_placed(&c, "0-2047");
    zt_rcl_down(&c);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"watch", 180, {test_commit_from_the_watch}},
        {"watch_both", 180, {test_both_commit_from_the_watch}},
        {"watch_late", 180, {test_target_late_from_the_watch}},
        {"fence", 180, {test_fence_beats_the_tool}},
        {"elected", 180, {test_elected_takes_the_map}},
        {"stall", 180, {test_commit_after_a_stall}},
    };
    return zt_run_cases("zkmap", cases, sizeof(cases) / sizeof(cases[0]));
}
