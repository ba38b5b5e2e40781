/*
 * test_bsp_move.c - shards added and removed under bsp while a
 * deterministic job trains sparse rows (docs/elastic.md, "Moves under
 * bsp"), with real shards, real worker processes and the real zepsctl.
 *
 * The job: three worker processes, a sparse table of 600 ids (dim 4,
 * adagrad, a seeded normal init); at every clock each worker pulls the
 * ids of its share of that clock (the shares overlap, so a round sums
 * several workers' rows), pushes a gradient made from the rows it pulled
 * and clocks. The bits of every row at the end depend on every round's
 * rank-order sum and on the order rounds were applied.
 *
 * test_add_remove_bits: the job on two shards; after clock 10 a third
 * shard starts with --join and `zepsctl shards add` gives it a third of
 * the rows by live moves; then `zepsctl shards remove 2` moves them back,
 * `zepsctl shards retire 2`, which waits until every worker clocked
 * twice since (under bsp CLOCK goes to every live shard), and shard 2 is
 * stopped as soon as it returns; the
 * job goes on three more clocks. The workers run at most 100 clocks past
 * the test's last look (<dir>/limit), so every move runs mid-job, among
 * the job's 600 clocks. Then every row's record (values, adagrad state,
 * version, last clock; SCAN) is compared byte for byte with the same job
 * run on two shards without a move. Touch counts (pulls and applies that
 * read a row) are printed, not compared: one run in about twenty showed
 * extra touches on one shard, values equal.
 *
 * test_held_pushes_handed: the same with the moves made while every
 * worker holds pushes in the source's open round: one worker sleeps
 * before its pushes, so the others' pushes of that clock are held when
 * the cut-over comes; the tool's output says how many it handed over (at
 * least one).
 *
 * test_steps: the steps of one move sent one by one as a tool would,
 * with two workers' rounds in between: a round applied to a row after
 * its page (in the clock that closes it) makes the cut-over send it
 * again; pushes held before the cut-over and during it go to the target
 * as round records, one parked after the last page is answered EMOVED and
 * sent there, and the target's round sums all three.
 * test_round_closed_in_cutover: the round closes at the source during
 * the cut-over, after its pushes were taken: a pull that waited for it
 * is answered by the target after the commit, with the round applied
 * (the target applies records of a round it closed at its commit).
 * test_abort_gives_back: an abort gives a taken push back to the
 * source, which applies it though its round closed meanwhile; round
 * records the target refuses (an id outside the slots, a record cut
 * short, a rank outside the cluster). test_commit_after_bound: the tool
 * stalled past the bound after the target's SLOTS. test_records_around_
 * a_close: one round's records before and after the target closes it.
 */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
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
#include "now.h"
#include "rawreq.h"
#include "slot_ids.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define W     3   /* workers */
#define N     600 /* ids */
#define BDIM  4
#define STEPS 600 /* clocks of the job */
#define AHEAD 100 /* clocks the workers may run past the test's last look */

static const zt_gate G = {.workers = W, .steps = STEPS, .ahead = AHEAD};
#define REC ZEPS_ROW_RECORD_BYTES(BDIM, 1)

static uint32_t declare(zeps_client *c)
{
    zeps_sparse_spec spec = {.name = "bspemb",
                             .dim = BDIM,
                             .optimizer = "adagrad",
                             .lr = 0.05,
                             .init = "normal",
                             .init_scale = 0.1,
                             .seed = 7};
    uint32_t t;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    return t;
}

/* Worker w's ids of clock k: the ids i with (i + k + w) % 4 != 0 (three
 * quarters; every id is in the share of at least two workers). */
static size_t share(const uint64_t *ids, int w, int k, uint64_t *out)
{
    size_t n = 0;
    for (int i = 0; i < N; i++)
        if ((i + k + w) % 4 != 0)
            out[n++] = ids[i];
    return n;
}

/* The job's worker process w; `slow`: sleep 30 ms before every push of
 * an odd clock (pushes of the others are then held when a move comes).
 * It starts clock k only below the test's limit, so that the job is still
 * running whenever the test moves slots (each run does the same clocks). */
