/*
 * test_inject.c - staleness on demand (cluster.inject): the schedules'
 * laws (state/inject.c), the kept versions of dense slices
 * (table/versions.c) and of sparse rows (table/rowvers.c), and a shard in
 * process serving dense and sparse pulls tau behind, in turns (a sparse
 * table's by round), with every push recorded exactly tau old.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "heap.h"
#include "scratch.h"
#include "inject.h"
#include "inproc.h"
#include "ops.h"
#include "rowvers.h"
#include "versions.h"
#include "zeps_errors.h"

#define DRAWS 60000

static zp_config base_config(zp_inject_schedule k)
{
    zp_config c;
    zp_config_keys_defaults(&c);
    c.num_workers = 4;
    c.num_shards = 1;
    c.inject = k;
    return c;
}

/* Pearson's chi-square of observed counts against expected probabilities. */
static double chi2(const uint64_t *obs, const double *p, int k, uint64_t n)
{
    double x = 0;
    for (int i = 0; i < k; i++) {
        double e = p[i] * (double)n;
        x += (obs[i] - e) * (obs[i] - e) / e;
    }
    return x;
}

/* Counts of tau over DRAWS pulls: ranks 0..3, versions 0.. */
static void draw_counts(const zp_inject *in, uint64_t *counts, int k)
{
    memset(counts, 0, (size_t)k * sizeof(*counts));
    for (uint64_t i = 0; i < DRAWS; i++) {
        uint32_t tau = zp_inject_tau(in, (uint32_t)(i % 4), i / 4);
        ck_assert_int_lt(tau, k);
        counts[tau]++;
    }
}

START_TEST(test_fixed_and_straggler)
{
    zp_config c = base_config(ZP_INJECT_FIXED);
    c.inject_tau = 3;
    zp_inject in;
    char err[256];
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.window, 3);
    for (uint64_t v = 0; v < 1000; v++)
        ck_assert_uint_eq(zp_inject_tau(&in, (uint32_t)(v % 4), v), 3);
    zp_inject_fini(&in);

    c = base_config(ZP_INJECT_STRAGGLER);
    c.inject_tau = 7;
    c.inject_straggler = 2;
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    for (uint64_t v = 0; v < 100; v++)
        for (uint32_t r = 0; r < 4; r++)
            ck_assert_uint_eq(zp_inject_tau(&in, r, v), r == 2 ? 7 : 0);
    zp_inject_fini(&in);

    c = base_config(ZP_INJECT_OFF);
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    ck_assert_ptr_null(in.ops);
    ck_assert_uint_eq(zp_inject_tau(&in, 1, 99), 0);
}
END_TEST

/* uniform{0..s}: a chi-square test against 1/(s+1) each (8 degrees of
 * freedom: 26.12 is the 0.1% point); a pure function of (seed, rank,
 * version); another seed, another sequence. */
START_TEST(test_uniform)
{
    zp_config c = base_config(ZP_INJECT_UNIFORM);
    c.inject_max_tau = 8;
    zp_inject in;
    char err[256];
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.window, 8);
    uint64_t counts[9];
    double p[9];
    draw_counts(&in, counts, 9);
    for (int i = 0; i < 9; i++)
        p[i] = 1.0 / 9;
    ck_assert_double_lt(chi2(counts, p, 9, DRAWS), 26.12);
    ck_assert_uint_eq(zp_inject_tau(&in, 3, 12345), zp_inject_tau(&in, 3, 12345));
    zp_inject other;
    c.inject_seed = 2;
    ck_assert_int_eq(zp_inject_init(&other, &c, err, sizeof(err)), 0);
    int same = 0;
    for (uint64_t v = 0; v < 900; v++)
        same += zp_inject_tau(&in, 1, v) == zp_inject_tau(&other, 1, v);
    ck_assert_int_lt(same, 200); /* ~100 expected by chance */
    zp_inject_fini(&in);
    zp_inject_fini(&other);
}
END_TEST

