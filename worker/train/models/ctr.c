/*
 * ctr.c - the ctr model as a zp_model_ops: logistic regression plus a
 * factorization machine over sparse ids (the mathematics is ctr_math.c),
 * driven by the training loop (train.c) like every other model.
 *
 * Tables: "ctr_rows" (sparse, dim 1 + emb_dim: an id's linear weight as
 * the lead column, with sparse_lr and zeros, then its FM embedding, with
 * emb_lr and N(0, emb_init^2); one lookup per id for both) and
 * "ctr_dense" (dense, ndense + 1: the dense features' weights and the
 * intercept). The sparse table uses training.ctr's sparse_optimizer, the
 * dense one training.optimizer, as the dense models do.
 *
 * Each worker reads lines rank, rank + N, ... of the training file and
 * reshuffles its part every epoch from (seed, rank, epoch); a minibatch
 * (zp_model_batch) is its examples, their ids in order (one position per
 * id occurrence) and nothing else: the loop pulls the rows. Rank 0 alone
 * reads the test file and scores it in chunks of EVAL_CHUNK examples -
 * logloss, AUC, accuracy; unseen test ids read as fresh rows (the pull
 * creates them, as any first touch does).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctr_data.h"
#include "ctr_metrics.h"
#include "log.h"
#include "model.h"
#include "ctr_math.h"
#include "alloc.h"
#include "errors.h"
#include "now.h"
#include "rng.h"
#include "zeps_errors.h"

/* Test examples scored per round of pulls. */
#define EVAL_CHUNK 8192

enum { T_ROWS, T_DENSE, NTABLES };

struct zp_model {
    const zp_config *cfg;
    int rank, nworkers;
    zp_ctr_data *train, *test;
    uint32_t dim, ndw; /* embedding size; dense weights (ndense + 1) */
    uint32_t *order;   /* this epoch's permutation of the partition */
    int64_t order_of;  /* the epoch `order` was shuffled for (-1: none yet) */
    size_t batch, spe;
    size_t part_max; /* examples in the largest partition: every worker runs its steps */
    float *logit;    /* rank 0: the test set's logits, filled chunk by chunk */
    size_t ex[EVAL_CHUNK];
};

struct zp_model_batch {
    size_t *ex;    /* the minibatch's examples */
    size_t nb, np; /* examples, positions */
    uint64_t *ids; /* np ids */
    size_t cap;    /* positions allocated */
};

/* training.max_train_examples split over the workers (0: no cap). */
static uint64_t worker_cap(const zp_config *cfg, int nworkers)
{
    uint64_t n = (uint64_t)nworkers;
    return cfg->max_train_examples ? ((uint64_t)cfg->max_train_examples + n - 1) / n : 0;
}

/* The largest partition any worker holds: lines i with i mod N == 0 are
 * the most, capped as each worker's share is. */
static size_t largest_partition(const zp_model *m)
{
    uint64_t n = (uint64_t)m->nworkers, cap = worker_cap(m->cfg, m->nworkers);
    uint64_t most = (m->train->file_lines + n - 1) / n;
    if (cap && cap < most)
        most = cap;
    return most > m->train->n ? (size_t)most : m->train->n;
}

static int load_data(zp_model *m, char *err, size_t errlen)
{
    const zp_config *cfg = m->cfg;
    const zp_ctr_reader_ops *ops = zp_ctr_data_reader_find(cfg->ctr_format);
    if (!ops)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "unknown data format '%s'",
                             cfg->ctr_format);
    uint64_t cap = worker_cap(cfg, m->nworkers);
    double t0 = zp_now_s();
    int rc = zp_ctr_data_load(&m->train, ops, cfg->ctr_train_file, m->rank, m->nworkers, cap, err,
                              errlen);
    if (rc == 0 && m->train->n == 0)
        rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s: no training examples for rank %d",
                           cfg->ctr_train_file, m->rank);
    if (rc == 0 && m->rank == 0) {
        rc = zp_ctr_data_load(&m->test, ops, cfg->ctr_test_file, 0, 1,
                              (uint64_t)cfg->ctr_max_test_examples, err, errlen);
        if (rc == 0 && m->test->n == 0)
            rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s: no test examples", cfg->ctr_test_file);
    }
    if (rc != 0)
        return rc;
    zp_info("read %zu training examples (%zu ids) of %s%s in %.1f s", m->train->n,
            m->train->off[m->train->n], cfg->ctr_train_file, m->test ? " and the test set" : "",
            zp_now_s() - t0);
    return 0;
}

