/*
 * test_shards_add.c - shards that join a running cluster and shards that
 * give all their slots away (docs/elastic.md, "Adding a shard", "Removing
 * a shard"), with real shards, real worker processes and the real zepsctl.
 *
 * test_learned_shard: the protocol and the client alone. Two shards; a
 * client pushes every id once. A third shard starts with --join; every
 * shard takes (SLOTS) the map one epoch up that names it; a tool client
 * made then learns it from HELLO and reaches it; `zepsctl shards move`
 * gives it all of shard 0's slots. The first client, never restarted and
 * holding the default map of 2, pushes every id again: the EMOVED it gets
 * carries the map, libzeps connects to the shard it never heard of, says
 * HELLO, declares the table there and sends the ids: every row then holds
 * 2 pushes, the client knows 3 shards at epoch 2, and shard 2's STATS
 * shows its pushes; `zepsctl status` and `zepsctl stats --json` list
 * shard 2 as joined, with its endpoint. test_learned_shard_curve: the same
 * under CURVE keys.
 *
 * test_add_remove_under_load: two shards, three worker processes pushing
 * every id over and over (the counter oracle of test_migrate). A third
 * shard starts with --join mid-run and `zepsctl shards add` joins it and
 * rebalances; then every shard holds the mean of the rows within +-10 %,
 * one map, and the workers (not restarted) have pushed to the new shard.
 * Then `zepsctl shards remove 0`: shard 0 owns 0 slots and 0 rows while
 * the workers go on; it is stopped, and the workers still go on and a
 * worker's CLOCKs (which no longer go to it) succeed. At the end every row, read through the final
 * map without a redirect, is exact: 0 pushes lost, 0 applied twice.
 *
 * test_refusals: `zeps-server --join` with snapshot_dir, `shards add` of an endpoint nobody listens
 * at, of a shard started with another index; `shards remove` of a shard
 * holding a dense slice and of a shard that does not exist, and of a
 * joined shard that owns every slot (refused before its dense pieces
 * move). Each exits with its reason and changes no shard's map. A shard that joined holds
 * no dense slice: a client with a dense table goes on using it after
 * learning the new shard, and its SCAN of the table there is empty.
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
#include "curve.h"
#include "harness.h"
#include "move_fixture.h"
#include "rawreq.h"
#include "scratch.h"
#include "slotmap.h"
#include "wire.h"
#include "zeps.h"

#define WORKERS 3

/* Shard k's table 0 pushes and slots owned (STATS). */
static uint64_t table_pushes(zeps_client *c, int k, uint32_t *owned)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    uint64_t n = st->n_tables > 0 ? st->tables[0]->pushes : 0;
    if (owned)
        *owned = st->slots_owned;
    zeps__shard_stats__free_unpacked(st, NULL);
    return n;
}

/* Shard k's table 0 pushes, asked on a raw socket (no client, which would
 * say HELLO to every shard of the cluster file). */
static uint64_t table_pushes_raw(const zt_cluster *cl, int k)
{
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__STATS);
    Zeps__Header *rep = zt_raw_req_once(cl, k, &h, NULL, 0);
    ck_assert_ptr_nonnull(rep->stats);
    uint64_t n = rep->stats->n_tables > 0 ? rep->stats->tables[0]->pushes : 0;
    zeps__header__free_unpacked(rep, NULL);
    return n;
}

/* zepsctl status and zepsctl stats --json name shard 2, which joined at
 * `ep` and is not in the cluster file, as joined, with its endpoint and
 * its rows. */
static void status_names_joined(zt_cluster *cl, const char *ep)
{
    char log[400], line[600];
    snprintf(log, sizeof(log), "%s/status.log", cl->dir);
    char *status[] = {"status", "--config", cl->conf, NULL};
    int st = zt_move_zepsctl(log, status);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    snprintf(line, sizeof(line), "shard 2 joined at run time, at %s", ep);
    ck_assert(zt_move_file_has(log, line));
    ck_assert(zt_move_file_has(log, "shard 2/"));
    snprintf(log, sizeof(log), "%s/stats.json", cl->dir);
    char *stats[] = {"stats", "--config", cl->conf, "--json", NULL};
    st = zt_move_zepsctl(log, stats);
    ck_assert_int_eq(st, 0);
    snprintf(line, sizeof(line), "{\"shard\": 2, \"endpoint\": \"%s\", \"joined\": true", ep);
    ck_assert(zt_move_file_has(log, line));
    ck_assert(zt_move_file_has(log, "{\"shard\": 1, \"endpoint\": "));
    ck_assert(zt_move_file_has(log, "\"joined\": false"));
}

