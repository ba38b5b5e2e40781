/*
 * ctl_bench.c - `zepsctl bench`: zeps against raw ZeroMQ on loopback TCP.
 *
 * One run starts two children: a real zeps-server (1 shard, async, from a
 * cluster file written into a temporary directory) and a forked raw ZeroMQ
 * ROUTER loop that answers the same request pattern with no protocol at all.
 * This process is the only client of both. Both sides are driven through
 * one ops table (start a request from slot i, finish slot i) by the same
 * ring and latency loops, so they do the same work pattern: W requests in
 * flight, one payload buffer per slot that is not reused before ZeroMQ
 * released it, zero-copy sends both ways, pulled payloads received in place
 * (zeps then copies them into the caller's buffer, as its API promises).
 * For each size and repetition the zeps cell runs, then the raw cell, so
 * machine noise hits both alike; the figures printed are medians.
 *
 * With --curve a second zeps-server runs with CurveZMQ on (keys made with
 * the same code as `zepsctl keygen`, in the temporary directory) and a
 * third cell, zeps over CURVE, follows the other two in every repetition, so
 * the cost of encryption is read off one run.
 *
 * With --replicas 2 a one-node ZooKeeper and a shard of two replicas run
 * too (ctl_bench_repl.c), and a cell "zeps r=2" follows the zeps cell in
 * every repetition; then sparse pushes go to both shards, r=1 and r=2 in
 * turn (ctl_bench_sparse.c). The cost of replication is read off one run.
 *
 * Units: payload sizes are binary (4 MB = 4 MiB); throughputs are payload
 * bytes per second in MB/s = 10^6 B/s; latencies are round trips in µs.
 *
 * This file: options, the measurement loops both sides share, the run and
 * its table and JSON; the sides are ctl_bench_zeps.c and ctl_bench_raw.c.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "alloc.h"
#include "ctl.h"
#include "ctl_bench.h"
#include "now.h"

static const char *const field_names[NF] = {
    "push_MBps",       "pull_MBps",       "push_pull_MBps", "push_rtt_p50_us",    "push_rtt_p99_us",
    "pull_rtt_p50_us", "pull_rtt_p99_us", "pull_view_MBps", "push_pull_view_MBps"};

/* The one piece of static state: set by SIGINT/SIGTERM, polled by the loops. */
volatile sig_atomic_t zp_ctl_bench_stop;

static void on_signal(int sig)
{
    (void)sig;
    zp_ctl_bench_stop = 1;
}

