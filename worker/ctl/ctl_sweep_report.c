/*
 * ctl_sweep_report.c - a sweep's results: the table (one row per
 * combination of every axis but s, one column per s; a cell is the median
 * over seeds of applied updates to the target, how many seeds reached it,
 * and the cost of staleness: that median over the row's s = 0 median), as
 * text on stdout and as markdown, and every run in JSON. A second table
 * gives the same in wall time: the median over seeds of rank 0's seconds of
 * training until the evaluation that reached the target.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_sweep.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(const sweep *sw, size_t row, int si, bool secs, int *reached)
{
    double v[100];
    int n = 0;
    *reached = 0;
    int s = sw->o.ax.stal[si];
    for (size_t i = 0; i < sw->nruns && n < 100; i++) {
        const sweep_run *r = &sw->runs[i];
        if ((size_t)r->cell.row != row || r->cell.s != s)
            continue;
        v[n++] = secs ? r->target_s : r->updates;
        *reached += r->out == SW_REACHED;
    }
    if (n == 0)
        return NAN;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double zp_ctl_sweep_report_median(const sweep *sw, size_t row, int si, int *reached)
{
    return median_of(sw, row, si, false, reached);
}

double zp_ctl_sweep_report_median_s(const sweep *sw, size_t row, int si)
{
    int k;
    return median_of(sw, row, si, true, &k);
}

/* One cell as the table shows it: "412 (3/3, x1.8)", "- (0/3)"; in
 * seconds "12.5 (x1.8)", "-". */
static void cell_text(const sweep *sw, size_t row, int si, bool secs, char *out, size_t len)
{
    int k, k0;
    double m = median_of(sw, row, si, secs, &k);
    double base = median_of(sw, row, 0, secs, &k0);
    bool rel = si > 0 && isfinite(base) && base > 0;
    if (isnan(m))
        snprintf(out, len, "not run");
    else if (!isfinite(m) && secs)
        snprintf(out, len, "-");
    else if (!isfinite(m))
        snprintf(out, len, "- (%d/%d)", k, sw->o.seeds);
    else if (secs && rel)
        snprintf(out, len, "%.1f (x%.2f)", m, m / base);
    else if (secs)
        snprintf(out, len, "%.1f", m);
    else if (rel)
        snprintf(out, len, "%.0f (%d/%d, x%.2f)", m, k, sw->o.seeds, m / base);
    else
        snprintf(out, len, "%.0f (%d/%d)", m, k, sw->o.seeds);
}

static void table(const sweep *sw, FILE *f, bool md, bool secs)
{
    const sweep_axes *ax = &sw->o.ax;
    fprintf(f, md ? "| %s |" : "\n%-40s", secs ? "seconds to the target" : "row");
    for (int i = 0; i < ax->nstal; i++) {
        char h[32];
        snprintf(h, sizeof(h), "s = %d", ax->stal[i]);
        fprintf(f, md ? " %s |" : " %19s", h);
    }
    fprintf(f, "\n");
    if (md) {
        fprintf(f, "|---|");
        for (int i = 0; i < ax->nstal; i++)
            fprintf(f, "---|");
        fprintf(f, "\n");
    }
    for (size_t row = 0; row < sw->nrows; row++) {
        fprintf(f, md ? "| %s |" : "%-40s", sw->row_label[row]);
        for (int i = 0; i < ax->nstal; i++) {
            char t[64];
            cell_text(sw, row, i, secs, t, sizeof(t));
            fprintf(f, md ? " %s |" : " %19s", t);
        }
        fprintf(f, "\n");
    }
}

void zp_ctl_sweep_report_table(const sweep *sw, FILE *f, bool md)
{
    table(sw, f, md, false);
    if (md)
        fprintf(f, "\nMedian over the seeds of rank 0's seconds of training until the "
                   "evaluation that reached the target (\"-\": the median missed it), and "
                   "over the row's s = 0:\n\n");
    table(sw, f, md, true);
}

static void json_num(FILE *f, const char *key, double v)
{
    if (isfinite(v))
        fprintf(f, "\"%s\": %.10g", key, v);
    else
        fprintf(f, "\"%s\": null", key);
}

