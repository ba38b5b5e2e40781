/*
 * test_migrate.c - live moves of a slot set between running shards
 * (docs/elastic.md "Live migration of a slot set"), with real shards,
 * real worker processes and the real `zepsctl shards move`.
 *
 * test_move_under_async_load: three shards; three worker processes push
 * the same ids over and over under async (sgd, lr 1, zeros: a push of
 * worker w adds 1 to column 0 and w + 1 to column 1 of every row, so each
 * row says how many pushes were applied: the counter oracle), each
 * counting the pushes it was answered for. zepsctl moves half of shard
 * 0's slots to shard 2 while they push; afterwards every row is exact (0
 * lost, 0 applied twice), every shard holds exactly the rows the new map
 * gives it (shard 0 none of the moved slots), every shard's map is the
 * new one, and the workers were redirected.
 * test_move_target_killed: the target is killed (-9) while the rows are
 * copied: zepsctl fails, saying so; the source's map is unchanged, it
 * holds its rows with their values and serves them as before.
 * test_move_tool_killed: zepsctl is killed (-9) while it copies: the
 * shards' lease ends the move; the target drops what it imported.
 * test_move_refusals: bsp, a move already running, the source as
 * target, unknown slots, a dense-only shard: refused with the text that
 * says why, nothing changed.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define DIM     2
#define NIDS    3000
#define WORKERS 3

static void make_ids(uint64_t *ids, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed; /* distinct */
}

static uint32_t declare(zeps_client *c)
{
    zeps_sparse_spec spec = {
        .name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    return t;
}

static zeps_client *tool(const zt_cluster *cl)
{
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, cl->conf, ZEPS_RANK_TOOL), 0);
    return c;
}

/* Run zepsctl with args (NULL-terminated after the program), output to
 * `log`; its exit status (-1 if it did not exit within 120 s). */
static int zepsctl(const char *log, char **args)
{
    char bin[512];
    zt_bin("zepsctl", bin, sizeof(bin));
    char *argv[32] = {bin};
    for (int i = 0; args[i]; i++)
        argv[i + 1] = args[i];
    pid_t pid = zt_spawn(bin, argv, log);
    ck_assert_int_gt(pid, 0);
    int st = zt_wait(pid, 120);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int file_has(const char *path, const char *needle)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static void print_file(const char *path)
{
    char line[1024];
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        printf("  | %s", line);
    if (f)
        fclose(f);
}

/* Worker process w: push every id each step (and end the step's clock)
 * until `stop` exists (and at least 20 steps), then write "pushes
 * redirects" to `out`; worker 0 then waits for the others to leave, pulls
 * every row and writes them to `out`.rows. Exit 0, or 1 on any error
 * (printed). */
static void worker(const zt_cluster *cl, int w, const char *stop, const char *out)
{
    static uint64_t ids[NIDS];
    static float g[NIDS * DIM], rows[NIDS * DIM];
    make_ids(ids, NIDS, 0);
    for (int i = 0; i < NIDS; i++) {
        g[i * DIM] = -1.0f;
        g[i * DIM + 1] = -(float)(w + 1);
    }
    zeps_client *c = zt_client(cl, (uint32_t)w);
    if (!c)
        _exit(1);
    uint32_t t = declare(c);
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

/* Rows of table 0 on shard k, and its slot map epoch. */
static uint64_t shard_rows(zeps_client *c, int k, uint64_t *epoch)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    uint64_t n = st->n_tables > 0 ? st->tables[0]->rows : 0;
    if (epoch)
        *epoch = st->slot_epoch;
    zeps__shard_stats__free_unpacked(st, NULL);
    return n;
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
    make_ids(ids, NIDS, 0);
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
        uint64_t n = shard_rows(c, k, &epoch);
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
    zeps_client *c = tool(&cl);
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
    int st = zepsctl(log, move_args);
    print_file(log);
    ck_assert_int_eq(st, 0);
    ck_assert(file_has(log, "summary: rows="));
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
    make_ids(ids, NIDS, 0);
    for (int i = 0; i < NIDS * DIM; i++)
        g[i] = -1.0f;
    zeps_client *c0 = zt_client(&cl, 0), *c1 = zt_client(&cl, 1), *tl = tool(&cl);
    uint32_t t = declare(c0);
    declare(c1);
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
    ck_assert_int_eq(zepsctl(log, move_args), 0);
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

/* Push every id of ids[0..n) once: column 0 gains 1, column 1 i % 5 + 1. */
static void populate(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n)
{
    enum { CHUNK = 10000 };
    static float g[CHUNK * DIM];
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        for (size_t i = 0; i < k; i++) {
            g[i * DIM] = -1.0f;
            g[i * DIM + 1] = -(float)((at + i) % 5 + 1);
        }
        ck_assert_int_eq(zeps_spush(c, t, ids + at, k, g, 0), 0);
    }
}

/* The rows of ids[0..n) that the default map of 3 gives shards 0 and 1
 * are `times` populate()s. */
static void check_values(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n, int times)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    float row[DIM];
    for (size_t i = 0; i < n; i += 97) { /* a sample: one pull per id */
        if (zp_slotmap_owner(d, ids[i]) == 2)
            continue;
        ck_assert_int_eq(zeps_spull(c, t, &ids[i], 1, row, 0), 0);
        ck_assert_msg(row[0] == (float)times && row[1] == (float)(times * (int)(i % 5 + 1)),
                      "id %zu: %g %g after %d pushes", i, row[0], row[1], times);
    }
    zp_slotmap_destroy(&d);
}

