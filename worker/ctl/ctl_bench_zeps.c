/*
 * ctl_bench_zeps.c - `zepsctl bench`: the zeps side. A real zeps-server (1
 * shard, async, from a cluster file written into the run's temporary
 * directory; with --curve a second one with CurveZMQ keys made there) and
 * one libzeps client each, driven through zp_ctl_bench_zeps_ops and
 * zp_ctl_bench_zeps_curve_ops; also the server's memory per parameter.
 * The replicated shard of --replicas (ctl_bench_repl.c) is started with
 * the same cluster file writer, spawn and connect, and driven through
 * zp_ctl_bench_zeps_r2_ops.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zmq.h>

#include "ctl.h"
#include "curve.h"
#include "zeps.pb-c.h"
#include "ctl_bench.h"

static void zs_select(void *ctx, int i, size_t bytes)
{
    zeps_side *z = ctx;
    z->table = z->tables[i];
    z->count = bytes / sizeof(float);
}

static int zs_report(zeps_side *z, int op, int rc)
{
    if (rc != 0)
        fprintf(stderr, "bench: zeps %s: %s\n", op == OP_PUSH ? "push" : "pull",
                zeps_last_error(z->c));
    return rc;
}

static int zs_start(void *ctx, int op, int slot)
{
    zeps_side *z = ctx;
    zeps_req **req = &z->reqs[slot];
    if (op == OP_PUSH)
        return zs_report(z, op,
                         zeps_push_start(z->c, z->table, z->push[slot], 0, z->count, 0, req));
    if (op == OP_PULL_VIEW)
        return zs_report(z, op, zeps_pull_view_start(z->c, z->table, 0, z->count, 0, req));
    return zs_report(z, op, zeps_pull_start(z->c, z->table, z->pull[slot], 0, z->count, 0, req));
}

static int zs_finish(void *ctx, int op, int slot)
{
    zeps_side *z = ctx;
    if (op != OP_PULL_VIEW)
        return zs_report(z, op, zeps_wait(&z->reqs[slot]));
    zeps_view *v = NULL;
    int rc = zeps_wait_view(&z->reqs[slot], &v);
    zeps_view_release(&v);
    return zs_report(z, op, rc);
}

const side_ops zp_ctl_bench_zeps_ops = {
    .name = "zeps", .select = zs_select, .start = zs_start, .finish = zs_finish};
const side_ops zp_ctl_bench_zeps_curve_ops = {
    .name = "zeps+curve", .select = zs_select, .start = zs_start, .finish = zs_finish};
const side_ops zp_ctl_bench_zeps_r2_ops = {
    .name = "zeps r=2", .select = zs_select, .start = zs_start, .finish = zs_finish};

/* Bind port 0 (or connect to `port`) on 127.0.0.1: returns the port bound,
 * or 1 if the connect succeeded; -1 on failure. */
static int loopback(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;
    if (fd >= 0 && port > 0)
        rc = connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ? 1 : -1;
    else if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        rc = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return rc;
}

int zp_ctl_bench_zeps_write_conf(const bench *b, const char *path, const char *servers,
                                 const char *extra)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
        return ZEPS_EIO;
    }
    fprintf(f,
            "# written by zepsctl bench\n"
            "cluster = {\n"
            "  servers = %s;\n"
            "  workers = 1;\n"
            "  consistency = \"async\";\n"
            "  request_timeout_ms = 30000;\n"
            "  max_message_mb = %zu;\n"
            "  log_level = \"info\";\n%s"
            "};\n",
            servers, (max_size(&b->o) >> 20) + 16, extra);
    return fclose(f) == 0 ? 0 : ZEPS_EIO;
}

int zp_ctl_bench_zeps_spawn(pid_t *server, const char *cfg, const char *logpath, int replica)
{
    char exe[PATH_MAX + 16], rep[16];
    zp_zepsctl_bindir(exe, PATH_MAX);
    strcat(exe, "/zeps-server");
    if (exe[0] != '/' || access(exe, X_OK) != 0)
        snprintf(exe, sizeof exe, "zeps-server");
    snprintf(rep, sizeof rep, "%d", replica);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ZEPS_EIO;
    zp_spawn_opts so = {.log_fd = fd, .flags = ZP_SPAWN_GROUP | ZP_SPAWN_PATH, .deathsig = SIGTERM};
    char *argv[] = {exe, "--config", (char *)cfg, "--shard", "0", "--replica", rep, NULL};
    if (replica < 0)
        argv[5] = NULL;
    *server = zp_spawn_start(argv, &so);
    close(fd);
    if (*server <= 0)
        fprintf(stderr, "bench: cannot start %s: %s\n", exe, strerror(errno));
    return *server > 0 ? 0 : ZEPS_EIO;
}

