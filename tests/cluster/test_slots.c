/*
 * test_slots.c - slots and redirects with real shards (docs/elastic.md).
 *
 * Two shards start with the default map and three clients connect; then a
 * tool sends both shards a map (SLOTS, epoch 3) that gives shard 1 slots
 * the default map gives shard 0, while no rows exist. Each client still
 * holds the default map: its first push, its first pull (both row
 * layouts), and the push of a batch cut before it knew the map are
 * refused with EMOVED, and it sends the ids again to their owners (counted
 * once each); every row lives on its owner under the new map, every push
 * is applied exactly once (sgd from zeros: the rows are minus the sums of
 * the gradients, the keys pushed each distinct id once per push), and a
 * batch cut after the map came needs no redirect. A client that connects
 * afterwards has the map from HELLO and is never redirected. A map that
 * would move rows away, is not newer or has another slot count is refused
 * and changes nothing; a newer one that moves no row is taken while the
 * shards hold rows. Under bsp a map that gives away a slot of a held
 * push is refused.
 * Shards started with a map file learn it at start; when two disagree the
 * redirect is not followed a second time: the caller gets EMOVED. A piece
 * refused by a newer map than the one it was split by goes on (moves in
 * a row): a push refused twice is applied once, where the newest map says.
 * A shard left with no slot but a dense table's slice still gets CLOCKs;
 * a map naming a joined shard that does not answer is not taken; one
 * request redirected by both shards is applied once where the map says.
 * A pipe step's push, which carries the step's clock, is followed too.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>

#include "check_main.h"
#include "harness.h"
#include "rng.h"
#include "rawreq.h"
#include "scratch.h"
#include "slot_ids.h"
#include "slotmap.h"
#include "wire.h"
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

/* The map of `epoch` made by `own`, through the map file's parser. */
static zp_slotmap *map_of(uint64_t epoch, int (*own)(uint32_t))
{
    char text[64 * 1024];
    size_t n =
        (size_t)snprintf(text, sizeof(text), "epoch %llu\nslots 4096\n", (unsigned long long)epoch);
    for (uint32_t i = 0; i < 4096; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%u %d\n", i, own(i));
    zp_slotmap *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_parse(&m, text, n, 2, err, sizeof(err)), 0);
    return m;
}

static void start(zt_cluster *cl)
{
    ck_assert_int_eq(zt_scratch_dir(mapdir, sizeof(mapdir), "slots"), 0);
    snprintf(mappath, sizeof(mappath), "%s/slots.map", mapdir);
    write_map(3, own_a);
    snprintf(extra, sizeof(extra), "slot_map = \"%s\";", mappath);
    ck_assert_int_eq(zt_cluster_start(cl, 2, 1, "async", extra, NULL), 0);
}

/* Send shard k the map of `epoch` over `slots` slots made by `own` as a
 * tool's SLOTS; the reply's header (the caller frees it). */
static Zeps__Header *send_slots_n(const zt_cluster *cl, int k, uint64_t epoch, int (*own)(uint32_t),
                                  uint32_t slots)
{
    static unsigned char map[16 + 2 * 4096];
    uint64_t shards = 2;
    for (int i = 0; i < 8; i++)
        map[i] = (unsigned char)(epoch >> (8 * i));
    for (int i = 0; i < 4; i++) {
        map[8 + i] = (unsigned char)(slots >> (8 * i));
        map[12 + i] = (unsigned char)(shards >> (8 * i));
    }
    for (uint32_t n = 0; n < slots; n++) {
        map[16 + 2 * n] = (unsigned char)own(n);
        map[17 + 2 * n] = 0;
    }
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__SLOTS);
    return zt_raw_req_once(cl, k, &h, map, 16 + 2 * (size_t)slots);
}

static Zeps__Header *send_slots(const zt_cluster *cl, int k, uint64_t epoch, int (*own)(uint32_t))
{
    return send_slots_n(cl, k, epoch, own, 4096);
}

