/*
 * step.c - zeps-worker: the tables of a training run and the requests of
 * one step, for every model alike.
 *
 * A model's tables (model.h) are declared in its order; a dense table is
 * pulled whole, as a view read where ZeroMQ received it (training.pull_views,
 * step.h says when it is copied after all) or into one buffer per run (the
 * compressed-pull contract: the one buffer every pull of the table goes
 * into), a sparse table row by row
 * for the positions of the step's minibatch, into the step's slot. Every
 * request of a step goes out in table order: pulls (step c), then pushes
 * (step c), the clock and the pulls of step c + 1 together. A sparse
 * model's steps go through a zeps_pipe instead (training.prefetch,
 * max_inflight): the pipe pulls the next steps' rows while one computes and
 * leaves pushes unanswered; with both 0 it sends exactly what the loop
 * above sends, in the same order. The loop (train.c) decides when; this
 * file knows how, and is the only part of zeps-worker that calls libzeps
 * for tables.
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
    t->wr[i] = t->w[i];
    t->by_view[i] = cfg->pull_views && strcmp(cfg->pull_codec, "none") == 0;
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

/* Sparse models: the pipe over every table and the ring of minibatches. */
static int pipe_new(zp_trainer *t)
{
    const zp_config *cfg = t->cfg;
    if (strcmp(cfg->pull_codec, "none") != 0) {
        /* a pipe pulls a dense table into one buffer per step, and a
         * compressed pull needs the same buffer every time */
        zp_error("pull_codec '%s' is for dense models; model %s pulls through a pipe",
                 cfg->pull_codec, cfg->model);
        return ZEPS_ECONFIG;
    }
    zeps_pipe_opts o = {.prefetch = cfg->prefetch, .max_inflight = cfg->max_inflight, .clock = 1};
    int rc = zeps_pipe_new(t->client, t->ids, t->ntables, &o, &t->pipe);
    if (rc != 0) {
        zp_error("pipe: %s", zeps_last_error(t->client));
        return rc;
    }
    t->nmb = cfg->prefetch + 2;
    t->mbs = zp_alloc_zeroed((size_t)t->nmb, sizeof(zp_step_mb));
    for (int k = 0; k < t->nmb; k++)
        t->mbs[k].mb = t->ops->batch_new(t->model);
    return 0;
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
    return t->sparse ? pipe_new(t) : 0;
}

static void grow(float **p, size_t n)
{
    *p = zp_alloc_resize(*p, (n ? n : 1) * sizeof(float));
}

/* Sparse models: pick step `clock`'s minibatch into the next one of the
 * ring and feed its ids to the pipe. */
static int feed(zp_trainer *t, int64_t clock)
{
    zp_step_mb *m = &t->mbs[t->nfed++ % (uint64_t)t->nmb];
    const uint64_t *ids;
    size_t np;
    m->examples = t->ops->batch_pick(t->model, m->mb, clock, &ids, &np);
    return zeps_pipe_feed(t->pipe, clock, ids, np, m);
}

int zp_step_start(zp_trainer *t, int64_t clock)
{
    if (t->sparse) {
        zeps_pipe_reset(t->pipe);
        t->cur = NULL;
        int rc = 0;
        for (int64_t s = clock; s <= clock + t->cfg->prefetch && s < t->total && rc == 0; s++)
            rc = feed(t, s);
        return rc;
    }
    zp_step_slot *s = &t->slot[clock % 2];
    int rc = 0;
    for (int i = 0; i < t->ntables && rc == 0; i++) {
        uint64_t n = t->defs[i].length;
        s->view[i] = t->by_view[i];
        if (!s->view[i]) {
            rc = zeps_pull_start(t->client, t->ids[i], t->w[i], 0, n, clock, &s->pulls[i]);
            continue;
        }
        /* the model is done with the previous pull's values */
        zeps_view_release(&t->view[i]);
        t->wr[i] = t->w[i];
        rc = zeps_pull_view_start(t->client, t->ids[i], 0, n, clock, &s->pulls[i]);
    }
    return rc;
}

int zp_step_feed(zp_trainer *t, int64_t clock)
{
    int64_t s = clock + t->cfg->prefetch + 1;
    return t->sparse && s < t->total ? feed(t, s) : 0;
}

/* Wait for dense table i's view pull *req and point wr[i] at its values:
 * in place if they came in one part, else copied into w[i] (step.h), and
 * the table's later pulls copy (a whole table's parts are the shards its
 * slices lie on, fixed for the client's life): zeps_wait then copies each
 * shard's reply as it arrives, while the others are still on their way.
 * On success t->view[i] owns the view read in place (or stays NULL). */
