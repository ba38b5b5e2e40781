/*
 * train_ctr.c - the training loop of the ctr model (model_ctr.h) over a
 * zeps cluster: two sparse tables and one dense table.
 *
 * Tables: "ctr_lin" (sparse, dim 1: the linear weight of each id),
 * "ctr_emb" (sparse, dim emb_dim: the FM embeddings) and "ctr_dense"
 * (dense, ndense + 1: the dense features' weights and the intercept). The
 * sparse tables use training.ctr's sparse_optimizer, the dense one
 * training.optimizer, as the dense models do.
 *
 * Step c (the worker's clock), as in train.c: the ids of minibatch c go
 * into one zeps_sbatch per sparse table (deduplicated and grouped by shard
 * once), rows and dense weights are pulled as of clock c, the pass computes
 * per-position gradients, and the pushes (the batch sums repeated ids), the
 * dense push and the clock go out together. Before waiting for them, the
 * next step's batches are built and their pulls started, so the wire
 * carries step c's pushes and step c+1's pulls at once; messages to one
 * shard keep their order, so those pulls see this worker's own pushes. Two
 * sets of step buffers alternate for that (a batch allows one request in
 * flight).
 *
 * Each worker reads lines rank, rank + N, ... of the training file and
 * reshuffles its part every epoch from (seed, rank, epoch). Rank 0 alone
 * reads the test file and evaluates - logloss, AUC, accuracy - after every
 * eval_every epochs and, after a barrier, at the end; unseen test ids read
 * as fresh rows (the pull creates them, as any first touch does).
 */
#include "train_ctr.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctr_data.h"
#include "ctr_metrics.h"
#include "log.h"
#include "model_ctr.h"
#include "util.h"
#include "zeps.h"

/* Test examples evaluated per round of pulls. */
#define EVAL_CHUNK 8192

enum { T_LIN, T_EMB, T_DENSE, NTABLES };

typedef struct step_buf {
    size_t *ex;        /* the minibatch's examples */
    size_t nb, np;     /* examples, positions */
    uint64_t *ids;     /* np ids */
    float *lin, *emb;  /* pulled rows per position */
    float *dw;         /* pulled dense weights */
    size_t cap;        /* positions allocated */
    zeps_sbatch *b[2]; /* lin, emb */
    zeps_req *pull[NTABLES];
} step_buf;

typedef struct ctr_trainer {
    const zp_config *cfg;
    int rank, nworkers;
    volatile int *stop;
    zeps_client *client;
    zp_ctr_data *train, *test;
    uint32_t dim, ndw; /* embedding size; dense weights (ndense + 1) */
    uint32_t tab[NTABLES];
    uint32_t *order; /* this epoch's permutation of the partition */
    size_t batch, spe;
    size_t part_max; /* examples in the largest partition: every worker runs its steps */
    step_buf sb[2];
    float *glin, *gemb, *gdense;
    size_t gcap;
} ctr_trainer;

static void grow(float **p, size_t n)
{
    *p = zp_xrealloc(*p, (n ? n : 1) * sizeof(float));
}

static void step_buf_fini(step_buf *s)
{
    zeps_sbatch_free(&s->b[0]);
    zeps_sbatch_free(&s->b[1]);
    free(s->ex);
    free(s->ids);
    free(s->lin);
    free(s->emb);
    free(s->dw);
}