static void slots_ok(const zt_cluster *cl, int k, uint64_t epoch, int (*own)(uint32_t))
{
    Zeps__Header *rep = send_slots(cl, k, epoch, own);
    ck_assert_msg(rep->op == ZEPS__OP__SLOTS, "SLOTS to shard %d: %s", k,
                  rep->error_text ? rep->error_text : "?");
    zeps__header__free_unpacked(rep, NULL);
}

static uint32_t declare(zeps_client *c)
{
    zeps_sparse_spec spec = {
        .name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    return t;
}

/* A cluster of `shards` shards (async, one worker) in cl; the worker's
 * client (with options o, or none) and its table "emb", in *t. */
static zeps_client *one_worker(zt_cluster *cl, int shards, zeps_options *o, uint32_t *t)
{
    ck_assert_int_eq(zt_cluster_start(cl, shards, 1, "async", NULL, NULL), 0);
    zeps_client *c = o ? zt_client_opts(cl, 0, o) : zt_client(cl, 0);
    ck_assert_ptr_nonnull(c);
    *t = declare(c);
    return c;
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
    zp_slotmap *a = map_of(3, own_a);
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

/* Shard k's version of the table (the pushes it applied), by STATS. */
static uint64_t table_version(zeps_client *c, int k)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    uint64_t v = st->tables[0]->version;
    zeps__shard_stats__free_unpacked(st, NULL);
    return v;
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

/* After test_redirects_followed_once_each's map change: a client that
 * connects has the map from HELLO; maps that would move rows away or are
 * not newer are refused and change nothing. */
static void after_the_change(const zt_cluster *cl, zeps_client **c, uint32_t *t,
                             const uint64_t *ids, const float *g, float *rows)
{
    /* a client that connects now has the map from HELLO */
    zeps_client_destroy(&c[2]);
    c[2] = zt_client(cl, 2);
    ck_assert_ptr_nonnull(c[2]);
    ck_assert_uint_eq(zt_client_stats(c[2]).slot_epoch, 3);
    t[2] = declare(c[2]);
    ck_assert_int_eq(zeps_spull(c[2], t[2], ids, N, rows, 1), 0);
    ck_assert_uint_eq(zt_client_stats(c[2]).slot_redirects, 0);
    check_rows(ids, g, rows, 2);

    /* refused, changing nothing: a map that would move rows away (back to
     * the default owners: shard 1 holds rows of those slots), one that is
     * not newer, one of another slot count */
    zt_raw_expect_error(send_slots(cl, 1, 4, own_b), ZEPS_ESTATE,
                        "in slots the map of epoch 4 gives to other shards");
    zt_raw_expect_error(send_slots(cl, 0, 3, own_b), ZEPS_ESTALE,
                        "slot map epoch 3 is not newer than shard 0's 3");
    zt_raw_expect_error(send_slots_n(cl, 0, 5, own_a, 2048), ZEPS_EINVAL,
                        "a map of 2048 slots; shard 0's has 4096");
    ck_assert_int_eq(zeps_spull(c[1], t[1], ids, N, rows, 1), 0);
    ck_assert_uint_eq(zt_client_stats(c[1]).slot_redirects, 2);
    check_rows(ids, g, rows, 2);
    check_placement(c[1], ids, 2);

    /* a newer map that leaves every row where it is (map A again, epoch
     * 4, while both shards hold rows): taken, and nothing is redirected */
    slots_ok(cl, 0, 4, own_a);
    slots_ok(cl, 1, 4, own_a);
    ck_assert_int_eq(zeps_spull(c[1], t[1], ids, N, rows, 1), 0);
    ck_assert_uint_eq(zt_client_stats(c[1]).slot_redirects, 2);
    check_rows(ids, g, rows, 2);
    check_placement(c[1], ids, 2);
}

START_TEST(test_redirects_followed_once_each)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 3, "async", NULL, NULL), 0);
    static uint64_t ids[N];
    static float g[N * DIM], rows[N * DIM];
    make_ids(ids);
    make_grads(g);
    zeps_client *c[3];
    uint32_t t[3];
    for (int w = 0; w < 3; w++) {
        c[w] = zt_client(&cl, (uint32_t)w);
        ck_assert_ptr_nonnull(c[w]);
        t[w] = declare(c[w]);
        ck_assert_uint_eq(zt_client_stats(c[w]).slot_epoch, 0);
    }
    /* the map changes while the clients hold the default one */
    slots_ok(&cl, 0, 3, own_a);
    slots_ok(&cl, 1, 3, own_a);
    for (int k = 0; k < 2; k++) { /* STATS reports it */
        Zeps__ShardStats *st = zt_stats(c[0], k);
        ck_assert_ptr_nonnull(st);
        ck_assert_uint_eq(st->slot_epoch, 3);
        ck_assert_uint_eq(st->slots, 4096);
        ck_assert_uint_eq(st->slots_owned, k == 0 ? 1536 : 2560);
        zeps__shard_stats__free_unpacked(st, NULL);
    }

    /* worker 0's first call is a push */
    ck_assert_int_eq(zeps_spush(c[0], t[0], ids, N, g, 0), 0);
    ck_assert_uint_eq(zt_client_stats(c[0]).slot_redirects, 1);
    ck_assert_uint_eq(zt_client_stats(c[0]).slot_epoch, 3);
    check_placement(c[0], ids, 1);

    /* worker 1: a batch cut by the default map (shard 0's part holds ids
     * of slots shard 1 owns now), pulled, then pushed with the row
     * versions its pull read */
    zeps_sbatch *b;
    ck_assert_int_eq(zeps_sbatch_new(c[1], t[1], ids, N, &b), 0);
    ck_assert_int_eq(zeps_sbatch_pull(b, rows, 0), 0);
    ck_assert_uint_eq(zt_client_stats(c[1]).slot_redirects, 1);
    check_rows(ids, g, rows, 1);
    for (int k = 0; k < 2; k++) /* what each shard's part read, the pieces' too */
        ck_assert_uint_eq(zeps_pulled_version(c[1], t[1], k), table_version(c[1], k));
    ck_assert_int_eq(zeps_sbatch_push(b, g, 0), 0);
    ck_assert_uint_eq(zt_client_stats(c[1]).slot_redirects, 2);
    /* the pull counted as complete: the push carried its row versions,
     * the pieces' too (the shards measured tau for every distinct row) */
    ck_assert_uint_eq(tau_count(c[1]), N - 10);
    zeps_sbatch_free(&b);
    /* a batch cut by the map from the shards: no redirect */
    ck_assert_int_eq(zeps_spull(c[1], t[1], ids, N, rows, 1), 0);
    ck_assert_uint_eq(zt_client_stats(c[1]).slot_redirects, 2);
    check_rows(ids, g, rows, 2);
    check_placement(c[1], ids, 2);

    /* worker 2: the unique-rows pull, redirected */
    pull_unique(c[2], t[2], ids, rows);
    ck_assert_uint_eq(zt_client_stats(c[2]).slot_redirects, 1);
    check_rows(ids, g, rows, 2);

    after_the_change(&cl, c, t, ids, g, rows);
    for (int w = 0; w < 3; w++)
        zeps_client_destroy(&c[w]);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* An id whose slot is below 1024 (map A gives it to shard 1) and that
 * the default map gives shard 0. */
