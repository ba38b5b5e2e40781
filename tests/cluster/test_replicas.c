/*
 * test_replicas.c - a replicated shard's roles (docs/replication.md), with
 * real zeps-server processes and a real ZooKeeper (tests/support/zkserver.h):
 * one shard, two replicas.
 *
 *   - exactly one primary: replica 0, started first, at epoch 1; replica 1
 *     a backup naming it; STATS and /metrics of both say so;
 *   - the backup refuses a worker's PUSH and HELLO with ENOTPRIMARY, the
 *     reply naming the primary's endpoint and epoch; it answers STATS;
 *   - a tool's SLOTS is taken by the primary and, through its log, by the
 *     backup (which refuses it sent directly);
 *   - the primary serves a worker (libzeps) as with one replica;
 *   - replica 0 killed with SIGKILL: replica 1 is primary at epoch 2
 *     within the session timeout (and a margin), and serves a worker;
 *     replica 0 started again comes back as a backup of epoch 2;
 *   - `zepsctl status` shows each replica's role and epoch (with
 *     --endpoint, one process's);
 *   - no ZooKeeper: zeps-server exits 4 after connect_timeout_ms;
 *   - `zepsctl local --replicas 2` runs a ZooKeeper in its run directory,
 *     two replicas per shard, trains, and stops everything.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "harness.h"
#include "httpget.h"
#include "rawreq.h"
#include "scratch.h"
#include "wire.h"
#include "zeps.h"
#include "zeps_errors.h"
#include "zkserver.h"

#define SESSION_MS 1000
#define LEN        8

typedef struct rset {
    char dir[256], conf[320];
    char ep[2][64];
    int metrics[2];
    pid_t pid[2];
    void *zctx;
} rset;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* One shard of two replicas on loopback ports, coordinated by `hosts`. */
static void rset_write(rset *rs, const char *hosts, int connect_ms)
{
    memset(rs, 0, sizeof(*rs));
    ck_assert_int_eq(zt_scratch_dir(rs->dir, sizeof(rs->dir), "replicas"), 0);
    snprintf(rs->conf, sizeof(rs->conf), "%s/cluster.conf", rs->dir);
    for (int r = 0; r < 2; r++) {
        snprintf(rs->ep[r], sizeof(rs->ep[r]), "tcp://127.0.0.1:%d", zt_free_port());
        rs->metrics[r] = zt_free_port();
    }
    FILE *f = fopen(rs->conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "cluster = {\n  servers = ( [\"%s\", \"%s\"] );\n  replicas = 2;\n"
            "  workers = 1;\n  consistency = \"async\";\n  hello_timeout_ms = 5000;\n"
            "  coordination = { zookeeper = \"%s\"; name = \"t\"; session_timeout_ms = %d;\n"
            "                   connect_timeout_ms = %d; };\n};\n",
            rs->ep[0], rs->ep[1], hosts, SESSION_MS, connect_ms);
    fclose(f);
    rs->zctx = zmq_ctx_new();
}

static pid_t start_replica(rset *rs, int r)
{
    char bin[512], log[400], rep[8], mport[32];
    zt_bin("zeps-server", bin, sizeof(bin));
    snprintf(log, sizeof(log), "%s/replica-%d.log", rs->dir, r);
    snprintf(rep, sizeof(rep), "%d", r);
    snprintf(mport, sizeof(mport), "127.0.0.1:%d", rs->metrics[r]);
    char *argv[] = {bin,         "--config", rs->conf,           "--shard", "0",
                    "--replica", rep,        "--metrics-listen", mport,     NULL};
    rs->pid[r] = zt_spawn(bin, argv, log);
    ck_assert_int_gt(rs->pid[r], 0);
    return rs->pid[r];
}

static void *socket_to(rset *rs, int r)
{
    void *s = zmq_socket(rs->zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, rs->ep[r]), 0);
    return s;
}

static void header(Zeps__Header *h, Zeps__Op op, uint32_t rank)
{
    static uint64_t seq;
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = op;
    h->req_id = ++seq;
    h->rank = rank;
    h->incarnation = 777;
    h->seq = seq;
}