static void worker(const zt_cluster *cl, int w, bool slow)
{
    static uint64_t ids[N], mine[N];
    static float rows[N * BDIM], g[N * BDIM];
    zt_move_ids(ids, N, 3);
    zeps_client *c = zt_client(cl, (uint32_t)w);
    if (!c)
        _exit(1);
    uint32_t t = declare(c);
    int limit = 0;
    for (int k = 0; k < STEPS; k++) {
        zt_gate_pass(cl, k, &limit);
        size_t n = share(ids, w, k, mine);
        if (zeps_spull(c, t, mine, n, rows, k) != 0)
            goto fail;
        for (size_t i = 0; i < n * BDIM; i++)
            g[i] = 0.5f * rows[i] + 0.01f * (float)(w + 1) - 0.003f * (float)(k % 5);
        if (slow && w == 0 && k % 2 == 1)
            usleep(30000);
        if (zeps_spush(c, t, mine, n, g, k) != 0 || zeps_clock(c, k) != 0)
            goto fail;
        usleep(2000);
    }
    zeps_client_stats st = zt_client_stats(c);
    printf("bsp worker %d: %" PRIu64 " requests, %" PRIu64 " retries, %" PRIu64 " dropped, %" PRIu64
           " slot redirects, slot map epoch %" PRIu64 "\n",
           w, st.requests, st.retries, st.dropped, st.slot_redirects, st.slot_epoch);
    fflush(stdout);
    zeps_client_destroy(&c);
    _exit(0);
fail:
    fprintf(stderr, "bsp worker %d: %s\n", w, zeps_last_error(c));
    _exit(1);
}

static int by_id(const void *a, const void *b)
{
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return x < y ? -1 : x > y;
}

/* Every row of the table on shards 0 and 1 (SCAN), sorted by id; their
 * count (a worker's client: rank 0 again, the job done). */
static size_t scan_all(const zt_cluster *cl, uint8_t **out)
{
    zeps_client *c = zt_client_replacing(cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    size_t n = 0;
    *out = NULL;
    for (int k = 0; k < 2; k++) {
        uint64_t cursor = 0;
        do {
            zeps_page p;
            ck_assert_msg(zeps_scan(c, t, k, cursor, 700, &p) == 0, "%s", zeps_last_error(c));
            ck_assert_uint_eq(p.state_per_value, 1);
            *out = realloc(*out, (size_t)((n + p.count) * REC) + 1);
            memcpy(*out + n * REC, p.data, (size_t)p.bytes);
            n += p.count;
            cursor = p.next;
            zeps_page_release(&p);
        } while (cursor != 0);
    }
    zeps_client_destroy(&c);
    qsort(*out, n, REC, by_id);
    return n;
}

/* The job on two shards without a move: its rows. */
static size_t baseline(uint8_t **rows)
{
    zt_cluster cl;
    pid_t pids[W];
    zt_gate_up(&G, &cl, pids, worker, false);
    zt_gate_end(&G, &cl, pids);
    size_t n = scan_all(&cl, rows);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    return n;
}

/* Hold every worker before its next clock: the limit at two clocks
 * on, a worker already past it stopping after the clock it is in (the
 * workers read the limit at every clock). Returns the slowest worker's
 * clock once it reached the limit: no worker can clock twice from then
 * on (a slowest clock that stood still for 200 ms, the test's sign
 * before, did not say so under load: a worker stalled that long, and
 * `retire --clock-wait-s 1` saw every worker clock twice). */
static int64_t hold_workers(const zt_cluster *cl, zeps_client *tl)
{
    int64_t at = zt_gate_min_clock(&G, tl, 0) + 2;
    zt_gate_write(&G, cl, at);
    for (int i = 0; i < 1200 && zt_gate_min_clock(&G, tl, 0) < at; i++)
        usleep(100 * 1000);
    int64_t seen = zt_gate_min_clock(&G, tl, 0);
    ck_assert_int_ge(seen, at);
    return seen;
}

/* `zepsctl shards retire 2` with every worker held: under bsp it waits
 * for two clocks of each, so with --clock-wait-s 1 it gives up (exit 1,
 * saying why; shard 2 is retired all the same); run again it says
 * "retired already", waits again (still running after 500 ms), and
 * returns once the workers ran on (each has then learned the map and
 * sends shard 2 no CLOCK: the caller stops it at once). */
static void retire_waits(const zt_cluster *cl, zeps_client *tl)
{
    int64_t at = hold_workers(cl, tl);
    char bin[512], log[400];
    zt_bin("zepsctl", bin, sizeof(bin));
    snprintf(log, sizeof(log), "%s/retire.log", cl->dir);
    char *first[] = {"shards",         "retire",         "2", "--config",
                     (char *)cl->conf, "--clock-wait-s", "1", NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, first), 1);
    zt_move_print_file(log);
    ck_assert(zt_move_file_has(log, "did not clock twice within 1 s"));
    char *argv[] = {bin, "shards", "retire", "2", "--config", (char *)cl->conf, NULL};
    pid_t pid = zt_spawn(bin, argv, log);
    ck_assert_int_gt(pid, 0);
    usleep(500 * 1000);
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0,
                  "shards retire returned before any worker clocked since");
    zt_gate_write(&G, cl, at + AHEAD);
    int st = zt_wait(pid, 120);
    zt_move_print_file(log);
    ck_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert(zt_move_file_has(log, "shards retire: shard 2 is retired already; under bsp"));
    ck_assert(zt_move_file_has(log, "shards retire: every worker clocked twice since"));
    ck_assert_int_ge(zt_gate_min_clock(&G, tl, 0), at + 2);
}

