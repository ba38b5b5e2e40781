/*
 * test_slots.c - slots and redirects with real shards (docs/elastic.md):
 * two shards started with a slot map file that gives shard 1 slots the
 * default map gives shard 0. Each client starts from the default map: its
 * first push, its first pull (both row layouts), and the push of a batch
 * cut before it knew the map are refused with EMOVED, and it sends the ids
 * again to their owners (counted once each); every row lives on its owner
 * under the file's map, every push is applied exactly once (sgd from
 * zeros: the rows are minus the sums of the gradients, the keys pushed
 * each distinct id once per push), and a batch cut after the map came
 * needs no redirect. When the shards disagree (a piece is refused again) the
 * redirect is not followed a second time: the caller gets EMOVED.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>

#include "check_main.h"
#include "harness.h"
#include "rng.h"
#include "scratch.h"
#include "slotmap.h"
#include "zeps.h"

#define DIM 4
#define N   3000

static char mapdir[200], mappath[320], extra[400];

/* Map A (epoch 3): slots below 1024 on shard 1, the others as by default. */
static int own_a(uint32_t n)
{
    return n < 1024 ? 1 : (int)(n % 2);
}

/* Map B (epoch 4): the default's owners again. */
static int own_b(uint32_t n)
{
    return (int)(n % 2);
}

static void write_map(uint64_t epoch, int (*own)(uint32_t))
{
    FILE *f = fopen(mappath, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "# test map\nepoch %llu\nslots 4096\n", (unsigned long long)epoch);
    for (uint32_t n = 0; n < 4096; n++)
        fprintf(f, "%u %d\n", n, own(n));
    ck_assert_int_eq(fclose(f), 0);
}

static void start(zt_cluster *cl)
{
    ck_assert_int_eq(zt_scratch_dir(mapdir, sizeof(mapdir), "slots"), 0);
    snprintf(mappath, sizeof(mappath), "%s/slots.map", mapdir);
    write_map(3, own_a);
    snprintf(extra, sizeof(extra), "slot_map = \"%s\";", mappath);
    ck_assert_int_eq(zt_cluster_start(cl, 2, 1, "async", extra, NULL), 0);
}

