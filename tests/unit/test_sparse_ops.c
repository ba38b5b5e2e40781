/*
 * test_sparse_ops.c - server/op/sparse_ops.c (with table/rows.c and the
 * policies' sparse hooks), in process through dispatch (inproc.h): the
 * checks of a sparse PULL and PUSH (ids of another shard, repeated ids,
 * sizes that do not fit the table's dim, counts, non-finite gradients), the
 * rows and versions a pull returns, weighted mode's per-row staleness
 * (weights and drops), and bsp's wait for the slowest clock. A cold tier
 * whose disk fills while pushes come (a tmpfs, root only): the push during
 * which a row could not be demoted is answered EIO, not acknowledged, and
 * from then on pulls and pushes of the table are refused; every row made
 * before is still hot or cold.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "http.h"
#include "metrics.h"
#include "inproc.h"
#include "scratch.h"
#include "slotmap.h"
#include "sparse_hash.h"
#include "tiered.h"
#include "zeps_errors.h"

#define DIM 3

/* The first n ids (from 1) that belong (or not) to `shard` of `nshards`. */
static void ids_of(uint64_t *ids, size_t n, int shard, int nshards, bool mine)
{
    size_t k = 0;
    for (uint64_t id = 1; k < n; id++)
        if ((zp_sparse_shard_of(id, nshards) == shard) == mine)
            ids[k++] = id;
}

static zt_shard *start(const char *mode, int nworkers, int nshards)
{
    zt_shard *z = zt_shard_start(zt_config(mode, nworkers, nshards), 0);
    zt_hello(z, 0);
    return z;
}

START_TEST(test_pull_checks)
{
    zt_shard *z = start("async", 1, 2);
    uint32_t t = zt_declare_sparse(z, "emb", DIM);
    uint64_t mine[2], theirs[1];
    ids_of(mine, 2, 0, 2, true);
    ids_of(theirs, 1, 0, 2, false);
    ck_assert_int_eq(zt_spull(z, 0, t, mine, 2, 0), 1);
    zt_reply *r = zt_last(z);
    ck_assert_int_eq(r->h->op, ZEPS__OP__PULL);
    ck_assert_uint_eq(r->len, 2 * (DIM + 1) * 4); /* rows, then u32 versions */
    ck_assert_float_eq(((float *)r->data)[DIM + 1], 0.0f);
    ck_assert_uint_eq(((uint32_t *)r->data)[2 * DIM + 1], 0);
    uint64_t mixed[3] = {mine[0], theirs[0], mine[1]};
    zt_spull(z, 0, t, mixed, 3, 0);
    /* EMOVED: the owner and the map's epoch in the header, the map (the
     * default map of 2 shards) as the payload */
    r = zt_last(z);
    ck_assert_int_eq(r->h->error, ZEPS_EMOVED);
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "position 1"));
    ck_assert_uint_eq(r->h->slot_owner, 1);
    ck_assert_uint_eq(r->h->slot_epoch, 0);
    zp_slotmap *m = NULL;
    char err[128];
    ck_assert_int_eq(zp_slotmap_decode(&m, r->data, r->len, 2, err, sizeof(err)), 0);
    ck_assert_uint_eq(zp_slotmap_slots(m), ZP_SLOTS_DEFAULT);
    ck_assert_int_eq(zp_slotmap_owner(m, theirs[0]), 1);
    ck_assert_int_eq(zp_slotmap_owner(m, mine[0]), 0);
    zp_slotmap_destroy(&m);
    Zeps__Header h = zt_header(z, ZEPS__OP__PULL, 0);
    h.table = t;
    h.count = 0;
    zt_send(z, &h, mine, 8);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANGE);
    h = zt_header(z, ZEPS__OP__PULL, 0);
    h.table = t;
    h.count = 2;
    zt_send(z, &h, mine, 12); /* 1.5 ids */
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ESIZE);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_push_checks)
{
    zt_shard *z = start("async", 1, 1);
    uint32_t t = zt_declare_sparse(z, "emb", DIM);
    zp_table *tb = z->s->tables[t];
    uint64_t ids[2] = {7, 7};
    float g[2 * DIM] = {1, 1, 1, 1, 1, 1};
    zt_spush(z, 0, t, ids, 2, g, 2 * DIM, NULL);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EINVAL); /* repeated */
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "id 7 twice (position 1)"));
    ids[1] = 8;
    zt_spush(z, 0, t, ids, 2, g, 2 * DIM - 1, NULL); /* rows of dim 3, short by one */
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ESIZE);
    g[4] = NAN;
    zt_spush(z, 0, t, ids, 2, g, 2 * DIM, NULL);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ENONFINITE);
    ck_assert_uint_eq(tb->version, 0); /* nothing applied */
    zp_sparse_counters c;
    zp_sparse_get_counters(tb->rows->store, &c);
    ck_assert_uint_eq(c.rows, 0);
    g[4] = 1;
    ck_assert_int_eq(zt_spush(z, 0, t, ids, 2, g, 2 * DIM, NULL), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PUSH);
    ck_assert_uint_eq(zt_last(z)->h->flags, 0);
    ck_assert_uint_eq(tb->version, 1);
    ck_assert_uint_eq(tb->stats.keys_pushed, 2);
    zt_spull(z, 0, t, ids, 2, 0);
    ck_assert_uint_eq(zt_last(z)->h->data_version, 1); /* the table's pushes applied here */
    ck_assert_float_eq(((float *)zt_last(z)->data)[DIM], -1.0f);
    ck_assert_uint_eq(((uint32_t *)zt_last(z)->data)[2 * DIM + 1], 1);
    /* a repeat among ids that have rows is caught as among new ones */
    uint64_t again[3] = {8, 7, 8};
    float g3[3 * DIM] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    zt_spush(z, 0, t, again, 3, g3, 3 * DIM, NULL);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "id 8 twice (position 2)"));
    ck_assert_uint_eq(tb->version, 1);
    zt_shard_free(z);
}
END_TEST

