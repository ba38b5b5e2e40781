/*
 * test_zkmap_take.c - op/zkmap.c in process (inproc.h): what a primary
 * does with the slot map node's bytes when the role hands them over
 * (zp_zkmap_heard), without ZooKeeper. The cluster test test_zkmap runs the
 * same code against a real ZooKeeper; these cases reach what it cannot
 * tell apart.
 *
 * test_same_epoch_keeps_move: the node holding the map the shard already
 * has (a fence wrote it back before this move began) is not a newer map:
 * heard again, as at an election, it leaves the move going; the move's
 * own map, newer, then commits it.
 * test_target_commit_frees_map: a target's commit through the node frees
 * the map it replaces (the heap stays flat over 300 imports).
 */
#include <check.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "inproc.h"
#include "move.h"
#include "ops.h"
#include "slotmap.h"
#include "zeps_errors.h"

/* The node as the role keeps it: the wire form of m (a copy). */
static void node_holds(zt_shard *z, const zp_slotmap *m)
{
    free(z->s->role.zkmap.map);
    z->s->role.zkmap.len = zp_slotmap_wire_size(m);
    z->s->role.zkmap.map = malloc(z->s->role.zkmap.len);
    zp_slotmap_encode(m, z->s->role.zkmap.map);
    z->s->role.zkmap.read = true;
}

/* The shard without the node's bytes the test gave it (the role frees
 * them only when a coordination session stops), freed. */
static void shard_free(zt_shard *z)
{
    free(z->s->role.zkmap.map);
    z->s->role.zkmap.map = NULL;
    zt_shard_free(z);
}

/* The shard's map with its `k`-th slot of shard `from` given to `to`
 * (epoch one past it); the caller's. */
static zp_slotmap *one_slot_moved(const zp_slotmap *have, int from, int to, uint32_t k)
{
    uint32_t n = zp_slotmap_slots(have), seen = 0;
    uint8_t *which = calloc(n, 1);
    for (uint32_t i = 0; i < n; i++)
        if (zp_slotmap_slot_owner(have, i) == from && seen++ == k) {
            which[i] = 1;
            break;
        }
    ck_assert_uint_eq(seen, k + 1);
    zp_slotmap *next = NULL;
    ck_assert_int_eq(zp_slotmap_moved(have, which, to, &next), 0);
    free(which);
    return next;
}

START_TEST(test_same_epoch_keeps_move)
{
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 0);
    zt_hello(z, 0);
    zt_declare_sparse(z, "emb", 3);
    ck_assert(zp_role_serves(&z->s->role));
    zp_slotmap *next = one_slot_moved(z->s->slots, 0, 1, 0);
    node_holds(z, z->s->slots); /* epoch 0, as a fence wrote it */
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_BEGIN, 1, next, 0)->h->error, 0);
    ck_assert_ptr_nonnull(z->s->move);
    zp_zkmap_heard(z->s);
    ck_assert_msg(z->s->move != NULL, "the node's map of the shard's own epoch ended the move");
    ck_assert_uint_eq(zp_slotmap_epoch(z->s->slots), 0);
    node_holds(z, next); /* the tool's commit */
    zp_zkmap_heard(z->s);
    ck_assert_ptr_null(z->s->move);
    ck_assert_uint_eq(zp_slotmap_epoch(z->s->slots), 1);
    ck_assert(zp_slotmap_same(z->s->slots, next));
    zp_slotmap_destroy(&next);
    shard_free(z);
}
END_TEST

/* Heap in use, mapped blocks included. */
static size_t heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Shard 1 imports one slot of shard 0, committed by the node's map. */
static void import_one(zt_shard *z, uint32_t k)
{
    zp_slotmap *next = one_slot_moved(z->s->slots, 0, 1, k);
    uint64_t epoch = zp_slotmap_epoch(next);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_IMPORT, 0, next, 0)->h->error, 0);
    ck_assert_ptr_nonnull(z->s->move);
    node_holds(z, next);
    zp_slotmap_destroy(&next);
    zp_zkmap_heard(z->s);
    ck_assert_ptr_null(z->s->move);
    ck_assert_uint_eq(zp_slotmap_epoch(z->s->slots), epoch);
    zt_clear(z);
}

START_TEST(test_target_commit_frees_map)
{
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 1);
    zt_hello(z, 0);
    zt_declare_sparse(z, "emb", 3);
    for (uint32_t k = 0; k < 20; k++)
        import_one(z, 0);
    size_t map_bytes = zp_slotmap_wire_size(z->s->slots), before = heap_used();
    for (uint32_t k = 0; k < 300; k++)
        import_one(z, 0);
    size_t after = heap_used();
    ck_assert_msg(after < before + 30 * map_bytes,
                  "300 commits grew the heap by %zu bytes (a map: about %zu)", after - before,
                  map_bytes);
    shard_free(z);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("zkmap_take");
    TCase *tc = tcase_create("zkmap_take");
    tcase_add_test(tc, test_same_epoch_keeps_move);
    tcase_add_test(tc, test_target_commit_frees_map);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
