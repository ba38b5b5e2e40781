/*
 * test_sparse_server.c - sparse tables through real zeps-server processes.
 *
 * Rows start the same on any shard count; a batch with repeated ids applies
 * the summed gradient once per row; a freed batch's arrays serve the next
 * batch with nothing of the old one showing; TTL eviction keeps a drifting stream's
 * rows bounded where the table otherwise grows; bad ids, dims and values get
 * ERROR replies that say what is wrong, and change nothing.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "rawreq.h"
#include "rng.h"
#include "sparse_hash.h"
#include "wire.h"
#include "zeps.h"

#define DIM 8

static zeps_sparse_spec emb_spec(const char *optimizer, double lr)
{
    zeps_sparse_spec s = {.name = "emb", .dim = DIM, .optimizer = optimizer, .lr = lr,
                          .init = "uniform", .init_scale = 0.1, .seed = 7};
    return s;
}

/* The ids every case uses: edge values and a seeded spread. */
static size_t test_ids(uint64_t *ids, size_t n)
{
    static const uint64_t edge[] = {0, 1, 42, 1ull << 63, UINT64_MAX, 0xdeadbeefull};
    size_t k = 0;
    for (; k < sizeof(edge) / sizeof(edge[0]) && k < n; k++)
        ids[k] = edge[k];
    zp_rng r;
    zp_rng_seed(&r, 3, 0, 0);
    for (; k < n; k++)
        ids[k] = zp_rng_next(&r);
    return n;
}

START_TEST(test_same_row_any_shard_count)
{
    enum { N = 500 };
    uint64_t ids[N];
    test_ids(ids, N);
    static float rows[3][N * DIM];
    for (int S = 1; S <= 3; S++) {
        zt_cluster cl;
        ck_assert_int_eq(zt_cluster_start(&cl, S, 1, "async", NULL, NULL), 0);
        zeps_client *c = zt_client(&cl, 0);
        ck_assert_ptr_nonnull(c);
        uint32_t t;
        zeps_sparse_spec spec = emb_spec("sgd", 0.1);
        ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
        ck_assert_uint_eq(zeps_table_dim(c, t), DIM);
        ck_assert_int_eq(zeps_spull(c, t, ids, N, rows[S - 1], 0), 0);
        zeps_client_destroy(&c);
        ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    }
    ck_assert_msg(memcmp(rows[0], rows[1], sizeof(rows[0])) == 0, "S=1 and S=2 rows differ");
    ck_assert_msg(memcmp(rows[0], rows[2], sizeof(rows[0])) == 0, "S=1 and S=3 rows differ");
    /* and they are real initial values: in range, not all equal */
    int distinct = 0;
    for (int i = 0; i < N * DIM; i++) {
        ck_assert(fabsf(rows[0][i]) <= 0.1f);
        distinct += rows[0][i] != rows[0][0];
    }
    ck_assert_int_gt(distinct, N * DIM / 2);
}
END_TEST

/* Adagrad from a zero accumulator: one update with G gives
 * w0 - lr * G / (sqrt(G^2) + eps); two updates g1, g2 give something else. */
