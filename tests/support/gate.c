/*
 * gate.c - see gate.h.
 */
#include "gate.h"

#include <check.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "move_fixture.h"

/* The clock the test lets the workers reach, 0 if none yet. */
static int gate_read(const zt_cluster *cl)
{
    char path[400];
    int k = 0;
    snprintf(path, sizeof(path), "%s/limit", cl->dir);
    FILE *f = fopen(path, "r");
    if (f && fscanf(f, "%d", &k) != 1)
        k = 0;
    if (f)
        fclose(f);
    return k;
}

void zt_gate_pass(const zt_cluster *cl, int64_t k, int *limit)
{
    *limit = gate_read(cl); /* at every clock: a limit lowered holds at once */
    for (int i = 0; k >= *limit && i < 60000; i++) {
        usleep(2000);
        *limit = gate_read(cl);
    }
}

void zt_gate_write(const zt_gate *g, const zt_cluster *cl, int64_t k)
{
    char path[400], tmp[420];
    snprintf(path, sizeof(path), "%s/limit", cl->dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%lld\n", (long long)(k < g->steps ? k : g->steps));
    fclose(f);
    ck_assert_int_eq(rename(tmp, path), 0); /* a worker reads the old or the new, whole */
}

int64_t zt_gate_min_clock(const zt_gate *g, zeps_client *tool, int shard)
{
    Zeps__ShardStats *st = zt_stats(tool, shard);
    ck_assert_ptr_nonnull(st);
    int64_t m = st->n_workers == (size_t)g->workers ? INT64_MAX : -1;
    for (size_t i = 0; i < st->n_workers; i++)
        if (st->workers[i]->clock < m)
            m = st->workers[i]->clock;
    zeps__shard_stats__free_unpacked(st, NULL);
    return m;
}

void zt_gate_wait_clock(const zt_gate *g, const zt_cluster *cl, zeps_client *tool, int64_t at_least)
{
    int64_t now = zt_gate_min_clock(g, tool, 0);
    zt_gate_write(g, cl, (at_least > now ? at_least : now) + g->ahead);
    if (at_least < 0)
        return;
    for (int i = 0; i < 2400 && zt_gate_min_clock(g, tool, 0) < at_least; i++)
        usleep(5000);
    ck_assert_int_ge(zt_gate_min_clock(g, tool, 0), at_least);
}

void zt_gate_clocks(const zt_gate *g, const zt_cluster *cl, zeps_client *tool, int64_t n)
{
    zt_gate_wait_clock(g, cl, tool, zt_gate_min_clock(g, tool, 0) + n);
}

void zt_gate_start(const zt_gate *g, const zt_cluster *cl, pid_t *pids,
                   void (*worker)(const zt_cluster *cl, int w, bool slow), bool slow)
{
    for (int w = 0; w < g->workers; w++) {
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0)
            worker(cl, w, slow);
    }
}

void zt_gate_up(const zt_gate *g, zt_cluster *cl, pid_t *pids,
                void (*worker)(const zt_cluster *cl, int w, bool slow), bool slow)
{
    ck_assert_int_eq(zt_cluster_start(cl, 2, g->workers, "bsp", NULL, NULL), 0);
    zt_gate_start(g, cl, pids, worker, slow);
}

void zt_gate_end(const zt_gate *g, const zt_cluster *cl, const pid_t *pids)
{
    zt_gate_write(g, cl, g->steps);
    for (int w = 0; w < g->workers; w++) {
        int ws = zt_wait(pids[w], 120);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
    }
}

void zt_gate_end_mid_job(const zt_gate *g, const zt_cluster *cl, zeps_client *tool,
                         const pid_t *pids)
{
    zt_move_workers_run(pids, g->workers); /* they wait at the limit */
    ck_assert_int_lt(zt_gate_min_clock(g, tool, 0), g->steps - 1);
    zt_gate_end(g, cl, pids);
}
