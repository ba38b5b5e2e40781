/*
 * test_table.c - server/table/table.c and server/state/workers.c: declarations,
 * conflicts, slicing, copy-on-write of the parameter buffer, and the
 * duplicate window.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "mathenv.h"
#include "snapshot.h"
#include "sparse.h"
#include "table.h"
#include "workers.h"
#include "zeps_errors.h"

static Zeps__TableSpec spec_of(const char *name, uint64_t len, const char *opt)
{
    Zeps__TableSpec s;
    zeps__table_spec__init(&s);
    s.name = (char *)name;
    s.length = len;
    s.optimizer = (char *)opt;
    s.lr = 0.5;
    s.init = "constant";
    s.init_scale = 2.0;
    return s;
}

START_TEST(test_slices_cover_table)
{
    char err[256];
    for (int S = 1; S <= 7; S++) {
        uint64_t next = 0;
        for (int k = 0; k < S; k++) {
            Zeps__TableSpec sp = spec_of("w", 1000003, "sgd");
            zp_table *t;
            ck_assert_int_eq(zp_table_new(&t, 0, &sp, k, S, 2, err, sizeof(err)), 0);
            ck_assert_uint_eq(t->begin, next);
            ck_assert_uint_eq(t->n, t->end - t->begin);
            ck_assert_float_eq(t->params->data[t->n - 1], 2.0f);
            next = t->end;
            zp_table_destroy(&t);
            ck_assert_ptr_null(t);
        }
        ck_assert_uint_eq(next, 1000003);
    }
}
END_TEST

START_TEST(test_bad_specs)
{
    char err[256];
    zp_table *t = NULL;
    Zeps__TableSpec sp = spec_of("", 10, "sgd");
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    sp = spec_of("a b", 10, "sgd");
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "[A-Za-z0-9_.-]"));
    sp = spec_of("w", 0, "sgd");
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "length 0"));
    sp = spec_of("w", 1ull << 40, "sgd");
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    sp = spec_of("w", 10, "nesterov");
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EOPTIM);
    ck_assert_ptr_nonnull(strstr(err, "nesterov"));
    sp = spec_of("w", 10, "sgd");
    sp.init = "xavier";
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "xavier"));
    sp = spec_of("w", 10, "sgd");
    sp.kind = 1;
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_null(t); /* output written only on success */
}
END_TEST

START_TEST(test_check_same)
{
    char err[256];
    Zeps__TableSpec sp = spec_of("w", 100, "adam");
    zp_table *t;
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_table_check_same(t, &sp, err, sizeof(err)), 0);
    /* a zero field means the default: beta2 = 0 and beta2 = 0.999 are the same */
    Zeps__TableSpec d = sp;
    d.beta2 = 0.999;
    ck_assert_int_eq(zp_table_check_same(t, &d, err, sizeof(err)), 0);
    d = sp;
    d.lr = 0.25;
    ck_assert_int_eq(zp_table_check_same(t, &d, err, sizeof(err)), ZEPS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err, "lr = 0.5, not 0.25"));
    d = sp;
    d.seed = 9;
    ck_assert_int_eq(zp_table_check_same(t, &d, err, sizeof(err)), ZEPS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err, "seed"));
    d = sp;
    d.optimizer = "sgd";
    ck_assert_int_eq(zp_table_check_same(t, &d, err, sizeof(err)), ZEPS_ECONFLICT);
    zp_table_destroy(&t);
}
END_TEST

/* While a reply holds the buffer, an update writes into a copy: the bytes
 * the reply references keep the values of the version it names. */
START_TEST(test_copy_on_write)
{
    char err[256];
    Zeps__TableSpec sp = spec_of("w", 8, "sgd");
    zp_table *t;
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), 0);
    float g[8];
    for (int i = 0; i < 8; i++)
        g[i] = 1.0f;
    zp_buf *held = zp_table_params_ref(t);
    zp_table_apply(t, g, 0, 8, 1.0f);
    ck_assert_ptr_ne(held, t->params);
    ck_assert_float_eq(held->data[3], 2.0f);    /* what the reply sends */
    ck_assert_float_eq(t->params->data[3], 1.5f); /* 2 - 0.5 * 1 */
    ck_assert_uint_eq(t->version, 1);
    zp_buf_release(held->data, held); /* ZeroMQ done with it: freed */
    zp_buf *cur = t->params;
    zp_table_apply(t, g, 2, 3, 2.0f); /* no reply holds it: in place, sub-range */
    ck_assert_ptr_eq(cur, t->params);
    ck_assert_float_eq(t->params->data[1], 1.5f);
    ck_assert_float_eq(t->params->data[2], 0.5f);
    ck_assert_float_eq(t->params->data[5], 1.5f);
    ck_assert_uint_eq(t->version, 2);
    ck_assert_uint_eq(zp_table_bytes(t), 8 * sizeof(float));
    zp_table_destroy(&t);
}
END_TEST

