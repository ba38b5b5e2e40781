/*
 * test_sparse_reshard.c - a sparse table through snapshots and resharding,
 * with real processes (docs/snapshots.md): a point-in-time set of a 2-shard
 * async cluster, `zepsctl snapshot reshard` into 3 and into 1 shard, every
 * row carried with its optimizer state, version, touches and clock, and a
 * cluster of the new size that restores the set pulling the same rows and
 * taking one more step to the same bits as the original.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check_main.h"
#include "harness.h"
#include "mathenv.h"
#include "snapshot.h"
#include "zeps.h"

/* A dense table declared before the sparse one, so table ids shift. */
static const zeps_table_spec plain = {
    .name = "x", .length = 8, .optimizer = "sgd", .lr = 1.0, .init = "zeros"};

#define SROWS 300
#define SDIM  6

static const zeps_sparse_spec emb = {.name = "emb",
                                     .dim = SDIM,
                                     .optimizer = "adagrad",
                                     .lr = 0.1,
                                     .init = "uniform",
                                     .init_scale = 0.1,
                                     .seed = 5};

static void sparse_ids(uint64_t *ids)
{
    for (int i = 0; i < SROWS; i++)
        ids[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1); /* spread over the id space */
}

/* One adagrad step on every row: gradient a function of (id, step). */
static void sparse_step(zeps_client *c, uint32_t t, const uint64_t *ids, int step)
{
    static float g[SROWS * SDIM];
    for (int i = 0; i < SROWS; i++)
        for (int j = 0; j < SDIM; j++)
            g[i * SDIM + j] = (float)((int)((ids[i] >> (j + step)) % 7) - 3) * 0.25f;
    ck_assert_int_eq(zeps_spush(c, t, ids, SROWS, g, step), 0);
}

/* Every row record of a set (id -> record bytes), checking each file's rows
 * belong to its shard (the reader checks it too). */
static uint8_t *set_rows(const char *dir, uint64_t setid, int S, uint64_t *n_out)
{
    uint64_t rec = ZP_SNAP_ROW_LEN(SDIM, 1), n = 0;
    uint8_t *all = malloc(SROWS * rec);
    for (int k = 0; k < S; k++) {
        char path[600], err[1024];
        zp_snapshot_path(path, sizeof(path), dir, setid, (uint32_t)k, (uint32_t)S);
        zp_snapshot *snap = NULL;
        ck_assert_msg(zp_snapshot_read(path, &snap, err, sizeof(err)) == 0, "%s", err);
        ck_assert_uint_eq(snap->ntables, 2);
        const zp_snap_table *st = &snap->tables[1];
        ck_assert_uint_eq(st->kind, 1);
        uint64_t m;
        memcpy(&m, st->rows, 8);
        ck_assert_uint_le(n + m, SROWS);
        memcpy(all + n * rec, st->rows + ZP_SNAP_ROWS_HDR, m * rec);
        n += m;
        zp_snapshot_free(&snap);
    }
    *n_out = n;
    return all;
}

static const uint8_t *find_row(const uint8_t *all, uint64_t n, uint64_t id)
{
    uint64_t rec = ZP_SNAP_ROW_LEN(SDIM, 1);
    for (uint64_t i = 0; i < n; i++)
        if (memcmp(all + i * rec, &id, 8) == 0)
            return all + i * rec;
    return NULL;
}

/* zepsctl snapshot reshard of set src into dst (<dir>/snap<S2>) for S2
 * shards; it must succeed. */
static void zepsctl_reshard(const char *dir, const char *src, int S2, char *dst, size_t dstlen)
{
    char cmd[1200], bin[512];
    snprintf(dst, dstlen, "%s/snap%d", dir, S2);
    snprintf(cmd, sizeof(cmd), "%s snapshot reshard %s %s %d > %s/reshard%d.out 2>&1",
             zt_bin("zepsctl", bin, sizeof(bin)), src, dst, S2, dir, S2);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reshard to %d failed", S2);
}

/* Every row of the newest set in dst (S2 shards) identical to rows_a, with
 * its state, version, touches and clock. */
static void rows_carried(const char *dst, int S2, const uint8_t *rows_a, uint64_t na,
                         const uint64_t *ids)
{
    uint64_t rec = ZP_SNAP_ROW_LEN(SDIM, 1);
    zp_manifest *m = NULL;
    char err[1024];
    ck_assert_int_eq(zp_manifest_load(dst, &m, err, sizeof(err)), 0);
    const zp_snap_set *set = zp_manifest_newest(m);
    ck_assert_ptr_nonnull(set);
    uint64_t nb;
    uint8_t *rows_b = set_rows(dst, set->setid, S2, &nb);
    zp_manifest_free(&m);
    ck_assert_uint_eq(nb, SROWS);
    for (int r = 0; r < SROWS; r++) {
        const uint8_t *x = find_row(rows_a, na, ids[r]), *y = find_row(rows_b, nb, ids[r]);
        ck_assert_ptr_nonnull(x);
        ck_assert_msg(y && memcmp(x, y, rec) == 0, "S'=%d: row of id %llu differs", S2,
                      (unsigned long long)ids[r]);
    }
    free(rows_b);
}

