/*
 * zt_delay_sim.c - the reference for `zepsctl study --inject`: the
 * delayed-gradient iteration the cluster is meant to run, computed in one
 * process with no server, no sockets and no turns:
 *
 *     x_{k+1} = x_k - lr * w(tau_k) * grad f(x_{k - tau_k}),
 *
 * for the quadratic model the workers run (its own gradient and
 * evaluation, worker/train/models/quadratic.c), tau_k drawn as a shard
 * draws it for the worker whose turn update k is (rank k mod N), and
 * measured as the study measures a run: rank 0 evaluates what it was
 * served at each of its turns. tests/cluster/textbook_compare.py holds the
 * study's runs against it.
 *
 *   zt_delay_sim SCHEDULE TAU LR FUNCTION SEED WORKERS ITERATIONS DIM COND THRESHOLD [stop]
 *
 * prints "outcome updates final_rel mid_rel count" (outcome converged,
 * diverges or stalls; updates the first version under THRESHOLD rank 0 was
 * served, or inf; count the updates computed). With "stop" the iteration
 * ends at that first version, as a run with training.target_rel_distance
 * does (the workers stop on FINISH); without it, it runs out the budget.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "inject.h"
#include "model.h"

#define DIVERGED_REL  1e3  /* zepsctl study's rule */
#define DIVERGED_LOSS 1e30 /* zeps-worker's */

static double weight(const char *fn, uint64_t tau)
{
    if (strcmp(fn, "inverse") == 0)
        return 1.0 / (1.0 + (double)tau);
    if (strcmp(fn, "lr_over_tau") == 0)
        return 1.0 / (tau > 1 ? (double)tau : 1.0);
    return 1.0;
}

typedef struct sim {
    zp_model *m;
    zp_inject inj;
    int d, workers;
    float *hist; /* versions k - window .. k, ring of (window + 1) * d */
    uint32_t keep;
    double *rel; /* rank 0's evaluations */
    size_t nrel;
} sim;

static float *version_at(sim *s, uint64_t v)
{
    return s->hist + (size_t)(v % s->keep) * (size_t)s->d;
}

/* Rank 0 is served version v: evaluate it as the worker does. */
static double evaluate(sim *s, float *x)
{
    zp_eval ev;
    float *w[1] = {x};
    zp_quadratic_ops.evaluate(s->m, w, &ev);
    s->rel[s->nrel++] = ev.rel_distance;
    return ev.rel_distance;
}

static void usage(void)
{
    fprintf(stderr, "usage: zt_delay_sim SCHEDULE TAU LR FUNCTION SEED WORKERS ITERATIONS DIM "
                    "COND THRESHOLD [stop]\n");
    exit(2);
}

static void setup(sim *s, char **argv)
{
    zp_config cfg;
    zp_config_keys_defaults(&cfg);
    cfg.num_workers = s->workers = atoi(argv[6]);
    cfg.num_shards = 1;
    cfg.inject = strcmp(argv[1], "fixed") == 0 ? ZP_INJECT_FIXED : ZP_INJECT_UNIFORM;
    cfg.inject_tau = cfg.inject_max_tau = atoi(argv[2]);
    cfg.inject_seed = cfg.seed = strtoull(argv[5], NULL, 10);
    cfg.iterations = atoi(argv[7]);
    cfg.dim = s->d = atoi(argv[8]);
    cfg.condition = atof(argv[9]);
    snprintf(cfg.model, sizeof(cfg.model), "quadratic");
    char err[256];
    if (zp_inject_init(&s->inj, &cfg, err, sizeof(err)) != 0 ||
        zp_quadratic_ops.create(&s->m, &cfg, 0, s->workers, err, sizeof(err)) != 0) {
        fprintf(stderr, "zt_delay_sim: %s\n", err);
        exit(2);
    }
    s->keep = s->inj.window + 1;
    s->hist = calloc((size_t)s->keep * (size_t)s->d, sizeof(float)); /* x_0 = 0 ("zeros") */
    s->rel = calloc((size_t)cfg.iterations + 1, sizeof(double));
}

int main(int argc, char **argv)
{
    if (argc != 11 && !(argc == 12 && strcmp(argv[11], "stop") == 0))
        usage();
    bool stop = argc == 12;
    sim s = {0};
    setup(&s, argv);
    float lr = (float)atof(argv[3]), thr = (float)atof(argv[10]);
    const char *fn = argv[4];
    uint64_t updates = (uint64_t)s.workers * (uint64_t)atoi(argv[7]);
    double first = INFINITY;
    const char *outcome = "stalls";
    float *g = malloc((size_t)s.d * sizeof(float)), *gw[1] = {g};
    uint64_t k;
    for (k = 0; k < updates; k++) {
        uint32_t rank = (uint32_t)(k % (uint64_t)s.workers);
        uint64_t tau = zp_inject_tau(&s.inj, rank, k);
        tau = tau < k ? tau : k; /* nothing is older than the start */
        float *read = version_at(&s, k - tau), *wr[1] = {read};
        if (rank == 0 && (evaluate(&s, read) > DIVERGED_REL || !isfinite(s.rel[s.nrel - 1]))) {
            outcome = "diverges";
            break;
        }
        if (rank == 0 && s.rel[s.nrel - 1] < thr && isinf(first)) {
            first = (double)(k - tau);
            if (stop)
                break;
        }
        double loss = zp_quadratic_ops.grad(s.m, wr, gw, (int64_t)k);
        if (!isfinite(loss) || loss > DIVERGED_LOSS) {
            outcome = "diverges";
            break;
        }
        float *cur = version_at(&s, k), *next = version_at(&s, k + 1);
        float a = -lr * (float)weight(fn, tau);
        for (int i = 0; i < s.d; i++)
            next[i] = fmaf(a, g[i], cur[i]);
    }
    if (strcmp(outcome, "diverges") != 0 && isfinite(first))
        outcome = "converged";
    double fin = s.nrel ? s.rel[s.nrel - 1] : NAN, mid = s.nrel ? s.rel[s.nrel / 2] : NAN;
    printf("%s %.17g %.6g %.6g %llu\n", outcome, first, fin, mid, (unsigned long long)k);
    zp_quadratic_ops.destroy(&s.m);
    zp_inject_fini(&s.inj);
    free(s.hist);
    free(s.rel);
    free(g);
    return 0;
}
