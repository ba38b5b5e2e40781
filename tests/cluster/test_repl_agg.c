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
#include <pthread.h>
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
    uint64_t wire; /* the pushes' payload bytes as received, every table */
} logstat;

/* Replica r's log counters, and in `digest` what both replicas must agree
 * on: per table its version, pushes, bytes and histograms, per worker its
 * clock, pushes, bytes, lost count, the logged requests' bits of its
 * duplicate window (`window`: the bits to compare) and tau. */
static logstat stat_of(zt_rset *rs, int r, char *digest, size_t len, uint64_t window)
{
    Zeps__Header *rep = zt_rset_stats(rs, r);
    ck_assert_ptr_nonnull(rep);
    const Zeps__ShardStats *st = rep->stats;
    logstat ls = {st->repl_lsn,     st->repl_round_entries, st->repl_round_pushes,
                  st->repl_flushed, st->repl_log_bytes,     0};
    for (size_t i = 0; i < st->n_tables; i++)
        ls.wire += st->tables[i]->push_bytes_wire;
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
        at += (size_t)snprintf(
            digest + at, len - at, "worker %zu c%lld p%llu b%llu l%llu seq %llu %llx tau", i,
            (long long)ws->clock, (unsigned long long)ws->pushes,
            (unsigned long long)ws->push_bytes_wire, (unsigned long long)ws->lost_count,
            (unsigned long long)ws->max_seq, (unsigned long long)(ws->seq_window & window));
        for (size_t b = 0; ws->tau && b < ws->tau->n_counts; b++)
            at += (size_t)snprintf(digest + at, len - at, " %llu",
                                   (unsigned long long)ws->tau->counts[b]);
        at += (size_t)snprintf(digest + at, len - at, "\n");
    }
    zeps__header__free_unpacked(rep, NULL);
    return ls;
}

/* The backup (replica 1) agrees with the primary on everything STATS shows
 * of the tables and workers (`window`: the bits of their duplicate windows
 * to compare, PUSH_BITS for steps of a pull and a push). */
static void expect_same_stats(zt_rset *rs, const char *when, uint64_t window)
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
    logstat p0 = stat_of(&rs, 0, NULL, 0, 0), b0 = stat_of(&rs, 1, NULL, 0, 0);
    for (int64_t k = 0; k < ROUNDS; k++)
        step(cs, NW, t, k, NULL, false);
    logstat p1 = stat_of(&rs, 0, NULL, 0, 0), b1 = stat_of(&rs, 1, NULL, 0, 0);
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
    expect_same_stats(&rs, "after the rounds", PUSH_BITS);
    /* a CLOCK of its own after each push: it joins the round's entry (the
     * last rank's comes after it), and no push is logged alone */
    for (int64_t k = ROUNDS; k < ROUNDS + SEP_ROUNDS; k++)
        step(cs, NW, t, k, NULL, true);
    logstat p2 = stat_of(&rs, 0, NULL, 0, 0), b2 = stat_of(&rs, 1, NULL, 0, 0);
    /* a CLOCK that arrives after its round's last push is logged alone */
    ck_assert_uint_ge(p2.lsn - p1.lsn, 2 * SEP_ROUNDS);
    ck_assert_uint_le(p2.lsn - p1.lsn, (1 + NW) * SEP_ROUNDS);
    ck_assert_uint_eq(p2.entries - p1.entries, SEP_ROUNDS);
    ck_assert_uint_eq(p2.pushes - p1.pushes, SEP_ROUNDS * NW);
    ck_assert_uint_eq(p2.flushed, p0.flushed);
    ck_assert_uint_eq(b2.lsn - b1.lsn, p2.lsn - p1.lsn);
    expect_same_stats(&rs, "after rounds with CLOCKs of their own", 0);
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
    expect_same_stats(&rs, how ? "after a BYE" : "after a worker was declared lost", PUSH_BITS);
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

/* --- sparse rounds --- */

#define SDIM    8
#define SHARED  48 /* ids every rank pushes in a round */
#define OWN     8  /* ids of a rank's own */
#define SROUNDS 30
#define SPUSH   (SHARED + OWN)

static const zeps_sparse_spec emb = {.name = "e",
                                     .dim = SDIM,
                                     .optimizer = "adagrad",
                                     .lr = 0.05,
                                     .init = "normal",
                                     .init_scale = 0.1,
                                     .seed = 11};

/* Rank r's ids in round k: SHARED ids all ranks push (they overlap from
 * round to round), then OWN of its own. */
static void sparse_ids(int r, int64_t k, uint64_t *ids)
{
    for (int i = 0; i < SHARED; i++)
        ids[i] = (uint64_t)((i * 7 + k * 13) % 200) + 1;
    for (int i = 0; i < OWN; i++)
        ids[SHARED + i] = 1000 + (uint64_t)r * 100 + (uint64_t)((k * 3 + i) % 50);
}

