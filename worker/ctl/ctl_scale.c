/*
 * ctl_scale.c - `zepsctl scale`: options, the runs of every (S, N) cell as
 * `zepsctl local` children, and the round-trip measurement of the alpha-beta
 * fit as a `zepsctl bench` child (ctl_scale.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "ctl.h"
#include "ctl_json.h"
#include "ctl_scale.h"
#include "now.h"
#include "spawn.h"

#define MAX_JSON (4 << 20)

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zepsctl scale [options]\n"
            "\n"
            "Strong scaling of one training job (docs/performance.md, \"Scaling\"): for\n"
            "every shard count S and worker count N the same examples are trained by a\n"
            "`zepsctl local` cluster of S servers and N workers (the data split over\n"
            "the workers). Prints T(N) (training time, slowest worker), the speedup\n"
            "S(N) = T(N0) N0 / T(N) (N0 the first N of --workers), the efficiency\n"
            "E(N) = S(N)/N, examples/s, the share of worker time spent waiting on the\n"
            "shards, and how much of that waiting\n"
            "moving the bytes explains by an alpha-beta fit t(m) = alpha + beta m of a\n"
            "request's round trip, measured with `zepsctl bench` beside the runs.\n"
            "\n"
            "  --model M            quadratic|softmax|mlp (mlp)\n"
            "  --workers LIST       worker counts N (1,2,4,8)\n"
            "  --servers LIST       shard counts S (1,2)\n"
            "  --consistency C      bsp|ssp|async|weighted (bsp)\n"
            "  --epochs E           epochs over the training set (2)\n"
            "  --batch B            minibatch per worker step (64)\n"
            "  --max-train-examples N   use only N training examples (all)\n"
            "  --reps R             runs per cell, the median time kept (1, at most %d)\n"
            "  --sizes LIST         message sizes of the fit, K and M binary\n"
            "                       (64,4K,64K,256K,1M,4M)\n"
            "  --no-fit             skip the round-trip measurement\n"
            "  --timeout S          per run, passed to zepsctl local (900)\n"
            "  --dir DIR            study directory (default: a new /tmp/zeps-scale-XXXXXX)\n"
            "  --json PATH, --markdown PATH   outputs (default DIR/scale.json, scale.md)\n"
            "  --quick              smoke test: N in {1,2}, S = 1, 1 epoch of 4096\n"
            "                       examples, sizes 64,64K,1M\n"
            "\n"
            "The figure DIR/scale.png (speedup and efficiency against N, one line per S)\n"
            "is made by gnuplot from DIR/scale.dat and DIR/scale.gp.\n"
            "\n"
            "Exit status: 0 done; 1 a run failed or an output could not be written;\n"
            "2 bad options.\n",
            SCALE_MAX_REPS);
}

static bool parse_ints(const char *arg, int *out, int *n, int lo, int hi)
{
    *n = 0;
    for (const char *p = arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || *n == SCALE_MAX_LIST || (*end && *end != ','))
            return false;
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n > 0;
}

static bool parse_sizes(const char *arg, long *out, int *n)
{
    *n = 0;
    for (const char *p = arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (*end == 'K' || *end == 'k')
            v <<= 10, end++;
        else if (*end == 'M' || *end == 'm')
            v <<= 20, end++;
        if (end == p || v < 1 || v > (64L << 20) || *n == SCALE_MAX_LIST || (*end && *end != ','))
            return false;
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return *n > 0;
}

static bool int_opt(const char *name, const char *arg, int lo, int hi, int *v)
{
    char *end;
    long x = strtol(arg, &end, 10);
    if (end != arg && !*end && x >= lo && x <= hi) {
        *v = (int)x;
        return true;
    }
    fprintf(stderr, "zepsctl scale: --%s wants an integer in [%d, %d], not '%s'\n", name, lo, hi,
            arg);
    return false;
}

static void set_quick(scale_opts *o)
{
    o->nworkers = 2, o->workers[0] = 1, o->workers[1] = 2;
    o->nservers = 1, o->servers[0] = 1;
    o->epochs = 1, o->max_examples = 4096;
    o->nsizes = 3, o->sizes[0] = 64, o->sizes[1] = 64 << 10, o->sizes[2] = 1 << 20;
}

static void set_defaults(scale_opts *o)
{
    static const long sizes[] = {64, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
    *o = (scale_opts){.model = "mlp",
                      .consistency = "bsp",
                      .nworkers = 4,
                      .nservers = 2,
                      .epochs = 2,
                      .batch = 64,
                      .reps = 1,
                      .timeout_s = 900,
                      .fit = true};
    for (int i = 0; i < 4; i++)
        o->workers[i] = 1 << i;
    o->servers[0] = 1, o->servers[1] = 2;
    o->nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    memcpy(o->sizes, sizes, sizeof(sizes));
}

/* Option ch with argument arg into o: true if it was good (else said). */
static bool apply_opt(scale_opts *o, int ch, char *arg)
{
    switch (ch) {
    case 'm':
        o->model = arg;
        return true;
    case 'c':
        o->consistency = arg;
        return true;
    case 'F':
        o->fit = false;
        return true;
    case 'd':
        o->dir = arg;
        return true;
    case 'j':
        o->json = arg;
        return true;
    case 'M':
        o->markdown = arg;
        return true;
    case 'q':
        o->quick = true;
        return true;
    case 'e':
        return int_opt("epochs", arg, 1, 1000, &o->epochs);
    case 'b':
        return int_opt("batch", arg, 1, 1 << 20, &o->batch);
    case 'x':
        return int_opt("max-train-examples", arg, 1, 1 << 30, &o->max_examples);
    case 'r':
        return int_opt("reps", arg, 1, SCALE_MAX_REPS, &o->reps);
    case 't':
        return int_opt("timeout", arg, 1, 86400, &o->timeout_s);
    }
    bool ok = ch == 'w'   ? parse_ints(arg, o->workers, &o->nworkers, 1, 64)
              : ch == 's' ? parse_ints(arg, o->servers, &o->nservers, 1, 16)
                          : parse_sizes(arg, o->sizes, &o->nsizes);
    if (!ok)
        fprintf(stderr, "zepsctl scale: bad list '%s' (comma-separated, at most %d)\n", arg,
                SCALE_MAX_LIST);
    return ok;
}

