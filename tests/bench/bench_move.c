/*
 * bench_move.c - what a live move of a slot set costs (docs/elastic.md,
 * "Cost"): rows and bytes moved per second beside raw ZeroMQ loopback in
 * the same run, and how long pushes to the moving slots stall.
 *
 * Per repetition: three shards (async) on ipc:// endpoints; --rows rows
 * of one sparse table (dim --dim, adagrad: one state float per value)
 * pushed in; a worker process pushes 64 ids of the moving slots in a loop
 * and records each push's start and end; after a baseline second,
 * `zepsctl shards move` takes every slot of shard 0 to shard 2. Prints
 * zepsctl's summary, the longest and the p99 push before and during the
 * move, and the same bytes sent as pages of the same size over a raw
 * ZeroMQ DEALER -> ROUTER ipc:// pair with a one-byte answer per page
 * (the reference: one hop; a move's page takes two, source -> tool ->
 * target).
 *
 *   bench_move [--rows N] [--dim D] [--reps R] [--page P]
 *
 * --page: rows per page (zepsctl shards move --page; default: zepsctl's).
 *
 * Needs ZEPS_BINDIR (zeps-server, zepsctl), like the tests.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "harness.h"
#include "slotmap.h"
#include "zeps.h"

#define MAXP (1 << 20)

typedef struct shared {
    volatile int stop;
    volatile long n;
    double t[MAXP][2]; /* each push's start and end, s */
} shared;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint32_t declare(zeps_client *c, uint32_t dim)
{
    zeps_sparse_spec spec = {
        .name = "emb", .dim = dim, .optimizer = "adagrad", .lr = 0.1, .init = "zeros", .seed = 1};
    uint32_t t = 0;
    if (zeps_declare_sparse(c, &spec, &t) != 0)
        exit(1);
    return t;
}

/* The worker: 64 ids of shard 0 pushed until told to stop. */
static void pusher(const zt_cluster *cl, shared *sh, uint32_t dim)
{
    zeps_client *c = zt_client(cl, 1);
    if (!c)
        _exit(1);
    uint32_t t = declare(c, dim);
    zp_slotmap *d = NULL;
    zp_slotmap_new_default(&d, 3);
    uint64_t ids[64];
    for (uint64_t x = 1, k = 0; k < 64; x++)
        if (zp_slotmap_owner(d, x) == 0)
            ids[k++] = x;
    float *g = calloc(64 * dim, sizeof(float));
    for (long i = 0; !sh->stop && i < MAXP; i++) {
        sh->t[i][0] = now_s();
        if (zeps_spush(c, t, ids, 64, g, 0) != 0) {
            fprintf(stderr, "push failed: %s\n", zeps_last_error(c));
            _exit(1);
        }
        sh->t[i][1] = now_s();
        sh->n = i + 1;
    }
    zeps_client_destroy(&c);
    _exit(0);
}

/* The pushes that began in [from, to): their longest and p99, ms. */
static void stalls(const shared *sh, double from, double to, double *max, double *p99)
{
    double *v = malloc(sizeof(double) * (size_t)(sh->n + 1));
    size_t n = 0;
    for (long i = 0; i < sh->n; i++)
        if (sh->t[i][0] >= from && sh->t[i][0] < to)
            v[n++] = (sh->t[i][1] - sh->t[i][0]) * 1e3;
    qsort(v, n, sizeof(double), cmp);
    *max = n ? v[n - 1] : 0;
    *p99 = n ? v[(size_t)(0.99 * (double)(n - 1))] : 0;
    free(v);
}

typedef struct echo_arg {
    void *sock;
    long pages;
} echo_arg;

static void *echo(void *arg)
{
    echo_arg *e = arg;
    for (long i = 0; i < e->pages; i++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        zmq_msg_recv(&id, e->sock, 0);
        zmq_msg_recv(&body, e->sock, 0);
        zmq_msg_send(&id, e->sock, ZMQ_SNDMORE);
        zmq_send(e->sock, "k", 1, 0);
        zmq_msg_close(&body);
    }
    return NULL;
}

/* Raw ZeroMQ: `bytes` as pages of `page` bytes, one answer each; MB/s. */
static double raw_mbps(const char *dir, double bytes, size_t page)
{
    void *ctx = zmq_ctx_new(), *r = zmq_socket(ctx, ZMQ_ROUTER), *d = zmq_socket(ctx, ZMQ_DEALER);
    char ep[400];
    snprintf(ep, sizeof(ep), "ipc://%s/raw", dir);
    zmq_bind(r, ep);
    zmq_connect(d, ep);
    long pages = (long)(bytes / (double)page) + 1;
    echo_arg e = {r, pages};
    pthread_t th;
    pthread_create(&th, NULL, echo, &e);
    char *buf = calloc(page, 1), ack[4];
    double t0 = now_s();
    for (long i = 0; i < pages; i++) {
        zmq_send(d, buf, page, 0);
        zmq_recv(d, ack, sizeof(ack), 0);
    }
    double secs = now_s() - t0;
    pthread_join(th, NULL);
    free(buf);
    zmq_close(d);
    zmq_close(r);
    zmq_ctx_term(ctx);
    return (double)pages * (double)page / 1e6 / secs;
}

