/*
 * move_fixture.c - what the live-move tests share (test_migrate,
 * test_migrate_abort): their table, ids and pushes, zepsctl run as a
 * process, a shard's rows and map epoch. See move_fixture.h.
 */
#include "move_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "rawreq.h"
#include "slotmap.h"
#include "wire.h"

void zt_move_ids(uint64_t *ids, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        ids[i] = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed; /* distinct */
}

uint32_t zt_move_declare(zeps_client *c)
{
    zeps_sparse_spec spec = {
        .name = "emb", .dim = DIM, .optimizer = "sgd", .lr = 1.0, .init = "zeros", .seed = 1};
    uint32_t t;
    ck_assert_int_eq(zeps_declare_sparse(c, &spec, &t), 0);
    return t;
}

zeps_client *zt_move_tool(const zt_cluster *cl)
{
    zeps_client *c = NULL;
    ck_assert_int_eq(zeps_client_new(&c, cl->conf, ZEPS_RANK_TOOL), 0);
    return c;
}

pid_t zt_move_zepsctl_start(const char *log, char **args)
{
    char bin[512];
    zt_bin("zepsctl", bin, sizeof(bin));
    char *argv[32] = {bin};
    int n = 0;
    for (; args[n]; n++) {
        ck_assert_int_lt(n + 2, 32);
        argv[n + 1] = args[n];
    }
    pid_t pid = zt_spawn(bin, argv, log);
    ck_assert_int_gt(pid, 0);
    return pid;
}

int zt_move_zepsctl(const char *log, char **args)
{
    int st = zt_wait(zt_move_zepsctl_start(log, args), 120);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void zt_move_zepsctl_exits(pid_t pid, const char *log, double secs, int code)
{
    int st = zt_wait(pid, secs);
    zt_move_print_file(log);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == code,
                  "zepsctl: status 0x%x, not exit %d", st, code);
}

int zt_move_zepsctl_logged(const zt_cluster *cl, const char *name, char **args)
{
    char log[400];
    snprintf(log, sizeof(log), "%s/%s.log", cl->dir, name);
    int st = zt_move_zepsctl(log, args);
    zt_move_print_file(log);
    return st;
}

long zt_move_handed(const zt_cluster *cl, const char *name)
{
    char path[400], line[512], what[32];
    snprintf(path, sizeof(path), "%s/%s.log", cl->dir, name);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long sum = 0, n, held;
    while (fgets(line, sizeof(line), f)) /* "cut-over: N rows and ..." or "N elements" */
        if (sscanf(line, "cut-over: %ld %31s and %ld held bsp pushes", &n, what, &held) == 3)
            sum += held;
    fclose(f);
    return sum;
}

int zt_move_file_has(const char *path, const char *needle)
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

void zt_move_print_file(const char *path)
{
    char line[1024];
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        printf("  | %s", line);
    if (f)
        fclose(f);
    fflush(stdout); /* a failing check that follows ends the process without flushing */
}

/* Rows of table 0 on shard k, and its slot map epoch. */
uint64_t zt_move_rows(zeps_client *c, int k, uint64_t *epoch)
{
    Zeps__ShardStats *st = zt_stats(c, k);
    ck_assert_ptr_nonnull(st);
    uint64_t n = st->n_tables > 0 ? st->tables[0]->rows : 0;
    if (epoch)
        *epoch = st->slot_epoch;
    zeps__shard_stats__free_unpacked(st, NULL);
    return n;
}

/* Push every id of ids[0..n) once: column 0 gains 1, column 1 i % 5 + 1. */
void zt_move_populate(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n)
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
 * are `times` zt_move_populate()s. */
void zt_move_check_values(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n, int times)
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

/* A raw socket to shard k that said HELLO as worker `rank`, incarnation inc. */
void *zt_move_raw_worker(void *zctx, const zt_cluster *cl, int k, uint32_t rank, uint64_t inc)
{
    void *sock = zt_raw_socket(zctx, cl, k);
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__HELLO;
    h.req_id = 1;
    h.rank = rank;
    h.incarnation = inc;
    h.seq = 1;
    Zeps__Header *rep = zt_raw_req(sock, &h, NULL, 0);
    ck_assert_msg(rep->op == ZEPS__OP__HELLO, "%s", rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    return sock;
}

Zeps__Header *zt_move_step(const zt_cluster *cl, int k, uint32_t peer, uint32_t step,
                           const void *wire, size_t len)
{
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__MOVE);
    h.move_step = step;
    h.move_peer = peer;
    return zt_raw_req_once(cl, k, &h, wire, len);
}

/* The map of 3 shards over `slots` slots at `epoch`, slot n on n mod 3
 * but slot 0 on `peer`, in its wire form (static). */
const uint8_t *zt_move_map_wire(uint64_t epoch, uint32_t slots, uint32_t peer)
{
    static uint8_t wire[16 + 2 * 4095];
    memset(wire, 0, sizeof(wire));
    for (int i = 0; i < 8; i++)
        wire[i] = (uint8_t)(epoch >> (8 * i));
    for (int i = 0; i < 4; i++)
        wire[8 + i] = (uint8_t)(slots >> (8 * i));
    wire[12] = 3;
    for (uint32_t n = 0; n < slots; n++)
        wire[16 + 2 * n] = (uint8_t)(n == 0 ? peer : n % 3);
    return wire;
}

/* Worker process w: push every id (column 0 gains 1, column 1 w + 1)
 * until `stop` exists and at least 20 times, then write the pushes
 * answered to `out` and leave. Exit 0, or 1 on any error (printed). */