#define BIG 120000

/* zepsctl moving every slot of shard 0 to shard 2 in small pages, in the
 * background: its pid. */
static pid_t move_slowly(const zt_cluster *cl, const char *log, const char *lease_ms)
{
    char bin[512];
    zt_bin("zepsctl", bin, sizeof(bin));
    char *argv[] = {bin,  "shards",       "move", "--config",   (char *)cl->conf, "--from",
                    "0",  "--to",         "2",    "--slots",    "0-4094",         "--page",
                    "16", "--timeout-ms", "1000", "--lease-ms", (char *)lease_ms, NULL};
    pid_t pid = zt_spawn(bin, argv, log);
    ck_assert_int_gt(pid, 0);
    return pid;
}

/* The tool dies while it copies: the lease ends the move on both sides,
 * the target drops what it had imported. */
static void tool_killed(zt_cluster *cl, zeps_client *tl, const uint64_t *before)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/move-tool.log", cl->dir);
    pid_t pid = move_slowly(cl, log, "600");
    ck_assert(zt_wait_log(cl, 2, "rows of them here"));
    for (int i = 0; i < 400 && shard_rows(tl, 2, NULL) == before[2]; i++)
        usleep(5 * 1000);
    ck_assert_uint_gt(shard_rows(tl, 2, NULL), before[2]); /* rows imported */
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    zt_wait(pid, 10);
    ck_assert(zt_wait_log(cl, 2, "aborted (the tool's lease passed)"));
    ck_assert(zt_wait_log(cl, 0, "aborted (the tool's lease passed)"));
    for (int k = 0; k < 3; k++) {
        uint64_t epoch;
        ck_assert_uint_eq(shard_rows(tl, k, &epoch), before[k]);
        ck_assert_uint_eq(epoch, 0);
    }
}

/* The target dies (-9) while the rows are copied: the move fails, saying
 * so, and the source keeps its map and rows. */
static void target_killed(zt_cluster *cl, zeps_client *tl, const uint64_t *before)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/move-target.log", cl->dir);
    pid_t pid = move_slowly(cl, log, "10000");
    for (int i = 0; i < 2000 && shard_rows(tl, 2, NULL) == before[2]; i++)
        usleep(2 * 1000); /* until the copy began */
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "the copy ended before the kill");
    zt_server_kill(cl, 2, SIGKILL);
    int st = zt_wait(pid, 60);
    print_file(log);
    ck_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1);
    ck_assert(file_has(log, "shard 2 (") && file_has(log, "did not answer"));
    ck_assert(file_has(log, "aborted; the slot map is unchanged"));
    ck_assert(zt_wait_log(cl, 0, "aborted (the tool aborted it)"));
    for (int k = 0; k < 2; k++) {
        uint64_t epoch;
        ck_assert_uint_eq(shard_rows(tl, k, &epoch), before[k]);
        ck_assert_uint_eq(epoch, 0);
    }
}

START_TEST(test_move_aborted)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", NULL, NULL), 0);
    static uint64_t ids[BIG];
    make_ids(ids, BIG, 11);
    zeps_client *c = zt_client(&cl, 0), *tl = tool(&cl);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    populate(c, t, ids, BIG);
    uint64_t before[3];
    for (int k = 0; k < 3; k++)
        before[k] = shard_rows(tl, k, NULL);
    tool_killed(&cl, tl, before);
    check_values(c, t, ids, BIG, 1);
    target_killed(&cl, tl, before);
    /* the source serves the slots as before, and may move them again */
    check_values(c, t, ids, BIG, 1);
    char log[400];
    snprintf(log, sizeof(log), "%s/move-again.log", cl.dir);
    char *again[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                     "--to",   "1",    "--slots",  "0-299", NULL};
    int st = zepsctl(log, again);
    print_file(log);
    ck_assert_int_eq(st, 0);
    check_values(c, t, ids, BIG, 1);
    uint64_t epoch;
    ck_assert_uint_lt(shard_rows(tl, 0, &epoch), before[0]);
    ck_assert_uint_eq(epoch, 1);
    zeps_client_destroy(&c);
    zeps_client_destroy(&tl);
    zt_cluster_stop(&cl);
}
END_TEST

/* zepsctl with args exits with `status`, its output holding `needle`. */
static void refused(const zt_cluster *cl, char **args, int status, const char *needle)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/refused.log", cl->dir);
    unlink(log);
    int st = zepsctl(log, args);
    ck_assert_msg(st == status && file_has(log, needle), "exit %d (not %d), or no '%s' in:", st,
                  status, needle);
}

/* MOVE BEGIN to shard k of 3 moving slot 0 (shard 0's) to `peer`, on a
 * raw socket: the reply header. */
