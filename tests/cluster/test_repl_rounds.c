/*
 * test_repl_rounds.c - bsp rounds of sparse rows on a replicated shard
 * (docs/replication.md), with real zeps-server processes and a real
 * ZooKeeper: one shard of two replicas, two workers through libzeps in
 * lockstep.
 *
 * Each step every rank pulls a set of ids (new ones among them: the pull
 * makes their rows on the primary, which logs no pull), pushes gradients
 * computed from what it pulled, and finishes the clock. After the last
 * round the primary is SIGKILLed: the backup, promoted, holds every row
 * bit for bit as the primary served it (a row a pull made and no push
 * touched included), and the row versions agree.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "replset.h"
#include "zeps.h"
#include "zkserver.h"

#define SESSION_MS 2000
#define DIM        8
#define NIDS       48
#define SPACE      300 /* distinct ids over the run */
#define STEPS      40
#define NW         2

static const zeps_sparse_spec emb = {.name = "e",
                                     .dim = DIM,
                                     .optimizer = "adagrad",
                                     .lr = 0.05,
                                     .init = "normal",
                                     .init_scale = 0.1,
                                     .seed = 5};

/* Rank r's ids at step k: overlapping between ranks and steps, new ones
 * coming in until the whole space was seen. */
static uint64_t id_of(int r, int64_t k, int i)
{
    return (uint64_t)((i * 37 + k * 11 + r * 5) % SPACE) * 2654435761ull + 1;
}

/* Every row of the run's id space as client c reads it after the last
 * round. */
static void read_rows(zeps_client *c, float *rows)
{
    static uint64_t ids[SPACE];
    uint32_t t = 0;
    for (int i = 0; i < SPACE; i++)
        ids[i] = (uint64_t)i * 2654435761ull + 1;
    ck_assert_int_eq(zeps_declare_sparse(c, &emb, &t), 0); /* known: its handle */
    ck_assert_int_eq(zeps_spull(c, t, ids, SPACE, rows, STEPS), 0);
}

/* Where a run kills its primary: at step `k`, before phase `phase` (0:
 * the pulls, 1: rank 0's push, 2: rank 1's push, 3: the clocks; 4: rank
 * 1 finished the step, rank 0's push and clock are sent together to the
 * primary stopped (SIGSTOP) and lost with it); k < 0: never. */
typedef struct kill_at {
    int64_t k;
    int phase;
    zt_rset *rs;
} kill_at;

static void maybe_kill(const kill_at *at, int64_t k, int phase)
{
    if (at->k != k || at->phase != phase)
        return;
    zt_rset_kill(at->rs, 0, SIGKILL);
    printf("primary killed at step %lld before phase %d\n", (long long)k, phase);
}

/* Rank r's gradient for step k from what it pulled (v); the rows it
 * pushes (ids a rank pulls at odd positions are pushed only every third
 * step: some rows are made by pulls and trained later, or never). */
static size_t gradient(int r, int64_t k, const float *v, float *g)
{
    size_t n = (k % 3 == 0) ? NIDS : NIDS / 2;
    for (size_t i = 0; i < n * DIM; i++)
        g[i] = 0.3f * v[i] + 0.01f * (float)((r + 1) * ((int)(i + (size_t)k) % 7));
    return n;
}

/* A push of step k by rank r started (its batch in *b: the caller frees it
 * once the push is done). */
static zeps_req *push_start(zeps_client *c, uint32_t t, int64_t k, int r, const uint64_t *ids,
                            const float *v, zeps_sbatch **b)
{
    static float g[NW][NIDS * DIM];
    size_t n = gradient(r, k, v, g[r]);
    zeps_req *push = NULL;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, n, b), 0);
    ck_assert_int_eq(zeps_sbatch_push_start(*b, g[r], k, &push), 0);
    return push;
}

static void wait_push(zeps_req **push, zeps_sbatch **b)
{
    ck_assert_int_eq(zeps_wait(push), 0);
    zeps_sbatch_free(b);
}

/* Rank r's push and clock of step k, both sent before either is waited
 * for: a replicated primary holds a sparse push's reply until its round
 * closed (docs/replication.md), which takes every rank's clock. */
static void push_and_clock(zeps_client *c, uint32_t t, int64_t k, int r, const uint64_t *ids,
                           const float *v)
{
    zeps_sbatch *b = NULL;
    zeps_req *push = push_start(c, t, k, r, ids, v, &b), *clock = NULL;
    ck_assert_int_eq(zeps_clock_start(c, k, &clock), 0);
    wait_push(&push, &b);
    ck_assert_int_eq(zeps_wait(&clock), 0);
}

/* Phase 4: rank 0's push and clock of step k sent at once to a stopped
 * primary, which is then killed: both are resent to the new primary, in
 * the order they were sent (the clock first would close the round
 * without the push, which would be dropped as late). */
static void lost_push_and_clock(const kill_at *at, zeps_client *c, uint32_t t, int64_t k,
                                const uint64_t *ids, const float *v)
{
    zeps_sbatch *b = NULL;
    zeps_req *push = NULL, *clock = NULL;
    ck_assert_int_eq(kill(at->rs->pid[0], SIGSTOP), 0);
    push = push_start(c, t, k, 0, ids, v, &b);
    ck_assert_int_eq(zeps_clock_start(c, k, &clock), 0);
    zt_sleep_ms(100);
    zt_rset_kill(at->rs, 0, SIGKILL);
    printf("primary stopped and killed with rank 0's push and clock of step %lld\n", (long long)k);
    wait_push(&push, &b);
    ck_assert_int_eq(zeps_wait(&clock), 0);
}