static int declare(ctr_trainer *t)
{
    const zp_config *cfg = t->cfg;
    const char *opt = cfg->ctr_sparse_optimizer;
    int ftrl = strcmp(opt, "ftrl") == 0;
    zeps_sparse_spec lin = {
        .name = "ctr_lin",
        .dim = 1,
        .optimizer = opt,
        .lr = cfg->ctr_sparse_lr,
        .eps = cfg->eps,
        .weight_decay = ftrl ? 0 : cfg->ctr_l2,
        .l1 = cfg->ctr_l1,
        .l2 = cfg->ctr_l2,
        .init = "zeros",
        .seed = cfg->seed * 1000003ull,
    };
    zeps_sparse_spec emb = lin;
    emb.name = "ctr_emb";
    emb.dim = t->dim;
    emb.lr = cfg->ctr_emb_lr;
    emb.init = "normal";
    emb.init_scale = cfg->ctr_emb_init;
    emb.seed = cfg->seed * 1000003ull + 1;
    zeps_table_spec dense = {
        .name = "ctr_dense",
        .length = t->ndw,
        .optimizer = cfg->optimizer,
        .lr = cfg->lr,
        .momentum = cfg->momentum,
        .beta1 = cfg->beta1,
        .beta2 = cfg->beta2,
        .eps = cfg->eps,
        .weight_decay = cfg->weight_decay,
        .init = "zeros",
        .seed = cfg->seed * 1000003ull + 2,
    };
    int rc = zeps_declare_sparse(t->client, &lin, &t->tab[T_LIN]);
    if (rc == 0)
        rc = zeps_declare_sparse(t->client, &emb, &t->tab[T_EMB]);
    if (rc == 0)
        rc = zeps_declare(t->client, &dense, &t->tab[T_DENSE]);
    if (rc != 0)
        zp_error("declaring the ctr tables: %s", zeps_last_error(t->client));
    return rc;
}

/* Example positions of global step `step` into s->ex; reshuffles at the
 * start of each epoch. Every worker runs ceil(part_max / batch) steps per
 * epoch, whatever the size of its own partition (they differ by at most
 * one example, or more under max_train_examples), so that clocks line up
 * under bsp/ssp; a smaller partition wraps around to its first examples. */
static void pick_batch(ctr_trainer *t, int64_t step, step_buf *s)
{
    size_t n = t->train->n;
    size_t k = (size_t)(step % (int64_t)t->spe);
    if (k == 0) {
        for (size_t i = 0; i < n; i++)
            t->order[i] = (uint32_t)i;
        zp_rng r;
        zp_rng_seed(&r, t->cfg->seed ^ 0x637472ull, (uint64_t)t->rank,
                    (uint64_t)(step / (int64_t)t->spe));
        zp_rng_shuffle(&r, t->order, n);
    }
    size_t a = k * t->batch;
    s->nb = t->part_max - a < t->batch ? t->part_max - a : t->batch;
    for (size_t b = 0; b < s->nb; b++)
        s->ex[b] = t->order[(a + b) % n];
}

/* Build step `step`'s batches and start its pulls as of `step`. */
static int start_step(ctr_trainer *t, int64_t step, step_buf *s)
{
    pick_batch(t, step, s);
    s->np = zp_ctr_batch_positions(t->train, s->ex, s->nb);
    if (s->np > s->cap) {
        s->cap = s->np;
        s->ids = zp_xrealloc(s->ids, s->cap * sizeof(uint64_t));
        grow(&s->lin, s->cap);
        grow(&s->emb, s->cap * t->dim);
    }
    zp_ctr_batch_ids(t->train, s->ex, s->nb, s->ids);
    zeps_sbatch_free(&s->b[0]);
    zeps_sbatch_free(&s->b[1]);
    int rc = zeps_sbatch_new(t->client, t->tab[T_LIN], s->ids, s->np, &s->b[0]);
    if (rc == 0)
        rc = zeps_sbatch_new(t->client, t->tab[T_EMB], s->ids, s->np, &s->b[1]);
    if (rc == 0)
        rc = zeps_sbatch_pull_start(s->b[0], s->lin, step, &s->pull[T_LIN]);
    if (rc == 0)
        rc = zeps_sbatch_pull_start(s->b[1], s->emb, step, &s->pull[T_EMB]);
    if (rc == 0)
        rc = zeps_pull_start(t->client, t->tab[T_DENSE], s->dw, 0, t->ndw, step, &s->pull[T_DENSE]);
    return rc;
}