/* Replica r's STATS (a tool's request), or NULL if it did not answer. */
static Zeps__Header *stats_of(rset *rs, int r)
{
    void *s = socket_to(rs, r);
    Zeps__Header h;
    header(&h, ZEPS__OP__STATS, 0xffffffffu);
    Zeps__Header *rep = zt_raw_request(s, &h, NULL, 0);
    zmq_close(s);
    if (rep && !rep->stats) {
        zeps__header__free_unpacked(rep, NULL);
        return NULL;
    }
    return rep;
}

/* Wait until replica r says `role` at `epoch`; the seconds it took. */
static double wait_role(rset *rs, int r, const char *role, uint64_t epoch, double secs)
{
    double t0 = now_s();
    char seen[128] = "no answer";
    while (now_s() - t0 < secs) {
        Zeps__Header *rep = stats_of(rs, r);
        if (rep) {
            const Zeps__ShardStats *st = rep->stats;
            bool ok = strcmp(st->role, role) == 0 && st->epoch == epoch;
            snprintf(seen, sizeof(seen), "%s at epoch %llu (session %s)", st->role,
                     (unsigned long long)st->epoch, st->coord_session);
            zeps__header__free_unpacked(rep, NULL);
            if (ok)
                return now_s() - t0;
        }
        sleep_ms(20);
    }
    ck_abort_msg("replica %d not %s at epoch %llu within %.0f s: %s", r, role,
                 (unsigned long long)epoch, secs, seen);
    return -1;
}

/* Wait until replica r has heard of an in-sync set of n replicas (the
 * primary admits a backup once it followed and caught up with the log). */
static void wait_in_sync(rset *rs, int r, uint32_t n, double secs)
{
    double t0 = now_s();
    uint32_t seen = 0;
    while (now_s() - t0 < secs) {
        Zeps__Header *rep = stats_of(rs, r);
        seen = rep ? rep->stats->in_sync : 0;
        if (rep)
            zeps__header__free_unpacked(rep, NULL);
        if (seen == n)
            return;
        sleep_ms(20);
    }
    ck_abort_msg("replica %d heard of %u in sync, not %u, within %.0f s", r, seen, n, secs);
}

static void expect_metric(const char *text, const char *line)
{
    ck_assert_msg(strstr(text, line) != NULL, "/metrics has no line '%s'", line);
}

/* A worker's request to the backup: ENOTPRIMARY naming the primary. */
static void expect_redirect(rset *rs, Zeps__Op op, int primary, uint64_t epoch)
{
    void *s = socket_to(rs, 1 - primary);
    Zeps__Header h;
    header(&h, op, 0);
    float v[LEN] = {0};
    h.count = op == ZEPS__OP__PUSH ? LEN : 0;
    Zeps__Header *rep = zt_raw_req(s, &h, op == ZEPS__OP__PUSH ? v : NULL, sizeof(v));
    ck_assert_ptr_nonnull(rep);
    ck_assert_str_eq(rep->primary, rs->ep[primary]);
    ck_assert_int_eq(rep->primary_replica, primary);
    ck_assert_uint_eq(rep->epoch, epoch);
    ck_assert_msg(strstr(rep->error_text, "backup") != NULL, "%s", rep->error_text);
    zt_raw_expect_error(rep, ZEPS_ENOTPRIMARY, rs->ep[primary]); /* frees rep */
    zmq_close(s);
}

/* A tool's SLOTS (a newer map of the default's 4,096 slots, all on shard
 * 0): the primary takes it and logs it, so its backup takes it too; the
 * backup refuses it sent directly (ENOTPRIMARY: a backup answers STATS
 * alone). */
static void expect_slots_replicated(rset *rs, int primary)
{
    static unsigned char map[16 + 2 * 4096];
    map[0] = 3;         /* epoch 3, little-endian */
    map[9] = 4096 >> 8; /* 4,096 slots */
    map[12] = 1;        /* 1 shard; every slot's owner 0 */
    Zeps__Header h;
    for (int r = 0; r < 2; r++) {
        void *s = socket_to(rs, r);
        header(&h, ZEPS__OP__SLOTS, 0xffffffffu);
        Zeps__Header *rep = zt_raw_req(s, &h, map, sizeof(map));
        if (r == primary) {
            ck_assert_msg(rep && rep->op == ZEPS__OP__SLOTS, "SLOTS at the primary: %s",
                          rep && rep->error_text ? rep->error_text : "no answer");
            zeps__header__free_unpacked(rep, NULL);
        } else {
            zt_raw_expect_error(rep, ZEPS_ENOTPRIMARY, rs->ep[primary]); /* frees rep */
        }
        zmq_close(s);
    }
    for (int i = 0;; i++) { /* the backup applied it from the log */
        Zeps__Header *rep = stats_of(rs, 1 - primary);
        ck_assert_ptr_nonnull(rep);
        uint64_t epoch = rep->stats->slot_epoch;
        zeps__header__free_unpacked(rep, NULL);
        if (epoch == 3)
            break;
        ck_assert_msg(i < 100, "the backup holds slot map epoch %llu, not 3",
                      (unsigned long long)epoch);
        sleep_ms(50);
    }
}