static int one_rep(uint64_t rows, uint32_t dim, const char *page_rows, shared *sh)
{
    zt_cluster cl;
    if (zt_cluster_start(&cl, 3, 2, "async", NULL, NULL) != 0)
        return -1;
    memset(sh, 0, sizeof(*sh));
    pid_t pid = fork();
    if (pid == 0)
        pusher(&cl, sh, dim);
    zeps_client *c = zt_client(&cl, 0);
    uint32_t t = declare(c, dim);
    enum { CHUNK = 8192 };
    uint64_t *ids = malloc(CHUNK * sizeof(uint64_t));
    float *g = malloc(sizeof(float) * CHUNK * dim);
    for (size_t i = 0; i < (size_t)CHUNK * dim; i++)
        g[i] = 0.01f * (float)(i % 7);
    for (uint64_t at = 0; at < rows; at += CHUNK) {
        size_t k = rows - at < CHUNK ? (size_t)(rows - at) : CHUNK;
        for (size_t i = 0; i < k; i++)
            ids[i] = (at + i + 1) * 0x9e3779b97f4a7c15ull;
        if (zeps_spush(c, t, ids, k, g, 0) != 0)
            return -1;
    }
    double b0 = now_s();
    sleep(1);
    char log[400], bin[512];
    snprintf(log, sizeof(log), "%s/move.log", cl.dir);
    zt_bin("zepsctl", bin, sizeof(bin));
    char *argv[] = {bin,    "shards", "move",    "--config", cl.conf,  "--from",          "0",
                    "--to", "2",      "--slots", "0-4094",   "--page", (char *)page_rows, NULL};
    if (!page_rows)
        argv[11] = NULL;
    double m0 = now_s();
    int st = zt_wait(zt_spawn(bin, argv, log), 600);
    double m1 = now_s();
    sh->stop = 1;
    waitpid(pid, NULL, 0);
    char line[512], summary[512] = "";
    FILE *f = fopen(log, "r");
    while (f && fgets(line, sizeof(line), f)) {
        printf("  | %s", line);
        if (strncmp(line, "summary:", 8) == 0)
            snprintf(summary, sizeof(summary), "%s", line);
    }
    if (f)
        fclose(f);
    unsigned long long mrows = 0, mbytes = 0, rounds = 0;
    double secs = 0, cut = 0;
    if (st != 0 ||
        sscanf(summary, "summary: rows=%llu bytes=%llu rounds=%llu seconds=%lf cutover_ms=%lf",
               &mrows, &mbytes, &rounds, &secs, &cut) != 5) {
        fprintf(stderr, "the move failed (status %d); see %s\n", st, log);
        return -1;
    }
    double bmax, bp99, dmax, dp99;
    stalls(sh, b0, m0, &bmax, &bp99);
    stalls(sh, m0, m1, &dmax, &dp99);
    size_t page =
        (size_t)(mbytes / (mrows ? mrows : 1)) * (page_rows ? strtoull(page_rows, NULL, 10) : 4096);
    double raw = raw_mbps(cl.dir, (double)mbytes, page);
    printf("moved %llu rows (%.1f MB) in %llu rounds, %.3f s: %.0f rows/s, %.1f MB/s; raw ZeroMQ "
           "%.1f MB/s in %zu-byte pages: ratio %.2f\n",
           mrows, mbytes / 1e6, rounds, secs, mrows / secs, mbytes / 1e6 / secs, raw, page,
           mbytes / 1e6 / secs / raw);
    printf("pushes of the moving slots: before max %.1f ms p99 %.1f ms; during max %.1f ms p99 "
           "%.1f ms; cut-over %.1f ms\n",
           bmax, bp99, dmax, dp99, cut);
    fflush(stdout);
    free(ids);
    free(g);
    zeps_client_destroy(&c);
    zt_cluster_stop(&cl);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t rows = 300000;
    uint32_t dim = 16;
    int reps = 3;
    const char *page = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--rows") == 0)
            rows = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--dim") == 0)
            dim = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--page") == 0)
            page = argv[i + 1];
    }
    shared *sh =
        mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    printf("bench_move: %" PRIu64
           " rows of dim %u (adagrad), 3 shards, shard 0's slots to shard 2\n",
           rows, dim);
    for (int r = 0; r < reps; r++)
        if (one_rep(rows, dim, page, sh) != 0)
            return 1;
    return 0;
}
