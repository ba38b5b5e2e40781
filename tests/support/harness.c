/*
 * harness.c - see harness.h.
 */
#include "harness.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "config.h"
#include "curve.h"
#include "freeport.h"
#include "spawn.h"
#include "wire.h"
#include "scratch.h"

int zt_free_port(void)
{
    return zp_freeport_pick();
}

const char *zt_bin(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("ZEPS_BINDIR");
    snprintf(buf, len, "%s/%s", dir ? dir : ".", name);
    return buf;
}

pid_t zt_spawn(const char *path, char *const argv[], const char *log)
{
    zp_spawn_opts o = {.log = log, .log_fd = -1, .deathsig = SIGTERM};
    (void)path; /* argv[0] is the program (every caller passes path there) */
    return zp_spawn_start(argv, &o);
}

int zt_wait(pid_t pid, double timeout_s)
{
    int st;
    int rc = zp_spawn_wait(pid, timeout_s, &st);
    if (rc == 1)
        return st;
    if (rc == 0)
        zp_spawn_stop(pid, SIGKILL, 0, NULL);
    return -1;
}

/* Write text with every "@DIR@" replaced by dir. */
static void put_expanded(FILE *f, const char *text, const char *dir)
{
    for (const char *p = text; p && *p;) {
        const char *at = strstr(p, "@DIR@");
        if (!at) {
            fputs(p, f);
            break;
        }
        fwrite(p, 1, (size_t)(at - p), f);
        fputs(dir, f);
        p = at + 5;
    }
}

/* The CURVE client keys of c's cluster file into *k; false if it sets
 * none (a plain cluster). Its transport and segment size go into *opt. */
static bool curve_keys(const zt_cluster *c, zp_curve_client_keys *k, zeps_options *opt)
{
    zp_config *cfg = malloc(sizeof(*cfg));
    char err[512];
    bool loaded = zp_config_load(cfg, c->conf, err, sizeof(err)) == 0;
    bool on = loaded && cfg->curve_client_secret[0] &&
              zp_curve_load_client(cfg, k, err, sizeof(err)) == 0;
    if (loaded && strcmp(cfg->transport, "auto") == 0) {
        opt->transport = ZEPS_TRANSPORT_AUTO;
        opt->shm_segment_bytes = cfg->shm_area_bytes;
    }
    free(cfg);
    return on;
}

zeps_client *zt_client_opts(const zt_cluster *c, uint32_t rank, zeps_options *opt)
{
    const char *eps[ZT_MAX_SERVERS];
    for (int k = 0; k < c->nservers; k++)
        eps[k] = c->endpoints[k];
    zp_curve_client_keys keys;
    if (curve_keys(c, &keys, opt)) {
        opt->curve_server_key = keys.server_public;
        opt->curve_public_key = keys.client_public;
        opt->curve_secret_key = keys.client_secret;
    }
    const char *reps[ZT_MAX_SERVERS * 2];
    for (int k = 0; k < c->nservers && c->replicas == 2; k++)
        for (int r = 0; r < 2; r++)
            reps[k * 2 + r] = c->replica_endpoints[k][r];
    zeps_client *cl = NULL;
    int rc = c->replicas == 2 ? zeps_client_new_replicas(&cl, reps, c->nservers, 2, rank, opt)
                              : zeps_client_new_endpoints(&cl, eps, c->nservers, rank, opt);
    if (rc != 0)
        cl = NULL;
    opt->curve_server_key = opt->curve_public_key = opt->curve_secret_key = NULL;
    return cl;
}

static int wait_ready(const zt_cluster *c)
{
    zeps_options opt = {.request_timeout_ms = 200, .hello_timeout_ms = 10000};
    zeps_client *probe = zt_client_opts(c, ZEPS_RANK_TOOL, &opt);
    if (!probe)
        return -1;
    zeps_client_destroy(&probe);
    return 0;
}

/* Wait until shard k alone answers a HELLO (a raw one: the client library
 * wants every shard). */