START_TEST(test_repeated_ids_summed_once)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_sparse_spec spec = emb_spec("adagrad", 0.5);
    spec.init = "zeros";
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    static const uint64_t ids[] = {5, 9, 5, 5, 17, 9, 1ull << 40};
    enum { N = sizeof(ids) / sizeof(ids[0]) };
    float g[N * DIM];
    zp_rng r;
    zp_rng_seed(&r, 11, 0, 0);
    for (int i = 0; i < N * DIM; i++)
        g[i] = (float)(zp_rng_uniform(&r) - 0.5);
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_uint_eq(zeps_sbatch_size(b), N);
    ck_assert_uint_eq(zeps_sbatch_unique(b), 4);
    float rows[N * DIM];
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), 0);
    for (int i = 0; i < N * DIM; i++)
        ck_assert(rows[i] == 0.0f);
    ck_assert_int_eq(zeps_sbatch_push(b, g, 0), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 1), 0);
    for (int i = 0; i < N; i++) {
        for (int d = 0; d < DIM; d++) {
            double G = 0;
            for (int j = 0; j < N; j++)
                if (ids[j] == ids[i])
                    G += g[j * DIM + d];
            double want = -0.5 * G / (sqrt(G * G) + 1e-8);
            ck_assert_msg(fabs(rows[i * DIM + d] - want) < 1e-6,
                          "id %llu dim %d: %.9g, reference %.9g", (unsigned long long)ids[i], d,
                          rows[i * DIM + d], want);
        }
    }
    /* every row updated once: 4 keys pushed over the two shards */
    uint64_t keys = 0, rows_held = 0;
    for (int k = 0; k < 2; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        keys += st->tables[0]->keys_pushed;
        rows_held += st->tables[0]->rows;
        ck_assert_uint_eq(st->tables[0]->kind, 1);
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    ck_assert_uint_eq(keys, 4);
    ck_assert_uint_eq(rows_held, 4);
    zeps_sbatch_free(&b);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Pushes applied with row versions on the cluster's shards (tau counted). */
static uint64_t tau_count(zeps_client *c, int nshards)
{
    uint64_t n = 0;
    for (int k = 0; k < nshards; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        n += st->tables[0]->tau ? st->tables[0]->tau->n : 0;
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    return n;
}

/* A freed batch's arrays serve the client's next batch: nothing of the old
 * batch shows (its pull does not make the next push send row versions), a
 * batch in order (one shard, no repeats) and one with repeats scatter and
 * sum the same rows, and a batch may be freed after its client. */
static void batch_reuse(int nshards)
{
    enum { N = 1000 };
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, nshards, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_sparse_spec spec = emb_spec("sgd", 1.0);
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    static uint64_t ids[N + 1];
    static float rows[(N + 1) * DIM], again[(N + 1) * DIM];
    test_ids(ids, N);
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), 0);
    zeps_sbatch_free(&b);
    /* the same ids and a repeat of ids[5]: a batch not in order */
    ids[N] = ids[5];
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N + 1, &b), 0);
    ck_assert_uint_eq(zeps_sbatch_unique(b), N);
    ck_assert_int_eq(zeps_sbatch_pull(b, again, 0), 0);
    ck_assert_int_eq(memcmp(again, rows, sizeof(float) * N * DIM), 0);
    ck_assert_int_eq(memcmp(again + N * DIM, rows + 5 * DIM, sizeof(float) * DIM), 0);
    zeps_sbatch_free(&b);
    /* pushed without a pull of its own: no row versions go with it */
    const uint64_t some[3] = {ids[3], ids[700], ids[3]};
    float g[3 * DIM];
    for (int i = 0; i < 3 * DIM; i++)
        g[i] = 0.25f * (float)(i + 1);
    ck_assert_int_eq(zeps_sbatch_new(c, t, some, 3, &b), 0);
    ck_assert_int_eq(zeps_sbatch_push(b, g, 0), 0);
    ck_assert_uint_eq(tau_count(c, nshards), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, again, 1), 0);
    for (int d = 0; d < DIM; d++) {
        ck_assert(again[d] == rows[3 * DIM + d] - (g[d] + g[2 * DIM + d]));
        ck_assert(again[DIM + d] == rows[700 * DIM + d] - g[DIM + d]);
        ck_assert(again[2 * DIM + d] == again[d]);
    }
    zeps_sbatch_free(&b);
    /* in order again, after the repeats: every row as the last pull saw it */
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, again, 2), 0);
    for (int i = 0; i < N; i++)
        if (i != 3 && i != 700)
            ck_assert_int_eq(memcmp(again + i * DIM, rows + i * DIM, sizeof(float) * DIM), 0);
    zeps_client_destroy(&c);
    zeps_sbatch_free(&b); /* after its client: its arrays are freed, nothing else read */
    ck_assert_ptr_null(b);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_batch_reuse)
{
    batch_reuse(1);
    batch_reuse(2);
}
END_TEST

/* Top-k with error feedback on sparse rows: push G once, then zeros; the
 * residual kept per row drains into later pushes until the rows hold exactly
 * -G (sgd, lr 1, zero init). Without error feedback only the first top-k
 * ever arrives. */