static int wait_view(zp_trainer *t, int i, zeps_req **req)
{
    zeps_view *v = NULL;
    int rc = zeps_wait_view(req, &v);
    if (rc != 0)
        return rc;
    uint64_t bytes = t->defs[i].length * sizeof(float);
    if (zeps_view_parts(v) == 1) {
        /* const only in libzeps: the models read w and never write it (model.h) */
        t->wr[i] = (float *)zeps_view_part(v, 0, NULL, NULL);
        t->view[i] = v;
        t->pulled_in_place += bytes;
        return 0;
    }
    for (int k = 0; k < zeps_view_parts(v); k++) {
        uint64_t off, n;
        const float *p = zeps_view_part(v, k, &off, &n);
        memcpy(t->w[i] + off, p, n * sizeof(float));
    }
    zeps_view_release(&v);
    t->wr[i] = t->w[i];
    t->by_view[i] = 0;
    t->pulled_copied += bytes;
    return 0;
}

/* Dense models: wait for every pull of slot s, as zeps_wait_all. */
static int wait_dense(zp_trainer *t, zp_step_slot *s)
{
    int first = 0;
    for (int i = 0; i < t->ntables; i++) {
        if (!s->pulls[i])
            continue;
        int rc;
        if (s->view[i]) {
            rc = wait_view(t, i, &s->pulls[i]);
        } else {
            rc = zeps_wait(&s->pulls[i]);
            t->pulled_copied += rc == 0 ? t->defs[i].length * sizeof(float) : 0;
        }
        first = first ? first : rc;
    }
    return first;
}

int zp_step_wait(zp_trainer *t, int64_t clock)
{
    if (!t->sparse)
        return wait_dense(t, &t->slot[clock % 2]);
    int rc = zeps_pipe_next(t->pipe, &t->cur);
    if (rc == 0 && t->cur->clock != clock) {
        zp_error("pipe handed out step %lld for step %lld", (long long)t->cur->clock,
                 (long long)clock);
        return ZEPS_EINVAL;
    }
    return rc;
}

void zp_step_wait_all(zp_trainer *t)
{
    if (t->pipe) {
        zeps_pipe_reset(t->pipe);
        t->cur = NULL;
    }
    for (int k = 0; k < 2; k++) /* a view pull's frames go back in zeps_wait */
        zeps_wait_all(t->slot[k].pulls, t->ntables);
}

int zp_step_drain(zp_trainer *t)
{
    int rc = t->pipe ? zeps_pipe_drain(t->pipe) : 0;
    zp_step_wait_all(t);
    return rc;
}

double zp_step_grad(zp_trainer *t, int64_t clock, size_t *examples)
{
    if (!t->sparse) {
        *examples = (size_t)t->ops->batch_examples(t->model);
        return t->ops->grad(t->model, t->wr, t->g, clock);
    }
    (void)clock; /* t->cur is step clock (zp_step_wait checked) */
    zp_step_mb *m = t->cur->user;
    *examples = m->examples;
    return t->ops->batch_grad(t->model, m->mb, t->cur->rows, t->cur->grads);
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

/* Sparse models: worker_momentum on the dense tables (in place: the pipe
 * pushes the step's gradient buffer), then the pipe's pushes and clock. */
static int sparse_push(zp_trainer *t)
{
    for (int i = 0; i < t->ntables; i++) {
        if (!t->m[i])
            continue;
        float mu = (float)t->cfg->worker_momentum, *g = t->cur->grads[i];
        for (uint64_t k = 0; k < t->defs[i].length; k++)
            g[k] = t->m[i][k] = mu * t->m[i][k] + g[k];
    }
    int rc = zeps_pipe_push(t->pipe, t->cur);
    t->cur = NULL;
    return rc;
}

int zp_step_push(zp_trainer *t, int64_t clock, int pull_next)
{
    if (t->sparse)
        return sparse_push(t);
    zeps_req *reqs[ZP_MODEL_MAX_TABLES + 1] = {0};
    int rc = 0;
    for (int i = 0; i < t->ntables && rc == 0; i++)
        rc = zeps_push_start(t->client, t->ids[i], dense_send(t, i), 0, t->defs[i].length, clock,
                             &reqs[i]);
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
    rc = t->ops->evaluate(t->model, t->wr, out);
    if (rc == 0 && how == ZP_EVAL_IN_FLIGHT)
        rc = zp_step_start(t, clock);
    return rc;
}

void zp_step_fini(zp_trainer *t)
{
    zeps_pipe_destroy(&t->pipe);
    for (int k = 0; k < t->nmb; k++)
        t->ops->batch_free(&t->mbs[k].mb);
    free(t->mbs);
    t->mbs = NULL;
    for (int i = 0; i < t->ntables; i++) {
        zeps_view_release(&t->view[i]);
        t->wr[i] = NULL;
        free(t->w[i]);
        free(t->g[i]);
        free(t->m[i]);
    }
}