void zt_move_push_worker(const zt_cluster *cl, int w, const char *stop, const char *out)
{
    static uint64_t ids[NIDS];
    static float g[NIDS * DIM];
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
        if (zeps_spush(c, t, ids, NIDS, g, step) != 0) {
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

void zt_move_join_endpoint(const zt_cluster *cl, int k, char *buf, size_t len)
{
    snprintf(buf, len, "ipc://%s/joined-%d", cl->dir, k);
}

void zt_move_join(zt_cluster *cl, int k, char *buf, size_t len)
{
    zt_move_join_endpoint(cl, k, buf, len);
    ck_assert_int_eq(zt_server_join(cl, k, buf), 0);
}

void zt_move_check_oracle(const zt_cluster *cl, long sum, long weighted)
{
    static uint64_t ids[NIDS];
    static float got[NIDS * DIM];
    zt_move_ids(ids, NIDS, 0);
    zeps_client *c = zt_client_replacing(cl, 0);
    ck_assert_ptr_nonnull(c);
    uint32_t t = zt_move_declare(c);
    ck_assert_msg(zeps_spull(c, t, ids, NIDS, got, 0) == 0, "%s", zeps_last_error(c));
    for (int i = 0; i < NIDS; i++)
        ck_assert_msg(got[i * DIM] == (float)sum && got[i * DIM + 1] == (float)weighted,
                      "id %d: %g pushes applied (%g weighted), %ld (%ld) answered", i, got[i * DIM],
                      got[i * DIM + 1], sum, weighted);
    zeps_client_stats cs;
    zeps_client_get_stats(c, &cs);
    ck_assert_uint_eq(cs.slot_redirects, 0);
    zeps_client_destroy(&c);
}

void zt_move_workers_run(const pid_t *pids, int n)
{
    for (int w = 0; w < n; w++)
        ck_assert_int_eq(waitpid(pids[w], NULL, WNOHANG), 0);
}

void zt_move_workers_start(const zt_cluster *cl, int n, pid_t *pids)
{
    char stop[400], out[400];
    snprintf(stop, sizeof(stop), "%s/stop", cl->dir);
    for (int w = 0; w < n; w++) {
        snprintf(out, sizeof(out), "%s/worker-%d.out", cl->dir, w);
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0)
            zt_move_push_worker(cl, w, stop, out);
    }
}

long zt_move_workers_end(const zt_cluster *cl, int n, const pid_t *pids, long *weighted)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/stop", cl->dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    long sum = 0;
    *weighted = 0;
    for (int w = 0; w < n; w++) {
        int ws = zt_wait(pids[w], 60);
        ck_assert_msg(ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "worker %d failed", w);
        long p = 0;
        snprintf(path, sizeof(path), "%s/worker-%d.out", cl->dir, w);
        FILE *o = fopen(path, "r");
        ck_assert_ptr_nonnull(o);
        ck_assert_int_eq(fscanf(o, "%ld", &p), 1);
        fclose(o);
        sum += p;
        *weighted += p * (w + 1);
    }
    return sum;
}

void zt_move_raw_push(void *sock, uint32_t rank, uint64_t inc, uint32_t t, uint64_t id,
                      uint64_t seq, uint64_t req_id)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PUSH;
    h.rank = rank;
    h.incarnation = inc;
    h.seq = seq;
    h.req_id = req_id;
    h.table = t;
    h.count = 1;
    unsigned char body[sizeof(id) + DIM * sizeof(float)]; /* the id, then its row */
    float g[DIM] = {-1.0f, -1.0f};
    memcpy(body, &id, sizeof(id));
    memcpy(body + sizeof(id), g, sizeof(g));
    zt_raw_send(sock, &h, body, sizeof(body));
}

bool zt_move_replied(void *sock, int ms)
{
    zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
    return zmq_poll(&it, 1, ms) == 1;
}

void zt_move_parked_then_late(void *sock, uint64_t inc, uint32_t t, uint64_t id,
                              void (*abort_move)(void *arg), void *arg)
{
    zt_move_raw_push(sock, 1, inc, t, id, 2, 2);
    ck_assert_msg(!zt_move_replied(sock, 300),
                  "a push of the moving slot answered in the cut-over");
    zt_move_raw_push(sock, 1, inc, t, id, 2, 2); /* the client's retry */
    ck_assert(!zt_move_replied(sock, 300));
    abort_move(arg);
    zt_raw_expect_error(zt_raw_recv(sock, 5000), ZEPS_EMOVED, "which shard 0 owns");
    ck_assert_msg(!zt_move_replied(sock, 200), "a parked push answered twice");
    zt_move_raw_push(sock, 1, inc, t, id, 2, 3); /* a copy of the old seq, late */
    Zeps__Header *rep = zt_raw_recv(sock, 5000);
    ck_assert_msg(rep->op == ZEPS__OP__PUSH && (rep->flags & ZP_FLAG_DUPLICATE),
                  "the late copy of a parked push was not a duplicate: op %d flags 0x%x (%s)",
                  rep->op, rep->flags, rep->error_text ? rep->error_text : "");
    zeps__header__free_unpacked(rep, NULL);
    zt_move_raw_push(sock, 1, inc, t, id, 3, 4); /* the client's resend, with a new seq */
    rep = zt_raw_recv(sock, 5000);
    ck_assert_msg(rep->op == ZEPS__OP__PUSH && !(rep->flags & ZP_FLAG_DUPLICATE), "%s",
                  rep->error_text ? rep->error_text : "a duplicate");
    zeps__header__free_unpacked(rep, NULL);
}
