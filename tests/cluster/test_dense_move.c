/*
 * test_dense_move.c - live moves of dense ranges under async load
 * (docs/elastic.md, "Dense tables by range").
 *
 * Two shards under async; three worker processes declare dense table 'w'
 * (1000 elements, sgd, lr 1, zeros) and push over and over a gradient of
 * -(w + 1) x (1 + i % 2) at element i, pulling the table between pushes.
 * While they push, `zepsctl shards move --dense w:200-500 --from 0 --to
 * 1` moves the end of shard 0's slice (every shard first cuts it at 200),
 * then `--dense w:300-400 --from 1 --to 0` a part of it back. Each exits
 * 0; the workers, never restarted, follow the redirects. At the end every
 * element holds exactly sum over workers of pushes x (w + 1) x (1 + i %
 * 2), the counter oracle: no push lost or applied twice; each shard's
 * SCAN holds exactly the pieces the final map gives it, and a client made
 * then is never redirected.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "move_fixture.h"
#include "zeps.h"

#define LEN     1000
#define WORKERS 3

static int clocked; /* the workers CLOCK each step (ssp); set before they fork */

static uint32_t declare(zeps_client *c)
{
    zeps_table_spec spec = {
        .name = "w", .length = LEN, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    if (zeps_declare(c, &spec, &t) != 0)
        return UINT32_MAX;
    return t;
}

/* Worker process w: push and pull until `stop` exists (and 20 times at
 * least), then write the pushes answered to `out`; exit 0, 1 on error. */
static void worker(const zt_cluster *cl, int w, const char *stop, const char *out)
{
    static float g[LEN], got[LEN];
    for (int i = 0; i < LEN; i++)
        g[i] = -(float)((w + 1) * (1 + i % 2));
    zeps_client *c = zt_client(cl, (uint32_t)w);
    uint32_t t = c ? declare(c) : UINT32_MAX;
    if (t == UINT32_MAX)
        _exit(1);
    long pushes = 0;
    for (int step = 0; step < 20 || access(stop, F_OK) != 0; step++) {
        if (zeps_push(c, t, g, 0, LEN, step) != 0 || zeps_pull(c, t, got, 0, LEN, step) != 0 ||
            (clocked && zeps_clock(c, step) != 0)) {
            fprintf(stderr, "worker %d: step %d: %s\n", w, step, zeps_last_error(c));
            _exit(1);
        }
        pushes++;
    }
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    printf("worker %d: %ld pushes, %llu redirects followed, map epoch %llu\n", w, pushes,
           (unsigned long long)st.slot_redirects, (unsigned long long)st.slot_epoch);
    fflush(stdout);
    zeps_client_destroy(&c);
    FILE *f = fopen(out, "w");
    fprintf(f, "%ld\n", pushes);
    fclose(f);
    _exit(0);
}

/* Shard k's SCAN of t: its pages as "lo-hi " items, into got. */
static void scan_text(zeps_client *c, uint32_t t, int k, char *got, size_t len)
{
    uint64_t cursor = 0;
    got[0] = '\0';
    do {
        zeps_page p;
        ck_assert_int_eq(zeps_scan(c, t, k, cursor, 0, &p), 0);
        snprintf(got + strlen(got), len - strlen(got), "%llu-%llu ", (unsigned long long)p.offset,
                 (unsigned long long)(p.offset + p.count));
        cursor = p.next;
        zeps_page_release(&p);
    } while (cursor != 0);
}

/* zepsctl shards move --dense RANGE --from A --to B: exit 0. */
static void move(const zt_cluster *cl, const char *range, const char *from, const char *to)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/move-%s.log", cl->dir, from);
    char *args[] = {"shards",     "move", "--config", (char *)cl->conf, "--from",
                    (char *)from, "--to", (char *)to, "--dense",        (char *)range,
                    "--page",     "64",   NULL}; /* several pages a piece */
    int st = zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    ck_assert_msg(st == 0, "zepsctl shards move --dense %s: exit %d", range, st);
    ck_assert(zt_move_file_has(log, "summary: elements="));
}

/* Start the worker processes of cl into pids. */
static void workers_start(const zt_cluster *cl, pid_t *pids)
{
    char stop[400], out[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl->dir);
    for (int w = 0; w < WORKERS; w++) {
        snprintf(out, sizeof(out), "%s/worker-%d.out", cl->dir, w);
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0)
            worker(cl, w, stop, out);
    }
}

/* Stop them; each exits 0: the oracle, the sum of each one's pushes
 * answered x (w + 1). */
