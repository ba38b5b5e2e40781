/*
 * ctl_local_report.c - `zepsctl local`: the summary of a run. Every
 * worker's result JSON (flat keys zeps-worker writes itself, read with
 * strstr/strtod) is summed or taken from rank 0, printed on the terminal
 * and written as the run's summary JSON.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl_json.h"
#include "ctl_local.h"

#define MAX_RESULT_BYTES (1 << 20)

/* ------------------------------------------------------------------ results */

/* What zepsctl reads from each <result_dir>/worker-<rank>.json. */
enum {
    RK_WALL, RK_COMPUTE, RK_COMM, RK_EPS, RK_LOSS, RK_ACC, RK_DIST, RK_RELDIST, RK_AUC, RK_COUNT
};
static const char *const result_keys[] = {
    "wall_s",     "compute_s",      "comm_s",         "examples_per_s",
    "final_loss", "final_accuracy", "final_distance", "final_rel_distance",
    "final_auc",  "epochs",         "iterations",     "examples",
};
#define N_RESULT_KEYS ((int)(sizeof(result_keys) / sizeof(result_keys[0])))

typedef struct result {
    bool ok;
    double v[N_RESULT_KEYS]; /* NAN when missing or null */
} result;

/* Worker `rank`'s result. A program of --exec that ended well (exit 0)
 * without one is told how a Python worker writes it. */
static result read_result(const local_run *r, int rank, const char *path)
{
    result res = {.ok = false};
    char *text = zp_ctl_json_slurp(path, MAX_RESULT_BYTES);
    res.ok = text && strchr(text, '{') != NULL;
    for (int i = 0; i < N_RESULT_KEYS; i++)
        res.v[i] = res.ok ? zp_ctl_json_number(text, result_keys[i]) : NAN;
    free(text);
    int st = r->kids[r->nservers + rank].status;
    if (!res.ok && r->o.exec && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        fprintf(stderr,
                "zepsctl local: worker %d exited 0 but wrote no result to %s: from Python, "
                "end with zeps.write_result(rank, {\"final_accuracy\": ...}) "
                "(docs/python.md, \"Launching Python workers\")\n",
                rank, path);
    else if (!res.ok)
        fprintf(stderr, "zepsctl local: no readable result in %s\n", path);
    return res;
}

/* The summary: JSON key, label on the terminal (NULL: JSON only), format,
 * note, and the factor the terminal shows it with. */
enum {
    S_ACC, S_AUC, S_LOSS, S_RELDIST, S_DIST, S_WALL, S_EPS, S_SHARE, S_RUN, S_CPU, S_COMM, S_COUNT
};
static const struct sum_field {
    const char *key, *label, *fmt, *note;
    double scale;
} sum_fields[S_COUNT] = {
    [S_ACC] = {"final_accuracy", "final test accuracy", "%.4f", "", 1},
    [S_AUC] = {"final_auc", "final test AUC", "%.4f", "", 1},
    [S_LOSS] = {"final_loss", "final test loss", "%.4f", "", 1},
    [S_RELDIST] = {"final_rel_distance", "final rel. distance", "%.4g", "", 1},
    [S_DIST] = {"final_distance", "final distance", "%.4g", "", 1},
    [S_WALL] = {"wall_s", "wall time", "%.1f s", "  (slowest worker)", 1},
    [S_EPS] = {"examples_per_s", "examples/s", "%.0f", "   (sum over workers)", 1},
    [S_SHARE] = {"comm_share", "communication share", "%.1f %%",
                 "  (worker time spent waiting on the parameter servers)", 100},
    [S_RUN] = {"run_s", NULL, NULL, NULL, 1},
    [S_CPU] = {"compute_s", NULL, NULL, NULL, 1},
    [S_COMM] = {"comm_s", NULL, NULL, NULL, 1},
};

static void summarise(const result *res, int w, double *s)
{
    s[S_ACC] = res[0].v[RK_ACC]; /* rank 0 evaluates */
    s[S_AUC] = res[0].v[RK_AUC];
    s[S_LOSS] = res[0].v[RK_LOSS];
    s[S_RELDIST] = res[0].v[RK_RELDIST];
    s[S_DIST] = res[0].v[RK_DIST];
    s[S_WALL] = s[S_EPS] = NAN;
    s[S_CPU] = s[S_COMM] = 0;
    for (int i = 0; i < w; i++) {
        const double *v = res[i].v;
        if (!isnan(v[RK_WALL]) && !(v[RK_WALL] <= s[S_WALL])) /* the max; NAN-safe */
            s[S_WALL] = v[RK_WALL];
        if (!isnan(v[RK_EPS]))
            s[S_EPS] = (isnan(s[S_EPS]) ? 0 : s[S_EPS]) + v[RK_EPS];
        s[S_CPU] += isnan(v[RK_COMPUTE]) ? 0 : v[RK_COMPUTE];
        s[S_COMM] += isnan(v[RK_COMM]) ? 0 : v[RK_COMM];
    }
    double busy = s[S_CPU] + s[S_COMM];
    s[S_SHARE] = busy > 0 ? s[S_COMM] / busy : NAN;
}

static void json_str(FILE *f, const char *key, const char *s, const char *after)
{
    fprintf(f, "\"%s\": \"", key);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fprintf(f, c == '"' || c == '\\' ? "\\%c" : c < 0x20 ? "\\u%04x" : "%c", c);
    }
    fprintf(f, "\"%s", after);
}