/* test_learned_shard in a cluster of the file text `extra` (CURVE keys or
 * none). */
static void learned_shard(const char *extra)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", extra, NULL), 0);
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zeps_client *a = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(a);
    uint32_t ta = zt_move_declare(a);
    zt_move_populate(a, ta, ids, NIDS);
    ck_assert_int_eq(zeps_num_shards(a), 2);

    char ep[400];
    zt_move_join_endpoint(&cl, 2, ep, sizeof(ep));
    ck_assert_int_eq(zt_server_join(&cl, 2, ep), 0);
    zp_slotmap *base = NULL, *joined = NULL;
    char why[256];
    ck_assert_int_eq(zp_slotmap_new_default(&base, 2), 0);
    ck_assert_int_eq(zp_slotmap_joined(base, ep, &joined, why, sizeof(why)), 0);
    for (int k = 2; k >= 0; k--) /* the new shard first, as zepsctl shards add does */
        ck_assert_int_eq(zt_raw_slots(&cl, k, joined), 0);
    /* a map without the shard that joined is refused now: it would forget it */
    zp_slotmap *older = NULL;
    uint8_t none[4096] = {0};
    ck_assert_int_eq(zp_slotmap_new_default(&older, 2), 0);
    zp_slotmap *bumped = NULL;
    ck_assert_int_eq(zp_slotmap_moved(older, none, 0, &bumped), 0); /* epoch 1, 2 shards */
    zp_slotmap *bumped2 = NULL;
    ck_assert_int_eq(zp_slotmap_moved(bumped, none, 0, &bumped2), 0); /* epoch 2 */
    ck_assert_int_eq(zt_raw_slots(&cl, 0, bumped2), ZEPS_EINVAL);
    zp_slotmap_destroy(&older);
    zp_slotmap_destroy(&bumped);
    zp_slotmap_destroy(&bumped2);

    /* a client made now learns the shard from HELLO and declares there */
    zeps_client *tl = zt_move_tool(&cl);
    ck_assert_int_eq(zeps_num_shards(tl), 3);
    zt_move_declare(tl);
    char log[400];
    snprintf(log, sizeof(log), "%s/move.log", cl.dir);
    char *move[] = {"shards", "move", "--config", cl.conf,  "--from", "0",
                    "--to",   "2",    "--slots",  "0-4095", NULL};
    int st = zt_move_zepsctl(log, move);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    uint64_t moved = zt_move_rows(tl, 2, NULL);
    ck_assert_uint_gt(moved, NIDS / 3);
    ck_assert_uint_eq(zt_move_rows(tl, 0, NULL), 0);
    status_names_joined(&cl, ep);

    /* the first client never heard of shard 2: one push of every id again */
    zt_move_populate(a, ta, ids, NIDS);
    zeps_client_stats cs;
    zeps_client_get_stats(a, &cs);
    ck_assert_int_eq(zeps_num_shards(a), 3);
    ck_assert_uint_eq(cs.slot_epoch, 2);
    ck_assert_uint_ge(cs.slot_redirects, 1);
    ck_assert_uint_ge(table_pushes(tl, 2, NULL), 1); /* a's push reached it */
    float row[DIM];
    for (int i = 0; i < NIDS; i += 7) {
        ck_assert_int_eq(zeps_spull(a, ta, &ids[i], 1, row, 0), 0);
        ck_assert_msg(row[0] == 2.0f && row[1] == (float)(2 * (i % 5 + 1)),
                      "id %d: %g %g after 2 pushes", i, row[0], row[1]);
    }
    ck_assert_uint_eq(zt_move_rows(tl, 2, NULL), moved);
    printf("a client that knew 2 shards reached the joined one: %llu rows there, %llu redirects\n",
           (unsigned long long)moved, (unsigned long long)cs.slot_redirects);
    zp_slotmap_destroy(&base);
    zp_slotmap_destroy(&joined);
    zeps_client_destroy(&tl);
    zeps_client_destroy(&a);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_learned_shard)
{
    learned_shard(NULL);
}
END_TEST

