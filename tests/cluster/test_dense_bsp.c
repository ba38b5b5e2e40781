/*
 * test_dense_bsp.c - dense pieces moved under bsp while a deterministic
 * MLP-like job trains (docs/elastic.md, "Moves under bsp"), with real
 * shards, real worker processes and the real zepsctl.
 *
 * The job: three worker processes and two dense tables, 'l1' (3,000
 * elements, adam) and 'l2' (1,200, momentum), seeded normal inits. At
 * every clock each worker pulls both tables whole, pushes a gradient made
 * from what it pulled (its rank and the clock in it) and clocks. Under
 * bsp a dense round closes once every worker pushed, summed in rank
 * order, so every element's bits depend on each round's three pushes and
 * on the order of the sums.
 *
 * test_add_remove_bits: the job on two shards; after clock 10 a third
 * shard starts with --join and `zepsctl shards add` gives it an even
 * share of each table (cuts, then moves of dense ranges); later `zepsctl
 * shards remove 2` moves its pieces back, `zepsctl shards retire 2`, and
 * shard 2 is stopped; the job goes on. The workers run at most AHEAD
 * clocks past the test's last look, so every move runs mid-job. Then
 * every element's value, optimizer state and version (SCAN of shards 0
 * and 1) is compared with the same job run on two shards without a move:
 * 0 differences.
 *
 * test_held_pushes_handed: the same with one worker sleeping before its
 * pushes of odd clocks, so the others' pushes are held in the source's
 * open round when a cut-over comes: the tools say how many held pushes
 * they handed over (at least one), and the bits are still equal.
 *
 * test_steps_commit and test_steps_abort: the steps of one dense move
 * sent one by one as a tool would, two workers, shard 0's piece cut in
 * two while its round holds one worker's push, both parts moving: a
 * round page per part carries its part of the push; the target refuses
 * round pages that are cut short, a float short, of a rank outside the
 * cluster, with NaN, for another range, or a rank's second push; after
 * the commit the other worker's push, redirected, closes the rounds at
 * the target; after an abort, at the source (which kept its rounds).
 * Both end with -(g0 + g1) / 2 exactly.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "gate.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define W     3   /* workers */
#define STEPS 300 /* clocks of the job */
#define AHEAD 40  /* clocks the workers may run past the test's last look */

static const zt_gate G = {.workers = W, .steps = STEPS, .ahead = AHEAD};
#define NT 2 /* tables */

static const uint64_t lens[NT] = {3000, 1200};
static const uint32_t kstate[NT] = {2, 1}; /* adam: m, v; momentum: the velocity */

static void declare(zeps_client *c, uint32_t *t)
{
    zeps_table_spec a = {.name = "l1",
                         .length = 3000,
                         .optimizer = "adam",
                         .lr = 0.01,
                         .init = "normal",
                         .init_scale = 0.1,
                         .seed = 11};
    zeps_table_spec b = {.name = "l2",
                         .length = 1200,
                         .optimizer = "momentum",
                         .lr = 0.05,
                         .momentum = 0.9,
                         .init = "normal",
                         .init_scale = 0.1,
                         .seed = 12};
    ck_assert_int_eq(zeps_declare(c, &a, &t[0]), 0);
    ck_assert_int_eq(zeps_declare(c, &b, &t[1]), 0);
}

/* Worker w's gradient of table i at clock k from the values it pulled. */
static void gradient(int i, int w, int k, const float *v, float *g)
{
    for (uint64_t e = 0; e < lens[i]; e++)
        g[e] = 0.5f * v[e] + 0.01f * (float)(w + 1) - 0.003f * (float)((k + (int)e) % 5);
}

/* The job's worker process w; `slow`: worker 0 sleeps 30 ms before its
 * pushes of odd clocks. Clock k starts only below the test's limit. */