static uint64_t moved_id(void)
{
    return zt_slot_id_on(2, 0, 1024, 0);
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
    /* the newest map of the HELLO replies (shard 1's) places x on shard
     * 0, which refuses it by its own (older) map; the resend goes to shard
     * 0 again by the client's map, and is refused once more */
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 4);
    ck_assert_int_eq(zeps_spull(c, t, &x, 1, row, 0), ZEPS_EMOVED);
    ck_assert_msg(strstr(zeps_last_error(c), "shard 1 owns at slot map epoch 3, not shard 0"), "%s",
                  zeps_last_error(c));
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 1);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 4); /* never back to an older map */
    /* and again, the same way */
    ck_assert_int_eq(zeps_spull(c, t, &x, 1, row, 0), ZEPS_EMOVED);
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 2);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* The first two ids that the default map of 3 shards gives shard 0. */
static void two_on_shard_0(uint64_t *ids)
{
    ids[0] = zt_slot_id_on(3, 0, UINT32_MAX, 0);
    ids[1] = zt_slot_id_on(3, 0, UINT32_MAX, ids[0]);
}

/* Moves in a row: a piece goes on by a newer map than the one it was
 * split by. Three shards; the client holds the default map (x and y on
 * shard 0). Shard 0 takes E1 (their slots to shard 1), shards 1 and 2
 * take E2 (on to shard 2): the window between two moves' commits. A push
 * of y is refused by shard 0 (E1), its piece by shard 1 (E2), and the
 * piece's piece is applied by shard 2, once; then x and y are read there
 * without a redirect. */