/* The same with CURVE: the joined shard has the cluster's server key and
 * allow-list, and the client reaches it with its own key. */
START_TEST(test_learned_shard_curve)
{
    char keys[300], err[512], extra[2048];
    ck_assert_int_eq(zt_scratch_dir(keys, sizeof(keys), "joinkeys"), 0);
    ck_assert_msg(zp_curve_keygen(keys, "server", NULL, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(zp_curve_keygen(keys, "w0", NULL, err, sizeof(err)) == 0, "%s", err);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "mkdir %s/allow && cp %s/w0.pub %s/allow/", keys, keys, keys);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(extra, sizeof(extra),
             "  curve_server_secret = \"%s/server.key\";\n"
             "  curve_server_public = \"%s/server.pub\";\n"
             "  curve_allow_dir = \"%s/allow\";\n"
             "  curve_client_secret = \"%s/w0.key\";\n"
             "  curve_client_public = \"%s/w0.pub\";\n",
             keys, keys, keys, keys, keys);
    learned_shard(extra);
    if (!getenv("ZEPS_TEST_KEEP")) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", keys);
        ck_assert_int_eq(system(cmd), 0);
    }
}

/* Rows and map epoch of shards 0..n-1; the rows' total. */
static uint64_t all_rows(zeps_client *tl, int n, uint64_t *rows, uint64_t *epoch)
{
    uint64_t total = 0;
    for (int k = 0; k < n; k++) {
        rows[k] = zt_move_rows(tl, k, &epoch[k]);
        total += rows[k];
    }
    return total;
}

/* A third shard joins mid-run: shards add balances the rows (+-10 %, one
 * map) and the workers push to it. */
static void add_mid_run(zt_cluster *cl, const pid_t *pids)
{
    char log[400], ep[400];
    zt_move_join_endpoint(cl, 2, ep, sizeof(ep));
    ck_assert_int_eq(zt_server_join(cl, 2, ep), 0);
    snprintf(log, sizeof(log), "%s/add.log", cl->dir);
    char *add[] = {"shards", "add", ep, "--config", cl->conf, "--threshold", "64", NULL};
    int st = zt_move_zepsctl(log, add);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    ck_assert(zt_move_file_has(log, "declared sparse table 'emb'"));
    ck_assert(zt_move_file_has(log, "slot map epoch 1: shard 2 at "));
    ck_assert(zt_move_file_has(log, "(tolerance 10 %): balanced"));
    ck_assert(zt_move_file_has(log, "joined and holds its share of the rows"));
    zt_move_workers_run(pids, WORKERS); /* they pushed all along */
    zeps_client *tl = zt_move_tool(cl); /* learns shard 2 from its HELLO */
    ck_assert_int_eq(zeps_num_shards(tl), 3);
    uint64_t rows[3], epoch[3];
    ck_assert_uint_eq(all_rows(tl, 3, rows, epoch), NIDS);
    for (int k = 0; k < 3; k++) {
        double off = ((double)rows[k] - NIDS / 3.0) / (NIDS / 3.0);
        ck_assert_msg(off >= -0.10 && off <= 0.10, "shard %d holds %llu rows: %+.1f %% off", k,
                      (unsigned long long)rows[k], off * 100);
        ck_assert_uint_eq(epoch[k], epoch[0]);
    }
    /* the workers, never restarted, push to the shard that joined */
    uint64_t before = table_pushes(tl, 2, NULL);
    for (int i = 0; i < 600 && table_pushes(tl, 2, NULL) < before + 2 * WORKERS; i++)
        usleep(50 * 1000);
    ck_assert_uint_ge(table_pushes(tl, 2, NULL), before + 2 * WORKERS);
    printf("added: rows %llu %llu %llu at epoch %llu\n", (unsigned long long)rows[0],
           (unsigned long long)rows[1], (unsigned long long)rows[2], (unsigned long long)epoch[0]);
    zeps_client_destroy(&tl);
}

/* shards remove 0: it owns 0 slots and 0 rows and gets no push while the
 * workers go on; then it is stopped: the workers still go on, and a
 * worker's CLOCK no longer goes to it (it owns no slot and holds no dense
 * slice). It is started again (empty) for the new clients' HELLO. */