/* Each worker's pushes, duplicates and dropped rows on shard k (a push
 * dropped as late would make rows differ: said beside the comparison). */
static void print_workers(zeps_client *tl, int k)
{
    Zeps__ShardStats *st = zt_stats(tl, k);
    ck_assert_ptr_nonnull(st);
    for (size_t i = 0; i < st->n_workers; i++)
        printf("shard %d, worker %u: clock %" PRId64 ", %" PRIu64 " pushes, %" PRIu64
               " duplicates, %" PRIu64 " rows dropped\n",
               k, st->workers[i]->rank, st->workers[i]->clock, st->workers[i]->pushes,
               st->workers[i]->duplicates, st->workers[i]->dropped);
    zeps__shard_stats__free_unpacked(st, NULL);
}

/* The job with shard 2 added after clock 10, then removed, retired and
 * stopped: its rows into *rows, their count; *held the held pushes the
 * moves handed over. */
static size_t with_moves(bool slow, uint8_t **rows, long *held)
{
    zt_cluster cl;
    pid_t pids[W];
    zt_gate_up(&G, &cl, pids, worker, slow);
    zeps_client *tl = zt_move_tool(&cl);
    zt_gate_write(&G, &cl, 12);
    zt_gate_wait_clock(&G, &cl, tl, 10);
    char ep[400];
    zt_move_join(&cl, 2, ep, sizeof(ep));
    char *add[] = {"shards", "add", ep, "--config", cl.conf, "--threshold", "16", NULL};
    ck_assert_int_eq(zt_move_zepsctl_logged(&cl, "add", add), 0);
    zeps_client_destroy(&tl);
    tl = zt_move_tool(&cl); /* knows shard 2 */
    ck_assert_uint_gt(zt_move_rows(tl, 2, NULL), N / 5);
    zt_gate_clocks(&G, &cl, tl, 3); /* rounds close with shard 2 in the job */
    char *rm[] = {"shards", "remove", "2", "--config", cl.conf, "--threshold", "16", NULL};
    zt_gate_wait_clock(&G, &cl, tl, -1);
    ck_assert_int_eq(zt_move_zepsctl_logged(&cl, "remove", rm), 0);
    retire_waits(&cl, tl);
    print_workers(tl, 2);
    int ks = zt_server_kill(&cl, 2, SIGTERM);
    ck_assert(ks >= 0 && WIFEXITED(ks) && WEXITSTATUS(ks) == 0);
    zt_gate_clocks(&G, &cl, tl, 3); /* the job goes on without shard 2 */
    zt_gate_end_mid_job(&G, &cl, tl, pids);
    print_workers(tl, 0);
    print_workers(tl, 1);
    zeps_client_destroy(&tl);
    *held = zt_move_handed(&cl, "add") + zt_move_handed(&cl, "remove");
    size_t n = scan_all(&cl, rows);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
    return n;
}