/* Wait (up to 15 s) until the server listens; fail at once if it exits. */
static int server_wait_ready(pid_t *server, int port)
{
    int status;
    for (int i = 0; i < 1500 && !zp_ctl_bench_stop; i++) {
        if (zp_spawn_wait(*server, 0, &status) == 1) {
            *server = 0;
            fprintf(stderr, "bench: zeps-server exited during start-up\n");
            return ZEPS_EIO;
        }
        if (loopback(port) == 1)
            return 0;
        usleep(10000);
    }
    fprintf(stderr, "bench: zeps-server is not listening on port %d\n", port);
    return ZEPS_ETIMEDOUT;
}

static int declare(zeps_side *z, const char *name, uint64_t len, const char *optim, uint32_t *table)
{
    /* sgd with a tiny rate: a gradient of ones keeps the values finite */
    zeps_table_spec spec = {.name = name,
                            .length = len,
                            .optimizer = optim,
                            .lr = strcmp(optim, "sgd") == 0 ? 1e-9 : 1e-3,
                            .init = "zeros"};
    int rc = zeps_declare(z->c, &spec, table);
    if (rc != 0)
        fprintf(stderr, "bench: declare %s: %s\n", name, zeps_last_error(z->c));
    return rc;
}

/* Server bytes per parameter of the tables mem_sgd and mem_adam, from STATS. */
static int read_memory(bench *b)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = zeps_stats_raw(b->z.c, 0, &buf, &len);
    if (rc != 0) {
        fprintf(stderr, "bench: stats: %s\n", zeps_last_error(b->z.c));
        return rc;
    }
    Zeps__ShardStats *st = zeps__shard_stats__unpack(NULL, len, buf);
    free(buf);
    if (!st)
        return ZEPS_EPROTO;
    for (size_t i = 0; i < st->n_tables; i++) {
        const Zeps__TableStats *t = st->tables[i];
        uint64_t n = t->slice_end > t->slice_begin ? t->slice_end - t->slice_begin : t->length;
        double per = n ? (double)t->bytes_param / (double)n : 0;
        if (strcmp(t->name, "mem_sgd") == 0)
            b->mem_sgd = per;
        else if (strcmp(t->name, "mem_adam") == 0)
            b->mem_adam = per;
    }
    zeps__shard_stats__free_unpacked(st, NULL);
    return 0;
}

/* Server and client key pairs for the CURVE side: <dir>/keys/server.*,
 * <dir>/keys/client.*, and the client's public key alone in <dir>/allow. */
static int make_keys(const bench *b, zp_curve_client_keys *k)
{
    char keys[128], allow[128], path[160], pub[ZP_CURVE_KEY_LEN + 1], err[1024];
    snprintf(keys, sizeof keys, "%s/keys", b->dir);
    snprintf(allow, sizeof allow, "%s/allow", b->dir);
    if (mkdir(keys, 0700) != 0 || mkdir(allow, 0700) != 0) {
        fprintf(stderr, "bench: cannot create key directories in %s: %s\n", b->dir,
                strerror(errno));
        return ZEPS_EIO;
    }
    int rc = zp_curve_keygen(keys, "server", k->server_public, err, sizeof err);
    if (rc == 0)
        rc = zp_curve_keygen(keys, "client", pub, err, sizeof err);
    snprintf(path, sizeof path, "%s/keys/client.key", b->dir);
    if (rc == 0)
        rc = zp_curve_read_key(path, true, k->client_secret, err, sizeof err);
    memcpy(k->client_public, pub, sizeof pub);
    snprintf(path, sizeof path, "%s/allow/client.pub", b->dir);
    FILE *f = rc == 0 ? fopen(path, "w") : NULL;
    if (rc == 0 && (!f || fprintf(f, "%s\n", pub) < 0 || fclose(f) != 0)) {
        snprintf(err, sizeof err, "cannot write %s", path);
        rc = ZEPS_EIO;
    }
    if (rc != 0)
        fprintf(stderr, "bench: %s\n", err);
    return rc;
}

