/*
 * ctl_sweep.c - `zepsctl study --model ...` (or --preset): staleness sweeps
 * over any built-in model. This file owns the options, the presets and the
 * driver: build the grid (ctl_sweep_grid.c), run every cell over its seeds
 * one at a time (ctl_sweep_run.c; a second cluster sharing the cores would
 * change the staleness being measured), then the table, JSON, markdown
 * (ctl_sweep_report.c) and figures (ctl_sweep_plot.c). The quadratic
 * textbook study without --model stays in ctl_study.c.
 *
 * The "dai" preset fills in the axes of Dai et al. (ICLR 2019): the mlp at
 * depths 1-4, sgd/momentum/adam, s in {0, 4, 8, 16}, exact staleness from
 * the shard with one worker, updates to a target test accuracy. The
 * "zhang" preset sets up the comparison of staleness-aware async (Zhang et
 * al., IJCAI 2016: the step over tau, weighting lr_over_tau) and DC-ASGD
 * (Zheng et al., ICML 2017: a lambda sweep) with plain async and bsp on the
 * mlp, the same s and delay model.
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
#include "ctl_sweep.h"
#include "now.h"

void zp_ctl_sweep_usage(FILE *f)
{
    fprintf(f,
            "usage: zepsctl study --model LIST [options]   (or --preset dai|zhang)\n\n"
            "Staleness sweeps over any built-in model (docs/consistency.md): the grid is\n"
            "the product of the axes below, each cell run over seeds, one `zepsctl local`\n"
            "cluster (1 server) at a time; a cell's outcome is the median over seeds of\n"
            "applied updates until rank 0's evaluation of what it pulled reaches the\n"
            "target. Axes (comma-separated lists):\n"
            "  --model LIST         quadratic, softmax, mlp, ctr (mlp)\n"
            "  --depth LIST         mlp hidden layers (1)\n"
            "  --width LIST         mlp hidden units per layer (64)\n"
            "  --optimizer LIST     sgd, momentum, adam (sgd)\n"
            "  --weighting LIST     none, inverse, lr_over_tau, exp, dc:LAMBDA (DC-ASGD),\n"
            "                       dca:LAMBDA0 (DC-ASGD-a: LAMBDA0 / sqrt(mean square of g),\n"
            "                       m = 0.95) (none)\n"
            "  --consistency LIST   async, ssp, bsp (async)\n"
            "  --staleness LIST     s (0,4,8,16)\n"
            "Delay model: --inject (tau ~ U{0..s} served by the shard, pulls in turns; the\n"
            "default with a preset) or real timing (lognormal delays per step; async\n"
            "bounds tau by dropping pushes older than s, ssp bounds clocks by s).\n"
            "  --seeds N            seeds per cell (3; a preset 2; --quick 1)\n"
            "  --workers N          workers (1 with --inject, else 4)\n"
            "  --target-accuracy X  classifiers: test accuracy to reach (mlp, softmax 0.75,\n"
            "                       ctr 0.77); quadratic: rel. distance to get under (1e-4)\n"
            "  --lr X               every cell's step (default per model and optimizer:\n"
            "                       nets sgd 0.1, momentum 0.01, adam 0.001)\n"
            "  --batch N, --train-examples N, --epochs N   the budget of the data models\n"
            "                       (32, 10000, 4); training stops at the target\n"
            "  --iterations N       quadratic's budget (3000)\n"
            "  --eval-every N       rank 0 evaluates every N steps (20; --quick 10)\n"
            "  --delay-ms M, --delay-sigma X   timing: median lognormal delay (1.0, 0.5)\n"
            "  --timeout S          per run (600)\n"
            "  --dir DIR, --json PATH, --markdown PATH   outputs (DIR/study.json, study.md)\n"
            "  --preset dai         mlp, depth 1,2,3,4, sgd,momentum,adam, s 0,4,8,16, --inject\n"
            "  --preset zhang       mlp, sgd, weighting none,lr_over_tau,dc:0.04,dc:0.4,dc:4,\n"
            "                       dc:40, consistency async,bsp (bsp: tau 0), s 0,4,8,16,\n"
            "                       --inject\n"
            "  --quick              CI size: 1 seed, s 0,8, 4000 examples, 3 epochs (dai:\n"
            "                       depth 1,3, sgd,adam, target 0.7; zhang: weighting\n"
            "                       none,lr_over_tau,dc:4)\n\n"
            "Tables: updates and rank 0's seconds of training to the target.\n"
            "Figures (gnuplot-nox): DIR/curves.png and DIR/cost.png.\n"
            "Exit status: 0 done (whatever the runs' outcomes); 1 a run could not be\n"
            "started or an output not written; 2 bad options.\n");
}

/* ---------------------------------------------------------------- lists */