/* geometric p = 0.3 cut at 12: against p (1-p)^k / P(tau <= 12). */
START_TEST(test_geometric)
{
    zp_config c = base_config(ZP_INJECT_GEOMETRIC);
    c.inject_max_tau = 12;
    c.inject_p = 0.3;
    zp_inject in;
    char err[256];
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    uint64_t counts[13];
    double p[13], f = 1 - pow(0.7, 13);
    draw_counts(&in, counts, 13);
    for (int k = 0; k < 13; k++)
        p[k] = 0.3 * pow(0.7, k) / f;
    ck_assert_double_lt(chi2(counts, p, 13, DRAWS), 32.91); /* 12 dof, 0.1% */
    zp_inject_fini(&in);
}
END_TEST

/* replay: a run's histogram drawn back; bad files named with their line. */
START_TEST(test_replay)
{
    char path[256];
    ck_assert_int_eq(zt_scratch_file(path, sizeof(path), "replay"), 0);
    zt_scratch_write(path, "# tau count\n0 100\n2 300\n\n5 600\n");
    zp_config c = base_config(ZP_INJECT_REPLAY);
    snprintf(c.inject_replay, sizeof(c.inject_replay), "%s", path);
    zp_inject in;
    char err[256];
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.window, 5);
    uint64_t counts[6];
    draw_counts(&in, counts, 6);
    ck_assert_uint_eq(counts[1] + counts[3] + counts[4], 0);
    uint64_t obs[3] = {counts[0], counts[2], counts[5]};
    double p[3] = {0.1, 0.3, 0.6};
    ck_assert_double_lt(chi2(obs, p, 3, DRAWS), 13.82); /* 2 dof, 0.1% */
    zp_inject_fini(&in);

    zt_scratch_write(path, "0 10\n3 x\n");
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), ZEPS_ECONFIG);
    char want[300];
    snprintf(want, sizeof(want), "%s:2: expected 'tau count'", path);
    ck_assert_msg(strstr(err, want), "%s", err);
    zt_scratch_write(path, "4 0\n");
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "no 'tau count' line with a count > 0"), "%s", err);
    zt_scratch_write(path, "9 1\n");
    c.inject_window = 4;
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "keeps fewer versions"), "%s", err);
    unlink(path);
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), ZEPS_EIO);
    ck_assert_ptr_null(in.ops);
}
END_TEST

/* init starts from nothing whatever the struct held: a schedule of none
 * leaves no replay array to free and draws tau 0; and the replay's running
 * sums stay inside their array (the ctest entry runs under glibc's
 * MALLOC_CHECK_, whose free aborts on a write one past the end). */
