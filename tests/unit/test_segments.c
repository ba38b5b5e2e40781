/*
 * test_segments.c - server/table/segments.c through zp_table_new: a dense
 * table declared with init segments holds, on any shard count, exactly the
 * values each segment would have as a table of its own; bad segments are
 * refused with their words; a re-declaration with other segments is a
 * conflict, one with the same segments is not; a sparse table takes none.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "table.h"
#include "zeps_errors.h"

enum { NSEG = 3 };
static const uint64_t seg_len[NSEG] = {1000, 7, 333};
static const char *const seg_init[NSEG] = {"normal", "zeros", "uniform"};
static const double seg_scale[NSEG] = {0.05, 0.0, 0.3};
static const uint64_t seg_seed[NSEG] = {11, 12, 13};

static Zeps__InitSegment segs[NSEG];
static Zeps__InitSegment *segp[NSEG];

static Zeps__TableSpec flat_spec(void)
{
    Zeps__TableSpec s;
    zeps__table_spec__init(&s);
    s.name = "flat";
    s.optimizer = "sgd";
    s.lr = 0.1;
    for (int i = 0; i < NSEG; i++) {
        zeps__init_segment__init(&segs[i]);
        segs[i].length = seg_len[i];
        segs[i].init = (char *)seg_init[i];
        segs[i].init_scale = seg_scale[i];
        segs[i].seed = seg_seed[i];
        segp[i] = &segs[i];
        s.length += seg_len[i];
    }
    s.n_segments = NSEG;
    s.segments = segp;
    return s;
}

/* The values of segment i as a table of its own, on one shard. */
static float *own_table(int i)
{
    Zeps__TableSpec s;
    zeps__table_spec__init(&s);
    s.name = "own";
    s.optimizer = "sgd";
    s.lr = 0.1;
    s.length = seg_len[i];
    s.init = (char *)seg_init[i];
    s.init_scale = seg_scale[i];
    s.seed = seg_seed[i];
    char err[256];
    zp_table *t;
    ck_assert_int_eq(zp_table_new(&t, 0, &s, 0, 1, 1, err, sizeof(err)), 0);
    float *v = malloc(seg_len[i] * sizeof(float));
    memcpy(v, t->params->data, seg_len[i] * sizeof(float));
    zp_table_destroy(&t);
    return v;
}

START_TEST(test_values_as_own_tables)
{
    float *own[NSEG];
    for (int i = 0; i < NSEG; i++)
        own[i] = own_table(i);
    char err[256];
    for (int S = 1; S <= 3; S++) {
        Zeps__TableSpec sp = flat_spec();
        float *all = calloc(sp.length, sizeof(float));
        for (int k = 0; k < S; k++) {
            zp_table *t;
            ck_assert_int_eq(zp_table_new(&t, 0, &sp, k, S, 1, err, sizeof(err)), 0);
            memcpy(all + t->begin, t->params->data, t->n * sizeof(float));
            zp_table_destroy(&t);
        }
        uint64_t at = 0;
        for (int i = 0; i < NSEG; i++) {
            ck_assert_msg(memcmp(all + at, own[i], seg_len[i] * sizeof(float)) == 0,
                          "segment %d on %d shards differs from its own table", i, S);
            at += seg_len[i];
        }
        ck_assert(all[0] != 0.0f && all[1000] == 0.0f && all[1007] != 0.0f);
        free(all);
    }
    for (int i = 0; i < NSEG; i++)
        free(own[i]);
}
END_TEST

START_TEST(test_refusals_and_conflicts)
{
    char err[256];
    zp_table *t = NULL;
    Zeps__TableSpec sp = flat_spec();
    sp.length += 1; /* segments cover one element less */
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "cover 1340 of 1341"));
    sp = flat_spec();
    sp.length -= 1; /* the last segment does not fit */
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "segment 2 of length 333 does not fit"));
    sp = flat_spec();
    segs[1].init = "gauss";
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "segment 1: initializer 'gauss'"));
    sp = flat_spec();
    segs[0].length = 0;
    segs[1].length = 1007;
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    sp = flat_spec();
    sp.kind = 1;
    sp.dim = 4;
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 1, 1, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "for dense tables"));

    sp = flat_spec();
    ck_assert_int_eq(zp_table_new(&t, 0, &sp, 0, 2, 1, err, sizeof(err)), 0);
    ck_assert_int_eq(zp_table_check_same(t, &sp, err, sizeof(err)), 0);
    segs[2].seed = 14;
    ck_assert_int_eq(zp_table_check_same(t, &sp, err, sizeof(err)), ZEPS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err, "other init segments"));
    sp = flat_spec();
    segs[0].init_scale = 0.06; /* each field of a segment counts */
    ck_assert_int_eq(zp_table_check_same(t, &sp, err, sizeof(err)), ZEPS_ECONFLICT);
    sp = flat_spec();
    segs[1].init = "constant";
    ck_assert_int_eq(zp_table_check_same(t, &sp, err, sizeof(err)), ZEPS_ECONFLICT);
    sp = flat_spec();
    sp.n_segments = 0; /* the same table declared without them */
    ck_assert_int_eq(zp_table_check_same(t, &sp, err, sizeof(err)), ZEPS_ECONFLICT);
    zp_table_destroy(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("segments");
    TCase *tc = tcase_create("segments");
    tcase_add_test(tc, test_values_as_own_tables);
    tcase_add_test(tc, test_refusals_and_conflicts);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
