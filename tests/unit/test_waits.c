/*
 * test_waits.c - no silent waits, in process (op/waits.c, the lost-worker
 * timeout of op/clock.c): a held pull or barrier that waits for a worker
 * gone for good (BYE, or lost) fails with ETIMEDOUT naming it once
 * lost_worker_wait_s passed under on_lost_worker = wait, and not before;
 * under continue a worker's BYE closes the round it held up, and so does
 * its being declared lost, with the round's pushes measured (tau) as any
 * closed round's; a rank that never joined is never given up; the auto
 * timeout follows the request timeout and the longest silence seen, and
 * the lease a HELLO gives follows the timeout (or, without one, the
 * request timeout); a timeout of one second is one. Time
 * passes by moving a worker's last_seen_s back.
 */
#include <check.h>

#include "check_main.h"
#include "inproc.h"
#include "ops.h"
#include "zeps_errors.h"

/* bsp, 2 workers (both joined unless `join1` is false), a table of 2
 * elements; worker 0 pushed round 0 and waits in a pull at clock 1. */
static zt_shard *parked_shard(bool lost_continue, bool join1)
{
    zp_config *cfg = zt_config("bsp", 2, 1);
    cfg->lost_continue = lost_continue;
    cfg->lost_worker_timeout_s = 2;
    cfg->lost_worker_wait_s = 5;
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    if (join1)
        zt_hello(z, 1);
    uint32_t t = zt_declare(z, 0, "w", 2, 1.0);
    float g[2] = {1, 1};
    ck_assert_int_eq(zt_push(z, 0, t, 0, g, 2, 0, 0), 1);
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 2, 1), 0); /* parked */
    ck_assert_uint_eq(z->s->tables[0]->parked.n, 1);
    return z;
}

static void bye(zt_shard *z, uint32_t rank)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__BYE, rank);
    zt_send(z, &h, NULL, 0);
}

static void age(zt_shard *z, uint32_t rank, double s)
{
    z->s->workers.w[rank].last_seen_s -= s;
}

/* wait: BYE mid-round, then the pull waits lost_worker_wait_s more and
 * fails with ETIMEDOUT naming the departed worker. */
START_TEST(test_wait_bye_bound)
{
    zt_shard *z = parked_shard(false, true);
    bye(z, 1);
    int n = z->n;
    zp_waits_check(z->s);
    ck_assert_int_eq(z->n, n); /* it may still come back */
    age(z, 1, 4.0);
    zp_waits_check(z->s);
    ck_assert_int_eq(z->n, n);
    age(z, 1, 1.5); /* 5.5 s > lost_worker_wait_s = 5 */
    zp_waits_check(z->s);
    ck_assert_int_eq(z->n, n + 1);
    Zeps__Header *h = zt_last(z)->h;
    ck_assert_int_eq(h->op, ZEPS__OP__ERROR);
    ck_assert_int_eq(h->error, ZEPS_ETIMEDOUT);
    ck_assert_str_eq(zt_last(z)->to, "w0");
    ck_assert_ptr_nonnull(strstr(h->error_text, "worker(s) 1 (left"));
    ck_assert_ptr_nonnull(
        strstr(h->error_text,
               "said BYE and on_lost_worker = wait gives up on it after lost_worker_wait_s 5 s"));
    ck_assert_uint_eq(z->s->tables[0]->parked.n, 0);
    ck_assert_uint_eq(z->s->waits_failed, 1);
    zt_shard_free(z);
}
END_TEST

/* wait: a lost worker is waited for the timeout plus lost_worker_wait_s;
 * its HELLO (a replacement) before then keeps the wait going. */
START_TEST(test_wait_lost_bound)
{
    zt_shard *z = parked_shard(false, true);
    age(z, 1, 3.0);
    zp_clock_check_lost(z->s);
    ck_assert(z->s->workers.w[1].lost);
    int n = z->n;
    age(z, 1, 3.5); /* 6.5 s < 2 + 5 */
    zp_waits_check(z->s);
    ck_assert_int_eq(z->n, n);
    age(z, 1, 1.0);
    zp_waits_check(z->s);
    ck_assert_int_eq(z->n, n + 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ETIMEDOUT);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "worker(s) 1 (lost "));
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text,
                                 "worker 1 is gone: on_lost_worker = wait gives up on it after "
                                 "lost_worker_timeout_s 2 + lost_worker_wait_s 5 s of silence"));
    zt_shard_free(z);
}
END_TEST

/* continue: the BYE of the worker the round waits for closes the round and
 * the parked pull is answered with data. */
START_TEST(test_continue_bye_closes)
{
    zt_shard *z = parked_shard(true, true);
    bye(z, 1);
    ck_assert_uint_eq(z->s->tables[0]->parked.n, 0);
    ck_assert_uint_eq(z->s->tables[0]->round.closed, 1);
    int pulls = 0;
    for (int i = 0; i < z->n; i++)
        pulls += z->r[i].h->op == ZEPS__OP__PULL && z->r[i].len == 2 * sizeof(float);
    ck_assert_int_eq(pulls, 1);
    zt_shard_free(z);
}
END_TEST

/* continue: a worker declared lost closes the round it held up; the
 * round's push is measured (the table's and its worker's tau) as when a
 * push closes it, and the parked pull is answered with data. */