/* Whether rows a and b (records) differ in anything but their touch count
 * (the count of pulls and applies that read the row: printed apart). */
static bool differ(const uint8_t *a, const uint8_t *b)
{
    return memcmp(a, b, 12) != 0 || memcmp(a + 16, b + 16, REC - 16) != 0;
}

static void same_bits(bool slow)
{
    uint8_t *base, *moved;
    long held = 0;
    size_t nb = baseline(&base), nm = with_moves(slow, &moved, &held);
    ck_assert_uint_eq(nb, N);
    ck_assert_uint_eq(nm, N);
    size_t diff = 0, touches = 0;
    for (size_t i = 0; i < N; i++) {
        uint32_t ta, tb;
        memcpy(&ta, base + i * REC + 12, 4);
        memcpy(&tb, moved + i * REC + 12, 4);
        touches += ta != tb;
        diff += differ(base + i * REC, moved + i * REC);
    }
    printf("bsp%s: %zu of %d rows differ from the run without moves in values, optimizer "
           "state, version or last clock, %zu in touch count; %ld held pushes handed over\n",
           slow ? " with a slow worker" : "", diff, N, touches, held);
    ck_assert_msg(diff == 0, "%zu of %d rows differ from the run without moves", diff, N);
    if (slow)
        ck_assert_int_gt(held, 0);
    free(base);
    free(moved);
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

/* A MOVE step to shard k on sock (a tool's), its reply header and, if
 * `page`, its payload frame (the caller closes it). */
static Zeps__Header *step_to(void *sock, uint32_t step, uint32_t peer, const Zeps__Header *like,
                             const void *data, size_t len, zmq_msg_t *page)
{
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__MOVE);
    h.move_step = step;
    h.move_peer = peer;
    if (like) { /* a PUT of the page `like` answered */
        h.count = like->count;
        h.move_table = like->move_table;
        h.state_per_value = like->state_per_value;
        h.flags = like->flags & ZP_FLAG_HELD;
    } else {
        h.count = 100;
    }
    zt_raw_send(sock, &h, data, len);
    Zeps__Header *rep = zt_raw_recv_payload(sock, ZT_RAW_TIMEOUT_MS, page);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "MOVE step %u: %s", step,
                  rep->error_text ? rep->error_text : "?");
    return rep;
}

/* Pages from shard 0 put to shard 2 until none is left: the rows put and
 * the round records put. */
static void relay(void *src, void *dst, uint64_t *rows, uint64_t *records)
{
    for (;;) {
        zmq_msg_t page;
        Zeps__Header *rep = step_to(src, ZP_MOVE_ROWS, 2, NULL, NULL, 0, &page);
        uint64_t n = rep->count, left = rep->cursor;
        if (n > 0) {
            Zeps__Header *ack =
                step_to(dst, ZP_MOVE_PUT, 0, rep, zmq_msg_data(&page), zmq_msg_size(&page), NULL);
            zeps__header__free_unpacked(ack, NULL);
            *((rep->flags & ZP_FLAG_HELD) ? records : rows) += n;
        }
        zeps__header__free_unpacked(rep, NULL);
        zmq_msg_close(&page);
        if (n == 0 && left == 0)
            return;
    }
}

/* Two bsp workers, three shards, and the move of slot 0 from shard 0 to
 * shard 2 begun (BEGIN, IMPORT, the first pages copied): a tool's
 * sockets to both, the map's wire form, the table. */
typedef struct steps {
    zt_cluster cl;
    zeps_client *c0, *c1;
    uint32_t t;
    void *ctx, *a, *b;
    uint8_t wire[16 + 2 * 4095];
} steps;

static void steps_begin(steps *st)
{
    ck_assert_int_eq(zt_cluster_start(&st->cl, 3, 2, "bsp", NULL, NULL), 0);
    st->c0 = zt_client(&st->cl, 0);
    st->c1 = zt_client(&st->cl, 1);
    ck_assert(st->c0 && st->c1);
    st->t = zt_move_declare(st->c0);
    ck_assert_uint_eq(zt_move_declare(st->c1), st->t);
    memcpy(st->wire, zt_move_map_wire(1, 4095, 2), sizeof(st->wire)); /* slot 0 to shard 2 */
    st->ctx = zmq_ctx_new();
    st->a = zt_raw_socket(st->ctx, &st->cl, 0);
    st->b = zt_raw_socket(st->ctx, &st->cl, 2);
}

