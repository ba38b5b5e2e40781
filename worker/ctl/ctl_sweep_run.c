/*
 * ctl_sweep_run.c - one seed of one cell of a sweep: its cluster file, the
 * `zepsctl local` child (ctl_study_run.c runs it, as for the textbook
 * study) and what it left: rank 0's curve, from which the updates to the
 * target are read, and whether a worker diverged.
 *
 * How a cell's staleness s becomes a cluster file:
 *  - --inject: the shard serves every pull tau ~ U{0..s} versions old
 *    (s = 0: fixed tau 0), pulls in turns; the mode is the cell's (async,
 *    ssp with staleness s), or "weighted" without bound or drops when the
 *    cell weights (w(tau) or DC-ASGD), which then sees the exact tau. A bsp
 *    cell is served tau 0 (fixed) whatever s: bsp is the baseline without
 *    staleness, as under timing, where a round's pulls wait for all of the
 *    previous round.
 *  - timing: every worker sleeps a lognormal delay per step; async is
 *    "weighted" with max_staleness s and pull bound floor(s / workers) (the
 *    textbook study's exact bound by drops); ssp is ssp with staleness s
 *    (a weighting cell: weighted with bound s); bsp ignores s.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "freeport.h"
#include "alloc.h"
#include "ctl.h"
#include "ctl_json.h"
#include "ctl_sweep.h"
#include "now.h"

/* The weighting group of a weighted cell: max_staleness and pull bound. */
static void write_weighting(FILE *f, const sweep *sw, const sweep_cell *c, bool ssp)
{
    int maxs = sw->o.inject || ssp ? -1 : c->s;
    int bound = sw->o.inject ? -1 : ssp ? c->s : c->s / sw->o.workers;
    fprintf(f, "  consistency = \"weighted\";\n");
    fprintf(f,
            "  weighting = { function = \"%s\"; dc_lambda = %.10g; dc_mean_square = %.10g; "
            "max_staleness = %d; bound = %d; };\n",
            c->weighting->function, c->weighting->dc_lambda, c->weighting->dc_mean_square, maxs,
            bound);
}

/* The consistency axis: what each mode's cluster file needs written. */
static const struct sweep_mode {
    const char *name;
    bool bounded; /* staleness = s (ssp) */
    bool rounds;  /* applies in rounds: no weighting (bsp) */
} sweep_modes[] = {{"async", false, false}, {"ssp", true, false}, {"bsp", false, true}};

static const struct sweep_mode *mode_named(const char *consistency)
{
    for (size_t i = 0; i < sizeof(sweep_modes) / sizeof(sweep_modes[0]); i++)
        if (strcmp(sweep_modes[i].name, consistency) == 0)
            return &sweep_modes[i];
    return &sweep_modes[0]; /* ctl_sweep.c admits only the names above */
}

static const struct sweep_mode *mode_of(const sweep_cell *c)
{
    return mode_named(c->consistency);
}

bool zp_ctl_sweep_run_rounds(const char *consistency)
{
    return mode_named(consistency)->rounds;
}

static void write_mode(FILE *f, const sweep *sw, const sweep_cell *c)
{
    const struct sweep_mode *m = mode_of(c);
    bool ssp = m->bounded, bsp = m->rounds;
    bool plain = strcmp(c->weighting->name, "none") == 0;
    if (!bsp && (!plain || (!sw->o.inject && !ssp)))
        write_weighting(f, sw, c, ssp);
    else if (ssp)
        fprintf(f, "  consistency = \"ssp\"; staleness = %d;\n", c->s);
    else
        fprintf(f, "  consistency = \"%s\";\n", c->consistency);
    int s = bsp ? 0 : c->s;
    if (sw->o.inject)
        fprintf(f, "  inject = { schedule = \"%s\"; %s = %d; seed = %d; };\n",
                s > 0 ? "uniform" : "fixed", s > 0 ? "max_tau" : "tau", s, 1);
}

static bool write_conf(const sweep *sw, const sweep_cell *c, int seed, double lr, const char *path)
{
    const sweep_opts *o = &sw->o;
    int port = zp_freeport_pick();
    FILE *f = port > 0 ? fopen(path, "w") : NULL;
    if (!f) {
        fprintf(stderr, "zepsctl study: cannot write %s: %s\n", path, strerror(errno));
        return false;
    }
    fprintf(f, "# Written by zepsctl study (sweep).\ncluster = {\n");
    fprintf(f, "  servers = [\"tcp://127.0.0.1:%d\"];\n  workers = %d;\n", port, o->workers);
    write_mode(f, sw, c);
    fprintf(f, "};\ntraining = {\n");
    c->model->write_training(f, sw, c);
    fprintf(f, "  optimizer = \"%s\"; lr = %.10g; seed = %d; eval_every_steps = %d;\n",
            c->optimizer, lr, seed, o->eval_every);
    if (c->model->classifier)
        fprintf(f, "  target_accuracy = %.10g;\n", zp_ctl_sweep_grid_target(sw, c->model));
    if (!o->inject)
        fprintf(f, "  delay_ms = %.10g; delay_dist = \"lognormal\"; delay_sigma = %.10g;\n",
                o->delay_ms, o->delay_sigma);
    fprintf(f, "};\n");
    if (fclose(f) == 0)
        return true;
    fprintf(stderr, "zepsctl study: cannot write %s: %s\n", path, strerror(errno));
    return false;
}

