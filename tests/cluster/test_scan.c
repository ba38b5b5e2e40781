/*
 * test_scan.c - SCAN and PUT through real zeps-server processes.
 *
 * A table read page by page with its optimizer state and written into a
 * new cluster of another shard count holds the same bytes there, and one
 * more update gives the same bits on both (so the state and the step
 * counts came across, not only the values); a scan sees every row present
 * throughout exactly once while rows are made and updated between its
 * pages; pages stay under max_message_mb; a resent PUT is not applied
 * again; hostile requests (bad cursor, count 0 or huge, unknown table,
 * wrong sizes, ids of another shard, NaN, repeated ids) get an ERROR that
 * says what is wrong and change nothing.
 */
#include <check.h>
#include <stdbool.h>
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

#define DIM 5
#define LEN 1001

static zeps_sparse_spec emb_spec(const char *optimizer)
{
    zeps_sparse_spec s = {.name = "emb",
                          .dim = DIM,
                          .optimizer = optimizer,
                          .lr = 0.05,
                          .init = "uniform",
                          .init_scale = 0.1,
                          .seed = 7};
    return s;
}

static zeps_table_spec dense_spec(void)
{
    zeps_table_spec s = {.name = "w",
                         .length = LEN,
                         .optimizer = "adam",
                         .lr = 0.01,
                         .init = "normal",
                         .init_scale = 0.5,
                         .seed = 3};
    return s;
}

/* Every record of sparse table t, all shards, pages of at most `max` rows:
 * appended to *recs (grown), their count returned; *k gets the state
 * floats per value; *pages counts the pages read. */
static uint64_t scan_rows(zeps_client *c, uint32_t t, uint64_t max, uint8_t **recs, uint32_t *k,
                          int *pages)
{
    uint64_t n = 0;
    *pages = 0;
    for (int s = 0; s < zeps_num_shards(c); s++) {
        uint64_t cursor = 0;
        do {
            zeps_page p;
            ck_assert_msg(zeps_scan(c, t, s, cursor, max, &p) == 0, "%s", zeps_last_error(c));
            ck_assert_uint_eq(p.dim, DIM);
            ck_assert_uint_le(p.count, max);
            uint64_t rec = ZEPS_ROW_RECORD_BYTES(DIM, p.state_per_value);
            ck_assert_uint_eq(p.bytes, p.count * rec);
            *k = p.state_per_value;
            *recs = realloc(*recs, (size_t)((n + p.count) * rec) + 1);
            memcpy(*recs + n * rec, p.data, (size_t)p.bytes);
            n += p.count;
            cursor = p.next;
            zeps_page_release(&p);
            (*pages)++;
        } while (cursor != 0);
    }
    return n;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return x < y ? -1 : x > y;
}

static void sort_records(uint8_t *recs, uint64_t n, uint32_t k)
{
    qsort(recs, (size_t)n, (size_t)ZEPS_ROW_RECORD_BYTES(DIM, k), by_id);
}

/* The whole dense table t (every shard, pages of at most `max`): values
 * into vals[LEN], state into state[k * LEN]; the largest version seen. */
static uint64_t scan_dense(zeps_client *c, uint32_t t, uint64_t max, float *vals, float *state,
                           uint32_t *k)
{
    uint64_t version = 0;
    for (int s = 0; s < zeps_num_shards(c); s++) {
        uint64_t cursor = 0;
        do {
            zeps_page p;
            ck_assert_msg(zeps_scan(c, t, s, cursor, max, &p) == 0, "%s", zeps_last_error(c));
            ck_assert_uint_le(p.count, max);
            *k = p.state_per_value;
            const float *f = p.data;
            memcpy(vals + p.offset, f, (size_t)p.count * 4);
            for (uint32_t j = 0; j < p.state_per_value; j++)
                memcpy(state + j * LEN + p.offset, f + (j + 1) * p.count, (size_t)p.count * 4);
            version = p.version > version ? p.version : version;
            cursor = p.next;
            zeps_page_release(&p);
        } while (cursor != 0);
    }
    return version;
}

