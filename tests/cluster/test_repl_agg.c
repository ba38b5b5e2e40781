/*
 * test_repl_agg.c - replication after aggregation (docs/replication.md):
 * a replicated shard under bsp logs each dense round as one entry (the
 * pushes without their values, and the round's sum), with real
 * zeps-server processes and a real ZooKeeper: one shard of two replicas,
 * three workers through libzeps, each with all its pushes in flight at
 * once as separate processes would send them.
 *
 *   - one entry per round, on both replicas, and fewer bytes than the
 *     three pushes; the backup's counters, histograms and clocks equal the
 *     primary's, and after a SIGKILL of the primary the new primary holds
 *     the single-process reference's bits;
 *   - the primary SIGKILLed with two of a round's pushes applied and held
 *     unanswered: the workers resend them to the new primary and the run
 *     ends with the reference's bits;
 *   - a round closed outside a push (a worker declared lost by the
 *     primary's timer, or gone with BYE) reaches the backup too.
 */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bsp_ref.h"
#include "check_main.h"
#include "harness.h"
#include "replset.h"
#include "zeps.h"
#include "zkserver.h"

#define SESSION_MS 2000
#define NW         3
#define ROUNDS     30
#define SEP_ROUNDS 10

/* One shard of two replicas under bsp for NW workers; `extra` lines inside
 * cluster. */
static void rset_up(zt_zk *zk, zt_rset *rs, const char *name, const char *extra)
{
    char lines[600];
    snprintf(lines, sizeof(lines),
             "  workers = %d;\n  consistency = \"bsp\";\n  hello_timeout_ms = 5000;\n"
             "  replication = { max_lag_ms = 1000; };\n%s",
             NW, extra);
    memset(rs, 0, sizeof(*rs));
    zt_rset_write(rs, "repl_agg", zk->hosts, name, SESSION_MS, lines);
    zt_rset_up(rs);
}

static void clients(zt_rset *rs, zeps_client **cs, uint32_t *t)
{
    for (int r = 0; r < NW; r++) {
        ck_assert_msg(zeps_client_new(&cs[r], rs->conf, (uint32_t)r) == 0, "%s",
                      zeps_last_error(NULL));
        ck_assert_int_eq(zeps_declare(cs[r], &zt_bsp_spec, t), 0);
    }
}

/* Round k for ranks [0, n): each pulls, then every push is sent before any
 * is waited for, carrying the clock, or with `sep` followed at once by a
 * CLOCK (which joins the round's entry, but the last rank's, sent once the
 * round's entry was logged). With `kill_rs`, the primary is
 * SIGKILLed once all but the last rank's pushes were sent. */
static void step(zeps_client **cs, int n, uint32_t t, int64_t k, zt_rset *kill_rs, bool sep)
{
    static float w[NW][ZT_BSP_LEN], g[NW][ZT_BSP_LEN];
    zeps_req *push[NW] = {0}, *rest[NW] = {0};
    for (int r = 0; r < n; r++)
        ck_assert_int_eq(zeps_pull(cs[r], t, w[r], 0, ZT_BSP_LEN, k), 0);
    for (int r = 0; r < n; r++) {
        if (kill_rs && r == n - 1) {
            zt_sleep_ms(200); /* applied there, held unanswered */
            zt_rset_kill(kill_rs, 0, SIGKILL);
            printf("primary killed with %d pushes of round %lld in it\n", n - 1, (long long)k);
        }
        zt_bsp_gradient(w[r], g[r], r, k);
        if (sep) { /* the push, then a CLOCK of its own at once */
            ck_assert_int_eq(zeps_push_start(cs[r], t, g[r], 0, ZT_BSP_LEN, k, &push[r]), 0);
            ck_assert_int_eq(zeps_clock_start(cs[r], k, &rest[r]), 0);
            continue;
        }
        ck_assert_int_eq(
            zeps_push_clock_start(cs[r], t, g[r], 0, ZT_BSP_LEN, k, &push[r], &rest[r]), 0);
    }
    for (int r = 0; r < n; r++) {
        ck_assert_msg(zeps_wait(&push[r]) == 0, "push %d of round %lld: %s", r, (long long)k,
                      zeps_last_error(cs[r]));
        if (rest[r])
            ck_assert_int_eq(zeps_wait(&rest[r]), 0);
    }
}

