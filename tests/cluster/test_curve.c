/*
 * test_curve.c - CurveZMQ transport security with real processes: key
 * files (zepsctl keygen's format, modes, bad text), the refusal to bind a
 * non-loopback address without keys, a client whose key is not in the
 * allow-list (refused, counted, gets and changes nothing), a client whose
 * key is (trains), and what crosses the wire: a TCP relay (tests/support/
 * relay.c) between client and server records every byte, so the test sees a
 * plain run carry a known float pattern in clear and a CURVE run not.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "check_main.h"
#include "scratch.h"
#include "config.h"
#include "curve.h"
#include "harness.h"
#include "now.h"
#include "relay.h"
#include "wire.h"
#include "zeps.h"

#define N 256 /* table elements */

static char dir[128];

/* ---- helpers ------------------------------------------------------------ */

static __attribute__((format(printf, 1, 2))) void sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    ck_assert_msg(system(cmd) == 0, "command failed: %s", cmd);
}

/* Keys: server, w0 (in the allow-list), w1 (not). */
static void make_keys(void)
{
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "curve"), 0);
    char keys[200], err[512];
    snprintf(keys, sizeof(keys), "%s/keys", dir);
    ck_assert_int_eq(mkdir(keys, 0700), 0);
    const char *names[] = {"server", "w0", "w1"};
    for (int i = 0; i < 3; i++)
        ck_assert_msg(zp_curve_keygen(keys, names[i], NULL, err, sizeof(err)) == 0, "%s", err);
    sh("mkdir %s/allow && cp %s/keys/w0.pub %s/allow/", dir, dir, dir);
}

static void cleanup(void)
{
    if (dir[0] && !getenv("ZEPS_TEST_KEEP"))
        sh("rm -rf '%s'", dir);
}

/* A cluster file: clients connect to `server_ep`, the shard binds `bind_ep`;
 * curve: server keys and allow-list; client: "w0", "w1" or NULL (none). */
static void write_conf(const char *path, const char *server_ep, const char *bind_ep, int curve,
                       const char *client, const char *extra)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "cluster = {\n  servers = [\"%s\"];\n  binds = [\"%s\"];\n  workers = 1;\n"
            "  consistency = \"async\";\n  request_timeout_ms = 1000;\n  max_retries = 5;\n"
            "  hello_timeout_ms = 5000;\n",
            server_ep, bind_ep);
    if (curve)
        fprintf(f,
                "  curve_server_secret = \"%s/keys/server.key\";\n"
                "  curve_server_public = \"%s/keys/server.pub\";\n"
                "  curve_allow_dir = \"%s/allow\";\n",
                dir, dir, dir);
    if (client)
        fprintf(f,
                "  curve_client_secret = \"%s/keys/%s.key\";\n"
                "  curve_client_public = \"%s/keys/%s.pub\";\n",
                dir, client, dir, client);
    fprintf(f,
            "%s};\ntraining = {\n  model = \"quadratic\";\n  iterations = 40;\n  dim = 50;\n"
            "  optimizer = \"sgd\";\n  lr = 0.01;\n};\n",
            extra ? extra : "");
    fclose(f);
}

static int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* Start shard 0 of `conf`; wait (10 s) until its log says it serves, or
 * until it exits (returns -pid's exit status - 1 then, and *pid = 0). */
static int server_start(const char *conf, const char *log, pid_t *pid)
{
    char bin[512];
    zt_bin("zeps-server", bin, sizeof(bin));
    char *argv[] = {bin, "--config", (char *)conf, "--shard", "0", NULL};
    *pid = zt_spawn(bin, argv, log);
    ck_assert_int_gt(*pid, 0);
    struct timespec ts = {0, 10000000};
    for (int i = 0; i < 1000; i++) {
        int st;
        if (waitpid(*pid, &st, WNOHANG) == *pid) {
            *pid = 0;
            return -(WIFEXITED(st) ? WEXITSTATUS(st) : 128) - 1;
        }
        if (file_has(log, "serving on"))
            return 0;
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("zeps-server did not start within 10 s (log %s)", log);
    return -1;
}

static void server_stop(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        int st = zt_wait(*pid, 10.0);
        ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "zeps-server did not stop cleanly");
    }
    *pid = 0;
}