static void remove_shard0(zt_cluster *cl, const pid_t *pids)
{
    char log[400];
    zeps_client *tl = zt_move_tool(cl);
    snprintf(log, sizeof(log), "%s/remove.log", cl->dir);
    char *rm[] = {"shards", "remove", "0", "--config", cl->conf, "--threshold", "64", NULL};
    int st = zt_move_zepsctl(log, rm);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    ck_assert(zt_move_file_has(log, "shard 0 owns 0 slots and 0 rows"));
    uint32_t owned = 1;
    table_pushes(tl, 0, &owned);
    ck_assert_uint_eq(owned, 0);
    uint64_t rows[3], epoch[3];
    ck_assert_uint_eq(all_rows(tl, 3, rows, epoch), NIDS);
    ck_assert_uint_eq(rows[0], 0);
    zt_move_workers_run(pids, WORKERS);
    uint64_t p0 = table_pushes(tl, 0, NULL), p1 = table_pushes(tl, 1, NULL);
    for (int i = 0; i < 600 && table_pushes(tl, 1, NULL) < p1 + 2 * WORKERS; i++)
        usleep(50 * 1000);
    ck_assert_uint_ge(table_pushes(tl, 1, NULL), p1 + 2 * WORKERS);
    ck_assert_uint_eq(table_pushes(tl, 0, NULL), p0); /* none applied there any more */
    zeps_client_destroy(&tl);
    printf("removed shard 0: rows %llu %llu %llu at epoch %llu\n", (unsigned long long)rows[0],
           (unsigned long long)rows[1], (unsigned long long)rows[2], (unsigned long long)epoch[0]);

    zeps_client *b = zt_client(cl, WORKERS);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(zeps_num_shards(b), 3);
    int ks = zt_server_kill(cl, 0, SIGTERM);
    ck_assert(ks >= 0 && WIFEXITED(ks) && WEXITSTATUS(ks) == 0);
    for (int c = 0; c < 3; c++)
        ck_assert_msg(zeps_clock(b, c) == 0, "clock %d: %s", c, zeps_last_error(b));
    p1 = table_pushes_raw(cl, 1); /* no new client: one would say HELLO to shard 0 */
    for (int i = 0; i < 600 && table_pushes_raw(cl, 1) < p1 + 2 * WORKERS; i++)
        usleep(50 * 1000);
    ck_assert_uint_ge(table_pushes_raw(cl, 1), p1 + 2 * WORKERS);
    zt_move_workers_run(pids, WORKERS);
    ck_assert_int_eq(zt_server_start(cl, 0), 0);
    zeps_client_destroy(&b);
    /* shard 0 restarted holds the default map, which names no joined
     * shard: zepsctl learns shard 2 from the newest map of the others */
    snprintf(log, sizeof(log), "%s/move-back.log", cl->dir);
    char *mv[] = {"shards", "move",    "--config", cl->conf,      "--from", "2", "--to",
                  "1",      "--slots", "0-15",     "--threshold", "64",     NULL};
    st = zt_move_zepsctl(log, mv);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
}

START_TEST(test_add_remove_under_load)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, WORKERS + 1, "async", NULL, NULL), 0);
    pid_t pids[WORKERS];
    zt_move_workers_start(&cl, WORKERS, pids);
    zeps_client *tl = zt_move_tool(&cl);
    for (int i = 0; i < 600 && zt_move_rows(tl, 0, NULL) == 0; i++)
        usleep(50 * 1000);
    zeps_client_destroy(&tl);
    add_mid_run(&cl, pids);
    remove_shard0(&cl, pids);
    long weighted, sum = zt_move_workers_end(&cl, WORKERS, pids, &weighted);
    zt_move_check_oracle(&cl, sum, weighted);
    printf("0 pushes lost, 0 applied twice under %ld pushes\n", sum);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* An ssp worker process w: push every id (column 0 gains 1, column 1
 * w + 1), pull them every other step, CLOCK, until `stop` exists and at
 * least 20 steps; then the pushes answered to `out`, BYE. Exit 0 or 1. */
