/*
 * test_migrate.c - live moves of a slot set between running shards
 * (docs/elastic.md "Live migration of a slot set"), with real shards,
 * real worker processes and the real `zepsctl shards move`; the moves
 * that fail or are refused are test_migrate_abort.c's.
 *
 * test_move_under_async_load, test_move_under_ssp_load: three shards;
 * three worker processes push the same ids over and over (sgd, lr 1,
 * zeros: a push of worker w adds 1 to column 0 and w + 1 to column 1 of
 * every row, so each row says how many pushes were applied: the counter
 * oracle), each counting the pushes it was answered for. zepsctl moves
 * half of shard 0's slots to shard 2 while they push; afterwards every
 * row is exact (0 lost, 0 applied twice), every shard holds exactly the
 * rows the new map gives it (shard 0 none of the moved slots), every
 * shard's map is the new one, and the workers were redirected.
 * test_move_parked_pull: an ssp pull held by the bound across the move is
 * answered from the target with the moved values.
 * test_move_keeps_windows: a push the source applied, sent again after
 * the commit, is a duplicate there, not a second update at the target.
 * test_move_new_table: a table declared after the move began moves too
 * (the steps driven by hand, as a tool of its own would).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define WORKERS 3

/* Worker process w: push every id each step (and end the step's clock)
 * until `stop` exists (and at least 20 steps), then write "pushes
 * redirects" to `out`; worker 0 then waits for the others to leave, pulls
 * every row and writes them to `out`.rows. Exit 0, or 1 on any error
 * (printed). */
static void worker(const zt_cluster *cl, int w, const char *stop, const char *out)
{
    static uint64_t ids[NIDS];
    static float g[NIDS * DIM], rows[NIDS * DIM];
    zt_move_ids(ids, NIDS, 0);
    for (int i = 0; i < NIDS; i++) {
        g[i * DIM] = -1.0f;
        g[i * DIM + 1] = -(float)(w + 1);
    }
    zeps_client *c = zt_client(cl, (uint32_t)w);
    if (!c)
        _exit(1);
    uint32_t t = zt_move_declare(c);
    long pushes = 0;
    int step = 0;
    for (; step < 20 || access(stop, F_OK) != 0; step++) {
        if (zeps_spush(c, t, ids, NIDS, g, step) != 0 ||
            (step % 2 == 0 && zeps_spull(c, t, ids, NIDS, rows, step) != 0) ||
            zeps_clock(c, step) != 0) {
            fprintf(stderr, "worker %d: step %d: %s\n", w, step, zeps_last_error(c));
            _exit(1);
        }
        pushes++;
    }
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    char path[1300];
    snprintf(path, sizeof(path), "%s.tmp", out);
    FILE *f = fopen(path, "w");
    fprintf(f, "%ld %llu\n", pushes, (unsigned long long)st.slot_redirects);
    fclose(f);
    if (w != 0) {
        zeps_client_destroy(&c); /* BYE: the others' clocks no longer wait for it */
        rename(path, out);
        _exit(0);
    }
    for (int k = 1; k < WORKERS; k++) {
        char other[1300];
        snprintf(other, sizeof(other), "%.*s%d.out", (int)(strlen(out) - 5), out, k);
        while (access(other, F_OK) != 0)
            usleep(20 * 1000);
    }
    if (zeps_spull(c, t, ids, NIDS, rows, step) != 0) {
        fprintf(stderr, "worker 0: the last pull: %s\n", zeps_last_error(c));
        _exit(1);
    }
    char rpath[1300];
    snprintf(rpath, sizeof(rpath), "%s.rows", out);
    f = fopen(rpath, "w");
    fwrite(rows, sizeof(float), NIDS * DIM, f);
    fclose(f);
    zeps_client_destroy(&c);
    rename(path, out);
    _exit(0);
}

/* Shard 0's slots below 2048 (half of them) to shard 2. */
static char *move_args[] = {"shards", "move", "--config",    NULL,      "--from",
                            "0",      "--to", "2",           "--slots", "0-2047",
                            "--page", "512",  "--threshold", "64",      NULL};

/* The counter oracle: every row (as worker 0 read them last, at
 * out0.rows) is `total` pushes, `weighted` in column 1. */
static void check_rows(const char *out0, long total, long weighted)
{
    static float rows[NIDS * DIM];
    char rpath[520];
    snprintf(rpath, sizeof(rpath), "%s.rows", out0);
    FILE *f = fopen(rpath, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(rows, sizeof(float), NIDS * DIM, f), NIDS * DIM);
    fclose(f);
    for (int i = 0; i < NIDS; i++) {
        ck_assert_msg(rows[i * DIM] == (float)total && rows[i * DIM + 1] == (float)weighted,
                      "id %d: %g pushes applied, %g weighted; %ld and %ld were answered", i,
                      rows[i * DIM], rows[i * DIM + 1], total, weighted);
    }
}

