/*
 * ctl_sweep.h - what the parts of `zepsctl study --model ...` share: a
 * sweep over any built-in model. The grid is the product of its axes
 * (model, mlp depth and width, optimizer, weighting, consistency mode,
 * staleness s), each cell run over seeds; the delay model (injected tau or
 * real timing) is one choice for the whole sweep. ctl_sweep.c parses the
 * options and drives; ctl_sweep_grid.c enumerates and names the cells;
 * ctl_sweep_model.c is the model axis (what each model's training section
 * says, what its target is); ctl_sweep_run.c runs one cell's seed;
 * ctl_sweep_report.c writes the JSON and the markdown table;
 * ctl_sweep_plot.c the figures.
 */
#ifndef ZP_CTL_SWEEP_H
#define ZP_CTL_SWEEP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "ctl_study.h"

#define SW_MAX_AXIS 16 /* values per axis */
#define SW_NAME     32

/* One model of the model axis (ctl_sweep_model.c): a const table per model. */
typedef struct sweep_cell sweep_cell;
typedef struct sweep sweep;
typedef struct zp_sweep_model {
    const char *name;
    bool classifier;     /* the target is a test accuracy; else quadratic's rel. distance */
    bool deep;           /* takes the depth and width axes (mlp) */
    double lr[3];        /* default lr of sgd, momentum, adam */
    double target;       /* default target: accuracy to reach, or rel. distance under */
    int steps_per_epoch; /* per worker at the sweep's defaults (0: iterations, quadratic) */
    /* The model's lines of the training section (model, data, sizes). */
    void (*write_training)(FILE *f, const sweep *sw, const sweep_cell *c);
} zp_sweep_model;

/* The model named `name`, or NULL. */
const zp_sweep_model *zp_ctl_sweep_model_find(const char *name);

/* Make what the models of the sweep need before the first run (ctr: a
 * generated click log in the sweep directory). False if it failed (said). */
bool zp_ctl_sweep_model_prepare(sweep *sw);

/* Weighting: a w(tau) function of cluster.weighting, or DC-ASGD with lambda. */
typedef struct sweep_weighting {
    char name[SW_NAME]; /* "none", "inverse", "lr_over_tau", "exp", "dc:0.04" */
    const char *function;
    double dc_lambda;      /* > 0: DC-ASGD */
    double dc_mean_square; /* > 0: DC-ASGD-a (lambda scaled by the mean square of g) */
} sweep_weighting;

/* The axes, as given (or filled in by defaults and presets). */
typedef struct sweep_axes {
    const zp_sweep_model *model[4];
    int nmodel;
    int depth[SW_MAX_AXIS], ndepth;
    int width[SW_MAX_AXIS], nwidth;
    char optimizer[3][SW_NAME];
    int noptimizer;
    sweep_weighting weighting[SW_MAX_AXIS];
    int nweighting;
    char consistency[4][SW_NAME]; /* async, ssp, bsp */
    int nconsistency;
    int stal[SW_MAX_AXIS], nstal;
} sweep_axes;

typedef struct sweep_opts {
    sweep_axes ax;
    int workers, seeds, batch, train_examples, epochs, iterations, eval_every;
    double target; /* 0: the model's default */
    double lr;     /* 0: the model's default per optimizer */
    double delay_ms, delay_sigma, timeout_s;
    bool inject; /* tau ~ U{0..s} from the shard's version ring, pulls in turns */
    bool quick;
    const char *preset; /* "dai" or NULL */
    const char *dir, *json, *markdown;
} sweep_opts;

/* One cell of the grid: a value of every axis but s, and s. */
struct sweep_cell {
    const zp_sweep_model *model;
    int depth, width; /* mlp; 0 for the others */
    const char *optimizer;
    const sweep_weighting *weighting;
    const char *consistency;
    int s;
    int row; /* index of its row (every axis but s) in the sweep's table */
};

typedef enum sweep_outcome { SW_REACHED, SW_DIVERGED, SW_MISSED, SW_FAILED } sweep_outcome;

/* One seed of one cell. */
typedef struct sweep_run {
    sweep_cell cell;
    int seed;
    double lr;
    sweep_outcome out;
    double updates, steps; /* at the first curve point at the target; INFINITY if none */
    double best;           /* best accuracy (or smallest rel. distance) on the curve */
    double target_s;       /* rank 0's seconds of training to that point; INFINITY if none */
    double wall_s;         /* the whole `zepsctl local` run, start-up included */
    int status;
    curve_pt *curve; /* rank 0's; owned */
    size_t ncurve;
} sweep_run;

struct sweep {
    sweep_opts o;
    char dir[PATH_MAX - 256], zepsctl[PATH_MAX], command[2048];
    char ctr_dir[PATH_MAX]; /* generated ctr data, when the model axis has ctr */
    sweep_cell *cells;      /* row-major: row, then s */
    size_t ncells, nrows;
    char (*row_label)[160]; /* nrows labels: every axis but s */
    sweep_run *runs;
    size_t nruns, cap;
    double t0, wall_s;
};

/* The sweep's options, as `zepsctl study --help` prints them after the
 * quadratic study's. */
void zp_ctl_sweep_usage(FILE *f);

/* Whether argv asks for a sweep (--model or --preset) rather than the
 * quadratic textbook study. */
bool zp_ctl_sweep_wanted(int argc, char **argv);

/* zepsctl study --model ... / --preset: run the sweep. Returns the exit
 * status. */
int zp_ctl_sweep(int argc, char **argv);

/* Fill sw->cells, nrows and row_label from the axes. */
void zp_ctl_sweep_grid_build(sweep *sw);

/* Free what zp_ctl_sweep_grid_build made. */
void zp_ctl_sweep_grid_free(sweep *sw);

/* A short file-name-safe name of cell c (its run directories start with it). */
void zp_ctl_sweep_grid_name(const sweep_cell *c, char *out, size_t len);

/* The lr of cell c: --lr, else the model's default for the optimizer. */
double zp_ctl_sweep_grid_lr(const sweep *sw, const sweep_cell *c);

/* The target of model m: --target-accuracy, else the model's default. */
double zp_ctl_sweep_grid_target(const sweep *sw, const zp_sweep_model *m);

/* Whether the consistency mode named applies in rounds (bsp): no
 * weighting, no staleness injected. */
bool zp_ctl_sweep_run_rounds(const char *consistency);

/* Run seed `seed` of cell c and record it in sw. Returns the run (valid
 * until the next), or NULL if the sweep must stop (said why). */
sweep_run *zp_ctl_sweep_run_one(sweep *sw, const sweep_cell *c, int seed);

/* The median over the seeds of cell (row, s index) of updates to the
 * target: INFINITY when more than half missed it. *reached gets how many
 * seeds reached it. */
double zp_ctl_sweep_report_median(const sweep *sw, size_t row, int si, int *reached);

/* The same median of rank 0's seconds of training to the target. */
double zp_ctl_sweep_report_median_s(const sweep *sw, size_t row, int si);

/* Print the tables (text or markdown) to f: updates, then seconds. */
void zp_ctl_sweep_report_table(const sweep *sw, FILE *f, bool md);

/* Write the JSON and markdown outputs; false if one could not be written. */
bool zp_ctl_sweep_report_write(const sweep *sw);

/* The figures: curves.png (test accuracy, or rel. distance, against applied
 * updates, one panel per row, one line per s, the first seed) and cost.png
 * (median updates to the target against s, relative to s = 0, one line per
 * row). False only if a file could not be written. */
bool zp_ctl_sweep_plot_write(const sweep *sw);

#endif
