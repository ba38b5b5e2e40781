/*
 * ctl_study.h - what the parts of `zepsctl study` share: the study, its
 * runs and their outcomes. ctl_study.c parses the options and runs the
 * three parts (steps, stability, curves); ctl_study_run.c runs one
 * `zepsctl local` child and reads what it left; ctl_study_report.c turns
 * the runs into tables, JSON, markdown and the curves' data.
 */
#ifndef ZP_CTL_STUDY_H
#define ZP_CTL_STUDY_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define MAX_S        32
#define NSETTINGS    4
#define NGRID        14  /* step sizes of the stability grid: 2 * 2^(-k/2) */
#define DIVERGED_REL 1e3 /* a curve point this far from x* counts as diverged */
#define MAX_FILE     (8 << 20)
#define CURVE_TRIES  20 /* seeds tried for an async curve rank 0 survived */

typedef struct setting {
    char key;
    const char *label, *function;
    bool theorem_step; /* lr = 1/(2L(1+s)) instead of 1/L */
} study_setting;

/* The four settings per s (ctl_study.c). */
extern const study_setting zp_ctl_study_settings[NSETTINGS];

typedef struct study_opts {
    int workers, dim, seeds, iterations, eval_every, bound;
    int stab_iterations, stab_seeds, curve_iterations, curve_eval, curve_seed;
    double condition, delay_ms, delay_sigma, threshold, timeout_s;
    int stal[MAX_S], nstal;
    const char *dir, *json, *markdown, *curves;
    bool keep_traces, no_steps, no_stability, no_curves;
    bool inject; /* tau from the shard's schedule (cluster.inject), not from timing */
    int bisect;  /* --inject: bisection steps of the largest stable lr */
} study_opts;

typedef struct run_spec {
    char name[64];           /* its run directory under the study directory */
    const char *consistency; /* written into the cluster file as given */
    bool weighting;          /* write a weighting section: function, s, bound */
    const char *function;    /* w(tau), with a weighting section */
    int s, bound;            /* max_staleness and pull bound; -1: none */
    const char *inject;      /* cluster.inject schedule with tau s ("uniform": max_tau s,
                                "fixed": tau s), or NULL */
    double lr;
    double target; /* training.target_rel_distance: the run ends there (FINISH); 0: none */
    int seed, iterations, eval_every;
} run_spec;

typedef enum outcome { CONVERGED, DIVERGED, STALLED, FAILED, NOUTCOMES } outcome;
/* "converged", "diverges", ...; "converge", "diverge", ... (ctl_study_run.c) */
extern const char *const zp_ctl_study_run_outcome_word[NOUTCOMES];
extern const char *const zp_ctl_study_run_outcome_verb[NOUTCOMES];

typedef struct curve_pt {
    double step, loss, rel, acc, version; /* rel: quadratic, acc: classifiers; else NAN */
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
    double unstable_lr[MAX_S];                  /* --inject: the smallest lr seen to diverge */
    int curve_seed;                             /* seed of the figure's runs; 0: none */
    size_t curve_runs[2];
    char curves_path[PATH_MAX]; /* where the report wrote the curves; "" if it did not */
    double t0;
} study;

/* The largest stable lr of x_{k+1} = x_k - lr L x_{k-s} (the delayed
 * gradient iteration with a fixed delay s): 2 sin(pi / (4s + 2)) / L. */
double zp_ctl_study_analytic_lr(int s);

/* The pull bound of staleness bound s: --bound, or floor(s / workers). */
int zp_ctl_study_bound_for(const study_opts *o, int s);

/* Run sp as one `zepsctl local` child in its own run directory, read what
 * it left and record it in st (part "steps", "stability" or "curves";
 * setting 'A'..'C' or 0). Returns the run (st's), or NULL if it could not
 * be run at all (said why). */
run *zp_ctl_study_run_one(study *st, const run_spec *sp, const char *part, char setting);

/* Run `zepsctl local` on conf with its output in rundir/local.log and a
 * timeout of timeout_s. Returns its exit status, 128 + N if signal N ended
 * it, -1 if it could not start. Also used by the sweeps (ctl_sweep_run.c). */
int zp_ctl_study_run_local(const char *zepsctl, const char *conf, const char *rundir,
                           double timeout_s);

/* zp_ctl_study_run_local, then rank 0's curve from rundir/worker-0.json
 * into *curve / *ncurve (as zp_ctl_study_run_parse_curve; a missing curve
 * is said and left empty). *status and *wall_s get the exit status and the
 * run's wall time. False (said) if zepsctl local could not run or a signal
 * stopped it: the study must stop. */
bool zp_ctl_study_run_and_read(const char *zepsctl, const char *conf, const char *rundir,
                               double timeout_s, int *status, double *wall_s, curve_pt **curve,
                               size_t *ncurve);

/* Append the points of a result JSON's "curve":[[step,loss,rel,dist,acc,
 * version],...] to *curve (*ncurve of them, grown with zp_alloc_resize; the
 * caller frees *curve). False if the curve is missing or malformed. */
bool zp_ctl_study_run_parse_curve(const char *text, curve_pt **curve, size_t *ncurve);

/* Print the study's tables to f, as text or (md) markdown. */
void zp_ctl_study_report_tables(const study *st, FILE *f, bool md);

/* The median over seeds of updates to the threshold of cell (s, setting);
 * INFINITY when more than half did not converge. */
double zp_ctl_study_report_median_updates(const study *st, int s, char setting);

/* The figures (ctl_study_plot.c): gnuplot data and script in the study
 * directory, then gnuplot on them: cost.png (median updates to the
 * threshold against s per setting) and stability.png (the largest stable
 * lr against s, with --inject beside 2 sin(pi/(4s+2))). Returns false only
 * if a file could not be written; a missing gnuplot is said, not failed. */
bool zp_ctl_study_plot_write(const study *st);

/* Write the JSON, markdown and curves outputs.
 * Returns whether every output was written. */
bool zp_ctl_study_report_write(study *st);

#endif
