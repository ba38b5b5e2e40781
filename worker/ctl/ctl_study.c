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
 *
 * With --inject the staleness is exact instead: the shard serves every
 * pull tau ~ U{0..s} versions old (cluster.inject, pulls in turns), no
 * delays, no drops, a fourth setting D w(tau) = 1/max(1,tau), and the
 * stability part bisects the largest stable lr with fixed tau = s, beside
 * 2 sin(pi/(4s+2)).
 *
 * This file: options, the parts and the driver; one run is
 * ctl_study_run.c, the outputs ctl_study_report.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "ctl.h"
#include "ctl_study.h"
#include "ctl_sweep.h"
#include "now.h"

const study_setting zp_ctl_study_settings[NSETTINGS] = {
    {'A', "plain, lr = 1/L", "none", false},
    {'B', "plain, lr = 1/(2L(1+s))", "none", true},
    {'C', "inverse, lr = 1/L", "inverse", false},
    {'D', "lr_over_tau, lr = 1/L", "lr_over_tau", false},
};

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: zepsctl study [options]\n\n"
            "Staleness sweeps on the quadratic model (docs/consistency.md), each run a\n"
            "`zepsctl local` cluster with 1 server. Staleness bound s: consistency\n"
            "\"weighted\", max_staleness = s, pull bound floor(s / workers). Per s and seed:\n"
            "  A plain (w = 1) at lr = 1/L = 1, B plain at lr = 1/(2L(1+s)), C w = 1/(1+tau)\n"
            "  and D w = 1/max(1,tau) at lr = 1; the table is the median over seeds of\n"
            "  updates to the threshold.\n"
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
            "  --quick              smoke test: s in {0,5}, 1 seed, 1500 steps, grid 500\n"
            "  --inject             exact staleness instead of timing: the shard serves every\n"
            "                       pull tau ~ U{0..s} versions old (fixed tau = s for the\n"
            "                       stability part, found by bisection and set beside\n"
            "                       2 sin(pi/(4s+2))), pulls in turns, no delays, no bound;\n"
            "                       a run of the table ends at the threshold (rank 0's\n"
            "                       FINISH stops every worker); defaults then:\n"
            "                       s in {0,1,2,5,10,20,50}, 20000 steps, eval every step,\n"
            "                       no curves (docs/consistency.md)\n"
            "  --bisect N           --inject: bisection steps for the stable lr (7)\n\n"
            "Exit status: 0 done (whatever the runs' outcomes); 1 a run could not be\n"
            "started or an output not written; 2 bad options.\n\n"
            "With --model or --preset, a sweep over any built-in model instead:\n\n");
    zp_ctl_sweep_usage(f);
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
    O_INJECT,
    O_BISECT,
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
    {"inject", 0, NULL, O_INJECT},
    {"bisect", 1, NULL, O_BISECT},
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
        {O_BISECT, &o->bisect, NULL, 1, 30},
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
    case O_INJECT:
        return true; /* seen in the first pass */
    default:
        return set_num(o, c, arg);
    }
}

/* --inject's defaults over those: exact tau needs no delays and no bound,
 * and reaches larger s in the time timing-made staleness takes. */