static void ssp_worker(const zt_cluster *cl, int w, const char *stop, const char *out)
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
    for (int step = 0; step < 20 || access(stop, F_OK) != 0; step++) {
        if (zeps_spush(c, t, ids, NIDS, g, step) != 0 ||
            (step % 2 == 0 && zeps_spull(c, t, ids, NIDS, rows, step) != 0) ||
            zeps_clock(c, step) != 0) {
            fprintf(stderr, "worker %d: step %d: %s\n", w, step, zeps_last_error(c));
            _exit(1);
        }
        pushes++;
    }
    zeps_client_destroy(&c);
    FILE *f = fopen(out, "w");
    fprintf(f, "%ld\n", pushes);
    fclose(f);
    _exit(0);
}

/* An ssp worker process that touches no row: it declares the table and
 * clocks (every 5 ms) until `stop` exists and at least 20 steps, then
 * leaves (BYE). It never meets an EMOVED, so it learns a new map only
 * from its CLOCKs' answers. Exit 0 or 1. */
static void clock_worker(const zt_cluster *cl, int w, const char *stop)
{
    zeps_client *c = zt_client(cl, (uint32_t)w);
    if (!c)
        _exit(1);
    zt_move_declare(c);
    for (int step = 0; step < 20 || access(stop, F_OK) != 0; step++) {
        if (zeps_clock(c, step) != 0) {
            fprintf(stderr, "clock worker %d: step %d: %s\n", w, step, zeps_last_error(c));
            _exit(1);
        }
        usleep(5000);
    }
    zeps_client_destroy(&c);
    _exit(0);
}

/* Under ssp (bound 3), workers that push, pull and clock, and one that
 * only clocks: shards add mid-run and shards remove of the new shard;
 * nothing lost, no worker stuck. The clock-only worker learns the map
 * that names the new shard from a CLOCK's answer and clocks there: else
 * the new shard counts it at clock 0 and the others' pulls there wait for
 * ever. */
START_TEST(test_add_remove_under_ssp)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, WORKERS + 1, "ssp", "  staleness = 3;\n", NULL), 0);
    char stop[400], out[WORKERS][400], log[400], ep[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl.dir);
    pid_t pids[WORKERS], clocker = fork();
    ck_assert_int_ge(clocker, 0);
    if (clocker == 0)
        clock_worker(&cl, WORKERS, stop);
    for (int w = 0; w < WORKERS; w++) {
        snprintf(out[w], sizeof(out[w]), "%s/worker-%d.out", cl.dir, w);
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0)
            ssp_worker(&cl, w, stop, out[w]);
    }
    zeps_client *tl = zt_move_tool(&cl);
    for (int i = 0; i < 600 && table_pushes(tl, 0, NULL) < 3 * WORKERS; i++)
        usleep(50 * 1000);
    zeps_client_destroy(&tl);
    zt_move_join_endpoint(&cl, 2, ep, sizeof(ep));
    ck_assert_int_eq(zt_server_join(&cl, 2, ep), 0);
    snprintf(log, sizeof(log), "%s/add.log", cl.dir);
    char *add[] = {"shards", "add", ep, "--config", cl.conf, "--threshold", "64", NULL};
    int st = zt_move_zepsctl(log, add);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    tl = zt_move_tool(&cl);
    uint64_t before = table_pushes(tl, 2, NULL);
    for (int i = 0; i < 600 && table_pushes(tl, 2, NULL) < before + 2 * WORKERS; i++)
        usleep(50 * 1000);
    ck_assert_uint_ge(table_pushes(tl, 2, NULL), before + 2 * WORKERS);
    zeps_client_destroy(&tl);
    zt_move_workers_run(pids, WORKERS);
    snprintf(log, sizeof(log), "%s/remove.log", cl.dir);
    char *rm[] = {"shards", "remove", "2", "--config", cl.conf, "--threshold", "64", NULL};
    st = zt_move_zepsctl(log, rm);
    zt_move_print_file(log);
    ck_assert_int_eq(st, 0);
    zt_move_workers_run(pids, WORKERS);
    FILE *f = fopen(stop, "w");
    fclose(f);
    long sum = 0, weighted = 0;
    for (int w = 0; w < WORKERS; w++) {
        int ws = zt_wait(pids[w], 60);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
        long p = 0;
        FILE *o = fopen(out[w], "r");
        ck_assert_int_eq(fscanf(o, "%ld", &p), 1);
        fclose(o);
        sum += p;
        weighted += p * (w + 1);
    }
    int cs = zt_wait(clocker, 60);
    ck_assert_msg(cs >= 0 && WIFEXITED(cs) && WEXITSTATUS(cs) == 0, "the clock-only worker failed");
    zt_move_check_oracle(&cl, sum, weighted);
    printf("ssp: 0 pushes lost, 0 applied twice under %ld pushes\n", sum);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

