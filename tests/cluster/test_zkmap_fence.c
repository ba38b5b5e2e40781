/*
 * test_zkmap_fence.c - a move's part that ends by time reading the slot map
 * node (op/zkmap.c, docs/elastic.md "The map in ZooKeeper"), with a real
 * ZooKeeper (tests/support/coord_fixture.h) and the shard in the test's
 * process (tests/unit/inproc.h), which reads and writes the node through
 * a coordination session of the test's loop.
 *
 * test_fence_finds_commit: the tool wrote the move's map to the node but
 * the shard never heard it (its session's slot watch tells nobody here,
 * as when the write landed just before the part's bound ended and the
 * watch's event comes after the fence's read): the fence's read finds the
 * move's map and commits the move, instead of writing the node back and
 * aborting; the node keeps the tool's version.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* before coord_fixture.h, whose type `rep` would shadow a name of it */
#include "inproc.h"

#include "check_main.h"
#include "coord_fixture.h"
#include "move.h"
#include "ops.h"
#include "slotmap.h"

/* The node's version as a read sees it (got's arguments). */
static int got_rc = 1;
static int32_t got_version = -2;

static void on_got(void *arg, int rc, const void *data, size_t len, int32_t version)
{
    (void)arg, (void)data, (void)len;
    got_rc = rc;
    got_version = version;
}

START_TEST(test_fence_finds_commit)
{
    rep r;
    rep_start(&r, &fx.lp, fx.zk.hosts, 0, 5000);
    WAIT_FOR(20, r.events[ZP_COORD_CONNECTED] == 1, &fx.lp);
    /* shard 0 of 2, the source of a move of one slot to shard 1 */
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 0);
    zt_hello(z, 0);
    zt_declare_sparse(z, "emb", 3);
    zp_slotmap *next = NULL;
    uint8_t *which = calloc(zp_slotmap_slots(z->s->slots), 1);
    which[0] = zp_slotmap_slot_owner(z->s->slots, 0) == 0 ? 1 : 0;
    ck_assert_uint_eq(which[0], 1);
    ck_assert_int_eq(zp_slotmap_moved(z->s->slots, which, 1, &next), 0);
    free(which);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_BEGIN, 1, next, 0)->h->error, 0);
    /* the tool's commit: the move's map written to the node */
    size_t len = zp_slotmap_wire_size(next);
    uint8_t *wire = malloc(len);
    zp_slotmap_encode(next, wire);
    ck_assert_int_eq(zp_coord_slots_set(r.c, wire, len, -1, on_done, &r), 0);
    WAIT_FOR(10, r.done_calls == 1, &fx.lp);
    ck_assert_int_eq(r.done_rc, 0);
    free(wire);
    /* the part's bound ends: it asks the node */
    z->s->role.coord = r.c;
    ck_assert(zp_zkmap_fence(z->s));
    WAIT_FOR(10, z->s->move == NULL, &fx.lp);
    ck_assert_msg(zp_slotmap_epoch(z->s->slots) == 1,
                  "the part aborted (map epoch %" PRIu64 ") though the node held its map",
                  zp_slotmap_epoch(z->s->slots));
    ck_assert(zp_slotmap_same(z->s->slots, next));
    /* no fence was written over the tool's map */
    ck_assert_int_eq(zp_coord_slots_get(r.c, on_got, NULL), 0);
    WAIT_FOR(10, got_rc != 1, &fx.lp);
    ck_assert_int_eq(got_rc, 0);
    ck_assert_int_eq(got_version, 0);
    z->s->role.coord = NULL; /* the test's */
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
    zp_coord_destroy(&r.c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("zkmap_fence");
    tcase_add_test(fx_case(s, true), test_fence_finds_commit);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
