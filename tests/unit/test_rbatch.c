/*
 * test_rbatch.c - server/repl/rbatch.c, a replicated primary's bsp round
 * batch and its entry (docs/replication.md, "Replication after
 * aggregation"): pushes and a CLOCK added in order come out of the entry
 * in that order, each with its header bytes, payload size and, for the
 * pushes that closed a round, their round's sum where the entry says; the
 * batch is ready only once every round it holds has closed (and then
 * at once, one closing push alone included); an items
 * frame cut anywhere, or with an unknown flag bit, is refused. Sparse
 * pushes stay open until a later request brings their round's merge,
 * which the entry carries where that request's item says, and a rows
 * frame cut anywhere is refused; the batch is stuck only when every worker
 * that has not finished the round last sent a request the batch holds.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "rbatch.h"
#include "zeps.pb-c.h"

/* A request header frame: op, rank, table, seq. */
static void header_frame(zmq_msg_t *f, Zeps__Op op, uint32_t rank, uint32_t table, uint64_t seq)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = op;
    h.rank = rank;
    h.table = table;
    h.seq = seq;
    zmq_msg_init_size(f, zeps__header__get_packed_size(&h));
    zeps__header__pack(&h, zmq_msg_data(f));
}

static float *sum_of(float base, size_t n)
{
    float *s = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        s[i] = base + (float)i;
    return s;
}

START_TEST(test_entry_round_trip)
{
    zp_repl_batch b = {0};
    zmq_msg_t f[2];
    /* table 0 (4 floats): ranks 1, 0 kept, a CLOCK, rank 2 closes; table 1
     * (2 floats): rank 0 kept, rank 1 closes */
    struct {
        Zeps__Op op;
        uint32_t rank, table;
        uint64_t seq, wire;
        size_t nsum;
    } in[] = {{ZEPS__OP__PUSH, 1, 0, 10, 16, 0}, {ZEPS__OP__PUSH, 0, 0, 11, 16, 0},
              {ZEPS__OP__PUSH, 0, 1, 12, 8, 0},  {ZEPS__OP__CLOCK, 0, 0, 13, 0, 0},
              {ZEPS__OP__PUSH, 2, 0, 14, 16, 4}, {ZEPS__OP__PUSH, 1, 1, 15, 8, 2}};
    int n = (int)(sizeof(in) / sizeof(in[0]));
    for (int i = 0; i < n; i++) {
        header_frame(&f[0], in[i].op, in[i].rank, in[i].table, in[i].seq);
        zmq_msg_init_size(&f[1], in[i].wire);
        if (in[i].op == ZEPS__OP__CLOCK) {
            zp_rbatch_add_plain(&b, f, 1);
        } else {
            float *sum = in[i].nsum ? sum_of(100.0f * (float)in[i].table, in[i].nsum) : NULL;
            zp_rbatch_add(&b, f, 2, in[i].table, in[i].wire, &sum, in[i].nsum);
            ck_assert_ptr_null(sum); /* taken */
        }
        zmq_msg_close(&f[0]);
        zmq_msg_close(&f[1]);
        /* ready only when both tables' rounds closed: after the last push */
        ck_assert(zp_rbatch_ready(&b) == (i == n - 1));
    }
    ck_assert_uint_eq(b.npush, 5);
    zmq_msg_t e[4];
    ck_assert_int_eq(zp_rbatch_entry(&b, e), 3); /* no sparse round: no rows frame */
    zp_rbatch_clear(&b);
    Zeps__Header *h = zeps__header__unpack(NULL, zmq_msg_size(&e[0]), zmq_msg_data(&e[0]));
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(h->op, ZEPS__OP__PUSH);
    ck_assert_uint_eq(h->flags, ZP_FLAG_ROUND);
    ck_assert_uint_eq(h->count, (uint64_t)n);
    zeps__header__free_unpacked(h, NULL);
    ck_assert_uint_eq(zmq_msg_size(&e[2]), 6 * sizeof(float));
    const float *sums = zmq_msg_data(&e[2]);
    const uint8_t *p = zmq_msg_data(&e[1]);
    size_t len = zmq_msg_size(&e[1]), off = 0;
    for (int i = 0; i < n; i++) {
        zp_rbatch_view v;
        ck_assert_int_eq(zp_rbatch_read(p, len, &off, &v), 0);
        Zeps__Header *x = zeps__header__unpack(NULL, v.header_len, v.header);
        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(x->op, in[i].op);
        ck_assert_uint_eq(x->rank, in[i].rank);
        ck_assert_uint_eq(x->seq, in[i].seq);
        ck_assert_uint_eq(v.wire, in[i].op == ZEPS__OP__CLOCK ? 0 : in[i].wire);
        ck_assert(v.closes == (in[i].nsum > 0));
        if (v.closes) /* table 0's sum first, then table 1's */
            ck_assert(sums[v.sum_at] == 100.0f * (float)in[i].table &&
                      sums[v.sum_at + in[i].nsum - 1] ==
                          100.0f * (float)in[i].table + (float)(in[i].nsum - 1));
        zeps__header__free_unpacked(x, NULL);
    }
    ck_assert_uint_eq(off, len);
    /* every cut of the items frame short of an item's end is refused */
    for (size_t cut = 1; cut < len; cut++) {
        size_t o = 0;
        zp_rbatch_view v;
        int rc = 0;
        while (o < cut && rc == 0)
            rc = zp_rbatch_read(p, cut, &o, &v);
        ck_assert_msg(rc != 0 || o == cut, "a frame cut at %zu read whole", cut);
    }
    uint8_t *bad = malloc(len);
    memcpy(bad, p, len);
    bad[4] |= 4; /* an unknown flag bit of the first item */
    size_t o = 0;
    zp_rbatch_view v;
    ck_assert_int_ne(zp_rbatch_read(bad, len, &o, &v), 0);
    free(bad);
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&e[i]);
    zp_rbatch_fini(&b);
}
END_TEST

