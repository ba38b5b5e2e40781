/*
 * train.c - the training loop of zeps-worker, one for every model.
 *
 * Iteration c (the worker's clock): pull every table as of clock c, compute
 * the gradient of minibatch c, push it for clock c, tell the shards the
 * clock is finished. The per-table requests of one step are all in flight
 * together, and the next step's pulls start before this step's pushes are
 * waited on, so pushes and pulls share the wire (step.c sends them). Rank 0
 * evaluates the model after every eval_every epochs and at the end, after a
 * barrier, so the final figure is of the parameters every worker
 * contributed to. A model with sparse tables differs only inside step.c:
 * its minibatch names the rows to pull, and it evaluates on rows it pulls
 * for its test set.
 *
 * Two things serve experiments on stale updates. An injected per-step delay
 * (delay.c) simulates slow or noisy workers. With eval_every_steps rank 0
 * also evaluates the parameters it has just pulled, before computing its
 * gradient, every N steps, which gives a convergence curve against steps
 * in the result JSON; that time counts as eval_s, not compute or comm.
 */
#include "train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "now.h"
#include "step.h"
#include "wmetrics.h"
#include "zeps.h"

/* Set from a signal handler (zp_train_request_stop), and read by one
 * (zp_train_talking): the process-wide state here, as a signal cannot be
 * given a context. `talking` is set once the worker first calls a shard. */
static volatile sig_atomic_t stop_requested, talking;

void zp_train_request_stop(void)
{
    stop_requested = 1;
}

int zp_train_talking(void)
{
    return talking;
}

/* A training loss above this (or not finite) ends training as diverged. */
#define ZP_DIVERGED_LOSS 1e30

int zp_train_curve_due(const zp_config *cfg, int rank, int64_t step)
{
    return rank == 0 && cfg->eval_every_steps > 0 && step % cfg->eval_every_steps == 0;
}

static void log_eval(const zp_trainer *t, const char *what, const zp_eval *e)
{
    if (t->ops->reports_auc)
        zp_info("%s: test AUC %.4f, logloss %.4f, accuracy %.4f (%d examples)", what, e->auc,
                e->loss, e->accuracy, e->examples);
    else if (isnan(e->accuracy))
        zp_info("%s: loss %.6g, |x - x*| %.4g, relative %.4g", what, e->loss, e->distance,
                e->rel_distance);
    else
        zp_info("%s: test accuracy %.4f, test loss %.4f", what, e->accuracy, e->loss);
}

/* bsp recovery: a shard restarted from a snapshot (or rolled back). Go
 * back to the cut with every shard (zeps_rollback) and return the clock to
 * redo from. Retried when another worker's rollback overtakes this one. */
static int recover(zp_trainer *t, int64_t *clock)
{
    zp_step_wait_all(t); /* failed already; release the handles */
    int rc = ZEPS_ERESTARTED;
    for (int tries = 0; tries < 20 && rc == ZEPS_ERESTARTED && !stop_requested; tries++) {
        int64_t cut = zeps_resume_clock(t->client);
        rc = zeps_rollback(t->client, cut);
        if (rc == 0) {
            zp_warn("a shard restarted: resuming from clock %lld (snapshot cut)", (long long)cut);
            *clock = cut;
        }
    }
    if (rc != 0 && rc != ZEPS_ERESTARTED)
        zp_error("recovery failed: %s", zeps_last_error(t->client));
    return rc;
}

/* Rank 0, with eval_every_steps: a curve point of what step c pulled. */
static int curve_point(zp_trainer *t, zp_train_result *res, int64_t c, double t_s)
{
    zp_eval ev;
    int rc = zp_step_evaluate(t, c, ZP_EVAL_PULLED, &ev);
    if (rc)
        return rc;
    zp_result_curve_add(&res->curve, c, zeps_pulled_version(t->client, t->ids[0], 0), &ev);
    zeps_client_stats cs;
    zeps_client_get_stats(t->client, &cs);
    zp_curve_point *pt = &res->curve.points[res->curve.n - 1];
    pt->bytes_out = cs.bytes_out;
    pt->bytes_in = cs.bytes_in;
    pt->t_s = t_s;
    return 0;
}