/* Rank 0: pull what the test set needs as of `clock` and score it. */
static int evaluate(ctr_trainer *t, int64_t clock, zp_eval *out)
{
    const zp_ctr_data *d = t->test;
    float *logit = zp_xmalloc((d->n ? d->n : 1) * sizeof(float));
    float *dw = zp_xmalloc(t->ndw * sizeof(float));
    size_t *ex = zp_xmalloc(EVAL_CHUNK * sizeof(size_t));
    float *lin = NULL, *emb = NULL;
    size_t cap = 0;
    int rc = zeps_pull(t->client, t->tab[T_DENSE], dw, 0, t->ndw, clock);
    for (size_t a = 0; rc == 0 && a < d->n; a += EVAL_CHUNK) {
        size_t nb = d->n - a < EVAL_CHUNK ? d->n - a : EVAL_CHUNK;
        for (size_t b = 0; b < nb; b++)
            ex[b] = a + b;
        size_t lo = d->off[a], np = d->off[a + nb] - lo;
        if (np > cap) {
            cap = np;
            grow(&lin, cap);
            grow(&emb, cap * t->dim);
        }
        rc = zeps_spull(t->client, t->tab[T_LIN], &d->ids[lo], np, lin, clock);
        if (rc == 0)
            rc = zeps_spull(t->client, t->tab[T_EMB], &d->ids[lo], np, emb, clock);
        if (rc == 0)
            zp_ctr_model_pass(d, ex, nb, t->dim, lin, emb, dw, &logit[a], NULL, NULL, NULL);
    }
    if (rc == 0) {
        *out = (zp_eval){
            .loss = zp_ctr_logloss(logit, d->label, d->n),
            .accuracy = zp_ctr_accuracy(logit, d->label, d->n),
            .auc = zp_ctr_auc(logit, d->label, d->n),
            .distance = NAN,
            .rel_distance = NAN,
            .examples = (int)d->n,
        };
    }
    free(logit);
    free(dw);
    free(ex);
    free(lin);
    free(emb);
    return rc;
}

static void log_eval(const char *what, const zp_eval *e)
{
    zp_info("%s: test AUC %.4f, logloss %.4f, accuracy %.4f (%d examples)", what, e->auc, e->loss,
            e->accuracy, e->examples);
}

static void inject_delay(const ctr_trainer *t, int64_t step)
{
    double ms = zp_train_delay_ms(t->cfg, t->rank, step);
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000.0), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Compute step c from s's pulled rows and push it; start step c + 1's
 * pulls into nxt (if any) before waiting. Returns the minibatch loss in
 * *loss. */
static int run_step(ctr_trainer *t, int64_t c, step_buf *s, step_buf *nxt, double *loss,
                    zp_train_result *res)
{
    double b0 = zp_now_s();
    if (s->np > t->gcap) {
        t->gcap = s->np;
        grow(&t->glin, t->gcap);
        grow(&t->gemb, t->gcap * t->dim);
    }
    *loss = zp_ctr_model_pass(t->train, s->ex, s->nb, t->dim, s->lin, s->emb, s->dw, NULL, t->glin,
                              t->gemb, t->gdense);
    if (!isfinite(*loss) || *loss > 1e30) {
        zp_error("diverged at step %lld: loss %g", (long long)c, *loss);
        res->diverged = 1;
        res->diverged_step = c;
        return ZEPS_EDIVERGED;
    }
    /* The pass gives the gradient of the batch's mean loss. Sparse rows get
     * the sum over the batch instead (FTRL-Proximal's per-example
     * convention): an id's step then does not shrink with the batch size,
     * which matters for ftrl (its beta) and sgd; adagrad is invariant. */
    float nb = (float)s->nb;
    for (size_t i = 0; i < s->np; i++)
        t->glin[i] *= nb;
    for (size_t i = 0; i < s->np * t->dim; i++)
        t->gemb[i] *= nb;
    inject_delay(t, c);
    double b1 = zp_now_s();
    zeps_req *reqs[4] = {0};
    int rc = zeps_sbatch_push_start(s->b[0], t->glin, c, &reqs[0]);
    if (rc == 0)
        rc = zeps_sbatch_push_start(s->b[1], t->gemb, c, &reqs[1]);
    if (rc == 0)
        rc = zeps_push_start(t->client, t->tab[T_DENSE], t->gdense, 0, t->ndw, c, &reqs[2]);
    if (rc == 0)
        rc = zeps_clock_start(t->client, c, &reqs[3]);
    if (rc == 0 && nxt)
        rc = start_step(t, c + 1, nxt);
    int rc2 = zeps_wait_all(reqs, 4);
    res->compute_s += b1 - b0;
    res->comm_s += zp_now_s() - b1;
    return rc ? rc : rc2;
}