START_TEST(test_redirect_followed_by_newer_maps)
{
    zt_cluster cl;
    uint32_t t;
    zeps_client *c = one_worker(&cl, 3, NULL, &t);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    uint64_t ids[2];
    two_on_shard_0(ids);
    zp_slotmap *m1 = zt_slot_map_giving(d, ids, 2, 1), *m2 = zt_slot_map_giving(m1, ids, 2, 2);
    ck_assert_int_eq(zt_raw_slots(&cl, 0, m1), 0);
    ck_assert_int_eq(zt_raw_slots(&cl, 1, m2), 0);
    ck_assert_int_eq(zt_raw_slots(&cl, 2, m2), 0);
    float g[DIM] = {1, 2, 3, 4}, rows[2 * DIM];
    ck_assert_msg(zeps_spush(c, t, &ids[1], 1, g, 0) == 0, "%s", zeps_last_error(c));
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 2);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 2);
    ck_assert_msg(zeps_spull(c, t, ids, 2, rows, 0) == 0, "%s", zeps_last_error(c));
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 2); /* the map of E2 places both */
    for (int k = 0; k < DIM; k++) {
        ck_assert(rows[k] == 0.0f);        /* x: never pushed */
        ck_assert(rows[DIM + k] == -g[k]); /* y: pushed once */
    }
    zp_slotmap_destroy(&m2);
    zp_slotmap_destroy(&m1);
    zp_slotmap_destroy(&d);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* A map naming a joined shard that does not answer: the client that
 * learns it from EMOVED cannot reach that shard, so it keeps the map it
 * had and its push fails EMOVED; the map it could not take is freed (the
 * ASan tree's LeakSanitizer runs this). */
START_TEST(test_map_with_unreachable_shard)
{
    zt_cluster cl;
    zeps_options o = {.hello_timeout_ms = 500};
    uint32_t t;
    zeps_client *c = one_worker(&cl, 2, &o, &t);
    char dead[64], why[256];
    snprintf(dead, sizeof(dead), "tcp://127.0.0.1:%d", zt_free_port());
    zp_slotmap *base = NULL, *joined = NULL, *next = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&base, 2), 0);
    ck_assert_int_eq(zp_slotmap_joined(base, dead, &joined, why, sizeof(why)), 0);
    uint64_t id = moved_id();
    next = zt_slot_map_giving(joined, &id, 1, 2);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(zt_raw_slots(&cl, k, next), 0);
    float g[DIM] = {1, 1, 1, 1};
    ck_assert_int_eq(zeps_spush(c, t, &id, 1, g, 0), ZEPS_EMOVED);
    ck_assert_int_eq(zeps_num_shards(c), 2);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 0);
    zp_slotmap_destroy(&base);
    zp_slotmap_destroy(&joined);
    zp_slotmap_destroy(&next);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Slots 0 and 1 swapped between the shards, the others as by default. */