/* The end of epoch `epoch` at clock c: log it and (rank 0, every
 * eval_every epochs but the last) evaluate, with step c's pulls in flight. */
static int end_epoch(zp_trainer *t, zp_train_result *res, int epoch, int64_t c, double loss,
                     double examples_per_s)
{
    const zp_config *cfg = t->cfg;
    zp_info("epoch %d/%d: train loss %.4f, %.0f examples/s, communication %.1f%%", epoch,
            cfg->epochs, loss, examples_per_s,
            100.0 * res->comm_s / (res->comm_s + res->compute_s + 1e-12));
    if (t->rank != 0 || epoch % cfg->eval_every != 0 || epoch >= cfg->epochs)
        return 0;
    zp_eval ev;
    double e0 = zp_now_s();
    int rc = zp_step_evaluate(t, c, ZP_EVAL_IN_FLIGHT, &ev);
    res->eval_s += zp_now_s() - e0;
    if (rc == 0) {
        char what[64];
        snprintf(what, sizeof(what), "epoch %d/%d", epoch, cfg->epochs);
        log_eval(t, what, &ev);
    }
    return rc;
}

/* Rank 0 with training.target_accuracy or target_rel_distance: did the
 * curve point just taken at step c reach it? Training then ends after step
 * c's push, and FINISH ends it for the other workers (train_loop). */
static void reached(const zp_config *cfg, zp_train_result *res, int64_t c)
{
    const zp_curve_point *pt = &res->curve.points[res->curve.n - 1];
    bool acc = cfg->target_accuracy > 0 && pt->accuracy >= cfg->target_accuracy;
    bool rel = cfg->target_rel_distance > 0 && pt->rel_distance < cfg->target_rel_distance;
    if (res->reached_target || !(acc || rel))
        return;
    if (acc)
        zp_info("test accuracy %.4f reached the target %.4f at step %lld: stopping",
                pt->accuracy, cfg->target_accuracy, (long long)c);
    else
        zp_info("relative distance %.4g reached the target %.4g at step %lld: stopping",
                pt->rel_distance, cfg->target_rel_distance, (long long)c);
    res->reached_target = 1;
    res->target_step = c;
}

/* The end of the loop: a pull answered EFINISHED means another worker
 * reached the job's target (FINISH), a normal end for this one; the worker
 * that reached it says FINISH once its last push was acknowledged, so no
 * update of its own is cut short. A shard that does not know FINISH is
 * said and not fatal: the others then run out their budget. */
static int loop_end(zp_trainer *t, zp_train_result *res, int rc, int64_t c)
{
    if (rc == ZEPS_EFINISHED) {
        zp_info("step %lld: %s", (long long)c, zeps_last_error(t->client));
        res->finished = 1;
        res->finished_step = c;
        return 0;
    }
    if (rc != 0 || !res->reached_target)
        return rc;
    if (zeps_finish(t->client, res->target_step) != 0)
        zp_warn("FINISH was not taken (%s): the other workers run out their step budget",
                zeps_last_error(t->client));
    return 0;
}

/* Step c once its pulls arrived (at time b; training started at t_start):
 * curve point, gradient, delay, pushes. Returns 0, a
 * zeps_err, ZEPS_EDIVERGED or ZEPS_ECLOSED (stopped). */
static int one_step(zp_trainer *t, zp_train_result *res, int64_t c, int64_t total, double t_start,
                    double b, double *loss)
{
    double compute_start = b;
    if (zp_train_curve_due(t->cfg, t->rank, c)) {
        int rc = curve_point(t, res, c, b - t_start);
        if (rc)
            return rc;
        reached(t->cfg, res, c);
        double now = zp_now_s();
        res->eval_s += now - b;
        compute_start = now;
    }
    if (stop_requested) {
        zp_warn("stopped by a signal at step %lld", (long long)c);
        res->stopped = 1;
        return ZEPS_ECLOSED;
    }
    size_t examples;
    *loss = zp_step_grad(t, c, &examples);
    if (!isfinite(*loss) || *loss > ZP_DIVERGED_LOSS) {
        /* stop before pushing what would be Inf or NaN: the servers would
         * refuse it, and a study wants a clean "diverged" outcome */
        zp_error("diverged at step %lld: loss %g", (long long)c, *loss);
        res->diverged = 1;
        res->diverged_step = c;
        return ZEPS_EDIVERGED;
    }
    zp_delay_inject(t->cfg, t->rank, c);
    double d = zp_now_s();
    /* no pull after the target: under injected turns a served pull holds
     * the turn until its push, which would then never come */
    int rc = zp_step_push(t, c, c + 1 < total && !res->reached_target);
    double e = zp_now_s();
    /* a sparse model builds the batches of the step entering its pipe:
     * the worker's own work, so compute (it waits for nothing) */
    if (rc == 0 && !res->reached_target)
        rc = zp_step_feed(t, c);
    res->comm_s += e - d;
    res->compute_s += (d - compute_start) + (zp_now_s() - e);
    res->iterations++;
    res->examples += (int64_t)examples;
    return rc;
}