static long workers_end(const zt_cluster *cl, const pid_t *pids)
{
    char stop[400], out[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl->dir);
    FILE *f = fopen(stop, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    long weighted = 0;
    for (int w = 0; w < WORKERS; w++) {
        int ws = zt_wait(pids[w], 60);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
        snprintf(out, sizeof(out), "%s/worker-%d.out", cl->dir, w);
        long p = 0;
        FILE *o = fopen(out, "r");
        ck_assert(o && fscanf(o, "%ld", &p) == 1);
        fclose(o);
        weighted += p * (w + 1);
    }
    return weighted;
}

/* A new client's pull of the whole table equals the oracle, without a
 * redirect, at map epoch `epoch`; the client (the caller destroys it). */
static zeps_client *check_oracle(const zt_cluster *cl, long weighted, uint64_t epoch, uint32_t *t)
{
    zeps_client *c = zt_client_replacing(cl, 0);
    ck_assert_ptr_nonnull(c);
    *t = declare(c);
    ck_assert_uint_ne(*t, UINT32_MAX);
    static float got[LEN];
    ck_assert_int_eq(zeps_pull(c, *t, got, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(got[i] == (float)(weighted * (1 + i % 2)),
                      "element %d: %g, the oracle %ld (pushes lost or applied twice)", i,
                      (double)got[i], weighted * (1 + i % 2));
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    ck_assert_uint_eq(st.slot_redirects, 0);
    ck_assert_uint_eq(st.slot_epoch, epoch);
    return c;
}

/* zepsctl with args (NULL-ended): exit `want`, its log holding `needle`. */
static void zepsctl(const zt_cluster *cl, const char *name, char **args, int want,
                    const char *needle)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/%s.log", cl->dir, name);
    int st = zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    fflush(stdout);
    ck_assert_msg(st == want, "zepsctl %s: exit %d", name, st);
    ck_assert_msg(zt_move_file_has(log, needle), "zepsctl %s: no '%s'", name, needle);
}

/* 2 -> 3 -> 2 shards under load in `mode`: `shards add` gives the joined
 * shard an even share of 'w' by moves, `shards remove 2` gives it back. */
static void add_remove(const char *mode, const char *extra)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, WORKERS, mode, extra, NULL), 0);
    pid_t pids[WORKERS];
    workers_start(&cl, pids);
    usleep(300 * 1000);
    char ep[400];
    zt_move_join_endpoint(&cl, 2, ep, sizeof(ep));
    ck_assert_int_eq(zt_server_join(&cl, 2, ep), 0);
    char *add[] = {"shards", "add", ep, "--config", cl.conf, NULL};
    zepsctl(&cl, "add", add, 0, "dense table 'w': shard 2 holds 333 of 1000 elements");
    usleep(300 * 1000);
    char *rm[] = {"shards", "remove", "2", "--config", cl.conf, NULL};
    zepsctl(&cl, "remove", rm, 0, "summary: elements=");
    usleep(200 * 1000);
    long weighted = workers_end(&cl, pids);
    uint32_t t;
    zeps_client *c = check_oracle(&cl, weighted, 7, &t); /* join, 2 cuts, 2 moves, 2 moves back */
    char text[256];
    scan_text(c, t, 2, text, sizeof(text));
    ck_assert_str_eq(text, "1000-1000 ");
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}

START_TEST(test_add_remove_under_load)
{
    clocked = 0;
    add_remove("async", NULL);
}
END_TEST

/* The same under ssp (bound 3), the workers clocking each step: pulls
 * parked by the bound on a moving piece are sent to its new holder. */
START_TEST(test_add_remove_under_ssp)
{
    clocked = 1;
    add_remove("ssp", "  staleness = 3;\n");
}
END_TEST

START_TEST(test_moves_under_load)
{
    zt_cluster cl;
    ck_assert_int_eq(zt_cluster_start(&cl, 2, WORKERS, "async", NULL, NULL), 0);
    char stop[400], out[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl.dir);
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        snprintf(out, sizeof(out), "%s/worker-%d.out", cl.dir, w);
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0)
            worker(&cl, w, stop, out);
    }
    usleep(300 * 1000);
    move(&cl, "w:200-500", "0", "1");
    usleep(200 * 1000);
    move(&cl, "w:300-400", "1", "0");
    usleep(200 * 1000);
    long weighted = 0; /* the oracle: pushes answered, each worker's x (w + 1) */
    FILE *f = fopen(stop, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    for (int w = 0; w < WORKERS; w++) {
        int ws = zt_wait(pids[w], 60);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
        snprintf(out, sizeof(out), "%s/worker-%d.out", cl.dir, w);
        long p = 0;
        FILE *o = fopen(out, "r");
        ck_assert(o && fscanf(o, "%ld", &p) == 1);
        fclose(o);
        weighted += p * (w + 1);
    }
    zeps_client *c = zt_client_replacing(&cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = declare(c);
    ck_assert_uint_ne(t, UINT32_MAX);
    static float got[LEN];
    ck_assert_int_eq(zeps_pull(c, t, got, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(got[i] == (float)(weighted * (1 + i % 2)),
                      "element %d: %g, the oracle %ld (pushes lost or applied twice)", i,
                      (double)got[i], weighted * (1 + i % 2));
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    ck_assert_uint_eq(st.slot_redirects, 0);
    ck_assert_uint_eq(st.slot_epoch, 4); /* two cuts, two moves */
    char text[256];
    scan_text(c, t, 0, text, sizeof(text));
    ck_assert_str_eq(text, "0-200 300-400 ");
    scan_text(c, t, 1, text, sizeof(text));
    ck_assert_str_eq(text, "200-300 400-500 500-1000 ");
    zeps_client_destroy(&c);
    ck_assert_int_eq(zt_cluster_stop(&cl), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dense_move");
    TCase *tc = tcase_create("load");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_moves_under_load);
    tcase_add_test(tc, test_add_remove_under_load);
    tcase_add_test(tc, test_add_remove_under_ssp);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