static void destroy(zp_model **mp)
{
    zp_model *m = *mp;
    if (!m)
        return;
    zp_ctr_data_destroy(&m->train);
    zp_ctr_data_destroy(&m->test);
    free(m->order);
    free(m->logit);
    free(m);
    *mp = NULL;
}

static int create(zp_model **out, const zp_config *cfg, int rank, int num_workers, char *err,
                  size_t errlen)
{
    zp_model *m = zp_alloc_zeroed(1, sizeof(*m));
    m->cfg = cfg;
    m->rank = rank;
    m->nworkers = num_workers;
    int rc = load_data(m, err, errlen);
    if (rc != 0) {
        destroy(&m);
        return rc;
    }
    m->dim = (uint32_t)cfg->ctr_emb_dim;
    m->ndw = (uint32_t)m->train->ndense + 1;
    m->batch = (size_t)cfg->batch_size;
    m->part_max = largest_partition(m);
    m->spe = (m->part_max + m->batch - 1) / m->batch;
    m->order = zp_alloc(m->train->n * sizeof(uint32_t));
    m->order_of = -1;
    if (m->test)
        m->logit = zp_alloc((m->test->n ? m->test->n : 1) * sizeof(float));
    zp_info("ctr: %zu steps per epoch (batch %zu), emb_dim %u, sparse %s", m->spe, m->batch, m->dim,
            cfg->ctr_sparse_optimizer);
    *out = m;
    return 0;
}

static int tables(const zp_model *m, zp_table_def *defs)
{
    const zp_config *cfg = m->cfg;
    int ftrl = strcmp(cfg->ctr_sparse_optimizer, "ftrl") == 0;
    zeps_sparse_spec rows = {
        .optimizer = cfg->ctr_sparse_optimizer,
        .lr = cfg->ctr_emb_lr,
        .eps = cfg->eps,
        .weight_decay = ftrl ? 0 : cfg->ctr_l2,
        .l1 = cfg->ctr_l1,
        .l2 = cfg->ctr_l2,
        .init = "normal",
        .init_scale = cfg->ctr_emb_init,
        .lead_cols = 1, /* the linear weight */
        .lead_lr = cfg->ctr_sparse_lr,
        .lead_init = "zeros",
        .capacity_rows = cfg->ctr_hot_rows, /* lru past it: dropped, or cold with tier */
        .tier = cfg->ctr_tier,
    };
    defs[T_ROWS] =
        (zp_table_def){.name = "ctr_rows", .init = "normal", .dim = 1 + m->dim, .sparse = rows};
    defs[T_DENSE] = (zp_table_def){.name = "ctr_dense", .length = m->ndw, .init = "zeros"};
    return NTABLES;
}

static int steps_per_epoch(const zp_model *m)
{
    return (int)m->spe;
}

static int batch_examples(const zp_model *m)
{
    return (int)m->batch;
}

static zp_model_batch *batch_new(zp_model *m)
{
    zp_model_batch *b = zp_alloc_zeroed(1, sizeof(*b));
    b->ex = zp_alloc(m->batch * sizeof(size_t));
    return b;
}

static void batch_free(zp_model_batch **bp)
{
    zp_model_batch *b = *bp;
    if (!b)
        return;
    free(b->ex);
    free(b->ids);
    free(b);
    *bp = NULL;
}

/* Example positions of global step `step` into b->ex; shuffles at the
 * first step asked of each epoch (its first, or any after resuming at a
 * clock within it: the same order either way). Every worker runs ceil(part_max / batch) steps per
 * epoch, whatever the size of its own partition (they differ by at most
 * one example, or more under max_train_examples), so that clocks line up
 * under bsp/ssp; a smaller partition wraps around to its first examples. */