static void worker(const zt_cluster *cl, int w, bool slow)
{
    static float v[3000], g[3000];
    zeps_client *c = zt_client(cl, (uint32_t)w);
    if (!c)
        _exit(1);
    uint32_t t[NT];
    declare(c, t);
    int limit = 0;
    for (int k = 0; k < STEPS; k++) {
        zt_gate_pass(cl, k, &limit);
        if (slow && w == 0 && k % 2 == 1)
            usleep(30000);
        for (int i = 0; i < NT; i++) {
            if (zeps_pull(c, t[i], v, 0, lens[i], k) != 0)
                goto fail;
            gradient(i, w, k, v, g);
            if (zeps_push(c, t[i], g, 0, lens[i], k) != 0)
                goto fail;
        }
        if (zeps_clock(c, k) != 0)
            goto fail;
    }
    zeps_client_destroy(&c);
    _exit(0);
fail:
    fprintf(stderr, "dense bsp worker %d: %s\n", w, zeps_last_error(c));
    _exit(1);
}

/* A table's end state: per element its value, its state floats and its
 * piece's version. */
typedef struct tstate {
    float *f;       /* lens * (1 + k): values, then k blocks of state */
    uint64_t *vers; /* lens */
    uint64_t seen;  /* elements read */
} tstate;

/* Table i's elements on shards 0 and 1 (SCAN) into st. */
static void scan_table(zeps_client *c, uint32_t t, int i, tstate *st)
{
    uint64_t n = lens[i], k = kstate[i];
    st->f = calloc(n * (1 + k), sizeof(float));
    st->vers = calloc(n, sizeof(uint64_t));
    st->seen = 0;
    for (int sh = 0; sh < 2; sh++) {
        uint64_t cursor = 0;
        do {
            zeps_page p;
            ck_assert_msg(zeps_scan(c, t, sh, cursor, 0, &p) == 0, "%s", zeps_last_error(c));
            ck_assert_uint_eq(p.state_per_value, k);
            const float *d = p.data;
            for (uint64_t e = 0; e < p.count; e++) {
                for (uint64_t b = 0; b <= k; b++)
                    st->f[b * n + p.offset + e] = d[b * p.count + e];
                st->vers[p.offset + e] = p.version;
            }
            st->seen += p.count;
            cursor = p.next;
            zeps_page_release(&p);
        } while (cursor != 0);
    }
}

/* Both tables' end states (a worker's client: rank 0 again, the job done). */
static void scan_all(const zt_cluster *cl, tstate *st)
{
    zeps_client *c = zt_client_replacing(cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t[NT];
    declare(c, t);
    for (int i = 0; i < NT; i++)
        scan_table(c, t[i], i, &st[i]);
    zeps_client_destroy(&c);
}

/* The job on two shards without a move. */
static void baseline(tstate *st)
{
    zt_cluster cl;
    pid_t pids[W];
    zt_gate_up(&G, &cl, pids, worker, false);
    zt_gate_end(&G, &cl, pids);
    scan_all(&cl, st);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

/* The job with shard 2 added after clock 10, then removed, retired and
 * stopped; *held the held pushes the moves handed over. */
static void with_moves(bool slow, tstate *st, long *held)
{
    zt_cluster cl;
    pid_t pids[W];
    zt_gate_up(&G, &cl, pids, worker, slow);
    zeps_client *tl = zt_move_tool(&cl);
    zt_gate_write(&G, &cl, 12);
    zt_gate_wait_clock(&G, &cl, tl, 10);
    char ep[400];
    zt_move_join(&cl, 2, ep, sizeof(ep));
    char *add[] = {"shards", "add", ep, "--config", cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&cl, "add", add), 0);
    char log[400];
    snprintf(log, sizeof(log), "%s/add.log", cl.dir);
    ck_assert(zt_move_file_has(log, "dense table 'l1': shard 2 holds 1000 of 3000 elements"));
    ck_assert(zt_move_file_has(log, "dense table 'l2': shard 2 holds 400 of 1200 elements"));
    zt_gate_clocks(&G, &cl, tl, 3); /* rounds close with shard 2 in the job */
    zt_gate_wait_clock(&G, &cl, tl, -1);
    char *rm[] = {"shards", "remove", "2", "--config", cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&cl, "remove", rm), 0);
    zt_gate_wait_clock(&G, &cl, tl, -1);
    char *ret[] = {"shards", "retire", "2", "--config", cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&cl, "retire", ret), 0);
    zt_gate_clocks(&G, &cl, tl, 2); /* every worker learned the map retiring shard 2 */
    int ks = zt_server_kill(&cl, 2, SIGTERM);
    ck_assert(ks >= 0 && WIFEXITED(ks) && WEXITSTATUS(ks) == 0);
    zt_gate_clocks(&G, &cl, tl, 3); /* the job goes on without shard 2 */
    zt_gate_end_mid_job(&G, &cl, tl, pids);
    zeps_client_destroy(&tl);
    *held = zt_move_handed(&cl, "add") + zt_move_handed(&cl, "remove");
    scan_all(&cl, st);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