static void topk_rows(int ef, const uint64_t *ids, int n, const float *G, float *rows)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_sparse_spec spec = emb_spec("sgd", 1.0);
    spec.init = "zeros";
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    zeps_codec_opts co = {.codec = "topk", .fraction = 0.25, .error_feedback = ef};
    ck_assert_int_eq(zeps_set_push_codec(c, t, &co), 0);
    static float zeros[64 * DIM];
    ck_assert_int_eq(zeps_spush(c, t, ids, (size_t)n, G, 0), 0);
    for (int k = 1; k <= 8; k++)
        ck_assert_int_eq(zeps_spush(c, t, ids, (size_t)n, zeros, k), 0);
    ck_assert_int_eq(zeps_spull(c, t, ids, (size_t)n, rows, 9), 0);
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_msg(cs.bytes_out < cs.bytes_out_raw, "compressed %llu >= raw %llu bytes",
                  (unsigned long long)cs.bytes_out, (unsigned long long)cs.bytes_out_raw);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_compressed_push_error_feedback)
{
    enum { N = 64 };
    uint64_t ids[N];
    test_ids(ids, N);
    static float G[N * DIM], with[N * DIM], without[N * DIM];
    zp_rng r;
    zp_rng_seed(&r, 5, 0, 0);
    for (int i = 0; i < N * DIM; i++)
        G[i] = (float)(zp_rng_uniform(&r) - 0.5);
    topk_rows(1, ids, N, G, with);
    topk_rows(0, ids, N, G, without);
    int missing = 0;
    for (int i = 0; i < N * DIM; i++) {
        ck_assert_msg(fabsf(with[i] + G[i]) < 1e-6f, "value %d: %g, expected %g", i, with[i],
                      -G[i]);
        missing += without[i] == 0.0f;
    }
    /* a quarter arrives without error feedback */
    ck_assert_int_ge(missing, N * DIM / 2);
}
END_TEST

/* Weighted mode on rows: worker 0 reads id X at version 0, worker 1 pushes
 * X three times, then worker 0's push has tau 3 on X and tau 0 on Y: X gets
 * 1/(1+3) of it, Y all of it (inverse weighting, sgd lr 1, zero init). With
 * max_staleness 2, X's row is dropped instead, and the push says so. */
static void weighted_rows(const char *weighting, float *x, float *y, uint64_t *dropped)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "weighted", weighting, NULL), 0);
    zeps_client *a = zt_client(&cl, 0), *b = zt_client(&cl, 1);
    uint32_t ta, tb;
    zeps_sparse_spec spec = emb_spec("sgd", 1.0);
    spec.init = "zeros";
    ck_assert_int_eq(zeps_declare_sparse(a, &spec, &ta), 0);
    ck_assert_int_eq(zeps_declare_sparse(b, &spec, &tb), 0);
    uint64_t ids[2] = {77, 78};
    float rows[2 * DIM], ga[2 * DIM], gb[DIM];
    for (int i = 0; i < DIM; i++) {
        ga[i] = ga[DIM + i] = 1.0f;
        gb[i] = 0.5f;
    }
    zeps_sbatch *bat;
    ck_assert_int_eq(zeps_sbatch_new(a, ta, ids, 2, &bat), 0);
    ck_assert_int_eq(zeps_sbatch_pull(bat, rows, 0), 0);
    for (int k = 0; k < 3; k++) {
        zeps_sbatch *one;
        ck_assert_int_eq(zeps_sbatch_new(b, tb, ids, 1, &one), 0);
        ck_assert_int_eq(zeps_sbatch_pull(one, rows, k), 0);
        ck_assert_int_eq(zeps_sbatch_push(one, gb, k), 0);
        zeps_sbatch_free(&one);
    }
    ck_assert_int_eq(zeps_sbatch_push(bat, ga, 0), 0);
    ck_assert_int_eq(zeps_spull(a, ta, ids, 2, rows, 1), 0);
    *x = rows[0];
    *y = rows[DIM];
    zeps_client_stats st;
    zeps_client_get_stats(a, &st);
    *dropped = st.dropped;
    zeps_sbatch_free(&bat);
    zeps_client_destroy(&a);
    zeps_client_destroy(&b);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_weighted_rows)
{
    float x, y;
    uint64_t dropped;
    weighted_rows("  weighting = { function = \"inverse\"; };\n", &x, &y, &dropped);
    ck_assert_msg(fabsf(x - (-1.5f - 0.25f)) < 1e-6f, "stale row: %g, expected -1.75", x);
    ck_assert_msg(y == -1.0f, "fresh row: %g, expected -1", y);
    ck_assert_uint_eq(dropped, 0);
    weighted_rows("  weighting = { function = \"inverse\"; max_staleness = 2; };\n", &x, &y,
                  &dropped);
    ck_assert_msg(x == -1.5f, "a row past max_staleness was applied: %g", x);
    ck_assert_msg(y == -1.0f, "fresh row: %g, expected -1", y);
    ck_assert_uint_eq(dropped, 1);
}
END_TEST