/* n ids and gradient rows from seed. */
static void batch(uint64_t seed, uint64_t *ids, float *g, size_t n)
{
    zp_rng r;
    zp_rng_seed(&r, seed, 0, 0);
    for (size_t i = 0; i < n; i++)
        ids[i] = zp_rng_next(&r) % 5000; /* repeats: some rows get several updates */
    for (size_t i = 0; i < n * DIM; i++)
        g[i] = (float)((double)(zp_rng_next(&r) >> 11) / 9007199254740992.0 - 0.5);
}

/* Train a little: sparse pushes and dense pushes from fixed seeds. */
static void train(zeps_client *c, uint32_t e, uint32_t w, int steps, uint64_t seed)
{
    enum { B = 300 };
    static uint64_t ids[B];
    static float g[B * DIM], dg[LEN];
    for (int s = 0; s < steps; s++) {
        batch(seed + (uint64_t)s, ids, g, B);
        ck_assert_int_eq(zeps_spush(c, e, ids, B, g, 0), 0);
        for (int i = 0; i < LEN; i++)
            dg[i] = g[i % (B * DIM)] * (float)(i % 7 - 3);
        ck_assert_int_eq(zeps_push(c, w, dg, 0, LEN, 0), 0);
    }
}

/* Export from 2 shards, import into 3, same bytes; then the same update
 * on both gives the same bits (sparse adagrad rows, dense adam slices). */
START_TEST(test_export_import_other_shard_count)
{
    zt_cluster a, b;
    ck_assert_int_eq(zt_cluster_start(&a, 2, 1, "async", NULL, NULL), 0);
    ck_assert_int_eq(zt_cluster_start(&b, 3, 1, "async", NULL, NULL), 0);
    zeps_client *ca = zt_client(&a, 0), *cb = zt_client(&b, 0);
    uint32_t ea, wa, eb, wb;
    zeps_sparse_spec es = emb_spec("adam");
    zeps_table_spec ds = dense_spec();
    ck_assert_int_eq(zeps_declare_sparse(ca, &es, &ea), 0);
    ck_assert_int_eq(zeps_declare(ca, &ds, &wa), 0);
    ck_assert_int_eq(zeps_declare_sparse(cb, &es, &eb), 0);
    ck_assert_int_eq(zeps_declare(cb, &ds, &wb), 0);
    train(ca, ea, wa, 4, 100);

    uint8_t *ra = NULL, *rb = NULL;
    uint32_t k = 0, kb = 0;
    int pages;
    uint64_t n = scan_rows(ca, ea, 97, &ra, &k, &pages);
    ck_assert_uint_eq(k, 2); /* adam: m and v */
    ck_assert_uint_gt(n, 500);
    ck_assert_int_gt(pages, 6); /* several pages per shard */
    static float va[LEN], sa[2 * LEN], vb[LEN], sb[2 * LEN];
    uint32_t dk;
    uint64_t version = scan_dense(ca, wa, 128, va, sa, &dk);
    ck_assert_uint_eq(dk, 2);
    ck_assert_uint_eq(version, 4);

    ck_assert_msg(zeps_put_rows(cb, eb, k, ra, n, 0) == 0, "%s", zeps_last_error(cb));
    ck_assert_msg(zeps_put_dense(cb, wb, 0, LEN, dk, va, sa, version) == 0, "%s",
                  zeps_last_error(cb));
    uint64_t nb = scan_rows(cb, eb, 1000, &rb, &kb, &pages);
    ck_assert_uint_eq(nb, n);
    sort_records(ra, n, k);
    sort_records(rb, n, k);
    ck_assert_msg(memcmp(ra, rb, (size_t)(n * ZEPS_ROW_RECORD_BYTES(DIM, k))) == 0,
                  "rows differ after the import");
    ck_assert_uint_eq(scan_dense(cb, wb, 1000, vb, sb, &dk), version); /* the step count too */
    ck_assert(memcmp(va, vb, sizeof(va)) == 0 && memcmp(sa, sb, sizeof(sa)) == 0);

    /* one more step on both: the same bits (Adam reads m, v and the step) */
    train(ca, ea, wa, 1, 900);
    train(cb, eb, wb, 1, 900);
    scan_dense(ca, wa, LEN, va, sa, &dk);
    scan_dense(cb, wb, LEN, vb, sb, &dk);
    ck_assert_msg(memcmp(va, vb, sizeof(va)) == 0, "dense values differ after one more step");
    uint64_t ids[64];
    static float pa[64 * DIM], pb[64 * DIM];
    for (int i = 0; i < 64; i++)
        memcpy(&ids[i], ra + (uint64_t)i * ZEPS_ROW_RECORD_BYTES(DIM, k), 8);
    ck_assert_int_eq(zeps_spull(ca, ea, ids, 64, pa, 0), 0);
    ck_assert_int_eq(zeps_spull(cb, eb, ids, 64, pb, 0), 0);
    ck_assert_msg(memcmp(pa, pb, sizeof(pa)) == 0, "rows differ after one more step");
    free(ra);
    free(rb);
    zeps_client_destroy(&ca);
    zeps_client_destroy(&cb);
    ck_assert_int_eq(zt_cluster_stop(&a), 0);
    ck_assert_int_eq(zt_cluster_stop(&b), 0);
}
END_TEST

