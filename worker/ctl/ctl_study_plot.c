/*
 * ctl_study_plot.c - `zepsctl study`'s figures, made by the command: the
 * cost of staleness (median applied updates to the threshold against s,
 * one line per setting, log scale) and the largest stable lr against s
 * (with --inject, the bisection's bracket beside 2 sin(pi/(4s+2)) and
 * Theorem 2's 1/(2(1+s))), and with curves run, rank 0's distance against
 * updates for plain async and weighted inverse. The data and a gnuplot
 * script go into the study directory and gnuplot (Debian's gnuplot-nox)
 * turns them into PNGs, so a figure can be remade or restyled from the
 * files alone.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_plot.h"
#include "ctl_study.h"

static FILE *open_in(const study *st, const char *name, char *path, size_t len)
{
    return zp_ctl_plot_open("study", st->dir, name, path, len);
}

static bool closed(FILE *f, const char *path)
{
    return zp_ctl_plot_close("study", f, path);
}

/* cost.dat: s, then the median updates of A..D ("?" where it did not converge). */
static bool write_cost(const study *st)
{
    char path[PATH_MAX];
    FILE *f = open_in(st, "cost.dat", path, sizeof(path));
    if (!f)
        return false;
    fprintf(f, "# Written by: %s\n# median applied updates to the threshold\ns", st->command);
    for (int k = 0; k < NSETTINGS; k++)
        fprintf(f, " \"%c: %s\"", zp_ctl_study_settings[k].key, zp_ctl_study_settings[k].label);
    fprintf(f, "\n");
    for (int i = 0; i < st->o.nstal; i++) {
        fprintf(f, "%d", st->o.stal[i]);
        for (int k = 0; k < NSETTINGS; k++) {
            double u =
                zp_ctl_study_report_median_updates(st, st->o.stal[i], zp_ctl_study_settings[k].key);
            if (isfinite(u))
                fprintf(f, " %.0f", u);
            else
                fprintf(f, " ?");
        }
        fprintf(f, "\n");
    }
    return closed(f, path);
}

/* stability.dat: s, largest stable lr, smallest unstable lr (--inject; else
 * "?"), 2 sin(pi/(4s+2)). */
static bool write_stability(const study *st)
{
    char path[PATH_MAX];
    FILE *f = open_in(st, "stability.dat", path, sizeof(path));
    if (!f)
        return false;
    fprintf(f, "# Written by: %s\n# s stable unstable analytic\n", st->command);
    for (int i = 0; i < st->o.nstal; i++) {
        fprintf(f, "%d %.6g ", st->o.stal[i], st->stable_lr[i]);
        if (st->o.inject)
            fprintf(f, "%.6g", st->unstable_lr[i]);
        else
            fprintf(f, "?");
        fprintf(f, " %.6g\n", zp_ctl_study_analytic_lr(st->o.stal[i]));
    }
    return closed(f, path);
}

/* Whether any setting reached the threshold at any s (else cost.dat has
 * no point to plot, and gnuplot would stop at an invalid range). */
static bool any_converged(const study *st)
{
    for (int i = 0; i < st->o.nstal; i++)
        for (int k = 0; k < NSETTINGS; k++)
            if (isfinite(zp_ctl_study_report_median_updates(st, st->o.stal[i],
                                                            zp_ctl_study_settings[k].key)))
                return true;
    return false;
}

/* The cost figure: one line per setting, or a frame saying that none
 * reached the threshold. */
static void script_cost(FILE *f, const study *st, const char *d)
{
    if (any_converged(st)) {
        fprintf(f,
                "plot for [i=2:%d] \"%s/cost.dat\" using 0:i:xtic(1) with linespoints lw 2 "
                "title columnheader(i)\n",
                NSETTINGS + 1, d);
        return;
    }
    char why[120];
    snprintf(why, sizeof(why), "no setting reached rel. distance %g at any s", st->o.threshold);
    zp_ctl_plot_empty(f, why);
}

/* curves.png from the curves file (--curves): rank 0's relative distance
 * against applied updates, plain async and weighted inverse at lr = 1/L.
 * Nothing when no curves were run or their path could not be quoted. */