/* After a move of shard 0's slots below 2048 to shard 2: the rows are
 * exact (check_rows, unless out0 is NULL) and every shard holds what the
 * new map gives it at epoch 1. Rows moved. */
static uint64_t check_after(zeps_client *c, const char *out0, long total, long weighted)
{
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    if (out0)
        check_rows(out0, total, weighted);
    /* the rows live where the new map says, on every shard at epoch 1 */
    zp_slotmap *d = NULL, *next = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    uint8_t which[4095];
    char err[256];
    ck_assert_int_eq(zp_slotmap_parse_set("0-2047", 4095, which, err, sizeof(err)), 2048);
    for (int k = 0; k < 4095; k++)
        which[k] = which[k] && zp_slotmap_slot_owner(d, (uint32_t)k) == 0;
    ck_assert_int_eq(zp_slotmap_moved(d, which, 2, &next), 0);
    uint64_t want[3] = {0, 0, 0}, moved = 0;
    for (int i = 0; i < NIDS; i++) {
        want[zp_slotmap_owner(next, ids[i])]++;
        moved += zp_slotmap_owner(d, ids[i]) != zp_slotmap_owner(next, ids[i]);
    }
    ck_assert_uint_gt(moved, 0);
    for (int k = 0; k < 3; k++) {
        uint64_t epoch;
        uint64_t n = zt_move_rows(c, k, &epoch);
        ck_assert_msg(n == want[k], "shard %d holds %llu rows; the new map gives it %llu", k,
                      (unsigned long long)n, (unsigned long long)want[k]);
        ck_assert_uint_eq(epoch, 1);
    }
    zp_slotmap_destroy(&d);
    zp_slotmap_destroy(&next);
    return moved;
}

/* test_move_under_*_load in `mode`. */
static void move_under_load(const char *mode)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, WORKERS, mode, NULL, NULL), 0);
    char stop[400], out[WORKERS][400], log[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl.dir);
    snprintf(log, sizeof(log), "%s/move.log", cl.dir);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        snprintf(out[w], sizeof(out[w]), "%s/worker-%d.out", cl.dir, w);
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0)
            worker(&cl, w, stop, out[w]);
    }
    zeps_client *c = zt_move_tool(&cl);
    /* the move begins once every worker pushed */
    for (int i = 0; i < 600; i++) {
        Zeps__ShardStats *st = zt_stats(c, 0);
        ck_assert_ptr_nonnull(st);
        uint64_t pushes = st->n_tables > 0 ? st->tables[0]->pushes : 0;
        zeps__shard_stats__free_unpacked(st, NULL);
        if (pushes >= 3 * WORKERS)
            break;
        usleep(50 * 1000);
    }
    move_args[3] = cl.conf;
    int st = zt_move_zepsctl(log, move_args);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    ck_assert(zt_move_file_has(log, "summary: rows="));
    /* the workers were pushing all along: they stop after the move */
    for (int w = 0; w < WORKERS; w++)
        ck_assert_int_eq(waitpid(pids[w], NULL, WNOHANG), 0);
    usleep(300 * 1000);
    FILE *f = fopen(stop, "w");
    fclose(f);
    long total = 0, weighted = 0;
    unsigned long long redirects = 0;
    for (int w = 0; w < WORKERS; w++) {
        int ws = zt_wait(pids[w], 60);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
        long p = 0;
        unsigned long long r = 0;
        FILE *o = fopen(out[w], "r");
        ck_assert_msg(o != NULL, "worker %d failed", w);
        ck_assert_int_eq(fscanf(o, "%ld %llu", &p, &r), 2);
        fclose(o);
        total += p;
        weighted += p * (w + 1);
        redirects += r;
    }
    ck_assert_uint_gt(redirects, 0);

    uint64_t moved = check_after(c, out[0], total, weighted);
    printf("moved %llu of %d rows under %ld pushes, %llu redirects\n", (unsigned long long)moved,
           NIDS, total, redirects);
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_move_under_async_load)
{
    move_under_load("async");
}
END_TEST

START_TEST(test_move_under_ssp_load)
{
    move_under_load("ssp");
}
END_TEST

/* ssp: a pull parked by the staleness bound before the move (a worker
 * behind) is still parked at the commit: the source answers it EMOVED and
 * it is served by the target once the bound allows, with the moved rows'
 * values; the source makes no row of the moved slots again. */