/* rows held summed over the shards, and evictions by TTL */
static void table_rows(zeps_client *c, int S, uint64_t *rows, uint64_t *evicted)
{
    *rows = *evicted = 0;
    for (int k = 0; k < S; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        *rows += st->tables[0]->rows;
        *evicted += st->tables[0]->evicted_ttl;
        zeps__shard_stats__free_unpacked(st, NULL);
    }
}

/* Each clock touches a window of 200 ids that slides by 100: with
 * ttl_clocks = 2 a row lives at most a few clocks after its last touch. */
static void drift(uint64_t ttl, uint64_t *max_rows, uint64_t *final_rows, uint64_t *evicted)
{
    enum { W = 200, STEP = 100, CLOCKS = 30 };
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_sparse_spec spec = emb_spec("sgd", 0.1);
    spec.ttl_clocks = ttl;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    uint64_t ids[W];
    static float g[W * DIM];
    for (int i = 0; i < W * DIM; i++)
        g[i] = 0.01f;
    *max_rows = 0;
    for (int64_t clk = 0; clk < CLOCKS; clk++) {
        for (int i = 0; i < W; i++)
            ids[i] = (uint64_t)(clk * STEP + i) * 7919u;
        ck_assert_int_eq(zeps_spush(c, t, ids, W, g, clk), 0);
        ck_assert_int_eq(zeps_clock(c, clk), 0);
        uint64_t r, e;
        table_rows(c, 2, &r, &e);
        if (r > *max_rows)
            *max_rows = r;
    }
    table_rows(c, 2, final_rows, evicted);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_ttl_bounds_rows)
{
    uint64_t max_on, final_on, ev_on, max_off, final_off, ev_off;
    drift(2, &max_on, &final_on, &ev_on);
    drift(0, &max_off, &final_off, &ev_off);
    /* without TTL every id ever touched stays: 29 * 100 + 200 */
    ck_assert_uint_eq(final_off, 29 * 100 + 200);
    ck_assert_uint_eq(ev_off, 0);
    /* with it, rows untouched for 2 clocks go; the scan may lag a few clocks */
    ck_assert_msg(max_on <= 200 + 100 * 6, "rows grew to %llu with ttl_clocks = 2",
                  (unsigned long long)max_on);
    ck_assert_uint_eq(final_on + ev_on, final_off);
}
END_TEST

/* --- bad input on a raw socket --- */

static zt_cluster bcl;
static zeps_client *good;
static uint32_t tid;
static void *zctx, *raw;
static uint64_t raw_seq;

static void bad_setup(void)
{
    ck_assert_int_eq(zt_cluster_start(&bcl, 2, 2, "async", "  max_message_mb = 1;", NULL), 0);
    good = zt_client(&bcl, 0);
    ck_assert_ptr_nonnull(good);
    zeps_sparse_spec spec = emb_spec("sgd", 0.5);
    spec.init = "constant";
    spec.init_scale = 1.0;
    ck_assert_int_eq(zeps_declare_sparse(good, &spec, &tid), 0);
    zctx = zmq_ctx_new();
    raw = zt_raw_socket(zctx, &bcl, 0);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__HELLO;
    h.rank = 1;
    h.incarnation = 0x5eed;
    Zeps__Header *rep = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_int_eq(rep->op, ZEPS__OP__HELLO);
    zeps__header__free_unpacked(rep, NULL);
}

static void bad_teardown(void)
{
    zmq_close(raw);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&good);
    ck_assert_int_eq(zt_cluster_stop(&bcl), 0);
}

static void req(Zeps__Header *h, Zeps__Op op, uint64_t count)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = op;
    h->req_id = 5;
    h->rank = 1;
    h->incarnation = 0x5eed;
    h->seq = ++raw_seq;
    h->table = 0;
    h->count = count;
}

/* Ids of shard k. */
static void ids_of_shard(int k, uint64_t *ids, int n)
{
    for (uint64_t x = 1; n > 0; x++)
        if (zp_sparse_shard_of(x, 2) == k)
            ids[--n] = x;
}

