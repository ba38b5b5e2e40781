/*
 * ctl_study.c - `zepsctl study`: staleness sweeps on the quadratic model.
 *
 * Every run is one `zepsctl local` child on a cluster file of its own in a
 * run directory of its own; this file writes the cluster files, starts the
 * child, waits for it, and reads what the run left behind: rank 0's result
 * JSON (the convergence curve), every worker's result JSON (did one
 * diverge?) and the shard's trace CSV (applied and dropped pushes, the
 * largest tau applied). zeps writes those files itself in a fixed flat
 * format, so they are read with strstr/strtod, not a JSON library. Runs go
 * one at a time: a second cluster sharing the cores would change the
 * staleness being measured.
 *
 * A staleness bound s is consistency "weighted" with max_staleness = s (the
 * shard drops a push with tau > s, so every applied push has tau <= s) and
 * bound = floor(s / workers) (an ssp pull bound in clocks, so fast workers
 * do not run far ahead and have every push dropped). Three settings per s:
 * A plain (w = 1) at lr = 1/L, B plain at Theorem 2's 1/(2L(1+s)), C
 * w(tau) = 1/(1+tau) at 1/L (L = 1 for the quadratic). docs/consistency.md
 * has the design and the results.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "spawn.h"
#include "util.h"

#define MAX_S        32
#define NSETTINGS    3
#define NGRID        14  /* step sizes of the stability grid: 2 * 2^(-k/2) */
#define DIVERGED_REL 1e3 /* a curve point this far from x* counts as diverged */
#define MAX_FILE     (8 << 20)
#define CURVE_TRIES  20 /* seeds tried for an async curve rank 0 survived */

static const struct setting {
    char key;
    const char *label, *function;
    bool theorem_step; /* lr = 1/(2L(1+s)) instead of 1/L */
} settings[NSETTINGS] = {
    {'A', "plain, lr = 1/L", "none", false},
    {'B', "plain, lr = 1/(2L(1+s))", "none", true},
    {'C', "inverse, lr = 1/L", "inverse", false},
};

typedef struct study_opts {
    int workers, dim, seeds, iterations, eval_every, bound;
    int stab_iterations, stab_seeds, curve_iterations, curve_eval, curve_seed;
    double condition, delay_ms, delay_sigma, threshold, timeout_s;
    int stal[MAX_S], nstal;
    const char *dir, *json, *markdown, *curves;
    bool keep_traces, no_steps, no_stability, no_curves;
} study_opts;

typedef struct run_spec {
    char name[64];           /* its run directory under the study directory */
    const char *consistency; /* written into the cluster file as given */
    bool weighting;          /* write a weighting section: function, s, bound */
    const char *function;    /* w(tau), with a weighting section */
    int s, bound;            /* max_staleness and pull bound; -1: none */
    double lr;
    int seed, iterations, eval_every;
} run_spec;

typedef enum outcome { CONVERGED, DIVERGED, STALLED, FAILED, NOUTCOMES } outcome;
static const char *const outcome_word[NOUTCOMES] = {"converged", "diverges", "stalls", "fails"};
static const char *const outcome_verb[NOUTCOMES] = {"converge", "diverge", "stall", "fail"};

typedef struct curve_pt {
    double step, loss, rel, version;
} curve_pt;

typedef struct run {
    const char *part; /* "steps", "stability", "curves" */
    char setting;     /* 'A'..'C' in "steps", else 0 */
    run_spec spec;
    outcome out;
    double updates, steps;      /* first curve point under the threshold; INFINITY if none */
    double final_rel;           /* the last curve point's; NAN without a curve */
    long long applied, dropped; /* push rows of the trace; -1 if it was unreadable */
    long long max_tau;          /* largest tau of an applied push */
    double sum_tau;             /* over the applied pushes */
    long long diverged_step;    /* of the worker that said so; -1 */
    int status;                 /* zepsctl local's exit status */
    double wall_s;
    curve_pt *curve; /* rank 0's; owned */
    size_t ncurve;
} run;

typedef struct study {
    study_opts o;
    char dir[PATH_MAX - 256], zepsctl[PATH_MAX], command[2048];
    run *runs;
    size_t nruns, cap;
    double stable_lr[MAX_S], stable_rel[MAX_S]; /* stability grid; 0: none stable */
    int curve_seed;                             /* seed of the figure's runs; 0: none */
    size_t curve_runs[2];
    double t0;
} study;

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zepsctl study [options]\n\n"
            "Staleness sweeps on the quadratic model (docs/consistency.md), each run a\n"
            "`zepsctl local` cluster with 1 server. Staleness bound s: consistency\n"
            "\"weighted\", max_staleness = s, pull bound floor(s / workers). Per s and seed:\n"
            "  A plain (w = 1) at lr = 1/L = 1, B plain at lr = 1/(2L(1+s)), C w = 1/(1+tau)\n"
            "  at lr = 1; the table is the median over seeds of updates to the threshold.\n"
            "Then the largest stable plain lr per s on a grid 2 * 2^(-k/2), k = 0..13, and\n"
            "the curves of plain async vs weighted inverse at lr = 1 (the figure's data).\n\n"
            "  --workers N          workers (8)\n"
            "  --dim D, --condition K  the quadratic (100, 100)\n"
            "  --staleness LIST     bounds s, comma-separated (0,1,2,5,10,20)\n"
            "  --seeds N            seeds per cell (5)\n"
            "  --iterations I       step budget per worker (6000)\n"
            "  --eval-every E       rank 0's curve every E steps (10)\n"
            "  --delay-ms M         median injected delay per step, lognormal (1.0)\n"
            "  --delay-sigma X      its log-stddev (0.5)\n"
            "  --threshold X        converged at rel. distance |x - x*| / |x*| < X (1e-4)\n"
            "  --bound B            pull bound in clocks for every s (default floor(s/workers))\n"
            "  --stability-iterations I, --stability-seeds N  the grid's budget and seeds\n"
            "                       (1500, 1)\n"
            "  --curve-iterations I, --curve-eval E, --curve-seed N  the figure's runs\n"
            "                       (1500, 2, 1)\n"
            "  --timeout S          per run, passed to zepsctl local (60 + 0.05 s per step)\n"
            "  --dir DIR            study directory (default: a new /tmp/zeps-study-XXXXXX)\n"
            "  --json PATH, --markdown PATH, --curves PATH\n"
            "                       outputs (default DIR/study.json, study.md, curves.dat)\n"
            "  --steps-only, --stability-only, --curves-only   run one part\n"
            "  --keep-traces        keep each run's trace-shard0.csv (about 5 MB a run)\n"
            "  --quick              smoke test: s in {0,5}, 1 seed, 1500 steps, grid 500\n\n"
            "Exit status: 0 done (whatever the runs' outcomes); 1 a run could not be\n"
            "started or an output not written; 2 bad options.\n");
}