/* A worker through libzeps, reaching replica r alone (a one-shard file
 * naming its endpoint): declare, push, pull. */
static void serves(rset *rs, int r, const char *table)
{
    char conf[400];
    snprintf(conf, sizeof(conf), "%s/client-%d.conf", rs->dir, r);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "cluster = { servers = [\"%s\"]; workers = 1; consistency = \"async\"; };\n",
            rs->ep[r]);
    fclose(f);
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, conf, 0), 0);
    zeps_table_spec spec = {.name = table, .length = LEN, .optimizer = "sgd", .lr = 1.0};
    uint32_t tid;
    ck_assert_int_eq(zeps_declare(c, &spec, &tid), 0);
    float g[LEN], v[LEN];
    for (int i = 0; i < LEN; i++)
        g[i] = -(float)i;
    ck_assert_int_eq(zeps_push(c, tid, g, 0, LEN, 0), 0);
    ck_assert_int_eq(zeps_pull(c, tid, v, 0, LEN, 0), 0);
    for (int i = 0; i < LEN; i++)
        ck_assert_msg(v[i] == (float)i, "v[%d] = %g", i, v[i]);
    zeps_client_destroy(&c);
}

/* `zepsctl status [args]` shows `primaries` primaries; one line has `needle`. */
static void expect_status(rset *rs, const char *args, int want_primaries, const char *needle)
{
    char bin[512], cmd[1200], line[1024];
    zt_bin("zepsctl", bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd), "%s status --config %s %s 2>&1", bin, rs->conf, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    int found = 0, primaries = 0;
    while (fgets(line, sizeof(line), p)) {
        found |= strstr(line, needle) != NULL;
        primaries += strstr(line, ": primary at epoch") != NULL;
    }
    int st = pclose(p);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl status: 0x%x", st);
    ck_assert_msg(found, "zepsctl status shows no '%s'", needle);
    ck_assert_int_eq(primaries, want_primaries);
}

static void stop(rset *rs, int r, int sig, int expect_status)
{
    ck_assert_int_eq(kill(rs->pid[r], sig), 0);
    int st = zt_wait(rs->pid[r], 15);
    if (sig == SIGKILL)
        ck_assert(WIFSIGNALED(st));
    else
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == expect_status, "replica %d: status 0x%x",
                      r, st);
    rs->pid[r] = 0;
}