/* Split arg at commas into at most max items, each handed to one(). */
static bool each_item(const char *arg, int max, bool (*one)(sweep_opts *, const char *, int),
                      sweep_opts *o, int *n)
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", arg);
    *n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == max || !one(o, t, *n))
            return false;
        (*n)++;
    }
    return *n > 0;
}

static bool int_item(int *out, const char *t, int lo, int hi)
{
    char *end;
    long v = strtol(t, &end, 10);
    *out = (int)v;
    return end != t && !*end && v >= lo && v <= hi;
}

static bool depth_item(sweep_opts *o, const char *t, int i)
{
    return int_item(&o->ax.depth[i], t, 1, 8);
}

static bool width_item(sweep_opts *o, const char *t, int i)
{
    return int_item(&o->ax.width[i], t, 1, 65536);
}

static bool stal_item(sweep_opts *o, const char *t, int i)
{
    return int_item(&o->ax.stal[i], t, 0, 100000);
}

static bool model_item(sweep_opts *o, const char *t, int i)
{
    return (o->ax.model[i] = zp_ctl_sweep_model_find(t)) != NULL;
}

static bool optimizer_item(sweep_opts *o, const char *t, int i)
{
    snprintf(o->ax.optimizer[i], SW_NAME, "%s", t);
    return strcmp(t, "sgd") == 0 || strcmp(t, "momentum") == 0 || strcmp(t, "adam") == 0;
}

static bool consistency_item(sweep_opts *o, const char *t, int i)
{
    snprintf(o->ax.consistency[i], SW_NAME, "%s", t);
    return strcmp(t, "async") == 0 || strcmp(t, "ssp") == 0 || strcmp(t, "bsp") == 0;
}

static bool weighting_item(sweep_opts *o, const char *t, int i)
{
    static const char *const fns[] = {"none", "inverse", "lr_over_tau", "exp"};
    sweep_weighting *w = &o->ax.weighting[i];
    snprintf(w->name, sizeof(w->name), "%s", t);
    w->function = "none";
    bool adaptive = strncmp(t, "dca:", 4) == 0;
    if (adaptive || strncmp(t, "dc:", 3) == 0) {
        const char *v = t + (adaptive ? 4 : 3);
        char *end;
        w->dc_lambda = strtod(v, &end);
        w->dc_mean_square = adaptive ? 0.95 : 0; /* the paper's m */
        return end != v && !*end && w->dc_lambda > 0 && w->dc_lambda < 1e6;
    }
    for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++)
        if (strcmp(t, fns[k]) == 0)
            w->function = fns[k];
    return strcmp(w->function, t) == 0;
}

/* ---------------------------------------------------------------- options */

enum {
    O_MODEL = 256,
    O_DEPTH,
    O_WIDTH,
    O_OPT,
    O_WEIGHT,
    O_CONS,
    O_STAL,
    O_SEEDS,
    O_WORKERS,
    O_TARGET,
    O_LR,
    O_BATCH,
    O_TRAIN,
    O_EPOCHS,
    O_ITER,
    O_EVAL,
    O_DELAY,
    O_SIGMA,
    O_TIMEOUT,
    O_DIR,
    O_JSON,
    O_MD,
    O_PRESET,
    O_QUICK,
    O_INJECT,
    O_HELP
};