static void steps_move(steps *st)
{
    zeps__header__free_unpacked(
        step_to(st->a, ZP_MOVE_BEGIN, 2, NULL, st->wire, sizeof(st->wire), NULL), NULL);
    zeps__header__free_unpacked(
        step_to(st->b, ZP_MOVE_IMPORT, 0, NULL, st->wire, sizeof(st->wire), NULL), NULL);
}

/* The commit: SLOTS to the target, COMMIT to the source, SLOTS to shard 1. */
static void steps_commit(steps *st)
{
    zp_slotmap *next = NULL;
    char why[256];
    ck_assert_int_eq(zp_slotmap_decode(&next, st->wire, sizeof(st->wire), 3, why, sizeof(why)), 0);
    ck_assert_int_eq(zt_raw_slots(&st->cl, 2, next), 0);
    zeps__header__free_unpacked(
        step_to(st->a, ZP_MOVE_COMMIT, 2, NULL, st->wire, sizeof(st->wire), NULL), NULL);
    ck_assert_int_eq(zt_raw_slots(&st->cl, 1, next), 0);
    zp_slotmap_destroy(&next);
}

static void steps_end(steps *st)
{
    zmq_close(st->a);
    zmq_close(st->b);
    zmq_ctx_term(st->ctx);
    zeps_client_destroy(&st->c0);
    zeps_client_destroy(&st->c1);
    ck_assert_int_eq(zt_cluster_stop(&st->cl), 0);
}

/* A round closes at the source during the cut-over, after its pushes of
 * the slots were taken: a pull of X that waited for it is not served
 * there (X would miss the round), but at the target after the commit;
 * the target, which closed the round before the records came, applies
 * them at its commit. */
START_TEST(test_round_closed_in_cutover)
{
    static steps st;
    steps_begin(&st);
    uint64_t x = zt_slot_id_in(3, 0, 0), rows = 0, records = 0;
    float g0[2] = {1, 1}, g1[2] = {2, 2}, got[2];
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &x, 1, got, 0), 0);
    ck_assert_int_eq(zeps_spush(st.c0, st.t, &x, 1, g0, 0), 0);
    ck_assert_int_eq(zeps_spush(st.c1, st.t, &x, 1, g1, 0), 0);
    ck_assert_int_eq(zeps_clock(st.c1, 0), 0);
    zeps_sbatch *bt;
    zeps_req *pull;
    float late[2] = {7, 7};
    ck_assert_int_eq(zeps_sbatch_new(st.c1, st.t, &x, 1, &bt), 0);
    ck_assert_int_eq(zeps_sbatch_pull_start(bt, late, 1, &pull), 0); /* waits for round 0 */
    steps_move(&st);
    relay(st.a, st.b, &rows, &records);
    zeps__header__free_unpacked(step_to(st.a, ZP_MOVE_FREEZE, 2, NULL, NULL, 0, NULL), NULL);
    ck_assert_int_eq(zeps_clock(st.c0, 0), 0); /* round 0 closes everywhere */
    usleep(100 * 1000);
    rows = records = 0;
    relay(st.a, st.b, &rows, &records);
    ck_assert_uint_eq(records, 2); /* both pushes of X, applied by the target at its commit */
    steps_commit(&st);
    ck_assert_msg(zeps_wait(&pull) == 0, "%s", zeps_last_error(st.c1));
    zeps_sbatch_free(&bt);
    ck_assert_msg(late[0] == -3.0f && late[1] == -3.0f, "X as pulled: %g %g", late[0], late[1]);
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &x, 1, got, 1), 0);
    ck_assert_msg(got[0] == -3.0f && got[1] == -3.0f, "X: %g %g", got[0], got[1]);
    steps_end(&st);
}
END_TEST

/* `zepsctl shards move` of slot 0 from shard 0 to shard 2 with a cut-over
 * bound of 400 ms, stopped (ZEPS_FAULT_MOVE=after-target) between the
 * target's SLOTS (the commit point) and the source's COMMIT: its pid. */