static uint32_t declare(zeps_client *c)
{
    zeps_sparse_spec spec = {
        .name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    return t;
}

static zeps_client_stats stats(const zeps_client *c)
{
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    return st;
}

/* N ids, the last 10 repeating the first 10. */
static void make_ids(uint64_t *ids)
{
    zp_rng r;
    zp_rng_seed(&r, 5, 0, 0);
    for (int i = 0; i < N; i++)
        ids[i] = i >= N - 10 ? ids[i - (N - 10)] : zp_rng_next(&r);
}

static void make_grads(float *g)
{
    for (int i = 0; i < N; i++)
        for (int d = 0; d < DIM; d++)
            g[i * DIM + d] = (float)(i % 7 + 1) * 0.25f + (float)d;
}

/* Rows must be `times` pushes of g from zeros under sgd with lr 1. */
static void check_rows(const uint64_t *ids, const float *g, const float *rows, int times)
{
    for (int i = 0; i < N; i++)
        for (int d = 0; d < DIM; d++) {
            float sum = 0;
            for (int j = 0; j < N; j++)
                if (ids[j] == ids[i])
                    sum += g[j * DIM + d];
            ck_assert_msg(rows[i * DIM + d] == -(float)times * sum,
                          "id %llu dim %d: %g, expected %g", (unsigned long long)ids[i], d,
                          rows[i * DIM + d], -(float)times * sum);
        }
}

/* Every shard holds the rows its map gives it, and the pushes applied
 * name each distinct id `times` times in all. */
static void check_placement(zeps_client *c, const uint64_t *ids, uint64_t times)
{
    zp_slotmap *a = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_load(&a, mappath, 2, err, sizeof(err)), 0);
    uint64_t want[2] = {0, 0}, keys = 0;
    for (int i = 0; i < N - 10; i++) /* the last 10 repeat */
        want[zp_slotmap_owner(a, ids[i])]++;
    ck_assert_uint_gt(want[0], 0);
    for (int k = 0; k < 2; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        ck_assert_msg(st->tables[0]->rows == want[k], "shard %d holds %llu rows, its map %llu", k,
                      (unsigned long long)st->tables[0]->rows, (unsigned long long)want[k]);
        keys += st->tables[0]->keys_pushed;
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    ck_assert_uint_eq(keys, times * (N - 10));
    zp_slotmap_destroy(&a);
}

/* Rows pushed with row versions on the two shards (tau measured). */
static uint64_t tau_count(zeps_client *c)
{
    uint64_t n = 0;
    for (int k = 0; k < 2; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        n += st->tables[0]->tau ? st->tables[0]->tau->n : 0;
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    return n;
}

/* The rows of ids through a batch's unique-rows pull, by position. */
static void pull_unique(zeps_client *c, uint32_t t, const uint64_t *ids, float *rows)
{
    static float urows[N * DIM];
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_int_eq(zeps_sbatch_pull_unique(b, urows, 1), 0);
    const uint32_t *pos = zeps_sbatch_positions(b);
    for (int i = 0; i < N; i++)
        memcpy(rows + i * DIM, urows + (size_t)pos[i] * DIM, DIM * sizeof(float));
    zeps_sbatch_free(&b);
}

START_TEST(test_redirects_followed_once_each)
{
    zt_cluster cl;
    start(&cl);
    static uint64_t ids[N];
    static float g[N * DIM], rows[N * DIM];
    make_ids(ids);
    make_grads(g);
    /* a client whose first call is a push */
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    ck_assert_uint_eq(stats(c).slot_epoch, 0);
    ck_assert_int_eq(zeps_spush(c, t, ids, N, g, 0), 0);
    ck_assert_uint_eq(stats(c).slot_redirects, 1);
    ck_assert_uint_eq(stats(c).slot_epoch, 3);
    check_placement(c, ids, 1);
    zeps_client_destroy(&c);

    /* a new client: a batch cut by the default map (shard 0's part holds
     * ids of slots shard 1 owns now), pulled, then pushed with the row
     * versions its pull read */
    c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    t = declare(c);
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c, t, ids, N, &b), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), 0);
    ck_assert_uint_eq(stats(c).slot_redirects, 1);
    check_rows(ids, g, rows, 1);
    ck_assert_int_eq(zeps_sbatch_push(b, g, 0), 0);
    ck_assert_uint_eq(stats(c).slot_redirects, 2);
    /* the pull counted as complete: the push carried its row versions,
     * the pieces' too (the shards measured tau for every distinct row) */
    ck_assert_uint_eq(tau_count(c), N - 10);
    zeps_sbatch_free(&b);
    /* a batch cut by the map from the shards: no redirect */
    ck_assert_int_eq(zeps_spull(c, t, ids, N, rows, 1), 0);
    ck_assert_uint_eq(stats(c).slot_redirects, 2);
    check_rows(ids, g, rows, 2);
    check_placement(c, ids, 2);
    zeps_client_destroy(&c);

    /* a third: the unique-rows pull, redirected */
    c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    t = declare(c);
    pull_unique(c, t, ids, rows);
    ck_assert_uint_eq(stats(c).slot_redirects, 1);
    check_rows(ids, g, rows, 2);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* An id whose slot is below 1024 and that the default map gives shard 0. */
static uint64_t moved_id(void)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint64_t x = 1;
    while (zp_slotmap_slot_of(d, x) >= 1024 || zp_slotmap_owner(d, x) != 0)
        x++;
    zp_slotmap_destroy(&d);
    return x;
}

START_TEST(test_redirect_not_followed_twice)
{
    zt_cluster cl;
    start(&cl);
    /* shard 1 restarts with map B: it gives the slot back to shard 0,
     * which still holds map A: the shards disagree */
    ck_assert_int_eq(zt_server_kill(&cl, 1, SIGTERM), 0);
    write_map(4, own_b);
    ck_assert_int_eq(zt_server_start(&cl, 1), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    uint64_t x = moved_id();
    float row[DIM];
    ck_assert_int_eq(zeps_spull(c, t, &x, 1, row, 0), ZEPS_EMOVED);
    ck_assert_msg(strstr(zeps_last_error(c), "shard 0 owns at slot map epoch 4, not shard 1"), "%s",
                  zeps_last_error(c));
    ck_assert_uint_eq(stats(c).slot_redirects, 1);
    ck_assert_uint_eq(stats(c).slot_epoch, 4); /* the newest map seen */
    /* and again: shard 0 (epoch 3) redirects, the resend goes to shard 0
     * by the client's newer map, and is refused once more */
    ck_assert_int_eq(zeps_spull(c, t, &x, 1, row, 0), ZEPS_EMOVED);
    ck_assert_uint_eq(stats(c).slot_redirects, 2);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("slots");
    TCase *tc = tcase_create("slots");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_redirects_followed_once_each);
    tcase_add_test(tc, test_redirect_not_followed_twice);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
