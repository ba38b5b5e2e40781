/*
 * ctl_scale.h - `zepsctl scale`: a strong-scaling study of one training
 * job (docs/performance.md, "Scaling"). For every shard count S and worker
 * count N the same job (the same examples, split over the workers) runs as
 * a `zepsctl local` cluster; T(N, S) is its training time (slowest worker),
 * S(N) = T(1, S) / T(N, S) and E(N) = S(N) / N. `zepsctl bench` measures
 * a request's round trip at several sizes beside it and a least-squares line
 * t(m) = alpha + beta * m is fitted, so each cell's waiting can be split
 * into what moving its bytes costs and the rest (barrier idle, shard CPU,
 * processes sharing cores).
 *
 * ctl_scale.c runs the cells and the fit; ctl_scale_report.c prints the
 * table and writes the JSON, markdown, data and figure.
 */
#ifndef ZP_CTL_SCALE_H
#define ZP_CTL_SCALE_H

#include <limits.h>
#include <stdbool.h>

#define SCALE_MAX_LIST 16
#define SCALE_MAX_REPS 9

typedef struct scale_opts {
    const char *model, *consistency, *dir, *json, *markdown;
    int workers[SCALE_MAX_LIST], nworkers;
    int servers[SCALE_MAX_LIST], nservers;
    long sizes[SCALE_MAX_LIST];
    int nsizes;
    int epochs, batch, reps, max_examples, timeout_s;
    bool fit, quick;
} scale_opts;

/* What one run of a cell measured, from the workers' results. */
typedef struct scale_fig {
    double wall_s;    /* training time: the slowest worker's wall_s */
    double eps;       /* examples/s, summed over workers */
    double compute_s; /* summed over workers */
    double comm_s;    /* time blocked on the shards, summed over workers */
    double requests;  /* per-shard requests, summed over workers */
    double steps;     /* training steps, summed over workers */
    double bytes;     /* payload bytes in + out, summed over workers */
    double accuracy;  /* rank 0's final test accuracy (NAN: none) */
} scale_fig;

/* One (S, N) cell: the figures of its median-time run, and every run's time. */
typedef struct scale_cell {
    int servers, workers, reps;
    scale_fig f;
    double run_wall[SCALE_MAX_REPS];
} scale_cell;

typedef struct scale_fit {
    bool ok;
    double alpha_s, beta_s_per_byte; /* t(m) = alpha + beta m, a request's round trip */
    double r2;
    int n;
    long size[2 * SCALE_MAX_LIST];
    double rtt_s[2 * SCALE_MAX_LIST]; /* push and pull p50 round trips */
} scale_fit;

typedef struct scale {
    scale_opts o;
    char dir[PATH_MAX - 256];
    char command[1024]; /* how the study was asked for, for its files */
    const char *zepsctl;
    int cores;
    scale_cell *cells; /* servers-major: cells[si * nworkers + wi] */
    scale_fit fit;
    double wall_s;
} scale;

/* ctl_scale_report.c */
/* Fit alpha and beta to fit->size / fit->rtt_s (fills alpha, beta, r2, ok). */
void zp_ctl_scale_report_fit_line(scale_fit *fit);
/* The table on stdout and the JSON, markdown, scale.dat, scale.gp and PNG
 * files. False if an output could not be written (said on stderr). */
bool zp_ctl_scale_report_write(const scale *sc);

#endif