static pid_t move_stalled(const steps *st, char *log, size_t len)
{
    snprintf(log, len, "%s/move.log", st->cl.dir);
    char *args[] = {"shards", "move",    "--config", (char *)st->cl.conf, "--from", "0", "--to",
                    "2",      "--slots", "0-2",      "--cutover-ms",      "400",    NULL};
    setenv("ZEPS_FAULT_MOVE", "after-target", 1);
    pid_t tool = zt_move_zepsctl_start(log, args);
    unsetenv("ZEPS_FAULT_MOVE");
    int ws = 0;
    ck_assert_int_eq(waitpid(tool, &ws, WUNTRACED), tool);
    zt_move_print_file(log);
    ck_assert_msg(WIFSTOPPED(ws), "zepsctl did not stop after the target's SLOTS (0x%x)", ws);
    return tool;
}

/* The tool stalls after the last page, between the target's SLOTS and the
 * source's COMMIT, past the cut-over's bound. Ended by the bound then,
 * the source would serve X at the old map beside the target: worker 1's
 * push of X, parked after the last page, would be sent back to it,
 * acknowledged there and lost at the COMMIT (taken as a repair; the tool
 * says nothing): X -1 at the target. The source, drained, waits for the
 * COMMIT (or its lease); the push goes to the target, whose round 0 sums
 * both workers' pushes of X: -3 in each column. */
START_TEST(test_commit_after_bound)
{
    static steps st;
    steps_begin(&st);
    uint64_t x = zt_slot_id_in(3, 0, 0);
    float g0[2] = {1, 1}, g1[2] = {2, 2}, got[2];
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &x, 1, got, 0), 0);
    ck_assert_int_eq(zeps_spush(st.c0, st.t, &x, 1, g0, 0), 0); /* held: handed over */
    char log[400];
    pid_t tool = move_stalled(&st, log, sizeof(log));
    zeps_sbatch *bt;
    zeps_req *pending;
    ck_assert_int_eq(zeps_sbatch_new(st.c1, st.t, &x, 1, &bt), 0);
    ck_assert_int_eq(zeps_sbatch_push_start(bt, g1, 0, &pending), 0); /* parked */
    pid_t waker = fork(); /* the tool goes on 1.5 s later: past the bound and its ticks */
    ck_assert_int_ge(waker, 0);
    if (waker == 0) {
        usleep(1500 * 1000);
        _exit(kill(tool, SIGCONT) == 0 ? 0 : 1);
    }
    ck_assert_msg(zeps_wait(&pending) == 0, "%s", zeps_last_error(st.c1));
    zeps_sbatch_free(&bt);
    zt_move_zepsctl_exits(tool, log, 60, 0);
    int wk = zt_wait(waker, 10);
    ck_assert(wk >= 0 && WIFEXITED(wk) && WEXITSTATUS(wk) == 0);
    ck_assert_int_eq(zeps_clock(st.c0, 0), 0);
    ck_assert_int_eq(zeps_clock(st.c1, 0), 0);
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &x, 1, got, 1), 0);
    ck_assert_msg(got[0] == -3.0f && got[1] == -3.0f, "X: %g %g", got[0], got[1]);
    steps_end(&st);
}
END_TEST

/* Pages from shard 0 put to shard 2 up to the first page of round
 * records (there must be one before the last page). */
static void relay_to_records(void *src, void *dst)
{
    for (bool held = false; !held;) {
        zmq_msg_t page;
        Zeps__Header *rep = step_to(src, ZP_MOVE_ROWS, 2, NULL, NULL, 0, &page);
        ck_assert_msg(rep->count > 0, "the last page came before any round record");
        zeps__header__free_unpacked(
            step_to(dst, ZP_MOVE_PUT, 0, rep, zmq_msg_data(&page), zmq_msg_size(&page), NULL),
            NULL);
        held = (rep->flags & ZP_FLAG_HELD) != 0;
        zeps__header__free_unpacked(rep, NULL);
        zmq_msg_close(&page);
    }
}

/* The round records of one round reach the target in two pages, one
 * before and one after the target closes the round: worker 0's push of
 * X, held before FREEZE, in the first; worker 1's, held in the cut-over
 * and answered, in the next, while worker 1's CLOCK, sent on that answer,
 * closes round 0 at the target first. Applied as they came, X would meet
 * round 0 in two parts, and the first part would be lost under X's row
 * sent again (worker 1's push marked it) in the last pages: X -2. The
 * target keeps the records until the commit and merges the round whole:
 * X -3, as Y, a row of shard 1 (no move) given the same pushes. */