static size_t batch_pick(zp_model *m, zp_model_batch *b, int64_t step, const uint64_t **ids,
                         size_t *npos)
{
    size_t n = m->train->n;
    size_t k = (size_t)(step % (int64_t)m->spe);
    int64_t epoch = step / (int64_t)m->spe;
    if (epoch != m->order_of) {
        for (size_t i = 0; i < n; i++)
            m->order[i] = (uint32_t)i;
        zp_rng r;
        zp_rng_seed(&r, m->cfg->seed ^ 0x637472ull, (uint64_t)m->rank, (uint64_t)epoch);
        zp_rng_shuffle(&r, m->order, n);
        m->order_of = epoch;
    }
    size_t a = k * m->batch;
    b->nb = m->part_max - a < m->batch ? m->part_max - a : m->batch;
    for (size_t i = 0; i < b->nb; i++)
        b->ex[i] = m->order[(a + i) % n];
    b->np = zp_ctr_math_batch_positions(m->train, b->ex, b->nb);
    if (b->np > b->cap) {
        b->cap = b->np;
        b->ids = zp_alloc_resize(b->ids, b->cap * sizeof(uint64_t));
    }
    zp_ctr_math_batch_ids(m->train, b->ex, b->nb, b->ids);
    *ids = b->ids;
    *npos = b->np;
    return b->nb;
}

static double batch_grad(zp_model *m, zp_model_batch *b, float *const *w, float *const *g)
{
    /* The dense table gets the gradient of the batch's mean loss, the rows
     * that of the sum over the batch (FTRL-Proximal's per-example
     * convention): an id's step then does not shrink with the batch size,
     * which matters for ftrl (its beta) and sgd; adagrad is invariant. */
    return zp_ctr_math_pass(m->train, b->ex, b->nb, m->dim, w[T_ROWS], w[T_DENSE], NULL, g[T_ROWS],
                            (double)b->nb, g[T_DENSE]);
}

static size_t eval_chunks(const zp_model *m)
{
    return m->test ? (m->test->n + EVAL_CHUNK - 1) / EVAL_CHUNK : 0;
}

/* Chunk k: examples [a, a + nb) of the test set. */
static size_t chunk(const zp_model *m, size_t k, size_t *nb)
{
    size_t a = k * EVAL_CHUNK;
    *nb = m->test->n - a < EVAL_CHUNK ? m->test->n - a : EVAL_CHUNK;
    return a;
}

static void eval_ids(zp_model *m, size_t k, const uint64_t **ids, size_t *npos)
{
    size_t nb, a = chunk(m, k, &nb);
    size_t lo = m->test->off[a];
    *ids = &m->test->ids[lo];
    *npos = m->test->off[a + nb] - lo;
}

static void eval_chunk(zp_model *m, size_t k, float *const *w)
{
    size_t nb, a = chunk(m, k, &nb);
    for (size_t i = 0; i < nb; i++)
        m->ex[i] = a + i;
    zp_ctr_math_pass(m->test, m->ex, nb, m->dim, w[T_ROWS], w[T_DENSE], &m->logit[a], NULL, 0,
                     NULL);
}

static int eval_finish(zp_model *m, zp_eval *out)
{
    const zp_ctr_data *d = m->test;
    *out = (zp_eval){
        .loss = zp_ctr_metrics_logloss(m->logit, d->label, d->n),
        .accuracy = zp_ctr_metrics_accuracy(m->logit, d->label, d->n),
        .auc = zp_ctr_metrics_auc(m->logit, d->label, d->n),
        .distance = NAN,
        .rel_distance = NAN,
        .examples = (int)d->n,
    };
    return 0;
}

const zp_model_ops zp_ctr_ops = {
    .name = "ctr",
    .reports_auc = 1,
    .create = create,
    .destroy = destroy,
    .tables = tables,
    .steps_per_epoch = steps_per_epoch,
    .batch_examples = batch_examples,
    .batch_new = batch_new,
    .batch_free = batch_free,
    .batch_pick = batch_pick,
    .batch_grad = batch_grad,
    .eval_chunks = eval_chunks,
    .eval_ids = eval_ids,
    .eval_chunk = eval_chunk,
    .eval_finish = eval_finish,
};
