/*
 * ctl_sweep_plot.c - a sweep's figures, made by the command (gnuplot-nox,
 * through ctl_plot.c): curves.png, one panel per row of the table (every
 * axis but s), rank 0's evaluation of what it pulled against applied
 * updates for each s (the first seed), the target as a line; and cost.png,
 * the cost of staleness: median updates to the target against s, absolute
 * (log scale) and over the row's s = 0 median, and the median seconds of
 * rank 0's training to the target (log scale). Both are titled with the
 * command, the seeds and the sweep's wall time. Data and script stay in the
 * sweep directory (curves.dat, cost.dat, sweep.gp).
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "ctl_plot.h"
#include "ctl_sweep.h"

#define WHO "study"

/* The first seed's run of cell (row, s), or NULL. */
static const sweep_run *first_run(const sweep *sw, size_t row, int s)
{
    for (size_t i = 0; i < sw->nruns; i++)
        if ((size_t)sw->runs[i].cell.row == row && sw->runs[i].cell.s == s)
            return &sw->runs[i];
    return NULL;
}

/* curves.dat: block row * nstal + s index (gnuplot "index"), each
 * "updates metric" lines; an empty block is one "? ?" line. */
static bool write_curves(const sweep *sw)
{
    char path[PATH_MAX];
    FILE *f = zp_ctl_plot_open(WHO, sw->dir, "curves.dat", path, sizeof(path));
    if (!f)
        return false;
    fprintf(f, "# Written by: %s\n# applied updates, test accuracy (quadratic: rel. distance)\n",
            sw->command);
    for (size_t row = 0; row < sw->nrows; row++)
        for (int i = 0; i < sw->o.ax.nstal; i++) {
            const sweep_run *r = first_run(sw, row, sw->o.ax.stal[i]);
            fprintf(f, "# %s, s = %d\n", sw->row_label[row], sw->o.ax.stal[i]);
            for (size_t k = 0; r && k < r->ncurve; k++) {
                double v = r->cell.model->classifier ? r->curve[k].acc : r->curve[k].rel;
                if (isfinite(v))
                    fprintf(f, "%.0f %.6g\n", r->curve[k].version, v);
            }
            fprintf(f, "? ?\n\n\n");
        }
    return zp_ctl_plot_close(WHO, f, path);
}

/* cost.dat's value of `pass` (0: the median updates, 1: their ratio to
 * s = 0, 2: the median seconds) for row `row` at the i-th s; not finite
 * where the median missed the target. */
static double cost_value(const sweep *sw, int pass, size_t row, int i)
{
    int k;
    double m = zp_ctl_sweep_report_median(sw, row, i, &k);
    if (pass == 2)
        return zp_ctl_sweep_report_median_s(sw, row, i);
    return pass ? m / zp_ctl_sweep_report_median(sw, row, 0, &k) : m;
}

/* Whether cost.dat's pass has a value to plot anywhere (finite and, for
 * the log scale, positive). */
static bool cost_any(const sweep *sw, int pass)
{
    for (size_t row = 0; row < sw->nrows; row++)
        for (int i = 0; i < sw->o.ax.nstal; i++) {
            double v = cost_value(sw, pass, row, i);
            if (isfinite(v) && v > 0)
                return true;
        }
    return false;
}

/* cost.dat: s, then per row the median updates, then per row the ratio to
 * s = 0, then per row the median seconds ("?" where the median missed the
 * target). */
static bool write_cost(const sweep *sw)
{
    char path[PATH_MAX];
    FILE *f = zp_ctl_plot_open(WHO, sw->dir, "cost.dat", path, sizeof(path));
    if (!f)
        return false;
    fprintf(f, "# Written by: %s\ns", sw->command);
    for (int pass = 0; pass < 3; pass++)
        for (size_t row = 0; row < sw->nrows; row++)
            fprintf(f, " \"%s\"", sw->row_label[row]);
    fprintf(f, "\n");
    for (int i = 0; i < sw->o.ax.nstal; i++) {
        fprintf(f, "%d", sw->o.ax.stal[i]);
        for (int pass = 0; pass < 3; pass++)
            for (size_t row = 0; row < sw->nrows; row++) {
                double v = cost_value(sw, pass, row, i);
                if (isfinite(v))
                    fprintf(f, " %.6g", v);
                else
                    fprintf(f, " ?");
            }
        fprintf(f, "\n");
    }
    return zp_ctl_plot_close(WHO, f, path);
}

/* The multiplot's title: the command, seeds and wall time. */
static void multiplot(const sweep *sw, FILE *f, int rows, int cols)
{
    fprintf(f, "set multiplot layout %d,%d title \"%s   (seeds 1..%d, %.0f s in all)\"\n", rows,
            cols, sw->command, sw->o.seeds, sw->wall_s);
}

