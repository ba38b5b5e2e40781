/*
 * test_sparse_bsp.c - a sparse table's bsp rounds through real zeps-server
 * processes: a round's pushes are held (no row is made) until every worker
 * finished the clock, then applied once, a row named by several workers
 * with one optimizer step of their summed gradients, whatever order the
 * pushes arrived in; a push for a closed round from a worker that finished
 * it is refused.
 */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "push_clock.h"
#include "rng.h"
#include "sparse_hash.h"
#include "zeps.h"

#define DIM 8

/* Shard stats summed over S shards: rows held and closed rounds of table 0. */
static void rows_and_rounds(zeps_client *c, int S, uint64_t *rows, uint64_t *rounds)
{
    *rows = *rounds = 0;
    for (int k = 0; k < S; k++) {
        Zeps__ShardStats *st = zt_stats(c, k);
        ck_assert_ptr_nonnull(st);
        *rows += st->tables[0]->rows;
        *rounds += st->tables[0]->rounds;
        zeps__shard_stats__free_unpacked(st, NULL);
    }
}

/* One bsp round of two workers naming a common row 9, pushed in the order
 * `first` then the other: the pushes are held (no row exists) until both
 * finished clock 0, then applied once with the summed gradient; a push for
 * clock 0 after it is refused (ECLOCK). rows[3 * DIM] gets ids 5, 9, 17 after the round. */
static void bsp_round(uint32_t first, const float *g0, const float *g1, float *rows)
{
    enum { S = 2 };
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, S, 2, "bsp", NULL, NULL), 0);
    zeps_client *c[2] = {zt_client(&cl, 0), zt_client(&cl, 1)};
    ck_assert(c[0] && c[1]);
    uint32_t t;
    zeps_sparse_spec spec = {
        .name = "emb", .dim = DIM, .optimizer = "adagrad", .lr = 0.5, .init = "zeros"};
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(zeps_declare_sparse(c[r], &spec, &t), 0);
    static const uint64_t ids0[] = {9, 17}, ids1[] = {5, 9}, all[] = {5, 9, 17};
    const uint64_t *ids[2] = {ids0, ids1};
    const float *g[2] = {g0, g1};
    ck_assert_int_eq(zeps_spush(c[first], t, ids[first], 2, g[first], 0), 0);
    ck_assert_int_eq(zeps_spush(c[1 - first], t, ids[1 - first], 2, g[1 - first], 0), 0);
    uint64_t nrows, rounds;
    rows_and_rounds(c[0], S, &nrows, &rounds);
    ck_assert_uint_eq(nrows, 0); /* held, not applied */
    ck_assert_int_eq(zeps_clock(c[first], 0), 0);
    rows_and_rounds(c[0], S, &nrows, &rounds);
    ck_assert_uint_eq(nrows, 0); /* the other worker has not finished clock 0 */
    ck_assert_uint_eq(rounds, 0);
    ck_assert_int_eq(zeps_clock(c[1 - first], 0), 0);
    rows_and_rounds(c[0], S, &nrows, &rounds);
    ck_assert_uint_eq(nrows, 3);
    ck_assert_uint_eq(rounds, S); /* round 0 closed on each shard */
    ck_assert_int_eq(zeps_spull(c[0], t, all, 3, rows, 1), 0);
    /* a push for the closed round from a worker that finished its clock
     * (a step's push sent with an older step's clock) is refused, never
     * silently dropped, and changes nothing */
    ck_assert_int_eq(zeps_spush(c[1], t, ids1, 2, g1, 0), ZEPS_ECLOCK);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(c[1]), "already finished"));
    float again[3 * DIM];
    ck_assert_int_eq(zeps_spull(c[1], t, all, 3, again, 1), 0);
    ck_assert(memcmp(rows, again, sizeof(again)) == 0);
    for (int r = 0; r < 2; r++)
        zeps_client_destroy(&c[r]);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

/* Adagrad from a zero accumulator: one update with G gives
 * -lr * G / (|G| + eps); two updates in turn would give something else. */
static void check_one_step(const float *row, const float *ga, const float *gb)
{
    for (int d = 0; d < DIM; d++) {
        double G = ga[d] + (gb ? gb[d] : 0.0);
        double want = -0.5 * G / (sqrt(G * G) + 1e-8);
        ck_assert_msg(fabs(row[d] - want) < 1e-6, "dim %d: %.9g, one step of the sum %.9g", d,
                      row[d], want);
    }
}

START_TEST(test_bsp_round_applied_once)
{
    float g0[2 * DIM], g1[2 * DIM];
    zp_rng r;
    zp_rng_seed(&r, 12, 0, 0);
    for (int i = 0; i < 2 * DIM; i++) {
        g0[i] = (float)(zp_rng_uniform(&r) - 0.5);
        g1[i] = (float)(zp_rng_uniform(&r) - 0.5);
    }
    float a[3 * DIM], b[3 * DIM];
    bsp_round(1, g0, g1, a);
    check_one_step(a, g1, NULL);                 /* id 5: rank 1's only */
    check_one_step(a + DIM, g0, g1 + DIM);       /* id 9: both, summed, one step */
    check_one_step(a + 2 * DIM, g0 + DIM, NULL); /* id 17: rank 0's only */
    bsp_round(0, g0, g1, b);
    ck_assert_msg(memcmp(a, b, sizeof(a)) == 0, "the arrival order changed the round's bits");
}
END_TEST