START_TEST(test_init_clears)
{
    zp_config c = base_config(ZP_INJECT_OFF);
    zp_inject in;
    char err[256];
    memset(&in, 0xa5, sizeof(in));
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    ck_assert_ptr_null(in.ops);
    ck_assert_ptr_null(in.replay_cum);
    ck_assert_uint_eq(in.nreplay, 0);
    ck_assert_uint_eq(zp_inject_tau(&in, 1, 7), 0);
    zp_inject_fini(&in);

    char path[256];
    ck_assert_int_eq(zt_scratch_file(path, sizeof(path), "replay"), 0);
    zt_scratch_write(path, "0 1\n1 2\n2 4\n"); /* 3 x 8 bytes; a sum of 7 one past them */
    c = base_config(ZP_INJECT_REPLAY);
    snprintf(c.inject_replay, sizeof(c.inject_replay), "%s", path);
    memset(&in, 0xa5, sizeof(in));
    ck_assert_int_eq(zp_inject_init(&in, &c, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.nreplay, 3);
    ck_assert_uint_eq(in.replay_cum[0], 1);
    ck_assert_uint_eq(in.replay_cum[1], 3);
    ck_assert_uint_eq(in.replay_cum[2], 7);
    zp_inject_fini(&in);
    unlink(path);
}
END_TEST

/* A shard with a replay schedule frees its histogram with itself: making
 * and destroying it again and again does not grow the heap (each one
 * reads 4096 counts, 32 KiB). */
START_TEST(test_shard_frees_replay)
{
    char path[256];
    ck_assert_int_eq(zt_scratch_file(path, sizeof(path), "replay"), 0);
    zt_scratch_write(path, "0 1\n4095 1\n");
    size_t before = 0;
    for (int i = 0; i < 12; i++) {
        if (i == 2) /* the first ones warm the allocator's caches */
            before = zt_heap_used();
        zp_config *cfg = zt_config("async", 1, 1);
        cfg->inject = ZP_INJECT_REPLAY;
        snprintf(cfg->inject_replay, sizeof(cfg->inject_replay), "%s", path);
        zt_shard *z = zt_shard_start(cfg, 0);
        ck_assert_uint_eq(z->s->inject.nreplay, 4096);
        zt_shard_free(z);
    }
    size_t after = zt_heap_used();
    ck_assert_msg(after < before + 64 * 1024, "heap grew %zu -> %zu bytes", before, after);
    unlink(path);
}
END_TEST

/* The ring: the newest `keep` versions, found at or below a version, each
 * holding its own reference; memory is (keep - 1) buffers besides the
 * newest. */
START_TEST(test_versions_ring)
{
    zp_versions v;
    zp_versions_init(&v, 4);
    zp_buf *b[10];
    for (int i = 0; i < 10; i++) {
        b[i] = zp_buf_new(100);
        b[i]->data[0] = (float)i;
        zp_versions_note(&v, b[i], (uint64_t)i);
    }
    /* versions 6..9 kept; the ring and we each hold one reference */
    ck_assert_uint_eq(zp_versions_oldest(&v), 6);
    ck_assert_int_eq(atomic_load(&b[5]->refs), 1);
    ck_assert_int_eq(atomic_load(&b[6]->refs), 2);
    uint64_t got;
    ck_assert_ptr_eq(zp_versions_find(&v, 8, &got), b[8]);
    ck_assert_uint_eq(got, 8);
    ck_assert_ptr_eq(zp_versions_find(&v, 100, &got), b[9]);
    ck_assert_ptr_eq(zp_versions_find(&v, 2, &got), b[6]); /* older than kept: the oldest */
    ck_assert_uint_eq(got, 6);
    ck_assert_uint_eq(zp_versions_bytes(&v), 3 * 100 * sizeof(float));
    zp_versions_fini(&v);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(atomic_load(&b[i]->refs), 1);
        zp_buf_release(b[i]->data, b[i]);
    }
}
END_TEST

/* The reply to the last PULL among the replies. */
static zt_reply *last_pull(zt_shard *z)
{
    for (int i = z->n - 1; i >= 0; i--)
        if (z->r[i].h->op == ZEPS__OP__PULL)
            return &z->r[i];
    return NULL;
}

/* A shard in process, async, fixed tau 2, turns: pulls are served the
 * version 2 behind (the start while there is none), a rank whose turn it
 * is not waits, and every push after the first two is recorded tau 2. */
START_TEST(test_shard_fixed_turns)
{
    zp_config *cfg = zt_config("async", 2, 1);
    cfg->inject = ZP_INJECT_FIXED;
    cfg->inject_tau = 2;
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    zt_hello(z, 1);
    uint32_t id = zt_declare(z, 0, "w", 8, 0.5);
    zp_table *t = z->s->tables[id];
    float g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert_int_eq(zt_pull(z, 1, id, 0, 8, 0), 0); /* rank 0's turn: parked */
    for (int k = 0; k < 12; k++) {
        uint32_t rank = (uint32_t)(k % 2);
        if (rank == 0)
            ck_assert_int_eq(zt_pull(z, 0, id, 0, 8, k), 1);
        /* rank 1's pull was parked and is the reply rank 0's push released */
        zt_reply *rep = last_pull(z);
        ck_assert_ptr_nonnull(rep);
        uint64_t v = t->version, want = v >= 2 ? v - 2 : 0;
        ck_assert_uint_eq(rep->h->data_version, want);
        ck_assert_float_eq(((float *)rep->data)[0], 1.0f - 0.5f * (float)want);
        zt_push(z, rank, id, 0, g, 8, k, rep->h->data_version);
        if (rank == 1 && k + 1 < 12)
            ck_assert_int_ge(zt_pull(z, 1, id, 0, 8, k + 1), 0);
    }
    zp_hist *h = &t->stats.tau;
    ck_assert_uint_eq(h->n, 12);
    ck_assert_uint_eq(h->counts[0] + h->counts[1] + h->counts[2], 12);
    ck_assert_uint_eq(h->counts[2], 10); /* versions 0 and 1 had nothing older */
    ck_assert_uint_eq(zp_versions_bytes(&t->versions), 2 * 8 * sizeof(float));
    zt_shard_free(z);
}
END_TEST