START_TEST(test_roles_redirect_failover)
{
    zt_zk zk;
    ck_assert_int_eq(zt_zk_start(&zk), 0);
    rset rs;
    rset_write(&rs, zk.hosts, 10000);
    start_replica(&rs, 0);
    wait_role(&rs, 0, "primary", 1, 20);
    start_replica(&rs, 1);
    wait_role(&rs, 1, "backup", 1, 20);
    wait_in_sync(&rs, 1, 2, 20);

    /* one primary: each says who it is and who the primary is */
    for (int r = 0; r < 2; r++) {
        Zeps__Header *rep = stats_of(&rs, r);
        ck_assert_ptr_nonnull(rep);
        ck_assert_uint_eq(rep->stats->replicas, 2);
        ck_assert_uint_eq(rep->stats->replica, r);
        ck_assert_int_eq(rep->stats->primary_replica, 0);
        ck_assert_str_eq(rep->stats->primary, rs.ep[0]);
        ck_assert_str_eq(rep->stats->coord_session, "connected");
        ck_assert_uint_eq(rep->stats->elections, r == 0);
        zeps__header__free_unpacked(rep, NULL);
    }
    char text[65536];
    zt_http_get(rs.metrics[0], "/metrics", text, sizeof(text));
    expect_metric(text, "zeps_replica_role{role=\"primary\"} 1");
    expect_metric(text, "zeps_replica_epoch 1\n");
    expect_metric(text, "zeps_coord_session{state=\"connected\"} 1");
    zt_http_get(rs.metrics[1], "/metrics", text, sizeof(text));
    expect_metric(text, "zeps_replica_role{role=\"backup\"} 1");
    expect_metric(text, "zeps_replica_role{role=\"primary\"} 0");
    expect_metric(text, "zeps_replica_index 1\n");
    expect_metric(text, "zeps_replica_in_sync 2\n");

    expect_status(&rs, "", 1, "replica 1 of 2: backup at epoch 1  primary replica 0 at");
    char one[128]; /* one process only */
    snprintf(one, sizeof(one), "--shard 0 --endpoint %s", rs.ep[1]);
    expect_status(&rs, one, 0, "replica 1 of 2: backup at epoch 1");
    expect_redirect(&rs, ZEPS__OP__PUSH, 0, 1);
    expect_redirect(&rs, ZEPS__OP__HELLO, 0, 1);
    expect_slots_replicated(&rs, 0);
    serves(&rs, 0, "before");

    /* the primary dies: the backup takes over once its session expires */
    double t0 = now_s();
    stop(&rs, 0, SIGKILL, 0);
    wait_role(&rs, 1, "primary", 2, 10);
    double took = now_s() - t0;
    printf("failover after SIGKILL of the primary: %.3f s (session timeout %d ms)\n", took,
           SESSION_MS);
    ck_assert_msg(took < SESSION_MS / 1000.0 + 2.0, "failover took %.3f s", took);
    serves(&rs, 1, "after");
    zt_http_get(rs.metrics[1], "/metrics", text, sizeof(text));
    expect_metric(text, "zeps_replica_role{role=\"primary\"} 1");
    expect_metric(text, "zeps_replica_epoch 2\n");
    expect_metric(text, "zeps_coord_elections_total 1\n");

    /* the old primary comes back as a backup of the new one */
    start_replica(&rs, 0);
    wait_role(&rs, 0, "backup", 2, 20);
    expect_redirect(&rs, ZEPS__OP__PUSH, 1, 2);

    stop(&rs, 0, SIGTERM, 0);
    stop(&rs, 1, SIGTERM, 0);
    zmq_ctx_term(rs.zctx);
    zt_zk_stop(&zk, SIGTERM);
}
END_TEST

/* Nothing answers at the coordination address: exit 4, saying why. */
START_TEST(test_unreachable_exits)
{
    char hosts[64];
    snprintf(hosts, sizeof(hosts), "127.0.0.1:%d", zt_free_port());
    rset rs;
    rset_write(&rs, hosts, 500);
    double t0 = now_s();
    start_replica(&rs, 0);
    int st = zt_wait(rs.pid[0], 20);
    double took = now_s() - t0;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 4, "status 0x%x", st);
    ck_assert_msg(took >= 0.5 && took < 5, "exited after %.2f s", took);
    char log[400], line[1024];
    snprintf(log, sizeof(log), "%s/replica-0.log", rs.dir);
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    bool said = false;
    while (!said && fgets(line, sizeof(line), f))
        said = strstr(line, "no coordination session") != NULL && strstr(line, hosts) != NULL;
    fclose(f);
    ck_assert_msg(said, "the log does not say why (%s)", log);
    zmq_ctx_term(rs.zctx);
}
END_TEST

/* The last bytes of file `path` (a failed command's output), for a
 * failure message: the scratch folder goes with the test. */
