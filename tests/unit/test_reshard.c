/*
 * test_reshard.c - resharding a snapshot set (common/snapshot/reshard.c):
 * S shards cut again for S' against a straightforward reference (the
 * concatenated slices), there and back, and the refusal of mismatched
 * sources.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l/crc.h>

#include "check_main.h"
#include "snap_fixture.h"
#include "snapshot.h"
#include "zeps_errors.h"

/* ---- resharding ---- */

/* The reference: the whole of block q (-1 = params) of table t, by
 * concatenating the sources' slices in shard order. */
static float *concat(zp_snapshot *const *src, uint32_t S, uint32_t t, int q)
{
    uint64_t len = src[0]->tables[t].length, pos = 0;
    float *all = malloc(len * 4 + 4);
    for (uint32_t k = 0; k < S; k++) {
        const zp_snap_table *x = &src[k]->tables[t];
        uint64_t n = x->end - x->begin;
        memcpy(all + pos, q < 0 ? x->params : x->state + (uint64_t)q * n, n * 4);
        pos += n;
    }
    ck_assert_uint_eq(pos, len);
    return all;
}

static void check_against_reference(zp_snapshot *const *src, uint32_t S, zp_snapshot *const *dst,
                                    uint32_t S2)
{
    for (uint32_t t = 0; t < ZT_SNAP_NT; t++) {
        for (int q = -1; q < (int)zt_snap_tables[t].spp; q++) {
            float *all = concat(src, S, t, q);
            for (uint32_t j = 0; j < S2; j++) {
                const zp_snap_table *x = &dst[j]->tables[t];
                uint64_t n = x->end - x->begin;
                ck_assert_uint_eq(x->begin, zt_snap_tables[t].length * j / S2);
                ck_assert_uint_eq(x->end, zt_snap_tables[t].length * (j + 1) / S2);
                const float *got = q < 0 ? x->params : x->state + (uint64_t)q * n;
                ck_assert_msg(memcmp(got, all + x->begin, n * 4) == 0,
                              "table %s block %d shard %u of %u", zt_snap_tables[t].name, q, j, S2);
            }
            free(all);
        }
    }
}

static void reshard_all(zp_snapshot *const *src, uint32_t S, zp_snapshot **dst, uint32_t S2)
{
    char err[512];
    for (uint32_t j = 0; j < S2; j++) {
        int rc =
            zp_reshard_build((const zp_snapshot *const *)src, S, j, S2, &dst[j], err, sizeof(err));
        ck_assert_msg(rc == 0, "reshard: %s", err);
        ck_assert_uint_eq(dst[j]->h.shard, j);
        ck_assert_uint_eq(dst[j]->h.nshards, S2);
    }
}

/* 2 shards -> 3 and -> 1 against the reference; 3 -> 2 gives back the
 * original bytes; the result is a valid snapshot. */
START_TEST(test_reshard)
{
    zt_snap_dir_make();
    zt_snap_fx f[2];
    zp_snapshot *src[2], *three[3], *one[1], *back[2];
    for (uint32_t k = 0; k < 2; k++) {
        zt_snap_fx_make(&f[k], 5, k, 2, 77);
        f[k].s->tables[0].version = 1000 + 5 * k; /* slices may differ */
        src[k] = f[k].s;
    }
    /* The fixture is the same data however it is cut. */
    float *a = concat(src, 2, 0, 1);
    for (uint64_t i = 0; i < zt_snap_tables[0].length; i++)
        ck_assert(a[i] == zt_snap_val(0, 1, i, 77));
    free(a);

    reshard_all(src, 2, three, 3);
    check_against_reference(src, 2, three, 3);
    reshard_all(src, 2, one, 1);
    check_against_reference(src, 2, one, 1);
    ck_assert_uint_eq(one[0]->tables[3].end, 1);

    /* Versions: the max of the sources'; workers merged, dedup afresh. */
    ck_assert_uint_eq(three[1]->tables[0].version, 1005);
    ck_assert_uint_eq(three[1]->tables[1].version, 101);
    ck_assert_uint_eq(three[2]->nworker_recs, 3);
    for (uint32_t r = 0; r < 3; r++) {
        const zp_snap_worker *w = &three[2]->workers[r];
        ck_assert_uint_eq(w->rank, r);
        ck_assert_int_eq(w->clock, 41 + r); /* max over shards 0 and 1 */
        ck_assert_uint_eq(w->incarnation, 0x1000 + r);
        ck_assert(!w->joined);
        ck_assert_int_eq(w->left, r == 2);
        ck_assert_uint_eq(w->max_seq, 0);
        ck_assert_uint_eq(w->window, 0);
    }
    ck_assert_uint_eq(three[0]->h.incarnation, 0xabcdef01ull);
    ck_assert_int_eq(three[0]->h.clock, 42);

    /* 2 -> 3 -> 2 gives back the original bytes. */
    reshard_all(three, 3, back, 2);
    for (uint32_t k = 0; k < 2; k++)
        for (uint32_t t = 0; t < ZT_SNAP_NT; t++)
            zt_snap_assert_tables_equal(&back[k]->tables[t], &src[k]->tables[t]);

    /* A resharded record is a valid snapshot. */
    char path[512], err[512];
    three[2]->h.setid = 6;
    zt_snap_write_ok(three[2], path, sizeof(path));
    zp_snapshot *r = NULL;
    ck_assert_int_eq(zp_snapshot_read(path, &r, err, sizeof(err)), 0);
    for (uint32_t t = 0; t < ZT_SNAP_NT; t++)
        zt_snap_assert_tables_equal(&r->tables[t], &three[2]->tables[t]);
    zp_snapshot_free(&r);

    for (int j = 0; j < 3; j++)
        zp_snapshot_free(&three[j]);
    zp_snapshot_free(&one[0]);
    for (int k = 0; k < 2; k++) {
        zp_snapshot_free(&back[k]);
        zt_snap_fx_free(&f[k]);
    }
    zt_snap_dir_remove();
}
END_TEST

/* Sources out of order or from different cuts are refused. */
START_TEST(test_reshard_refused)
{
    zt_snap_fx f[2];
    zp_snapshot *src[2], *r = NULL;
    char err[512];
    for (uint32_t k = 0; k < 2; k++) {
        zt_snap_fx_make(&f[k], 5, k, 2, 77);
        f[k].s->tables[0].version = 1000 + 5 * k; /* slices may differ */
        src[k] = f[k].s;
    }
    zp_snapshot *swapped[2] = {src[1], src[0]};
    ck_assert_int_eq(
        zp_reshard_build((const zp_snapshot *const *)swapped, 2, 0, 3, &r, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "expected 0 of 2"));
    src[1]->h.clock = 43;
    ck_assert_int_eq(
        zp_reshard_build((const zp_snapshot *const *)src, 2, 0, 3, &r, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "same cut"));
    src[1]->h.clock = 42;
    snprintf(src[1]->tables[2].optimizer, 16, "adam");
    ck_assert_int_eq(
        zp_reshard_build((const zp_snapshot *const *)src, 2, 0, 3, &r, err, sizeof(err)),
        ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "'emb'"));
    ck_assert_ptr_null(r);
    for (int k = 0; k < 2; k++)
        zt_snap_fx_free(&f[k]);
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    Suite *s = suite_create("reshard");
    TCase *tc = tcase_create("reshard");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_reshard);
    tcase_add_test(tc, test_reshard_refused);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
