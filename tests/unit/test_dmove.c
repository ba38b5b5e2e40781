/*
 * test_dmove.c - server/move/dmove.c in process (inproc.h): the plan of a
 * dense move and what a target's import holds, driven by the tool's MOVE
 * steps. test_move covers the source's cut-over (dense writes parked) and
 * the commit's cut pieces.
 *
 * test_plan_one_way: a map giving one piece from the source to the target
 * and another back is refused at BEGIN, naming the piece going the wrong
 * way; the move of the first piece alone begins.
 * test_import_abort_frees: a target's import of a piece, aborted, frees
 * the piece it made and the move's list of pieces (the heap stays flat
 * over 2,000 imports).
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

#define LEN 100 /* the dense table's elements: shard 0 holds [0, 50), shard 1 [50, 100) */

/* The default map of 2 shards with piece [lo, hi) of "w" given to `to`,
 * then (if lo2 < hi2) [lo2, hi2) to `to2`, at epoch 1; the caller's. */
static zp_slotmap *dense_map(uint64_t lo, uint64_t hi, int to, uint64_t lo2, uint64_t hi2, int to2)
{
    zp_slotmap *d = NULL, *m = NULL, *m2 = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", LEN, lo, hi, to, &m, err, sizeof(err)), 0);
    zp_slotmap_destroy(&d);
    if (lo2 >= hi2)
        return m;
    ck_assert_int_eq(zp_slotmap_dense_moved(m, "w", LEN, lo2, hi2, to2, &m2, err, sizeof(err)), 0);
    /* one map of epoch 1 with both changes: its wire form at epoch 1 */
    size_t len = zp_slotmap_wire_size(m2);
    uint8_t *wire = malloc(len);
    zp_slotmap_encode(m2, wire);
    memset(wire, 0, 8);
    wire[0] = 1; /* u64 epoch, little-endian */
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&m2);
    ck_assert_int_eq(zp_slotmap_decode(&m, wire, len, 2, err, sizeof(err)), 0);
    free(wire);
    ck_assert_uint_eq(zp_slotmap_epoch(m), 1);
    return m;
}

START_TEST(test_plan_one_way)
{
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 0);
    zt_hello(z, 0);
    zt_declare(z, 0, "w", LEN, 1.0);
    zp_slotmap *both = dense_map(0, 50, 1, 50, 100, 0);
    zt_reply *r = zt_move_step(z, ZP_MOVE_BEGIN, 1, both, 0);
    ck_assert_int_eq(r->h->error, ZEPS_EINVAL);
    ck_assert_msg(r->h->error_text &&
                      strstr(r->h->error_text,
                             "gives piece [50, 100) of dense table 'w' from shard 1 "
                             "to shard 0"),
                  "BEGIN: %s", r->h->error_text ? r->h->error_text : "(no text)");
    ck_assert_ptr_null(z->s->move);
    zp_slotmap *one = dense_map(0, 50, 1, 0, 0, 0);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_BEGIN, 1, one, 0)->h->error, 0);
    ck_assert_ptr_nonnull(z->s->move);
    ck_assert_uint_eq(z->s->move->npieces, 1);
    zp_slotmap_destroy(&one);
    zp_slotmap_destroy(&both);
    zt_shard_free(z);
}
END_TEST

/* Heap in use, mapped blocks included. */
static size_t heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* Shard 1 imports piece [0, 50) from shard 0; the tool aborts. */
static void import_aborted(zt_shard *z, const zp_slotmap *next)
{
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_IMPORT, 0, next, 0)->h->error, 0);
    ck_assert_ptr_nonnull(z->s->move);
    ck_assert_ptr_nonnull(z->s->move->pieces[0].in);
    ck_assert_int_eq(zt_move_step(z, ZP_MOVE_ABORT, 0, NULL, 0)->h->error, 0);
    ck_assert_ptr_null(z->s->move);
    zt_clear(z);
}

START_TEST(test_import_abort_frees)
{
    zt_shard *z = zt_shard_start(zt_config("async", 1, 2), 1);
    zt_hello(z, 0);
    zt_declare(z, 0, "w", LEN, 1.0);
    zp_slotmap *next = dense_map(0, 50, 1, 0, 0, 0);
    for (int i = 0; i < 50; i++)
        import_aborted(z, next);
    size_t before = heap_used();
    for (int i = 0; i < 2000; i++)
        import_aborted(z, next);
    size_t after = heap_used();
    /* a lost list of one piece is about 100 bytes an import, a lost piece more */
    ck_assert_msg(after < before + 20000, "2,000 aborted imports grew the heap by %zu bytes",
                  after - before);
    zp_slotmap_destroy(&next);
    zt_shard_free(z);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dmove");
    TCase *tc = tcase_create("dmove");
    tcase_add_test(tc, test_plan_one_way);
    tcase_add_test(tc, test_import_abort_frees);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