/* 0 parsed, 1 --help printed, 2 bad options (said). */
static int parse_opts(int argc, char **argv, scale_opts *o)
{
    static const struct option longs[] = {{"model", required_argument, NULL, 'm'},
                                          {"workers", required_argument, NULL, 'w'},
                                          {"servers", required_argument, NULL, 's'},
                                          {"consistency", required_argument, NULL, 'c'},
                                          {"epochs", required_argument, NULL, 'e'},
                                          {"batch", required_argument, NULL, 'b'},
                                          {"reps", required_argument, NULL, 'r'},
                                          {"sizes", required_argument, NULL, 'z'},
                                          {"no-fit", no_argument, NULL, 'F'},
                                          {"timeout", required_argument, NULL, 't'},
                                          {"dir", required_argument, NULL, 'd'},
                                          {"json", required_argument, NULL, 'j'},
                                          {"markdown", required_argument, NULL, 'M'},
                                          {"quick", no_argument, NULL, 'q'},
                                          {"help", no_argument, NULL, 'h'},
                                          {"max-train-examples", required_argument, NULL, 'x'},
                                          {NULL, 0, NULL, 0}};
    set_defaults(o);
    /* --quick first, so that explicit options override what it sets */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0)
            set_quick(o);
    optind = 1;
    for (int ch; (ch = getopt_long(argc, argv, "h", longs, NULL)) != -1;) {
        if (ch == 'h') {
            usage(stdout);
            return 1;
        }
        if (ch == '?') {
            usage(stderr);
            return 2;
        }
        if (!apply_opt(o, ch, optarg))
            return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "zepsctl scale: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

/* Run argv (a zepsctl child) with its output in log. Its exit status, or -1
 * (said) if it could not start or a signal ended it. */
static int run_child(char **argv, const char *log)
{
    fflush(stdout);
    fflush(stderr);
    zp_spawn_opts so = {.log = log, .log_fd = -1, .flags = ZP_SPAWN_TRUNC, .deathsig = SIGTERM};
    pid_t pid = zp_spawn_start(argv, &so);
    int status;
    if (pid < 0 || zp_spawn_wait(pid, -1, &status) != 1) {
        fprintf(stderr, "zepsctl scale: cannot run %s %s: %s\n", argv[0], argv[1], strerror(errno));
        return -1;
    }
    int rc = zp_spawn_exit_code(status);
    return rc >= 128 ? -1 : rc;
}

/* One rep of a cell: its figures from rundir's summary and worker results. */
static bool read_rep(const char *rundir, int workers, scale_fig *r)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/summary.json", rundir);
    char *text = zp_ctl_json_slurp(path, MAX_JSON);
    if (!text)
        return false;
    r->wall_s = zp_ctl_json_number(text, "wall_s");
    r->eps = zp_ctl_json_number(text, "examples_per_s");
    r->compute_s = zp_ctl_json_number(text, "compute_s");
    r->comm_s = zp_ctl_json_number(text, "comm_s");
    r->accuracy = zp_ctl_json_number(text, "final_accuracy");
    free(text);
    r->requests = r->steps = r->bytes = 0;
    for (int w = 0; w < workers; w++) {
        snprintf(path, sizeof(path), "%s/worker-%d.json", rundir, w);
        text = zp_ctl_json_slurp(path, MAX_JSON);
        if (!text)
            return false;
        r->requests += zp_ctl_json_number(text, "requests");
        r->steps += zp_ctl_json_number(text, "iterations");
        r->bytes += zp_ctl_json_number(text, "bytes_out") + zp_ctl_json_number(text, "bytes_in");
        free(text);
    }
    return isfinite(r->wall_s) && isfinite(r->requests) && isfinite(r->steps) &&
           isfinite(r->bytes);
}