/* A round of one row is applied; a push for a later round (a worker
 * ahead) waits for its own round; the cut moves with a sparse-only job's
 * rounds, so its snapshots are taken there. */
START_TEST(test_rounds_ahead_and_cut)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "bsp",
                                      "  snapshot_dir = \"@DIR@/snap\";\n"
                                      "  snapshot_every_clocks = 1;",
                                      NULL),
                     0);
    zeps_client *c[2] = {zt_client(&cl, 0), zt_client(&cl, 1)};
    ck_assert(c[0] && c[1]);
    uint32_t t;
    zeps_sparse_spec spec = {
        .name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 1.0, .init = "zeros"};
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(zeps_declare_sparse(c[r], &spec, &t), 0);
    const uint64_t a = 5, b = 9;
    float ga[DIM], gb[DIM];
    for (int d = 0; d < DIM; d++)
        ga[d] = 0.5f + (float)d, gb[d] = -1.0f - (float)d;
    ck_assert_int_eq(zeps_spush(c[0], t, &a, 1, ga, 0), 0);
    ck_assert_int_eq(zeps_spush(c[0], t, &b, 1, gb, 1), 0); /* ahead: round 1 */
    ck_assert_int_eq(zeps_clock(c[0], 0), 0);
    ck_assert_int_eq(zeps_clock(c[1], 0), 0); /* round 0 closes: row a only */
    uint64_t nrows, rounds;
    rows_and_rounds(c[0], 1, &nrows, &rounds);
    ck_assert_uint_eq(nrows, 1);
    ck_assert_uint_eq(rounds, 1);
    float row[DIM];
    ck_assert_int_eq(zeps_spull(c[1], t, &a, 1, row, 1), 0);
    for (int d = 0; d < DIM; d++)
        ck_assert_float_eq(row[d], -ga[d]);
    /* the cut is 1: its snapshot is written (by a forked writer) */
    char path[512];
    snprintf(path, sizeof(path), "%s/snap/set-0000000000000001/shard-0-of-1.zsnap", cl.dir);
    bool written = false;
    for (int i = 0; i < 100 && !written; i++, usleep(50000))
        written = access(path, F_OK) == 0;
    ck_assert_msg(written, "no snapshot at the cut of a sparse-only bsp job: %s", path);
    ck_assert_int_eq(zeps_clock(c[0], 1), 0);
    ck_assert_int_eq(zeps_clock(c[1], 1), 0); /* round 1: row b */
    ck_assert_int_eq(zeps_spull(c[1], t, &b, 1, row, 2), 0);
    for (int d = 0; d < DIM; d++)
        ck_assert_float_eq(row[d], -gb[d]);
    for (int r = 0; r < 2; r++)
        zeps_client_destroy(&c[r]);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* A worker pushing clocks far ahead: the held rounds are bounded (4 x
 * max_message_mb x workers), the push past it refused with ENOMEM and
 * words that say why, nothing of it held. */
START_TEST(test_held_rounds_bounded)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 1, 2, "bsp", "  max_message_mb = 1;", NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t;
    zeps_sparse_spec spec = {.name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 1.0};
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    enum { N = 20000 }; /* 800,000 bytes held a push, 880,000 counted with versions */
    static uint64_t ids[N];
    static float g[N * DIM];
    int refused_at = -1;
    for (int k = 0; k < 12 && refused_at < 0; k++) {
        for (int i = 0; i < N; i++)
            ids[i] = (uint64_t)k * N + (uint64_t)i;
        int rc = zeps_spush(c, t, ids, N, g, k);
        if (rc != 0) {
            ck_assert_int_eq(rc, ZEPS_ENOMEM);
            ck_assert_ptr_nonnull(strstr(zeps_last_error(c), "pushing clocks ahead"));
            refused_at = k;
        }
    }
    /* 8,388,608 bytes allowed: 10 pushes held, the 11th refused */
    ck_assert_int_eq(refused_at, 10);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* docs/faults.md, "A bsp worker killed between its shards' pushes", for a
 * sparse table: NIDS rows on 2 shards, each worker's gradient of a row
 * depending on another row (on either shard). */
#define NIDS   64
#define KSTEPS 8
#define KDIE   3
static const zeps_sparse_spec kspec = {.name = "emb",
                                       .dim = DIM,
                                       .optimizer = "adagrad",
                                       .lr = 0.1,
                                       .init = "normal",
                                       .init_scale = 0.5,
                                       .seed = 3};

static void kgrad(const float *rows, float *g, int r, int64_t k)
{
    for (int i = 0; i < NIDS; i++)
        for (int d = 0; d < DIM; d++)
            g[i * DIM + d] =
                0.1f * sinf(rows[i * DIM + d] * (float)(r + 1) +
                            0.5f * rows[((i + NIDS / 2) % NIDS) * DIM + d] + 0.01f * (float)k) +
                0.001f * (float)((i * 7 + r * 13 + d) % 17);
}