/* Hand the step's figures to the metrics endpoint, if there is one. */
static void publish(zp_trainer *t, const zp_train_result *res, double step_s)
{
    if (!t->metrics)
        return;
    zeps_client_stats cs;
    zeps_client_get_stats(t->client, &cs);
    zp_wmetrics_update(t->metrics, res, &cs, step_s);
}

/* Steps [start, total). Under bsp a step that fails with ERESTARTED sends
 * the loop back to the cut every shard rolled back to: the steps after it
 * are redone, on the same data (a model's minibatch is a function of the
 * step), so the result is the one an undisturbed run would give. */
static int train_loop(zp_trainer *t, zp_train_result *res, int64_t start)
{
    int spe = t->ops->steps_per_epoch(t->model);
    int64_t total = (int64_t)spe * t->cfg->epochs;
    double t_start = zp_now_s(), epoch_start = t_start, loss_sum = 0, epoch_examples = 0;
    t->total = total;
    int rc = zp_step_start(t, start);
    int64_t c = start;
    while (c < total) {
        if (rc == ZEPS_ERESTARTED) {
            rc = recover(t, &c);
            if (rc == 0)
                rc = zp_step_start(t, c);
            loss_sum = epoch_examples = 0;
            epoch_start = zp_now_s();
            continue;
        }
        if (rc != 0)
            break;
        double a = zp_now_s();
        rc = zp_step_wait(t, c);
        double b = zp_now_s(), loss = 0;
        res->comm_s += b - a;
        if (rc)
            continue;
        int64_t ex0 = res->examples;
        rc = one_step(t, res, c, total, t_start, b, &loss);
        if (rc == ZEPS_EDIVERGED || rc == ZEPS_ECLOSED)
            break;
        if (rc != 0)
            continue;
        loss_sum += loss;
        epoch_examples += (double)(res->examples - ex0);
        publish(t, res, zp_now_s() - a);
        if (res->reached_target)
            break; /* step c pushed, no pull in flight */
        if (++c % spe != 0)
            continue;
        double now = zp_now_s();
        rc = end_epoch(t, res, (int)(c / spe), c, loss_sum / spe,
                       epoch_examples / (now - epoch_start));
        loss_sum = epoch_examples = 0;
        epoch_start = zp_now_s();
    }
    /* pushes may still be in flight (a pipe's max_inflight): their
     * errors count as the loop's */
    double a = zp_now_s();
    int rc2 = zp_step_drain(t);
    res->comm_s += zp_now_s() - a;
    if (rc == 0 || rc == ZEPS_EFINISHED)
        rc = rc2 ? rc2 : rc;
    rc = loop_end(t, res, rc, c);
    res->wall_s += zp_now_s() - t_start;
    return rc;
}

/* Steps until the end, then the final barrier; a shard restarted while
 * others were still training sends everyone back to the cut again. */