START_TEST(test_continue_lost_closes)
{
    zt_shard *z = parked_shard(true, true);
    ck_assert_uint_eq(z->s->tables[0]->stats.tau.n, 0); /* kept: measured at the close */
    age(z, 1, 3.0);
    zp_clock_check_lost(z->s);
    ck_assert(z->s->workers.w[1].lost);
    ck_assert_uint_eq(z->s->tables[0]->round.closed, 1);
    ck_assert_uint_eq(z->s->tables[0]->parked.n, 0);
    ck_assert_uint_eq(z->s->tables[0]->stats.tau.n, 1);
    ck_assert_uint_eq(z->s->workers.w[0].tau.n, 1);
    ck_assert_uint_eq(z->s->workers.w[1].tau.n, 0);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PULL);
    ck_assert_uint_eq(zt_last(z)->len, 2 * sizeof(float));
    zt_shard_free(z);
}
END_TEST

/* A rank that never joined is waited for (and named), never given up. */
START_TEST(test_never_joined)
{
    zt_shard *z = parked_shard(false, false);
    int n = z->n;
    z->s->waits_logged_s = 0; /* log now */
    zp_waits_check(z->s);
    ck_assert_int_eq(z->n, n);
    ck_assert_uint_eq(z->s->tables[0]->parked.n, 1);
    zt_shard_free(z);
}
END_TEST

/* The barrier: a departed worker fails the barrier after the bound. */
START_TEST(test_barrier_bound)
{
    zt_shard *z = parked_shard(false, true);
    Zeps__Header h = zt_header(z, ZEPS__OP__BARRIER, 0);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 0); /* waits */
    bye(z, 1);
    age(z, 1, 6.0);
    int n = z->n;
    zp_waits_check(z->s);
    ck_assert_int_eq(z->n, n + 2); /* the pull and the barrier */
    int barrier = 0;
    for (int i = n; i < z->n; i++)
        barrier += z->r[i].h->req_id == h.req_id && z->r[i].h->error == ZEPS_ETIMEDOUT;
    ck_assert_int_eq(barrier, 1);
    ck_assert_uint_eq(z->s->workers.w[0].barrier_gen, 0);
    zt_shard_free(z);
}
END_TEST

/* auto: max(10 s, 5 x request timeout, 4 x the longest silence seen); the
 * wait max(10 s, 2 x that); explicit values win, 0 = off. The lease a
 * HELLO gives: that timeout, or with none max(10 s, 5 x request timeout). */
START_TEST(test_auto_timeout)
{
    zp_config *cfg = zt_config("bsp", 2, 1);
    zt_shard *z = zt_shard_start(cfg, 0);
    ck_assert_double_eq(zp_clock_lost_timeout(z->s), 10.0);
    ck_assert_double_eq(zp_clock_lost_wait(z->s), 20.0);
    z->s->cfg.request_timeout_ms = 4000;
    ck_assert_double_eq(zp_clock_lost_timeout(z->s), 20.0);
    zt_hello(z, 0);
    age(z, 0, 30.0);
    zt_declare(z, 0, "w", 2, 1.0); /* before its first clock: start-up, not counted */
    ck_assert_double_eq(z->s->max_silence_s, 0.0);
    z->s->workers.w[0].clock = 1;
    age(z, 0, 7.0);
    zt_declare(z, 0, "w", 2, 1.0); /* heard after a 7 s step */
    ck_assert(z->s->max_silence_s >= 7.0);
    ck_assert_double_ge(zp_clock_lost_timeout(z->s), 28.0);
    ck_assert_double_ge(zp_clock_lost_wait(z->s), 56.0);
    ck_assert_double_eq(zp_clock_lease(z->s), zp_clock_lost_timeout(z->s));
    z->s->cfg.lost_worker_timeout_s = 0;
    ck_assert_double_eq(zp_clock_lost_timeout(z->s), 0.0);
    ck_assert_double_eq(zp_clock_lost_wait(z->s), 10.0);
    /* no lost timeout: the lease is max(10 s, 5 x the request timeout) */
    ck_assert_double_eq(zp_clock_lease(z->s), 20.0);
    z->s->cfg.request_timeout_ms = 1000;
    ck_assert_double_eq(zp_clock_lease(z->s), 10.0);
    z->s->cfg.lost_worker_wait_s = 3;
    ck_assert_double_eq(zp_clock_lost_wait(z->s), 3.0);
    zt_shard_free(z);
}
END_TEST

/* A lost timeout of one second still declares a silent worker lost; 0
 * never does. */
START_TEST(test_short_timeout)
{
    zt_shard *z = parked_shard(false, true);
    z->s->cfg.lost_worker_timeout_s = 0;
    age(z, 1, 100.0);
    zp_clock_check_lost(z->s);
    ck_assert(!z->s->workers.w[1].lost);
    z->s->cfg.lost_worker_timeout_s = 1;
    zp_clock_check_lost(z->s);
    ck_assert(z->s->workers.w[1].lost);
    ck_assert_uint_eq(z->s->lost_total, 1);
    zt_shard_free(z);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("waits");
    TCase *tc = tcase_create("waits");
    tcase_add_test(tc, test_wait_bye_bound);
    tcase_add_test(tc, test_wait_lost_bound);
    tcase_add_test(tc, test_short_timeout);
    tcase_add_test(tc, test_continue_bye_closes);
    tcase_add_test(tc, test_continue_lost_closes);
    tcase_add_test(tc, test_never_joined);
    tcase_add_test(tc, test_barrier_bound);
    tcase_add_test(tc, test_auto_timeout);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
