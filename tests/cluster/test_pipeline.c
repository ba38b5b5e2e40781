/*
 * test_pipeline.c - zeps_pipe through real zeps-server processes.
 *
 * With prefetch 0 a pipe is exactly a loop of blocking calls: a bsp run of
 * a sparse + dense model gives the same parameters bit for bit as the loop
 * written with zeps_sbatch_pull/push, zeps_pull/push and zeps_clock. With
 * prefetch k the shards' per-row staleness counts the extra versions
 * exactly: one async worker whose every step touches the same rows pushes
 * them with tau = 0, 1, ..., k - 1 in its first k steps and tau = k after
 * (and bsp with prefetch 1 does not deadlock: tau 1). An error mid-pipeline
 * (a NaN the shard refuses) comes back from a later call, stays until
 * reset, and nothing hangs or leaks; misuse is refused.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "harness.h"
#include "rng.h"
#include "zeps.h"

#define DIM 4
#define NPOS 64   /* positions per step */
#define NDENSE 5
#define STEPS 12

enum { T_EMB, T_DENSE, NT };

/* Declare the sparse table "emb" (adagrad) and the dense "w" (sgd). */
static void declare(zeps_client *c, uint32_t *t)
{
    zeps_sparse_spec sp = {.name = "emb", .dim = DIM, .optimizer = "adagrad", .lr = 0.1,
                           .init = "uniform", .init_scale = 0.5, .seed = 5};
    ck_assert_int_eq(zeps_declare_sparse(c, &sp, &t[T_EMB]), 0);
    zeps_table_spec dp = {.name = "w", .length = NDENSE, .optimizer = "sgd", .lr = 0.1,
                          .init = "uniform", .init_scale = 0.5, .seed = 6};
    ck_assert_int_eq(zeps_declare(c, &dp, &t[T_DENSE]), 0);
}

/* 2 shards and one worker in `mode`, its client with the tables declared. */
static zeps_client *start_declared(zt_cluster *cl, const char *mode, uint32_t *t)
{
    ck_assert_int_eq(zt_cluster_start(cl, 2, 1, mode, NULL, NULL), 0);
    zeps_client *c = zt_client(cl, 0);
    declare(c, t);
    return c;
}

/* Step s's ids: 64 positions over ids s .. s + 40 (repeats, overlaps
 * between steps), or with `same` one fixed set of 16 distinct ids. */
static void step_ids(int64_t s, int same, uint64_t *ids)
{
    for (int i = 0; i < NPOS; i++)
        ids[i] = same ? (uint64_t)(i % 16) * 0x9e3779b97f4a7c15ull
                      : (uint64_t)(s + (i * 7) % 41) * 1000003ull;
}

/* A gradient that depends on what was pulled, so any difference in what a
 * step read shows in the result. */
static void grad(const float *rows, const float *w, float *g_rows, float *g_w)
{
    for (int i = 0; i < NPOS * DIM; i++)
        g_rows[i] = rows[i] * rows[i] - 0.25f + 0.1f * w[i % NDENSE];
    for (int k = 0; k < NDENSE; k++)
        g_w[k] = w[k] - 0.3f * (float)k + 0.01f * rows[k];
}

/* The final parameters: the rows of every id used, then the dense table. */
static void final_params(zeps_client *c, const uint32_t *t, int64_t clock, float *out)
{
    for (int64_t s = 0; s < STEPS; s++) {
        uint64_t ids[NPOS];
        step_ids(s, 0, ids);
        ck_assert_int_eq(zeps_spull(c, t[T_EMB], ids, NPOS, out + s * NPOS * DIM, clock), 0);
    }
    ck_assert_int_eq(zeps_pull(c, t[T_DENSE], out + STEPS * NPOS * DIM, 0, NDENSE, clock), 0);
}

#define NPARAMS (STEPS * NPOS * DIM + NDENSE)