/* weighted: each row scaled by w(tau of that row), a row staler than
 * max_staleness dropped while the others of the push apply. */
START_TEST(test_weighted_rows)
{
    zp_config *cfg = zt_config("weighted", 1, 1);
    cfg->weight_fn = ZP_WEIGHT_INVERSE;
    cfg->max_staleness = 1;
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    uint32_t t = zt_declare_sparse(z, "emb", DIM);
    uint64_t a = 5, ab[2] = {5, 6};
    float g[2 * DIM] = {1, 1, 1, 1, 1, 1};
    uint32_t rv0[2] = {0, 0};
    zt_spush(z, 0, t, &a, 1, g, DIM, rv0); /* a: tau 0, w 1 */
    zt_spush(z, 0, t, &a, 1, g, DIM, rv0); /* a: tau 1, w 1/2 */
    ck_assert_uint_eq(zt_last(z)->h->flags, 0);
    zt_spush(z, 0, t, ab, 2, g, 2 * DIM, rv0); /* a: tau 2, dropped; b: tau 0 */
    ck_assert_uint_eq(zt_last(z)->h->flags, ZP_FLAG_DROPPED);
    zp_table *tb = z->s->tables[t];
    ck_assert_uint_eq(tb->stats.dropped, 1);
    ck_assert_uint_eq(z->s->workers.w[0].dropped, 1);
    zp_sparse_row row;
    ck_assert(zp_sparse_get(tb->rows->store, 5, &row));
    ck_assert_float_eq(row.values[0], -1.5f);
    ck_assert_uint_eq(row.version, 2);
    ck_assert(zp_sparse_get(tb->rows->store, 6, &row));
    ck_assert_float_eq(row.values[2], -1.0f);
    ck_assert_uint_eq(tb->stats.tau.n, 3); /* a twice, b once */
    ck_assert_uint_eq(tb->stats.tau.sum, 1);
    /* by row frequency: a's 1st touch and b's 1st in bucket 0 (tau 0), a's
     * 2nd in bucket 1 (tau 1); the dropped row was not touched */
    ck_assert_uint_eq(tb->stats.tau_by_freq.counts[0][0], 2);
    ck_assert_uint_eq(tb->stats.tau_by_freq.counts[1][1], 1);
    ck_assert_uint_eq(tb->stats.tau_by_freq.counts[1][0], 0);
    ck_assert_uint_eq(zp_hist_freq_used(&tb->stats.tau_by_freq), 2);
    /* and /metrics has them, a series per non-empty frequency bucket */
    zp_http_reply rep = {0};
    zp_metrics_render(z->s, &rep);
    ck_assert_ptr_nonnull(rep.body);
    ck_assert_ptr_nonnull(
        strstr(rep.body, "zeps_row_staleness_versions_count{table=\"emb\",touches=\"1\"} 2\n"));
    const char *b23 = "zeps_row_staleness_versions_bucket{table=\"emb\",touches=\"2-3\",";
    char want[160];
    snprintf(want, sizeof(want), "%sle=\"0\"} 0\n", b23);
    ck_assert_ptr_nonnull(strstr(rep.body, want));
    snprintf(want, sizeof(want), "%sle=\"1\"} 1\n", b23);
    ck_assert_ptr_nonnull(strstr(rep.body, want));
    ck_assert_ptr_null(strstr(rep.body, "touches=\"4-7\""));
    free(rep.body);
    zt_shard_free(z);
}
END_TEST