static void inject_defaults(study_opts *o, bool quick)
{
    static const int stal[] = {0, 1, 2, 5, 10, 20, 50}, quick_stal[] = {0, 2, 5};
    o->inject = true;
    o->no_curves = true;
    o->delay_ms = 0;
    o->eval_every = 1;
    o->bisect = 7;
    o->iterations = quick ? 2000 : 20000;
    o->stab_iterations = quick ? 400 : 1500;
    o->nstal = quick ? 3 : 7;
    memcpy(o->stal, quick ? quick_stal : stal, (size_t)o->nstal * sizeof(int));
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
    bool quick = false, inject = false;
    for (int i = 1; i < argc; i++) {
        quick |= strcmp(argv[i], "--quick") == 0;
        inject |= strcmp(argv[i], "--inject") == 0;
    }
    defaults(o, quick);
    if (inject)
        inject_defaults(o, quick);
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

/* ------------------------------------------------------------ the parts */

int zp_ctl_study_bound_for(const study_opts *o, int s)
{
    return o->bound != INT_MIN ? o->bound : s / o->workers;
}

static double setting_lr(const study_setting *set, int s)
{
    return set->theorem_step ? 1.0 / (2.0 * (1.0 + s)) : 1.0; /* L = 1 */
}

double zp_ctl_study_analytic_lr(int s)
{
    return 2.0 * sin(M_PI / (4.0 * s + 2.0));
}

/* One cell's run: a bound s made by dropping (weighted, max_staleness s),
 * or, with --inject, tau ~ U{0..s} served by the shard (plain settings
 * async, weighted ones without a bound or drops). */
static run_spec cell_spec(const study_opts *o, const study_setting *set, int s, int seed)
{
    bool plain = strcmp(set->function, "none") == 0;
    run_spec sp = {.consistency = o->inject && plain ? "async" : "weighted",
                   .weighting = !(o->inject && plain),
                   .function = set->function,
                   .s = s,
                   .bound = o->inject ? -1 : zp_ctl_study_bound_for(o, s),
                   .inject = !o->inject ? NULL
                             : s > 0    ? "uniform"
                                        : "fixed",
                   .lr = setting_lr(set, s),
                   /* --inject: the run ends at the threshold (the workers stop
                    * on FINISH); the updates before it are the same */
                   .target = o->inject ? o->threshold : 0,
                   .seed = seed,
                   .iterations = o->iterations,
                   .eval_every = o->eval_every};
    return sp;
}

static bool steps_part(study *st)
{
    const study_opts *o = &st->o;
    for (int i = 0; i < o->nstal; i++)
        for (int k = 0; k < NSETTINGS; k++)
            for (int seed = 1; seed <= o->seeds; seed++) {
                run_spec sp = cell_spec(o, &zp_ctl_study_settings[k], o->stal[i], seed);
                snprintf(sp.name, sizeof(sp.name), "steps-s%d-%c-seed%d", sp.s,
                         zp_ctl_study_settings[k].key, seed);
                if (!zp_ctl_study_run_one(st, &sp, "steps", zp_ctl_study_settings[k].key))
                    return false;
            }
    return true;
}

/* A run at lr that a fixed delay s makes unstable: it diverged, or its
 * distance grew over the second half of the budget and ended above 1e-3
 * (near the edge growth is too slow to reach the divergence threshold;
 * float32 noise stays far below 1e-3). */
static bool unstable_run(const run *r)
{
    if (r->out == DIVERGED)
        return true;
    if (r->ncurve < 2)
        return false;
    double mid = r->curve[r->ncurve / 2].rel;
    return r->final_rel > mid && r->final_rel > 1e-3;
}

/* --inject: the largest stable lr with every push exactly s old, by
 * bisection of [0, 2.2] (2.2 > 2 sin(pi/2) diverges at every s). */
static bool stability_bisect(study *st, int i)
{
    const study_opts *o = &st->o;
    double lo = 0, hi = 2.2, rel = NAN;
    for (int step = 0; step <= o->bisect; step++) {
        double lr = step == 0 ? hi : 0.5 * (lo + hi);
        run_spec sp = {.consistency = "async",
                       .function = "none",
                       .s = o->stal[i],
                       .bound = -1,
                       .inject = "fixed",
                       .lr = lr,
                       .seed = 1,
                       .iterations = o->stab_iterations,
                       .eval_every = o->eval_every};
        snprintf(sp.name, sizeof(sp.name), "stab-s%d-lr%.6g", sp.s, lr);
        const run *r = zp_ctl_study_run_one(st, &sp, "stability", 0);
        if (!r)
            return false;
        if (unstable_run(r)) {
            hi = lr;
        } else if (step == 0) {
            lo = hi; /* not even 2.2 diverged: say so, do not bisect */
            rel = r->final_rel;
            break;
        } else {
            lo = lr;
            rel = r->final_rel;
        }
    }
    st->stable_lr[i] = lo;
    st->unstable_lr[i] = hi;
    st->stable_rel[i] = rel;
    return true;
}

/* Largest lr of the grid at which no seed diverges within the budget:
 * going down the grid, the first such lr. */
static bool stability_part(study *st)
{
    const study_opts *o = &st->o;
    for (int i = 0; i < o->nstal && o->inject; i++)
        if (!stability_bisect(st, i))
            return false;
    for (int i = 0; i < o->nstal && !o->inject; i++) {
        st->stable_lr[i] = 0;
        for (int g = 0; g < NGRID && st->stable_lr[i] == 0; g++) {
            double lr = 2.0 * pow(2.0, -0.5 * g), worst = 0;
            bool stable = true;
            for (int seed = 1; seed <= o->stab_seeds && stable; seed++) {
                run_spec sp = {.consistency = "weighted",
                               .weighting = true,
                               .function = "none",
                               .s = o->stal[i],
                               .bound = zp_ctl_study_bound_for(o, o->stal[i]),
                               .lr = lr,
                               .seed = seed,
                               .iterations = o->stab_iterations,
                               .eval_every = o->eval_every};
                snprintf(sp.name, sizeof(sp.name), "stab-s%d-lr%.4g-seed%d", sp.s, lr, seed);
                const run *r = zp_ctl_study_run_one(st, &sp, "stability", 0);
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
        const run *r = zp_ctl_study_run_one(st, &sp, "curves", 0);
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
    if (!zp_ctl_study_run_one(st, &sp, "curves", 0))
        return false;
    st->curve_runs[1] = st->nruns - 1;
    return true;
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

int zp_ctl_study(int argc, char **argv)
{
    if (zp_ctl_sweep_wanted(argc, argv))
        return zp_ctl_sweep(argc, argv); /* any model: ctl_sweep.c */
    study *st = zp_alloc_zeroed(1, sizeof(*st));
    int rc = parse_opts(argc, argv, &st->o);
    if (rc >= 0) {
        free(st);
        return rc;
    }
    record_command(st, argc, argv);
    zp_zepsctl_bindir(st->zepsctl, sizeof(st->zepsctl) - 16);
    strcat(st->zepsctl, "/zepsctl");
    rc = 1;
    if (make_study_dir(st)) {
        st->t0 = zp_now_s();
        fprintf(stderr, "study: directory %s\n", st->dir);
        bool ok = (st->o.no_steps || steps_part(st)) &&
                  (st->o.no_stability || stability_part(st)) &&
                  (st->o.no_curves || curves_part(st));
        printf("\n");
        zp_ctl_study_report_tables(st, stdout, false);
        rc = zp_ctl_study_report_write(st) && zp_ctl_study_plot_write(st) && ok ? 0 : 1;
    }
    for (size_t i = 0; i < st->nruns; i++)
        free(st->runs[i].curve);
    free(st->runs);
    free(st);
    return rc;
}