static int train_all(zp_trainer *t, zp_train_result *res, int64_t start, int rejoined)
{
    const zp_config *cfg = t->cfg;
    int spe = t->ops->steps_per_epoch(t->model);
    int64_t total = (int64_t)spe * cfg->epochs;
    zp_info("training %s: %d epochs of %d steps, %d tables, %s%s", cfg->model, cfg->epochs, spe,
            t->ntables, cfg->consistency, rejoined ? " (rejoining)" : "");
    if (start > 0)
        zp_warn("resuming at clock %lld of %lld (recorded by the shards)", (long long)start,
                (long long)total);
    zp_delay_log(cfg, t->rank);
    int rc;
    for (;;) {
        rc = train_loop(t, res, start);
        /* Everyone finished pushing: rank 0 evaluates the final parameters. */
        if (rc == 0)
            rc = zeps_barrier(t->client);
        if (rc == ZEPS_ERESTARTED && recover(t, &start) == 0)
            continue;
        break;
    }
    if (rc == ZEPS_ECLOSED)
        res->stopped = 1; /* interrupted in a wait or between steps */
    if (rc != 0 && rc != ZEPS_EDIVERGED && rc != ZEPS_ECLOSED)
        zp_error("training stopped: %s", zeps_last_error(t->client));
    /* at the clock it stopped at: under bsp a pull of clock `total` would
     * wait for pushes a worker stopped at the target never sends */
    int64_t end = res->reached_target ? res->target_step + 1 : total;
    if (rc == 0)
        zeps_client_set_done(t->client, end); /* its BYE says it ran all its steps */
    if (rc == 0 && t->rank == 0) {
        double e0 = zp_now_s();
        rc = zp_step_evaluate(t, end, ZP_EVAL_PULL, &res->final);
        res->eval_s += zp_now_s() - e0;
        if (rc == 0) {
            res->evaluated = 1;
            log_eval(t, "final", &res->final);
        }
    }
    return rc;
}

int zp_train_run(const zp_config *cfg, int rank, zp_train_result *out)
{
    zp_trainer t = {.cfg = cfg, .rank = rank};
    zp_train_result res = {.rank = rank, .epochs = cfg->epochs};
    char err[1536] = "";
    t.ops = zp_model_find(cfg->model);
    if (!t.ops) {
        zp_error("unknown model '%s' (known: %s)", cfg->model, zp_model_names());
        *out = res;
        return ZEPS_ECONFIG;
    }
    res.has_auc = t.ops->reports_auc;
    if (cfg->worker_metrics_listen[0] &&
        zp_wmetrics_start(&t.metrics, cfg->worker_metrics_listen, rank, err, sizeof(err)) != 0) {
        zp_error("%s", err);
        *out = res;
        return ZEPS_ECONFIG;
    }
    int rc = t.ops->create(&t.model, cfg, rank, cfg->num_workers, err, sizeof(err));
    if (rc != 0) {
        zp_error("model %s: %s", cfg->model, err);
        zp_wmetrics_stop(&t.metrics);
        *out = res;
        return rc;
    }
    /* interruptible from the first HELLO: a signal while the shards are not
     * up yet stops the worker at once */
    talking = 1;
    rc = zeps_client_new_interruptible(&t.client, cfg->path, (uint32_t)rank,
                                       (volatile int *)&stop_requested);
    if (rc == 0)
        res.started = 1;
    if (rc == ZEPS_ECLOSED)
        res.stopped = 1;
    if (rc == 0)
        rc = zp_step_declare(&t);
    /* A worker replacing one that died (or a job restored from a snapshot)
     * resumes at the clock the shards recorded for its rank; the others are
     * past the start-up barrier, so it does not wait there. */
    int64_t start = rc == 0 ? zeps_resume_clock(t.client) : 0;
    int rejoined = rc == 0 && zeps_rejoined(t.client);
    if (rc == 0 && !rejoined)
        rc = zeps_barrier(t.client);
    if (rc == 0)
        rc = train_all(&t, &res, start, rejoined);
    if (t.client)
        zeps_client_get_stats(t.client, &res.comm);
    res.pulled_in_place = t.pulled_in_place;
    res.pulled_copied = t.pulled_copied;
    if (res.comm.restarts)
        zp_info("recovered from %llu ERESTARTED answer(s)", (unsigned long long)res.comm.restarts);
    zp_step_wait_all(&t);
    zp_step_fini(&t); /* the pipe goes before its client */
    zeps_client_destroy(&t.client);
    t.ops->destroy(&t.model);
    zp_wmetrics_stop(&t.metrics);
    *out = res;
    return rc;
}