/* Worker r's clocks [from, to) through c; 0 or the first error. */
static int ksteps(zeps_client *c, uint32_t t, int r, int64_t from, int64_t to)
{
    uint64_t ids[NIDS];
    float rows[NIDS * DIM], g[NIDS * DIM];
    for (int i = 0; i < NIDS; i++)
        ids[i] = (uint64_t)i;
    int rc = 0;
    for (int64_t k = from; k < to && rc == 0; k++) {
        rc = zeps_spull(c, t, ids, NIDS, rows, k);
        kgrad(rows, g, r, k);
        rc = rc ? rc : zeps_spush(c, t, ids, NIDS, g, k);
        rc = rc ? rc : zeps_clock(c, k);
    }
    return rc;
}

/* A child: worker r's whole job (die: the first incarnation of worker 1,
 * which at clock KDIE pushes the rows of shard 0 alone, its clock riding on
 * that push, and dies as if SIGKILLed before its push to shard 1 left). */
static void kworker(const zt_cluster *cl, int r, bool die)
{
    zeps_client *c = zt_client(cl, (uint32_t)r);
    uint32_t t;
    if (!c || zeps_declare_sparse(c, &kspec, &t) != 0)
        _exit(10);
    if (!die)
        _exit(ksteps(c, t, r, 0, KSTEPS) == 0 ? (zeps_client_destroy(&c), 0) : 11);
    if (ksteps(c, t, r, 0, KDIE) != 0)
        _exit(12);
    uint64_t ids[NIDS], own[NIDS];
    float rows[NIDS * DIM], g[NIDS * DIM], og[NIDS * DIM];
    size_t n = 0;
    for (int i = 0; i < NIDS; i++)
        ids[i] = (uint64_t)i;
    if (zeps_spull(c, t, ids, NIDS, rows, KDIE) != 0)
        _exit(13);
    kgrad(rows, g, r, KDIE);
    for (int i = 0; i < NIDS; i++)
        if (zp_sparse_shard_of(ids[i], 2) == 0) {
            memcpy(og + n * DIM, g + i * DIM, DIM * sizeof(float));
            own[n++] = ids[i];
        }
    zeps_sbatch *b = NULL;
    zeps_req *req = NULL;
    static const uint8_t clock_on[2] = {1, 0};
    if (zeps_sbatch_new(c, t, own, n, &b) != 0 ||
        zp_sparse_push_start_clocked(b, og, KDIE, clock_on, &req) != 0 || zeps_wait(&req) != 0)
        _exit(14);
    raise(SIGKILL);
}

/* One run of the job; every row at its end to out. die: worker 1 dies
 * at KDIE and a new incarnation (this process) redoes its clocks from there. */
static void krun(bool die, float *out)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 2, "bsp", ZT_SHORT_LEASE, NULL), 0);
    pid_t kids[2];
    for (int r = 0; r < 2; r++)
        if ((kids[r] = fork()) == 0)
            kworker(&cl, r, die && r == 1);
    zeps_client *c = NULL;
    uint32_t t;
    if (die) {
        int st = zt_wait(kids[1], 60);
        ck_assert_msg(st >= 0 && WIFSIGNALED(st), "worker 1's first incarnation: status %d", st);
        c = zt_client_replacing(&cl, 1);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(zeps_resume_clock(c), KDIE);
        ck_assert_int_eq(zeps_declare_sparse(c, &kspec, &t), 0);
        ck_assert_int_eq(ksteps(c, t, 1, KDIE, KSTEPS), 0);
    }
    for (int r = die ? 0 : 1; r >= 0; r--) {
        int st = zt_wait(kids[r], 60);
        ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d: %d", r, st);
    }
    if (!c) {
        c = zt_client(&cl, 0); /* rank 0 again, new incarnation */
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(zeps_declare_sparse(c, &kspec, &t), 0);
    }
    uint64_t ids[NIDS];
    for (int i = 0; i < NIDS; i++)
        ids[i] = (uint64_t)i;
    ck_assert_int_eq(zeps_spull(c, t, ids, NIDS, out, KSTEPS), 0);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_worker_dies_between_its_shards)
{
    static float ref[NIDS * DIM], got[NIDS * DIM];
    krun(false, ref);
    krun(true, got);
    int differ = 0;
    for (int i = 0; i < NIDS * DIM; i++)
        differ += memcmp(&ref[i], &got[i], sizeof(float)) != 0;
    ck_assert_msg(differ == 0, "%d of %d values differ from the undisturbed run", differ,
                  NIDS * DIM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sparse_bsp");
    TCase *tc = tcase_create("rounds");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_bsp_round_applied_once);
    tcase_add_test(tc, test_rounds_ahead_and_cut);
    tcase_add_test(tc, test_held_rounds_bounded);
    tcase_add_test(tc, test_worker_dies_between_its_shards);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
