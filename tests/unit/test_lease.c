/*
 * test_lease.c - fencing without CURVE, in process (op/hello.c,
 * state/workers.c zp_workers_held, op/admin.c EVICT): a HELLO from a new
 * incarnation of a rank whose incarnation was heard from within its lease
 * is refused with ERANK naming both incarnations (flagged PARKED, so a
 * client asks again) and changes nothing; it is taken once the old one is
 * silent past the lease, said BYE, was declared lost, or an operator
 * released the rank (EVICT); the same incarnation's HELLO is always taken.
 * Time passes by moving a worker's last_seen_s back. Under bsp a HELLO also
 * fences the worker's own earlier requests (op/request.c): one sent before
 * it and delivered after it is answered ERESTARTED and changes nothing.
 * test_hello_map: a HELLO to a shard at the default slot map is answered
 * bare (no payload, epoch 0); one to a shard at a newer map carries that
 * map as its payload, at its epoch.
 */
#include <check.h>

#include "check_main.h"
#include "inproc.h"
#include "ops.h"
#include "slotmap.h"
#include "zeps_errors.h"

/* bsp, 2 workers joined (incarnations 100, 101), a table of 2 elements. */
static zt_shard *shard(void)
{
    zt_shard *z = zt_shard_new("bsp", 2);
    zt_hello(z, 0);
    zt_hello(z, 1);
    zt_declare(z, 0, "w", 2, 1.0);
    return z;
}

/* HELLO as `rank` with incarnation `inc`; returns the reply. */
static zt_reply *hello_as(zt_shard *z, uint32_t rank, uint64_t inc)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__HELLO, rank);
    h.incarnation = inc;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    return zt_last(z);
}

static void expect_held(zt_reply *r)
{
    ck_assert_int_eq(r->h->op, ZEPS__OP__ERROR);
    ck_assert_int_eq(r->h->error, ZEPS_ERANK);
    ck_assert_uint_eq(r->h->flags & ZP_FLAG_PARKED, ZP_FLAG_PARKED);
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "worker 0 is held by incarnation 64"));
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "HELLO from incarnation 3e7 refused"));
    ck_assert_ptr_nonnull(strstr(r->h->error_text, "zepsctl evict 0"));
}

/* A forged (or second) HELLO while the worker is alive: refused, nothing
 * changes, the worker keeps working. */
START_TEST(test_alive_refused)
{
    zt_shard *z = shard();
    float g[2] = {1, 1};
    ck_assert_int_eq(zt_push(z, 0, 0, 0, g, 2, 0, 0), 1); /* held in the round */
    expect_held(hello_as(z, 0, 999));
    zp_worker *w = &z->s->workers.w[0];
    ck_assert_uint_eq(w->incarnation, 100);
    ck_assert_int_eq(z->s->tables[0]->round.npending, 1); /* its push is not forgotten */
    ck_assert_uint_eq(z->s->hello_refused, 1);
    ck_assert_int_eq(zt_push(z, 1, 0, 0, g, 2, 0, 0), 1); /* the round closes */
    ck_assert_int_eq(z->s->tables[0]->round.closed, 1);
    ck_assert_int_eq(zt_pull(z, 0, 0, 0, 2, 1), 1); /* incarnation 100 still served */
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PULL);
    /* its own HELLO again (a retry, a rehello) is always taken */
    ck_assert_int_eq(hello_as(z, 0, 100)->h->op, ZEPS__OP__HELLO);
    zt_shard_free(z);
}
END_TEST