/* Every shard of cl (n of them) is still at map epoch 0. */
static void check_unchanged(const zt_cluster *cl, zeps_client *tl, int n)
{
    (void)cl;
    for (int k = 0; k < n; k++) {
        uint64_t e = 1;
        zt_move_rows(tl, k, &e);
        ck_assert_uint_eq(e, 0);
    }
}

/* With snapshot_dir (a set has the file's shards) a shard started with
 * --join refuses to start, naming it; bsp itself is no refusal any more
 * (test_bsp_move). */
static void refused_with_snapshots(void)
{
    zt_cluster cl;
    char ep[400];
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "bsp", "  snapshot_dir = \"@DIR@/snap\";", NULL),
                     0);
    zt_move_join_endpoint(&cl, 2, ep, sizeof(ep));
    char bin[512], jlog[400];
    zt_bin("zeps-server", bin, sizeof(bin));
    snprintf(jlog, sizeof(jlog), "%s/join-snap.log", cl.dir);
    char *argv[] = {bin, "--config", cl.conf, "--shard", "2", "--join", ep, NULL};
    int ws = zt_wait(zt_spawn(bin, argv, jlog), 30); /* the shard will not start */
    ck_assert(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 2);
    zt_move_print_file(jlog);
    ck_assert(zt_move_file_has(jlog, "not built with snapshot_dir"));
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

/* A shard that joins takes an even share of the dense table by moves
 * (docs/elastic.md, "Dense tables by range"): the client's dense table
 * goes on exact, and its SCAN of the joined shard holds the 33 elements
 * of 100 it took, the tail of each base shard's slice. */
static void dense_after_join(zt_cluster *cl, zeps_client *a, uint32_t te, uint32_t tw)
{
    char log[400], ep[400];
    static uint64_t ids[NIDS];
    zt_move_ids(ids, NIDS, 0);
    zt_move_populate(a, te, ids, 300);
    zt_move_join_endpoint(cl, 2, ep, sizeof(ep));
    ck_assert_int_eq(zt_server_join(cl, 2, ep), 0);
    snprintf(log, sizeof(log), "%s/add.log", cl->dir);
    char *add[] = {"shards", "add", ep, "--config", cl->conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, add), 0);
    zeps_client *tl = zt_move_tool(cl); /* learns shard 2 from its HELLO */
    ck_assert_uint_gt(zt_move_rows(tl, 2, NULL), 0);
    zt_move_populate(a, te, ids, 300); /* learns shard 2 (rows were balanced onto it) */
    ck_assert_int_eq(zeps_num_shards(a), 3);
    float g[100], v[100];
    for (int i = 0; i < 100; i++)
        g[i] = -1.0f;
    ck_assert_int_eq(zeps_push(a, tw, g, 0, 100, 0), 0);
    ck_assert_int_eq(zeps_pull(a, tw, v, 0, 100, 0), 0);
    for (int i = 0; i < 100; i++)
        ck_assert(v[i] == 1.0f);
    uint64_t cursor = 0, held = 0; /* a scan of the dense table on the joined shard */
    do {
        zeps_page page;
        ck_assert_int_eq(zeps_scan(a, tw, 2, cursor, 0, &page), 0);
        const float *pv = page.data;
        for (uint64_t i = 0; i < page.count; i++)
            ck_assert(pv[i] == 1.0f &&
                      (page.offset + i >= 33 && page.offset + i < 50 ? 1 : page.offset + i >= 83));
        held += page.count;
        cursor = page.next;
        zeps_page_release(&page);
    } while (cursor != 0);
    ck_assert_uint_eq(held, 33);
    zeps_client_destroy(&tl);
}

/* Once joined shard 2 owns every slot, `shards remove 2` is refused
 * before its dense pieces move: every shard's map stays at its epoch. */