/* A round of one worker: its push closes the round alone, so a batch of
 * that one push is ready (its replies wait for nothing else). */
START_TEST(test_one_push_ready)
{
    zp_repl_batch b = {0};
    zmq_msg_t f[2];
    header_frame(&f[0], ZEPS__OP__PUSH, 0, 0, 1);
    zmq_msg_init_size(&f[1], 16);
    float *sum = sum_of(1.0f, 4);
    zp_rbatch_add(&b, f, 2, 0, 16, &sum, 4);
    zmq_msg_close(&f[0]);
    zmq_msg_close(&f[1]);
    ck_assert_uint_eq(b.n, 1);
    ck_assert(zp_rbatch_ready(&b));
    zp_rbatch_fini(&b);
}
END_TEST

/* Merge `tag` of round `clock` of `table`: 3 rows of dim 2. */
static void put_merge(zp_rbatch_buf *buf, uint32_t table, int64_t clock, float tag, bool vers)
{
    uint64_t ids[3] = {7, 3, 9};
    float g[6];
    uint32_t v[3] = {1, 2, 3};
    for (int i = 0; i < 6; i++)
        g[i] = tag + (float)i;
    zp_rbatch_rows_put(buf, table, clock, ids, 3, g, 2, vers ? v : NULL);
}

/* The merges of test_sparse_rounds' entry: the rows after its items (which
 * end at off, the last item v), from an 8-byte boundary; a frame cut short
 * of a merge's end is refused. */
