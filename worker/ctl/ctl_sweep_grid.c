/*
 * ctl_sweep_grid.c - the grid of a sweep: the product of its axes, laid out
 * as the table reads, one row per combination of every axis but the
 * staleness s (model, depth, width, optimizer, weighting, consistency) and
 * one column per s. Axes that do not apply to a model (depth and width
 * outside mlp) take one value, 0, for it, so a sweep over quadratic and
 * mlp does not repeat quadratic per depth. Likewise the weighting does not
 * apply to bsp (its pushes are applied in rounds, never weighted): a bsp
 * row is laid out once, with the weighting "none", as the baseline the
 * weighted async rows are held against.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ctl_sweep.h"

static int optimizer_index(const char *name)
{
    return strcmp(name, "sgd") == 0 ? 0 : strcmp(name, "momentum") == 0 ? 1 : 2;
}

double zp_ctl_sweep_grid_lr(const sweep *sw, const sweep_cell *c)
{
    return sw->o.lr > 0 ? sw->o.lr : c->model->lr[optimizer_index(c->optimizer)];
}

double zp_ctl_sweep_grid_target(const sweep *sw, const zp_sweep_model *m)
{
    return sw->o.target > 0 ? sw->o.target : m->target;
}

static void label_row(const sweep_cell *c, char *out, size_t len)
{
    int n = snprintf(out, len, "%s", c->model->name);
    if (c->model->deep)
        n += snprintf(out + n, len - (size_t)n, " d%d w%d", c->depth, c->width);
    snprintf(out + n, len - (size_t)n, " %s %s %s", c->optimizer, c->weighting->name,
             c->consistency);
}

void zp_ctl_sweep_grid_name(const sweep_cell *c, char *out, size_t len)
{
    char w[SW_NAME];
    snprintf(w, sizeof(w), "%s", c->weighting->name);
    for (char *p = w; *p; p++)
        *p = *p == ':' || *p == '.' ? '_' : *p;
    int n = snprintf(out, len, "%s", c->model->name);
    if (c->model->deep)
        n += snprintf(out + n, len - (size_t)n, "-d%d-w%d", c->depth, c->width);
    snprintf(out + n, len - (size_t)n, "-%s-%s-%s-s%d", c->optimizer, w, c->consistency, c->s);
}

/* Append one row: cell (row, s) for every s. */
static void add_row(sweep *sw, sweep_cell proto)
{
    const sweep_axes *ax = &sw->o.ax;
    proto.row = (int)sw->nrows;
    sw->row_label = zp_alloc_resize(sw->row_label, (sw->nrows + 1) * sizeof(*sw->row_label));
    label_row(&proto, sw->row_label[sw->nrows], sizeof(sw->row_label[0]));
    sw->nrows++;
    sw->cells = zp_alloc_resize(sw->cells, (sw->ncells + (size_t)ax->nstal) * sizeof(sweep_cell));
    for (int i = 0; i < ax->nstal; i++) {
        proto.s = ax->stal[i];
        sw->cells[sw->ncells++] = proto;
    }
}

static const sweep_weighting no_weighting = {.name = "none", .function = "none"};

/* The rows of one model: its depth x width (mlp) x optimizer x weighting
 * x consistency, bsp only once (unweighted) per optimizer. */
static void model_rows(sweep *sw, const zp_sweep_model *m)
{
    const sweep_axes *ax = &sw->o.ax;
    int nd = m->deep ? ax->ndepth : 1, nw = m->deep ? ax->nwidth : 1;
    for (int d = 0; d < nd; d++)
        for (int w = 0; w < nw; w++)
            for (int k = 0; k < ax->noptimizer; k++)
                for (int g = 0; g < ax->nweighting; g++)
                    for (int c = 0; c < ax->nconsistency; c++) {
                        bool bsp = zp_ctl_sweep_run_rounds(ax->consistency[c]);
                        if (bsp && g > 0)
                            continue;
                        add_row(sw, (sweep_cell){.model = m,
                                                 .depth = m->deep ? ax->depth[d] : 0,
                                                 .width = m->deep ? ax->width[w] : 0,
                                                 .optimizer = ax->optimizer[k],
                                                 .weighting = bsp ? &no_weighting
                                                                  : &ax->weighting[g],
                                                 .consistency = ax->consistency[c]});
                    }
}

void zp_ctl_sweep_grid_build(sweep *sw)
{
    for (int i = 0; i < sw->o.ax.nmodel; i++)
        model_rows(sw, sw->o.ax.model[i]);
}

void zp_ctl_sweep_grid_free(sweep *sw)
{
    free(sw->cells);
    free(sw->row_label);
    sw->cells = NULL;
    sw->row_label = NULL;
    sw->ncells = sw->nrows = 0;
}