/* Rows made and updated between the pages of a scan: every row there
 * from start to end is in exactly one page, each new one at most once. */
START_TEST(test_rows_made_mid_scan)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_sparse_spec es = emb_spec("adagrad");
    ck_assert_int_eq(zeps_declare_sparse(c, &es, &t), 0);
    enum { OLD = 400, NEW = 300 };
    static uint64_t ids[OLD + NEW];
    static float rows[(OLD + NEW) * DIM];
    for (int i = 0; i < OLD + NEW; i++)
        ids[i] = 1000003ull * (uint64_t)i + 17;
    ck_assert_int_eq(zeps_spull(c, t, ids, OLD, rows, 0), 0); /* made on first touch */
    static uint8_t seen[OLD + NEW];
    uint64_t cursor = 0;
    int page = 0;
    do {
        zeps_page p;
        ck_assert_int_eq(zeps_scan(c, t, 0, cursor, 50, &p), 0);
        uint64_t rec = ZEPS_ROW_RECORD_BYTES(DIM, p.state_per_value);
        for (uint64_t i = 0; i < p.count; i++) {
            uint64_t id;
            memcpy(&id, (const uint8_t *)p.data + i * rec, 8);
            ck_assert_uint_eq((id - 17) % 1000003ull, 0);
            seen[(id - 17) / 1000003ull]++;
        }
        cursor = p.next;
        zeps_page_release(&p);
        if (page < 6) { /* between pages: 50 new rows, and updates of old ones */
            ck_assert_int_eq(zeps_spull(c, t, ids + OLD + 50 * page, 50, rows, 0), 0);
            for (int i = 0; i < 50 * DIM; i++)
                rows[i] = 0.25f;
            ck_assert_int_eq(zeps_spush(c, t, ids + 7 * page, 50, rows, 0), 0);
        }
        page++;
    } while (cursor != 0);
    for (int i = 0; i < OLD; i++)
        ck_assert_msg(seen[i] == 1, "row %d there throughout seen %d times", i, seen[i]);
    for (int i = OLD; i < OLD + NEW; i++)
        ck_assert_msg(seen[i] <= 1, "row %d made mid-scan seen %d times", i, seen[i]);
    ck_assert_int_ge(page, 8);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* max_message_mb = 1: pages of wide rows stay under it, and paging reads
 * every row. */
START_TEST(test_pages_fit_max_message)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", "  max_message_mb = 1;\n", NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t;
    zeps_sparse_spec es = emb_spec("adagrad");
    es.dim = 1024; /* a record of 8,216 bytes */
    ck_assert_int_eq(zeps_declare_sparse(c, &es, &t), 0);
    enum { N = 300 };
    uint64_t ids[N];
    for (int i = 0; i < N; i++)
        ids[i] = (uint64_t)i;
    float *rows = malloc((size_t)N * 1024 * 4);
    for (int i = 0; i < N; i += 100)
        ck_assert_int_eq(zeps_spull(c, t, ids + i, 100, rows, 0), 0);
    uint64_t cursor = 0, total = 0;
    int pages = 0;
    do {
        zeps_page p;
        ck_assert_int_eq(zeps_scan(c, t, 0, cursor, 0, &p), 0);
        ck_assert_uint_le(p.bytes, 1u << 20);
        total += p.count;
        pages++;
        cursor = p.next;
        zeps_page_release(&p);
    } while (cursor != 0);
    ck_assert_uint_eq(total, N);
    ck_assert_int_ge(pages, 3);
    free(rows);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* ---- hostile requests on a raw socket ---- */