static int wait_one(const zt_cluster *c, int k)
{
    void *ctx = zmq_ctx_new();
    int rc = -1;
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__HELLO;
    h.rank = ZEPS_RANK_TOOL;
    uint8_t buf[128];
    size_t len = zeps__header__pack(&h, buf);
    /* 30 s: a shard restoring a snapshot (reads, a fallback, the pin's
     * fsyncs) on a loaded machine has taken more than 10 */
    for (int attempt = 0; attempt < 150 && rc != 0; attempt++) {
        void *s = zt_raw_socket(ctx, c, k);
        zmq_send(s, buf, len, 0);
        zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 200) == 1)
            rc = 0;
        zmq_close(s);
    }
    zmq_ctx_term(ctx);
    return rc;
}

int zt_server_start(zt_cluster *c, int k)
{
    char bin[512], shard[16], log[400];
    zt_bin("zeps-server", bin, sizeof(bin));
    snprintf(shard, sizeof(shard), "%d", k);
    snprintf(log, sizeof(log), "%s/server-%d.log", c->dir, k);
    char *argv[] = {bin, "--config", c->conf, "--shard", shard, NULL};
    c->pids[k] = zt_spawn(bin, argv, log);
    return c->pids[k] > 0 ? wait_one(c, k) : -1;
}

int zt_server_join(zt_cluster *c, int k, const char *endpoint)
{
    if (k >= ZT_MAX_SERVERS)
        return -1;
    char bin[512], shard[16], log[400];
    zt_bin("zeps-server", bin, sizeof(bin));
    snprintf(shard, sizeof(shard), "%d", k);
    snprintf(log, sizeof(log), "%s/server-%d.log", c->dir, k);
    const char *pat = strstr(endpoint, "%d"); /* the index put in, as zeps-server does */
    if (pat)
        snprintf(c->endpoints[k], sizeof(c->endpoints[k]), "%.*s%d%s", (int)(pat - endpoint),
                 endpoint, k, pat + 2);
    else
        snprintf(c->endpoints[k], sizeof(c->endpoints[k]), "%s", endpoint);
    char *argv[] = {bin, "--config", c->conf, "--shard", shard, "--join", (char *)endpoint, NULL};
    c->pids[k] = zt_spawn(bin, argv, log); /* not in nservers: clients know the file's */
    return c->pids[k] > 0 ? wait_one(c, k) : -1;
}

int zt_server_kill(zt_cluster *c, int k, int sig)
{
    if (c->pids[k] <= 0)
        return -1;
    kill(c->pids[k], sig);
    int st = zt_wait(c->pids[k], 10.0);
    c->pids[k] = 0;
    return st;
}

int zt_cluster_quiet(const zt_cluster *c, double timeout_s)
{
    char cmd[512];
    /* [-]: the pattern must not match this shell's own command line */
    snprintf(cmd, sizeof(cmd), "pgrep -f -- '[-]-config %s' >/dev/null", c->conf);
    for (double t = 0; t < timeout_s; t += 0.05) {
        int st = system(cmd);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 1) /* pgrep: nothing matched */
            return 1;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int cluster_start(zt_cluster *c, int nservers, int nworkers, const char *consistency,
                         const char *extra, const char *training, int traced)
{
    assert(nservers >= 1 && nservers <= ZT_MAX_SERVERS); /* endpoints[] and pids[] */
    memset(c, 0, sizeof(*c));
    if (zt_scratch_dir(c->dir, sizeof(c->dir), "cluster") != 0) /* short: ipc paths live here */
        return -1;
    c->nservers = nservers;
    c->nworkers = nworkers;
    snprintf(c->conf, sizeof(c->conf), "%s/cluster.conf", c->dir);
    FILE *f = fopen(c->conf, "w");
    if (!f)
        return -1;
    fprintf(f, "cluster = {\n  servers = [");
    for (int k = 0; k < nservers; k++) {
        snprintf(c->endpoints[k], sizeof(c->endpoints[k]), "ipc://%s/shard-%d", c->dir, k);
        fprintf(f, "%s\"%s\"", k ? ", " : "", c->endpoints[k]);
    }
    fprintf(f, "];\n  workers = %d;\n  consistency = \"%s\";\n", nworkers, consistency);
    put_expanded(f, extra, c->dir);
    fprintf(f, "\n");
    if (traced)
        fprintf(f, "  trace_dir = \"%s\";\n", c->dir);
    fprintf(f, "};\n");
    if (training) {
        fprintf(f, "training = {\n");
        put_expanded(f, training, c->dir);
        fprintf(f, "\n};\n");
    }
    fclose(f);

    for (int k = 0; k < nservers; k++) {
        char bin[512], shard[16], log[400];
        zt_bin("zeps-server", bin, sizeof(bin));
        snprintf(shard, sizeof(shard), "%d", k);
        snprintf(log, sizeof(log), "%s/server-%d.log", c->dir, k);
        char *argv[] = {bin, "--config", c->conf, "--shard", shard, NULL};
        c->pids[k] = zt_spawn(bin, argv, log);
    }
    return wait_ready(c);
}

int zt_cluster_start(zt_cluster *c, int nservers, int nworkers, const char *consistency,
                     const char *extra, const char *training)
{
    return cluster_start(c, nservers, nworkers, consistency, extra, training, 0);
}

int zt_cluster_start_traced(zt_cluster *c, int nservers, int nworkers, const char *consistency,
                            const char *extra)
{
    return cluster_start(c, nservers, nworkers, consistency, extra, NULL, 1);
}

int zt_cluster_stop(zt_cluster *c)
{
    int bad = 0;
    for (int k = 0; k < ZT_MAX_SERVERS; k++) /* shards that joined (zt_server_join) too */
        if (c->pids[k] > 0)
            kill(c->pids[k], SIGTERM);
    for (int k = 0; k < ZT_MAX_SERVERS; k++) {
        if (c->pids[k] <= 0)
            continue;
        int st = zt_wait(c->pids[k], 10.0);
        if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
        c->pids[k] = 0;
    }
    if (!getenv("ZEPS_TEST_KEEP")) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        if (system(cmd) != 0)
            bad++;
    }
    return bad;
}