/* ---- options ---------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: zepsctl bench [options]\n\n"
               "Push/pull throughput and round-trip latency of zeps against a raw ZeroMQ\n"
               "DEALER/ROUTER pair doing the same pattern, both on loopback TCP.\n\n"
               "  --sizes LIST   payload sizes (default 64,4K,256K,4M,32M; K, M binary)\n"
               "  --window N     requests in flight for throughput (default 4, max 64)\n"
               "  --reps N       repetitions per cell; medians are printed (default 3)\n"
               "  --seconds S    target time per throughput phase (default 1.0)\n"
               "  --json PATH    also write the results as JSON\n"
               "  --keep         keep the temporary directory (cluster file, server log)\n"
               "  --only SIDE    measure only 'zeps' or 'raw' (for profiling)\n"
               "  --curve        also measure zeps with CurveZMQ on (a second server)\n"
               "  --replicas N   2: also measure zeps on a shard of two replicas (a one-node\n"
               "                 ZooKeeper and two more servers), dense and sparse pushes,\n"
               "                 and print r=2 / r=1 (default 1: no replicated shard)\n"
               "  --log-mb MB    with --replicas 2: the replicated shard's replication.log_mb\n"
               "                 (default: the server's)\n"
               "  --apply        also time the server's dense optimizer kernels against\n"
               "                 saxpy on 4M and 8M floats (zeps-server times them)\n"
               "  --transport T  tcp (default) or shm: zeps over shared memory (transport =\n"
               "                 \"auto\"), raw ZeroMQ over ipc://, and one thread's memcpy of\n"
               "                 the same bytes, the ceiling\n\n"
               "The dense-path figures in one command (docs/performance.md):\n"
               "  zepsctl bench --sizes 4M,32M,40M --apply\n"
               "The cost of replication (docs/performance.md, \"Replication\"):\n"
               "  zepsctl bench --replicas 2 --sizes 64,4M --reps 5\n"
               "Shared memory against its ceilings (docs/performance.md, \"Shared memory\"):\n"
               "  zepsctl bench --transport shm --sizes 64,4M,32M --reps 5\n"
               "\n"
               "Exit status: 0 measured; 1 a server or measurement failed, the JSON\n"
               "could not be written or SIGINT/SIGTERM stopped it; 2 bad options.\n");
}

/* "64,4K,256KB,4M,32MiB" -> o->sizes (K and M binary); -1 if malformed. */
static int parse_sizes(bench_opts *o, const char *list)
{
    char *copy = zp_alloc_strdup(list), *save = NULL, *end;
    o->nsizes = 0;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        errno = 0;
        unsigned long long v = strtoull(t, &end, 10);
        int shift = *end == 'k' || *end == 'K' ? 10 : *end == 'm' || *end == 'M' ? 20 : 0;
        end += shift != 0;
        if (errno || end == t || (*end && strcasecmp(end, "b") && strcasecmp(end, "ib")) ||
            (v <<= shift) < 4 || v % 4 || v > MAX_BYTES || o->nsizes == MAX_SIZES) {
            fprintf(stderr,
                    "zepsctl bench: bad size '%s' (multiples of 4 B up to 512M, "
                    "at most %d sizes)\n",
                    t, MAX_SIZES);
            free(copy);
            return -1;
        }
        o->sizes[o->nsizes++] = (size_t)v;
    }
    free(copy);
    return o->nsizes > 0 ? 0 : -1;
}