static bool run_rep(const scale *sc, int servers, int workers, int rep, scale_fig *r)
{
    const scale_opts *o = &sc->o;
    char rundir[PATH_MAX - 64], log[PATH_MAX], sv[16], wk[16], ep[16], bt[16], mx[16], tmo[16];
    snprintf(rundir, sizeof(rundir), "%s/s%d-n%d-r%d", sc->dir, servers, workers, rep);
    snprintf(log, sizeof(log), "%s.log", rundir);
    snprintf(sv, sizeof(sv), "%d", servers);
    snprintf(wk, sizeof(wk), "%d", workers);
    snprintf(ep, sizeof(ep), "%d", o->epochs);
    snprintf(bt, sizeof(bt), "%d", o->batch);
    snprintf(mx, sizeof(mx), "%d", o->max_examples);
    snprintf(tmo, sizeof(tmo), "%d", o->timeout_s);
    if (mkdir(rundir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "zepsctl scale: cannot make %s: %s\n", rundir, strerror(errno));
        return false;
    }
    char *argv[32] = {(char *)sc->zepsctl,
                      "local",
                      "--servers",
                      sv,
                      "--workers",
                      wk,
                      "--model",
                      (char *)o->model,
                      "--consistency",
                      (char *)o->consistency,
                      "--epochs",
                      ep,
                      "--batch",
                      bt,
                      "-q",
                      "--dir",
                      rundir,
                      "--timeout",
                      tmo};
    int n = 19;
    if (o->max_examples > 0) {
        argv[n++] = "--max-train-examples";
        argv[n++] = mx;
    }
    argv[n] = NULL;
    int rc = run_child(argv, log);
    if (rc == 0 && read_rep(rundir, workers, r))
        return true;
    fprintf(stderr, "zepsctl scale: S=%d N=%d: zepsctl local %s (see %s)\n", servers, workers,
            rc == 0 ? "left no readable result" : "failed", log);
    return false;
}

/* All reps of a cell; the cell keeps the figures of its median-time rep
 * (the lower median for an even count). */
static bool run_cell(const scale *sc, scale_cell *c)
{
    scale_fig reps[SCALE_MAX_REPS];
    int n = 0;
    for (; n < sc->o.reps; n++) {
        double t0 = zp_now_s();
        if (!run_rep(sc, c->servers, c->workers, n, &reps[n]))
            return false;
        const scale_fig *r = &reps[n];
        c->run_wall[n] = r->wall_s;
        fprintf(stderr,
                "scale: S=%d N=%d rep %d/%d: T %.2f s, %.0f examples/s, waiting %.1f%% "
                "(run %.1f s)\n",
                c->servers, c->workers, n + 1, sc->o.reps, r->wall_s, r->eps,
                100 * r->comm_s / (r->comm_s + r->compute_s), zp_now_s() - t0);
    }
    for (int i = 0; i < n; i++) {
        int faster = 0;
        for (int j = 0; j < n; j++)
            faster +=
                reps[j].wall_s < reps[i].wall_s || (reps[j].wall_s == reps[i].wall_s && j < i);
        if (faster == (n - 1) / 2)
            c->f = reps[i];
    }
    c->reps = n;
    return true;
}