/* "0,1,2" into out[]; false if malformed or too long. */
static bool parse_list(const char *arg, int *out, int *n)
{
    *n = 0;
    for (const char *p = arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > 1000000 || *n == MAX_S || (*end && *end != ','))
            return false;
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n > 0;
}

static bool num_opt(const char *name, const char *arg, double lo, double hi, double *v)
{
    char *end;
    *v = strtod(arg, &end);
    if (end != arg && !*end && *v >= lo && *v <= hi)
        return true;
    fprintf(stderr, "zepsctl study: --%s wants a number in [%g, %g], not '%s'\n", name, lo, hi,
            arg);
    return false;
}

enum {
    O_WORKERS = 256,
    O_DIM,
    O_COND,
    O_STAL,
    O_SEEDS,
    O_ITER,
    O_EVAL,
    O_DELAY,
    O_SIGMA,
    O_THRESH,
    O_BOUND,
    O_SITER,
    O_SSEEDS,
    O_CITER,
    O_CEVAL,
    O_CSEED,
    O_TIMEOUT,
    O_DIR,
    O_JSON,
    O_MD,
    O_CURVES,
    O_STEPS_ONLY,
    O_STAB_ONLY,
    O_CURVES_ONLY,
    O_KEEP,
    O_QUICK,
    O_HELP
};

