/*
 * test_rbatch.c - server/repl/rbatch.c, a replicated primary's bsp round
 * batch and its entry (docs/replication.md, "Replication after
 * aggregation"): pushes and a CLOCK added in order come out of the entry
 * in that order, each with its header bytes, payload size and, for the
 * pushes that closed a round, their round's sum where the entry says; the
 * batch is ready only once every round it holds has closed; an items
 * frame cut anywhere, or with an unknown flag bit, is refused.
 */
#include <check.h>
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
    zmq_msg_t e[3];
    ck_assert_int_eq(zp_rbatch_entry(&b, e), 3);
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
    bad[4] |= 2; /* an unknown flag bit of the first item */
    size_t o = 0;
    zp_rbatch_view v;
    ck_assert_int_ne(zp_rbatch_read(bad, len, &o, &v), 0);
    free(bad);
    for (int i = 0; i < 3; i++)
        zmq_msg_close(&e[i]);
    zp_rbatch_fini(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rbatch");
    TCase *tc = tcase_create("rbatch");
    tcase_add_test(tc, test_entry_round_trip);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