static int train_loop(ctr_trainer *t, zp_train_result *res)
{
    const zp_config *cfg = t->cfg;
    int64_t total = (int64_t)t->spe * cfg->epochs;
    double start = zp_now_s(), epoch_start = start, loss_sum = 0;
    int rc = start_step(t, 0, &t->sb[0]);
    for (int64_t c = 0; c < total && rc == 0; c++) {
        step_buf *s = &t->sb[c % 2], *nxt = c + 1 < total ? &t->sb[(c + 1) % 2] : NULL;
        double a = zp_now_s();
        rc = zeps_wait_all(s->pull, NTABLES);
        res->comm_s += zp_now_s() - a;
        if (rc)
            break;
        if (*t->stop) {
            zp_warn("stopped by a signal at step %lld", (long long)c);
            rc = ZEPS_ECLOSED;
            break;
        }
        double loss;
        rc = run_step(t, c, s, nxt, &loss, res);
        if (rc)
            break;
        loss_sum += loss;
        res->iterations++;
        res->examples += (int64_t)s->nb;
        if ((c + 1) % (int64_t)t->spe != 0)
            continue;
        int epoch = (int)((c + 1) / (int64_t)t->spe);
        double now = zp_now_s();
        zp_info("epoch %d/%d: train loss %.4f, %.0f examples/s, communication %.1f%%", epoch,
                cfg->epochs, loss_sum / (double)t->spe, (double)t->train->n / (now - epoch_start),
                100.0 * res->comm_s / (res->comm_s + res->compute_s + 1e-12));
        loss_sum = 0;
        if (t->rank == 0 && epoch % cfg->eval_every == 0 && epoch < cfg->epochs) {
            zp_eval ev;
            double e0 = zp_now_s();
            rc = evaluate(t, c + 1, &ev);
            res->eval_s += zp_now_s() - e0;
            if (rc == 0) {
                char what[64];
                snprintf(what, sizeof(what), "epoch %d/%d", epoch, cfg->epochs);
                log_eval(what, &ev);
            }
        }
        epoch_start = zp_now_s();
    }
    for (int i = 0; i < 2; i++)
        zeps_wait_all(t->sb[i].pull, NTABLES);
    res->wall_s = zp_now_s() - start;
    return rc;
}

/* training.max_train_examples split over the workers (0: no cap). */
static uint64_t worker_cap(const zp_config *cfg, int nworkers)
{
    uint64_t n = (uint64_t)nworkers;
    return cfg->max_train_examples ? ((uint64_t)cfg->max_train_examples + n - 1) / n : 0;
}

/* The largest partition any worker holds: lines i with i mod N == 0 are
 * the most, capped as each worker's share is. */
static size_t largest_partition(const ctr_trainer *t)
{
    uint64_t n = (uint64_t)t->nworkers, cap = worker_cap(t->cfg, t->nworkers);
    uint64_t most = (t->train->file_lines + n - 1) / n;
    if (cap && cap < most)
        most = cap;
    return most > t->train->n ? (size_t)most : t->train->n;
}

