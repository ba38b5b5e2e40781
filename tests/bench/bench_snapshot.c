/*
 * bench_snapshot.c - latency of small pulls and pushes while a large table
 * is being snapshotted (docs/snapshots.md).
 *
 * One shard (async) holds a big table (1 GiB by default) and a small one
 * (1024 floats). A client times small pulls and pushes of the small table:
 * first with no snapshot running (baseline), then while a tool's SNAPSHOT
 * request makes the shard fork a writer that writes the big table (CRC32C,
 * fsync, rename), until the shard reports the set written. Both phases run
 * in this one process, one after the other, so the ratio of their p99s is
 * measured under the same conditions. Prints p50/p99/max per phase and the
 * ratio p99(during) / p99(baseline).
 *
 *   bench_snapshot [--mb MB] [--baseline-ops N] [--reps R] [--nice N]
 *
 * --nice: the shard's snapshot_nice (the writer's nice value, default 10).
 *
 * R times (default 3): N operations without a snapshot, then one snapshot
 * with operations until it is written; then N more ("after"). The phases
 * alternate so that drifts of the machine's load hit both alike.
 *
 * Needs ZEPS_BINDIR (the zeps-server binary), like the tests.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "zeps.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

typedef struct series {
    double *v;
    size_t n, cap;
} series;

static void add(series *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 4096;
        s->v = realloc(s->v, s->cap * sizeof(double));
        if (!s->v)
            abort();
    }
    s->v[s->n++] = x;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(series *s, double p)
{
    if (s->n == 0)
        return NAN;
    qsort(s->v, s->n, sizeof(double), cmp);
    size_t i = (size_t)ceil(p / 100.0 * (double)s->n);
    return s->v[i ? i - 1 : 0];
}

/* One small pull + push, each timed. */
static int op(zeps_client *c, uint32_t t, float *buf, int64_t clock, series *pull, series *push)
{
    double a = now_us();
    if (zeps_pull(c, t, buf, 0, 1024, clock) != 0)
        return -1;
    double b = now_us();
    for (int i = 0; i < 1024; i++)
        buf[i] = 1e-6f;
    if (zeps_push(c, t, buf, 0, 1024, clock) != 0)
        return -1;
    double e = now_us();
    add(pull, b - a);
    add(push, e - b);
    return 0;
}

static void report(const char *phase, series *pull, series *push)
{
    printf("%-10s pull n=%zu p50 %7.1f us p99 %7.1f us max %8.1f us | push p50 %7.1f us p99 "
           "%7.1f us max %8.1f us\n",
           phase, pull->n, pct(pull, 50), pct(pull, 99), pct(pull, 100), pct(push, 50),
           pct(push, 99), pct(push, 100));
}

typedef struct bench_opts {
    uint64_t mb;
    long baseline_ops;
    int reps, nice_v;
} bench_opts;

/* The command line into *o: 0, or 2 after the usage line. */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    *o = (bench_opts){.mb = 1024, .baseline_ops = 3000, .reps = 3, .nice_v = 10};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mb") == 0 && i + 1 < argc)
            o->mb = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--baseline-ops") == 0 && i + 1 < argc)
            o->baseline_ops = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            o->reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--nice") == 0 && i + 1 < argc)
            o->nice_v = atoi(argv[++i]);
        else {
            fprintf(
                stderr,
                "usage: bench_snapshot [--mb MB] [--baseline-ops N] [--reps R] [--nice 0..19]\n");
            return 2;
        }
    }
    return 0;
}

/* The timed operations of each phase. */
typedef struct phases {
    series bp, bq, dp, dq, ap, aq; /* baseline, during, after: pull, push */
} phases;

/* One rep: baseline_ops operations without a snapshot, then one snapshot
 * (set 1000 + rep) with operations until the shard reports it written.
 * 0, or -1 after a message. */