/* The good client still gets constant 1.0 rows for the ids the bad
 * requests named. */
static void still_serving(const uint64_t *ids, int n)
{
    float rows[16 * DIM];
    ck_assert_int_eq(zeps_spull(good, tid, ids, (size_t)n, rows, 0), 0);
    for (int i = 0; i < n * DIM; i++)
        ck_assert_msg(rows[i] == 1.0f, "row value %g changed by a refused request", rows[i]);
}

/* Rows that would not fit max_message_mb (1 MiB here), though the ids do,
 * are refused by the shard, and by the library before sending. */
static void too_big_refused(void)
{
    Zeps__Header h;
    /* a 4-byte top-k payload [k = 0] for 65,536 rows of dim 8 (2 MiB
     * decoded), and a pull of 40,000 rows (1.4 MiB of reply) */
    enum { BIG = 65536 };
    uint64_t *big = malloc((BIG * 8 + 4));
    ids_of_shard(0, big, BIG);
    memset((unsigned char *)big + BIG * 8, 0, 4);
    req(&h, ZEPS__OP__PUSH, BIG);
    h.codec = 5;
    zt_raw_expect_error(zt_raw_req(raw, &h, big, BIG * 8 + 4), ZEPS_ETOOBIG, "max_message_mb");
    req(&h, ZEPS__OP__PULL, 40000);
    zt_raw_expect_error(zt_raw_req(raw, &h, big, 40000 * 8), ZEPS_ETOOBIG, "max_message_mb");
    /* and the library says so before sending */
    float *rows = malloc((size_t)40000 * DIM * sizeof(float));
    ck_assert_int_eq(zeps_spull(good, tid, big, 40000, rows, 0), ZEPS_ETOOBIG);
    ck_assert_msg(strstr(zeps_last_error(good), "max_message_mb"), "%s", zeps_last_error(good));
    free(rows);
    free(big);
}

/* Lead columns travel in DECLARE: a fresh row has the lead init in its
 * first columns and the table's after them; a re-declaration with another
 * lead step, a bad lead_init or more lead columns than dim is refused,
 * naming the field. */
static void lead_declarations(void)
{
    uint32_t t, t2;
    zeps_sparse_spec s = emb_spec("adagrad", 0.01), bad[5];
    s.name = "lead", s.dim = 4, s.init = "constant", s.init_scale = 2.0;
    s.lead_cols = 1, s.lead_lr = 0.5, s.lead_init = "constant", s.lead_init_scale = -1.0;
    ck_assert_msg(zeps_declare_sparse(good, &s, &t) == 0, "%s", zeps_last_error(good));
    uint64_t id[1];
    ids_of_shard(0, id, 1);
    float row[4];
    ck_assert_int_eq(zeps_spull(good, t, id, 1, row, 0), 0);
    ck_assert(row[0] == -1.0f && row[1] == 2.0f && row[2] == 2.0f && row[3] == 2.0f);
    /* DECLARE's reply counts the lead columns kept (libzeps checks it) */
    Zeps__TableSpec ts;
    zeps__table_spec__init(&ts);
    ts.name = "lead", ts.kind = 1, ts.dim = 4, ts.optimizer = "adagrad", ts.lr = 0.01;
    ts.init = "constant", ts.init_scale = 2.0, ts.seed = 7, ts.lead_cols = 1, ts.lead_lr = 0.5;
    ts.lead_init = "constant", ts.lead_init_scale = -1.0;
    Zeps__Header h;
    req(&h, ZEPS__OP__DECLARE, 0);
    h.spec = &ts;
    Zeps__Header *rep = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_uint_eq(rep->count, 1);
    zeps__header__free_unpacked(rep, NULL);
    for (int i = 0; i < 5; i++)
        bad[i] = s;
    bad[0].lead_lr = 0.25, bad[1].lead_init = NULL, bad[2].lead_cols = 2;
    bad[3].name = "lead2", bad[3].lead_init = "xavier";
    bad[4].name = "lead2", bad[4].lead_cols = 5;
    const int code[5] = {ZEPS_ECONFLICT, ZEPS_ECONFLICT, ZEPS_ECONFLICT, ZEPS_EINVAL, ZEPS_EINVAL};
    const char *why[5] = {"lead_lr", "lead_init 'constant', not 'zeros'", "lead_cols", "lead_init",
                          "lead_cols = 5 must be at most dim = 4"};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(zeps_declare_sparse(good, &bad[i], &t2), code[i]);
        ck_assert_msg(strstr(zeps_last_error(good), why[i]), "%s", zeps_last_error(good));
    }
}