static Zeps__Header *raw_begin(const zt_cluster *cl, int k, uint32_t peer, uint32_t step)
{
    zp_slotmap *d = NULL, *m = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, 3), 0);
    uint8_t which[4095] = {1};
    ck_assert_int_eq(zp_slotmap_moved(d, which, (int)peer, &m), 0);
    static uint8_t wire[16 + 2 * 4095];
    zp_slotmap_encode(m, wire);
    void *ctx = zmq_ctx_new(), *sock = zt_raw_socket(ctx, cl, k);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__MOVE;
    h.req_id = 1;
    h.rank = 0xffffffffu;
    h.move_step = step;
    h.move_peer = peer;
    Zeps__Header *rep = zt_raw_req(sock, &h, step == ZP_MOVE_BEGIN ? wire : NULL,
                                   step == ZP_MOVE_BEGIN ? zp_slotmap_wire_size(m) : 0);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    zp_slotmap_destroy(&m);
    zp_slotmap_destroy(&d);
    return rep;
}

START_TEST(test_move_refusals)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 3, 1, "async", NULL, NULL), 0);
    static uint64_t ids[NIDS];
    make_ids(ids, NIDS, 3);
    zeps_client *c = zt_client(&cl, 0), *tl = tool(&cl);
    uint32_t t = declare(c);
    populate(c, t, ids, NIDS);
    uint64_t before[3];
    for (int k = 0; k < 3; k++)
        before[k] = shard_rows(tl, k, NULL);
    char *self[] = {"shards", "move", "--config", cl.conf, "--from", "1",
                    "--to",   "1",    "--slots",  "0-9",   NULL};
    refused(&cl, self, 2, "two different shards of the cluster's 3");
    char *past[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "2",    "--slots",  "4095",  NULL};
    refused(&cl, past, 2, "LO <= HI < 4095");
    char *none[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "2",    "--slots",  "1-2",   NULL};
    refused(&cl, none, 2, "no slot of '1-2' is on shard 0");
    /* at the shard: itself as the other shard; a move while one runs */
    zt_raw_expect_error(raw_begin(&cl, 0, 0, ZP_MOVE_BEGIN), ZEPS_EINVAL,
                        "must be one of shards 0..2 but 0, not 0");
    Zeps__Header *rep = raw_begin(&cl, 0, 1, ZP_MOVE_BEGIN);
    ck_assert_msg(rep->op == ZEPS__OP__MOVE, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    char *busy[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "2",    "--slots",  "0-99",  NULL};
    refused(&cl, busy, 2, "shard 0 already takes part in a move (as its source, with shard 1)");
    rep = raw_begin(&cl, 0, 1, ZP_MOVE_ABORT);
    ck_assert_uint_eq(rep->op, ZEPS__OP__MOVE);
    zeps__header__free_unpacked(rep, NULL);
    /* an unreachable target: the source's part is aborted */
    zt_server_kill(&cl, 2, SIGKILL);
    char *gone[] = {"shards", "move",    "--config", cl.conf,        "--from", "0", "--to",
                    "2",      "--slots", "0-99",     "--timeout-ms", "500",    NULL};
    refused(&cl, gone, 1, "did not answer a MOVE/MOVE within 500 ms");
    ck_assert(zt_wait_log(&cl, 0, "aborted (the tool aborted it)"));
    /* nothing changed */
    for (int k = 0; k < 2; k++) {
        uint64_t epoch;
        ck_assert_uint_eq(shard_rows(tl, k, &epoch), before[k]);
        ck_assert_uint_eq(epoch, 0);
    }
    check_values(c, t, ids, NIDS, 1);
    zeps_client_destroy(&c);
    zeps_client_destroy(&tl);
    zt_cluster_stop(&cl);
}
END_TEST

/* Not supported: bsp, a shard without sparse tables. */
START_TEST(test_move_unsupported)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "bsp", NULL, NULL), 0);
    zeps_client *c = zt_client(&cl, 0);
    declare(c);
    char *args[] = {"shards", "move", "--config", cl.conf, "--from", "0",
                    "--to",   "1",    "--slots",  "0-99",  NULL};
    refused(&cl, args, 2, "moving slots is not supported under bsp");
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);

    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    c = zt_client(&cl, 0);
    uint32_t t;
    zeps_table_spec dense = {.name = "w", .length = 100, .optimizer = "sgd", .lr = 0.1};
    ck_assert_int_eq(zeps_declare(c, &dense, &t), 0);
    args[3] = cl.conf;
    refused(&cl, args, 2, "shard 0 holds no sparse table");
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);

    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", "  snapshot_dir = \"@DIR@/snap\";", NULL),
                     0);
    c = zt_client(&cl, 0);
    declare(c);
    args[3] = cl.conf;
    refused(&cl, args, 2, "moving slots is not supported with snapshots");
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("migrate");
    TCase *tc = tcase_create("migrate");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_move_under_async_load);
    tcase_add_test(tc, test_move_under_ssp_load);
    tcase_add_test(tc, test_move_parked_pull);
    tcase_add_test(tc, test_move_aborted);
    tcase_add_test(tc, test_move_refusals);
    tcase_add_test(tc, test_move_unsupported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