/* A cluster of S2 shards restores the set in dst: same rows as `before`,
 * the table's history (rows ever created) comes along, and one more step
 * gives the same bits as on the original (`after_a`). */
static void restore_and_step(const char *dst, int S2, const uint64_t *ids, const float *before,
                             const float *after_a)
{
    char extra[512];
    snprintf(extra, sizeof(extra), "  snapshot_dir = \"%s\";", dst);
    zt_cluster b;
    ck_assert_int_eq(zt_cluster_start(&b, S2, 1, "async", extra, NULL), 0);
    ck_assert(zt_log_has(&b, 0, "restored snapshot set"));
    zeps_client *cb = zt_client(&b, 0);
    ck_assert_ptr_nonnull(cb);
    uint32_t db, tb;
    ck_assert_int_eq(zeps_declare(cb, &plain, &db), 0);
    ck_assert_int_eq(zeps_declare_sparse(cb, &emb, &tb), 0);
    static float got[SROWS * SDIM];
    ck_assert_int_eq(zeps_spull(cb, tb, ids, SROWS, got, 0), 0);
    ck_assert_msg(memcmp(got, before, sizeof(got)) == 0, "S'=%d: pulled rows differ", S2);
    /* the table's history comes along: SROWS rows were ever created */
    uint64_t created = 0;
    for (int k = 0; k < S2; k++) {
        Zeps__ShardStats *ss = zt_stats(cb, k);
        ck_assert_ptr_nonnull(ss);
        for (size_t j = 0; j < ss->n_tables; j++)
            if (ss->tables[j]->kind == 1)
                created += ss->tables[j]->rows_created;
        zeps__shard_stats__free_unpacked(ss, NULL);
    }
    ck_assert_msg(created == SROWS, "S'=%d: %llu rows created after the restore, recorded %d", S2,
                  (unsigned long long)created, SROWS);
    sparse_step(cb, tb, ids, 3);
    ck_assert_int_eq(zeps_spull(cb, tb, ids, SROWS, got, 0), 0);
    ck_assert_msg(memcmp(got, after_a, sizeof(got)) == 0,
                  "S'=%d: one more adagrad step differs: row state not carried", S2);
    zeps_client_destroy(&cb);
    ck_assert_int_eq(zt_cluster_stop(&b), 0);
}

START_TEST(test_sparse_reshard)
{
    zt_cluster a;
    ck_assert_int_eq(zt_cluster_start(&a, 2, 1, "async", "  snapshot_dir = \"@DIR@/snap\";", NULL),
                     0);
    zeps_client *c = zt_client(&a, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t d, t;
    ck_assert_int_eq(zeps_declare(c, &plain, &d), 0); /* a dense table before it */
    ck_assert_int_eq(zeps_declare_sparse(c, &emb, &t), 0);
    uint64_t ids[SROWS];
    sparse_ids(ids);
    for (int step = 0; step < 3; step++)
        sparse_step(c, t, ids, step);
    static float before[SROWS * SDIM];
    ck_assert_int_eq(zeps_spull(c, t, ids, SROWS, before, 0), 0);
    zeps_client *tool = zt_client(&a, ZEPS_RANK_TOOL);
    ck_assert_int_eq(zeps_snapshot_request(tool, -1, 77), 0);
    zeps_client_destroy(&tool);
    for (int k = 0; k < 2; k++)
        ck_assert(
            zt_wait_log(&a, k, "snapshot set 000000000000004d (on request, clock -1) written"));
    /* one more step on the original: the reference for "state carried" */
    sparse_step(c, t, ids, 3);
    static float after_a[SROWS * SDIM];
    ck_assert_int_eq(zeps_spull(c, t, ids, SROWS, after_a, 0), 0);
    zeps_client_destroy(&c);

    char src[400];
    snprintf(src, sizeof(src), "%s/snap", a.dir);
    uint64_t na;
    uint8_t *rows_a = set_rows(src, 77, 2, &na);
    ck_assert_uint_eq(na, SROWS);

    const int sizes[] = {3, 1};
    for (int i = 0; i < 2; i++) {
        char dst[400];
        zepsctl_reshard(a.dir, src, sizes[i], dst, sizeof(dst));
        rows_carried(dst, sizes[i], rows_a, na, ids);
        restore_and_step(dst, sizes[i], ids, before, after_a);
    }
    free(rows_a);
    ck_assert_int_eq(zt_cluster_stop(&a), 0);
}
END_TEST

int main(int argc, char **argv)
{
    (void)argc;
    zp_mathenv_setup(argv);
    Suite *s = suite_create("sparse_reshard");
    TCase *tc = tcase_create("sparse_reshard");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_sparse_reshard);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
