/*
 * test_move_refusals.c - a MOVE step refused keeps nothing (op/move.c, in
 * process: inproc.h).
 *
 * test_refused_begin_frees_map: a BEGIN whose map passes the checks of
 * its payload (decoded, newer, as many slots) but that the move refuses
 * (it gives a slot of the peer to this shard: a move takes slots from the
 * source to the target only) is answered EINVAL saying so, starts no
 * move, and frees the map it decoded (the heap stays flat over 300 such
 * refusals); a BEGIN of the right map then starts the move.
 */
#include <check.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "inproc.h"
#include "move.h"
#include "slotmap.h"
#include "zeps_errors.h"

/* The shard's map with its first slot of shard `from` given to `to`
 * (epoch one past it); the caller's. */
static zp_slotmap *first_slot_moved(const zp_slotmap *have, int from, int to)
{
    uint32_t n = zp_slotmap_slots(have);
    uint8_t *which = calloc(n, 1);
    for (uint32_t i = 0; i < n; i++)
        if (zp_slotmap_slot_owner(have, i) == from) {
            which[i] = 1;
            break;
        }
    zp_slotmap *next = NULL;
    ck_assert_int_eq(zp_slotmap_moved(have, which, to, &next), 0);
    free(which);
    return next;
}

/* Heap in use, mapped blocks included. */
static size_t heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void begin_refused(zt_shard *z, const zp_slotmap *wrong)
{
    zt_reply *r = zt_move_step(z, ZP_MOVE_BEGIN, 1, wrong, 0);
    ck_assert_int_eq(r->h->error, ZEPS_EINVAL);
    ck_assert_msg(strstr(r->h->error_text, "a move takes slots from shard 0 to shard 1 only"),
                  "refused as: %s", r->h->error_text);
    ck_assert_ptr_null(z->s->move);
    zt_clear(z);
}

START_TEST(test_refused_begin_frees_map)
{
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 0);
    zt_hello(z, 0);
    zt_declare_sparse(z, "emb", 3);
    zp_slotmap *wrong = first_slot_moved(z->s->slots, 1, 0); /* the peer's slot to us */
    for (int i = 0; i < 20; i++)
        begin_refused(z, wrong);
    size_t map_bytes = zp_slotmap_wire_size(wrong), before = heap_used();
    for (int i = 0; i < 300; i++)
        begin_refused(z, wrong);
    size_t after = heap_used();
    ck_assert_msg(after < before + 30 * map_bytes,
                  "300 refused BEGINs grew the heap by %zu bytes (a map: about %zu)",
                  after - before, map_bytes);
    zp_slotmap *right = first_slot_moved(z->s->slots, 0, 1);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_BEGIN, 1, right, 0)->h->error, 0);
    ck_assert_ptr_nonnull(z->s->move);
    zp_slotmap_destroy(&right);
    zp_slotmap_destroy(&wrong);
    zt_shard_free(z);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {{"move_refusals", 0, {test_refused_begin_frees_map, NULL}}};
    return zt_run_cases("move_refusals", cases, sizeof(cases) / sizeof(cases[0]));
}