static void same_bits(bool slow)
{
    tstate base[NT], moved[NT];
    long held = 0;
    baseline(base);
    with_moves(slow, moved, &held);
    size_t diff = 0, vdiff = 0, all = 0;
    for (int i = 0; i < NT; i++) {
        uint64_t n = lens[i];
        ck_assert_uint_eq(base[i].seen, n);
        ck_assert_uint_eq(moved[i].seen, n);
        for (uint64_t e = 0; e < n; e++) {
            bool d = false;
            for (uint64_t b = 0; b <= kstate[i]; b++)
                d |= memcmp(&base[i].f[b * n + e], &moved[i].f[b * n + e], sizeof(float)) != 0;
            diff += d;
            vdiff += base[i].vers[e] != moved[i].vers[e];
            all++;
        }
        ck_assert_uint_gt(base[i].vers[0], STEPS / 2); /* the rounds were applied */
        free(base[i].f);
        free(base[i].vers);
        free(moved[i].f);
        free(moved[i].vers);
    }
    printf("dense bsp%s: %zu of %zu elements differ from the run without moves in value or "
           "optimizer state, %zu in version; %ld held pushes handed over\n",
           slow ? " with a slow worker" : "", diff, all, vdiff, held);
    fflush(stdout);
    ck_assert_msg(diff == 0 && vdiff == 0, "%zu elements differ, %zu versions", diff, vdiff);
    if (slow)
        ck_assert_int_gt(held, 0);
}

START_TEST(test_add_remove_bits)
{
    same_bits(false);
}
END_TEST

START_TEST(test_held_pushes_handed)
{
    same_bits(true);
}
END_TEST

#define SLEN 100 /* the steps' table 'w': sgd, lr 1, zeros */

static uint32_t declare_w(zeps_client *c)
{
    zeps_table_spec spec = {
        .name = "w", .length = SLEN, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &spec, &t), 0);
    return t;
}

/* A MOVE step on sock (a tool's socket): its reply header and, if
 * `page`, its payload (empty if none; the caller closes it). `like`: a
 * PUT of the page it answered, `count` its count (0: like's). */
static Zeps__Header *mstep(void *sock, uint32_t step, uint32_t peer, const Zeps__Header *like,
                           uint64_t offset, const void *data, size_t len, zmq_msg_t *page)
{
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__MOVE);
    h.move_step = step;
    h.move_peer = peer;
    h.count = step == ZP_MOVE_ROWS ? 64 : 0;
    if (like) {
        h.count = like->count;
        h.offset = offset;
        h.move_table = like->move_table;
        h.state_per_value = like->state_per_value;
        h.data_version = like->data_version;
        h.flags = like->flags & ZP_FLAG_HELD;
    }
    zt_raw_send(sock, &h, data, len);
    return zt_raw_recv_payload(sock, ZT_RAW_TIMEOUT_MS, page);
}

/* The same, answered without an error (freed). */
static void mstep_ok(void *sock, uint32_t step, uint32_t peer, const void *data, size_t len)
{
    Zeps__Header *rep = mstep(sock, step, peer, NULL, 0, data, len, NULL);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "MOVE step %u: %s", step,
                  rep->error_text ? rep->error_text : "?");
    zeps__header__free_unpacked(rep, NULL);
}

/* The round pages the target refuses, each with its code, holding nothing:
 * page (len bytes, rank 0's push of the piece like names) altered. */