/* Did any worker write "diverged":true? */
static bool any_diverged(const sweep *sw, const char *rundir)
{
    bool diverged = false;
    for (int w = 0; w < sw->o.workers && !diverged; w++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/worker-%d.json", rundir, w);
        char *text = zp_ctl_json_slurp(path, MAX_FILE);
        diverged = text && strstr(text, "\"diverged\":true");
        free(text);
    }
    return diverged;
}

/* At the target: accuracy >= target, or (quadratic) rel. distance < it. */
static bool at_target(const sweep *sw, const sweep_run *r, const curve_pt *pt)
{
    double t = zp_ctl_sweep_grid_target(sw, r->cell.model);
    return r->cell.model->classifier ? pt->acc >= t : pt->rel < t;
}

/* Seconds from the start of rank 0's training to its curve point idx: the
 * third number of entry idx of "curve_comm" in its result (same order as
 * "curve"), or INFINITY. */
static double curve_time(const char *rundir, size_t idx)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/worker-0.json", rundir);
    char *text = zp_ctl_json_slurp(path, MAX_FILE);
    const char *p = text ? strstr(text, "\"curve_comm\":[") : NULL;
    double t = INFINITY;
    if (p)
        p += strlen("\"curve_comm\":"); /* the outer '[' */
    for (size_t i = 0; p && i <= idx; i++)
        p = strchr(p + 1, '[');
    for (int k = 0; p && k < 2; k++)
        p = strchr(p + 1, ',');
    if (p)
        t = strtod(p + 1, NULL);
    free(text);
    return t;
}

static void judge(const sweep *sw, sweep_run *r, bool diverged, const char *rundir)
{
    bool cls = r->cell.model->classifier;
    r->updates = r->steps = r->target_s = INFINITY;
    r->best = cls ? 0 : INFINITY;
    for (size_t i = 0; i < r->ncurve; i++) {
        const curve_pt *pt = &r->curve[i];
        diverged |= !isfinite(pt->loss) || (!cls && !(pt->rel <= DIVERGED_REL));
        r->best = cls ? fmax(r->best, pt->acc) : fmin(r->best, pt->rel);
        if (isinf(r->updates) && at_target(sw, r, pt)) {
            r->updates = pt->version;
            r->steps = pt->step;
            r->target_s = curve_time(rundir, i);
        }
    }
    r->out = isfinite(r->updates) ? SW_REACHED
             : diverged           ? SW_DIVERGED
             : r->status != 0     ? SW_FAILED
                                  : SW_MISSED;
}

static void describe(const sweep_run *r, const char *name)
{
    static const char *const words[] = {"reached the target", "diverged", "missed the target",
                                        "failed"};
    fprintf(stderr, "study: %s seed %d lr %.4g: %s", name, r->seed, r->lr, words[r->out]);
    if (r->out == SW_REACHED)
        fprintf(stderr, " at update %.0f (step %.0f, %.1f s)", r->updates, r->steps, r->target_s);
    fprintf(stderr, ", best %.4g, in %.1f s\n", r->best, r->wall_s);
}

static sweep_run *new_run(sweep *sw, const sweep_cell *c, int seed)
{
    if (sw->nruns == sw->cap) {
        sw->cap = sw->cap ? 2 * sw->cap : 64;
        sw->runs = zp_alloc_resize(sw->runs, sw->cap * sizeof(sweep_run));
    }
    sweep_run *r = &sw->runs[sw->nruns++];
    *r = (sweep_run){.cell = *c, .seed = seed, .lr = zp_ctl_sweep_grid_lr(sw, c)};
    return r;
}

sweep_run *zp_ctl_sweep_run_one(sweep *sw, const sweep_cell *c, int seed)
{
    char name[96], rundir[PATH_MAX - 64], conf[PATH_MAX];
    zp_ctl_sweep_grid_name(c, name, sizeof(name));
    snprintf(rundir, sizeof(rundir), "%s/%s-seed%d", sw->dir, name, seed);
    snprintf(conf, sizeof(conf), "%s/study.conf", rundir);
    sweep_run *r = new_run(sw, c, seed);
    if ((mkdir(rundir, 0755) != 0 && errno != EEXIST) || !write_conf(sw, c, seed, r->lr, conf))
        return NULL;
    if (!zp_ctl_study_run_and_read(sw->zepsctl, conf, rundir, sw->o.timeout_s, &r->status,
                                   &r->wall_s, &r->curve, &r->ncurve))
        return NULL;
    judge(sw, r, any_diverged(sw, rundir), rundir);
    describe(r, name);
    return r;
}