/* Without row versions every mode applies rows with the full step. */
START_TEST(test_async_rows)
{
    zt_shard *z = start("weighted", 1, 1);
    uint32_t t = zt_declare_sparse(z, "emb", DIM);
    uint64_t a = 5;
    float g[DIM] = {2, 2, 2};
    zt_spush(z, 0, t, &a, 1, g, DIM, NULL);
    zt_spush(z, 0, t, &a, 1, g, DIM, NULL);
    zp_sparse_row row;
    ck_assert(zp_sparse_get(z->s->tables[t]->rows->store, 5, &row));
    ck_assert_float_eq(row.values[1], -4.0f);
    zt_shard_free(z);
}
END_TEST

/* bsp: a sparse pull at clock c waits until every live worker finished
 * clock c - 1 (no rounds for sparse tables), then is served from the
 * parked queue. */
START_TEST(test_bsp_pull_waits)
{
    zt_shard *z = start("bsp", 2, 1);
    zt_hello(z, 1);
    uint32_t t = zt_declare_sparse(z, "emb", DIM);
    uint64_t a = 5;
    ck_assert_int_eq(zt_spull(z, 0, t, &a, 1, 1), 0);
    ck_assert_uint_eq(z->s->tables[t]->parked.n, 1);
    Zeps__Header h = zt_header(z, ZEPS__OP__CLOCK, 0);
    h.clock = 0;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1); /* rank 1 is still at 0 */
    h = zt_header(z, ZEPS__OP__CLOCK, 1);
    h.clock = 0;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 2);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PULL);
    ck_assert_str_eq(zt_last(z)->to, "w0");
    ck_assert_uint_eq(zt_last(z)->len, (DIM + 1) * 4);
    ck_assert_uint_eq(z->s->tables[t]->parked.n, 0);
    /* the served pull's wait is in the table's pull-wait histogram */
    ck_assert_uint_eq(z->s->tables[t]->stats.pull_wait_us.n, 1);
    ck_assert_uint_eq(zt_spull(z, 1, t, &a, 1, 1), 1); /* served at once: waited 0 us */
    ck_assert_uint_eq(z->s->tables[t]->stats.pull_wait_us.n, 2);
    ck_assert_uint_ge(z->s->tables[t]->stats.pull_wait_us.counts[0], 1);
    zt_shard_free(z);
}
END_TEST

#define TIER_DIM 64
#define TIER_N   256 /* ids a push */

/* A PUSH of TIER_N new ids from `first` on, gradients from state *x
 * (random bits: the tier's store cannot compress them away); the reply. */
static const zt_reply *tier_push(zt_shard *z, uint32_t t, uint64_t first, uint64_t *x)
{
    static unsigned char buf[TIER_N * (8 + TIER_DIM * 4)];
    uint64_t *ids = (uint64_t *)buf;
    float *g = (float *)(buf + TIER_N * 8);
    for (int i = 0; i < TIER_N; i++)
        ids[i] = first + (uint64_t)i;
    for (int i = 0; i < TIER_N * TIER_DIM; i++) {
        *x = *x * 6364136223846793005ull + 1442695040888963407ull;
        g[i] = (float)(*x >> 40) / 16777216.0f - 0.5f;
    }
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.table = t;
    h.count = TIER_N;
    ck_assert_int_eq(zt_send(z, &h, buf, sizeof buf), 1);
    return zt_last(z);
}