static void read_key(const char *name, char *out)
{
    char path[256], err[512];
    snprintf(path, sizeof(path), "%s/keys/%s", dir, name);
    ck_assert_msg(zp_curve_read_key(path, strstr(name, ".key") != NULL, out, err, sizeof(err)) == 0,
                  "%s", err);
}

/* A client as `who` ("w0", "w1", or NULL for a plain one) of the shard at ep. */
static int client_as(const char *who, const char *ep, int timeout_ms, int retries,
                     zeps_client **out)
{
    char spub[41], cpub[41], csec[41], name[32];
    zeps_options opt = {.request_timeout_ms = timeout_ms,
                        .max_retries = retries,
                        .hello_timeout_ms = timeout_ms * (retries + 1)};
    if (who) {
        read_key("server.pub", spub);
        snprintf(name, sizeof(name), "%s.pub", who);
        read_key(name, cpub);
        snprintf(name, sizeof(name), "%s.key", who);
        read_key(name, csec);
        opt.curve_server_key = spub;
        opt.curve_public_key = cpub;
        opt.curve_secret_key = csec;
    }
    const char *eps[] = {ep};
    return zeps_client_new_endpoints(out, eps, 1, 0, &opt);
}

static uint32_t declare_x(zeps_client *c)
{
    zeps_table_spec sp = {.name = "x", .length = N, .optimizer = "sgd", .lr = 1.0};
    uint32_t t;
    ck_assert_int_eq(zeps_declare(c, &sp, &t), 0);
    return t;
}

/* ---- key files ---------------------------------------------------------- */

START_TEST(test_keygen_files)
{
    make_keys();
    char path[256], key[41], err[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/keys/w0.key", dir);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0600);
    snprintf(path, sizeof(path), "%s/keys/w0.pub", dir);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0644);
    ck_assert_uint_eq(st.st_size, 41);
    /* the pair belongs together: the public key derives from the secret */
    char sec[41], pub[41], derived[41];
    read_key("w0.key", sec);
    read_key("w0.pub", pub);
    ck_assert_int_eq(zmq_curve_public(derived, sec), 0);
    ck_assert_str_eq(derived, pub);
    /* never overwrites; bad names are refused */
    snprintf(path, sizeof(path), "%s/keys", dir);
    ck_assert_int_eq(zp_curve_keygen(path, "w0", key, err, sizeof(err)), ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, "already exists"));
    ck_assert_int_eq(zp_curve_keygen(path, "../evil", key, err, sizeof(err)), ZEPS_EINVAL);
    /* zepsctl keygen prints the public key it wrote */
    sh("%s/zepsctl keygen --out %s/cli --name node-1 > %s/cli.out 2>/dev/null",
       getenv("ZEPS_BINDIR"), dir, dir);
    snprintf(path, sizeof(path), "%s/cli/node-1.pub", dir);
    ck_assert_int_eq(zp_curve_read_key(path, false, key, err, sizeof(err)), 0);
    snprintf(path, sizeof(path), "%s/cli.out", dir);
    ck_assert(file_has(path, key));
    cleanup();
}
END_TEST