/* A put of a dense slice (a move's rows, scan.c) brings the table up to the
 * sender's version when that is ahead, and one past its own when not. */
START_TEST(test_after_put_takes_version)
{
    char err[256];
    Zeps__TableSpec sp = spec_of("w", 8, "sgd");
    zp_table *t;
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), 0);
    zp_table_after_put(t, 10);
    ck_assert_uint_eq(t->version, 10);
    zp_table_after_put(t, 3);
    ck_assert_uint_eq(t->version, 11);
    zp_table_destroy(&t);
}
END_TEST

/* A dense record read into a table declared from it: the version and the
 * bsp rounds closed come back as recorded. */
START_TEST(test_dense_load_keeps_rounds)
{
    char err[256];
    Zeps__TableSpec sp = spec_of("d", 8, "sgd");
    zp_table *t, *u;
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), 0);
    t->version = 5;
    t->round.closed = 7;
    zp_snap_table st;
    memset(&st, 0, sizeof(st));
    zp_table_describe(t, &st);
    t->kind->pack(t, &st);
    ck_assert_int_eq(zp_table_from_snap(&u, 1, &st, 1, err, sizeof(err)), 0);
    ck_assert_uint_eq(u->version, 5);
    ck_assert_int_eq(u->round.closed, 7);
    zp_table_destroy(&u);
    zp_table_destroy(&t);
}
END_TEST

static zp_table *sparse_table(const char *name)
{
    char err[256];
    Zeps__TableSpec sp = spec_of(name, 0, "sgd");
    sp.kind = ZP_TABLE_SPARSE;
    sp.dim = 4;
    sp.init = "zeros";
    zp_table *t;
    ck_assert_msg(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)) == 0, "%s", err);
    return t;
}

/* A sparse table rolled back to a record: its version and bsp rounds
 * closed are the record's again, and STATS gives the store's history as
 * recorded (created, not admitted, pushes skipped, evicted by ttl and by
 * capacity), each figure its own. */
START_TEST(test_sparse_reset_to_record)
{
    char err[256];
    zp_table *t = sparse_table("e");
    zp_sparse_counters hist = {.created = 11, .not_admitted = 12, .pushes_skipped = 13,
                               .evicted_ttl = 14, .evicted_capacity = 15};
    zp_sparse_set_history(t->rows->store, &hist);
    t->version = 9;
    t->round.closed = 4;
    zp_snap_table st;
    memset(&st, 0, sizeof(st));
    zp_table_describe(t, &st);
    t->kind->pack(t, &st);
    /* what follows the record: steps the rollback undoes */
    t->version = 20;
    t->round.closed = 6;
    zp_sparse_set_history(t->rows->store, &(zp_sparse_counters){0});
    ck_assert_int_eq(zp_table_reset(t, &st, err, sizeof(err)), 0);
    free(st.owned_bytes);
    ck_assert_uint_eq(t->version, 9);
    ck_assert_int_eq(t->round.closed, 4);
    Zeps__TableStats ts;
    zeps__table_stats__init(&ts);
    t->kind->stats(t, &ts);
    ck_assert_uint_eq(ts.rows_created, 11);
    ck_assert_uint_eq(ts.not_admitted, 12);
    ck_assert_uint_eq(ts.pushes_skipped, 13);
    ck_assert_uint_eq(ts.evicted_ttl, 14);
    ck_assert_uint_eq(ts.evicted_capacity, 15);
    zp_table_destroy(&t);
}
END_TEST

/* A sparse table declared again with another memory budget is a conflict
 * that names the field: the budget sizes the store, so a second declarer
 * cannot silently get the first one's. */
START_TEST(test_sparse_check_same_budget)
{
    char err[256];
    zp_table *t = sparse_table("b");
    Zeps__TableSpec d = *t->rows->spec;
    ck_assert_int_eq(zp_table_check_same(t, &d, err, sizeof(err)), 0);
    d.memory_budget = 1u << 20;
    ck_assert_int_eq(zp_table_check_same(t, &d, err, sizeof(err)), ZEPS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err, "memory_budget = 0, not 1048576"));
    zp_table_destroy(&t);
}
END_TEST

/* A frame of n floats, each v, for a round to hold. */
static void grad_frame(zmq_msg_t *m, size_t n, float v)
{
    ck_assert_int_eq(zmq_msg_init_size(m, n * sizeof(float)), 0);
    float *g = zmq_msg_data(m);
    for (size_t i = 0; i < n; i++)
        g[i] = v;
}

