/*
 * step.c - zeps-worker: the tables of a training run and the requests of
 * one step, for every model alike.
 *
 * A model's tables (model.h) are declared in its order; a dense table is
 * pulled whole into one buffer per run (the compressed-pull contract: the
 * one buffer every pull of the table goes into), a sparse table row by row
 * for the positions of the step's minibatch, into the step's slot. Every
 * request of a step goes out in table order: pulls (step c), then pushes
 * (step c), the clock and the pulls of step c + 1 together. The loop
 * (train.c) decides when; this file knows how, and is the only part of
 * zeps-worker that calls libzeps for tables.
 */
#include "step.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "zeps.h"

/* Set table i's push and pull codecs (dense tables) from the config. */
static int set_codecs(zp_trainer *t, int i)
{
    const zp_config *cfg = t->cfg;
    int rc = 0;
    if (strcmp(cfg->push_codec, "none") != 0) {
        zeps_codec_opts co = {.codec = cfg->push_codec,
                              .fraction = cfg->codec_fraction,
                              .block = (uint32_t)cfg->codec_block,
                              .error_feedback = cfg->error_feedback,
                              .seed = cfg->seed * 7919u + (uint64_t)t->rank};
        rc = zeps_set_push_codec(t->client, t->ids[i], &co);
    }
    if (rc == 0 && strcmp(cfg->pull_codec, "none") != 0) {
        /* t->w[i] is the one buffer every pull of the table goes into,
         * and nothing but pulls writes it: the compressed-pull contract */
        zeps_codec_opts co = {.codec = cfg->pull_codec,
                              .fraction = cfg->codec_fraction,
                              .block = (uint32_t)cfg->codec_block,
                              .seed = cfg->seed * 7919u + 104729u + (uint64_t)t->rank};
        rc = zeps_set_pull_codec(t->client, t->ids[i], &co);
    }
    if (rc != 0)
        zp_error("table '%s': %s", t->defs[i].name, zeps_last_error(t->client));
    return rc;
}

static int declare_dense(zp_trainer *t, int i)
{
    const zp_config *cfg = t->cfg;
    zeps_table_spec spec = {
        .name = t->defs[i].name,
        .length = t->defs[i].length,
        .optimizer = cfg->optimizer,
        .lr = cfg->lr,
        .momentum = cfg->momentum,
        .beta1 = cfg->beta1,
        .beta2 = cfg->beta2,
        .eps = cfg->eps,
        .weight_decay = cfg->weight_decay,
        .init = t->defs[i].init,
        .init_scale = t->defs[i].init_scale,
        .seed = cfg->seed * 1000003ull + (uint64_t)i,
    };
    int rc = zeps_declare(t->client, &spec, &t->ids[i]);
    if (rc != 0) {
        zp_error("declaring table '%s': %s", spec.name, zeps_last_error(t->client));
        return rc;
    }
    rc = set_codecs(t, i);
    if (rc != 0)
        return rc;
    t->w[i] = zp_alloc(t->defs[i].length * sizeof(float));
    t->g[i] = zp_alloc(t->defs[i].length * sizeof(float));
    if (cfg->worker_momentum > 0)
        t->m[i] = zp_alloc_zeroed(t->defs[i].length, sizeof(float));
    return 0;
}

static int declare_sparse(zp_trainer *t, int i)
{
    zeps_sparse_spec spec = t->defs[i].sparse;
    spec.name = t->defs[i].name;
    spec.dim = t->defs[i].dim;
    spec.seed = t->cfg->seed * 1000003ull + (uint64_t)i;
    int rc = zeps_declare_sparse(t->client, &spec, &t->ids[i]);
    if (rc != 0)
        zp_error("declaring table '%s': %s", spec.name, zeps_last_error(t->client));
    return rc;
}

int zp_step_declare(zp_trainer *t)
{
    t->ntables = t->ops->tables(t->model, t->defs);
    t->sparse = t->ops->batch_pick != NULL;
    for (int i = 0; i < t->ntables; i++) {
        int rc = t->defs[i].dim ? declare_sparse(t, i) : declare_dense(t, i);
        if (rc != 0)
            return rc;
    }
    for (int k = 0; t->sparse && k < 2; k++)
        t->slot[k].mb = t->ops->batch_new(t->model);
    return 0;
}

static void grow(float **p, size_t n)
{
    *p = zp_alloc_resize(*p, (n ? n : 1) * sizeof(float));
}

/* Sparse models: pick step `clock`'s minibatch into slot s and make one
 * batch of its ids per sparse table (nothing is sent yet). */