/* In the rounds a worker's requests alternate pull, push, the last a push:
 * bit i of its window is seq max_seq - 1 - i, a push for odd i. Pulls
 * change no state and are not logged: their seqs are in the primary's
 * window only. */
#define PUSH_BITS 0xaaaaaaaaaaaaaaaaull

/* What a replica's STATS says of its log. */
typedef struct logstat {
    uint64_t lsn, entries, pushes, flushed, bytes;
} logstat;

/* Replica r's log counters, and in `digest` what both replicas must agree
 * on: per table its version, pushes, bytes and histograms, per worker its
 * clock, pushes, bytes, lost count, the pushes' duplicate window and tau. */
static logstat stat_of(zt_rset *rs, int r, char *digest, size_t len, bool window)
{
    Zeps__Header *rep = zt_rset_stats(rs, r);
    ck_assert_ptr_nonnull(rep);
    const Zeps__ShardStats *st = rep->stats;
    logstat ls = {st->repl_lsn, st->repl_round_entries, st->repl_round_pushes, st->repl_flushed,
                  st->repl_log_bytes};
    size_t at = 0;
    for (size_t i = 0; digest && i < st->n_tables; i++) {
        const Zeps__TableStats *ts = st->tables[i];
        at += (size_t)snprintf(digest + at, len - at, "table %zu v%llu p%llu b%llu tau", i,
                               (unsigned long long)ts->version, (unsigned long long)ts->pushes,
                               (unsigned long long)ts->push_bytes_wire);
        for (size_t b = 0; ts->tau && b < ts->tau->n_counts; b++)
            at += (size_t)snprintf(digest + at, len - at, " %llu",
                                   (unsigned long long)ts->tau->counts[b]);
        at += (size_t)snprintf(digest + at, len - at, " gap");
        for (size_t b = 0; ts->clock_gap && b < ts->clock_gap->n_counts; b++)
            at += (size_t)snprintf(digest + at, len - at, " %llu",
                                   (unsigned long long)ts->clock_gap->counts[b]);
        at += (size_t)snprintf(digest + at, len - at, "\n");
    }
    for (size_t i = 0; digest && i < st->n_workers; i++) {
        const Zeps__WorkerStats *ws = st->workers[i];
        at += (size_t)snprintf(digest + at, len - at,
                               "worker %zu c%lld p%llu b%llu l%llu seq %llu %llx tau", i,
                               (long long)ws->clock, (unsigned long long)ws->pushes,
                               (unsigned long long)ws->push_bytes_wire,
                               (unsigned long long)ws->lost_count, (unsigned long long)ws->max_seq,
                               (unsigned long long)(window ? ws->seq_window & PUSH_BITS : 0));
        for (size_t b = 0; ws->tau && b < ws->tau->n_counts; b++)
            at += (size_t)snprintf(digest + at, len - at, " %llu",
                                   (unsigned long long)ws->tau->counts[b]);
        at += (size_t)snprintf(digest + at, len - at, "\n");
    }
    zeps__header__free_unpacked(rep, NULL);
    return ls;
}

/* The backup (replica 1) agrees with the primary on everything STATS shows
 * of the tables and workers (`window`: their duplicate windows too, which
 * PUSH_BITS reads for steps of a pull and a push only). */
static void expect_same_stats(zt_rset *rs, const char *when, bool window)
{
    static char a[16384], b[16384];
    stat_of(rs, 0, a, sizeof(a), window);
    stat_of(rs, 1, b, sizeof(b), window);
    ck_assert_msg(strcmp(a, b) == 0, "%s: the primary's STATS\n%s\nthe backup's\n%s", when, a, b);
}

/* Replica 1, promoted after replica 0's SIGKILL, serves what round
 * `rounds` of `n` workers makes in a single process, bit for bit. */