static void refused_rounds(void *b, const Zeps__Header *like, const uint8_t *page, size_t len)
{
    uint8_t *bad = malloc(len);
    struct {
        size_t len;
        uint64_t offset;
        int code;
        const char *needle;
    } cases[] = {{10, 0, ZEPS_ESIZE, "cut short"},
                 {len - 4, 0, ZEPS_ESIZE, "is not the"},
                 {len, 0, ZEPS_ESIZE, "rank 7 of 2 workers"},
                 {len, 0, ZEPS_ENONFINITE, "NaN or Inf"},
                 {len, 10, ZEPS_EINVAL, "is not a piece moving"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memcpy(bad, page, len);
        uint32_t rank = 7;
        float nan = strtof("nan", NULL);
        if (i == 2)
            memcpy(bad + 12, &rank, 4);
        if (i == 3)
            memcpy(bad + 24 + 4 * 17, &nan, 4);
        Zeps__Header *rep =
            mstep(b, ZP_MOVE_PUT, 0, like, like->offset + cases[i].offset, bad, cases[i].len, NULL);
        ck_assert_int_eq(rep->op, ZEPS__OP__ERROR);
        zt_raw_expect_error(rep, cases[i].code, cases[i].needle);
    }
    free(bad);
}

/* Two bsp workers on two shards; worker 0 pushed g0 for round 0; shard
 * 0's piece cut at 30; the move of both its pieces from shard 0 to 1
 * begun, frozen and copied (each round page refused altered, then put; a
 * second put refused). */
typedef struct dsteps {
    zt_cluster cl;
    zeps_client *c[2];
    uint32_t t;
    void *ctx, *a, *b;
    uint8_t *wire;
    size_t len;
    float g[2][SLEN];
} dsteps;

/* The pages from A put to B; round pages are tried altered first. */
static void copy_pages(dsteps *st)
{
    uint64_t held = 0;
    for (;;) {
        zmq_msg_t page;
        Zeps__Header *rep = mstep(st->a, ZP_MOVE_ROWS, 1, NULL, 0, NULL, 0, &page);
        ck_assert_int_eq(rep->op, ZEPS__OP__MOVE);
        uint64_t n = rep->count, left = rep->cursor;
        const uint8_t *d = zmq_msg_data(&page);
        size_t len = zmq_msg_size(&page);
        if (n > 0 && (rep->flags & ZP_FLAG_HELD)) {
            ck_assert_uint_eq(len, 24 + 4 * rep->count); /* rank 0's push of the piece */
            refused_rounds(st->b, rep, d, len);
            held++;
        }
        if (n > 0) {
            Zeps__Header *ack = mstep(st->b, ZP_MOVE_PUT, 0, rep, rep->offset, d, len, NULL);
            ck_assert_msg(ack->op == ZEPS__OP__MOVE, "PUT: %s", ack->error_text);
            zeps__header__free_unpacked(ack, NULL);
        }
        if (n > 0 && (rep->flags & ZP_FLAG_HELD)) /* the same push again */
            zt_raw_expect_error(mstep(st->b, ZP_MOVE_PUT, 0, rep, rep->offset, d, len, NULL),
                                ZEPS_EINVAL, "a second push of rank 0");
        zeps__header__free_unpacked(rep, NULL);
        zmq_msg_close(&page);
        if (n == 0 && left == 0)
            break;
    }
    ck_assert_uint_eq(held, 2); /* one per piece */
}

static void dsteps_begin(dsteps *st)
{
    ck_assert_int_eq(zt_cluster_start(&st->cl, 2, 2, "bsp", NULL, NULL), 0);
    for (int w = 0; w < 2; w++) {
        st->c[w] = zt_client(&st->cl, (uint32_t)w);
        ck_assert_ptr_nonnull(st->c[w]);
        st->t = declare_w(st->c[w]);
    }
    for (int i = 0; i < SLEN; i++) {
        st->g[0][i] = (float)(i % 7 + 1);
        st->g[1][i] = (float)(i % 5);
    }
    ck_assert_int_eq(zeps_push(st->c[0], st->t, st->g[0], 0, SLEN, 0), 0); /* held */
    zp_slotmap *d = NULL, *cut = NULL, *m = NULL;
    char err[256];
    ck_assert_int_eq(zp_slotmap_new_default(&d, 2), 0);
    /* shard 0's piece cut at 30 (each part holds its part of the push) */
    ck_assert_int_eq(zp_slotmap_dense_moved(d, "w", SLEN, 0, 30, 0, &cut, err, sizeof(err)), 0);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(zt_raw_slots(&st->cl, k, cut), 0);
    /* the move of both parts, [0, 30) and [30, 50), to shard 1 */
    ck_assert_int_eq(zp_slotmap_dense_moved(cut, "w", SLEN, 0, 50, 1, &m, err, sizeof(err)), 0);
    zp_slotmap_destroy(&cut);
    st->len = zp_slotmap_wire_size(m);
    st->wire = malloc(st->len);
    zp_slotmap_encode(m, st->wire);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    st->ctx = zmq_ctx_new();
    st->a = zt_raw_socket(st->ctx, &st->cl, 0);
    st->b = zt_raw_socket(st->ctx, &st->cl, 1);
    mstep_ok(st->a, ZP_MOVE_BEGIN, 1, st->wire, st->len);
    mstep_ok(st->b, ZP_MOVE_IMPORT, 0, st->wire, st->len);
    mstep_ok(st->a, ZP_MOVE_FREEZE, 1, NULL, 0);
    copy_pages(st);
}

/* Worker 1 pushes g1 for round 0, cut by the default slices: redirected
 * once (to shard 1 after a commit; after an abort, by shard 0, whose
 * piece is cut); both workers' pulls at clock 1 read -(g0 + g1) / 2. */
static void dsteps_end(dsteps *st)
{
    ck_assert_int_eq(zeps_push(st->c[1], st->t, st->g[1], 0, SLEN, 0), 0);
    zeps_client_stats cs;
    zeps_client_get_stats(st->c[1], &cs);
    ck_assert_uint_eq(cs.slot_redirects, 1);
    float got[SLEN];
    for (int w = 0; w < 2; w++) {
        ck_assert_int_eq(zeps_pull(st->c[w], st->t, got, 0, SLEN, 1), 0);
        for (int i = 0; i < SLEN; i++)
            ck_assert_msg(got[i] == -(st->g[0][i] + st->g[1][i]) / 2,
                          "worker %d, element %d: %g, want %g", w, i, (double)got[i],
                          (double)(-(st->g[0][i] + st->g[1][i]) / 2));
    }
    zmq_close(st->a);
    zmq_close(st->b);
    zmq_ctx_term(st->ctx);
    free(st->wire);
    for (int w = 0; w < 2; w++)
        zeps_client_destroy(&st->c[w]);
    ck_assert_int_eq(zt_cluster_stop(&st->cl), 0);
}

START_TEST(test_steps_commit)
{
    static dsteps st;
    dsteps_begin(&st);
    zp_slotmap *next = NULL;
    char why[256];
    ck_assert_int_eq(zp_slotmap_decode(&next, st.wire, st.len, 2, why, sizeof(why)), 0);
    ck_assert_int_eq(zt_raw_slots(&st.cl, 1, next), 0); /* the commit point */
    zp_slotmap_destroy(&next);
    mstep_ok(st.a, ZP_MOVE_COMMIT, 1, st.wire, st.len);
    dsteps_end(&st);
}
END_TEST

START_TEST(test_steps_abort)
{
    static dsteps st;
    dsteps_begin(&st);
    mstep_ok(st.b, ZP_MOVE_ABORT, 0, NULL, 0);
    mstep_ok(st.a, ZP_MOVE_ABORT, 1, NULL, 0);
    dsteps_end(&st);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"job", 300, {test_add_remove_bits, test_held_pushes_handed}},
        {"steps", 120, {test_steps_commit, test_steps_abort}},
    };
    return zt_run_cases("dense_bsp", cases, sizeof(cases) / sizeof(cases[0]));
}