static const struct option long_opts[] = {
    {"model", 1, NULL, O_MODEL},
    {"depth", 1, NULL, O_DEPTH},
    {"width", 1, NULL, O_WIDTH},
    {"optimizer", 1, NULL, O_OPT},
    {"weighting", 1, NULL, O_WEIGHT},
    {"consistency", 1, NULL, O_CONS},
    {"staleness", 1, NULL, O_STAL},
    {"seeds", 1, NULL, O_SEEDS},
    {"workers", 1, NULL, O_WORKERS},
    {"target-accuracy", 1, NULL, O_TARGET},
    {"lr", 1, NULL, O_LR},
    {"batch", 1, NULL, O_BATCH},
    {"train-examples", 1, NULL, O_TRAIN},
    {"epochs", 1, NULL, O_EPOCHS},
    {"iterations", 1, NULL, O_ITER},
    {"eval-every", 1, NULL, O_EVAL},
    {"delay-ms", 1, NULL, O_DELAY},
    {"delay-sigma", 1, NULL, O_SIGMA},
    {"timeout", 1, NULL, O_TIMEOUT},
    {"dir", 1, NULL, O_DIR},
    {"json", 1, NULL, O_JSON},
    {"markdown", 1, NULL, O_MD},
    {"preset", 1, NULL, O_PRESET},
    {"quick", 0, NULL, O_QUICK},
    {"inject", 0, NULL, O_INJECT},
    {"help", 0, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

static bool list_opt(sweep_opts *o, int c, const char *arg)
{
    sweep_axes *ax = &o->ax;
    switch (c) {
    case O_MODEL:
        return each_item(arg, 4, model_item, o, &ax->nmodel);
    case O_DEPTH:
        return each_item(arg, SW_MAX_AXIS, depth_item, o, &ax->ndepth);
    case O_WIDTH:
        return each_item(arg, SW_MAX_AXIS, width_item, o, &ax->nwidth);
    case O_OPT:
        return each_item(arg, 3, optimizer_item, o, &ax->noptimizer);
    case O_WEIGHT:
        return each_item(arg, SW_MAX_AXIS, weighting_item, o, &ax->nweighting);
    case O_CONS:
        return each_item(arg, 3, consistency_item, o, &ax->nconsistency);
    case O_STAL:
        return each_item(arg, SW_MAX_AXIS, stal_item, o, &ax->nstal);
    default:
        return false;
    }
}

static bool num_opt(sweep_opts *o, int c, const char *arg)
{
    const struct {
        int opt;
        int *i;
        double *d;
        double lo, hi;
    } nums[] = {
        {O_SEEDS, &o->seeds, NULL, 1, 99},          {O_WORKERS, &o->workers, NULL, 1, 64},
        {O_TARGET, NULL, &o->target, 1e-12, 1},     {O_LR, NULL, &o->lr, 1e-9, 1000},
        {O_BATCH, &o->batch, NULL, 1, 65536},       {O_TRAIN, &o->train_examples, NULL, 1, 60000},
        {O_EPOCHS, &o->epochs, NULL, 1, 10000},     {O_ITER, &o->iterations, NULL, 1, 1e8},
        {O_EVAL, &o->eval_every, NULL, 1, 1e6},     {O_DELAY, NULL, &o->delay_ms, 0, 60000},
        {O_SIGMA, NULL, &o->delay_sigma, 1e-6, 10}, {O_TIMEOUT, NULL, &o->timeout_s, 1, 1e6},
    };
    for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
        if (nums[k].opt != c)
            continue;
        char *end;
        double v = strtod(arg, &end);
        if (end == arg || *end || !(v >= nums[k].lo && v <= nums[k].hi) ||
            (nums[k].i && v != floor(v)))
            return false;
        if (nums[k].i)
            *nums[k].i = (int)v;
        else
            *nums[k].d = v;
        return true;
    }
    return false;
}

static bool apply_opt(sweep_opts *o, int c, const char *arg)
{
    switch (c) {
    case O_DIR:
        o->dir = arg;
        return true;
    case O_JSON:
        o->json = arg;
        return true;
    case O_MD:
        o->markdown = arg;
        return true;
    case O_PRESET:
        return strcmp(arg, "dai") == 0 || strcmp(arg, "zhang") == 0; /* the first pass */
    case O_QUICK:
    case O_INJECT:
        return true;
    default:
        return list_opt(o, c, arg) || num_opt(o, c, arg);
    }
}

/* Defaults, then the preset's (NULL, "dai" or "zhang") and --quick's,
 * before the options given. */
static void defaults(sweep_opts *o, bool quick, const char *preset, bool inject)
{
    bool dai = preset && strcmp(preset, "dai") == 0;
    bool zhang = preset && strcmp(preset, "zhang") == 0;
    *o = (sweep_opts){.seeds = quick    ? 1
                               : preset ? 2
                                        : 3,
                      .batch = 32,
                      .train_examples = quick ? 4000 : 10000,
                      .epochs = quick ? 3 : 4,
                      .iterations = 3000,
                      .eval_every = quick ? 10 : 20,
                      .target = quick && dai ? 0.7 : 0,
                      .delay_ms = 1.0,
                      .delay_sigma = 0.5,
                      .timeout_s = 600,
                      .quick = quick,
                      .inject = inject || preset,
                      .preset = preset};
    o->workers = o->inject ? 1 : 4;
    sweep_axes *ax = &o->ax;
    list_opt(o, O_MODEL, "mlp");
    list_opt(o, O_DEPTH, dai ? (quick ? "1,3" : "1,2,3,4") : "1");
    list_opt(o, O_WIDTH, "64");
    list_opt(o, O_OPT, dai ? (quick ? "sgd,adam" : "sgd,momentum,adam") : "sgd");
    list_opt(o, O_WEIGHT,
             !zhang  ? "none"
             : quick ? "none,lr_over_tau,dc:4"
                     : "none,lr_over_tau,dc:0.04,dc:0.4,dc:4,dc:40");
    list_opt(o, O_CONS, zhang ? "async,bsp" : "async");
    list_opt(o, O_STAL, quick ? "0,8" : "0,4,8,16");
    (void)ax;
}

/* Returns -1 to go on, or the exit status. */
static int parse_opts(int argc, char **argv, sweep_opts *o)
{
    bool quick = false, inject = false;
    const char *preset = NULL;
    for (int i = 1; i < argc; i++) {
        quick |= strcmp(argv[i], "--quick") == 0;
        inject |= strcmp(argv[i], "--inject") == 0;
        for (const char *const *p = (const char *const[]){"dai", "zhang", NULL}; *p; p++)
            if ((strncmp(argv[i], "--preset=", 9) == 0 && strcmp(argv[i] + 9, *p) == 0) ||
                (strcmp(argv[i], "--preset") == 0 && i + 1 < argc && strcmp(argv[i + 1], *p) == 0))
                preset = *p;
    }
    defaults(o, quick, preset, inject);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        if (c == O_HELP) {
            zp_ctl_sweep_usage(stdout);
            return 0;
        }
        if (c == '?' || !apply_opt(o, c, optarg)) {
            fprintf(stderr, "zepsctl study: bad option or value: '%s'\n", argv[optind - 1]);
            fprintf(stderr, "'zepsctl study --model mlp --help' lists the options\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "zepsctl study: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

/* ---------------------------------------------------------------- driver */

static bool make_dir(sweep *sw)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", sw->o.dir ? sw->o.dir : "/tmp/zeps-study-XXXXXX");
    bool made = sw->o.dir ? mkdir(tmp, 0755) == 0 || errno == EEXIST : mkdtemp(tmp) != NULL;
    char *abs = made ? realpath(tmp, NULL) : NULL;
    bool ok = abs && strlen(abs) < sizeof(sw->dir) && !strpbrk(abs, "\"\\");
    if (ok)
        snprintf(sw->dir, sizeof(sw->dir), "%s", abs);
    else
        fprintf(stderr, "zepsctl study: cannot use %s as the study directory\n", tmp);
    free(abs);
    return ok;
}

static void record_command(sweep *sw, int argc, char **argv)
{
    int n = snprintf(sw->command, sizeof(sw->command), "zepsctl study");
    for (int i = 1; i < argc && n < (int)sizeof(sw->command); i++)
        n += snprintf(sw->command + n, sizeof(sw->command) - (size_t)n, " %s", argv[i]);
    for (char *p = sw->command; *p; p++)
        if (*p == '"' || *p == '\\')
            *p = '\'';
}

static bool run_all(sweep *sw)
{
    if (!zp_ctl_sweep_model_prepare(sw))
        return false;
    for (size_t i = 0; i < sw->ncells; i++)
        for (int seed = 1; seed <= sw->o.seeds; seed++)
            if (!zp_ctl_sweep_run_one(sw, &sw->cells[i], seed))
                return false;
    return true;
}

bool zp_ctl_sweep_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--model", 7) == 0 || strncmp(argv[i], "--preset", 8) == 0)
            return true;
    return false;
}

int zp_ctl_sweep(int argc, char **argv)
{
    sweep *sw = zp_alloc_zeroed(1, sizeof(*sw));
    int rc = parse_opts(argc, argv, &sw->o);
    if (rc < 0) {
        record_command(sw, argc, argv);
        zp_zepsctl_bindir(sw->zepsctl, sizeof(sw->zepsctl) - 16);
        strcat(sw->zepsctl, "/zepsctl");
        rc = 1;
    }
    if (rc == 1 && make_dir(sw)) {
        zp_ctl_sweep_grid_build(sw);
        sw->t0 = zp_now_s();
        fprintf(stderr, "study: directory %s, %zu cells x %d seeds\n", sw->dir, sw->ncells,
                sw->o.seeds);
        bool ok = run_all(sw);
        sw->wall_s = zp_now_s() - sw->t0;
        zp_ctl_sweep_report_table(sw, stdout, false);
        rc = zp_ctl_sweep_report_write(sw) && zp_ctl_sweep_plot_write(sw) && ok ? 0 : 1;
    }
    for (size_t i = 0; i < sw->nruns; i++)
        free(sw->runs[i].curve);
    free(sw->runs);
    zp_ctl_sweep_grid_free(sw);
    free(sw);
    return rc;
}