static void check_rows(const uint8_t *p, size_t len, size_t off, const zp_rbatch_view *v)
{
    size_t rs = zp_rbatch_rows_start(off);
    ck_assert(rs % 8 == 0 && rs >= off && rs < off + 8 && rs < len);
    const uint8_t *rp = p + rs;
    size_t rlen = len - rs;
    size_t at = (size_t)v->rows_at;
    uint32_t count;
    ck_assert_int_eq(zp_rbatch_rows_group(rp, rlen, &at, &count), 0);
    ck_assert_uint_eq(count, 2);
    zp_rbatch_rec rec;
    for (uint32_t i = 0; i < count; i++) {
        ck_assert_int_eq(zp_rbatch_rec_read(rp, rlen, &at, &rec), 0);
        ck_assert_uint_eq(rec.table, i ? 5 : 2);
        ck_assert_int_eq(rec.clock, i ? 9 : 4);
        ck_assert_uint_eq(rec.n, 3);
        ck_assert_uint_eq(rec.dim, 2);
        ck_assert((rec.vers != NULL) == (i == 0));
        uint64_t id;
        float g;
        memcpy(&id, rec.ids + 8, 8);
        memcpy(&g, rec.g + 5 * 4, 4);
        ck_assert_uint_eq(id, 3);
        ck_assert(g == (i ? 55.0f : 15.0f));
    }
    ck_assert_uint_eq(at, rlen);
    /* a rows frame cut anywhere short of a merge's end is refused */
    for (size_t cut = 8; cut < rlen; cut++) {
        size_t o = 8;
        int rc = 0;
        while (o < cut && rc == 0)
            rc = zp_rbatch_rec_read(rp, cut, &o, &rec);
        ck_assert_msg(rc != 0 || o == cut, "a rows frame cut at %zu read whole", cut);
    }
}

START_TEST(test_sparse_rounds)
{
    zp_repl_batch b = {0};
    zp_rbatch_buf recs = {0};
    zmq_msg_t f[2];
    zp_worker w[2] = {0};
    zp_workers ws = {.n = 2, .w = w};
    /* ranks 0 and 1 push round 4 of sparse table 2 */
    for (uint32_t r = 0; r < 2; r++) {
        header_frame(&f[0], ZEPS__OP__PUSH, r, 2, 20 + r);
        zmq_msg_init_size(&f[1], 100);
        zp_rbatch_add_sparse(&b, f, 2, 2, 4, 100);
        zp_rbatch_sender(&b, r, 20 + r);
        zmq_msg_close(&f[0]);
        zmq_msg_close(&f[1]);
        w[r].clock = 4;
        w[r].seq_hi = 20 + r;
        ck_assert(!zp_rbatch_ready(&b));
    }
    ck_assert(zp_rbatch_patience(&b, &ws, false) ==
              ZP_RBATCH_STUCK_S); /* both wait for their pushes' replies */
    w[1].seq_hi = 30;             /* rank 1 sent something after its push */
    ck_assert(zp_rbatch_patience(&b, &ws, false) == ZP_RBATCH_IDLE_S);
    w[1].clock = 5; /* ... its clock: rank 0 alone waits, on the batch */
    ck_assert(zp_rbatch_patience(&b, &ws, false) == ZP_RBATCH_STUCK_S);
    /* rank 1's CLOCK closes round 4 of table 2 (and round 9 of table 5,
     * which the batch holds no push of) */
    header_frame(&f[0], ZEPS__OP__CLOCK, 1, 0, 30);
    zp_rbatch_add_plain(&b, f, 1);
    zmq_msg_close(&f[0]);
    put_merge(&recs, 2, 4, 10.0f, true);
    put_merge(&recs, 5, 9, 50.0f, false);
    zp_rbatch_attach_rows(&b, &recs);
    ck_assert_uint_eq(recs.len, 0);
    ck_assert(zp_rbatch_ready(&b));
    ck_assert(zp_rbatch_patience(&b, &ws, false) < 0);
    zmq_msg_t e[3];
    ck_assert_int_eq(zp_rbatch_entry(&b, e), 3);
    zp_rbatch_clear(&b);
    const uint8_t *p = zmq_msg_data(&e[1]);
    size_t len = zmq_msg_size(&e[1]), off = 0;
    zp_rbatch_view v;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(zp_rbatch_read(p, len, &off, &v), 0);
        ck_assert(v.has_rows == (i == 2) && !v.closes);
        ck_assert_uint_eq(v.wire, i < 2 ? 100 : 0);
    }
    check_rows(p, len, off, &v);
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&e[i]);
    free(recs.p);
    zp_rbatch_fini(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rbatch");
    TCase *tc = tcase_create("rbatch");
    tcase_add_test(tc, test_entry_round_trip);
    tcase_add_test(tc, test_one_push_ready);
    tcase_add_test(tc, test_sparse_rounds);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