/* Declarations with a bad dim or an unknown optimizer, a conflicting
 * re-declaration, and a dense call on a sparse table are all refused. */
static void bad_declarations(void)
{
    uint32_t t2;
    zeps_sparse_spec s = emb_spec("sgd", 0.1);
    s.name = "bad";
    s.dim = 0;
    ck_assert_int_ne(zeps_declare_sparse(good, &s, &t2), 0);
    ck_assert_msg(strstr(zeps_last_error(good), "dim"), "%s", zeps_last_error(good));
    s.dim = 4;
    s.optimizer = "rmsprop";
    ck_assert_int_ne(zeps_declare_sparse(good, &s, &t2), 0);
    ck_assert_msg(strstr(zeps_last_error(good), "rmsprop"), "%s", zeps_last_error(good));
    zeps_sparse_spec again = emb_spec("sgd", 0.5);
    again.init = "constant";
    again.init_scale = 1.0;
    again.dim = 16;
    ck_assert_int_eq(zeps_declare_sparse(good, &again, &t2), ZEPS_ECONFLICT);
    ck_assert_msg(strstr(zeps_last_error(good), "dim"), "%s", zeps_last_error(good));
    /* a dense call on a sparse table is refused by the library */
    float v[4];
    ck_assert_int_ne(zeps_pull(good, tid, v, 0, 4, 0), 0);
    lead_declarations();
}

START_TEST(test_bad_requests)
{
    uint64_t mine[4], theirs[1];
    ids_of_shard(0, mine, 4);
    ids_of_shard(1, theirs, 1);
    unsigned char buf[4 * (8 + 4 * DIM + 4)];
    float *g;
    Zeps__Header h;

    /* a push whose rows have the wrong dim */
    req(&h, ZEPS__OP__PUSH, 4);
    memcpy(buf, mine, sizeof(mine));
    zt_raw_expect_error(zt_raw_req(raw, &h, buf, 4 * 8 + 4 * 4 * (DIM - 1)), ZEPS_ESIZE, "dim 8");
    /* an id of the other shard: EMOVED */
    req(&h, ZEPS__OP__PULL, 1);
    zt_raw_expect_error(zt_raw_req(raw, &h, theirs, 8), ZEPS_EMOVED, "shard 1 owns at");
    /* a repeated id in a push */
    uint64_t rep_ids[4] = {mine[0], mine[1], mine[0], mine[2]};
    memcpy(buf, rep_ids, sizeof(rep_ids));
    g = (float *)(buf + 32);
    for (int i = 0; i < 4 * DIM; i++)
        g[i] = 1.0f;
    req(&h, ZEPS__OP__PUSH, 4);
    zt_raw_expect_error(zt_raw_req(raw, &h, buf, 32 + 4 * 4 * DIM), ZEPS_EINVAL, "twice");
    /* NaN in a gradient */
    memcpy(buf, mine, sizeof(mine));
    g[13] = NAN;
    req(&h, ZEPS__OP__PUSH, 4);
    zt_raw_expect_error(zt_raw_req(raw, &h, buf, 32 + 4 * 4 * DIM), ZEPS_ENONFINITE, "NaN");
    g[13] = 1.0f;
    /* no ids, or no frame */
    req(&h, ZEPS__OP__PULL, 0);
    zt_raw_expect_error(zt_raw_req(raw, &h, mine, 0), ZEPS_ERANGE, "0 ids");
    req(&h, ZEPS__OP__PULL, 2);
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "exactly one frame");
    /* compressed sparse pushes: a payload that is not what its codec says,
     * an unknown codec */
    req(&h, ZEPS__OP__PUSH, 4);
    h.codec = 1; /* fp16: 2 bytes a value, 64 expected */
    zt_raw_expect_error(zt_raw_req(raw, &h, buf, 32 + 4 * 4 * DIM), ZEPS_ESIZE, "fp16");
    req(&h, ZEPS__OP__PUSH, 4);
    h.codec = 99;
    zt_raw_expect_error(zt_raw_req(raw, &h, buf, 32 + 4 * 4 * DIM), ZEPS_EPROTO, "unknown codec");
    /* versions announced but missing */
    req(&h, ZEPS__OP__PUSH, 4);
    h.flags = ZP_FLAG_ROW_VERSIONS;
    zt_raw_expect_error(zt_raw_req(raw, &h, buf, 32 + 4 * 4 * DIM), ZEPS_ESIZE, "expected");
    still_serving(mine, 4);
    still_serving(theirs, 1);

    too_big_refused();
    still_serving(mine, 4);
    bad_declarations();
    still_serving(mine, 4);
}
END_TEST