static zt_cluster hcl;
static zeps_client *good;
static uint32_t he, hw;
static void *zctx, *raw;
static uint64_t raw_seq;

static void req(Zeps__Header *h, Zeps__Op op, uint32_t table, uint64_t offset, uint64_t count)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = op;
    h->req_id = ++raw_seq;
    h->rank = 1;
    h->incarnation = 0x5ca9;
    h->seq = raw_seq;
    h->table = table;
    h->offset = offset;
    h->count = count;
}

static void hostile_setup(void)
{
    ck_assert_int_eq(zt_cluster_start(&hcl, 2, 2, "async", NULL, NULL), 0);
    good = zt_client(&hcl, 0);
    zeps_sparse_spec es = emb_spec("adagrad");
    zeps_table_spec ds = dense_spec();
    ck_assert_int_eq(zeps_declare_sparse(good, &es, &he), 0);
    ck_assert_int_eq(zeps_declare(good, &ds, &hw), 0);
    train(good, he, hw, 2, 7);
    zctx = zmq_ctx_new();
    raw = zt_raw_socket(zctx, &hcl, 0);
    Zeps__Header h;
    req(&h, ZEPS__OP__HELLO, 0, 0, 0);
    Zeps__Header *rep = zt_raw_req(raw, &h, NULL, 0);
    ck_assert_int_eq(rep->op, ZEPS__OP__HELLO);
    zeps__header__free_unpacked(rep, NULL);
}

static void hostile_teardown(void)
{
    zmq_close(raw);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&good);
    ck_assert_int_eq(zt_cluster_stop(&hcl), 0);
}

/* Shard 0's first page of table t, as bytes (malloc'ed, *len). */
static uint8_t *first_page(uint32_t t, size_t *len)
{
    zeps_page p;
    ck_assert_int_eq(zeps_scan(good, t, 0, 0, 100000, &p), 0);
    ck_assert_uint_eq(p.next, 0);
    uint8_t *out = malloc((size_t)p.bytes + 1);
    memcpy(out, p.data, (size_t)p.bytes);
    *len = (size_t)p.bytes;
    zeps_page_release(&p);
    return out;
}

/* A copy of shard 0's first 3 rows (a valid PUT of them as they are). */
static uint8_t *three_rows(const uint8_t *page, uint32_t k, size_t *len)
{
    size_t rec = (size_t)ZEPS_ROW_RECORD_BYTES(DIM, k);
    uint8_t *out = malloc(3 * rec);
    memcpy(out, page, 3 * rec);
    *len = 3 * rec;
    return out;
}

/* SCAN requests refused, each with its words. */
static void hostile_scans(void)
{
    Zeps__Header h;
    req(&h, ZEPS__OP__SCAN, 0, 0, 0);
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANGE, "names 0 rows");
    req(&h, ZEPS__OP__SCAN, 0, 0, (1u << 24) + 1);
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANGE, "1 to 16777216");
    req(&h, ZEPS__OP__SCAN, 0, 1ull << 40, 10);
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANGE, "past the end of its rows");
    req(&h, ZEPS__OP__SCAN, 7, 0, 10);
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ETABLE, "no table with id 7");
    req(&h, ZEPS__OP__SCAN, 0, 0, 10);
    zt_raw_expect_error(zt_raw_req(raw, &h, "x", 1), ZEPS_EPROTO, "no payload");
    req(&h, ZEPS__OP__SCAN, 1, LEN, 10); /* shard 0's slice is [0, 500) */
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_ERANGE, "outside shard 0's slice");
    req(&h, ZEPS__OP__SCAN, 0, 0, 10);
    h.flags = ZP_FLAG_CLOCK;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "unknown flag bits");
}

/* A PUT of rows `put` (len bytes, 3 rows of record size rec) refused,
 * each with its words; put is left holding rows0's first three rows with
 * a NaN in the third's optimizer state. */