/* Returns 0 to run, 1 after --help, -1 on a usage error. */
static int parse_opts(bench_opts *o, int argc, char **argv)
{
    static const struct option longs[] = {{"sizes", required_argument, NULL, 's'},
                                          {"window", required_argument, NULL, 'w'},
                                          {"reps", required_argument, NULL, 'r'},
                                          {"seconds", required_argument, NULL, 't'},
                                          {"json", required_argument, NULL, 'j'},
                                          {"keep", no_argument, NULL, 'k'},
                                          {"only", required_argument, NULL, 'o'},
                                          {"curve", no_argument, NULL, 'c'},
                                          {"apply", no_argument, NULL, 'a'},
                                          {"replicas", required_argument, NULL, 'R'},
                                          {"log-mb", required_argument, NULL, 'L'},
                                          {"transport", required_argument, NULL, 'T'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    *o = (bench_opts){.window = 4, .reps = 3, .seconds = 1.0, .only = -1, .replicas = 1};
    parse_sizes(o, "64,4K,256K,4M,32M");
    optind = 0; /* a full rescan; argv[0] is the subcommand name */
    int ch, bad = 0;
    while ((ch = getopt_long(argc, argv, "s:w:r:t:j:ko:h", longs, NULL)) != -1) {
        if (ch == 's')
            bad |= parse_sizes(o, optarg) != 0;
        else if (ch == 'w')
            o->window = atoi(optarg);
        else if (ch == 'r')
            o->reps = atoi(optarg);
        else if (ch == 't')
            o->seconds = atof(optarg);
        else if (ch == 'j')
            o->json = optarg;
        else if (ch == 'k')
            o->keep = true;
        else if (ch == 'c')
            o->curve = true;
        else if (ch == 'a')
            o->apply = true;
        else if (ch == 'R')
            o->replicas = atoi(optarg);
        else if (ch == 'L')
            o->log_mb = atoi(optarg);
        else if (ch == 'T')
            bad |= !(o->shm = strcmp(optarg, "shm") == 0) && strcmp(optarg, "tcp") != 0;
        else if (ch == 'o')
            o->only = strcmp(optarg, "raw") == 0 ? SIDE_RAW : SIDE_ZEPS;
        else if (ch == 'h')
            return usage(stdout), 1;
        else
            bad = 1;
    }
    if (bad || optind < argc || o->window < 1 || o->window > MAX_WINDOW || o->reps < 1 ||
        o->reps > MAX_REPS || !(o->seconds > 0 && o->seconds <= 3600) || o->replicas < 1 ||
        o->replicas > 2 || (o->replicas == 2 && o->only == SIDE_RAW) || o->log_mb < 0 ||
        (o->log_mb > 0 && o->replicas != 2)) {
        fprintf(stderr,
                "zepsctl bench: bad arguments (window 1..%d, reps 1..%d, seconds > 0, "
                "replicas 1 or 2, not with --only raw; --log-mb > 0 with --replicas 2)\n",
                MAX_WINDOW, MAX_REPS);
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- small helpers ---------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Each field's median over n cells (fields independently). */
static cell cell_median(const cell *c, int n)
{
    cell m;
    double v[MAX_REPS];
    for (int f = 0; f < NF; f++) {
        for (int i = 0; i < n; i++)
            v[i] = c[i].v[f];
        qsort(v, (size_t)n, sizeof(double), cmp_double);
        m.v[f] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
    return m;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* ---- the measurement loops, shared by both sides ---------------------- */

/* Keep `window` requests of `op` in flight until at least min_n were issued
 * and `seconds` passed, then wait for all. *n requests completed in *secs.
 * Every request started is finished, also after an error. */
static int ring(const side_ops *s, void *ctx, int op, int window, long min_n, double seconds,
                long *n, double *secs)
{
    long issued = 0, done = 0;
    int rc = 0;
    double t0 = zp_now_s();
    for (;;) {
        if (issued - done == window && (rc = s->finish(ctx, op, (int)(done++ % window))) != 0)
            break;
        if (zp_ctl_bench_stop)
            rc = ZEPS_ECLOSED;
        if (rc != 0 || (issued >= min_n && zp_now_s() - t0 >= seconds))
            break;
        if ((rc = s->start(ctx, op, (int)(issued % window))) != 0)
            break;
        issued++;
    }
    for (; done < issued; done++) {
        int r2 = s->finish(ctx, op, (int)(done % window));
        rc = rc ? rc : r2;
    }
    *n = done;
    *secs = zp_now_s() - t0;
    return rc;
}

/* Round trips of `op`, one in flight, for `seconds` (at least MIN_RTT);
 * p50 and p99 (nearest rank) in µs. */
static int latency(const side_ops *s, void *ctx, int op, double seconds, double *p50, double *p99)
{
    size_t n = 0, cap = 4096;
    double *v = zp_alloc(cap * sizeof(double)), t0 = zp_now_s();
    int rc = 0;
    while (n < MIN_RTT || zp_now_s() - t0 < seconds) {
        uint64_t a = zp_now_ns();
        if (zp_ctl_bench_stop || (rc = s->start(ctx, op, 0)) != 0 ||
            (rc = s->finish(ctx, op, 0)) != 0) {
            rc = rc ? rc : ZEPS_ECLOSED;
            break;
        }
        if (n == cap)
            v = zp_alloc_resize(v, (cap *= 2) * sizeof(double));
        v[n++] = (double)(zp_now_ns() - a) * 1e-3;
    }
    if (rc == 0) {
        qsort(v, n, sizeof(double), cmp_double);
        *p50 = v[(size_t)ceil(0.50 * (double)n) - 1];
        *p99 = v[(size_t)ceil(0.99 * (double)n) - 1];
    }
    free(v);
    return rc;
}

/* A throughput phase after a warm-up of 2 windows: payload bytes moved and
 * the seconds it took. */
static int throughput(const bench *b, const side_ops *s, void *ctx, int op, size_t bytes,
                      double *moved, double *secs)
{
    long n;
    int w = b->o.window;
    int rc = ring(s, ctx, op, w, 2L * w, 0.0, &n, secs);
    if (rc == 0)
        rc = ring(s, ctx, op, w, MIN_TIMED, b->o.seconds, &n, secs);
    *moved = (double)n * (double)bytes;
    return rc;
}

/* Measure one cell (one side, one size, one repetition) into *out. */
static int measure_cell(const bench *b, const side_ops *s, void *ctx, int si, int rep, cell *out)
{
    size_t bytes = b->o.sizes[si];
    double *v = out->v, pb, pt, lb, lt;
    char lbl[32];
    size_label(bytes, lbl, sizeof lbl);
    s->select(ctx, si, bytes);
    double vb, vt;
    int rc = throughput(b, s, ctx, OP_PUSH, bytes, &pb, &pt);
    if (rc == 0)
        rc = throughput(b, s, ctx, OP_PULL, bytes, &lb, &lt);
    if (rc == 0)
        rc = throughput(b, s, ctx, OP_PULL_VIEW, bytes, &vb, &vt);
    if (rc != 0)
        return rc;
    v[F_PUSH] = pb / pt / 1e6;
    v[F_PULL] = lb / lt / 1e6;
    v[F_BOTH] = (pb + lb) / (pt + lt) / 1e6;
    v[F_VIEW] = vb / vt / 1e6;
    v[F_BOTH_VIEW] = (pb + vb) / (pt + vt) / 1e6;
    fprintf(stderr,
            "bench: %s push %s ... %.1f MB/s, pull %.1f MB/s (view %.1f), push+pull %.1f MB/s "
            "(rep %d/%d)\n",
            lbl, s->name, v[F_PUSH], v[F_PULL], v[F_VIEW], v[F_BOTH], rep + 1, b->o.reps);
    rc = latency(s, ctx, OP_PUSH, b->o.seconds / 2, &v[F_PUSH_P50], &v[F_PUSH_P99]);
    if (rc == 0)
        rc = latency(s, ctx, OP_PULL, b->o.seconds / 2, &v[F_PULL_P50], &v[F_PULL_P99]);
    if (rc == 0)
        fprintf(stderr, "bench: %s rtt %s ... push p50/p99 %.0f/%.0f µs, pull %.0f/%.0f µs\n", lbl,
                s->name, v[F_PUSH_P50], v[F_PUSH_P99], v[F_PULL_P50], v[F_PULL_P99]);
    return rc;
}
/* ---- the run ---------------------------------------------------------- */

/* Whether side s is measured in this run. */
static bool measured(const bench_opts *o, int s)
{
    if (s == SIDE_CURVE && !o->curve)
        return false;
    if (s == SIDE_R2)
        return o->replicas == 2;
    if (s == SIDE_MEM)
        return o->shm && o->only < 0;
    return o->only < 0 || o->only == s;
}

/* Per size: repetitions of (zeps cell, zeps r=2 cell, raw cell, CURVE
 * cell), each side that runs, then the medians. */
static int measure_all(bench *b)
{
    const side_ops *ops[NSIDES] = {[SIDE_ZEPS] = &zp_ctl_bench_zeps_ops,
                                   [SIDE_RAW] = &zp_ctl_bench_raw_ops,
                                   [SIDE_CURVE] = &zp_ctl_bench_zeps_curve_ops,
                                   [SIDE_R2] = &zp_ctl_bench_zeps_r2_ops,
                                   [SIDE_MEM] = &zp_ctl_bench_mem_ops};
    void *ctx[NSIDES] = {[SIDE_ZEPS] = &b->z, [SIDE_RAW] = &b->r, [SIDE_CURVE] = &b->zc,
                         [SIDE_R2] = &b->zr, [SIDE_MEM] = &b->m};
    static const int order[NSIDES] = {SIDE_ZEPS, SIDE_MEM, SIDE_R2, SIDE_RAW, SIDE_CURVE};
    cell *reps = zp_alloc_zeroed((size_t)b->o.reps * NSIDES, sizeof(cell));
    int rc = 0;
    for (int si = 0; si < b->o.nsizes && rc == 0; si++) {
        for (int rep = 0; rep < b->o.reps && rc == 0; rep++)
            for (int i = 0, s; i < NSIDES && rc == 0; i++)
                if (measured(&b->o, s = order[i]))
                    rc = measure_cell(b, ops[s], ctx[s], si, rep, &reps[s * b->o.reps + rep]);
        for (int s = 0; s < NSIDES && rc == 0; s++)
            b->res[si][s] = cell_median(&reps[s * b->o.reps], b->o.reps);
    }
    free(reps);
    return rc;
}

/* "1523", or "5.8" below 100 */
static const char *mbs(double v, char *buf)
{
    snprintf(buf, 16, v < 100 ? "%.1f" : "%.0f", v);
    return buf;
}

/* A figure of a side, or "-" when the run did not measure it (--only). */
static const char *fig(bool on, const char *fmt, double v, char *buf)
{
    if (!on)
        return "-";
    if (fmt == NULL)
        return mbs(v, buf);
    snprintf(buf, 16, fmt, v);
    return buf;
}

static void print_row(const bench *b, int si)
{
    const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
    bool zo = measured(&b->o, SIDE_ZEPS), ro = measured(&b->o, SIDE_RAW), both = zo && ro;
    char lbl[32], zl[40], rl[40], m[9][16];
    snprintf(zl, sizeof zl, zo ? "%.0f/%.0f" : "-", z[F_PUSH_P50], z[F_PUSH_P99]);
    snprintf(rl, sizeof rl, ro ? "%.0f/%.0f" : "-", r[F_PUSH_P50], r[F_PUSH_P99]);
    printf("%7s | %6s %6s %5s | %6s %6s %5s | %6s %6s %5s | %13s | %13s\n",
           size_label(b->o.sizes[si], lbl, sizeof lbl), fig(zo, NULL, z[F_PUSH], m[0]),
           fig(ro, NULL, r[F_PUSH], m[1]), fig(both, "%.2f", ratio(z[F_PUSH], r[F_PUSH]), m[6]),
           fig(zo, NULL, z[F_PULL], m[2]), fig(ro, NULL, r[F_PULL], m[3]),
           fig(both, "%.2f", ratio(z[F_PULL], r[F_PULL]), m[7]), fig(zo, NULL, z[F_BOTH], m[4]),
           fig(ro, NULL, r[F_BOTH], m[5]), fig(both, "%.2f", ratio(z[F_BOTH], r[F_BOTH]), m[8]), zl,
           rl);
}

/* The pull round trips and the zero-copy pulls, "-" for a side not measured. */
static void print_pulls(const bench *b)
{
    bool zo = measured(&b->o, SIDE_ZEPS), ro = measured(&b->o, SIDE_RAW), both = zo && ro;
    char lbl[32], m[8][16];
    printf("\npull RTT, p50/p99 µs:\n");
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
        printf("%7s | zeps %s/%s, raw %s/%s\n", size_label(b->o.sizes[si], lbl, sizeof lbl),
               fig(zo, "%.0f", z[F_PULL_P50], m[0]), fig(zo, "%.0f", z[F_PULL_P99], m[1]),
               fig(ro, "%.0f", r[F_PULL_P50], m[2]), fig(ro, "%.0f", r[F_PULL_P99], m[3]));
    }
    printf("\nzero-copy pulls (zeps_pull_view_start; raw ZeroMQ pulls are zero-copy anyway):\n");
    printf("%7s | %-19s | %-19s\n", "", "pull view MB/s", "push+pull view MB/s");
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
        printf("%7s | %6s %6s %5s | %6s %6s %5s\n", size_label(b->o.sizes[si], lbl, sizeof lbl),
               fig(zo, NULL, z[F_VIEW], m[0]), fig(ro, NULL, r[F_VIEW], m[1]),
               fig(both, "%.2f", ratio(z[F_VIEW], r[F_VIEW]), m[2]),
               fig(zo, NULL, z[F_BOTH_VIEW], m[3]), fig(ro, NULL, r[F_BOTH_VIEW], m[4]),
               fig(both, "%.2f", ratio(z[F_BOTH_VIEW], r[F_BOTH_VIEW]), m[5]));
    }
}

/* zeps / raw for push, and push+pull at 4 and 32 MiB against the aim. */
static void print_ratios(const bench *b)
{
    char lbl[32];
    printf("\npush zeps / raw ZeroMQ:");
    for (int si = 0; si < b->o.nsizes; si++)
        printf("%s %s %.3f", si ? "," : "", size_label(b->o.sizes[si], lbl, sizeof lbl),
               ratio(b->res[si][SIDE_ZEPS].v[F_PUSH], b->res[si][SIDE_RAW].v[F_PUSH]));
    printf("\n");
    bool said = false;
    for (int si = 0; si < b->o.nsizes; si++) {
        const double *z = b->res[si][SIDE_ZEPS].v, *r = b->res[si][SIDE_RAW].v;
        double q = ratio(z[F_BOTH], r[F_BOTH]), qv = ratio(z[F_BOTH_VIEW], r[F_BOTH_VIEW]);
        if (b->o.sizes[si] != (4u << 20) && b->o.sizes[si] != (32u << 20))
            continue;
        if (!said)
            printf(
                "\nzeps push+pull / raw ZeroMQ push+pull, the same bytes over the same loopback\n"
                "in alternating runs (the project aims at >= %.1f; on a busy machine both\n"
                "sides slow down, but unevenly, so repeat with more --reps before reading\n"
                "much into a low figure):\n",
                ACCEPT);
        said = true;
        printf("  %s: %.3f with copying pulls, %.3f with zero-copy pulls%s\n",
               size_label(b->o.sizes[si], lbl, sizeof lbl), q, qv,
               q < ACCEPT || qv < ACCEPT ? " (below the aim)" : "");
    }
}

static void print_table(const bench *b)
{
    char lbl[32];
    printf("zeps%s vs raw ZeroMQ on %s: window %d, median of %d, ~%g s per phase\n"
           "payload MB/s (10^6 B/s; sizes are binary); RTT = 1 request in flight, µs\n\n",
           b->o.shm ? " over shared memory" : "", b->o.shm ? "ipc://" : "tcp 127.0.0.1",
           b->o.window, b->o.reps, b->o.seconds);
    printf("%7s | %-19s | %-19s | %-19s | %13s | %13s\n", "", "push MB/s", "pull MB/s",
           "push+pull MB/s", "zeps push RTT", "raw push RTT");
    printf("%7s | %6s %6s %5s | %6s %6s %5s | %6s %6s %5s | %13s | %13s\n", "size", "zeps", "raw",
           "ratio", "zeps", "raw", "ratio", "zeps", "raw", "ratio", "p50/p99", "p50/p99");
    for (int si = 0; si < b->o.nsizes; si++)
        print_row(b, si);
    print_pulls(b);
    if (b->o.curve) {
        printf("\nCurveZMQ (authenticated and encrypted) vs plain zeps, same run:\n");
        printf("%7s | %-20s | %-20s | %-20s\n", "", "push MB/s", "pull MB/s", "push+pull MB/s");
        printf("%7s | %6s %6s %6s | %6s %6s %6s | %6s %6s %6s\n", "size", "plain", "curve", "ratio",
               "plain", "curve", "ratio", "plain", "curve", "ratio");
        for (int si = 0; si < b->o.nsizes; si++) {
            const double *z = b->res[si][SIDE_ZEPS].v, *c = b->res[si][SIDE_CURVE].v;
            char m[6][16];
            printf("%7s | %6s %6s %6.2f | %6s %6s %6.2f | %6s %6s %6.2f\n",
                   size_label(b->o.sizes[si], lbl, sizeof lbl), mbs(z[F_PUSH], m[0]),
                   mbs(c[F_PUSH], m[1]), ratio(c[F_PUSH], z[F_PUSH]), mbs(z[F_PULL], m[2]),
                   mbs(c[F_PULL], m[3]), ratio(c[F_PULL], z[F_PULL]), mbs(z[F_BOTH], m[4]),
                   mbs(c[F_BOTH], m[5]), ratio(c[F_BOTH], z[F_BOTH]));
        }
    }
    if (b->o.replicas == 2) {
        zp_ctl_bench_repl_print(b);
        zp_ctl_bench_sparse_print(b);
    }
    if (b->o.shm)
        zp_ctl_bench_mem_print(b);
    printf("\nserver memory per dense parameter, with optimizer state: sgd %.2f B, adam %.2f B\n",
           b->mem_sgd, b->mem_adam);
    if (measured(&b->o, SIDE_ZEPS) && measured(&b->o, SIDE_RAW))
        print_ratios(b); /* not with --only: no ratio to give */
}

static void json_cell(FILE *f, const char *name, const cell *c, const char *sep)
{
    fprintf(f, "      \"%s\": {", name);
    for (int i = 0; i < NF; i++)
        fprintf(f, "%s\"%s\": %.1f", i ? ", " : "", field_names[i], c->v[i]);
    fprintf(f, "}%s\n", sep);
}

static int write_json(const bench *b, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
        return ZEPS_EIO;
    }
    fprintf(f,
            "{\n  \"transport\": \"%s\", \"window\": %d, \"reps\": %d, "
            "\"seconds\": %g,\n  \"units\": \"payload MB/s (10^6 B/s); RTT in us; "
            "medians over reps\",\n  \"results\": [\n",
            b->o.shm ? "shm (raw: ipc://)" : "tcp://127.0.0.1", b->o.window, b->o.reps,
            b->o.seconds);
    for (int si = 0; si < b->o.nsizes; si++) {
        const cell *z = &b->res[si][SIDE_ZEPS], *r = &b->res[si][SIDE_RAW];
        fprintf(f, "    {\n      \"bytes\": %zu,\n", b->o.sizes[si]);
        json_cell(f, "zeps", z, ",");
        json_cell(f, "raw", r, ",");
        if (b->o.curve)
            json_cell(f, "zeps_curve", &b->res[si][SIDE_CURVE], ",");
        if (b->o.shm) {
            json_cell(f, "memcpy", &b->res[si][SIDE_MEM], ",");
            zp_ctl_bench_mem_json(b, f, si);
        }
        if (b->o.replicas == 2) {
            json_cell(f, "zeps_r2", &b->res[si][SIDE_R2], ",");
            zp_ctl_bench_repl_json(b, f, si);
        }
        fprintf(f,
                "      \"ratio\": {\"push\": %.3f, \"pull\": %.3f, \"push_pull\": %.3f, "
                "\"pull_view\": %.3f, \"push_pull_view\": %.3f}\n"
                "    }%s\n",
                ratio(z->v[F_PUSH], r->v[F_PUSH]), ratio(z->v[F_PULL], r->v[F_PULL]),
                ratio(z->v[F_BOTH], r->v[F_BOTH]), ratio(z->v[F_VIEW], r->v[F_VIEW]),
                ratio(z->v[F_BOTH_VIEW], r->v[F_BOTH_VIEW]), si + 1 < b->o.nsizes ? "," : "");
    }
    fprintf(f, "  ],\n");
    if (b->o.replicas == 2) {
        zp_ctl_bench_sparse_json(b, f);
        fprintf(f, "  \"replicas\": %d,\n", b->o.replicas);
    }
    fprintf(f, "  \"server_bytes_per_param\": {\"sgd\": %.3f, \"adam\": %.3f}\n}\n", b->mem_sgd,
            b->mem_adam);
    return fclose(f) == 0 ? 0 : ZEPS_EIO;
}

static int run(bench *b)
{
    size_t max = max_size(&b->o);
    for (int i = 0; i < b->o.window; i++) {
        b->push[i] = buf_new(max, 1.0f);
        b->pull[i] = buf_new(max, 0.0f);
    }
    /* The raw child forks before this process has any ZeroMQ context. */
    int rc = zp_ctl_bench_raw_open(b);
    if (rc == 0)
        rc = zp_ctl_bench_zeps_open(b);
    b->m = (mem_side){.a = b->push, .b = b->pull};
    if (rc == 0 && b->o.shm)
        rc = zp_ctl_bench_mem_check(b);
    if (rc == 0 && b->o.replicas == 2)
        rc = zp_ctl_bench_repl_open(b);
    if (rc == 0 && b->o.replicas == 2)
        rc = zp_ctl_bench_sparse_declare(&b->z);
    if (rc == 0 && b->o.replicas == 2)
        rc = zp_ctl_bench_sparse_declare(&b->zr);
    if (rc == 0)
        rc = measure_all(b);
    if (rc == 0 && b->o.replicas == 2)
        rc = zp_ctl_bench_sparse_measure(b);
    if (rc == 0) {
        fflush(stderr);
        print_table(b);
        fflush(stdout);
    }
    if (rc == 0 && b->o.json)
        rc = write_json(b, b->o.json);
    if (rc == 0 && b->o.apply) {
        printf("\n");
        fflush(stdout);
        rc = zp_ctl_bench_zeps_apply(b->o.reps < 11 ? 11 : b->o.reps);
    }
    return rc;
}

/* Every exit path: the replicated shard and its ZooKeeper, client and
 * server, raw socket and child, then the buffers (ZeroMQ holds none of them
 * any more) and the directory. */
static void teardown(bench *b)
{
    zp_ctl_bench_repl_close(b);
    zp_ctl_bench_zeps_close(b);
    zp_ctl_bench_raw_close(b);
    for (int i = 0; i < MAX_WINDOW; i++) {
        free(b->push[i]);
        free(b->pull[i]);
    }
    if (b->o.keep && b->dir[0])
        fprintf(stderr, "bench: kept %s\n", b->dir);
    else if (b->dir[0])
        nftw(b->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int zp_ctl_bench(int argc, char **argv)
{
    bench *b = zp_alloc_zeroed(1, sizeof *b);
    int rc = parse_opts(&b->o, argc, argv);
    if (rc != 0) {
        free(b);
        return rc > 0 ? 0 : 2;
    }
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    const char *tmp = getenv("TMPDIR");
    snprintf(b->dir, sizeof b->dir, "%s/zeps-bench-XXXXXX",
             tmp && tmp[0] && strlen(tmp) < 40 ? tmp : "/tmp");
    if (mkdtemp(b->dir)) {
        rc = run(b);
    } else {
        fprintf(stderr, "bench: cannot create %s: %s\n", b->dir, strerror(errno));
        b->dir[0] = '\0';
        rc = ZEPS_EIO;
    }
    teardown(b);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (rc != 0)
        fprintf(stderr, "zepsctl bench: failed: %s%s\n", zeps_strerror(rc),
                zp_ctl_bench_stop ? " (interrupted)" : "");
    free(b);
    return rc == 0 ? 0 : 1;
}
