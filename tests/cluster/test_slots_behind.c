/*
 * test_slots_behind.c - a move's target that takes the new map after its
 * source (docs/elastic.md, "A shard behind the map"): two real shards,
 * one worker, the map given with SLOTS to the source at once and to the
 * target 300 ms later, from another thread, as ZooKeeper's watch or the
 * tool's SLOTS may bring it. The worker's push (then its pull) of an id
 * whose slot moves is refused by the source with the new map, and its
 * piece by the target with its older one; the piece goes to the target
 * again until it took the map: the call succeeds, the push is applied
 * exactly once (sgd from zeros: the row is minus the gradient), and the
 * rows then read from the target need no redirect. Without the rule
 * (a piece refused at an older map than its own ends the request) the
 * call fails with EMOVED.
 */
#include <check.h>
#include <pthread.h>
#include <time.h>

#include "check_main.h"
#include "harness.h"
#include "now.h"
#include "rawreq.h"
#include "slot_ids.h"
#include "slotmap.h"
#include "zeps.h"

#define DIM     4
#define LATE_MS 300

typedef struct late {
    const zt_cluster *cl;
    const zp_slotmap *map;
    int rc;
} late;

/* The target (shard 1) takes the map LATE_MS after the source. */
static void *late_target(void *arg)
{
    late *l = arg;
    struct timespec ts = {0, LATE_MS * 1000000L};
    nanosleep(&ts, NULL);
    l->rc = zt_raw_slots(l->cl, 1, l->map);
    return NULL;
}

/* The highest seq shard k handled from worker 0: its requests there. */
static uint64_t max_seq(zeps_client *c, int k)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    uint64_t seq = 0;
    for (size_t i = 0; i < st->n_workers; i++)
        if (st->workers[i]->rank == 0)
            seq = st->workers[i]->max_seq;
    zeps__shard_stats__free_unpacked(st, NULL);
    return seq;
}

/* Give `map` to shard 0 now and to shard 1 LATE_MS later; run `op` (a
 * push or a pull of ids) meanwhile; return its status and the time it
 * took, in ms. */
static int while_target_behind(const zt_cluster *cl, const zp_slotmap *map, zeps_client *c,
                               int push, uint32_t t, const uint64_t *ids, float *rows, double *ms)
{
    late l = {.cl = cl, .map = map, .rc = -1};
    ck_assert_int_eq(zt_raw_slots(cl, 0, map), 0);
    pthread_t th;
    uint64_t t0 = zp_now_ns();
    ck_assert_int_eq(pthread_create(&th, NULL, late_target, &l), 0);
    int rc = push ? zeps_spush(c, t, ids, 2, rows, 0) : zeps_spull(c, t, ids, 2, rows, 0);
    *ms = (double)(zp_now_ns() - t0) / 1e6;
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(l.rc, 0);
    return rc;
}

/* Two async shards, worker 0's client, and its sparse table "emb" of
 * DIM (sgd, lr 1, zeros: a row is minus the gradients pushed) in *t. */