static void hostile_row_puts(uint8_t *put, size_t len, const uint8_t *rows0, uint32_t k, size_t rec)
{
    Zeps__Header h;
    req(&h, ZEPS__OP__PUT, 0, 0, 3);
    h.state_per_value = 2;
    zt_raw_expect_error(zt_raw_req(raw, &h, put, len), ZEPS_EINVAL, "adagrad keeps 1");
    req(&h, ZEPS__OP__PUT, 0, 0, 3);
    h.state_per_value = k;
    zt_raw_expect_error(zt_raw_req(raw, &h, put, len - 4), ZEPS_ESIZE, "expected");
    req(&h, ZEPS__OP__PUT, 0, 0, 0);
    h.state_per_value = k;
    zt_raw_expect_error(zt_raw_req(raw, &h, put, 0), ZEPS_ERANGE, "names 0 rows");
    req(&h, ZEPS__OP__PUT, 0, 0, 3);
    h.state_per_value = k;
    zt_raw_expect_error(zt_raw_req(raw, &h, NULL, 0), ZEPS_EPROTO, "exactly one frame");
    uint64_t theirs = 1;
    while (zp_sparse_shard_of(theirs, 2) != 1)
        theirs++;
    memcpy(put + rec, &theirs, 8);
    req(&h, ZEPS__OP__PUT, 0, 0, 3);
    h.state_per_value = k;
    zt_raw_expect_error(zt_raw_req(raw, &h, put, len), ZEPS_EMOVED, "which shard 1 owns");
    memcpy(put + rec, rows0 + rec, rec);
    memcpy(put + 2 * rec, rows0, 8); /* row 2 takes row 0's id */
    req(&h, ZEPS__OP__PUT, 0, 0, 3);
    h.state_per_value = k;
    zt_raw_expect_error(zt_raw_req(raw, &h, put, len), ZEPS_EINVAL, "twice");
    memcpy(put + 2 * rec, rows0 + 2 * rec, rec);
    float nan = NAN;
    memcpy(put + 2 * rec + 24 + 4 * DIM + 4, &nan, 4); /* in the optimizer state */
    req(&h, ZEPS__OP__PUT, 0, 0, 3);
    h.state_per_value = k;
    zt_raw_expect_error(zt_raw_req(raw, &h, put, len), ZEPS_ENONFINITE, "NaN");
}

/* PUTs of dense elements refused, each with its words; vals[20] is left
 * holding shard 0's first ten values twice. */
static void hostile_dense_puts(const uint8_t *dense0, float *vals)
{
    Zeps__Header h;
    memcpy(vals, dense0, 10 * 4);
    memcpy(vals + 10, dense0, 10 * 4);
    req(&h, ZEPS__OP__PUT, 1, 495, 10); /* past shard 0's slice [0, 500) */
    h.state_per_value = 1;
    zt_raw_expect_error(zt_raw_req(raw, &h, vals, 8 * 10), ZEPS_EINVAL, "adam keeps 2");
    float big[3 * 10] = {0};
    req(&h, ZEPS__OP__PUT, 1, 495, 10);
    h.state_per_value = 2;
    zt_raw_expect_error(zt_raw_req(raw, &h, big, sizeof(big)), ZEPS_ERANGE, "outside shard 0");
    big[25] = INFINITY;
    req(&h, ZEPS__OP__PUT, 1, 0, 10);
    h.state_per_value = 2;
    zt_raw_expect_error(zt_raw_req(raw, &h, big, sizeof(big)), ZEPS_ENONFINITE, "NaN or Inf");
}

/* The refusals changed nothing: the first pages read the same bytes, no
 * PUT counted. */
static void nothing_changed(const uint8_t *rows0, size_t rows_len, const uint8_t *dense0,
                            size_t dense_len)
{
    size_t l2;
    uint8_t *again = first_page(he, &l2), *dagain = first_page(hw, &l2);
    ck_assert(memcmp(again, rows0, rows_len) == 0);
    ck_assert(memcmp(dagain, dense0, dense_len) == 0);
    Zeps__ShardStats *st = zt_stats(good, 0);
    ck_assert_uint_eq(st->tables[0]->puts, 0);
    ck_assert_uint_eq(st->tables[0]->scans, 2); /* the two pages read; refusals are not */
    zeps__shard_stats__free_unpacked(st, NULL);
    free(again);
    free(dagain);
}