START_TEST(test_tier_fills)
{
    if (geteuid() != 0) {
        printf("test_tier_fills: skipped (mounting a small tmpfs needs root)\n");
        return;
    }
    char dir[512], cmd[1200];
    zt_scratch_path(dir, sizeof dir, "tier-fills"); /* tier_unmount's */
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=80m tmpfs '%s'", dir);
    if (system(cmd) != 0) {
        printf("test_tier_fills: skipped (no tmpfs mount here)\n");
        return;
    }
    zp_config *cfg = zt_config("async", 1, 1);
    snprintf(cfg->tier_dir, sizeof cfg->tier_dir, "%s", dir);
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = "e";
    spec.kind = 1;
    spec.dim = TIER_DIM;
    spec.optimizer = "sgd";
    spec.lr = 1.0;
    spec.init = "zeros";
    spec.tier = true;
    spec.capacity_rows = 1024;
    Zeps__Header h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_msg(zt_last(z)->h->op == ZEPS__OP__DECLARE, "%s", zt_last(z)->h->error_text);
    uint32_t t = zt_last(z)->h->table;
    zp_table *tb = z->s->tables[t];
    /* 16 MiB to fill before the 64 MiB a tier keeps free: some 60k rows */
    uint64_t x = 1, first = 1, acked = 0;
    const zt_reply *r = NULL;
    for (int k = 0; k < 2000; k++, first += TIER_N) {
        zt_clear(z); /* the replies before are read */
        r = tier_push(z, t, first, &x);
        if (r->h->op != ZEPS__OP__PUSH)
            break;
        acked++;
    }
    ck_assert_msg(r->h->op == ZEPS__OP__ERROR, "the tier never filled (%llu pushes)",
                  (unsigned long long)acked);
    ck_assert_int_eq(r->h->error, ZEPS_EIO);
    ck_assert_msg(strstr(r->h->error_text, "PUSH of sparse table 'e' failed") &&
                      strstr(r->h->error_text, "disk is full"),
                  "the push that filled the tier was answered: %s", r->h->error_text);
    ck_assert_ptr_nonnull(zp_tiered_error(tb->rows));
    /* refused from then on, pulls and pushes alike */
    uint64_t some[2] = {1, first - 1};
    zt_spull(z, 0, t, some, 2, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "PULL of sparse table 'e' refused"));
    r = tier_push(z, t, first + TIER_N, &x);
    ck_assert_int_eq(r->h->error, ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "PUSH of sparse table 'e' refused"));
    /* every row made is hot or cold, those of every acknowledged push among them */
    zp_sparse_counters c;
    zp_sparse_get_counters(tb->rows->store, &c);
    ck_assert_uint_eq(c.rows + zp_tiered_cold_rows(tb->rows), c.created);
    ck_assert_uint_ge(c.created, acked * TIER_N);
    zt_shard_free(z);
    snprintf(cmd, sizeof cmd, "umount '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* In the runner's process after test_tier_fills, passed or failed (a
 * failed assertion ends the test's child before its umount): the scratch
 * root can then be removed. */
static void tier_unmount(void)
{
    char dir[512], cmd[1200];
    zt_scratch_path(dir, sizeof dir, "tier-fills");
    snprintf(cmd, sizeof cmd, "umount -l '%s' 2>/dev/null", dir);
    if (system(cmd) != 0) { /* not mounted: nothing to do */
    }
}

static Suite *suite(void)
{
    Suite *s = suite_create("sparse_ops");
    TCase *tc = tcase_create("ops");
    tcase_add_test(tc, test_pull_checks);
    tcase_add_test(tc, test_push_checks);
    tcase_add_test(tc, test_weighted_rows);
    tcase_add_test(tc, test_async_rows);
    tcase_add_test(tc, test_bsp_pull_waits);
    suite_add_tcase(s, tc);
    TCase *full = tcase_create("tier_fills");
    tcase_set_timeout(full, 120);
    tcase_add_unchecked_fixture(full, NULL, tier_unmount);
    tcase_add_test(full, test_tier_fills);
    suite_add_tcase(s, full);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