/* The inverse of zp_rng_mix64 (splitmix64's finaliser), to craft ids whose
 * public hash is whatever we like. */
static uint64_t unxorshift(uint64_t y, int k)
{
    uint64_t x = y;
    for (int i = 0; i < 64 / k + 1; i++)
        x = y ^ (x >> k);
    return x;
}

static uint64_t inverse_odd(uint64_t a)
{
    uint64_t x = a; /* Newton: x = x (2 - a x), 6 rounds reach 64 bits */
    for (int i = 0; i < 6; i++)
        x *= 2 - a * x;
    return x;
}

static uint64_t unmix64(uint64_t y)
{
    uint64_t x = unxorshift(y, 31);
    x *= inverse_odd(0x94d049bb133111ebull);
    x = unxorshift(x, 27);
    x *= inverse_odd(0xbf58476d1ce4e5b9ull);
    x = unxorshift(x, 30);
    return x - 0x9e3779b97f4a7c15ull;
}

/* Ids crafted so that a public hash (splitmix64) puts them all in one slot
 * of a power-of-two table: with such a hash, the repeated-id check and the
 * row index go quadratic (2^18 ids took 13 s). The shard must answer within
 * zt_raw_request's 5 s, and keep serving. */
START_TEST(test_crafted_ids)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_sparse_spec spec = emb_spec("sgd", 0.1);
    spec.name = "narrow";
    spec.dim = 1;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    enum { K = 1 << 18 };
    ck_assert_uint_eq(zp_rng_mix64(unmix64(12345)), 12345);
    unsigned char *buf = malloc((size_t)K * 12);
    uint64_t *ids = (uint64_t *)buf;
    for (uint64_t i = 0; i < K; i++)
        ids[i] = unmix64(i << 32);
    float *g = (float *)(buf + (size_t)K * 8);
    for (int i = 0; i < K; i++)
        g[i] = 0.5f;
    void *ctx = zmq_ctx_new(), *sock = zt_raw_socket(ctx, &cl, 0);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__HELLO;
    h.rank = 1;
    h.incarnation = 0xc0ffee;
    Zeps__Header *rep = zt_raw_request(sock, &h, NULL, 0);
    ck_assert_ptr_nonnull(rep);
    zeps__header__free_unpacked(rep, NULL);
    h.op = ZEPS__OP__PUSH;
    h.req_id = 9;
    h.seq = 1;
    h.table = 0;
    h.count = K;
    rep = zt_raw_request(sock, &h, buf, (size_t)K * 12);
    ck_assert_msg(rep != NULL, "no answer within 5 s to a push of %d crafted ids", K);
    ck_assert_int_eq(rep->op, ZEPS__OP__PUSH);
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    float row;
    uint64_t one = ids[K - 1];
    ck_assert_int_eq(zeps_spull(c, t, &one, 1, &row, 0), 0);
    free(buf);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sparse_server");
    TCase *tc = tcase_create("rows");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_same_row_any_shard_count);
    tcase_add_test(tc, test_repeated_ids_summed_once);
    tcase_add_test(tc, test_batch_reuse);
    tcase_add_test(tc, test_ttl_bounds_rows);
    tcase_add_test(tc, test_compressed_push_error_feedback);
    tcase_add_test(tc, test_weighted_rows);
    tcase_add_test(tc, test_crafted_ids);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("bad_input");
    tcase_set_timeout(bad, 60);
    tcase_add_checked_fixture(bad, bad_setup, bad_teardown);
    tcase_add_test(bad, test_bad_requests);
    suite_add_tcase(s, bad);
    return zt_run_suite(s);
}