static zeps_client *start(zt_cluster *cl, uint32_t *t)
{
    ck_assert_int_eq(zt_cluster_start(cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(cl, 0);
    ck_assert_ptr_nonnull(c);
    zeps_sparse_spec spec = {
        .name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, t), 0);
    return c;
}

START_TEST(test_target_takes_the_map_late)
{
    zt_cluster cl;
    uint32_t t;
    zeps_client *c = start(&cl, &t);
    /* x moves from shard 0 to shard 1 at epoch 1, y at epoch 2; z stays */
    uint64_t x = zt_slot_id_on(2, 0, UINT32_MAX, 0), y = zt_slot_id_on(2, 0, UINT32_MAX, x);
    uint64_t z = zt_slot_id_on(2, 0, UINT32_MAX, y);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    zp_slotmap *m1 = zt_slot_map_giving(d, &x, 1, 1), *m2 = zt_slot_map_giving(m1, &y, 1, 1);
    float g[2 * DIM] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[2 * DIM];
    uint64_t xz[2] = {x, z}, yz[2] = {y, z};
    double ms;
    /* a push of x (and z) while the target holds the default map */
    int rc = while_target_behind(&cl, m1, c, 1, t, xz, g, &ms);
    ck_assert_msg(rc == 0, "push: %s", zeps_last_error(c));
    ck_assert_msg(ms >= LATE_MS - 50, "the push took %.0f ms: it never met the target behind", ms);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 1);
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects,
                      1); /* the source's; the waits are not redirects */
    /* the target was asked again a few times, at 2 ms doubling, not at
     * every turn of the loop for 300 ms */
    uint64_t tries = max_seq(c, 1);
    ck_assert_msg(tries <= 20, "shard 1 got %llu requests of worker 0", (unsigned long long)tries);
    /* a pull of y (never pushed: a shard holding a row of a slot it gives
     * away refuses the map) and z while the target holds m1 */
    rc = while_target_behind(&cl, m2, c, 0, t, yz, rows, &ms);
    ck_assert_msg(rc == 0, "pull: %s", zeps_last_error(c));
    ck_assert_msg(ms >= LATE_MS - 50, "the pull took %.0f ms: it never met the target behind", ms);
    ck_assert_uint_eq(zt_client_stats(c).slot_epoch, 2);
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 2);
    for (int k = 0; k < DIM; k++) {
        ck_assert(rows[k] == 0.0f);              /* y: never pushed */
        ck_assert(rows[DIM + k] == -g[DIM + k]); /* z: pushed once */
    }
    /* x and y on the target, x applied once, read with no redirect */
    uint64_t xy[2] = {x, y};
    ck_assert_msg(zeps_spull(c, t, xy, 2, rows, 0) == 0, "%s", zeps_last_error(c));
    for (int k = 0; k < DIM; k++)
        ck_assert(rows[k] == -g[k] && rows[DIM + k] == 0.0f);
    ck_assert_uint_eq(zt_client_stats(c).slot_redirects, 2);
    zp_slotmap_destroy(&m2);
    zp_slotmap_destroy(&m1);
    zp_slotmap_destroy(&d);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Set *flag after `ms` (a Ctrl-C during a call). */
typedef struct alarm_arg {
    volatile int *flag;
    long ms;
} alarm_arg;

static void *raise_after(void *arg)
{
    alarm_arg *a = arg;
    struct timespec ts = {a->ms / 1000, (a->ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    *a->flag = 1;
    return NULL;
}

/* A push interrupted while its piece waits for a target behind the map:
 * the call ends with ECLOSED at once, and the piece ends with it (its
 * memory is the request's, freed by the wait): the client goes on
 * serving, and nothing more of the push reaches the target, which takes
 * the map only later. Without the pieces failed with their request the
 * freed piece stays on the client's list of redirects (ASan: a
 * use-after-free in the next call; else it keeps being sent). */
START_TEST(test_interrupted_while_behind)
{
    zt_cluster cl;
    uint32_t t;
    zeps_client *c = start(&cl, &t);
    uint64_t x = zt_slot_id_on(2, 0, UINT32_MAX, 0), z = zt_slot_id_on(2, 0, UINT32_MAX, x);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    zp_slotmap *m1 = zt_slot_map_giving(d, &x, 1, 1);
    ck_assert_int_eq(zt_raw_slots(&cl, 0, m1), 0); /* the target never takes it here */
    volatile int flag = 0;
    zeps_client_set_interrupt(c, &flag);
    alarm_arg a = {.flag = &flag, .ms = 150};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, raise_after, &a), 0);
    float g[2 * DIM] = {1, 2, 3, 4, 5, 6, 7, 8}, rows[2 * DIM];
    uint64_t xz[2] = {x, z};
    uint64_t t0 = zp_now_ns();
    int rc = zeps_spush(c, t, xz, 2, g, 0);
    double ms = (double)(zp_now_ns() - t0) / 1e6;
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(rc, ZEPS_ECLOSED);
    ck_assert_msg(ms < 1000, "the interrupted push took %.0f ms", ms);
    flag = 0;
    uint64_t sent = max_seq(c, 1);
    for (int i = 0; i < 40; i++) { /* 400 ms of calls to the source alone */
        ck_assert_msg(zeps_spull(c, t, &z, 1, rows, 0) == 0, "%s", zeps_last_error(c));
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert_uint_eq(max_seq(c, 1), sent); /* the piece is gone */
    zp_slotmap_destroy(&m1);
    zp_slotmap_destroy(&d);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("slots_behind");
    TCase *tc = tcase_create("slots_behind");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_target_takes_the_map_late);
    tcase_add_test(tc, test_interrupted_while_behind);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