static int own_swap(uint32_t n)
{
    return n < 2 ? (int)(1 - n) : (int)(n % 2);
}

/* One request redirected on both shards: a push of an id of slot 0 and
 * one of slot 1, each refused by the shard the default map names, is
 * applied once to each row where the new map says (and the second
 * redirect's follow-up keeps the first's in its chain, freed with the
 * request: LeakSanitizer in the ASan tree). */
START_TEST(test_redirected_on_both_shards)
{
    zt_cluster cl;
    uint32_t t;
    zeps_client *c = one_worker(&cl, 2, NULL, &t);
    uint64_t ids[2] = {zt_slot_id_in(2, 0, 0), zt_slot_id_in(2, 1, 0)};
    slots_ok(&cl, 0, 3, own_swap);
    slots_ok(&cl, 1, 3, own_swap);
    float g[2 * DIM] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[2 * DIM];
    ck_assert_int_eq(zeps_spush(c, t, ids, 2, g, 0), 0);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 3);
    ck_assert_int_eq(zeps_spull(c, t, ids, 2, rows, 0), 0);
    for (int i = 0; i < 2 * DIM; i++)
        ck_assert_float_eq(rows[i], -g[i]);
    for (int k = 0; k < 2; k++) { /* each row where the new map says */
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        ck_assert_uint_eq(st->tables[0]->rows, 1);
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Every slot on shard 0. */
static int own_all0(uint32_t n)
{
    (void)n;
    return 0;
}

/* A shard that owns no slot but holds its slice of a dense table still
 * gets each CLOCK (only one with neither is left out: docs/elastic.md):
 * with every slot on shard 0 (epoch 3, before any row), a clock finished
 * is recorded by both shards. */
START_TEST(test_clock_to_dense_slice)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    slots_ok(&cl, 0, 3, own_all0);
    slots_ok(&cl, 1, 3, own_all0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 3); /* from HELLO */
    zeps_table_spec sp = {.name = "d", .length = 100, .optimizer = "sgd", .lr = 1.0};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    ck_assert_int_eq(zeps_clock(c, 0), 0);
    for (int k = 0; k < 2; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        ck_assert_uint_eq(st->slots_owned, k == 0 ? 4096 : 0);
        ck_assert_msg(st->n_workers >= 1 && st->workers[0]->clock == 1,
                      "shard %d: worker 0 at clock %lld", k,
                      st->n_workers ? (long long)st->workers[0]->clock : -1LL);
        zeps__shard_stats__free_unpacked(st, NULL);
    }
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Worker rank 0's clock at shard k (STATS). */
static int64_t shard_clock(zeps_client *c, int k)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    int64_t clock = -1;
    for (size_t i = 0; i < st->n_workers; i++)
        if (st->workers[i]->rank == 0)
            clock = st->workers[i]->clock;
    zeps__shard_stats__free_unpacked(st, NULL);
    return clock;
}

/* `zepsctl shards move` of slots a and b from shard 0 to shard 1. */
static void move_slots(const zt_cluster *cl, uint32_t a, uint32_t b)
{
    char bin[512], set[64], log[400];
    zt_bin("zepsctl", bin, sizeof(bin));
    snprintf(set, sizeof(set), "%u,%u", a, b);
    snprintf(log, sizeof(log), "%s/move.log", cl->dir);
    char *argv[] = {bin, "shards",  "move", "--config", (char *)cl->conf, "--from", "0", "--to",
                    "1", "--slots", set,    NULL};
    ck_assert_int_eq(zt_wait(zt_spawn(bin, argv, log), 60), 0);
}

/* A zeps_pipe step's push carries its clock (push_clock.h). Step 0 is fed
 * and pulled (its batch cut by the default map: both ids on shard 0),
 * then `zepsctl shards move` gives their slots to shard 1: the step's
 * push, cut before the map came and carrying the clock, is refused by
 * shard 0 and sent on to shard 1 without the clock, once. Step 1, cut by
 * the new map, brings every shard to clock 2. Then every slot of shard 2
 * goes to shard 0 (a removed shard): step 2's CLOCK brings the client that
 * map, and step 3 sends shard 2 no CLOCK (it may be stopped). Each row
 * holds the four steps' gradients exactly once. */