START_TEST(test_records_around_a_close)
{
    static steps st;
    steps_begin(&st);
    uint64_t ids[2] = {zt_slot_id_in(3, 0, 0), zt_slot_id_on(3, 1, 4095, 0)}; /* X, Y */
    float g0[4] = {1, 1, 1, 1}, g1[4] = {2, 2, 2, 2}, got[4];
    uint64_t rows = 0, records = 0;
    ck_assert_int_eq(zeps_spull(st.c0, st.t, ids, 2, got, 0), 0);
    ck_assert_int_eq(zeps_spush(st.c0, st.t, ids, 2, g0, 0), 0); /* X's held: a record */
    steps_move(&st);
    relay(st.a, st.b, &rows, &records);
    zeps__header__free_unpacked(step_to(st.a, ZP_MOVE_FREEZE, 2, NULL, NULL, 0, NULL), NULL);
    relay_to_records(st.a, st.b);
    ck_assert_int_eq(zeps_spush(st.c1, st.t, ids, 2, g1, 0), 0); /* held in the cut-over */
    ck_assert_int_eq(zeps_clock(st.c0, 0), 0);
    ck_assert_int_eq(zeps_clock(st.c1, 0), 0); /* round 0 closes at the target */
    rows = records = 0;
    relay(st.a, st.b, &rows, &records);
    ck_assert_uint_eq(records, 1); /* worker 1's push of X, after the close */
    steps_commit(&st);
    ck_assert_int_eq(zeps_spull(st.c0, st.t, ids, 2, got, 1), 0);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(got[i] == -3.0f, "X %g %g, Y %g %g", got[0], got[1], got[2], got[3]);
    steps_end(&st);
}
END_TEST

/* Round records the target refuses, holding nothing: an id outside the
 * moving slots, a record cut short, a rank outside the cluster. */
static void held_put_refused(steps *st, uint64_t in_m)
{
    uint64_t rec[5] = {0, 0, 1, zt_slot_id_in(3, 1, 0), 0}; /* rank 0, clock 0, 1 row, g 0 */
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__MOVE);
    h.move_step = ZP_MOVE_PUT;
    h.move_peer = 0;
    h.move_table = "emb";
    h.count = 1;
    h.flags = ZP_FLAG_HELD;
    zt_raw_expect_error(zt_raw_req(st->b, &h, rec, sizeof(rec)), ZEPS_EINVAL,
                        "is not in the moving slots");
    rec[3] = in_m;
    zt_raw_expect_error(zt_raw_req(st->b, &h, rec, 32), ZEPS_ESIZE, "does not fit");
    rec[0] = 7; /* rank 7 of 2 workers */
    zt_raw_expect_error(zt_raw_req(st->b, &h, rec, sizeof(rec)), ZEPS_ESIZE, "of 2 workers");
}

/* An abort after the cut-over took a held push, with its round closed at
 * the source meanwhile: the push comes back and is applied there. */
START_TEST(test_abort_gives_back)
{
    static steps st;
    steps_begin(&st);
    uint64_t z = zt_slot_id_in(3, 0, 0), rows = 0, records = 0;
    float g0[2] = {1, 1}, got[2];
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &z, 1, got, 0), 0);
    ck_assert_int_eq(zeps_spush(st.c0, st.t, &z, 1, g0, 0), 0); /* held */
    steps_move(&st);
    relay(st.a, st.b, &rows, &records);
    zeps__header__free_unpacked(step_to(st.a, ZP_MOVE_FREEZE, 2, NULL, NULL, 0, NULL), NULL);
    ck_assert_int_eq(zeps_clock(st.c0, 0), 0);
    ck_assert_int_eq(zeps_clock(st.c1, 0), 0); /* round 0 closes without the push taken */
    held_put_refused(&st, z);
    zeps__header__free_unpacked(step_to(st.a, ZP_MOVE_ABORT, 2, NULL, NULL, 0, NULL), NULL);
    zeps__header__free_unpacked(step_to(st.b, ZP_MOVE_ABORT, 0, NULL, NULL, 0, NULL), NULL);
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &z, 1, got, 1), 0);
    ck_assert_msg(got[0] == -1.0f && got[1] == -1.0f, "Z: %g %g", got[0], got[1]);
    ck_assert_uint_eq(zt_move_rows(st.c0, 2, NULL), 0); /* the target dropped what it took */
    steps_end(&st);
}
END_TEST