/* A two-worker round sums both ranks' pushes; a reset (rollback, a late
 * declare) drops what it held, so the next round counts from nothing: one
 * push after it is one pending, not two (bsp's quorum reads the count). */
START_TEST(test_round_reset_counts_anew)
{
    zp_round rd;
    zmq_msg_t m;
    int k;
    ck_assert_int_eq(zp_round_init(&rd, 2, 3), 0);
    grad_frame(&m, 3, 1.0f);
    ck_assert_int_eq(zp_round_hold(&rd, 0, &m, 1), 0);
    grad_frame(&m, 3, 2.0f);
    ck_assert_int_eq(zp_round_hold(&rd, 1, &m, 1), 0);
    ck_assert(zp_round_holds(&rd, 1));
    const float *sum = zp_round_sum(&rd, &k);
    ck_assert_int_eq(k, 2);
    ck_assert_float_eq(sum[2], 3.0f);
    zp_round_reset(&rd, 5);
    ck_assert(!zp_round_holds(&rd, 0));
    ck_assert_int_eq(rd.npending, 0);
    ck_assert_int_eq(rd.closed, 5);
    grad_frame(&m, 3, 4.0f);
    ck_assert_int_eq(zp_round_hold(&rd, 1, &m, 6), 0);
    ck_assert_int_eq(rd.npending, 1);
    sum = zp_round_sum(&rd, &k);
    ck_assert_int_eq(k, 1);
    ck_assert_float_eq(sum[0], 4.0f);
    zp_round_fini(&rd);
}
END_TEST

START_TEST(test_seq_window)
{
    zp_workers ws;
    zp_workers_init(&ws, 2);
    zp_worker *w = &ws.w[1];
    ck_assert(zp_workers_hello(w, 77));
    ck_assert(!zp_workers_hello(w, 77)); /* same incarnation: nothing changes */
    ck_assert(!zp_workers_seen(w, 1));
    zp_workers_record(w, 1);
    ck_assert(zp_workers_seen(w, 1));
    zp_workers_record(w, 3); /* 2 skipped: still new */
    ck_assert(!zp_workers_seen(w, 2));
    ck_assert(zp_workers_seen(w, 3));
    zp_workers_record(w, 2);
    ck_assert(zp_workers_seen(w, 2));
    zp_workers_record(w, 3 + ZP_SEQ_WINDOW);
    ck_assert(zp_workers_seen(w, 3));  /* exactly at the window's edge */
    ck_assert(!zp_workers_seen(w, 4)); /* inside, never seen */
    ck_assert(zp_workers_seen(w, 2));  /* below the window: a duplicate */
    zp_workers_record(w, 1000);
    ck_assert(!zp_workers_seen(w, 999));
    ck_assert(zp_workers_seen(w, 3 + ZP_SEQ_WINDOW));
    ck_assert(zp_workers_hello(w, 78)); /* restarted: numbers start over */
    ck_assert(!zp_workers_seen(w, 1));
    ck_assert(!zp_workers_seen(w, 1000));
    /* a seq more than the window past the highest sent is a jump */
    ck_assert(!zp_workers_seq_jump(w, ZP_SEQ_WINDOW));
    ck_assert(zp_workers_seq_jump(w, ZP_SEQ_WINDOW + 1));
    zp_workers_note_seq(w, 10);
    zp_workers_note_seq(w, 3); /* lower: nothing changes */
    ck_assert(!zp_workers_seq_jump(w, 10 + ZP_SEQ_WINDOW));
    ck_assert(zp_workers_seq_jump(w, 11 + ZP_SEQ_WINDOW));
    ck_assert(!zp_workers_seq_jump(w, 1));
    ck_assert(zp_workers_seq_jump(w, UINT64_MAX));
    ck_assert(zp_workers_hello(w, 79)); /* a new incarnation starts from 0 again */
    ck_assert(zp_workers_seq_jump(w, 11 + ZP_SEQ_WINDOW));
    zp_workers_fini(&ws);
}
END_TEST

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    Suite *s = suite_create("table");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_slices_cover_table);
    tcase_add_test(tc, test_bad_specs);
    tcase_add_test(tc, test_check_same);
    tcase_add_test(tc, test_copy_on_write);
    tcase_add_test(tc, test_seq_window);
    tcase_add_test(tc, test_dense_load_keeps_rounds);
    tcase_add_test(tc, test_after_put_takes_version);
    tcase_add_test(tc, test_sparse_reset_to_record);
    tcase_add_test(tc, test_sparse_check_same_budget);
    tcase_add_test(tc, test_round_reset_counts_anew);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