static void json_num(FILE *f, const char *key, double v, const char *after)
{
    if (isfinite(v))
        fprintf(f, "\"%s\": %.10g%s", key, v, after);
    else
        fprintf(f, "\"%s\": null%s", key, after);
}

static bool write_json(const local_run *r, const double *s, const result *res, bool clean,
                       const char *outcome)
{
    const zp_config *c = r->cfg;
    FILE *f = fopen(r->json, "w");
    if (!f) {
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->json, strerror(errno));
        return false;
    }
    fputs("{\n  ", f);
    json_str(f, "outcome", outcome, ",\n  ");
    json_str(f, "run_dir", r->dir, ",\n  ");
    json_str(f, "cluster_file", r->conf, ",\n  ");
    fprintf(f, "\"servers\": %d,\n  \"workers\": %d,\n  ", c->num_shards, c->num_workers);
    json_str(f, "model", r->o.exec ? "exec" : c->model, ",\n  ");
    if (r->o.exec)
        json_str(f, "exec", r->o.exec, ",\n  ");
    json_str(f, "consistency", c->consistency, ",\n  ");
    for (int i = 0; i < S_COUNT; i++)
        json_num(f, sum_fields[i].key, s[i], ",\n  ");
    fprintf(f, "\"servers_stopped_cleanly\": %s,\n  \"worker_results\": [\n",
            clean ? "true" : "false");
    for (int w = 0; w < c->num_workers; w++) {
        int st = r->kids[r->nservers + w].status;
        fprintf(f, "    {\"rank\": %d, \"exit_status\": %d, \"result_ok\": %s", w,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1, res[w].ok ? "true" : "false");
        for (int i = 0; i < N_RESULT_KEYS; i++) {
            fputs(", ", f);
            json_num(f, result_keys[i], res[w].v[i], "");
        }
        fprintf(f, "}%s\n", w + 1 < c->num_workers ? "," : "");
    }
    fputs("  ]\n}\n", f);
    if (fclose(f) == 0)
        return true;
    fprintf(stderr, "zepsctl local: cannot write %s: %s\n", r->json, strerror(errno));
    return false;
}

static void print_summary(const local_run *r, const double *s, bool json_ok)
{
    const zp_config *c = r->cfg;
    bool quadratic = strcmp(c->model, "quadratic") == 0;
    if (r->o.exec)
        printf("zeps local cluster: %d servers, %d workers running '%s', consistency %s\n",
               c->num_shards, c->num_workers, r->o.exec, c->consistency);
    else
        printf("zeps local cluster: %d servers, %d workers, model %s, consistency %s\n",
               c->num_shards, c->num_workers, c->model, c->consistency);
    for (int i = 0; i < S_COUNT; i++) {
        const struct sum_field *sf = &sum_fields[i];
        if (!sf->label)
            continue;
        if (r->o.exec ? !isfinite(s[i]) /* a program reports what it has */
                      : (quadratic ? i == S_ACC || i == S_LOSS : i == S_RELDIST || i == S_DIST) ||
                            (i == S_AUC && strcmp(c->model, "ctr") != 0))
            continue; /* only the ctr model reports an AUC */
        printf("  %-21s ", sf->label);
        if (isfinite(s[i]))
            printf(sf->fmt, s[i] * sf->scale);
        else
            printf("n/a");
        printf("%s\n", sf->note);
    }
    printf("  %-21s %s\n", "summary JSON", json_ok ? r->json : "(not written)");
    fflush(stdout);
}

/* Read the workers' results, print and write the summary (`outcome`: done,
 * failed, signal, timeout). Returns the exit status for a finished run. */
int zp_ctl_local_report(local_run *r, double t_end, bool clean, const char *outcome)
{
    int w = r->cfg->num_workers, missing = 0;
    result *res = zp_alloc_zeroed((size_t)w, sizeof(result));
    for (int i = 0; i < w; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/worker-%d.json", r->cfg->result_dir, i);
        res[i] = read_result(r, i, path);
        missing += !res[i].ok;
    }
    double s[S_COUNT];
    summarise(res, w, s);
    s[S_RUN] = t_end - r->t0;
    bool json_ok = write_json(r, s, res, clean, outcome);
    print_summary(r, s, json_ok);
    free(res);
    return missing == 0 && clean && json_ok ? 0 : 1;
}