START_TEST(test_pipe_push_followed)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    zp_slotmap *d = NULL, *m2 = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    uint64_t ids[2];
    two_on_shard_0(ids);
    zp_slotmap *m1 = zt_slot_map_giving(d, ids, 2, 1);
    zeps_pipe_opts o = {.prefetch = 0, .max_inflight = 0, .clock = 1};
    zeps_pipe *p;
    ck_assert_int_eq(zeps_pipe_new(c, &t, 1, &o, &p), 0);
    ck_assert_int_eq(zeps_pipe_feed(p, 0, ids, 2, NULL), 0);
    float g[2 * DIM] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[2 * DIM];
    uint8_t gone[4095] = {0};
    for (uint32_t n = 0; n < 4095; n++)
        gone[n] = zp_slotmap_slot_owner(m1, n) == 2;
    ck_assert_int_eq(zp_slotmap_moved(m1, gone, 0, &m2), 0);
    for (int64_t step = 0; step < 4; step++) {
        zeps_pipe_step *st;
        if (step == 2)
            for (int k = 0; k < 3; k++)
                ck_assert_int_eq(zt_raw_slots(&cl, k, m2), 0);
        if (step > 0)
            ck_assert_int_eq(zeps_pipe_feed(p, step, ids, 2, NULL), 0);
        ck_assert_msg(zeps_pipe_next(p, &st) == 0, "%s", zeps_last_error(c));
        if (step == 0)
            move_slots(&cl, zp_slotmap_slot_of(d, ids[0]), zp_slotmap_slot_of(d, ids[1]));
        memcpy(st->grads[0], g, sizeof(g));
        ck_assert_msg(zeps_pipe_push(p, st) == 0, "%s", zeps_last_error(c));
        ck_assert_msg(zeps_pipe_drain(p) == 0, "%s", zeps_last_error(c));
        ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 1); /* step 0's push */
        if (step == 1)
            for (int k = 0; k < 3; k++)
                ck_assert_int_eq(shard_clock(c, k), 2);
    }
    zeps_pipe_destroy(&p);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 2);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(shard_clock(c, k), k == 2 ? 3 : 4);
    ck_assert_msg(zeps_spull(c, t, ids, 2, rows, 0) == 0, "%s", zeps_last_error(c));
    for (int k = 0; k < 2 * DIM; k++)
        ck_assert(rows[k] == -4 * g[k]);
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 1);
    zp_slotmap_destroy(&m2);
    zp_slotmap_destroy(&m1);
    zp_slotmap_destroy(&d);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Under bsp a shard takes a map that gives away no slot of a push it
 * holds for an open round, and refuses one that does (SLOTS moves no push;
 * a move hands them over: test_bsp_move). */
START_TEST(test_bsp_held_pushes)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    uint64_t id = moved_id(); /* on shard 0, and map A gives its slot to shard 1 */
    float g[DIM] = {1.0f, 2.0f};
    ck_assert_int_eq(zeps_spush(c, t, &id, 1, g, 0), 0); /* held: worker 1 has not clocked 0 */
    zt_raw_expect_error(send_slots(&cl, 0, 3, own_a), ZEPS_ESTATE,
                        "holds 1 rows of pushes to sparse table 'emb' for open bsp rounds");
    slots_ok(&cl, 1, 3, own_a); /* shard 1 gives nothing away */
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
    tcase_add_test(tc, test_redirect_followed_by_newer_maps);
    tcase_add_test(tc, test_pipe_push_followed);
    tcase_add_test(tc, test_bsp_held_pushes);
    tcase_add_test(tc, test_clock_to_dense_slice);
    tcase_add_test(tc, test_map_with_unreachable_shard);
    tcase_add_test(tc, test_redirected_on_both_shards);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