static void only_owner_refused(zt_cluster *cl)
{
    char log[400];
    char *from[] = {"0", "1"};
    for (int i = 0; i < 2; i++) {
        snprintf(log, sizeof(log), "%s/all-from-%s.log", cl->dir, from[i]);
        char *mv[] = {"shards", "move", "--config", cl->conf, "--from", from[i],
                      "--to",   "2",    "--slots",  "0-4095", NULL};
        ck_assert_int_eq(zt_move_zepsctl(log, mv), 0);
    }
    zeps_client *tl = zt_move_tool(cl);
    uint64_t before[3], e;
    for (int k = 0; k < 3; k++)
        zt_move_rows(tl, k, &before[k]);
    snprintf(log, sizeof(log), "%s/only.log", cl->dir);
    char *rm[] = {"shards", "remove", "2", "--config", cl->conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, rm), 2);
    ck_assert(zt_move_file_has(log, "shard 2 is the only shard that owns slots; nothing changed"));
    for (int k = 0; k < 3; k++) {
        zt_move_rows(tl, k, &e);
        ck_assert_msg(e == before[k], "shard %d: map epoch %llu, %llu before", k,
                      (unsigned long long)e, (unsigned long long)before[k]);
    }
    zeps_client_destroy(&tl);
}

START_TEST(test_refusals)
{
    zt_cluster cl;
    char log[400], ep[400];
    refused_with_snapshots();
    ck_assert_int_eq(zt_cluster_start(&cl, 2, 1, "async", NULL, NULL), 0);
    zeps_client *a = zt_client(&cl, 0);
    ck_assert_ptr_nonnull(a);
    uint32_t te = zt_move_declare(a);
    zeps_table_spec dspec = {.name = "w", .length = 100, .optimizer = "sgd", .lr = 1.0};
    uint32_t tw;
    ck_assert_int_eq(zeps_declare(a, &dspec, &tw), 0);
    zeps_client *tl = zt_move_tool(&cl);

    /* nobody listens there */
    zt_move_join_endpoint(&cl, 2, ep, sizeof(ep));
    snprintf(log, sizeof(log), "%s/nobody.log", cl.dir);
    char *nobody[] = {"shards", "add", ep, "--config", cl.conf, "--timeout-ms", "1000", NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, nobody), 1);
    zt_move_print_file(log);
    ck_assert(zt_move_file_has(log, "did not answer HELLO within 1000 ms"));
    ck_assert(zt_move_file_has(log, "--shard 2 --join"));
    check_unchanged(&cl, tl, 2);

    /* a shard started with another index */
    ck_assert_int_eq(zt_server_join(&cl, 3, ep), 0);
    snprintf(log, sizeof(log), "%s/index.log", cl.dir);
    char *wrong[] = {"shards", "add", ep, "--config", cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, wrong), 2);
    zt_move_print_file(log);
    ck_assert(zt_move_file_has(log, "answers as shard 3 of a cluster of 2"));
    check_unchanged(&cl, tl, 2);
    zt_server_kill(&cl, 3, SIGTERM);

    /* shard 0 holds a slice of dense table 'w'; shard 5 does not exist */
    snprintf(log, sizeof(log), "%s/dense.log", cl.dir);
    char *dense[] = {"shards", "remove", "0", "--config", cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, dense), 2);
    zt_move_print_file(log);
    ck_assert(zt_move_file_has(log, "of dense table 'w'"));
    snprintf(log, sizeof(log), "%s/five.log", cl.dir);
    char *five[] = {"shards", "remove", "5", "--config", cl.conf, NULL};
    ck_assert_int_eq(zt_move_zepsctl(log, five), 2);
    ck_assert(zt_move_file_has(log, "'5' is not one of the cluster's 2 shards"));
    check_unchanged(&cl, tl, 2);

    zeps_client_destroy(&tl);
    dense_after_join(&cl, a, te, tw);
    only_owner_refused(&cl);
    zeps_client_destroy(&a);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shards_add");
    const char *names[] = {"learned", "curve", "load", "ssp", "refusals"};
    const TTest *tests[] = {test_learned_shard, test_learned_shard_curve,
                            test_add_remove_under_load, test_add_remove_under_ssp, test_refusals};
    for (int i = 0; i < 5; i++) { /* a case each: CK_RUN_CASE=load runs one */
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 400);
        tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