static void expect_reference_after_failover(zt_rset *rs, zeps_client *c, uint32_t t, int rounds,
                                            const char *when)
{
    static float w[ZT_BSP_LEN], ref[ZT_BSP_LEN];
    ck_assert_int_eq(zeps_pull(c, t, w, 0, ZT_BSP_LEN, rounds), 0);
    zt_bsp_reference(NW, rounds, ref);
    for (int i = 0; i < ZT_BSP_LEN; i++)
        ck_assert_msg(memcmp(&w[i], &ref[i], sizeof(float)) == 0,
                      "%s: w[%d] = %.9g, the reference %.9g", when, i, w[i], ref[i]);
    (void)rs;
}

START_TEST(test_one_entry_per_round)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_rset rs;
    rset_up(&zk, &rs, "agg", "");
    zeps_client *cs[NW];
    uint32_t t = 0;
    clients(&rs, cs, &t);
    logstat p0 = stat_of(&rs, 0, NULL, 0, false), b0 = stat_of(&rs, 1, NULL, 0, false);
    for (int64_t k = 0; k < ROUNDS; k++)
        step(cs, NW, t, k, NULL, false);
    logstat p1 = stat_of(&rs, 0, NULL, 0, false), b1 = stat_of(&rs, 1, NULL, 0, false);
    double per_round = (double)(p1.bytes - p0.bytes) / ROUNDS;
    printf("%d rounds of %d pushes of %d floats: %llu entries, %.0f bytes logged per round "
           "(one push: %d bytes)\n",
           ROUNDS, NW, ZT_BSP_LEN, (unsigned long long)(p1.lsn - p0.lsn), per_round,
           ZT_BSP_LEN * 4);
    fflush(stdout);
    /* one entry per round, carrying every push, none logged alone */
    ck_assert_uint_eq(p1.lsn - p0.lsn, ROUNDS);
    ck_assert_uint_eq(p1.entries - p0.entries, ROUNDS);
    ck_assert_uint_eq(p1.pushes - p0.pushes, ROUNDS * NW);
    ck_assert_uint_eq(p1.flushed, p0.flushed);
    ck_assert_uint_eq(b1.lsn - b0.lsn, ROUNDS);
    ck_assert_uint_eq(b1.entries - b0.entries, ROUNDS);
    ck_assert_uint_eq(b1.pushes - b0.pushes, ROUNDS * NW);
    /* the sum and three headers, not three pushes' values */
    ck_assert_msg(per_round < 1.2 * ZT_BSP_LEN * 4, "%.0f bytes logged per round", per_round);
    expect_same_stats(&rs, "after the rounds", true);
    /* a CLOCK of its own after each push: it joins the round's entry (the
     * last rank's comes after it), and no push is logged alone */
    for (int64_t k = ROUNDS; k < ROUNDS + SEP_ROUNDS; k++)
        step(cs, NW, t, k, NULL, true);
    logstat p2 = stat_of(&rs, 0, NULL, 0, false), b2 = stat_of(&rs, 1, NULL, 0, false);
    /* a CLOCK that arrives after its round's last push is logged alone */
    ck_assert_uint_ge(p2.lsn - p1.lsn, 2 * SEP_ROUNDS);
    ck_assert_uint_le(p2.lsn - p1.lsn, (1 + NW) * SEP_ROUNDS);
    ck_assert_uint_eq(p2.entries - p1.entries, SEP_ROUNDS);
    ck_assert_uint_eq(p2.pushes - p1.pushes, SEP_ROUNDS * NW);
    ck_assert_uint_eq(p2.flushed, p0.flushed);
    ck_assert_uint_eq(b2.lsn - b1.lsn, p2.lsn - p1.lsn);
    expect_same_stats(&rs, "after rounds with CLOCKs of their own", false);
    zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_wait(&rs, 1, "primary", 2, 1, 15);
    expect_reference_after_failover(&rs, cs[0], t, ROUNDS + SEP_ROUNDS, "after the failover");
    for (int r = 0; r < NW; r++)
        zeps_client_destroy(&cs[r]);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