zeps_client *zt_client(const zt_cluster *c, uint32_t rank)
{
    zeps_options opt = {.request_timeout_ms = 1000, .hello_timeout_ms = 10000};
    return zt_client_opts(c, rank, &opt);
}

zeps_client *zt_client_replacing(const zt_cluster *c, uint32_t rank)
{
    zeps_client *z = NULL;
    for (int i = 0; i < 3 && !z; i++) /* each asks again for hello_timeout_ms while refused */
        z = zt_client(c, rank);
    return z;
}

Zeps__ShardStats *zt_stats(zeps_client *c, int k)
{
    void *buf;
    size_t len;
    if (zeps_stats_raw(c, k, &buf, &len) != 0)
        return NULL;
    Zeps__ShardStats *st = zeps__shard_stats__unpack(NULL, len, buf);
    free(buf);
    return st;
}

zeps_client_stats zt_client_stats(const zeps_client *c)
{
    zeps_client_stats st;
    zeps_client_get_stats(c, &st);
    return st;
}

void *zt_raw_socket(void *zctx, const zt_cluster *c, int k)
{
    void *s = zmq_socket(zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zp_curve_client_keys keys;
    zeps_options unused = {0};
    if (curve_keys(c, &keys, &unused))
        zp_curve_apply_client(s, keys.server_public, keys.client_public, keys.client_secret);
    zmq_connect(s, c->endpoints[k]);
    return s;
}

Zeps__Header *zt_raw_request(void *raw, const Zeps__Header *h, const void *payload, size_t len)
{
    uint8_t buf[4096];
    size_t hl = zeps__header__pack(h, buf);
    if (zmq_send(raw, buf, hl, payload ? ZMQ_SNDMORE : 0) < 0)
        return NULL;
    if (payload && zmq_send(raw, payload, len, 0) < 0)
        return NULL;
    zmq_pollitem_t it = {.socket = raw, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 5000) != 1)
        return NULL;
    zp_frames m;
    if (zp_wire_frames_recv(raw, &m, 0) != 0)
        return NULL;
    Zeps__Header *rep = zp_wire_unpack_header(&m.f[0]);
    zp_wire_frames_close(&m);
    return rep;
}

int zt_log_has(const zt_cluster *c, int k, const char *needle)
{
    char path[400], line[1024];
    snprintf(path, sizeof(path), "%s/server-%d.log", c->dir, k);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int found = 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

int zt_wait_log(const zt_cluster *c, int k, const char *needle)
{
    for (int i = 0; i < 200; i++) {
        if (zt_log_has(c, k, needle))
            return 1;
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