/* The loop of blocking calls every caller wrote before pipes. */
static void run_plain(float *out)
{
    zt_cluster cl;
    uint32_t t[NT];
    zeps_client *c = start_declared(&cl, "bsp", t);
    static float rows[NPOS * DIM], g[NPOS * DIM];
    float w[NDENSE], gw[NDENSE];
    for (int64_t s = 0; s < STEPS; s++) {
        uint64_t ids[NPOS];
        step_ids(s, 0, ids);
        zeps_sbatch *b;
        ck_assert_int_eq(zeps_sbatch_new(c, t[T_EMB], ids, NPOS, &b), 0);
        ck_assert_int_eq(zeps_sbatch_pull(b, rows, s), 0);
        ck_assert_int_eq(zeps_pull(c, t[T_DENSE], w, 0, NDENSE, s), 0);
        grad(rows, w, g, gw);
        ck_assert_int_eq(zeps_sbatch_push(b, g, s), 0);
        ck_assert_int_eq(zeps_push(c, t[T_DENSE], gw, 0, NDENSE, s), 0);
        ck_assert_int_eq(zeps_clock(c, s), 0);
        zeps_sbatch_free(&b);
    }
    final_params(c, t, STEPS, out);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

/* The same steps through a pipe. Returns the client for more checks if
 * keep is set (the caller stops the cluster). */
static void run_pipe(zeps_client *c, const uint32_t *t, const zeps_pipe_opts *o, int same,
                     int64_t steps)
{
    zeps_pipe *p;
    ck_assert_int_eq(zeps_pipe_new(c, t, NT, o, &p), 0);
    ck_assert_int_eq(zeps_pipe_slots(p), o->prefetch + o->max_inflight + 2);
    uint64_t ids[NPOS];
    int64_t fed = 0;
    for (; fed <= o->prefetch && fed < steps; fed++) {
        step_ids(fed, same, ids);
        ck_assert_int_eq(zeps_pipe_feed(p, fed, ids, NPOS, (void *)(intptr_t)(fed + 1)), 0);
    }
    for (int64_t s = 0; s < steps; s++) {
        zeps_pipe_step *st;
        ck_assert_int_eq(zeps_pipe_next(p, &st), 0);
        ck_assert_int_eq(st->clock, s);
        ck_assert_ptr_eq(st->user, (void *)(intptr_t)(s + 1));
        ck_assert_uint_eq(st->n, NPOS);
        grad(st->rows[T_EMB], st->rows[T_DENSE], st->grads[T_EMB], st->grads[T_DENSE]);
        ck_assert_int_eq(zeps_pipe_push(p, st), 0);
        if (fed < steps) {
            step_ids(fed, same, ids);
            ck_assert_int_eq(zeps_pipe_feed(p, fed, ids, NPOS, (void *)(intptr_t)(fed + 1)), 0);
            fed++;
        }
    }
    ck_assert_int_eq(zeps_pipe_drain(p), 0);
    zeps_pipe_destroy(&p);
    ck_assert_ptr_null(p);
}

START_TEST(test_prefetch0_bsp_bit_identical)
{
    static float plain[NPARAMS], piped[NPARAMS];
    run_plain(plain);
    for (int m = 0; m <= 2; m += 2) { /* max_inflight changes when pushes are waited for, not what is read */
        zt_cluster cl;
        uint32_t t[NT];
        zeps_client *c = start_declared(&cl, "bsp", t);
        zeps_pipe_opts o = {.prefetch = 0, .max_inflight = m, .clock = 1};
        run_pipe(c, t, &o, 0, STEPS);
        final_params(c, t, STEPS, piped);
        zeps_client_destroy(&c);
        ck_assert_int_eq(zt_cluster_stop(&cl), 0);
        ck_assert_msg(memcmp(plain, piped, sizeof(plain)) == 0,
                      "prefetch 0, max_inflight %d: parameters differ from the blocking loop", m);
    }
    /* and the comparison can fail: prefetch 1 reads older rows */
    zt_cluster cl;
    uint32_t t[NT];
    zeps_client *c = start_declared(&cl, "bsp", t);
    zeps_pipe_opts o = {.prefetch = 1, .max_inflight = 1, .clock = 1};
    run_pipe(c, t, &o, 0, STEPS);
    final_params(c, t, STEPS, piped);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    ck_assert_msg(memcmp(plain, piped, sizeof(plain)) != 0, "prefetch 1 changed nothing");
}
END_TEST

/* The emb table's tau histogram summed over both shards. */
static void tau_hist(zeps_client *c, uint64_t *counts, int nb, uint64_t *n)
{
    memset(counts, 0, (size_t)nb * sizeof(uint64_t));
    *n = 0;
    for (int k = 0; k < 2; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        for (size_t i = 0; i < st->n_tables; i++) {
            if (strcmp(st->tables[i]->name, "emb") != 0)
                continue;
            const Zeps__Histogram *h = st->tables[i]->tau;
            *n += h->n;
            for (size_t b = 0; b < h->n_counts && (int)b < nb; b++)
                counts[b] += h->counts[b];
        }
        zeps__shard_stats__free_unpacked(st, NULL);
    }
}

/* One worker, every step the same 16 rows: tau i for step i < k, k after. */
static void tau_case(const char *mode, int k, int m)
{
    enum { U = 16, N = 20 };
    zt_cluster cl;
    uint32_t t[NT];
    zeps_client *c = start_declared(&cl, mode, t);
    zeps_pipe_opts o = {.prefetch = k, .max_inflight = m, .clock = 1};
    run_pipe(c, t, &o, 1, N);
    uint64_t counts[16], n;
    tau_hist(c, counts, 16, &n);
    ck_assert_uint_eq(n, (uint64_t)U * N);
    for (int i = 0; i < 16; i++) {
        uint64_t want = i < k ? U : i == k ? (uint64_t)U * (N - k) : 0;
        ck_assert_msg(counts[i] == want, "%s prefetch %d max_inflight %d: tau %d counted %llu "
                      "rows, expected %llu", mode, k, m, i, (unsigned long long)counts[i],
                      (unsigned long long)want);
    }
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

/* The clock of worker 0 on shard k, as the shard's STATS reports it. */
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

/* A step's clock rides on its last push to each shard: with both tables on
 * both shards a step is 4 pulls and 4 pushes, no CLOCK (10 requests
 * before); a pipe of one dense table of length 1 (shard 0's slice empty)
 * sends shard 0 a CLOCK alone. Either way both shards reach clock STEPS. */
START_TEST(test_clock_rides_on_pushes)
{
    zt_cluster cl;
    uint32_t t[NT];
    zeps_client *c = start_declared(&cl, "async", t);
    zeps_client_stats a, b;
    zeps_client_get_stats(c, &a);
    zeps_pipe_opts o = {.prefetch = 1, .max_inflight = 1, .clock = 1};
    run_pipe(c, t, &o, 0, STEPS);
    zeps_client_get_stats(c, &b);
    ck_assert_uint_eq(b.requests - a.requests, 8 * STEPS);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(shard_clock(c, k), STEPS);

    zeps_table_spec one = {.name = "one", .length = 1, .optimizer = "sgd", .lr = 0.1};
    uint32_t t1;
    ck_assert_int_eq(zeps_declare(c, &one, &t1), 0);
    zeps_pipe *p;
    ck_assert_int_eq(zeps_pipe_new(c, &t1, 1, &o, &p), 0);
    zeps_client_get_stats(c, &a);
    for (int64_t s = STEPS; s < 2 * STEPS; s++) {
        zeps_pipe_step *st;
        ck_assert_int_eq(zeps_pipe_feed(p, s, NULL, 0, NULL), 0);
        ck_assert_int_eq(zeps_pipe_next(p, &st), 0);
        st->grads[0][0] = 1.0f;
        ck_assert_int_eq(zeps_pipe_push(p, st), 0);
    }
    ck_assert_int_eq(zeps_pipe_drain(p), 0);
    zeps_pipe_destroy(&p);
    zeps_client_get_stats(c, &b);
    ck_assert_uint_eq(b.requests - a.requests, 3 * STEPS); /* pull, push + clock, CLOCK */
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(shard_clock(c, k), 2 * STEPS);

    /* shard 0 refuses the push that carries its clock (a NaN in w[0]): the
     * step is still finished there, as a CLOCK of its own would have */
    ck_assert_int_eq(zeps_pipe_new(c, t, NT, &o, &p), 0);
    uint64_t ids[NPOS];
    step_ids(0, 0, ids);
    zeps_pipe_step *st;
    ck_assert_int_eq(zeps_pipe_feed(p, 2 * STEPS, ids, NPOS, NULL), 0);
    ck_assert_int_eq(zeps_pipe_next(p, &st), 0);
    grad(st->rows[T_EMB], st->rows[T_DENSE], st->grads[T_EMB], st->grads[T_DENSE]);
    st->grads[T_DENSE][0] = NAN;
    ck_assert_int_eq(zeps_pipe_push(p, st), 0);
    ck_assert_int_eq(zeps_pipe_drain(p), ZEPS_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(c), "NaN")); /* the push's text, kept */
    zeps_pipe_destroy(&p);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(shard_clock(c, k), 2 * STEPS + 1);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_tau_counts_prefetch)
{
    tau_case("async", 0, 0);
    tau_case("async", 1, 1);
    tau_case("async", 3, 2);
    tau_case("bsp", 1, 0); /* the pull goes out at the clock reached: no deadlock */
}
END_TEST

START_TEST(test_error_mid_pipeline)
{
    zt_cluster cl;
    uint32_t t[NT];
    zeps_client *c = start_declared(&cl, "async", t);
    zeps_pipe *p;
    zeps_pipe_opts o = {.prefetch = 2, .max_inflight = 2, .clock = 1};
    ck_assert_int_eq(zeps_pipe_new(c, t, NT, &o, &p), 0);
    uint64_t ids[NPOS];
    for (int s = 0; s < 3; s++) {
        step_ids(s, 0, ids);
        ck_assert_int_eq(zeps_pipe_feed(p, s, ids, NPOS, NULL), 0);
    }
    zeps_pipe_step *st;
    ck_assert_int_eq(zeps_pipe_next(p, &st), 0);
    /* misuse: a second next before the push; a push of another step */
    zeps_pipe_step *st2;
    ck_assert_int_eq(zeps_pipe_next(p, &st2), ZEPS_EINVAL);
    zeps_pipe_step fake = *st;
    ck_assert_int_eq(zeps_pipe_push(p, &fake), ZEPS_EINVAL);
    /* a NaN the shards refuse: the error arrives with a later call */
    grad(st->rows[T_EMB], st->rows[T_DENSE], st->grads[T_EMB], st->grads[T_DENSE]);
    st->grads[T_EMB][3] = NAN;
    int rc = zeps_pipe_push(p, st);
    int64_t s = 3;
    for (int i = 0; i < 8 && rc == 0; i++, s++) {
        rc = zeps_pipe_next(p, &st);
        if (rc == 0) {
            grad(st->rows[T_EMB], st->rows[T_DENSE], st->grads[T_EMB], st->grads[T_DENSE]);
            rc = zeps_pipe_push(p, st);
        }
        if (rc == 0) {
            step_ids(s, 0, ids);
            rc = zeps_pipe_feed(p, s, ids, NPOS, NULL);
        }
    }
    if (rc == 0)
        rc = zeps_pipe_drain(p);
    ck_assert_int_eq(rc, ZEPS_ENONFINITE);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(c), "NaN"));
    /* sticky until reset */
    ck_assert_int_eq(zeps_pipe_next(p, &st), ZEPS_ENONFINITE);
    ck_assert_int_eq(zeps_pipe_feed(p, 99, ids, NPOS, NULL), ZEPS_ENONFINITE);
    zeps_pipe_reset(p);
    ck_assert_int_eq(zeps_pipe_next(p, &st), ZEPS_EINVAL); /* nothing fed */
    /* usable again, from any clock */
    step_ids(50, 0, ids);
    ck_assert_int_eq(zeps_pipe_feed(p, 50, ids, NPOS, NULL), 0);
    ck_assert_int_eq(zeps_pipe_next(p, &st), 0);
    ck_assert_int_eq(st->clock, 50);
    grad(st->rows[T_EMB], st->rows[T_DENSE], st->grads[T_EMB], st->grads[T_DENSE]);
    ck_assert_int_eq(zeps_pipe_push(p, st), 0);
    /* feeding past the ring is refused and changes nothing */
    int slots = zeps_pipe_slots(p), refused = 0;
    for (int i = 0; i < slots + 1; i++)
        refused |= zeps_pipe_feed(p, 51 + i, ids, NPOS, NULL) == ZEPS_EINVAL;
    ck_assert(refused);
    /* destroy with steps fed and pulls in flight: waits, frees */
    zeps_pipe_destroy(&p);
    zeps_pipe_destroy(&p); /* NULL is ignored */
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

START_TEST(test_bad_arguments)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t[NT];
    declare(c, t);
    zeps_pipe *p = NULL;
    zeps_pipe_opts o = {.prefetch = -1};
    ck_assert_int_eq(zeps_pipe_new(c, t, NT, &o, &p), ZEPS_EINVAL);
    o = (zeps_pipe_opts){.max_inflight = ZEPS_PIPE_MAX_AHEAD + 1};
    ck_assert_int_eq(zeps_pipe_new(c, t, NT, &o, &p), ZEPS_EINVAL);
    uint32_t bad[2] = {t[0], 77};
    ck_assert_int_eq(zeps_pipe_new(c, bad, 2, NULL, &p), ZEPS_ETABLE);
    ck_assert_int_eq(zeps_pipe_new(c, t, 0, NULL, &p), ZEPS_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(zeps_pipe_new(c, t, NT, NULL, &p), 0);
    ck_assert_int_eq(zeps_pipe_slots(p), 2);
    zeps_pipe_destroy(&p);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipe");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_prefetch0_bsp_bit_identical);
    tcase_add_test(tc, test_tau_counts_prefetch);
    tcase_add_test(tc, test_clock_rides_on_pushes);
    tcase_add_test(tc, test_error_mid_pipeline);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