/* A sparse store of dim 2 (sgd, lr 1) whose row `id` is pushed gradient
 * -(k + 1) at its k-th update, noted first: after k updates it holds
 * k(k + 1)/2 in both values. */
static void push_noted(zp_sparse *st, zp_rowvers *v, uint64_t id, float k)
{
    float g[2] = {-(k + 1), -(k + 1)};
    zp_rowvers_note(v, st, &id, 1);
    zp_sparse_push(st, &id, 1, g, 1.0f, 0, NULL, NULL, NULL);
}

static float tri(uint32_t k)
{
    return (float)(k * (k + 1) / 2);
}

/* Serve row `id` (read now) tau behind; its version served in *ver. */
static float served(zp_sparse *st, const zp_rowvers *v, uint64_t id, uint32_t tau, uint32_t *ver)
{
    float row[2];
    zp_sparse_pull(st, &id, 1, 0, row, ver);
    zp_rowvers_serve(v, st, &id, 1, tau, row, ver);
    ck_assert_float_eq(row[0], row[1]);
    return row[0];
}

/* The kept versions of sparse rows: a row is served as it was tau of its
 * own updates ago, the oldest kept when that is gone; a row evicted and
 * created again is served its new versions only; the largest history is
 * refused with the numbers. */
START_TEST(test_rowvers_ring)
{
    zp_sparse_opts o = {
        .dim = 2, .optimizer = "sgd", .lr = 1, .init = ZP_INIT_ZEROS, .capacity_rows = 1};
    zp_sparse *st;
    char err[300];
    ck_assert_int_eq(zp_sparse_new(&st, &o, err, sizeof(err)), 0);
    zp_rowvers v;
    ck_assert_int_eq(zp_rowvers_init(&v, 3, 2, err, sizeof(err)), 0);
    for (uint32_t k = 0; k < 6; k++)
        push_noted(st, &v, 7, (float)k);
    uint32_t ver;
    ck_assert_float_eq(served(st, &v, 7, 0, &ver), tri(6));
    ck_assert_uint_eq(ver, 6);
    ck_assert_float_eq(served(st, &v, 7, 2, &ver), tri(4));
    ck_assert_uint_eq(ver, 4);
    ck_assert_float_eq(served(st, &v, 7, 3, &ver), tri(3));
    ck_assert_float_eq(served(st, &v, 7, 5, &ver), tri(3)); /* 1 is gone: the oldest, 3 */
    ck_assert_uint_eq(ver, 3);
    /* memory as documented: one record of keep x (dim + 1) floats after a
     * 24-byte header (rounded up to 8 bytes) per row pushed, and the index */
    zp_sparse_counters hc;
    zp_sparse_get_counters(v.hist, &hc);
    ck_assert_uint_eq(hc.rows, 1);
    ck_assert_uint_eq(hc.bytes_per_row, 24 + 3 * 3 * sizeof(float) + 4);
    ck_assert_uint_eq(zp_rowvers_bytes(&v), hc.bytes);
    /* capacity 1: row 9 evicts row 7, which then comes back at version 0 */
    push_noted(st, &v, 9, 0);
    push_noted(st, &v, 7, 0);
    push_noted(st, &v, 9, 1); /* 7 out again */
    for (uint32_t k = 0; k < 2; k++)
        push_noted(st, &v, 7, (float)k);
    ck_assert_float_eq(served(st, &v, 7, 1, &ver), tri(1));
    ck_assert_uint_eq(ver, 1);
    ck_assert_float_eq(served(st, &v, 7, 3, &ver), 0.0f); /* its new version 0 */
    ck_assert_uint_eq(ver, 0);
    zp_rowvers_fini(&v);
    zp_sparse_destroy(&st);
    ck_assert(zp_rowvers_fits(455, 8));
    ck_assert(!zp_rowvers_fits(456, 8));
    ck_assert_int_eq(zp_rowvers_init(&v, 100, 64, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "100 x (dim + 1) = 6500 floats"));
    zp_rowvers_fini(&v); /* holds nothing: a no-op */
}
END_TEST

