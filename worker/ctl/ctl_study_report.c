/*
 * ctl_study_report.c - `zepsctl study`: the outputs. Per s and setting the
 * median over seeds of the updates to the threshold (a cell), the stable
 * step sizes, printed as text or markdown; every run as JSON; the curves'
 * runs as gnuplot data blocks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl_study.h"
#include "now.h"

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
    double *u = zp_alloc_zeroed(st->nruns + 1, sizeof(double)),
           *k = zp_alloc_zeroed(st->nruns + 1, sizeof(double));
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
        n = snprintf(buf, len, "%s", zp_ctl_study_run_outcome_word[top]);
    const char *sep = " (";
    for (int i = 0; i < NOUTCOMES && n < (int)len; i++) {
        if (!c->count[i] || (i == CONVERGED && isfinite(c->updates)))
            continue;
        n += snprintf(buf + n, len - (size_t)n, "%s%d/%d %s", sep, c->count[i], c->n,
                      zp_ctl_study_run_outcome_verb[i]);
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

double zp_ctl_study_report_median_updates(const study *st, int s, char setting)
{
    return make_cell(st, s, setting).updates;
}

static void print_steps(const study *st, FILE *f, bool md)
{
    const study_opts *o = &st->o;
    if (md)
        fprintf(f,
                "| s | pull bound | max τ applied | mean τ (B) | applied share (B) | lr of B "
                "| A: %s | B: %s | C: %s | D: %s |\n|---|---|---|---|---|---|---|---|---|---|\n",
                zp_ctl_study_settings[0].label, zp_ctl_study_settings[1].label,
                zp_ctl_study_settings[2].label, zp_ctl_study_settings[3].label);
    else
        fprintf(f, "%3s %5s %7s %6s %7s %7s  %-30s %-30s %-30s %-30s\n", "s", "bound", "max tau",
                "mean", "applied", "lr(B)", "A plain lr=1", "B plain lr=1/(2(1+s))",
                "C inverse lr=1", "D 1/max(1,tau) lr=1");
    for (int i = 0; i < o->nstal; i++) {
        int s = o->stal[i];
        long long mt;
        double share, mean;
        char cells[NSETTINGS][96];
        s_facts(st, s, &mt, &share, &mean);
        for (int k = 0; k < NSETTINGS; k++) {
            cell c = make_cell(st, s, zp_ctl_study_settings[k].key);
            cell_text(&c, cells[k], sizeof(cells[k]));
        }
        fprintf(f,
                md ? "| %d | %d | %lld | %.2f | %.3f | %.4g | %s | %s | %s | %s |\n"
                   : "%3d %5d %7lld %6.2f %7.3f %7.4g  %-30s %-30s %-30s %-30s\n",
                s, o->inject ? -1 : zp_ctl_study_bound_for(o, s), mt, mean, share,
                1.0 / (2.0 * (1 + s)), cells[0], cells[1], cells[2], cells[3]);
    }
    fprintf(f, "\n");
}

/* --inject: the bisection's bracket beside the delayed-gradient bound. */
static void print_stability_bisect(const study *st, FILE *f, bool md)
{
    const study_opts *o = &st->o;
    if (md)
        fprintf(f,
                "| s (fixed τ) | largest stable lr found | smallest unstable lr found "
                "| 2 sin(π/(4s+2)) | found / analytic | rel. distance after %d steps there "
                "|\n|---|---|---|---|---|---|\n",
                o->stab_iterations);
    else
        fprintf(f, "%5s %9s %9s %9s %7s  %s\n", "tau", "stable", "unstable", "analytic", "ratio",
                "rel. distance at the end there");
    for (int i = 0; i < o->nstal; i++) {
        double a = zp_ctl_study_analytic_lr(o->stal[i]);
        fprintf(f,
                md ? "| %d | %.4g | %.4g | %.4g | %.3f | %.3g |\n"
                   : "%5d %9.4g %9.4g %9.4g %7.3f  %.3g\n",
                o->stal[i], st->stable_lr[i], st->unstable_lr[i], a, st->stable_lr[i] / a,
                st->stable_rel[i]);
    }
    fprintf(f, "\n");
}

static void print_stability(const study *st, FILE *f, bool md)
{
    const study_opts *o = &st->o;
    if (o->inject) {
        print_stability_bisect(st, f, md);
        return;
    }
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
                o->stal[i], zp_ctl_study_bound_for(o, o->stal[i]), st->stable_lr[i],
                1.0 / (1 + o->stal[i]), 1.0 / (2.0 * (1 + o->stal[i])), st->stable_rel[i]);
    fprintf(f, "\n");
}

void zp_ctl_study_report_tables(const study *st, FILE *f, bool md)
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
    fprintf(f, "\"inject\": \"%s\", ", sp->inject ? sp->inject : "off");
    fprintf(f, "\"lr\": %.10g, \"seed\": %d, \"iterations\": %d, \"outcome\": \"%s\", ", sp->lr,
            sp->seed, sp->iterations, zp_ctl_study_run_outcome_word[r->out]);
    json_num(f, "target_rel_distance", sp->target, ", "); /* 0: ran out its budget */
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
            "\"delay_sigma\": %.10g, \"threshold\": %.10g, \"inject\": %s,\n",
            o->iterations, o->eval_every, o->delay_ms, o->delay_sigma, o->threshold,
            o->inject ? "true" : "false");
    fprintf(f, "  \"wall_s\": %.1f,\n  \"cells\": [\n", zp_now_s() - st->t0);
    for (int i = 0; i < o->nstal && !o->no_steps; i++)
        for (int k = 0; k < NSETTINGS; k++) {
            cell c = make_cell(st, o->stal[i], zp_ctl_study_settings[k].key);
            fprintf(f, "    {\"s\": %d, \"setting\": \"%c\", \"label\": \"%s\", ", o->stal[i],
                    zp_ctl_study_settings[k].key, zp_ctl_study_settings[k].label);
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
        if (o->inject) {
            json_num(f, "smallest_unstable_lr", st->unstable_lr[i], ", ");
            json_num(f, "analytic_stable_lr", zp_ctl_study_analytic_lr(o->stal[i]), ", ");
        }
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
    zp_ctl_study_report_tables(st, f, true);
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
                zp_ctl_study_run_outcome_word[r->out]);
        for (size_t i = 0; i < r->ncurve; i++)
            fprintf(f, "%.0f %.0f %.6g %.6g\n", r->curve[i].version, r->curve[i].step,
                    r->curve[i].rel, r->curve[i].loss);
    }
    return close_out(f, path);
}

bool zp_ctl_study_report_write(study *st)
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
    if (st->curve_seed && write_curves(st, curves))
        snprintf(st->curves_path, sizeof(st->curves_path), "%s", curves);
    else if (st->curve_seed)
        ok = false;
    printf("study: %.0f s; JSON %s, markdown %s%s%s\n", zp_now_s() - st->t0, json, md,
           st->curve_seed ? ", curves " : "", st->curve_seed ? curves : "");
    return ok;
}

/* The subcommand (ctl.h): the parts asked for, one run at a time, then the
 * tables on stdout and the JSON, markdown and curves files. Returns 0 when
 * every run could be started and every output written, 1 if not, 2 on bad
 * options. */