START_TEST(test_key_file_errors)
{
    make_keys();
    char path[256], key[41], err[512];
    /* a secret key others can read is refused, naming the file and mode */
    snprintf(path, sizeof(path), "%s/keys/w0.key", dir);
    ck_assert_int_eq(chmod(path, 0644), 0);
    ck_assert_int_eq(zp_curve_read_key(path, true, key, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, path) && strstr(err, "0644") && strstr(err, "too open"), "%s", err);
    ck_assert_int_eq(chmod(path, 0660), 0); /* group-writable */
    ck_assert_int_eq(zp_curve_read_key(path, true, key, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_int_eq(chmod(path, 0604), 0); /* others may read */
    ck_assert_int_eq(zp_curve_read_key(path, true, key, err, sizeof(err)), ZEPS_ECONFIG);
    /* group read is allowed: a Kubernetes Secret mounted 0440 with an fsGroup */
    ck_assert_int_eq(chmod(path, 0440), 0);
    ck_assert_int_eq(zp_curve_read_key(path, true, key, err, sizeof(err)), 0);
    ck_assert_int_eq(chmod(path, 0400), 0);
    ck_assert_int_eq(zp_curve_read_key(path, true, key, err, sizeof(err)), 0);
    /* a public key may be world-readable */
    snprintf(path, sizeof(path), "%s/keys/w0.pub", dir);
    ck_assert_int_eq(zp_curve_read_key(path, false, key, err, sizeof(err)), 0);
    /* text that is not one Z85 key */
    const char *bad[] = {"hello\n", "0123456789012345678901234567890123456789X\n",
                         "012345678901234567890123456789012345678\"\n",
                         "0123456789012345678901234567890123456789 extra\n", ""};
    snprintf(path, sizeof(path), "%s/bad.pub", dir);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        ck_assert_int_eq(zp_curve_read_key(path, false, key, err, sizeof(err)), ZEPS_ECONFIG);
        ck_assert_msg(strstr(err, path) && strstr(err, "Z85"), "%s", err);
    }
    /* missing */
    snprintf(path, sizeof(path), "%s/nope.key", dir);
    ck_assert_int_eq(zp_curve_read_key(path, true, key, err, sizeof(err)), ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, path));
    /* a client public key that is not its secret key's */
    zp_config cfg;
    zp_config_keys_defaults(&cfg);
    snprintf(cfg.curve_server_public, sizeof(cfg.curve_server_public), "%s/keys/server.pub", dir);
    snprintf(cfg.curve_client_secret, sizeof(cfg.curve_client_secret), "%s/keys/w0.key", dir);
    snprintf(cfg.curve_client_public, sizeof(cfg.curve_client_public), "%s/keys/w1.pub", dir);
    zp_curve_client_keys k;
    ck_assert_int_eq(zp_curve_load_client(&cfg, &k, err, sizeof(err)), ZEPS_ECONFIG);
    ck_assert_msg(strstr(err, "does not belong"), "%s", err);
    /* half a client configuration */
    cfg.curve_server_public[0] = '\0';
    ck_assert_int_eq(zp_curve_load_client(&cfg, &k, err, sizeof(err)), ZEPS_ECONFIG);
    cleanup();
}
END_TEST