static const char *tail_of(const char *path)
{
    static char buf[1500];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return "(no output)";
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, n > (long)sizeof(buf) - 1 ? n - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    size_t got = fread(buf, 1, sizeof(buf) - 1, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* zepsctl local --replicas 2: a ZooKeeper in the run directory, two
 * replicas per shard (replica 0 primary, replica 1 backup), training
 * done, everything stopped (ZooKeeper too); then the same run again in
 * the same directory. */
START_TEST(test_zepsctl_local)
{
    char dir[256], bin[512], cmd[1400], path[400], line[1024];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "local"), 0);
    zt_bin("zepsctl", bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd),
             "%s local --replicas 2 --servers 2 --workers 2 --model quadratic --epochs 1 --dir "
             "%s/run -q "
             "--timeout 120 > %s/out.txt 2>&1",
             bin, dir, dir);
    int st = system(cmd);
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl local: 0x%x; its output:\n%s", st,
                  tail_of(path));
    const char *want[][2] = {{"server-0.0.log", "role: none -> primary at epoch 1"},
                             {"server-1.0.log", "role: none -> primary at epoch 1"},
                             {"server-0.1.log", "role: none -> backup at epoch 1"},
                             {"server-1.1.log", "role: none -> backup at epoch 1"},
                             {"zookeeper/zoo.cfg", "clientPortAddress=127.0.0.1"}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        snprintf(path, sizeof(path), "%s/run/%s", dir, want[i][0]);
        FILE *f = fopen(path, "r");
        ck_assert_msg(f != NULL, "no %s", path);
        bool found = false;
        while (!found && fgets(line, sizeof(line), f))
            found = strstr(line, want[i][1]) != NULL;
        fclose(f);
        ck_assert_msg(found, "%s has no '%s'", path, want[i][1]);
    }
    /* ZooKeeper stopped: nothing serves on its port any more */
    snprintf(path, sizeof(path), "%s/run/cluster.conf", dir);
    char text[4096] = "";
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    const char *zk = strstr(text, "zookeeper = \"127.0.0.1:");
    ck_assert_ptr_nonnull(zk);
    int port = atoi(zk + strlen("zookeeper = \"127.0.0.1:"));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0,
                  "ZooKeeper still serves on %d", port);
    close(fd);
    /* again in the same directory: its ZooKeeper's data holds the first
     * run's in-sync sets, whose members are gone; the run has a name of
     * its own, so its replicas are elected all the same */
    st = system(cmd);
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "zepsctl local again in the same --dir: 0x%x; its output:\n%s", st,
                  tail_of(path));
}
END_TEST

/* The line number of the first line of file `path` holding `needle`, or 0. */
static int line_of(const char *path, const char *needle)
{
    char line[1024];
    FILE *f = fopen(path, "r");
    int n = 0, at = 0;
    while (f && !at && fgets(line, sizeof(line), f))
        at = ++n * (strstr(line, needle) != NULL);
    if (f)
        fclose(f);
    return at;
}

/* zepsctl local --config FILE --replicas 2: the file's shard gets two
 * replicas on fresh ports (the rest of the file as it was), and the worker
 * starts once the backup is in the in-sync set; a file replicated already
 * is refused with --replicas (exit 2). */
START_TEST(test_zepsctl_local_config)
{
    char dir[256], bin[512], cmd[2600], path[400];
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "localcfg"), 0);
    zt_bin("zepsctl", bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd),
             "%s local --print-config --servers 1 --workers 1 --model quadratic > %s/job.conf && "
             "%s local --config %s/job.conf --replicas 2 --dir %s/run -q --timeout 120 "
             "> %s/out.txt 2>&1",
             bin, dir, bin, dir, dir, dir);
    int st = system(cmd);
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "zepsctl local: 0x%x; its output:\n%s", st,
                  tail_of(path));
    snprintf(path, sizeof(path), "%s/run/cluster.conf", dir);
    ck_assert_msg(line_of(path, "replicas = 2;") > 0, "%s: no replicas = 2", path);
    ck_assert_msg(line_of(path, "model = \"quadratic\"") > 0, "%s: the file's model lost", path);
    snprintf(path, sizeof(path), "%s/run/server-0.1.log", dir);
    ck_assert_msg(line_of(path, "role: none -> backup at epoch 1") > 0, "%s: not a backup", path);
    snprintf(path, sizeof(path), "%s/run/server-0.0.log", dir);
    int in_sync = line_of(path, "in-sync set: 2 replica"),
        joined = line_of(path, "worker 0 joined");
    ck_assert_msg(in_sync > 0 && joined > in_sync,
                  "%s: the worker joined (line %d) before the backup was in sync (line %d)", path,
                  joined, in_sync);

    /* replicated already: --replicas refused */
    snprintf(cmd, sizeof(cmd),
             "%s local --config %s/run/cluster.conf --replicas 2 --dir %s/again -q "
             "> %s/again.txt 2>&1",
             bin, dir, dir, dir);
    st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "a replicated file with --replicas: 0x%x",
                  st);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("replicas");
    TCase *tc = tcase_create("replicas");
    tcase_set_timeout(tc, 170);
    tcase_add_test(tc, test_roles_redirect_failover);
    tcase_add_test(tc, test_unreachable_exits);
    tcase_add_test(tc, test_zepsctl_local);
    tcase_add_test(tc, test_zepsctl_local_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