static const struct option long_opts[] = {
    {"workers", 1, NULL, O_WORKERS},
    {"dim", 1, NULL, O_DIM},
    {"condition", 1, NULL, O_COND},
    {"staleness", 1, NULL, O_STAL},
    {"seeds", 1, NULL, O_SEEDS},
    {"iterations", 1, NULL, O_ITER},
    {"eval-every", 1, NULL, O_EVAL},
    {"delay-ms", 1, NULL, O_DELAY},
    {"delay-sigma", 1, NULL, O_SIGMA},
    {"threshold", 1, NULL, O_THRESH},
    {"bound", 1, NULL, O_BOUND},
    {"stability-iterations", 1, NULL, O_SITER},
    {"stability-seeds", 1, NULL, O_SSEEDS},
    {"curve-iterations", 1, NULL, O_CITER},
    {"curve-eval", 1, NULL, O_CEVAL},
    {"curve-seed", 1, NULL, O_CSEED},
    {"timeout", 1, NULL, O_TIMEOUT},
    {"dir", 1, NULL, O_DIR},
    {"json", 1, NULL, O_JSON},
    {"markdown", 1, NULL, O_MD},
    {"curves", 1, NULL, O_CURVES},
    {"steps-only", 0, NULL, O_STEPS_ONLY},
    {"stability-only", 0, NULL, O_STAB_ONLY},
    {"curves-only", 0, NULL, O_CURVES_ONLY},
    {"keep-traces", 0, NULL, O_KEEP},
    {"quick", 0, NULL, O_QUICK},
    {"help", 0, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

/* A numeric option: where it goes and its range. */
static bool set_num(study_opts *o, int c, const char *arg)
{
    const struct {
        int opt;
        int *i;    /* an integer option, or */
        double *d; /* a real one */
        double lo, hi;
    } nums[] = {
        {O_WORKERS, &o->workers, NULL, 1, 256},        {O_DIM, &o->dim, NULL, 1, 4096},
        {O_COND, NULL, &o->condition, 1, 1e12},        {O_SEEDS, &o->seeds, NULL, 1, 99},
        {O_ITER, &o->iterations, NULL, 1, 1e8},        {O_EVAL, &o->eval_every, NULL, 1, 1e6},
        {O_DELAY, NULL, &o->delay_ms, 0, 60000},       {O_SIGMA, NULL, &o->delay_sigma, 1e-6, 10},
        {O_THRESH, NULL, &o->threshold, 1e-12, 1},     {O_BOUND, &o->bound, NULL, -1, 1e6},
        {O_SITER, &o->stab_iterations, NULL, 1, 1e8},  {O_SSEEDS, &o->stab_seeds, NULL, 1, 99},
        {O_CITER, &o->curve_iterations, NULL, 1, 1e8}, {O_CEVAL, &o->curve_eval, NULL, 1, 1e6},
        {O_CSEED, &o->curve_seed, NULL, 1, 1e9},       {O_TIMEOUT, NULL, &o->timeout_s, 1, 1e6},
    };
    const char *name = "?";
    for (const struct option *lo = long_opts; lo->name; lo++)
        name = lo->val == c ? lo->name : name;
    for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
        double v;
        if (nums[k].opt != c)
            continue;
        if (!num_opt(name, arg, nums[k].lo, nums[k].hi, &v))
            return false;
        if (nums[k].d) {
            *nums[k].d = v;
            return true;
        }
        if (v == floor(v)) {
            *nums[k].i = (int)v;
            return true;
        }
        fprintf(stderr, "zepsctl study: --%s wants an integer, not '%s'\n", name, arg);
        return false;
    }
    return false;
}

static bool apply_opt(study_opts *o, int c, const char *arg)
{
    switch (c) {
    case O_STAL:
        if (parse_list(arg, o->stal, &o->nstal))
            return true;
        fprintf(stderr, "zepsctl study: --staleness wants up to %d integers like 0,1,5\n", MAX_S);
        return false;
    case O_DIR:
        o->dir = arg;
        return true;
    case O_JSON:
        o->json = arg;
        return true;
    case O_MD:
        o->markdown = arg;
        return true;
    case O_CURVES:
        o->curves = arg;
        return true;
    case O_STEPS_ONLY:
        o->no_stability = o->no_curves = true;
        return true;
    case O_STAB_ONLY:
        o->no_steps = o->no_curves = true;
        return true;
    case O_CURVES_ONLY:
        o->no_steps = o->no_stability = true;
        return true;
    case O_KEEP:
        o->keep_traces = true;
        return true;
    case O_QUICK:
        return true; /* seen in the first pass */
    default:
        return set_num(o, c, arg);
    }
}

/* Defaults, or the --quick ones, before the options given. */
static void defaults(study_opts *o, bool quick)
{
    static const int stal[] = {0, 1, 2, 5, 10, 20}, quick_stal[] = {0, 5};
    *o = (study_opts){.workers = 8,
                      .dim = 100,
                      .condition = 100,
                      .seeds = quick ? 1 : 5,
                      .iterations = quick ? 1500 : 6000,
                      .eval_every = 10,
                      .bound = INT_MIN,
                      .delay_ms = 1.0,
                      .delay_sigma = 0.5,
                      .threshold = 1e-4,
                      .stab_iterations = quick ? 500 : 1500,
                      .stab_seeds = 1,
                      .curve_iterations = 1500,
                      .curve_eval = 2,
                      .curve_seed = 1};
    o->nstal = quick ? 2 : 6;
    memcpy(o->stal, quick ? quick_stal : stal, (size_t)o->nstal * sizeof(int));
}

/* Returns -1 to go on, or the exit status. */
static int parse_opts(int argc, char **argv, study_opts *o)
{
    bool quick = false;
    for (int i = 1; i < argc; i++)
        quick |= strcmp(argv[i], "--quick") == 0;
    defaults(o, quick);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        if (c == O_HELP) {
            usage(stdout);
            return 0;
        }
        if (c == '?')
            fprintf(stderr, "zepsctl study: unknown option or missing value: '%s'\n",
                    argv[optind - 1]);
        if (c == '?' || !apply_opt(o, c, optarg)) {
            fprintf(stderr, "'zepsctl study --help' lists the options\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "zepsctl study: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

/* ------------------------------------------------------------- one run */

/* A free loopback port: bind port 0 and read what the kernel chose. */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static bool write_conf(const study *st, const run_spec *sp, const char *rundir, const char *path)
{
    const study_opts *o = &st->o;
    int port = free_port();
    if (port <= 0) {
        fprintf(stderr, "zepsctl study: cannot pick a free port: %s\n", strerror(errno));
        return false;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "zepsctl study: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(f, "# Written by zepsctl study (run %s).\ncluster = {\n", sp->name);
    fprintf(f, "  servers = [\"tcp://127.0.0.1:%d\"];\n  workers = %d;\n", port, o->workers);
    fprintf(f, "  consistency = \"%s\";\n", sp->consistency);
    if (sp->weighting)
        fprintf(f, "  weighting = { function = \"%s\"; max_staleness = %d; bound = %d; };\n",
                sp->function, sp->s, sp->bound);
    fprintf(f, "  trace_dir = \"%s\";\n};\ntraining = {\n", rundir);
    fprintf(f, "  model = \"quadratic\"; epochs = 1; iterations = %d; dim = %d;\n", sp->iterations,
            o->dim);
    fprintf(f, "  condition = %.10g; optimizer = \"sgd\"; lr = %.10g;\n", o->condition, sp->lr);
    fprintf(f, "  eval_every_steps = %d; seed = %d;\n", sp->eval_every, sp->seed);
    fprintf(f, "  delay_ms = %.10g; delay_dist = \"lognormal\"; delay_sigma = %.10g;\n};\n",
            o->delay_ms, o->delay_sigma);
    if (fclose(f) == 0)
        return true;
    fprintf(stderr, "zepsctl study: cannot write %s: %s\n", path, strerror(errno));
    return false;
}

/* Run `zepsctl local` on conf with its output in rundir/local.log. Returns
 * its exit status, 128 + N if signal N ended it, -1 if it could not start. */
static int run_local(const study *st, const char *conf, const char *rundir, int iterations)
{
    char log[PATH_MAX + 32], tmo[32];
    snprintf(log, sizeof(log), "%s/local.log", rundir);
    snprintf(tmo, sizeof(tmo), "%.0f",
             st->o.timeout_s > 0 ? st->o.timeout_s : 60 + 0.05 * iterations);
    char *argv[] = {(char *)st->zepsctl, "local",     "--config", (char *)conf, "-q", "--dir",
                    (char *)rundir,      "--timeout", tmo,        NULL};
    fflush(stdout);
    fflush(stderr);
    /* SIGTERM if we die: it stops its cluster */
    zp_spawn_opts so = {.log = log, .log_fd = -1, .flags = ZP_SPAWN_TRUNC, .deathsig = SIGTERM};
    pid_t pid = zp_spawn_start(argv, &so);
    int status;
    if (pid < 0) {
        fprintf(stderr, "zepsctl study: cannot fork: %s\n", strerror(errno));
        return -1;
    }
    if (zp_spawn_wait(pid, -1, &status) != 1)
        return -1;
    return zp_spawn_exit_code(status);
}

/* The whole file at path, NUL-terminated (caller frees), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = zp_xmalloc(MAX_FILE + 1);
    size_t n = fread(text, 1, MAX_FILE, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

/* One JSON number or null (NAN) at *pp, followed by `sep`; advances *pp. */
static bool curve_value(const char **pp, char sep, double *v)
{
    const char *p = *pp;
    char *end = (char *)p;
    if (strncmp(p, "null", 4) == 0) {
        *v = NAN;
        end += 4;
    } else {
        *v = strtod(p, &end);
        if (end == p)
            return false;
    }
    if (*end != sep)
        return false;
    *pp = end + 1;
    return true;
}

/* r->curve from train.c's "curve":[[step,loss,rel,dist,acc,version],...]. */
static bool parse_curve(const char *text, run *r)
{
    static const char key[] = "\"curve\":[";
    const char *p = strstr(text, key);
    if (!p)
        return false;
    p += strlen(key);
    size_t cap = 0;
    while (*p == '[') {
        double v[6];
        p++;
        for (int i = 0; i < 6; i++)
            if (!curve_value(&p, i < 5 ? ',' : ']', &v[i]))
                return false;
        if (r->ncurve == cap) {
            cap = cap ? 2 * cap : 256;
            r->curve = zp_xrealloc(r->curve, cap * sizeof(curve_pt));
        }
        r->curve[r->ncurve++] =
            (curve_pt){.step = v[0], .loss = v[1], .rel = v[2], .version = v[5]};
        if (*p == ',')
            p++;
    }
    return *p == ']';
}

/* Did any worker write "diverged":true? Sets r->diverged_step. */
static bool any_diverged(const study *st, const char *rundir, run *r)
{
    bool diverged = false;
    for (int w = 0; w < st->o.workers; w++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/worker-%d.json", rundir, w);
        char *text = slurp(path), *p = text ? strstr(text, "\"diverged\":true") : NULL;
        if (p) {
            diverged = true;
            char *q = strstr(p, "\"diverged_step\":");
            long long step = q ? strtoll(q + 16, NULL, 10) : -1;
            if (r->diverged_step < 0 || step < r->diverged_step)
                r->diverged_step = step;
        }
        free(text);
    }
    return diverged;
}

/* Start of field `idx` (0-based) of a CSV line, or NULL. */
static const char *csv_field(const char *line, int idx)
{
    for (; idx > 0 && line; idx--)
        if ((line = strchr(line, ',')))
            line++;
    return line;
}

/* Count the shard's push rows: time_s,kind,worker,table,clock,version_read,
 * version_applied,tau,... (server/stats.c). */
static void read_trace(const char *rundir, run *r, bool keep)
{
    char path[PATH_MAX + 32], line[512];
    snprintf(path, sizeof(path), "%s/trace-shard0.csv", rundir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    r->applied = r->dropped = r->max_tau = 0;
    while (fgets(line, sizeof(line), f)) {
        const char *kind = csv_field(line, 1), *tau = csv_field(line, 7);
        if (!kind || !tau)
            continue;
        if (strncmp(kind, "push,", 5) == 0) {
            r->applied++;
            long long t = strtoll(tau, NULL, 10);
            r->sum_tau += (double)t;
            r->max_tau = t > r->max_tau ? t : r->max_tau;
        } else if (strncmp(kind, "drop,", 5) == 0 || strncmp(kind, "late,", 5) == 0) {
            r->dropped++;
        }
    }
    fclose(f);
    if (!keep)
        unlink(path);
}

/* The outcome from the curve, the workers' results and the exit status. */
static void judge(const study *st, run *r, bool diverged)
{
    r->updates = r->steps = INFINITY;
    for (size_t i = 0; i < r->ncurve; i++) {
        const curve_pt *pt = &r->curve[i];
        if (!isnan(pt->rel) && !(pt->rel <= DIVERGED_REL))
            diverged = true;
        if (pt->rel < st->o.threshold && isinf(r->updates)) {
            r->updates = pt->version;
            r->steps = pt->step;
        }
    }
    r->final_rel = r->ncurve ? r->curve[r->ncurve - 1].rel : NAN;
    if (diverged)
        r->out = DIVERGED;
    else if (r->status != 0)
        r->out = FAILED;
    else
        r->out = isfinite(r->updates) ? CONVERGED : STALLED;
}

static void describe(const study *st, const run *r)
{
    const run_spec *sp = &r->spec;
    fprintf(stderr, "study: %s ", r->part);
    if (sp->s >= 0)
        fprintf(stderr, "s=%d ", sp->s);
    fprintf(stderr, "seed=%d %s lr=%.4g: ", sp->seed,
            sp->weighting ? sp->function : sp->consistency, sp->lr);
    if (r->out == CONVERGED)
        fprintf(stderr, "converged at update %.0f (step %.0f)", r->updates, r->steps);
    else if (r->out == DIVERGED && r->diverged_step >= 0)
        fprintf(stderr, "diverged at step %lld", r->diverged_step);
    else if (r->out == FAILED)
        fprintf(stderr, "failed (zepsctl local exit %d; see %s/%s/local.log)", r->status, st->dir,
                sp->name);
    else
        fprintf(stderr, "%s (final rel. distance %.3g)", outcome_word[r->out], r->final_rel);
    fprintf(stderr, " in %.1f s; %lld applied, %lld dropped, tau mean %.2f max %lld\n", r->wall_s,
            r->applied, r->dropped, r->applied > 0 ? r->sum_tau / r->applied : NAN, r->max_tau);
}

/* Run sp and record it. Returns the record (valid until the next run), or
 * NULL if the study must stop (no zepsctl local, or it got a signal). */
static run *run_one(study *st, const run_spec *sp, const char *part, char setting)
{
    char rundir[PATH_MAX - 128], conf[PATH_MAX], path[PATH_MAX];
    snprintf(rundir, sizeof(rundir), "%s/%s", st->dir, sp->name);
    snprintf(conf, sizeof(conf), "%s/study.conf", rundir);
    snprintf(path, sizeof(path), "%s/worker-0.json", rundir);
    if ((mkdir(rundir, 0755) != 0 && errno != EEXIST) || !write_conf(st, sp, rundir, conf))
        return NULL;
    if (st->nruns == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->runs = zp_xrealloc(st->runs, st->cap * sizeof(run));
    }
    run *r = &st->runs[st->nruns++];
    *r = (run){.part = part,
               .setting = setting,
               .spec = *sp,
               .applied = -1,
               .dropped = -1,
               .max_tau = -1,
               .diverged_step = -1};
    double t0 = zp_now_s();
    r->status = run_local(st, conf, rundir, sp->iterations);
    r->wall_s = zp_now_s() - t0;
    if (r->status < 0 || r->status == 127 || r->status >= 128) {
        fprintf(stderr, "zepsctl study: zepsctl local %s (see %s/local.log); stopping\n",
                r->status >= 128 ? "was stopped by a signal" : "could not run", rundir);
        return NULL;
    }
    char *text = slurp(path);
    if (text && !parse_curve(text, r))
        fprintf(stderr, "zepsctl study: cannot read the curve in %s\n", path);
    free(text);
    judge(st, r, any_diverged(st, rundir, r));
    read_trace(rundir, r, st->o.keep_traces);
    describe(st, r);
    return r;
}

/* ------------------------------------------------------------ the parts */

static int bound_for(const study_opts *o, int s)
{
    return o->bound != INT_MIN ? o->bound : s / o->workers;
}

static double setting_lr(const struct setting *set, int s)
{
    return set->theorem_step ? 1.0 / (2.0 * (1.0 + s)) : 1.0; /* L = 1 */
}

static bool steps_part(study *st)
{
    const study_opts *o = &st->o;
    for (int i = 0; i < o->nstal; i++)
        for (int k = 0; k < NSETTINGS; k++)
            for (int seed = 1; seed <= o->seeds; seed++) {
                run_spec sp = {.consistency = "weighted",
                               .weighting = true,
                               .function = settings[k].function,
                               .s = o->stal[i],
                               .bound = bound_for(o, o->stal[i]),
                               .lr = setting_lr(&settings[k], o->stal[i]),
                               .seed = seed,
                               .iterations = o->iterations,
                               .eval_every = o->eval_every};
                snprintf(sp.name, sizeof(sp.name), "steps-s%d-%c-seed%d", sp.s, settings[k].key,
                         seed);
                if (!run_one(st, &sp, "steps", settings[k].key))
                    return false;
            }
    return true;
}

/* Largest lr of the grid at which no seed diverges within the budget:
 * going down the grid, the first such lr. */
static bool stability_part(study *st)
{
    const study_opts *o = &st->o;
    for (int i = 0; i < o->nstal; i++) {
        st->stable_lr[i] = 0;
        for (int g = 0; g < NGRID && st->stable_lr[i] == 0; g++) {
            double lr = 2.0 * pow(2.0, -0.5 * g), worst = 0;
            bool stable = true;
            for (int seed = 1; seed <= o->stab_seeds && stable; seed++) {
                run_spec sp = {.consistency = "weighted",
                               .weighting = true,
                               .function = "none",
                               .s = o->stal[i],
                               .bound = bound_for(o, o->stal[i]),
                               .lr = lr,
                               .seed = seed,
                               .iterations = o->stab_iterations,
                               .eval_every = o->eval_every};
                snprintf(sp.name, sizeof(sp.name), "stab-s%d-lr%.4g-seed%d", sp.s, lr, seed);
                const run *r = run_one(st, &sp, "stability", 0);
                if (!r)
                    return false;
                stable = r->out != DIVERGED;
                worst = fmax(worst, r->final_rel);
            }
            if (stable) {
                st->stable_lr[i] = lr;
                st->stable_rel[i] = worst;
            }
        }
    }
    return true;
}

/* Plain async and weighted inverse at lr = 1/L, no staleness bound. When a
 * run diverges, zepsctl local stops the other workers before they write a
 * result, so rank 0's curve survives only if rank 0 found the divergence
 * itself: try seeds until it did. */
static bool curves_part(study *st)
{
    const study_opts *o = &st->o;
    run_spec sp = {.consistency = "async",
                   .function = "none",
                   .s = -1,
                   .bound = -1,
                   .lr = 1.0,
                   .iterations = o->curve_iterations,
                   .eval_every = o->curve_eval};
    for (int t = 0; t < CURVE_TRIES && !st->curve_seed; t++) {
        sp.seed = o->curve_seed + t;
        snprintf(sp.name, sizeof(sp.name), "curve-async-seed%d", sp.seed);
        const run *r = run_one(st, &sp, "curves", 0);
        if (!r)
            return false;
        if (r->ncurve > 0) {
            st->curve_seed = sp.seed;
            st->curve_runs[0] = st->nruns - 1;
        }
    }
    if (!st->curve_seed) {
        fprintf(stderr, "zepsctl study: no async run left rank 0's curve in %d seeds\n",
                CURVE_TRIES);
        return true;
    }
    sp.consistency = "weighted";
    sp.weighting = true;
    sp.function = "inverse";
    snprintf(sp.name, sizeof(sp.name), "curve-inverse-seed%d", sp.seed);
    if (!run_one(st, &sp, "curves", 0))
        return false;
    st->curve_runs[1] = st->nruns - 1;
    return true;
}

/* ------------------------------------------------------------ results */

typedef struct cell {
    double updates, steps; /* medians; INFINITY when more than half did not converge */
    int n, count[NOUTCOMES];
} cell;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static cell make_cell(const study *st, int s, char setting)
{
    cell c = {0};
    double *u = zp_xcalloc(st->nruns + 1, sizeof(double)),
           *k = zp_xcalloc(st->nruns + 1, sizeof(double));
    for (size_t i = 0; i < st->nruns; i++) {
        const run *r = &st->runs[i];
        if (r->setting != setting || r->spec.s != s)
            continue;
        c.count[r->out]++;
        u[c.n] = r->updates;
        k[c.n++] = r->steps;
    }
    c.updates = median(u, c.n);
    c.steps = median(k, c.n);
    free(u);
    free(k);
    return c;
}

/* "690 (690)", "690 (690) (1/5 stall)" or "stalls (1/5 converge, 4/5 stall)". */
static void cell_text(const cell *c, char *buf, size_t len)
{
    int n = 0, top = DIVERGED;
    for (int i = DIVERGED; i < NOUTCOMES; i++)
        top = c->count[i] > c->count[top] ? i : top;
    if (c->n == 0)
        n = snprintf(buf, len, "-");
    else if (isfinite(c->updates))
        n = snprintf(buf, len, "%.0f (%.0f)", c->updates, c->steps);
    else
        n = snprintf(buf, len, "%s", outcome_word[top]);
    const char *sep = " (";
    for (int i = 0; i < NOUTCOMES && n < (int)len; i++) {
        if (!c->count[i] || (i == CONVERGED && isfinite(c->updates)))
            continue;
        n += snprintf(buf + n, len - (size_t)n, "%s%d/%d %s", sep, c->count[i], c->n,
                      outcome_verb[i]);
        sep = ", ";
    }
    if (strcmp(sep, ", ") == 0 && n < (int)len)
        snprintf(buf + n, len - (size_t)n, ")");
}

/* Over every steps run at s: the largest tau applied; over B's (which run
 * their whole budget): the share of pushes applied and the mean tau. */
static void s_facts(const study *st, int s, long long *max_tau, double *share, double *mean_tau)
{
    long long applied = 0, total = 0;
    double sum_tau = 0;
    *max_tau = -1;
    for (size_t i = 0; i < st->nruns; i++) {
        const run *r = &st->runs[i];
        if (r->setting == 0 || r->spec.s != s || r->applied < 0)
            continue;
        *max_tau = r->max_tau > *max_tau ? r->max_tau : *max_tau;
        if (r->setting == 'B') {
            sum_tau += r->sum_tau;
            applied += r->applied;
            total += r->applied + r->dropped;
        }
    }
    *share = total ? (double)applied / (double)total : NAN;
    *mean_tau = applied ? sum_tau / (double)applied : NAN;
}

static void print_steps(const study *st, FILE *f, bool md)
{
    const study_opts *o = &st->o;
    if (md)
        fprintf(f,
                "| s | pull bound | max τ applied | mean τ (B) | applied share (B) | lr of B "
                "| A: %s | B: %s | C: %s |\n|---|---|---|---|---|---|---|---|---|\n",
                settings[0].label, settings[1].label, settings[2].label);
    else
        fprintf(f, "%3s %5s %7s %6s %7s %7s  %-34s %-34s %-34s\n", "s", "bound", "max tau", "mean",
                "applied", "lr(B)", "A plain lr=1", "B plain lr=1/(2(1+s))", "C inverse lr=1");
    for (int i = 0; i < o->nstal; i++) {
        int s = o->stal[i];
        long long mt;
        double share, mean;
        char cells[NSETTINGS][96];
        s_facts(st, s, &mt, &share, &mean);
        for (int k = 0; k < NSETTINGS; k++) {
            cell c = make_cell(st, s, settings[k].key);
            cell_text(&c, cells[k], sizeof(cells[k]));
        }
        fprintf(f,
                md ? "| %d | %d | %lld | %.2f | %.3f | %.4g | %s | %s | %s |\n"
                   : "%3d %5d %7lld %6.2f %7.3f %7.4g  %-34s %-34s %-34s\n",
                s, bound_for(o, s), mt, mean, share, 1.0 / (2.0 * (1 + s)), cells[0], cells[1],
                cells[2]);
    }
    fprintf(f, "\n");
}

static void print_stability(const study *st, FILE *f, bool md)
{
    const study_opts *o = &st->o;
    if (md)
        fprintf(f,
                "| s | pull bound | largest stable lr (grid) | 1/(L(1+s)) | 1/(2L(1+s)) "
                "| rel. distance after %d steps there |\n|---|---|---|---|---|---|\n",
                o->stab_iterations);
    else
        fprintf(f, "%3s %5s %9s %9s %11s  %s\n", "s", "bound", "stable lr", "1/(1+s)", "1/(2(1+s))",
                "rel. distance at the end there");
    for (int i = 0; i < o->nstal; i++)
        fprintf(f,
                md ? "| %d | %d | %.4g | %.4g | %.4g | %.3g |\n"
                   : "%3d %5d %9.4g %9.4g %11.4g  %.3g\n",
                o->stal[i], bound_for(o, o->stal[i]), st->stable_lr[i], 1.0 / (1 + o->stal[i]),
                1.0 / (2.0 * (1 + o->stal[i])), st->stable_rel[i]);
    fprintf(f, "\n");
}

static void print_tables(const study *st, FILE *f, bool md)
{
    if (!st->o.no_steps)
        print_steps(st, f, md);
    if (!st->o.no_stability)
        print_stability(st, f, md);
}

static FILE *open_out(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "zepsctl study: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

static bool close_out(FILE *f, const char *path)
{
    if (fclose(f) == 0)
        return true;
    fprintf(stderr, "zepsctl study: cannot write %s: %s\n", path, strerror(errno));
    return false;
}

static void json_num(FILE *f, const char *key, double v, const char *after)
{
    if (isfinite(v))
        fprintf(f, "\"%s\": %.10g%s", key, v, after);
    else
        fprintf(f, "\"%s\": null%s", key, after);
}

static void json_run(FILE *f, const run *r)
{
    const run_spec *sp = &r->spec;
    fprintf(f, "    {\"part\": \"%s\", \"setting\": \"%c\", \"dir\": \"%s\", ", r->part,
            r->setting ? r->setting : '-', sp->name);
    fprintf(f, "\"consistency\": \"%s\", \"function\": \"%s\", \"s\": %d, \"bound\": %d, ",
            sp->consistency, sp->function, sp->s, sp->bound);
    fprintf(f, "\"lr\": %.10g, \"seed\": %d, \"iterations\": %d, \"outcome\": \"%s\", ", sp->lr,
            sp->seed, sp->iterations, outcome_word[r->out]);
    json_num(f, "updates_to_threshold", r->updates, ", ");
    json_num(f, "steps_to_threshold", r->steps, ", ");
    json_num(f, "final_rel_distance", r->final_rel, ", ");
    fprintf(f, "\"applied\": %lld, \"dropped\": %lld, \"max_tau\": %lld, ", r->applied, r->dropped,
            r->max_tau);
    json_num(f, "mean_tau", r->applied > 0 ? r->sum_tau / (double)r->applied : NAN, ", ");
    fprintf(f, "\"diverged_step\": %lld, ", r->diverged_step);
    fprintf(f, "\"local_status\": %d, \"wall_s\": %.3f}", r->status, r->wall_s);
}

static bool write_json(const study *st, const char *path)
{
    const study_opts *o = &st->o;
    FILE *f = open_out(path);
    if (!f)
        return false;
    fprintf(f, "{\n  \"command\": \"%s\",\n  \"study_dir\": \"%s\",\n", st->command, st->dir);
    fprintf(f, "  \"workers\": %d, \"dim\": %d, \"condition\": %.10g, \"seeds\": %d,\n", o->workers,
            o->dim, o->condition, o->seeds);
    fprintf(f,
            "  \"iterations\": %d, \"eval_every\": %d, \"delay_ms\": %.10g, "
            "\"delay_sigma\": %.10g, \"threshold\": %.10g,\n",
            o->iterations, o->eval_every, o->delay_ms, o->delay_sigma, o->threshold);
    fprintf(f, "  \"wall_s\": %.1f,\n  \"cells\": [\n", zp_now_s() - st->t0);
    for (int i = 0; i < o->nstal && !o->no_steps; i++)
        for (int k = 0; k < NSETTINGS; k++) {
            cell c = make_cell(st, o->stal[i], settings[k].key);
            fprintf(f, "    {\"s\": %d, \"setting\": \"%c\", \"label\": \"%s\", ", o->stal[i],
                    settings[k].key, settings[k].label);
            json_num(f, "median_updates", c.updates, ", ");
            json_num(f, "median_steps", c.steps, ", ");
            fprintf(f,
                    "\"runs\": %d, \"converged\": %d, \"diverged\": %d, \"stalled\": %d, "
                    "\"failed\": %d}%s\n",
                    c.n, c.count[CONVERGED], c.count[DIVERGED], c.count[STALLED], c.count[FAILED],
                    i + 1 < o->nstal || k + 1 < NSETTINGS ? "," : "");
        }
    fprintf(f, "  ],\n  \"stability\": [\n");
    for (int i = 0; i < o->nstal && !o->no_stability; i++) {
        fprintf(f, "    {\"s\": %d, ", o->stal[i]);
        json_num(f, "largest_stable_lr", st->stable_lr[i], ", ");
        json_num(f, "final_rel_distance_there", st->stable_rel[i], ", ");
        fprintf(f, "\"one_over_1_plus_s\": %.10g}%s\n", 1.0 / (1 + o->stal[i]),
                i + 1 < o->nstal ? "," : "");
    }
    fprintf(f, "  ],\n  \"curve_seed\": %d,\n  \"runs\": [\n", st->curve_seed);
    for (size_t i = 0; i < st->nruns; i++) {
        json_run(f, &st->runs[i]);
        fprintf(f, "%s\n", i + 1 < st->nruns ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return close_out(f, path);
}

static bool write_markdown(const study *st, const char *path)
{
    const study_opts *o = &st->o;
    FILE *f = open_out(path);
    if (!f)
        return false;
    fprintf(f, "<!-- Written by: %s -->\n\n", st->command);
    fprintf(f,
            "%d workers, quadratic dim %d, condition %g, delay %g ms lognormal (sigma %g), "
            "threshold %g, %d seeds, budget %d steps per worker. Cells: median over seeds "
            "of applied updates to the threshold (worker steps).\n\n",
            o->workers, o->dim, o->condition, o->delay_ms, o->delay_sigma, o->threshold, o->seeds,
            o->iterations);
    print_tables(st, f, true);
    return close_out(f, path);
}

/* Two gnuplot data blocks: plain async, then weighted inverse. */
static bool write_curves(const study *st, const char *path)
{
    FILE *f = open_out(path);
    if (!f)
        return false;
    fprintf(f, "# Written by: %s\n# rank 0's pulled parameters, seed %d, %d workers\n", st->command,
            st->curve_seed, st->o.workers);
    for (int k = 0; k < 2; k++) {
        const run *r = &st->runs[st->curve_runs[k]];
        fprintf(f, "%s# %s: %s, lr %g, %s\n# update step rel_distance loss\n", k ? "\n\n" : "",
                k ? "weighted inverse" : "plain async", r->spec.consistency, r->spec.lr,
                outcome_word[r->out]);
        for (size_t i = 0; i < r->ncurve; i++)
            fprintf(f, "%.0f %.0f %.6g %.6g\n", r->curve[i].version, r->curve[i].step,
                    r->curve[i].rel, r->curve[i].loss);
    }
    return close_out(f, path);
}

/* ------------------------------------------------------------ driver */

static bool make_study_dir(study *st)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", st->o.dir ? st->o.dir : "/tmp/zeps-study-XXXXXX");
    bool made = st->o.dir ? mkdir(tmp, 0755) == 0 || errno == EEXIST : mkdtemp(tmp) != NULL;
    char *abs = made ? realpath(tmp, NULL) : NULL;
    bool ok = abs && strlen(abs) < sizeof(st->dir) && !strpbrk(abs, "\"\\");
    if (ok)
        snprintf(st->dir, sizeof(st->dir), "%s", abs);
    else
        fprintf(stderr, "zepsctl study: cannot use %s as the study directory%s%s\n", tmp,
                made ? "" : ": ", made ? "" : strerror(errno));
    free(abs);
    return ok;
}

static void record_command(study *st, int argc, char **argv)
{
    int n = snprintf(st->command, sizeof(st->command), "zepsctl study");
    for (int i = 1; i < argc && n < (int)sizeof(st->command); i++)
        n += snprintf(st->command + n, sizeof(st->command) - (size_t)n, " %s", argv[i]);
    for (char *p = st->command; *p; p++)
        if (*p == '"' || *p == '\\')
            *p = '\'';
}

static bool write_outputs(study *st)
{
    char json[PATH_MAX], md[PATH_MAX], curves[PATH_MAX];
    snprintf(json, sizeof(json), "%s", st->o.json ? st->o.json : "");
    snprintf(md, sizeof(md), "%s", st->o.markdown ? st->o.markdown : "");
    snprintf(curves, sizeof(curves), "%s", st->o.curves ? st->o.curves : "");
    if (!json[0])
        snprintf(json, sizeof(json), "%s/study.json", st->dir);
    if (!md[0])
        snprintf(md, sizeof(md), "%s/study.md", st->dir);
    if (!curves[0])
        snprintf(curves, sizeof(curves), "%s/curves.dat", st->dir);
    bool ok = write_json(st, json) && write_markdown(st, md);
    if (st->curve_seed)
        ok = write_curves(st, curves) && ok;
    printf("study: %.0f s; JSON %s, markdown %s%s%s\n", zp_now_s() - st->t0, json, md,
           st->curve_seed ? ", curves " : "", st->curve_seed ? curves : "");
    return ok;
}

/* The subcommand (ctl.h): the parts asked for, one run at a time, then the
 * tables on stdout and the JSON, markdown and curves files. Returns 0 when
 * every run could be started and every output written, 1 if not, 2 on bad
 * options. */
int zp_ctl_study(int argc, char **argv)
{
    study *st = zp_xcalloc(1, sizeof(*st));
    int rc = parse_opts(argc, argv, &st->o);
    if (rc >= 0) {
        free(st);
        return rc;
    }
    record_command(st, argc, argv);
    zp_ctl_bindir(st->zepsctl, sizeof(st->zepsctl) - 16);
    strcat(st->zepsctl, "/zepsctl");
    rc = 1;
    if (make_study_dir(st)) {
        st->t0 = zp_now_s();
        fprintf(stderr, "study: directory %s\n", st->dir);
        bool ok = (st->o.no_steps || steps_part(st)) &&
                  (st->o.no_stability || stability_part(st)) &&
                  (st->o.no_curves || curves_part(st));
        printf("\n");
        print_tables(st, stdout, false);
        rc = write_outputs(st) && ok ? 0 : 1;
    }
    for (size_t i = 0; i < st->nruns; i++)
        free(st->runs[i].curve);
    free(st->runs);
    free(st);
    return rc;
}