/* One round: every rank pulls its ids at clock k, pushes a gradient of
 * what it pulled, and finishes the clock; the pushes and clocks are all
 * sent before any is waited for, as separate processes would send them. */
static void step(zeps_client **cs, uint32_t t, int64_t k, const kill_at *at)
{
    static float v[NW][NIDS * DIM];
    uint64_t ids[NW][NIDS];
    maybe_kill(at, k, 0);
    for (int r = 0; r < NW; r++) {
        for (int i = 0; i < NIDS; i++)
            ids[r][i] = id_of(r, k, i);
        ck_assert_int_eq(zeps_spull(cs[r], t, ids[r], NIDS, v[r], k), 0);
    }
    for (int r = NW - 1; r >= 0 && at->k == k && at->phase == 4; r--)
        if (r == 0)
            lost_push_and_clock(at, cs[0], t, k, ids[0], v[0]);
        else
            push_and_clock(cs[r], t, k, r, ids[r], v[r]);
    if (at->k == k && at->phase == 4)
        return;
    zeps_sbatch *b[NW] = {0};
    zeps_req *push[NW] = {0}, *clock[NW] = {0};
    for (int r = 0; r < NW; r++) {
        maybe_kill(at, k, 1 + r);
        push[r] = push_start(cs[r], t, k, r, ids[r], v[r], &b[r]);
    }
    maybe_kill(at, k, 3);
    for (int r = 0; r < NW; r++)
        ck_assert_int_eq(zeps_clock_start(cs[r], k, &clock[r]), 0);
    for (int r = 0; r < NW; r++) {
        wait_push(&push[r], &b[r]);
        ck_assert_int_eq(zeps_wait(&clock[r]), 0);
    }
}

static void rset_up(zt_zk *zk, zt_rset *rs, const char *name)
{
    memset(rs, 0, sizeof(*rs));
    zt_rset_write(rs, "repl_rounds", zk->hosts, name, SESSION_MS,
                  "  workers = 2;\n  consistency = \"bsp\";\n  hello_timeout_ms = 5000;\n"
                  "  replication = { max_lag_ms = 1000; };\n");
    zt_rset_up(rs);
}

/* Train STEPS rounds on replica set *rs (started here), killing its
 * primary where `at` says, and read every row at the end; the set stays
 * up. */
static void train_on(zt_zk *zk, zt_rset *rs, const char *name, int64_t kill_k, int phase,
                     float *rows)
{
    rset_up(zk, rs, name);
    kill_at at = {.k = kill_k, .phase = phase, .rs = rs};
    zeps_client *cs[NW];
    uint32_t t = 0;
    for (int r = 0; r < NW; r++) {
        ck_assert_msg(zeps_client_new(&cs[r], rs->conf, (uint32_t)r) == 0, "%s",
                      zeps_last_error(NULL));
        ck_assert_int_eq(zeps_declare_sparse(cs[r], &emb, &t), 0);
    }
    for (int64_t k = 0; k < STEPS; k++)
        step(cs, t, k, &at);
    read_rows(cs[0], rows);
    for (int r = 0; r < NW; r++)
        zeps_client_destroy(&cs[r]);
}

/* The same on a set of its own, stopped at the end. */
static void run(zt_zk *zk, const char *name, int64_t kill_k, int phase, float *rows)
{
    zt_rset rs;
    train_on(zk, &rs, name, kill_k, phase, rows);
    zt_rset_stop(&rs);
}

static void expect_rows(const float *want, const float *got, const char *when)
{
    for (int i = 0; i < SPACE * DIM; i++)
        ck_assert_msg(memcmp(&want[i], &got[i], sizeof(float)) == 0,
                      "%s: row %d value %d is %.9g, undisturbed %.9g", when, i / DIM, i % DIM,
                      got[i], want[i]);
}

/* A primary killed mid-run, in each phase of a round: the run carries on
 * at the new primary and ends with the undisturbed run's bits. */
START_TEST(test_failover_mid_round_same_bits)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    static float want[SPACE * DIM], got[SPACE * DIM];
    run(&zk, "undisturbed", -1, 0, want);
    for (int phase = 0; phase <= 4; phase++) {
        char name[32], when[64];
        snprintf(name, sizeof(name), "phase%d", phase);
        snprintf(when, sizeof(when), "killed before phase %d of step 13", phase);
        run(&zk, name, 13, phase, got);
        expect_rows(want, got, when);
    }
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

START_TEST(test_backup_holds_the_rounds_bits)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_rset rs;
    static float before[SPACE * DIM], after[SPACE * DIM];
    train_on(&zk, &rs, "rr", -1, 0, before);
    zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_wait(&rs, 1, "primary", 2, 1, 15);
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, rs.conf, 0), 0);
    read_rows(c, after);
    for (int i = 0; i < SPACE * DIM; i++)
        ck_assert_msg(memcmp(&before[i], &after[i], sizeof(float)) == 0,
                      "row %d value %d: %.9g after the failover, the primary served %.9g", i / DIM,
                      i % DIM, after[i], before[i]);
    zeps_client_destroy(&c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("repl_rounds");
    TCase *tc = tcase_create("repl_rounds");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_backup_holds_the_rounds_bits);
    tcase_add_test(tc, test_failover_mid_round_same_bits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