/* Silent past the lease: the new incarnation takes the rank (a restart). */
START_TEST(test_after_lease)
{
    zt_shard *z = shard();
    double lease = zp_clock_lease(z->s);
    ck_assert_double_eq(lease, 10.0); /* the auto lost-worker timeout at defaults */
    z->s->workers.w[0].last_seen_s -= lease - 1;
    expect_held(hello_as(z, 0, 999));
    z->s->workers.w[0].last_seen_s -= 2;
    zt_reply *r = hello_as(z, 0, 999);
    ck_assert_int_eq(r->h->op, ZEPS__OP__HELLO);
    ck_assert_uint_eq(r->h->flags & ZP_FLAG_REJOINED, ZP_FLAG_REJOINED);
    ck_assert_uint_eq(z->s->workers.w[0].incarnation, 999);
    /* the old incarnation is refused from then on */
    ck_assert_int_eq(zt_pull(z, 0, 0, 0, 2, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ESTATE);
    zt_shard_free(z);
}
END_TEST

/* BYE or lost: the rank is free at once. */
START_TEST(test_bye_and_lost)
{
    zt_shard *z = shard();
    Zeps__Header h = zt_header(z, ZEPS__OP__BYE, 0);
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(hello_as(z, 0, 999)->h->op, ZEPS__OP__HELLO);
    z->s->workers.w[1].lost = true;
    ck_assert_int_eq(hello_as(z, 1, 777)->h->op, ZEPS__OP__HELLO);
    ck_assert_uint_eq(z->s->workers.w[1].incarnation, 777);
    zt_shard_free(z);
}
END_TEST

/* zepsctl evict: a tool releases the rank; the next new incarnation takes
 * it, and the release is used up. A rank outside the cluster, or EVICT
 * from a worker, is ERANK. */
START_TEST(test_evict)
{
    zt_shard *z = shard();
    Zeps__Header e = zt_header(z, ZEPS__OP__EVICT, 0xffffffffu);
    e.evict_rank = 0;
    ck_assert_int_eq(zt_send(z, &e, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__EVICT);
    ck_assert_int_eq(hello_as(z, 0, 999)->h->op, ZEPS__OP__HELLO);
    ck_assert(!z->s->workers.w[0].evicted);
    ck_assert_int_eq(hello_as(z, 0, 555)->h->error, ZEPS_ERANK); /* 999 holds it now */
    e = zt_header(z, ZEPS__OP__EVICT, 0xffffffffu);
    e.evict_rank = 2;
    zt_send(z, &e, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANK);
    /* a worker may not release a rank */
    e = zt_header(z, ZEPS__OP__EVICT, 1);
    e.evict_rank = 0;
    zt_send(z, &e, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANK);
    ck_assert(!z->s->workers.w[0].evicted);
    zt_shard_free(z);
}
END_TEST

/* A crashed worker's replacement (after the lease): its push for the open
 * round stays when the clock rode on it (the replacement resumes after that
 * round and will not push it again), and goes when it did not. */
START_TEST(test_crash_keeps_clocked_push)
{
    zt_shard *z = shard();
    float g[2] = {1, 1};
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.table = 0, h.offset = 0, h.count = 2, h.clock = 0, h.flags = ZP_FLAG_CLOCK;
    ck_assert_int_eq(zt_send(z, &h, g, sizeof(g)), 1);
    ck_assert_int_eq(z->s->workers.w[0].clock, 1);
    z->s->workers.w[0].last_seen_s -= 60;
    zt_reply *r = hello_as(z, 0, 999);
    ck_assert_int_eq(r->h->op, ZEPS__OP__HELLO);
    ck_assert_int_eq(r->h->clock, 1); /* resumes after round 0 */
    ck_assert_int_eq(z->s->tables[0]->round.npending, 1);
    ck_assert_int_eq(zt_push(z, 1, 0, 0, g, 2, 0, 0), 1);
    ck_assert_int_eq(z->s->tables[0]->round.closed, 1); /* closed with both */
    /* worker 1's push of round 1 without its clock: redone, so dropped */
    ck_assert_int_eq(zt_push(z, 1, 0, 0, g, 2, 1, 1), 1);
    z->s->workers.w[1].last_seen_s -= 60;
    ck_assert_int_eq(hello_as(z, 1, 888)->h->op, ZEPS__OP__HELLO);
    ck_assert_int_eq(z->s->tables[0]->round.npending, 0);
    zt_shard_free(z);
}
END_TEST

/* A CLOCK of `clock` from `rank`, built now (its seq taken now) to be sent
 * later. */
static Zeps__Header clock_req(zt_shard *z, uint32_t rank, int64_t clock)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__CLOCK, rank);
    h.clock = clock;
    return h;
}

/* bsp: a CLOCK and a PUSH sent before worker 0's HELLO (on the connection
 * it then closed) arrive after it: refused with ERESTARTED, not applied;
 * what it sends after the HELLO is; a late resend of an older HELLO does
 * not lower the fence. */
