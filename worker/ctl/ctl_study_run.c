/*
 * ctl_study_run.c - `zepsctl study`: one run. Write its cluster file, run
 * `zepsctl local` on it as a child (common/spawn.c) with its output in the
 * run directory, wait, and read what it left behind: rank 0's result JSON
 * (the convergence curve), every worker's (did one diverge?) and the
 * shard's trace CSV. zeps writes those files itself in a fixed flat
 * format, so they are read with strstr/strtod, not a JSON library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "freeport.h"
#include "spawn.h"
#include "alloc.h"
#include "now.h"
#include "ctl.h"
#include "ctl_json.h"
#include "ctl_study.h"

const char *const zp_ctl_study_run_outcome_word[NOUTCOMES] = {"converged", "diverges", "stalls",
                                                              "fails"};
const char *const zp_ctl_study_run_outcome_verb[NOUTCOMES] = {"converge", "diverge", "stall",
                                                              "fail"};

static bool write_conf(const study *st, const run_spec *sp, const char *rundir, const char *path)
{
    const study_opts *o = &st->o;
    int port = zp_freeport_pick();
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
                sp->function, sp->inject ? -1 : sp->s, sp->bound);
    if (sp->inject)
        fprintf(f, "  inject = { schedule = \"%s\"; %s = %d; seed = %d; };\n", sp->inject,
                strcmp(sp->inject, "fixed") == 0 ? "tau" : "max_tau", sp->s, sp->seed);
    fprintf(f, "  trace_dir = \"%s\";\n};\ntraining = {\n", rundir);
    fprintf(f, "  model = \"quadratic\"; epochs = 1; iterations = %d; dim = %d;\n", sp->iterations,
            o->dim);
    fprintf(f, "  condition = %.10g; optimizer = \"sgd\"; lr = %.10g;\n", o->condition, sp->lr);
    fprintf(f, "  eval_every_steps = %d; seed = %d;\n", sp->eval_every, sp->seed);
    if (sp->target > 0)
        fprintf(f, "  target_rel_distance = %.10g;\n", sp->target);
    fprintf(f, "  delay_ms = %.10g; delay_dist = \"lognormal\"; delay_sigma = %.10g;\n};\n",
            o->delay_ms, o->delay_sigma);
    if (fclose(f) == 0)
        return true;
    fprintf(stderr, "zepsctl study: cannot write %s: %s\n", path, strerror(errno));
    return false;
}

int zp_ctl_study_run_local(const char *zepsctl, const char *conf, const char *rundir,
                           double timeout_s)
{
    char log[PATH_MAX + 32], tmo[32];
    snprintf(log, sizeof(log), "%s/local.log", rundir);
    snprintf(tmo, sizeof(tmo), "%.0f", timeout_s);
    char *argv[] = {(char *)zepsctl, "local",        "--config",  (char *)conf, "-q",
                    "--dir",         (char *)rundir, "--timeout", tmo,          NULL};
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

bool zp_ctl_study_run_parse_curve(const char *text, curve_pt **curve, size_t *ncurve)
{
    static const char key[] = "\"curve\":[";
    const char *p = strstr(text, key);
    if (!p)
        return false;
    p += strlen(key);
    size_t cap = *ncurve;
    while (*p == '[') {
        double v[6];
        p++;
        for (int i = 0; i < 6; i++)
            if (!curve_value(&p, i < 5 ? ',' : ']', &v[i]))
                return false;
        if (*ncurve == cap) {
            cap = cap ? 2 * cap : 256;
            *curve = zp_alloc_resize(*curve, cap * sizeof(curve_pt));
        }
        (*curve)[(*ncurve)++] =
            (curve_pt){.step = v[0], .loss = v[1], .rel = v[2], .acc = v[4], .version = v[5]};
        if (*p == ',')
            p++;
    }
    return *p == ']';
}

bool zp_ctl_study_run_and_read(const char *zepsctl, const char *conf, const char *rundir,
                               double timeout_s, int *status, double *wall_s, curve_pt **curve,
                               size_t *ncurve)
{
    char path[PATH_MAX];
    double t0 = zp_now_s();
    *status = zp_ctl_study_run_local(zepsctl, conf, rundir, timeout_s);
    *wall_s = zp_now_s() - t0;
    if (*status < 0 || *status == 127 || *status >= 128) {
        fprintf(stderr, "zepsctl study: zepsctl local %s (see %s/local.log); stopping\n",
                *status >= 128 ? "was stopped by a signal" : "could not run", rundir);
        return false;
    }
    snprintf(path, sizeof(path), "%s/worker-0.json", rundir);
    char *text = zp_ctl_json_slurp(path, MAX_FILE);
    if (text && !zp_ctl_study_run_parse_curve(text, curve, ncurve))
        fprintf(stderr, "zepsctl study: cannot read the curve in %s\n", path);
    free(text);
    return true;
}

/* Did any worker write "diverged":true? Sets r->diverged_step. */
static bool any_diverged(const study *st, const char *rundir, run *r)
{
    bool diverged = false;
    for (int w = 0; w < st->o.workers; w++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/worker-%d.json", rundir, w);
        char *text = zp_ctl_json_slurp(path, MAX_FILE),
             *p = text ? strstr(text, "\"diverged\":true") : NULL;
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
        fprintf(stderr, "%s (final rel. distance %.3g)", zp_ctl_study_run_outcome_word[r->out],
                r->final_rel);
    fprintf(stderr, " in %.1f s; %lld applied, %lld dropped, tau mean %.2f max %lld\n", r->wall_s,
            r->applied, r->dropped, r->applied > 0 ? r->sum_tau / r->applied : NAN, r->max_tau);
}

/* Run sp and record it. Returns the record (valid until the next run), or
 * NULL if the study must stop (no zepsctl local, or it got a signal). */
run *zp_ctl_study_run_one(study *st, const run_spec *sp, const char *part, char setting)
{
    char rundir[PATH_MAX - 128], conf[PATH_MAX];
    snprintf(rundir, sizeof(rundir), "%s/%s", st->dir, sp->name);
    snprintf(conf, sizeof(conf), "%s/study.conf", rundir);
    if ((mkdir(rundir, 0755) != 0 && errno != EEXIST) || !write_conf(st, sp, rundir, conf))
        return NULL;
    if (st->nruns == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->runs = zp_alloc_resize(st->runs, st->cap * sizeof(run));
    }
    run *r = &st->runs[st->nruns++];
    *r = (run){.part = part,
               .setting = setting,
               .spec = *sp,
               .applied = -1,
               .dropped = -1,
               .max_tau = -1,
               .diverged_step = -1};
    double timeout = st->o.timeout_s > 0 ? st->o.timeout_s : 60 + 0.05 * sp->iterations;
    if (!zp_ctl_study_run_and_read(st->zepsctl, conf, rundir, timeout, &r->status, &r->wall_s,
                                   &r->curve, &r->ncurve))
        return NULL;
    judge(st, r, any_diverged(st, rundir, r));
    read_trace(rundir, r, st->o.keep_traces);
    describe(st, r);
    return r;
}