static void script_curves(FILE *f, const study *st, const char *d)
{
    const char *c = st->curves_path;
    if (!c[0] || strpbrk(c, "\"\\\n"))
        return;
    fprintf(f, "reset\nset datafile missing \"?\"\nset termoption noenhanced\nset grid\n");
    fprintf(f, "set output \"%s/curves.png\"\nset logscale xy\nset format y \"1e%%L\"\n", d);
    fprintf(f, "set title \"quadratic d = %d, kappa = %g, %d workers, lr = 1/L = 1, seed %d\"\n",
            st->o.dim, st->o.condition, st->o.workers, st->curve_seed);
    fprintf(f, "set xlabel \"applied updates + 1 (the version rank 0 pulled)\"\n"
               "set ylabel \"|x - x*| / |x*|\"\nset key top right box opaque\n");
    fprintf(f, "set arrow from graph 0, first %g to graph 1, first %g nohead dt 2\n",
            st->o.threshold, st->o.threshold);
    for (int k = 0; k < 2; k++)
        fprintf(f, "%s \"%s\" index %d using ($1+1):3 with %s lw 2 title \"%s: %s\"%s",
                k ? "," : "plot", c, k, k ? "lines" : "linespoints pt 7 ps 0.5",
                k ? "weighted, w = 1/(1+tau)" : "async, w = 1",
                zp_ctl_study_run_outcome_word[st->runs[st->curve_runs[k]].out], k ? "\n" : "");
}

static bool write_script(const study *st, char *gp, size_t len)
{
    FILE *f = open_in(st, "study.gp", gp, len);
    if (!f)
        return false;
    const char *d = st->dir; /* no quotes or backslashes: make_study_dir checked */
    const char *tau = st->o.inject ? "tau ~ U{0..s}, exact" : "bound s, from timing";
    zp_ctl_plot_preamble(f, st->command, gp);
    fprintf(f, "set output \"%s/cost.png\"\nset logscale y\n", d);
    fprintf(f, "set title \"Cost of staleness: quadratic d = %d, kappa = %g, %d workers\"\n",
            st->o.dim, st->o.condition, st->o.workers);
    fprintf(f, "set xlabel \"s (%s)\"\nset ylabel \"applied updates to rel. distance %g\"\n", tau,
            st->o.threshold);
    script_cost(f, st, d);
    fprintf(f, "set output \"%s/stability.png\"\nset title \"Largest stable lr (L = 1)\"\n", d);
    fprintf(f, "set xlabel \"%s\"\nset ylabel \"lr\"\nset logscale x 2\nset xrange [0.8:*]\n",
            st->o.inject ? "fixed tau = s (plotted at s + 1)" : "bound s (plotted at s + 1)");
    fprintf(f, "f(x) = 2*sin(pi/(4*(x-1)+2))\ng(x) = 1/(2*x)\nset samples 400\n");
    if (st->o.inject)
        fprintf(f,
                "plot \"%s/stability.dat\" using ($1+1):2:2:3 with yerrorbars lw 2 pt 7 "
                "title \"zeps: stable .. unstable (bisection)\", ",
                d);
    else
        fprintf(f,
                "plot \"%s/stability.dat\" using ($1+1):2 with points pt 7 ps 1.5 "
                "title \"zeps: largest stable lr of the grid\", ",
                d);
    fprintf(f, "f(x) lw 2 title \"2 sin(pi/(4s+2))\", g(x) dt 2 lw 2 "
               "title \"Theorem 2: 1/(2(1+s))\"\n");
    script_curves(f, st, d);
    return closed(f, gp);
}

bool zp_ctl_study_plot_write(const study *st)
{
    char gp[PATH_MAX];
    if (!write_cost(st) || !write_stability(st) || !write_script(st, gp, sizeof(gp)))
        return false;
    if (zp_ctl_plot_run("study", st->dir, gp))
        printf("study: figures %s/cost.png, %s/stability.png%s%s%s\n", st->dir, st->dir,
               st->curves_path[0] ? ", " : "", st->curves_path[0] ? st->dir : "",
               st->curves_path[0] ? "/curves.png" : "");
    return true;
}