START_TEST(test_hello_fences_earlier_requests)
{
    zt_shard *z = shard();
    float g[2] = {1, 1};
    Zeps__Header old_clock = clock_req(z, 0, 7);
    Zeps__Header old_push = zt_header(z, ZEPS__OP__PUSH, 0);
    old_push.table = 0, old_push.count = 2, old_push.clock = 0;
    zt_hello(z, 0);
    uint64_t fence = z->seq[0];
    ck_assert_int_eq(zt_send(z, &old_clock, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__ERROR);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERESTARTED);
    ck_assert_int_eq(zt_send(z, &old_push, g, sizeof(g)), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERESTARTED);
    zp_worker *w = &z->s->workers.w[0];
    ck_assert_int_eq(w->clock, 0);
    ck_assert_int_eq(z->s->tables[0]->round.npending, 0);
    ck_assert_uint_eq(w->max_seq, 0); /* not recorded either */

    Zeps__Header resend = zt_header(z, ZEPS__OP__HELLO, 0);
    resend.seq = fence - 2;
    ck_assert_int_eq(zt_send(z, &resend, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__HELLO);
    Zeps__Header below = clock_req(z, 0, 7);
    below.seq = fence - 1; /* above the resent HELLO's, below the fence */
    ck_assert_int_eq(zt_send(z, &below, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERESTARTED);

    ck_assert_int_eq(zt_push(z, 0, 0, 0, g, 2, 0, 0), 1);
    ck_assert_int_eq(z->s->tables[0]->round.npending, 1);
    Zeps__Header now = clock_req(z, 0, 0);
    ck_assert_int_eq(zt_send(z, &now, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__CLOCK);
    ck_assert_int_eq(w->clock, 1);
    zt_shard_free(z);
}
END_TEST

/* async: no fence. There the library says HELLO again to a restarted
 * shard and resends what it had outstanding, with its seqs. */
START_TEST(test_async_hello_fences_nothing)
{
    zt_shard *z = zt_shard_new("async", 2);
    zt_hello(z, 0);
    zt_declare(z, 0, "w", 2, 1.0);
    Zeps__Header old_clock = clock_req(z, 0, 3);
    zt_hello(z, 0);
    ck_assert_int_eq(zt_send(z, &old_clock, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__CLOCK);
    ck_assert_int_eq(z->s->workers.w[0].clock, 4);
    zt_shard_free(z);
}
END_TEST

/* HELLO carries the slot map only when the shard is past the default one:
 * at epoch 0 a client knows the map already and the reply is bare. */
START_TEST(test_hello_map)
{
    zt_shard *z = zt_shard_start(zt_config("async", 2, 2), 0);
    zt_hello(z, 0);
    ck_assert_ptr_null(zt_last(z)->data);
    ck_assert_uint_eq(zt_last(z)->len, 0);
    ck_assert_uint_eq(zt_last(z)->h->slot_epoch, 0);
    zp_slotmap *d = NULL, *m = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    uint8_t *none = calloc(zp_slotmap_slots(d), 1);
    ck_assert_int_eq(zp_slotmap_moved(d, none, 0, &m), 0); /* epoch 1 */
    size_t len = zp_slotmap_wire_size(m);
    void *wire = malloc(len);
    zp_slotmap_encode(m, wire);
    Zeps__Header h = zt_header(z, ZEPS__OP__SLOTS, 0xffffffffu);
    ck_assert_int_eq(zt_send(z, &h, wire, len), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__SLOTS);
    zt_hello(z, 1);
    ck_assert_uint_eq(zt_last(z)->h->slot_epoch, 1);
    ck_assert_uint_eq(zt_last(z)->len, len);
    ck_assert_int_eq(memcmp(zt_last(z)->data, wire, len), 0);
    free(wire);
    free(none);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    zt_shard_free(z);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("lease");
    TCase *tc = tcase_create("lease");
    tcase_add_test(tc, test_alive_refused);
    tcase_add_test(tc, test_after_lease);
    tcase_add_test(tc, test_bye_and_lost);
    tcase_add_test(tc, test_evict);
    tcase_add_test(tc, test_crash_keeps_clocked_push);
    tcase_add_test(tc, test_hello_fences_earlier_requests);
    tcase_add_test(tc, test_async_hello_fences_nothing);
    tcase_add_test(tc, test_hello_map);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