int zp_ctl_bench_zeps_connect(bench *b, zeps_side *z, const char *ep,
                              const zp_curve_client_keys *keys)
{
    const char *eps[] = {ep};
    zeps_options opt = {
        .request_timeout_ms = 30000, .max_retries = 1, .hello_timeout_ms = 15000, .num_workers = 1};
    if (b->o.shm && !keys) { /* room for a window of the largest payloads both ways */
        opt.transport = ZEPS_TRANSPORT_AUTO;
        opt.shm_segment_bytes = (uint64_t)b->o.window * max_size(&b->o) + (16u << 20);
    }
    if (keys) {
        opt.curve_server_key = keys->server_public;
        opt.curve_public_key = keys->client_public;
        opt.curve_secret_key = keys->client_secret;
    }
    int rc = zeps_client_new_endpoints(&z->c, eps, 1, 0, &opt);
    if (rc != 0) {
        fprintf(stderr, "bench: cannot connect to zeps-server at %s: %s\n", ep, zeps_strerror(rc));
        return rc;
    }
    z->push = b->push;
    z->pull = b->pull;
    for (int i = 0; i < b->o.nsizes && rc == 0; i++) {
        char name[32];
        snprintf(name, sizeof name, "bench_%zu", b->o.sizes[i]);
        rc = declare(z, name, b->o.sizes[i] / sizeof(float), "sgd", &z->tables[i]);
    }
    return rc;
}

/* Start a server (with CURVE on if `curve`), connect to it as rank 0 and
 * declare one table per size. */
static int zeps_open_one(bench *b, zeps_side *z, pid_t *server, bool curve)
{
    char cfg[128], logpath[128], ep[64], servers[80];
    const char *tag = curve ? "-curve" : "";
    char extra[512] = "";
    zp_curve_client_keys keys;
    memset(&keys, 0, sizeof keys);
    snprintf(cfg, sizeof cfg, "%s/cluster%s.conf", b->dir, tag);
    snprintf(logpath, sizeof logpath, "%s/server%s.log", b->dir, tag);
    int port = loopback(0);
    int rc = port > 0 ? 0 : ZEPS_EIO;
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    snprintf(servers, sizeof servers, "[ \"%s\" ]", ep);
    if (rc == 0 && curve) {
        rc = make_keys(b, &keys);
        snprintf(extra, sizeof extra,
                 "  curve_server_secret = \"%s/keys/server.key\";\n"
                 "  curve_server_public = \"%s/keys/server.pub\";\n"
                 "  curve_allow_dir = \"%s/allow\";\n",
                 b->dir, b->dir, b->dir);
    }
    if (rc == 0 && b->o.shm && !curve)
        snprintf(extra, sizeof extra, "  transport = \"auto\";\n");
    if (rc == 0)
        rc = zp_ctl_bench_zeps_write_conf(b, cfg, servers, extra);
    if (rc == 0)
        rc = zp_ctl_bench_zeps_spawn(server, cfg, logpath, -1);
    if (rc == 0)
        rc = server_wait_ready(server, port);
    if (rc == 0)
        rc = zp_ctl_bench_zeps_connect(b, z, ep, curve ? &keys : NULL);
    explicit_bzero(&keys, sizeof keys);
    if (rc != 0 && !z->c) {
        fprintf(stderr, "bench: the server's log is %s (kept)\n", logpath);
        b->o.keep = true;
    }
    return rc;
}

/* The plain server and client, the two memory probes, and with --curve the
 * CURVE server and client. */
int zp_ctl_bench_zeps_open(bench *b)
{
    int rc = zeps_open_one(b, &b->z, &b->server, false);
    uint32_t t;
    if (rc == 0)
        rc = declare(&b->z, "mem_sgd", MEM_LEN, "sgd", &t);
    if (rc == 0)
        rc = declare(&b->z, "mem_adam", MEM_LEN, "adam", &t);
    if (rc == 0)
        rc = read_memory(b);
    if (rc == 0 && b->o.curve)
        rc = zeps_open_one(b, &b->zc, &b->server_curve, true);
    return rc;
}

void zp_ctl_bench_zeps_close(bench *b)
{
    zeps_client_destroy(&b->z.c);
    zeps_client_destroy(&b->zc.c);
    stop_child(&b->server, SIGTERM, "zeps-server");
    stop_child(&b->server_curve, SIGTERM, "zeps-server (CURVE)");
}

int zp_ctl_bench_zeps_apply(int reps)
{
    char exe[PATH_MAX + 16], nreps[16];
    zp_zepsctl_bindir(exe, PATH_MAX);
    strcat(exe, "/zeps-server");
    if (exe[0] != '/' || access(exe, X_OK) != 0)
        snprintf(exe, sizeof exe, "zeps-server");
    snprintf(nreps, sizeof nreps, "%d", reps);
    zp_spawn_opts so = {.log_fd = -1, .flags = ZP_SPAWN_PATH};
    pid_t pid = zp_spawn_start((char *[]){exe, "--bench-apply", nreps, NULL}, &so);
    int status = 0;
    if (pid <= 0 || zp_spawn_wait(pid, -1, &status) != 1 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench: %s --bench-apply failed\n", exe);
        return ZEPS_EIO;
    }
    return 0;
}