/* Round k of the sparse table: every rank pulls its rows, then every
 * rank's push is sent, then every rank's CLOCK, before any is waited for
 * (a sparse round closes once every rank finished the clock). */
static void sparse_step(zeps_client **cs, uint32_t t, int64_t k)
{
    static float v[NW][SPUSH * SDIM], g[NW][SPUSH * SDIM];
    uint64_t ids[NW][SPUSH];
    zeps_sbatch *b[NW] = {0};
    zeps_req *push[NW] = {0}, *clock[NW] = {0};
    for (int r = 0; r < NW; r++) {
        sparse_ids(r, k, ids[r]);
        ck_assert_int_eq(zeps_sbatch_new(cs[r], t, ids[r], SPUSH, &b[r]), 0);
        ck_assert_int_eq(zeps_sbatch_pull(b[r], v[r], k), 0);
        for (int i = 0; i < SPUSH * SDIM; i++)
            g[r][i] = 0.5f * v[r][i] + 0.01f * (float)((r + 1) * ((i + (int)k) % 5));
    }
    for (int r = 0; r < NW; r++)
        ck_assert_int_eq(zeps_sbatch_push_start(b[r], g[r], k, &push[r]), 0);
    for (int r = 0; r < NW; r++)
        ck_assert_int_eq(zeps_clock_start(cs[r], k, &clock[r]), 0);
    for (int r = 0; r < NW; r++) {
        ck_assert_msg(zeps_wait(&push[r]) == 0, "push %d of round %lld: %s", r, (long long)k,
                      zeps_last_error(cs[r]));
        ck_assert_int_eq(zeps_wait(&clock[r]), 0);
        zeps_sbatch_free(&b[r]);
    }
}

/* Each step is a pull, a push and a CLOCK: bit i of the window is seq
 * max_seq - 1 - i, a pull (not logged) for i % 3 == 1. */
#define SPARSE_BITS 0xdb6db6db6db6db6dull

static int by_id(const void *a, const void *b)
{
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return x < y ? -1 : x > y;
}

/* Every row record of sparse table t (id, version, touches, last clock,
 * values, optimizer state) on the primary client c reaches, sorted by id;
 * *n records of *rec bytes. The caller frees it. */
static uint8_t *scan_rows(zeps_client *c, uint32_t t, size_t *n, size_t *rec)
{
    uint8_t *all = NULL;
    size_t len = 0;
    uint64_t cursor = 0;
    *n = 0;
    do {
        zeps_page page;
        ck_assert_msg(zeps_scan(c, t, 0, cursor, 0, &page) == 0, "%s", zeps_last_error(c));
        *rec = ZEPS_ROW_RECORD_BYTES(page.dim, page.state_per_value);
        all = realloc(all, len + page.bytes + 1);
        memcpy(all + len, page.data, page.bytes);
        len += page.bytes;
        *n += page.count;
        cursor = page.next;
        zeps_page_release(&page);
    } while (cursor != 0);
    qsort(all, *n, *rec, by_id);
    return all;
}