/* The round trips of the fit: `zepsctl bench --only zeps` at window 1. */
static bool measure_fit(scale *sc)
{
    char sizes[SCALE_MAX_LIST * 12] = "", json[PATH_MAX], log[PATH_MAX];
    size_t off = 0;
    for (int i = 0; i < sc->o.nsizes; i++)
        off += (size_t)snprintf(sizes + off, sizeof(sizes) - off, "%s%ld", i ? "," : "",
                                sc->o.sizes[i]);
    snprintf(json, sizeof(json), "%s/bench.json", sc->dir);
    snprintf(log, sizeof(log), "%s/bench.log", sc->dir);
    char *argv[] = {
        (char *)sc->zepsctl, "bench", "--only",  "zeps", "--window", "1",  "--reps", "3",
        "--seconds",         "0.3",   "--sizes", sizes,  "--json",   json, NULL};
    fprintf(stderr, "scale: measuring round trips (zepsctl bench, %s)\n", log);
    if (run_child(argv, log) != 0)
        return false;
    char *text = zp_ctl_json_slurp(json, MAX_JSON);
    if (!text)
        return false;
    scale_fit *f = &sc->fit;
    f->n = 0;
    for (int i = 0; i < sc->o.nsizes; i++) {
        char key[48];
        snprintf(key, sizeof(key), "\"bytes\": %ld,", sc->o.sizes[i]);
        const char *p = strstr(text, key);
        double push = p ? zp_ctl_json_number(p, "push_rtt_p50_us") : NAN;
        double pull = p ? zp_ctl_json_number(p, "pull_rtt_p50_us") : NAN;
        for (int k = 0; k < 2; k++) {
            double us = k ? pull : push;
            if (isfinite(us) && us > 0) {
                f->size[f->n] = sc->o.sizes[i];
                f->rtt_s[f->n++] = us * 1e-6;
            }
        }
    }
    free(text);
    zp_ctl_scale_report_fit_line(f);
    return f->ok;
}

static bool make_dir(scale *sc)
{
    if (sc->o.dir) {
        if (mkdir(sc->o.dir, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "zepsctl scale: cannot make %s: %s\n", sc->o.dir, strerror(errno));
            return false;
        }
        snprintf(sc->dir, sizeof(sc->dir), "%s", sc->o.dir);
        return true;
    }
    snprintf(sc->dir, sizeof(sc->dir), "/tmp/zeps-scale-XXXXXX");
    if (mkdtemp(sc->dir))
        return true;
    fprintf(stderr, "zepsctl scale: cannot make a directory in /tmp: %s\n", strerror(errno));
    return false;
}

static void record_command(scale *sc, int argc, char **argv)
{
    size_t off = (size_t)snprintf(sc->command, sizeof(sc->command), "zepsctl scale");
    for (int i = 1; i < argc && off < sizeof(sc->command); i++)
        off += (size_t)snprintf(sc->command + off, sizeof(sc->command) - off, " %s", argv[i]);
}

int zp_ctl_scale(int argc, char **argv)
{
    scale sc = {.zepsctl = NULL};
    int rc = parse_opts(argc, argv, &sc.o);
    if (rc)
        return rc == 1 ? 0 : 2;
    static char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "zepsctl scale: cannot find zepsctl itself: %s\n", strerror(errno));
        return 1;
    }
    self[n] = '\0';
    sc.zepsctl = self;
    sc.cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    record_command(&sc, argc, argv);
    if (!make_dir(&sc))
        return 1;
    fprintf(stderr, "scale: %s, %s, %d epoch(s), batch %d; study directory %s\n", sc.o.model,
            sc.o.consistency, sc.o.epochs, sc.o.batch, sc.dir);
    double t0 = zp_now_s();
    if (sc.o.fit && !measure_fit(&sc))
        fprintf(stderr, "zepsctl scale: no alpha-beta fit (see %s/bench.log)\n", sc.dir);
    int ncells = sc.o.nservers * sc.o.nworkers;
    sc.cells = zp_alloc_zeroed((size_t)ncells, sizeof(scale_cell));
    bool ok = true;
    for (int si = 0; si < sc.o.nservers && ok; si++)
        for (int wi = 0; wi < sc.o.nworkers && ok; wi++) {
            scale_cell *c = &sc.cells[si * sc.o.nworkers + wi];
            c->servers = sc.o.servers[si];
            c->workers = sc.o.workers[wi];
            ok = run_cell(&sc, c);
        }
    sc.wall_s = zp_now_s() - t0;
    if (ok)
        ok = zp_ctl_scale_report_write(&sc);
    free(sc.cells);
    return ok ? 0 : 1;
}