static void json_run(FILE *f, const sweep_run *r)
{
    static const char *const outs[] = {"reached", "diverged", "missed", "failed"};
    const sweep_cell *c = &r->cell;
    fprintf(f, "    {\"row\": %d, \"model\": \"%s\", \"depth\": %d, \"width\": %d, ", c->row,
            c->model->name, c->depth, c->width);
    fprintf(f, "\"optimizer\": \"%s\", \"weighting\": \"%s\", \"consistency\": \"%s\", ",
            c->optimizer, c->weighting->name, c->consistency);
    fprintf(f, "\"s\": %d, \"seed\": %d, \"lr\": %.10g, \"outcome\": \"%s\", ", c->s, r->seed,
            r->lr, outs[r->out]);
    json_num(f, "updates", r->updates);
    fprintf(f, ", ");
    json_num(f, "steps", r->steps);
    fprintf(f, ", ");
    json_num(f, "best", r->best);
    fprintf(f, ", ");
    json_num(f, "target_s", r->target_s);
    fprintf(f, ", \"wall_s\": %.2f, \"status\": %d}", r->wall_s, r->status);
}

static void json_rows(FILE *f, const sweep *sw)
{
    fprintf(f, "  \"rows\": [\n");
    for (size_t row = 0; row < sw->nrows; row++) {
        fprintf(f, "    {\"label\": \"%s\", \"cells\": [", sw->row_label[row]);
        for (int i = 0; i < sw->o.ax.nstal; i++) {
            int k;
            double m = zp_ctl_sweep_report_median(sw, row, i, &k);
            fprintf(f, "%s{\"s\": %d, ", i ? ", " : "", sw->o.ax.stal[i]);
            json_num(f, "median_updates", m);
            fprintf(f, ", ");
            json_num(f, "median_target_s", zp_ctl_sweep_report_median_s(sw, row, i));
            fprintf(f, ", \"reached\": %d, \"seeds\": %d}", k, sw->o.seeds);
        }
        fprintf(f, "]}%s\n", row + 1 < sw->nrows ? "," : "");
    }
    fprintf(f, "  ],\n");
}

static bool write_json(const sweep *sw, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    const sweep_opts *o = &sw->o;
    fprintf(f, "{\n  \"command\": \"%s\",\n  \"kind\": \"sweep\",\n", sw->command);
    fprintf(f, "  \"delay_model\": \"%s\", \"workers\": %d, \"seeds\": %d,\n",
            o->inject ? "inject" : "timing", o->workers, o->seeds);
    fprintf(f, "  \"batch\": %d, \"train_examples\": %d, \"epochs\": %d, \"eval_every\": %d,\n",
            o->batch, o->train_examples, o->epochs, o->eval_every);
    /* the first model's target (--target-accuracy, or its default) */
    double target = sw->nrows ? zp_ctl_sweep_grid_target(sw, sw->cells[0].model) : o->target;
    fprintf(f, "  \"target\": %.10g, \"wall_s\": %.1f,\n  \"staleness\": [", target, sw->wall_s);
    for (int i = 0; i < o->ax.nstal; i++)
        fprintf(f, "%s%d", i ? ", " : "", o->ax.stal[i]);
    fprintf(f, "],\n");
    json_rows(f, sw);
    fprintf(f, "  \"runs\": [\n");
    for (size_t i = 0; i < sw->nruns; i++) {
        json_run(f, &sw->runs[i]);
        fprintf(f, "%s\n", i + 1 < sw->nruns ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    return fclose(f) == 0;
}

static bool write_md(const sweep *sw, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fprintf(f, "<!-- Written by: %s -->\n\n", sw->command);
    fprintf(f,
            "Median over %d seed(s) of applied updates until rank 0's test evaluation "
            "reached the target (seeds that reached it / seeds, and the cost of staleness: "
            "the median over the row's s = 0 median); %s, %d worker(s), %.0f s in all.\n\n",
            sw->o.seeds, sw->o.inject ? "tau ~ U{0..s} injected" : "real timing", sw->o.workers,
            sw->wall_s);
    zp_ctl_sweep_report_table(sw, f, true);
    return fclose(f) == 0;
}

bool zp_ctl_sweep_report_write(const sweep *sw)
{
    char json[PATH_MAX], md[PATH_MAX];
    snprintf(json, sizeof(json), "%s", sw->o.json ? sw->o.json : "");
    snprintf(md, sizeof(md), "%s", sw->o.markdown ? sw->o.markdown : "");
    if (!sw->o.json)
        snprintf(json, sizeof(json), "%s/study.json", sw->dir);
    if (!sw->o.markdown)
        snprintf(md, sizeof(md), "%s/study.md", sw->dir);
    bool ok = write_json(sw, json), ok2 = write_md(sw, md);
    if (!ok || !ok2)
        fprintf(stderr, "zepsctl study: cannot write %s: %s\n", ok ? md : json, strerror(errno));
    else
        fprintf(stderr, "study: wrote %s and %s\n", json, md);
    return ok && ok2;
}