START_TEST(test_sparse_one_entry_per_round)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_rset rs;
    rset_up(&zk, &rs, "sparse", "");
    zeps_client *cs[NW];
    uint32_t t = 0;
    for (int r = 0; r < NW; r++) {
        ck_assert_msg(zeps_client_new(&cs[r], rs.conf, (uint32_t)r) == 0, "%s",
                      zeps_last_error(NULL));
        ck_assert_int_eq(zeps_declare_sparse(cs[r], &emb, &t), 0);
    }
    logstat p0 = stat_of(&rs, 0, NULL, 0, 0), b0 = stat_of(&rs, 1, NULL, 0, 0);
    for (int64_t k = 0; k < SROUNDS; k++)
        sparse_step(cs, t, k);
    logstat p1 = stat_of(&rs, 0, NULL, 0, 0), b1 = stat_of(&rs, 1, NULL, 0, 0);
    double logged = (double)(p1.bytes - p0.bytes) / SROUNDS;
    double pushed = (double)(p1.wire - p0.wire) / SROUNDS;
    printf("%d sparse rounds of %d pushes of %d rows (%d shared): %llu entries, %llu round "
           "entries, %llu pushes flushed, %.0f bytes logged per round, the pushes %.0f (%.2f)\n",
           SROUNDS, NW, SPUSH, SHARED, (unsigned long long)(p1.lsn - p0.lsn),
           (unsigned long long)(p1.entries - p0.entries),
           (unsigned long long)(p1.flushed - p0.flushed), logged, pushed, logged / pushed);
    fflush(stdout);
    /* the rounds' merges: each shared row once a round, not once a rank;
     * a round a loaded machine flushed costs its pushes, a few may */
    ck_assert_msg(logged < 0.7 * pushed, "%.0f bytes logged per round, the pushes %.0f", logged,
                  pushed);
    ck_assert_uint_ge(p1.entries - p0.entries, SROUNDS / 2);
    ck_assert_uint_eq(b1.lsn - b0.lsn, p1.lsn - p0.lsn);
    ck_assert_uint_eq(b1.entries - b0.entries, p1.entries - p0.entries);
    ck_assert_uint_eq(b1.pushes - b0.pushes, p1.pushes - p0.pushes);
    expect_same_stats(&rs, "after the sparse rounds", SPARSE_BITS);
    size_t n, rec, n2, rec2;
    uint8_t *before = scan_rows(cs[0], t, &n, &rec);
    zt_rset_kill(&rs, 0, SIGKILL);
    zt_rset_wait(&rs, 1, "primary", 2, 1, 15);
    uint8_t *after = scan_rows(cs[0], t, &n2, &rec2);
    ck_assert_uint_eq(n2, n);
    ck_assert_uint_eq(rec2, rec);
    /* id, version, values and optimizer state the same bits; touches and
     * last clock count the pulls too, which only the primary sees (pulls
     * are not logged): counted, not compared */
    size_t touched = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *x = before + i * rec, *y = after + i * rec;
        uint64_t id;
        memcpy(&id, x, 8);
        ck_assert_msg(memcmp(x, y, 12) == 0 && memcmp(x + 24, y + 24, rec - 24) == 0,
                      "row %llu (record %zu of %zu): the new primary's version, values or state "
                      "differ from what the old primary served",
                      (unsigned long long)id, i, n);
        touched += memcmp(x + 12, y + 12, 12) != 0;
    }
    printf("%zu rows the same bits after the failover (%zu with other touches or last clock)\n", n,
           touched);
    free(before);
    free(after);
    for (int r = 0; r < NW; r++)
        zeps_client_destroy(&cs[r]);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* The sparse rounds of a replica set of its own (`name`), its primary
 * SIGKILLed at round `kill_k` (< 0: never) with every rank's push but the
 * last applied and held, before the clocks; every row record at the end
 * (*n of *rec bytes, sorted by id; the caller frees it). */
static uint8_t *sparse_run(zt_zk *zk, const char *name, int64_t kill_k, size_t *n, size_t *rec)
{
    static float v[NW][SPUSH * SDIM], g[NW][SPUSH * SDIM];
    zt_rset rs;
    rset_up(zk, &rs, name, "");
    zeps_client *cs[NW];
    uint32_t t = 0;
    for (int r = 0; r < NW; r++) {
        ck_assert_msg(zeps_client_new(&cs[r], rs.conf, (uint32_t)r) == 0, "%s",
                      zeps_last_error(NULL));
        ck_assert_int_eq(zeps_declare_sparse(cs[r], &emb, &t), 0);
    }
    for (int64_t k = 0; k < SROUNDS; k++) {
        if (k != kill_k) {
            sparse_step(cs, t, k);
            continue;
        }
        uint64_t ids[NW][SPUSH];
        zeps_sbatch *b[NW] = {0};
        zeps_req *push[NW] = {0}, *clock[NW] = {0};
        for (int r = 0; r < NW; r++) {
            sparse_ids(r, k, ids[r]);
            ck_assert_int_eq(zeps_sbatch_new(cs[r], t, ids[r], SPUSH, &b[r]), 0);
            ck_assert_int_eq(zeps_sbatch_pull(b[r], v[r], k), 0);
            for (int i = 0; i < SPUSH * SDIM; i++)
                g[r][i] = 0.5f * v[r][i] + 0.01f * (float)((r + 1) * ((i + (int)k) % 5));
        }
        for (int r = 0; r < NW - 1; r++)
            ck_assert_int_eq(zeps_sbatch_push_start(b[r], g[r], k, &push[r]), 0);
        /* applied there, their replies held in the round batch (the last
         * rank, which has not pushed, may still send its CLOCK: no flush) */
        zt_sleep_ms(200);
        zt_rset_kill(&rs, 0, SIGKILL);
        printf("primary killed with %d pushes of sparse round %lld in it\n", NW - 1, (long long)k);
        ck_assert_int_eq(zeps_sbatch_push_start(b[NW - 1], g[NW - 1], k, &push[NW - 1]), 0);
        for (int r = 0; r < NW; r++)
            ck_assert_int_eq(zeps_clock_start(cs[r], k, &clock[r]), 0);
        for (int r = 0; r < NW; r++) {
            ck_assert_msg(zeps_wait(&push[r]) == 0, "%s", zeps_last_error(cs[r]));
            ck_assert_int_eq(zeps_wait(&clock[r]), 0);
            zeps_sbatch_free(&b[r]);
        }
    }
    uint8_t *rows = scan_rows(cs[0], t, n, rec);
    for (int r = 0; r < NW; r++)
        zeps_client_destroy(&cs[r]);
    zt_rset_stop(&rs);
    return rows;
}