static void script_curves(const sweep *sw, FILE *f)
{
    int cols = sw->nrows < 3 ? (int)sw->nrows : 3, rows = ((int)sw->nrows + cols - 1) / cols;
    fprintf(f, "set terminal pngcairo size %d,%d font \",9\"\nset output \"%s/curves.png\"\n",
            380 * cols, 300 * rows + 30, sw->dir);
    fprintf(f, "set termoption noenhanced\n"); /* labels hold '_' */
    multiplot(sw, f, rows, cols);
    fprintf(f, "set key bottom right\nset xlabel \"applied updates\"\n");
    fprintf(f, "stal = \"");
    for (int i = 0; i < sw->o.ax.nstal; i++)
        fprintf(f, "%s%d", i ? " " : "", sw->o.ax.stal[i]);
    fprintf(f, "\"\n");
    for (size_t row = 0; row < sw->nrows; row++) {
        const zp_sweep_model *m = sw->cells[row * (size_t)sw->o.ax.nstal].model;
        double t = zp_ctl_sweep_grid_target(sw, m);
        fprintf(f, "set ylabel \"%s\"\n", m->classifier ? "test accuracy" : "|x - x*| / |x*|");
        fprintf(f, m->classifier ? "unset logscale y\nset yrange [0:1]\n"
                                 : "set logscale y\nset yrange [*:*]\n");
        fprintf(f, "set title \"%s\"\n", sw->row_label[row]);
        fprintf(f,
                "plot for [i=1:%d] \"%s/curves.dat\" index %zu+i-1 using 1:2 with lines "
                "title \"s = \".word(stal, i), %g with lines dashtype 2 lc \"gray\" "
                "title \"target\"\n",
                sw->o.ax.nstal, sw->dir, row * (size_t)sw->o.ax.nstal, t);
    }
    fprintf(f, "unset multiplot\n");
}

/* One panel of cost.png: pass's columns of cost.dat, or a frame saying
 * that no row reached the target. */
static void script_cost_panel(const sweep *sw, FILE *f, int pass)
{
    size_t n = sw->nrows, first = 2 + (size_t)pass * n;
    if (!cost_any(sw, pass)) {
        zp_ctl_plot_empty(f, pass == 1 ? "no row reached the target at s = 0 and another s"
                                       : "no row reached the target at any s");
        return;
    }
    fprintf(
        f,
        "plot for [c=%zu:%zu] \"%s/cost.dat\" using 1:c with linespoints title columnheader(c)\n",
        first, first + n - 1, sw->dir);
}

static void script_cost(const sweep *sw, FILE *f)
{
    fprintf(f, "reset\nset terminal pngcairo size 1800,560 font \",10\"\n");
    fprintf(f, "set output \"%s/cost.png\"\n", sw->dir);
    fprintf(f, "set datafile missing \"?\"\nset termoption noenhanced\nset grid\n");
    multiplot(sw, f, 1, 3);
    fprintf(f, "set xlabel \"%s\"\n",
            sw->o.inject ? "staleness bound s (tau ~ U{0..s}, injected)"
                         : "staleness bound s (real timing: async drops pushes older than s, "
                           "ssp bounds clocks by s)");
    fprintf(f, "set key top left font \",8\"\nset logscale y\n");
    fprintf(f, "set title \"median applied updates to the target\"\n");
    script_cost_panel(sw, f, 0);
    fprintf(f, "set title \"cost of staleness: over the row's s = 0\"\nunset logscale y\n");
    script_cost_panel(sw, f, 1);
    fprintf(f, "set title \"median seconds of rank 0's training to the target\"\n");
    fprintf(f, "set logscale y\n");
    script_cost_panel(sw, f, 2);
    fprintf(f, "unset multiplot\n");
}

bool zp_ctl_sweep_plot_write(const sweep *sw)
{
    char path[PATH_MAX];
    if (sw->nrows == 0 || !write_curves(sw) || !write_cost(sw))
        return sw->nrows == 0;
    FILE *f = zp_ctl_plot_open(WHO, sw->dir, "sweep.gp", path, sizeof(path));
    if (!f)
        return false;
    zp_ctl_plot_preamble(f, sw->command, "sweep.gp");
    script_curves(sw, f);
    script_cost(sw, f);
    if (!zp_ctl_plot_close(WHO, f, path))
        return false;
    if (zp_ctl_plot_run(WHO, sw->dir, path))
        fprintf(stderr, "study: figures %s/curves.png and %s/cost.png\n", sw->dir, sw->dir);
    return true;
}
