/*
 * replset.c - see replset.h.
 */
#include "replset.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "harness.h"
#include "scratch.h"
#include "wire.h"

double zt_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void zt_sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Free loopback endpoints, the folder and the context of a first write. */
static void first_write(zt_rset *rs, const char *tag, const char *dir)
{
    if (dir)
        snprintf(rs->dir, sizeof(rs->dir), "%s", dir);
    else
        ck_assert_int_eq(zt_scratch_dir(rs->dir, sizeof(rs->dir), tag), 0);
    snprintf(rs->conf, sizeof(rs->conf), "%s/cluster.conf", rs->dir);
    for (int r = 0; r < 2; r++)
        snprintf(rs->ep[r], sizeof(rs->ep[r]), "tcp://127.0.0.1:%d", zt_free_port());
    rs->zctx = zmq_ctx_new();
}

void zt_rset_write_shards(zt_rset *rs, int n, const char *tag, const char *hosts, const char *name,
                          int session_ms, const char *extra)
{
    ck_assert(n >= 1 && n <= 4);
    for (int k = 0; k < n; k++)
        if (!rs[k].dir[0]) {
            first_write(&rs[k], tag, k ? rs[0].dir : NULL);
            rs[k].shard = k;
        }
    FILE *f = fopen(rs[0].conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "cluster = {\n  servers = (");
    for (int k = 0; k < n; k++)
        fprintf(f, "%s [\"%s\", \"%s\"]", k ? "," : "", rs[k].ep[0], rs[k].ep[1]);
    fprintf(f,
            " );\n  replicas = 2;\n"
            "  coordination = { zookeeper = \"%s\"; name = \"%s\"; session_timeout_ms = %d;\n"
            "                   connect_timeout_ms = 10000; };\n%s\n};\n",
            hosts, name, session_ms, extra);
    fclose(f);
}

void zt_rset_write(zt_rset *rs, const char *tag, const char *hosts, const char *name,
                   int session_ms, const char *extra)
{
    zt_rset_write_shards(rs, 1, tag, hosts, name, session_ms, extra);
}

/* Replica r's log file into buf. */
static void log_path(const zt_rset *rs, int r, char *buf, size_t len)
{
    if (rs->shard == 0)
        snprintf(buf, len, "%s/replica-%d.log", rs->dir, r);
    else
        snprintf(buf, len, "%s/replica-%d.%d.log", rs->dir, rs->shard, r);
}

void zt_rset_start(zt_rset *rs, int r)
{
    char bin[512], log[400], rep[8], shard[8];
    zt_bin("zeps-server", bin, sizeof(bin));
    log_path(rs, r, log, sizeof(log)); /* appended across starts */
    snprintf(rep, sizeof(rep), "%d", r);
    snprintf(shard, sizeof(shard), "%d", rs->shard);
    char *conf = r == 0 && rs->conf0[0] ? rs->conf0 : rs->conf;
    char *argv[] = {bin, "--config", conf, "--shard", shard, "--replica", rep, NULL};
    rs->pid[r] = zt_spawn(bin, argv, log);
    ck_assert_int_gt(rs->pid[r], 0);
}

bool zt_rset_transfer_dir_left(const zt_rset *rs, int r)
{
    char dir[600];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof(dir), "%s/zeps-transfer-%d-%d-%d", tmp && tmp[0] ? tmp : "/tmp", rs->shard,
             r, (int)rs->pid[r]);
    return access(dir, F_OK) == 0;
}

void zt_rset_kill(zt_rset *rs, int r, int sig)
{
    ck_assert_int_eq(kill(rs->pid[r], sig), 0);
    int st = zt_wait(rs->pid[r], 15);
    ck_assert_msg(sig == SIGKILL ? WIFSIGNALED(st) : WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "replica %d: status 0x%x", r, st);
    /* a replica stopped, not killed, leaves no transfer folder behind */
    ck_assert_msg(sig == SIGKILL || !zt_rset_transfer_dir_left(rs, r),
                  "replica %d left its transfer folder in $TMPDIR", r);
    rs->pid[r] = 0;
}