START_TEST(test_move_parked_pull)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 2, "ssp", NULL, NULL), 0);
    static uint64_t ids[NIDS];
    static float g[NIDS * DIM], rows[NIDS * DIM];
    zt_move_ids(ids, NIDS, 0);
    for (int i = 0; i < NIDS * DIM; i++)
        g[i] = -1.0f;
    zeps_client *c0 = zt_client(&cl, 0), *c1 = zt_client(&cl, 1), *tl = zt_move_tool(&cl);
    uint32_t t = zt_move_declare(c0);
    zt_move_declare(c1);
    ck_assert_int_eq(zeps_spush(c0, t, ids, NIDS, g, 0), 0);
    ck_assert_int_eq(zeps_clock(c0, 0), 0);
    ck_assert_int_eq(zeps_clock(c0, 1), 0);
    zeps_sbatch *b;
    zeps_req *req;
    ck_assert_int_eq(zeps_sbatch_new(c0, t, ids, NIDS, &b), 0);
    ck_assert_int_eq(zeps_sbatch_pull_start(b, rows, 2, &req), 0); /* worker 1 is at 0 */
    for (int i = 0; i < 200; i++) {
        Zeps__ShardStats *st = zt_stats(tl, 0);
        uint64_t parked = st->n_tables ? st->tables[0]->parked : 0;
        zeps__shard_stats__free_unpacked(st, NULL);
        if (parked > 0)
            break;
        usleep(10 * 1000);
    }
    char log[400];
    snprintf(log, sizeof(log), "%s/move.log", cl.dir);
    move_args[3] = cl.conf;
    ck_assert_int_eq(zt_move_zepsctl(log, move_args), 0);
    ck_assert_int_eq(zeps_clock(c1, 0), 0); /* the bound lets the pull go */
    ck_assert_int_eq(zeps_clock(c1, 1), 0);
    ck_assert_int_eq(zeps_wait(&req), 0);
    for (int i = 0; i < NIDS * DIM; i++)
        ck_assert_msg(rows[i] == 1.0f, "row %d: %g, not the pushed 1", i / DIM, rows[i]);
    zeps_client_stats cs;
    zeps_client_get_stats(c0, &cs);
    ck_assert_uint_gt(cs.slot_redirects, 0);
    check_after(tl, NULL, 0, 0);
    zeps_sbatch_free(&b);
    zeps_client_destroy(&c0);
    zeps_client_destroy(&c1);
    zeps_client_destroy(&tl);
    zt_cluster_stop(&cl);
}
END_TEST

/* The source keeps its duplicate windows: a push it applied before the
 * move, sent again with its seq after the commit, is answered DUPLICATE
 * (not redirected and applied a second time at the target); a new push
 * of the id is refused EMOVED naming the target. */
START_TEST(test_move_keeps_windows)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 2, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = zt_move_declare(c);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    struct {
        uint64_t id;
        float g[DIM];
    } msg = {1, {2.0f, 3.0f}};
    while (zp_slotmap_slot_of(d, msg.id) >= 2048 || zp_slotmap_owner(d, msg.id) != 0)
        msg.id++;
    zp_slotmap_destroy(&d);
    void *zctx = zmq_ctx_new(), *sock = zt_move_raw_worker(zctx, &cl, 0, 1, 0x77);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PUSH;
    h.rank = 1;
    h.incarnation = 0x77;
    h.seq = 2;
    h.req_id = 2;
    h.table = t;
    h.count = 1;
    Zeps__Header *rep = zt_raw_req(sock, &h, &msg, sizeof(msg));
    ck_assert_msg(rep->op == ZEPS__OP__PUSH && rep->flags == 0, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    char log[400];
    snprintf(log, sizeof(log), "%s/move.log", cl.dir);
    move_args[3] = cl.conf;
    ck_assert_int_eq(zt_move_zepsctl(log, move_args), 0);
    h.req_id = 3; /* the reply was lost: the same seq again */
    rep = zt_raw_req(sock, &h, &msg, sizeof(msg));
    ck_assert_msg(rep->op == ZEPS__OP__PUSH, "%s", rep->error_text);
    ck_assert_uint_eq(rep->flags, ZP_FLAG_DUPLICATE);
    zeps__header__free_unpacked(rep, NULL);
    h.seq = h.req_id = 4;
    rep = zt_raw_req(sock, &h, &msg, sizeof(msg));
    ck_assert_int_eq(rep->error, ZEPS_EMOVED);
    ck_assert_uint_eq(rep->slot_owner, 2);
    ck_assert_uint_eq(rep->slot_epoch, 1);
    zeps__header__free_unpacked(rep, NULL);
    float row[DIM];
    ck_assert_int_eq(zeps_spull(c, t, &msg.id, 1, row, 0), 0); /* from shard 2 */
    ck_assert(row[0] == -2.0f && row[1] == -3.0f);
    zmq_close(sock);
    zmq_ctx_term(zctx);
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
}
END_TEST