/* A shard in process, async, 2 workers joined, fixed tau, and a sparse
 * table "emb" of dim 3 (its id in *id). */
static zt_shard *sparse_shard(uint32_t tau, uint32_t *id)
{
    zp_config *cfg = zt_config("async", 2, 1);
    cfg->inject = ZP_INJECT_FIXED;
    cfg->inject_tau = tau;
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    zt_hello(z, 1);
    *id = zt_declare_sparse(z, "emb", 3);
    return z;
}

/* rank finished step k: its CLOCK; returns the replies. */
static int clock_done(zt_shard *z, uint32_t rank, int64_t k)
{
    Zeps__Header c = zt_header(z, ZEPS__OP__CLOCK, rank);
    c.clock = k;
    return zt_send(z, &c, NULL, 0);
}

/* rank's step k on sparse "emb" of rows 4 and 9, served at once: pull,
 * push ones (computed at version 0), CLOCK. */
static void sparse_step(zt_shard *z, uint32_t rank, uint32_t id, int64_t k)
{
    static const uint64_t ids[2] = {4, 9};
    static const float g[6] = {1, 1, 1, 1, 1, 1};
    static const uint32_t zero[2] = {0, 0};
    ck_assert_int_eq(zt_spull(z, rank, id, ids, 2, k), 1);
    ck_assert_int_eq(zt_spush(z, rank, id, ids, 2, g, 6, zero), 1);
    ck_assert_int_eq(clock_done(z, rank, k), 1);
}

/* Check a sparse pull reply of 2 rows of dim 3 (sgd lr 1, zeros, every
 * push all ones): both rows served at version `want`. */
static void rows_at(const zt_reply *rep, uint32_t want)
{
    ck_assert_ptr_nonnull(rep);
    const float *rows = rep->data;
    const uint32_t *rv = (const uint32_t *)(rows + 6);
    for (int i = 0; i < 2; i++) {
        ck_assert_uint_eq(rv[i], want);
        ck_assert_float_eq(rows[i * 3 + 2], -(float)want);
    }
}

/* A sparse table on a shard in process, async, fixed tau 2, turns by
 * round: in each round rank 1's pull waits for rank 0's push, every row is
 * served the version 2 behind its own (the start while there is none), and
 * every row of every push after the first two is recorded tau 2. */
START_TEST(test_shard_sparse_turns)
{
    uint32_t id;
    zt_shard *z = sparse_shard(2, &id);
    zp_table *t = z->s->tables[id];
    uint64_t ids[2] = {4, 9};
    float g[6] = {1, 1, 1, 1, 1, 1};
    for (int j = 0; j < 6; j++) {
        uint32_t v = 2 * (uint32_t)j;                       /* the rows' version at rank 0's pull */
        ck_assert_int_eq(zt_spull(z, 1, id, ids, 2, j), 0); /* rank 0's turn: parked */
        ck_assert_int_eq(zt_spull(z, 0, id, ids, 2, j), 1);
        rows_at(last_pull(z), v >= 2 ? v - 2 : 0);
        uint32_t sent[2];
        memcpy(sent, (const float *)last_pull(z)->data + 6, sizeof(sent));
        ck_assert_int_eq(zt_spush(z, 0, id, ids, 2, g, 6, sent), 2); /* ack, rank 1 served */
        rows_at(last_pull(z), v + 1 >= 2 ? v - 1 : 0);
        memcpy(sent, (const float *)last_pull(z)->data + 6, sizeof(sent));
        ck_assert_int_eq(zt_spush(z, 1, id, ids, 2, g, 6, sent), 1);
        ck_assert_int_eq(clock_done(z, 0, j), 1);
        ck_assert_int_eq(clock_done(z, 1, j), 1);
    }
    zp_hist *h = &t->stats.tau;
    ck_assert_uint_eq(h->n, 24);
    ck_assert_uint_eq(h->counts[0], 2);
    ck_assert_uint_eq(h->counts[1], 2);
    ck_assert_uint_eq(h->counts[2], 20);
    zt_shard_free(z);
}
END_TEST