/* A PUT of the three rows of `put` with row 0's first value v; returns
 * the reply's flags, and the seq sent in *seq (or resends seq *seq when
 * resend). */
static uint32_t put_first(uint8_t *put, size_t len, uint32_t k, float v, uint64_t *seq, bool resend)
{
    Zeps__Header h;
    memcpy(put + 24, &v, 4);
    req(&h, ZEPS__OP__PUT, 0, 0, 3);
    if (resend)
        h.seq = *seq;
    *seq = h.seq;
    h.state_per_value = k;
    Zeps__Header *rep = zt_raw_req(raw, &h, put, len);
    ck_assert_int_eq(rep->op, ZEPS__OP__PUT);
    uint32_t flags = rep->flags;
    zeps__header__free_unpacked(rep, NULL);
    return flags;
}

/* A resent PUT is answered DUPLICATE and not applied again: the newer
 * write stays. */
static void resent_put(uint8_t *put, size_t len, const uint8_t *rows0, uint32_t k)
{
    memcpy(put, rows0, len);
    uint64_t old_seq, seq;
    ck_assert_uint_eq(put_first(put, len, k, 2.5f, &old_seq, false), 0);
    ck_assert_uint_eq(put_first(put, len, k, 3.5f, &seq, false), 0);
    ck_assert_uint_eq(put_first(put, len, k, 2.5f, &old_seq, true), ZP_FLAG_DUPLICATE);
    uint64_t id;
    memcpy(&id, rows0, 8);
    float row[DIM];
    ck_assert_int_eq(zeps_spull(good, he, &id, 1, row, 0), 0);
    ck_assert_float_eq(row[0], 3.5f);
    Zeps__ShardStats *st = zt_stats(good, 0);
    ck_assert_uint_eq(st->tables[0]->puts, 2);
    zeps__shard_stats__free_unpacked(st, NULL);
}

START_TEST(test_hostile)
{
    /* the tables on shard 0 are ids 0 (emb) and 1 (w) */
    size_t rows_len, dense_len;
    uint8_t *rows0 = first_page(he, &rows_len), *dense0 = first_page(hw, &dense_len);
    const uint32_t k = 1; /* adagrad */
    size_t rec = (size_t)ZEPS_ROW_RECORD_BYTES(DIM, k);
    hostile_scans();
    size_t len;
    uint8_t *put = three_rows(rows0, k, &len);
    hostile_row_puts(put, len, rows0, k, rec);
    float vals[2 * 10];
    hostile_dense_puts(dense0, vals);
    nothing_changed(rows0, rows_len, dense0, dense_len);
    resent_put(put, len, rows0, k);

    /* the library's own refusals */
    zeps_page p;
    ck_assert_int_eq(zeps_scan(good, he, 2, 0, 10, &p), ZEPS_EINVAL);
    ck_assert_int_eq(zeps_scan(good, 9, 0, 0, 10, &p), ZEPS_ETABLE);
    ck_assert_int_eq(zeps_put_rows(good, hw, k, put, 3, 0), ZEPS_EINVAL);
    ck_assert_int_eq(zeps_put_dense(good, he, 0, 1, 0, vals, NULL, 0), ZEPS_EINVAL);
    ck_assert_int_eq(zeps_put_dense(good, hw, LEN - 1, 2, 2, vals, vals, 0), ZEPS_ERANGE);
    free(put);
    free(rows0);
    free(dense0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scan");
    TCase *tc = tcase_create("scan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_export_import_other_shard_count);
    tcase_add_test(tc, test_rows_made_mid_scan);
    tcase_add_test(tc, test_pages_fit_max_message);
    suite_add_tcase(s, tc);
    TCase *bad = tcase_create("hostile");
    tcase_set_timeout(bad, 60);
    tcase_add_checked_fixture(bad, hostile_setup, hostile_teardown);
    tcase_add_test(bad, test_hostile);
    suite_add_tcase(s, bad);
    return zt_run_suite(s);
}