/* The primary SIGKILLed with a sparse round's pushes applied and their
 * replies held: the workers resend them to the new primary, and the run
 * ends with the undisturbed run's rows (versions, values, state). */
START_TEST(test_sparse_failover_mid_round)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    size_t n, rec, n2, rec2;
    uint8_t *want = sparse_run(&zk, "sref", -1, &n, &rec);
    uint8_t *got = sparse_run(&zk, "smid", SROUNDS / 2, &n2, &rec2);
    ck_assert_uint_eq(n2, n);
    ck_assert_uint_eq(rec2, rec);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *x = want + i * rec, *y = got + i * rec;
        uint64_t id;
        memcpy(&id, x, 8);
        ck_assert_msg(memcmp(x, y, 12) == 0 && memcmp(x + 24, y + 24, rec - 24) == 0,
                      "row %llu: its version, values or state differ from the undisturbed run's",
                      (unsigned long long)id);
    }
    free(want);
    free(got);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* A worker that waits for its sparse push's reply before it sends its
 * CLOCK: its own thread (as its own process would be), pull, push and
 * clock each waited for. */
typedef struct waiter {
    zeps_client *c;
    uint32_t t;
    int rank, failed;
    char err[256];
} waiter;

#define WROUNDS 5

static void *waiting_worker(void *arg)
{
    waiter *w = arg;
    static float v[NW][SPUSH * SDIM];
    uint64_t ids[SPUSH];
    for (int64_t k = 0; k < WROUNDS && !w->failed; k++) {
        sparse_ids(w->rank, k, ids);
        float *x = v[w->rank];
        if (zeps_spull(w->c, w->t, ids, SPUSH, x, k) != 0 ||
            zeps_spush(w->c, w->t, ids, SPUSH, x, k) != 0 || zeps_clock(w->c, k) != 0) {
            w->failed = 1;
            snprintf(w->err, sizeof(w->err), "rank %d round %lld: %s", w->rank, (long long)k,
                     zeps_last_error(w->c));
        }
    }
    return NULL;
}

/* Workers that each wait for their push before their CLOCK: the sparse
 * round cannot close while the batch holds those replies, so it is flushed
 * (every push logged with its rows), not after a request timeout (60 s),
 * and the backup still agrees. */
START_TEST(test_sparse_waiting_clients)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    zt_rset rs;
    rset_up(&zk, &rs, "swait", "  request_timeout_ms = 60000;\n");
    waiter w[NW];
    pthread_t th[NW];
    for (int r = 0; r < NW; r++) {
        memset(&w[r], 0, sizeof(w[r]));
        w[r].rank = r;
        ck_assert_msg(zeps_client_new(&w[r].c, rs.conf, (uint32_t)r) == 0, "%s",
                      zeps_last_error(NULL));
        ck_assert_int_eq(zeps_declare_sparse(w[r].c, &emb, &w[r].t), 0);
    }
    logstat p0 = stat_of(&rs, 0, NULL, 0, 0);
    double t0 = zt_now_s();
    for (int r = 0; r < NW; r++)
        ck_assert_int_eq(pthread_create(&th[r], NULL, waiting_worker, &w[r]), 0);
    for (int r = 0; r < NW; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < NW; r++)
        ck_assert_msg(!w[r].failed, "%s", w[r].err);
    logstat p1 = stat_of(&rs, 0, NULL, 0, 0);
    printf("%d sparse rounds of waiting workers: %.2f s, %llu pushes flushed, %llu round "
           "entries\n",
           WROUNDS, zt_now_s() - t0, (unsigned long long)(p1.flushed - p0.flushed),
           (unsigned long long)(p1.entries - p0.entries));
    fflush(stdout);
    /* not one request timeout (a resent push answered DUPLICATE flushes
     * the batch too: without the stuck rule each round waits for one) */
    ck_assert_msg(zt_now_s() - t0 < 50.0, "the rounds waited for request timeouts");
    ck_assert_uint_eq(p1.flushed - p0.flushed, (uint64_t)NW * WROUNDS);
    expect_same_stats(&rs, "after the waiting workers' rounds", SPARSE_BITS);
    for (int r = 0; r < NW; r++)
        zeps_client_destroy(&w[r].c);
    zt_rset_stop(&rs);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("repl_agg");
    TCase *tc = tcase_create("repl_agg");
    tcase_set_timeout(tc, 170);
    tcase_add_test(tc, test_one_entry_per_round);
    tcase_add_test(tc, test_sparse_one_entry_per_round);
    tcase_add_test(tc, test_sparse_failover_mid_round);
    tcase_add_test(tc, test_sparse_waiting_clients);
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