/* Sparse turns pass a rank that finished its step without a push here
 * (its ids were all on other shards): rank 0's pull for step 1 waits for
 * rank 1's turn of round 0 until rank 1's CLOCK says that step is over. */
START_TEST(test_shard_sparse_turn_skips)
{
    uint32_t id;
    zt_shard *z = sparse_shard(1, &id);
    uint64_t ids[2] = {4, 9};
    sparse_step(z, 0, id, 0);
    ck_assert_int_eq(zt_spull(z, 0, id, ids, 2, 1), 0); /* round 0 is rank 1's still */
    ck_assert_int_eq(clock_done(z, 1, 0), 2);           /* the ack, and rank 0's pull */
    rows_at(last_pull(z), 0);                           /* version 1, served 1 behind */
    ck_assert_uint_eq(z->s->tables[id]->turn_round, 1);
    zt_shard_free(z);
}
END_TEST

/* Sparse turns and a worker out of step: rank 1, declared lost while
 * rank 0 went on for three rounds, is served at once when it comes back
 * (it holds no turn until it catches up) and does not hold rank 0 up; a
 * pull for a step whose CLOCKs this shard never saw (a restarted shard)
 * is served without turns instead of waiting for them. */
START_TEST(test_shard_sparse_out_of_step)
{
    uint32_t id;
    zt_shard *z = sparse_shard(1, &id);
    uint64_t ids[2] = {4, 9};
    z->s->workers.w[1].lost = true;
    for (int k = 0; k < 3; k++)
        sparse_step(z, 0, id, k);
    z->s->workers.w[1].lost = false;                    /* back, at clock 0 */
    ck_assert_int_eq(zt_spull(z, 1, id, ids, 2, 0), 1); /* served: out of step */
    ck_assert_int_eq(zt_spull(z, 0, id, ids, 2, 3), 1); /* not held by rank 1 */
    zt_shard_free(z);
    /* rank 1's pull for step 5, the first this shard hears of its steps */
    z = sparse_shard(1, &id);
    ck_assert_int_eq(zt_spull(z, 1, id, ids, 2, 5), 1); /* not held for rank 0's turn */
    ck_assert_int_eq(zt_spull(z, 1, id, ids, 2, 0), 0); /* in step: waits for it */
    zt_shard_free(z);
}
END_TEST

/* A sparse table whose rows cannot keep the window is refused at DECLARE,
 * saying why. */
START_TEST(test_shard_sparse_too_wide)
{
    zp_config *cfg = zt_config("async", 1, 1);
    cfg->inject = ZP_INJECT_FIXED;
    cfg->inject_tau = 100;
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    ck_assert_int_eq(zt_send_declare_sparse(z, "wide", 64), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "cluster.inject"));
    ck_assert_uint_eq(z->s->ntables, 0);
    zt_shard_free(z);
}
END_TEST

/* FINISH: rank 0 reached the target. The pull of rank 1 parked for its
 * turn is answered EFINISHED at once, so are its later pulls, while rank
 * 0's own are still served (its final evaluation); a second FINISH changes
 * nothing; a tool may not send it, and it carries no flag bits. */