static int one_rep(zeps_client *c, zeps_client *tool, uint32_t small, float *buf, int64_t *clock,
                   int rep, const bench_opts *o, phases *ph)
{
    for (long i = 0; i < o->baseline_ops; i++)
        if (op(c, small, buf, (*clock)++, &ph->bp, &ph->bq) != 0)
            return -1;
    uint64_t setid = 1000 + (uint64_t)rep;
    double t0 = now_us();
    if (zeps_snapshot_request(tool, -1, setid) != 0) {
        fprintf(stderr, "bench_snapshot: SNAPSHOT failed: %s\n", zeps_last_error(tool));
        return -1;
    }
    double written_s = NAN;
    for (long i = 0;; i++) {
        if (op(c, small, buf, (*clock)++, &ph->dp, &ph->dq) != 0)
            return -1;
        if (i % 50 != 49)
            continue;
        Zeps__ShardStats *st = zt_stats(tool, 0);
        int done = st && st->last_snapshot_set == setid;
        if (done)
            written_s = st->last_snapshot_s;
        if (st)
            zeps__shard_stats__free_unpacked(st, NULL);
        if (done || now_us() - t0 > 300e6)
            break;
    }
    if (isnan(written_s)) {
        fprintf(stderr, "bench_snapshot: snapshot %d not written within 300 s\n", rep);
        return -1;
    }
    printf("rep %d: table of %" PRIu64 " MiB snapshotted in %.3f s (shard's measure)\n", rep,
           o->mb, written_s);
    return 0;
}

/* Warm-up, the reps, the "after" window and the report: 0, or -1. */
static int run(zeps_client *c, zeps_client *tool, uint32_t small, const bench_opts *o)
{
    float *buf = calloc(1024, sizeof(float));
    phases ph = {0};
    int rc = -1;
    int64_t clock = 0;
    for (int i = 0; i < 300; i++) /* warm-up */
        if (op(c, small, buf, clock++, &ph.ap, &ph.aq) != 0)
            goto out;
    ph.ap.n = ph.aq.n = 0;
    /* reps x (a window without a snapshot, then one with): the phases
     * alternate so slow drifts of the machine's load hit both alike */
    for (int rep = 0; rep < o->reps; rep++)
        if (one_rep(c, tool, small, buf, &clock, rep, o, &ph) != 0)
            goto out;
    for (long i = 0; i < o->baseline_ops; i++)
        if (op(c, small, buf, clock++, &ph.ap, &ph.aq) != 0)
            goto out;
    report("baseline", &ph.bp, &ph.bq);
    report("during", &ph.dp, &ph.dq);
    report("after", &ph.ap, &ph.aq);
    double rp = pct(&ph.dp, 99) / pct(&ph.bp, 99), rq = pct(&ph.dq, 99) / pct(&ph.bq, 99);
    printf("p99 during / baseline: pull %.2f, push %.2f (goal <= 2)\n", rp, rq);
    rc = 0;
out:
    free(buf);
    free(ph.bp.v), free(ph.bq.v), free(ph.dp.v), free(ph.dq.v), free(ph.ap.v), free(ph.aq.v);
    return rc;
}

int main(int argc, char **argv)
{
    bench_opts o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    zt_cluster cl;
    char extra[256];
    snprintf(extra, sizeof(extra),
             "  snapshot_dir = \"@DIR@/snap\";\n  snapshot_on_exit = false;\n"
             "  snapshot_nice = %d;",
             o.nice_v);
    if (zt_cluster_start(&cl, 1, 1, "async", extra, NULL) != 0) {
        fprintf(stderr, "bench_snapshot: cannot start a server (is ZEPS_BINDIR set?)\n");
        return 1;
    }
    int rc = 1;
    /* declaring the big table takes the shard a while: a patient client */
    const char *ep[1] = {cl.endpoints[0]};
    zeps_options opt = {.request_timeout_ms = 60000, .hello_timeout_ms = 10000};
    zeps_client *c = NULL, *tool = zt_client(&cl, ZEPS_RANK_TOOL);
    if (zeps_client_new_endpoints(&c, ep, 1, 0, &opt) != 0)
        c = NULL;
    uint32_t big, small;
    /* constant init: the server writes every page, so the snapshot writes
     * resident memory, as it would after training */
    zeps_table_spec bigspec = {.name = "big",
                               .length = o.mb * 262144,
                               .optimizer = "sgd",
                               .lr = 0.01,
                               .init = "constant",
                               .init_scale = 0.5};
    zeps_table_spec smallspec = {.name = "small", .length = 1024, .optimizer = "sgd", .lr = 0.01};
    if (!c || !tool || zeps_declare(c, &bigspec, &big) != 0 ||
        zeps_declare(c, &smallspec, &small) != 0) {
        fprintf(stderr, "bench_snapshot: setup failed: %s\n", c ? zeps_last_error(c) : "");
    } else {
        printf("declared a table of %" PRIu64 " MiB; writer nice %d\n", o.mb, o.nice_v);
        rc = run(c, tool, small, &o) == 0 ? 0 : 1;
    }
    zeps_client_destroy(&c);
    zeps_client_destroy(&tool);
    zt_cluster_stop(&cl);
    return rc;
}