START_TEST(test_loopback)
{
    const char *yes[] = {"tcp://127.0.0.1:1",     "tcp://127.8.9.10:2", "tcp://localhost:3",
                         "tcp://[::1]:4",         "ipc:///tmp/x",       "inproc://a",
                         "tcp://eth0;127.0.0.1:5"};
    const char *no[] = {"tcp://*:1",           "tcp://0.0.0.0:2",       "tcp://10.0.0.1:3",
                        "tcp://[::]:4",        "tcp://eth0:5",          "tcp://128.0.0.1:6",
                        "tcp://example.com:7", "tcp://localhost.evil:8"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        ck_assert_msg(zp_curve_is_loopback(yes[i]), "%s", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        ck_assert_msg(!zp_curve_is_loopback(no[i]), "%s", no[i]);
}
END_TEST

/* ---- the server's start-up checks --------------------------------------- */

START_TEST(test_bind_refused_without_keys)
{
    make_keys();
    char conf[256], log[256], ep[64], bind[64];
    int port = zt_free_port();
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
    snprintf(bind, sizeof(bind), "tcp://0.0.0.0:%d", port);
    pid_t pid;

    /* wildcard bind, no keys: refused with the reason */
    snprintf(conf, sizeof(conf), "%s/open.conf", dir);
    snprintf(log, sizeof(log), "%s/open.log", dir);
    write_conf(conf, ep, bind, 0, NULL, NULL);
    ck_assert_int_lt(server_start(conf, log, &pid), 0);
    ck_assert_msg(file_has(log, "refusing to bind tcp://0.0.0.0") && file_has(log, "insecure"),
                  "log %s", log);

    /* the same with insecure = true: serves */
    snprintf(conf, sizeof(conf), "%s/insecure.conf", dir);
    snprintf(log, sizeof(log), "%s/insecure.log", dir);
    write_conf(conf, ep, bind, 0, NULL, "  insecure = true;\n");
    ck_assert_int_eq(server_start(conf, log, &pid), 0);
    server_stop(&pid);

    /* with keys: serves, CURVE on */
    snprintf(conf, sizeof(conf), "%s/curve.conf", dir);
    snprintf(log, sizeof(log), "%s/curve.log", dir);
    write_conf(conf, ep, bind, 1, NULL, NULL);
    ck_assert_int_eq(server_start(conf, log, &pid), 0);
    ck_assert(file_has(log, "CURVE on: 1 allowed client key"));
    server_stop(&pid);

    /* a server secret key with a loose mode stops the server, naming it */
    char key[256];
    snprintf(key, sizeof(key), "%s/keys/server.key", dir);
    ck_assert_int_eq(chmod(key, 0604), 0);
    snprintf(log, sizeof(log), "%s/mode.log", dir);
    ck_assert_int_lt(server_start(conf, log, &pid), 0);
    ck_assert_msg(file_has(log, key) && file_has(log, "0604"), "log %s", log);
    ck_assert_int_eq(chmod(key, 0600), 0);

    /* a bad .pub in the allow-list stops it too */
    sh("echo not-a-key > %s/allow/bad.pub", dir);
    snprintf(log, sizeof(log), "%s/allow.log", dir);
    ck_assert_int_lt(server_start(conf, log, &pid), 0);
    ck_assert_msg(file_has(log, "bad.pub") && file_has(log, "Z85"), "log %s", log);
    cleanup();
}
END_TEST

/* ---- who may connect ---------------------------------------------------- */

/* How many times `needle` occurs in the file. */
static int file_count(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    int k = 0;
    for (const char *p = strstr(buf, needle); p; p = strstr(p + 1, needle))
        k++;
    return k;
}

/* Connect `n` raw DEALERs with the unknown key w1 at once (each handshake
 * is one refusal), and close them. */
static void refused_burst(const char *ep, int n)
{
    void *ctx = zmq_ctx_new();
    void *socks[32];
    char spub[41], cpub[41], csec[41];
    read_key("server.pub", spub);
    read_key("w1.pub", cpub);
    read_key("w1.key", csec);
    int zero = 0;
    for (int i = 0; i < n; i++) {
        socks[i] = zmq_socket(ctx, ZMQ_DEALER);
        ck_assert_int_eq(zp_curve_apply_client(socks[i], spub, cpub, csec), 0);
        zmq_setsockopt(socks[i], ZMQ_LINGER, &zero, sizeof(zero));
        ck_assert_int_eq(zmq_connect(socks[i], ep), 0);
    }
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    for (int i = 0; i < n; i++)
        zmq_close(socks[i]);
    zmq_ctx_term(ctx);
}

static uint64_t refusals(zeps_client *c)
{
    Zeps__ShardStats *st = zt_stats(c, 0);
    ck_assert_ptr_nonnull(st);
    uint64_t r = st->curve_refused;
    zeps__shard_stats__free_unpacked(st, NULL);
    return r;
}

/* Raw PUSH and PULL from the unknown key w1 get no reply (and, as the
 * caller checks, change nothing). */
static void raw_unknown_requests(const char *ep)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    char spub[41], cpub[41], csec[41];
    read_key("server.pub", spub);
    read_key("w1.pub", cpub);
    read_key("w1.key", csec);
    ck_assert_int_eq(zp_curve_apply_client(s, spub, cpub, csec), 0);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    ck_assert_int_eq(zmq_connect(s, ep), 0);
    float g[N];
    for (int i = 0; i < N; i++)
        g[i] = -1.0f;
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PUSH;
    h.req_id = 1;
    h.rank = 0;
    h.seq = 1;
    h.table = 0;
    h.count = N;
    uint8_t hb[256];
    size_t hl = zeps__header__pack(&h, hb);
    zmq_send(s, hb, hl, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(s, g, sizeof(g), ZMQ_DONTWAIT);
    h.op = ZEPS__OP__PULL;
    h.req_id = 2;
    h.seq = 2;
    hl = zeps__header__pack(&h, hb);
    zmq_send(s, hb, hl, ZMQ_DONTWAIT);
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    ck_assert_int_eq(zmq_poll(&it, 1, 1500), 0);
    zmq_close(s);
    zmq_ctx_term(ctx);
}

/* The table is untouched, and the shard counted the refusals and logged
 * where they came from. */
static void untouched_and_counted(zeps_client *good, uint32_t t, const char *log)
{
    float x[N];
    ck_assert_int_eq(zeps_pull(good, t, x, 0, N, 0), 0);
    for (int i = 0; i < N; i++)
        ck_assert(x[i] == 0.0f);
    Zeps__ShardStats *st = zt_stats(good, 0);
    ck_assert_ptr_nonnull(st);
    ck_assert(st->curve);
    ck_assert_uint_ge(st->curve_refused, 2);
    ck_assert_uint_ge(st->curve_accepted, 1);
    ck_assert_uint_eq(st->n_tables, 1);
    ck_assert_uint_eq(st->tables[0]->pushes, 0);
    zeps__shard_stats__free_unpacked(st, NULL);
    ck_assert_msg(file_has(log, "refused client key") && file_has(log, "from 127.0.0.1"), "log %s",
                  log);
}

/* A burst of refusals is counted in full but logged at most once a second;
 * the next message says how many went unlogged. */
static void burst_rate_limited(zeps_client *good, const char *ep, const char *log)
{
    sleep(1);
    uint64_t before = refusals(good);
    int lines = file_count(log, "CURVE: refused");
    refused_burst(ep, 20);
    double until = zp_now_s() + 10;
    while (refusals(good) < before + 20 && zp_now_s() < until)
        refused_burst(ep, 1);
    ck_assert_uint_ge(refusals(good), before + 20);
    int burst_lines = file_count(log, "CURVE: refused") - lines;
    ck_assert_msg(burst_lines >= 1 && burst_lines <= 3, "%d log lines for a burst of 20 refusals",
                  burst_lines);
    sleep(1);
    refused_burst(ep, 1);
    until = zp_now_s() + 10;
    while (!file_has(log, "more refused since the last message") && zp_now_s() < until)
        refused_burst(ep, 1);
    ck_assert_msg(file_has(log, "more refused since the last message"), "log %s", log);
}

/* An allowed client key with the wrong server key: no handshake, so it can
 * only time out, and the message says what to check. */
static void wrong_server_key(const char *ep)
{
    char wrong[41], cpub[41], csec[41];
    read_key("w1.pub", wrong);
    read_key("w0.pub", cpub);
    read_key("w0.key", csec);
    zeps_options wo = {.request_timeout_ms = 200, .max_retries = 2, .hello_timeout_ms = 600,
                       .curve_server_key = wrong, .curve_public_key = cpub,
                       .curve_secret_key = csec};
    const char *eps[] = {ep};
    zeps_client *bad = NULL;
    ck_assert_int_eq(zeps_client_new_endpoints(&bad, eps, 1, 0, &wo), ZEPS_ETIMEDOUT);
    ck_assert_ptr_nonnull(strstr(zeps_last_error(NULL), "CURVE handshake failed (no detail"));
}

/* SIGHUP rereads the allow-list: w1 may connect once its key is there. */
static void sighup_allows_w1(pid_t pid, const char *ep, const char *log)
{
    sh("cp %s/keys/w1.pub %s/allow/", dir, dir);
    kill(pid, SIGHUP);
    struct timespec ts = {0, 10000000};
    for (int i = 0; i < 500 && !file_has(log, "allow-list reloaded: 2 allowed client keys"); i++)
        nanosleep(&ts, NULL);
    ck_assert_msg(file_has(log, "allow-list reloaded: 2 allowed client keys"), "log %s", log);
    zeps_client *bad = NULL;
    float x[N];
    ck_assert_int_eq(client_as("w1", ep, 1000, 5, &bad), 0);
    ck_assert_int_eq(zeps_pull(bad, declare_x(bad), x, 0, N, 0), 0);
    zeps_client_destroy(&bad);
}

START_TEST(test_unknown_key_refused)
{
    make_keys();
    char conf[256], log[256], ep[64];
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", zt_free_port());
    snprintf(conf, sizeof(conf), "%s/c.conf", dir);
    snprintf(log, sizeof(log), "%s/server.log", dir);
    write_conf(conf, ep, ep, 1, NULL, NULL);
    pid_t pid;
    ck_assert_int_eq(server_start(conf, log, &pid), 0);

    zeps_client *good = NULL, *bad = NULL;
    ck_assert_int_eq(client_as("w0", ep, 1000, 5, &good), 0);
    uint32_t t = declare_x(good);

    /* an unknown key: HELLO fails within 1 s (the monitor sees the
     * refusal; a timeout would take 6 x 1.5 s) with EREFUSED */
    double t0 = zp_now_s();
    ck_assert_int_eq(client_as("w1", ep, 1500, 5, &bad), ZEPS_EREFUSED);
    ck_assert_double_lt(zp_now_s() - t0, 1.0);
    ck_assert_ptr_null(bad);

    /* a plain (no CURVE) client: refused too; it can only time out */
    ck_assert_int_eq(client_as(NULL, ep, 200, 2, &bad), ZEPS_ETIMEDOUT);

    raw_unknown_requests(ep);
    untouched_and_counted(good, t, log);
    burst_rate_limited(good, ep, log);
    wrong_server_key(ep);
    zeps_client_destroy(&good); /* BYE: w1 may take rank 0 (a live rank is held) */
    sighup_allows_w1(pid, ep, log);
    server_stop(&pid);
    cleanup();
}
END_TEST

/* `prog` --config conf exits 2 saying msg and where, well before hello_timeout_ms (5 s) */
static void refused_at_once(const char *prog, const char *conf, const char *msg)
{
    char cmd[1024], out[256];
    snprintf(out, sizeof(out), "%s/refused.out", dir);
    snprintf(cmd, sizeof(cmd), "%s/%s --config %s > %s 2>&1", getenv("ZEPS_BINDIR"), prog, conf,
             out);
    double t0 = zp_now_s();
    int st = system(cmd), took_ms = (int)((zp_now_s() - t0) * 1000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: status %d, see %s", prog, st, out);
    ck_assert_msg(file_has(out, msg) && file_has(out, "curve_allow_dir"), "%s: see %s", prog, out);
    ck_assert_msg(took_ms < 4000, "%s took %d ms", prog, took_ms);
}

/* zeps-worker with keys from the cluster file: the allowed one trains, the
 * other is refused with a message that says what to do. */
START_TEST(test_worker_with_keys)
{
    make_keys();
    char conf[256], log[256], ep[64], wconf[256], wlog[256], bin[512];
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", zt_free_port());
    snprintf(conf, sizeof(conf), "%s/c.conf", dir);
    snprintf(log, sizeof(log), "%s/server.log", dir);
    write_conf(conf, ep, ep, 1, "w0", NULL);
    pid_t pid;
    ck_assert_int_eq(server_start(conf, log, &pid), 0);
    zt_bin("zeps-worker", bin, sizeof(bin));

    snprintf(wlog, sizeof(wlog), "%s/w0.log", dir);
    char *argv[] = {bin, "--config", conf, "--rank", "0", NULL};
    int st = zt_wait(zt_spawn(bin, argv, wlog), 60.0);
    ck_assert_msg(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker failed, log %s", wlog);
    ck_assert(file_has(wlog, "done: "));

    /* w1, refused: the worker and zepsctl status (all shards or one) say so
     * at once (hello_timeout_ms is 5 s) and exit 2: the operator must act */
    char msg[128], cmd[1024], out[256];
    snprintf(wconf, sizeof(wconf), "%s/w1.conf", dir);
    write_conf(wconf, ep, ep, 1, "w1", NULL);
    snprintf(msg, sizeof(msg), "shard 0 (%s) refused our key", ep);
    const char *progs[] = {"zeps-worker --rank 0", "zepsctl status", "zepsctl status --shard 0"};
    for (int i = 0; i < 3; i++)
        refused_at_once(progs[i], wconf, msg);

    /* zepsctl status with the allowed key shows the refusal count */
    snprintf(out, sizeof(out), "%s/status.out", dir);
    snprintf(cmd, sizeof(cmd), "%s/zepsctl status --config %s > %s 2>&1", getenv("ZEPS_BINDIR"),
             conf, out);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(file_has(out, "CURVE on:") && file_has(out, "refused") &&
                      !file_has(out, " 0 refused"),
                  "see %s", out);
    server_stop(&pid);
    cleanup();
}
END_TEST

/* ---- what crosses the wire ---------------------------------------------- */

/* Floats no message could contain by accident. */
static float pattern(int i)
{
    static const float p[4] = {1234.5678f, -8765.4321f, 31415926.0f, 0.00271828f};
    return p[i % 4];
}

/* Run a shard (CURVE or not) behind a relay; push -pattern into x (sgd,
 * lr 1: x becomes pattern) and pull it back. Returns the bytes recorded and
 * whether the pattern (as pushed or as pulled) was among them. */
static size_t wire_run(int curve, int *seen_push, int *seen_pull)
{
    char conf[256], log[256], ep[64], relay_ep[64];
    int port = zt_free_port();
    zt_relay r;
    int rport = zt_relay_start(&r, port);
    snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", port);
    snprintf(relay_ep, sizeof(relay_ep), "tcp://127.0.0.1:%d", rport);
    snprintf(conf, sizeof(conf), "%s/wire-%d.conf", dir, curve);
    snprintf(log, sizeof(log), "%s/wire-%d.log", dir, curve);
    write_conf(conf, relay_ep, ep, curve, NULL, NULL);
    pid_t pid;
    ck_assert_int_eq(server_start(conf, log, &pid), 0);

    zeps_client *c = NULL;
    ck_assert_int_eq(client_as(curve ? "w0" : NULL, relay_ep, 2000, 5, &c), 0);
    uint32_t t = declare_x(c);
    float g[N], x[N];
    for (int i = 0; i < N; i++)
        g[i] = -pattern(i);
    ck_assert_int_eq(zeps_push(c, t, g, 0, N, 0), 0);
    ck_assert_int_eq(zeps_pull(c, t, x, 0, N, 0), 0);
    for (int i = 0; i < N; i++)
        ck_assert(x[i] == pattern(i)); /* it went through, and was applied */
    zeps_client_destroy(&c);
    server_stop(&pid);

    float want_push[4], want_pull[4];
    for (int i = 0; i < 4; i++) {
        want_push[i] = -pattern(i);
        want_pull[i] = pattern(i);
    }
    size_t len = zt_relay_bytes(&r);
    *seen_push = zt_relay_saw(&r, want_push, sizeof(want_push));
    *seen_pull = zt_relay_saw(&r, want_pull, sizeof(want_pull));
    zt_relay_stop(&r);
    return len;
}

START_TEST(test_wire_capture)
{
    make_keys();
    int push, pull;
    /* plain: the values are on the wire in clear (so the check can fail) */
    size_t n = wire_run(0, &push, &pull);
    ck_assert_uint_gt(n, 2 * N * sizeof(float));
    ck_assert_msg(push && pull, "plain run: pattern not found in %zu bytes", n);
    /* CURVE: the same exchange, nothing readable */
    n = wire_run(1, &push, &pull);
    ck_assert_uint_gt(n, 2 * N * sizeof(float));
    ck_assert_msg(!push && !pull, "CURVE run: pattern found in clear (push %d, pull %d)", push,
                  pull);
    cleanup();
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("curve");
    TCase *tc = tcase_create("keys");
    tcase_add_test(tc, test_keygen_files);
    tcase_add_test(tc, test_key_file_errors);
    tcase_add_test(tc, test_loopback);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    tc = tcase_create("servers");
    tcase_add_test(tc, test_bind_refused_without_keys);
    tcase_add_test(tc, test_unknown_key_refused);
    tcase_add_test(tc, test_worker_with_keys);
    tcase_add_test(tc, test_wire_capture);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return zt_run_suite(suite());
}