START_TEST(test_shard_finish)
{
    zp_config *cfg = zt_config("async", 3, 1);
    cfg->inject = ZP_INJECT_FIXED;
    cfg->inject_tau = 1;
    cfg->target_rel_distance = 1e-4;
    zt_shard *z = zt_shard_start(cfg, 0);
    for (uint32_t r = 0; r < 3; r++)
        zt_hello(z, r);
    uint32_t id = zt_declare(z, 0, "w", 4, 0.5);
    float g[4] = {1, 1, 1, 1};
    ck_assert_int_eq(zt_pull(z, 1, id, 0, 4, 0), 0); /* rank 0's turn: parked */
    ck_assert_int_eq(zt_pull(z, 0, id, 0, 4, 0), 1);
    ck_assert_int_eq(zt_push(z, 0, id, 0, g, 4, 0, 0), 2); /* ack, and rank 1 served */
    ck_assert_int_eq(zt_push(z, 1, id, 0, g, 4, 0, 0), 1);
    ck_assert_int_eq(zt_pull(z, 2, id, 0, 4, 0), 1); /* rank 2's turn */
    ck_assert_int_eq(zt_pull(z, 1, id, 0, 4, 1), 0); /* parked: rank 2 holds the turn */
    Zeps__Header f = zt_header(z, ZEPS__OP__FINISH, 0);
    f.clock = 0;
    ck_assert_int_eq(zt_send(z, &f, NULL, 0), 2); /* the parked pull, and the ack */
    ck_assert_int_eq(z->r[z->n - 2].h->op, ZEPS__OP__FINISH);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__ERROR);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EFINISHED);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "worker 0 reached the job's target"));
    ck_assert_int_eq(z->s->workers.w[1].parked, 0);
    /* rank 2, served before, still pushes (applied), then its pull is over */
    ck_assert_int_eq(zt_push(z, 2, id, 0, g, 4, 0, 2), 1);
    ck_assert_uint_eq(z->s->tables[id]->version, 3);
    ck_assert_int_eq(zt_pull(z, 2, id, 0, 4, 1), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EFINISHED);
    /* a FINISH from rank 2 does not take the finisher's place */
    f = zt_header(z, ZEPS__OP__FINISH, 2);
    ck_assert_int_eq(zt_send(z, &f, NULL, 0), 1);
    ck_assert_uint_eq(z->s->finished.by, 0);
    ck_assert_int_eq(zt_pull(z, 0, id, 0, 4, 1), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PULL);
    f = zt_header(z, ZEPS__OP__FINISH, 0xffffffffu);
    ck_assert_int_eq(zt_send(z, &f, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANK);
    f = zt_header(z, ZEPS__OP__FINISH, 0);
    f.flags = 0x1;
    ck_assert_int_eq(zt_send(z, &f, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EPROTO);
    zt_shard_free(z);
}
END_TEST

/* A job whose cluster file sets no target: FINISH is refused (EINVAL,
 * saying why) and every worker's pulls are served as before. */
START_TEST(test_shard_finish_needs_target)
{
    zp_config *cfg = zt_config("async", 2, 1);
    zt_shard *z = zt_shard_start(cfg, 0);
    for (uint32_t r = 0; r < 2; r++)
        zt_hello(z, r);
    uint32_t id = zt_declare(z, 0, "w", 4, 0.5);
    Zeps__Header f = zt_header(z, ZEPS__OP__FINISH, 0);
    ck_assert_int_eq(zt_send(z, &f, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "sets no training.target_accuracy"));
    ck_assert(!z->s->finished.on);
    ck_assert_int_eq(zt_pull(z, 1, id, 0, 4, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PULL);
    zt_shard_free(z);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("inject");
    TCase *tc = tcase_create("schedules");
    tcase_set_timeout(tc, 60); /* 60,000 draws a schedule: seconds on a loaded machine */
    tcase_add_test(tc, test_fixed_and_straggler);
    tcase_add_test(tc, test_uniform);
    tcase_add_test(tc, test_geometric);
    tcase_add_test(tc, test_replay);
    tcase_add_test(tc, test_init_clears);
    tcase_add_test(tc, test_shard_frees_replay);
    tcase_add_test(tc, test_versions_ring);
    tcase_add_test(tc, test_shard_fixed_turns);
    tcase_add_test(tc, test_rowvers_ring);
    tcase_add_test(tc, test_shard_sparse_turns);
    tcase_add_test(tc, test_shard_sparse_turn_skips);
    tcase_add_test(tc, test_shard_sparse_out_of_step);
    tcase_add_test(tc, test_shard_sparse_too_wide);
    tcase_add_test(tc, test_shard_finish);
    tcase_add_test(tc, test_shard_finish_needs_target);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