START_TEST(test_failover_mid_round)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_rset rs;
    rset_up(&zk, &rs, "mid", "");
    zeps_client *cs[NW];
    uint32_t t = 0;
    clients(&rs, cs, &t);
    for (int64_t k = 0; k < ROUNDS; k++)
        step(cs, NW, t, k, k == ROUNDS / 2 ? &rs : NULL, false);
    expect_reference_after_failover(&rs, cs[0], t, ROUNDS, "killed mid-round");
    for (int r = 0; r < NW; r++)
        zeps_client_destroy(&cs[r]);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Round k: every rank but the last pulls and pushes; then, with `bye`,
 * the last says BYE (its client destroyed) while the pushes are held; else
 * it stays silent until the primary's timer declares it lost. Either
 * closes the round with the pushes held. */
static void round_closed_without_last(zeps_client **cs, uint32_t t, int64_t k, int bye)
{
    static float w[NW][ZT_BSP_LEN], g[NW][ZT_BSP_LEN];
    zeps_req *push[NW - 1] = {0}, *rest[NW - 1] = {0};
    for (int r = 0; r < NW - 1; r++) {
        ck_assert_int_eq(zeps_pull(cs[r], t, w[r], 0, ZT_BSP_LEN, k), 0);
        zt_bsp_gradient(w[r], g[r], r, k);
        ck_assert_int_eq(
            zeps_push_clock_start(cs[r], t, g[r], 0, ZT_BSP_LEN, k, &push[r], &rest[r]), 0);
    }
    zt_sleep_ms(300); /* held on the primary, in a round still open */
    if (bye)
        zeps_client_destroy(&cs[NW - 1]);
    for (int r = 0; r < NW - 1; r++) {
        ck_assert_msg(zeps_wait(&push[r]) == 0, "push %d of round %lld: %s", r, (long long)k,
                      zeps_last_error(cs[r]));
        if (rest[r])
            ck_assert_int_eq(zeps_wait(&rest[r]), 0);
    }
}

/* Rounds closed outside a push: `how` 0, the last rank silent past the
 * lost-worker timeout (declared lost by the primary's timer); 1, the last
 * rank says BYE. Either closes the open round with the other ranks' held
 * pushes; the backup must close it the same way. */
static void closed_outside(int how)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_rset rs;
    rset_up(&zk, &rs, how ? "bye" : "lost",
            "  on_lost_worker = \"continue\";\n  lost_worker_timeout_s = 2;\n"
            "  request_timeout_ms = 4000;\n");
    zeps_client *cs[NW];
    uint32_t t = 0;
    clients(&rs, cs, &t);
    for (int64_t k = 0; k < 5; k++)
        step(cs, NW, t, k, NULL, false);
    if (!how)
        zt_sleep_ms(1000); /* the others are heard 1 s after it: it alone is lost */
    round_closed_without_last(cs, t, 5, how);
    for (int64_t k = 6; k < 10; k++)
        step(cs, NW - 1, t, k, NULL, false);
    expect_same_stats(&rs, how ? "after a BYE" : "after a worker was declared lost", true);
    static float a[ZT_BSP_LEN], b[ZT_BSP_LEN];
    ck_assert_int_eq(zeps_pull(cs[0], t, a, 0, ZT_BSP_LEN, 10), 0);
    zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_wait(&rs, 1, "primary", 2, 1, 15);
    ck_assert_int_eq(zeps_pull(cs[0], t, b, 0, ZT_BSP_LEN, 10), 0);
    for (int i = 0; i < ZT_BSP_LEN; i++)
        ck_assert_msg(memcmp(&a[i], &b[i], sizeof(float)) == 0,
                      "%s: w[%d] = %.9g after the failover, the primary served %.9g",
                      how ? "BYE" : "lost", i, b[i], a[i]);
    for (int r = 0; r < NW - how; r++)
        zeps_client_destroy(&cs[r]);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}

START_TEST(test_round_closed_by_lost_worker)
{
    closed_outside(0);
}
END_TEST

START_TEST(test_round_closed_by_bye)
{
    closed_outside(1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("repl_agg");
    TCase *tc = tcase_create("repl_agg");
    tcase_set_timeout(tc, 170);
    tcase_add_test(tc, test_one_entry_per_round);
    tcase_add_test(tc, test_failover_mid_round);
    tcase_add_test(tc, test_round_closed_by_lost_worker);
    tcase_add_test(tc, test_round_closed_by_bye);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