void zt_rset_stop(zt_rset *rs)
{
    for (int r = 0; r < 2; r++)
        if (rs->pid[r])
            zt_rset_kill(rs, r, SIGTERM);
    zmq_ctx_term(rs->zctx);
}

Zeps__Header *zt_rset_stats(zt_rset *rs, int r)
{
    void *s = zmq_socket(rs->zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, rs->ep[r]), 0);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__STATS;
    h.req_id = 1;
    h.rank = 0xffffffffu;
    Zeps__Header *rep = zt_raw_request(s, &h, NULL, 0);
    zmq_close(s);
    if (rep && !rep->stats) {
        zeps__header__free_unpacked(rep, NULL);
        return NULL;
    }
    return rep;
}

int64_t zt_rset_worker_clock(zt_rset *rs, int r, uint32_t rank)
{
    Zeps__Header *rep = zt_rset_stats(rs, r);
    ck_assert_ptr_nonnull(rep);
    int64_t clock = -1;
    for (size_t i = 0; i < rep->stats->n_workers; i++)
        if (rep->stats->workers[i]->rank == rank)
            clock = rep->stats->workers[i]->clock;
    zeps__header__free_unpacked(rep, NULL);
    return clock;
}

int zt_rset_primary(zt_rset *rs)
{
    for (int r = 0; r < 2; r++) {
        Zeps__Header *rep = zt_rset_stats(rs, r);
        bool is = rep && strcmp(rep->stats->role, "primary") == 0;
        if (rep)
            zeps__header__free_unpacked(rep, NULL);
        if (is)
            return r;
    }
    ck_abort_msg("no replica says it is primary");
    return -1;
}

uint64_t zt_rset_epoch(zt_rset *rs, int r)
{
    Zeps__Header *rep = zt_rset_stats(rs, r);
    ck_assert_ptr_nonnull(rep);
    uint64_t e = rep->stats->epoch;
    zeps__header__free_unpacked(rep, NULL);
    return e;
}

double zt_rset_wait(zt_rset *rs, int r, const char *role, uint64_t epoch, int in_sync, double secs)
{
    double t0 = zt_now_s();
    char seen[160] = "no answer";
    while (zt_now_s() - t0 < secs) {
        Zeps__Header *rep = zt_rset_stats(rs, r);
        if (rep) {
            const Zeps__ShardStats *st = rep->stats;
            bool ok = strcmp(st->role, role) == 0 && st->epoch == epoch &&
                      (in_sync < 0 || st->in_sync == (uint32_t)in_sync);
            snprintf(seen, sizeof(seen), "%s at epoch %llu, %u in sync", st->role,
                     (unsigned long long)st->epoch, st->in_sync);
            zeps__header__free_unpacked(rep, NULL);
            if (ok)
                return zt_now_s() - t0;
        }
        zt_sleep_ms(20);
    }
    /* the replica's last log lines: the scratch folder goes with the test */
    char path[400], tail[1200] = "";
    log_path(rs, r, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (f) {
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, n > (long)sizeof(tail) - 1 ? n - (long)sizeof(tail) + 1 : 0, SEEK_SET);
        tail[fread(tail, 1, sizeof(tail) - 1, f)] = '\0';
        fclose(f);
    }
    ck_abort_msg("replica %d not %s at epoch %llu with %d in sync within %.0f s: %s; the end of "
                 "its log:\n%s",
                 r, role, (unsigned long long)epoch, in_sync, secs, seen, tail);
    return -1;
}

void zt_rset_up(zt_rset *rs)
{
    zt_rset_start(rs, 0);
    zt_rset_wait(rs, 0, "primary", 1, 1, 20);
    zt_rset_start(rs, 1);
    zt_rset_wait(rs, 0, "primary", 1, 2, 20);
}