static int pick(zp_trainer *t, int64_t clock, zp_step_slot *s)
{
    const uint64_t *ids;
    size_t np;
    s->examples = t->ops->batch_pick(t->model, s->mb, clock, &ids, &np);
    int grown = np > s->cap;
    if (grown)
        s->cap = np;
    for (int i = 0; i < t->ntables; i++) {
        if (!t->defs[i].dim)
            continue;
        if (grown)
            grow(&s->rows[i], s->cap * t->defs[i].dim);
        zeps_sbatch_free(&s->sb[i]);
        int rc = zeps_sbatch_new(t->client, t->ids[i], ids, np, &s->sb[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int zp_step_start(zp_trainer *t, int64_t clock)
{
    zp_step_slot *s = &t->slot[clock % 2];
    int rc = t->sparse ? pick(t, clock, s) : 0;
    for (int i = 0; i < t->ntables && rc == 0; i++) {
        if (t->defs[i].dim)
            rc = zeps_sbatch_pull_start(s->sb[i], s->rows[i], clock, &s->pulls[i]);
        else
            rc = zeps_pull_start(t->client, t->ids[i], t->w[i], 0, t->defs[i].length, clock,
                                 &s->pulls[i]);
    }
    return rc;
}

int zp_step_wait(zp_trainer *t, int64_t clock)
{
    return zeps_wait_all(t->slot[clock % 2].pulls, t->ntables);
}

void zp_step_wait_all(zp_trainer *t)
{
    for (int k = 0; k < 2; k++)
        zeps_wait_all(t->slot[k].pulls, t->ntables);
}

double zp_step_grad(zp_trainer *t, int64_t clock, size_t *examples)
{
    if (!t->sparse) {
        *examples = (size_t)t->ops->batch_examples(t->model);
        return t->ops->grad(t->model, t->w, t->g, clock);
    }
    zp_step_slot *s = &t->slot[clock % 2];
    float *w[ZP_MODEL_MAX_TABLES];
    if (s->cap > t->gcap) {
        t->gcap = s->cap;
        for (int i = 0; i < t->ntables; i++)
            if (t->defs[i].dim)
                grow(&t->g[i], t->gcap * t->defs[i].dim);
    }
    for (int i = 0; i < t->ntables; i++)
        w[i] = t->defs[i].dim ? s->rows[i] : t->w[i];
    *examples = s->examples;
    return t->ops->batch_grad(t->model, s->mb, w, t->g);
}

/* What to push for dense table i: the gradient, or with worker_momentum
 * the velocity (heavy-ball momentum before compression, as DGC does: the
 * codec and its error feedback see the velocity, and the shard applies
 * what arrives with plain sgd). */
static const float *dense_send(zp_trainer *t, int i)
{
    if (!t->m[i])
        return t->g[i];
    float mu = (float)t->cfg->worker_momentum;
    for (uint64_t k = 0; k < t->defs[i].length; k++)
        t->m[i][k] = mu * t->m[i][k] + t->g[i][k];
    return t->m[i];
}

int zp_step_push(zp_trainer *t, int64_t clock, int pull_next)
{
    zp_step_slot *s = &t->slot[clock % 2];
    zeps_req *reqs[ZP_MODEL_MAX_TABLES + 1] = {0};
    int rc = 0;
    for (int i = 0; i < t->ntables && rc == 0; i++) {
        if (t->defs[i].dim)
            rc = zeps_sbatch_push_start(s->sb[i], t->g[i], clock, &reqs[i]);
        else
            rc = zeps_push_start(t->client, t->ids[i], dense_send(t, i), 0, t->defs[i].length,
                                 clock, &reqs[i]);
    }
    if (rc == 0)
        rc = zeps_clock_start(t->client, clock, &reqs[t->ntables]);
    if (rc == 0 && pull_next)
        rc = zp_step_start(t, clock + 1);
    int rc2 = zeps_wait_all(reqs, t->ntables + 1);
    return rc ? rc : rc2;
}

/* A sparse model's evaluation: the dense tables pulled into buffers of its
 * own, then per chunk of the test set the rows its ids need. */
static int evaluate_sparse(zp_trainer *t, int64_t clock, zp_eval *out)
{
    float *w[ZP_MODEL_MAX_TABLES] = {0};
    int rc = 0;
    for (int i = 0; i < t->ntables && rc == 0; i++) {
        if (t->defs[i].dim)
            continue;
        w[i] = zp_alloc(t->defs[i].length * sizeof(float));
        rc = zeps_pull(t->client, t->ids[i], w[i], 0, t->defs[i].length, clock);
    }
    size_t cap = 0, nchunks = t->ops->eval_chunks(t->model);
    for (size_t k = 0; k < nchunks && rc == 0; k++) {
        const uint64_t *ids;
        size_t np;
        t->ops->eval_ids(t->model, k, &ids, &np);
        int grown = np > cap;
        cap = grown ? np : cap;
        for (int i = 0; i < t->ntables && rc == 0; i++) {
            if (!t->defs[i].dim)
                continue;
            if (grown)
                grow(&w[i], cap * t->defs[i].dim);
            rc = zeps_spull(t->client, t->ids[i], ids, np, w[i], clock);
        }
        if (rc == 0)
            t->ops->eval_chunk(t->model, k, w);
    }
    if (rc == 0)
        rc = t->ops->eval_finish(t->model, out);
    for (int i = 0; i < t->ntables; i++)
        free(w[i]);
    return rc;
}

int zp_step_evaluate(zp_trainer *t, int64_t clock, zp_step_eval how, zp_eval *out)
{
    if (t->sparse)
        return evaluate_sparse(t, clock, out);
    int rc = how == ZP_EVAL_PULL ? zp_step_start(t, clock) : 0;
    int rc2 = how == ZP_EVAL_PULLED ? 0 : zp_step_wait(t, clock);
    if (rc || rc2)
        return rc ? rc : rc2;
    rc = t->ops->evaluate(t->model, t->w, out);
    if (rc == 0 && how == ZP_EVAL_IN_FLIGHT)
        rc = zp_step_start(t, clock);
    return rc;
}

void zp_step_fini(zp_trainer *t)
{
    for (int k = 0; k < 2; k++) {
        zp_step_slot *s = &t->slot[k];
        for (int i = 0; i < t->ntables; i++) {
            zeps_sbatch_free(&s->sb[i]);
            free(s->rows[i]);
        }
        if (s->mb)
            t->ops->batch_free(&s->mb);
    }
    for (int i = 0; i < t->ntables; i++) {
        free(t->w[i]);
        free(t->g[i]);
        free(t->m[i]);
    }
}