/* Pages from shard 0 put to shard 1 until a page comes back empty: the
 * rows of table "emb2" seen. */
static uint64_t copy_pages(const zt_cluster *cl)
{
    uint64_t emb2 = 0;
    for (;;) {
        void *ctx = zmq_ctx_new(), *sock = zt_raw_socket(ctx, cl, 0);
        Zeps__Header h;
        zeps__header__init(&h);
        h.version = ZP_PROTOCOL_VERSION;
        h.op = ZEPS__OP__MOVE;
        h.req_id = 1;
        h.rank = 0xffffffffu;
        h.move_step = ZP_MOVE_ROWS;
        h.move_peer = 1;
        h.count = 100;
        zt_raw_send(sock, &h, NULL, 0);
        zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
        ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
        zp_frames f;
        ck_assert_int_eq(zp_wire_frames_recv(sock, &f, 0), 0);
        Zeps__Header *rep = zp_wire_unpack_header(&f.f[0]);
        ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
        uint64_t n = rep->count, left = rep->cursor;
        if (n > 0) {
            emb2 += strcmp(rep->move_table, "emb2") == 0 ? n : 0;
            Zeps__Header p;
            zeps__header__init(&p);
            p.op = ZEPS__OP__MOVE;
            p.move_step = ZP_MOVE_PUT;
            p.move_peer = 0;
            p.move_table = rep->move_table;
            p.count = n;
            p.state_per_value = rep->state_per_value;
            void *sb = zt_raw_socket(ctx, cl, 1);
            p.version = ZP_PROTOCOL_VERSION;
            p.rank = 0xffffffffu;
            p.req_id = 2;
            Zeps__Header *ack = zt_raw_req(sb, &p, zmq_msg_data(&f.f[1]), zmq_msg_size(&f.f[1]));
            ck_assert_msg(ack->op == ZEPS__OP__MOVE, "%s", ack->error_text);
            zeps__header__free_unpacked(ack, NULL);
            zmq_close(sb);
        }
        zeps__header__free_unpacked(rep, NULL);
        zp_wire_frames_close(&f);
        zmq_close(sock);
        zmq_ctx_term(ctx);
        if (n == 0 && left == 0)
            return emb2;
    }
}

/* A table declared after the move began moves too: slot 0 (shard 0's)
 * to shard 1 by hand-driven steps, while a second table is declared and
 * pushed to. */
START_TEST(test_move_new_table)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    zt_move_declare(c);
    const uint8_t *wire = zt_move_map_wire(1, 4095, 1);
    size_t len = 16 + 2 * 4095;
    Zeps__Header *rep = zt_move_step(&cl, 0, 1, ZP_MOVE_BEGIN, wire, len);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    rep = zt_move_step(&cl, 1, 0, ZP_MOVE_IMPORT, wire, len);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    zeps_sparse_spec spec = {.name = "emb2", .dim = DIM, .optimizer = "sgd", .lr = 1.0};
    uint32_t t2;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t2), 0);
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    uint64_t ids[8];
    float g[8 * DIM], rows[8 * DIM];
    for (uint64_t x = 1, k = 0; k < 8; x++)
        if (zp_slotmap_slot_of(d, x) == 0)
            ids[k++] = x;
    zp_slotmap_destroy(&d);
    for (int i = 0; i < 8 * DIM; i++)
        g[i] = -(float)(i + 1);
    ck_assert_int_eq(zeps_spush(c, t2, ids, 8, g, 0), 0);
    ck_assert_uint_eq(copy_pages(&cl), 8);
    rep = zt_move_step(&cl, 0, 1, ZP_MOVE_FREEZE, NULL, 0);
    zeps__header__free_unpacked(rep, NULL);
    copy_pages(&cl);
    void *ctx = zmq_ctx_new(), *sb = zt_raw_socket(ctx, &cl, 1);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__SLOTS;
    h.rank = 0xffffffffu;
    rep = zt_raw_req(sb, &h, wire, len);
    ck_assert_msg(rep->op == ZEPS__OP__SLOTS, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    zmq_close(sb);
    zmq_ctx_term(ctx);
    rep = zt_move_step(&cl, 0, 1, ZP_MOVE_COMMIT, wire, len);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    ck_assert_int_eq(zeps_spull(c, t2, ids, 8, rows, 0), 0); /* from shard 1 */
    for (int i = 0; i < 8 * DIM; i++)
        ck_assert(rows[i] == (float)(i + 1));
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"migrate",
         300,
         {test_move_under_async_load, test_move_under_ssp_load, test_move_parked_pull,
          test_move_keeps_windows, test_move_new_table}},
    };
    return zt_run_cases("migrate", cases, sizeof(cases) / sizeof(cases[0]));
}