/* The steps of a move one by one, with two workers' bsp rounds between
 * them: (1) both push X for clock 0, worker 0 clocks, the copy sends X,
 * then worker 1 clocks: the round applies to X after its page, in the
 * clock that closes it, so the cut-over must send X again; (2) worker 0
 * pushes Y for clock 1 before the cut-over (held: taken at FREEZE and
 * handed over), worker 1 during it (held and handed over too) and once
 * more after the last page (parked, then EMOVED and sent to the target):
 * the target's round 1 sums all three, in rank order. */
START_TEST(test_steps)
{
    static steps st;
    steps_begin(&st);
    uint64_t x = zt_slot_id_in(3, 0, 0), y = zt_slot_id_in(3, 0, x), rows = 0, records = 0;
    float g0[2] = {1, 1}, g1[2] = {2, 2}, got[2];
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &x, 1, got, 0), 0); /* X's row is made */
    ck_assert_int_eq(zeps_spush(st.c0, st.t, &x, 1, g0, 0), 0);
    ck_assert_int_eq(zeps_spush(st.c1, st.t, &x, 1, g1, 0), 0);
    ck_assert_int_eq(zeps_clock(st.c0, 0), 0);
    steps_move(&st);
    relay(st.a, st.b, &rows, &records);
    ck_assert_uint_eq(rows, 1);                /* X, before its round */
    ck_assert_int_eq(zeps_clock(st.c1, 0), 0); /* round 0 applies to X at shard 0 */
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &y, 1, got, 1), 0);
    ck_assert_int_eq(zeps_spush(st.c0, st.t, &y, 1, g0, 1), 0); /* held for round 1 */
    zeps__header__free_unpacked(step_to(st.a, ZP_MOVE_FREEZE, 2, NULL, NULL, 0, NULL), NULL);
    ck_assert_int_eq(zeps_spush(st.c1, st.t, &y, 1, g1, 1), 0); /* held in the cut-over */
    rows = records = 0;
    relay(st.a, st.b, &rows, &records);
    ck_assert_uint_eq(rows, 2);    /* X again (its round applied after its page), Y */
    ck_assert_uint_eq(records, 2); /* both pushes of Y */
    zeps_sbatch *bt;
    zeps_req *pending;
    ck_assert_int_eq(zeps_sbatch_new(st.c1, st.t, &y, 1, &bt), 0);
    ck_assert_int_eq(zeps_sbatch_push_start(bt, g1, 1, &pending), 0); /* parked */
    usleep(100 * 1000);
    steps_commit(&st);
    ck_assert_msg(zeps_wait(&pending) == 0, "%s", zeps_last_error(st.c1)); /* sent to shard 2 */
    zeps_sbatch_free(&bt);
    ck_assert_int_eq(zeps_clock(st.c0, 1), 0);
    ck_assert_int_eq(zeps_clock(st.c1, 1), 0);
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &x, 1, got, 2), 0);
    ck_assert_msg(got[0] == -3.0f && got[1] == -3.0f, "X: %g %g", got[0], got[1]);
    ck_assert_int_eq(zeps_spull(st.c0, st.t, &y, 1, got, 2), 0);
    ck_assert_msg(got[0] == -5.0f && got[1] == -5.0f, "Y: %g %g", got[0], got[1]);
    ck_assert_uint_eq(zt_move_rows(st.c0, 0, NULL), 0); /* the source dropped X and Y */
    steps_end(&st);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"bsp_move", 300, {test_add_remove_bits, test_held_pushes_handed}},
        {"steps",
         120,
         {test_steps, test_round_closed_in_cutover, test_abort_gives_back, test_commit_after_bound,
          test_records_around_a_close}},
    };
    return zt_run_cases("bsp_move", cases, sizeof(cases) / sizeof(cases[0]));
}