static int load_data(ctr_trainer *t)
{
    const zp_config *cfg = t->cfg;
    const zp_ctr_reader_ops *ops = zp_ctr_reader_find(cfg->ctr_format);
    char err[1500];
    if (!ops) {
        zp_error("unknown data format '%s'", cfg->ctr_format);
        return ZEPS_ECONFIG;
    }
    uint64_t cap = worker_cap(cfg, t->nworkers);
    double t0 = zp_now_s();
    int rc = zp_ctr_data_load(&t->train, ops, cfg->ctr_train_file, t->rank, t->nworkers, cap, err,
                              sizeof(err));
    if (rc == 0 && t->train->n == 0)
        rc = zp_seterr(err, sizeof(err), ZEPS_EDATA, "%s: no training examples for rank %d",
                       cfg->ctr_train_file, t->rank);
    if (rc == 0 && t->rank == 0) {
        rc = zp_ctr_data_load(&t->test, ops, cfg->ctr_test_file, 0, 1,
                              (uint64_t)cfg->ctr_max_test_examples, err, sizeof(err));
        if (rc == 0 && t->test->n == 0)
            rc =
                zp_seterr(err, sizeof(err), ZEPS_EDATA, "%s: no test examples", cfg->ctr_test_file);
    }
    if (rc != 0) {
        zp_error("%s", err);
        return rc;
    }
    zp_info("read %zu training examples (%zu ids) of %s%s in %.1f s", t->train->n,
            t->train->off[t->train->n], cfg->ctr_train_file, t->test ? " and the test set" : "",
            zp_now_s() - t0);
    return 0;
}

int zp_train_ctr_run(const zp_config *cfg, int rank, zp_train_result *out, volatile int *stop)
{
    ctr_trainer t = {.cfg = cfg, .rank = rank, .nworkers = cfg->num_workers, .stop = stop};
    zp_train_result res = {.rank = rank, .epochs = cfg->epochs};
    int rc = load_data(&t);
    if (rc == 0) {
        t.dim = (uint32_t)cfg->ctr_emb_dim;
        t.ndw = (uint32_t)t.train->ndense + 1;
        t.batch = (size_t)cfg->batch_size;
        t.part_max = largest_partition(&t);
        t.spe = (t.part_max + t.batch - 1) / t.batch;
        t.order = zp_xmalloc(t.train->n * sizeof(uint32_t));
        t.gdense = zp_xcalloc(t.ndw, sizeof(float));
        for (int i = 0; i < 2; i++) {
            t.sb[i].ex = zp_xmalloc(t.batch * sizeof(size_t));
            t.sb[i].dw = zp_xcalloc(t.ndw, sizeof(float));
        }
        rc = zeps_client_new(&t.client, cfg->path, (uint32_t)rank);
    }
    if (rc == 0) {
        zeps_client_set_interrupt(t.client, stop);
        rc = declare(&t);
    }
    if (rc == 0)
        rc = zeps_barrier(t.client);
    if (rc == 0) {
        zp_info("training ctr: %d epochs of %zu steps (batch %zu), emb_dim %u, sparse %s, %s",
                cfg->epochs, t.spe, t.batch, t.dim, cfg->ctr_sparse_optimizer,
                zp_consistency_name(cfg->consistency));
        rc = train_loop(&t, &res);
        if (rc != 0 && rc != ZEPS_EDIVERGED && rc != ZEPS_ECLOSED)
            zp_error("training stopped: %s", zeps_last_error(t.client));
    }
    if (rc == ZEPS_ECLOSED)
        res.stopped = 1;
    if (rc == 0)
        rc = zeps_barrier(t.client);
    if (rc == 0 && rank == 0) {
        double e0 = zp_now_s();
        rc = evaluate(&t, res.iterations, &res.final);
        res.eval_s += zp_now_s() - e0;
        if (rc == 0) {
            res.evaluated = 1;
            log_eval("final", &res.final);
        } else {
            zp_error("final evaluation: %s", zeps_last_error(t.client));
        }
    }
    for (int i = 0; i < 2; i++)
        step_buf_fini(&t.sb[i]);
    zeps_client_destroy(&t.client);
    zp_ctr_data_destroy(&t.train);
    zp_ctr_data_destroy(&t.test);
    free(t.order);
    free(t.glin);
    free(t.gemb);
    free(t.gdense);
    *out = res;
    return rc;
}
