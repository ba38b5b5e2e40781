/*
 * train.c - the training loop of zeps-worker.
 *
 * Iteration c (the worker's clock): pull every table as of clock c, compute
 * the gradient of minibatch c, push it for clock c, tell the shards the
 * clock is finished. The per-table requests of one step are all in flight
 * together, and the next step's pulls start before this step's pushes are
 * waited on, so pushes and pulls share the wire. Rank 0 evaluates the model
 * after every eval_every epochs and at the end, after a barrier, so the
 * final figure is of the parameters every worker contributed to.
 *
 * Two things serve experiments on stale updates. An injected per-step delay
 * (zp_train_delay_ms) simulates slow or noisy workers; it is a pure function
 * of (seed, rank, step) so reruns see the same delays. With eval_every_steps
 * rank 0 also evaluates the parameters it has just pulled, before computing
 * its gradient, every N steps, which gives a convergence curve against steps
 * in the result JSON; that time counts as eval_s, not compute or comm.
 */
#include "train.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "train_ctr.h"
#include "util.h"
#include "zeps.h"

/* Set from a signal handler (zp_train_request_stop): the one piece of
 * process-wide state here, as a signal cannot be given a context. */
static volatile sig_atomic_t stop_requested;

void zp_train_request_stop(void)
{
    stop_requested = 1;
}

/* A training loss above this (or not finite) ends training as diverged. */
#define ZP_DIVERGED_LOSS 1e30

typedef struct trainer {
    const zp_config *cfg;
    int rank;
    zeps_client *client;
    const zp_model_ops *ops;
    zp_model *model;
    int ntables;
    zp_table_def defs[ZP_MODEL_MAX_TABLES];
    uint32_t ids[ZP_MODEL_MAX_TABLES];
    float *w[ZP_MODEL_MAX_TABLES];
    float *g[ZP_MODEL_MAX_TABLES];
    float *m[ZP_MODEL_MAX_TABLES]; /* worker_momentum: the velocity pushed instead of g */
    zeps_req *pulls[ZP_MODEL_MAX_TABLES];
} trainer;

/* zp_rng stream of the injected delays (ASCII "delay"), apart from the
 * models' streams. */
#define STREAM_DELAY 0x64656c6179ull

static int declare_tables(trainer *t)
{
    const zp_config *cfg = t->cfg;
    t->ntables = t->ops->tables(t->model, t->defs);
    for (int i = 0; i < t->ntables; i++) {
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
        if (strcmp(cfg->push_codec, "none") != 0) {
            zeps_codec_opts co = {.codec = cfg->push_codec,
                                  .fraction = cfg->codec_fraction,
                                  .block = (uint32_t)cfg->codec_block,
                                  .error_feedback = cfg->error_feedback,
                                  .seed = cfg->seed * 7919u + (uint64_t)t->rank};
            rc = zeps_set_push_codec(t->client, t->ids[i], &co);
            if (rc != 0) {
                zp_error("table '%s': %s", spec.name, zeps_last_error(t->client));
                return rc;
            }
        }
        if (strcmp(cfg->pull_codec, "none") != 0) {
            /* t->w[i] is the one buffer every pull of the table goes into,
             * and nothing but pulls writes it: the compressed-pull contract */
            zeps_codec_opts co = {.codec = cfg->pull_codec,
                                  .fraction = cfg->codec_fraction,
                                  .block = (uint32_t)cfg->codec_block,
                                  .seed = cfg->seed * 7919u + 104729u + (uint64_t)t->rank};
            rc = zeps_set_pull_codec(t->client, t->ids[i], &co);
            if (rc != 0) {
                zp_error("table '%s': %s", spec.name, zeps_last_error(t->client));
                return rc;
            }
        }
        t->w[i] = zp_xmalloc(t->defs[i].length * sizeof(float));
        t->g[i] = zp_xmalloc(t->defs[i].length * sizeof(float));
        if (cfg->worker_momentum > 0)
            t->m[i] = zp_xcalloc(t->defs[i].length, sizeof(float));
    }
    return 0;
}

static int start_pulls(trainer *t, int64_t clock)
{
    for (int i = 0; i < t->ntables; i++) {
        int rc = zeps_pull_start(t->client, t->ids[i], t->w[i], 0, t->defs[i].length, clock,
                                 &t->pulls[i]);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Push every table's gradient for `clock`, say the clock is finished, and
 * (unless this was the last step) start the next step's pulls, all in
 * flight together; then wait for the pushes and the clock. Messages to one
 * shard keep their order, so the pulls see this worker's own pushes. */
static int push_clock_pull(trainer *t, int64_t clock, int pull_next)
{
    zeps_req *reqs[ZP_MODEL_MAX_TABLES + 1] = {0};
    int rc = 0;
    for (int i = 0; i < t->ntables && rc == 0; i++) {
        const float *send = t->g[i];
        if (t->m[i]) {
            /* heavy-ball momentum before compression (as DGC does): the
             * codec and its error feedback see the velocity, and the
             * shard applies what arrives with plain sgd */
            float mu = (float)t->cfg->worker_momentum;
            for (uint64_t k = 0; k < t->defs[i].length; k++)
                t->m[i][k] = mu * t->m[i][k] + t->g[i][k];
            send = t->m[i];
        }
        rc = zeps_push_start(t->client, t->ids[i], send, 0, t->defs[i].length, clock, &reqs[i]);
    }
    if (rc == 0)
        rc = zeps_clock_start(t->client, clock, &reqs[t->ntables]);
    if (rc == 0 && pull_next)
        rc = start_pulls(t, clock + 1);
    int rc2 = zeps_wait_all(reqs, t->ntables + 1);
    return rc ? rc : rc2;
}

static int is_slow(const zp_config *cfg, int rank)
{
    for (int i = 0; i < cfg->num_slow_ranks; i++)
        if (cfg->slow_ranks[i] == rank)
            return 1;
    return 0;
}

/* See train.h. One generator per step, seeded from (seed, rank, step),
 * costs a few mixes and keeps step c's delay independent of steps 0..c-1. */
double zp_train_delay_ms(const zp_config *cfg, int rank, int64_t step)
{
    double ms = cfg->delay_ms;
    zp_rng r;
    zp_rng_seed(&r, cfg->seed ^ STREAM_DELAY, (uint64_t)rank, (uint64_t)step);
    switch (cfg->delay_dist) {
    case ZP_DELAY_FIXED:
        break;
    case ZP_DELAY_UNIFORM:
        ms += cfg->delay_jitter_ms * zp_rng_uniform(&r);
        break;
    case ZP_DELAY_LOGNORMAL:
        ms *= exp(cfg->delay_sigma * zp_rng_normal(&r));
        break;
    }
    if (is_slow(cfg, rank))
        ms *= cfg->slow_factor;
    return ms;
}

/* Say once what delay this worker injects, if any. */
static void log_delay(const trainer *t)
{
    const zp_config *cfg = t->cfg;
    char what[128] = "";
    if (cfg->delay_dist == ZP_DELAY_UNIFORM)
        snprintf(what, sizeof(what), " + U[0, %g) ms", cfg->delay_jitter_ms);
    else if (cfg->delay_dist == ZP_DELAY_LOGNORMAL)
        snprintf(what, sizeof(what), " (median), log-stddev %g", cfg->delay_sigma);
    double factor = is_slow(cfg, t->rank) ? cfg->slow_factor : 1.0;
    if (cfg->delay_ms <= 0 && (cfg->delay_dist != ZP_DELAY_UNIFORM || cfg->delay_jitter_ms <= 0))
        zp_info("injected delay: none");
    else if (factor != 1.0)
        zp_info("injected delay: %s, %g ms%s, times %g (slow rank)",
                zp_delay_dist_name(cfg->delay_dist), cfg->delay_ms, what, factor);
    else
        zp_info("injected delay: %s, %g ms%s", zp_delay_dist_name(cfg->delay_dist), cfg->delay_ms,
                what);
}

/* Sleep for step `step`'s injected compute delay. */
static void inject_delay(trainer *t, int64_t step)
{
    double ms = zp_train_delay_ms(t->cfg, t->rank, step);
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000.0), (long)(fmod(ms, 1000.0) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int zp_train_curve_due(const zp_config *cfg, int rank, int64_t step)
{
    return rank == 0 && cfg->eval_every_steps > 0 && step % cfg->eval_every_steps == 0;
}

void zp_curve_add(zp_curve *c, int64_t step, uint64_t version, const zp_eval *e)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->points = zp_xrealloc(c->points, c->cap * sizeof(*c->points));
    }
    /* As the flat final_* keys: a classifier (accuracy not NaN) has no
     * distance to an optimum, whatever its zp_eval holds there. */
    int classifier = !isnan(e->accuracy);
    c->points[c->n++] = (zp_curve_point){
        .step = step,
        .loss = e->loss,
        .rel_distance = classifier ? NAN : e->rel_distance,
        .distance = classifier ? NAN : e->distance,
        .accuracy = e->accuracy,
        .version = version,
    };
}

void zp_train_result_fini(zp_train_result *r)
{
    free(r->curve.points);
    r->curve = (zp_curve){0};
}

static void log_eval(const trainer *t, const char *what, const zp_eval *e)
{
    if (isnan(e->accuracy))
        zp_info("%s: loss %.6g, |x - x*| %.4g, relative %.4g", what, e->loss, e->distance,
                e->rel_distance);
    else
        zp_info("%s: test accuracy %.4f, test loss %.4f", what, e->accuracy, e->loss);
}

/* Rank 0: pull the current parameters at `clock` and evaluate them. */
static int evaluate_now(trainer *t, int64_t clock, zp_eval *out, zp_train_result *res)
{
    double t0 = zp_now_s();
    int rc = start_pulls(t, clock);
    int rc2 = zeps_wait_all(t->pulls, t->ntables);
    if (rc || rc2)
        return rc ? rc : rc2;
    rc = t->ops->evaluate(t->model, t->w, out);
    res->eval_s += zp_now_s() - t0;
    return rc;
}

/* bsp recovery: a shard restarted from a snapshot (or rolled back). Go
 * back to the cut with every shard (zeps_rollback) and return the clock to
 * redo from. Retried when another worker's rollback overtakes this one. */
static int recover(trainer *t, int64_t *clock)
{
    zeps_wait_all(t->pulls, t->ntables); /* failed already; release the handles */
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

/* Steps [start, total). Under bsp a step that fails with ERESTARTED sends
 * the loop back to the cut every shard rolled back to: the steps after it
 * are redone, on the same data (a model's minibatch is a function of the
 * step), so the result is the one an undisturbed run would give. */
static int train_loop(trainer *t, zp_train_result *res, int64_t start)
{
    const zp_config *cfg = t->cfg;
    int spe = t->ops->steps_per_epoch(t->model);
    int bex = t->ops->batch_examples(t->model);
    int64_t total = (int64_t)spe * cfg->epochs;
    double t_start = zp_now_s(), epoch_start = t_start, loss_sum = 0;
    int rc = start_pulls(t, start);
    for (int64_t c = start; c < total;) {
        if (rc == ZEPS_ERESTARTED) {
            rc = recover(t, &c);
            if (rc == 0)
                rc = start_pulls(t, c);
            loss_sum = 0;
            epoch_start = zp_now_s();
            continue;
        }
        if (rc != 0)
            break;
        double a = zp_now_s();
        rc = zeps_wait_all(t->pulls, t->ntables);
        double b = zp_now_s(), compute_start = b;
        if (rc)
            continue;
        if (zp_train_curve_due(cfg, t->rank, c)) {
            /* t->w holds what step c pulled: the point is of those parameters. */
            zp_eval ev;
            rc = t->ops->evaluate(t->model, t->w, &ev);
            if (rc)
                break;
            zp_curve_add(&res->curve, c, zeps_pulled_version(t->client, t->ids[0], 0), &ev);
            zeps_client_stats cs;
            zeps_client_get_stats(t->client, &cs);
            zp_curve_point *pt = &res->curve.points[res->curve.n - 1];
            pt->bytes_out = cs.bytes_out;
            pt->bytes_in = cs.bytes_in;
            pt->t_s = b - start;
            double now = zp_now_s();
            res->eval_s += now - b;
            compute_start = now;
        }
        if (stop_requested || rc == ZEPS_ECLOSED) {
            zp_warn("stopped by a signal at step %lld", (long long)c);
            res->stopped = 1;
            rc = ZEPS_ECLOSED;
            break;
        }
        double loss = t->ops->grad(t->model, t->w, t->g, c);
        if (!isfinite(loss) || loss > ZP_DIVERGED_LOSS) {
            /* stop before pushing what would be Inf or NaN: the servers would
             * refuse it, and a study wants a clean "diverged" outcome */
            zp_error("diverged at step %lld: loss %g", (long long)c, loss);
            res->diverged = 1;
            res->diverged_step = c;
            rc = ZEPS_EDIVERGED;
            break;
        }
        loss_sum += loss;
        inject_delay(t, c);
        double d = zp_now_s();
        rc = push_clock_pull(t, c, c + 1 < total);
        double e = zp_now_s();
        res->comm_s += (b - a) + (e - d);
        res->compute_s += d - compute_start;
        res->iterations++;
        res->examples += bex;
        if (rc != 0)
            continue;
        c++;
        if (c % spe != 0)
            continue;
        int epoch = (int)(c / spe);
        double now = zp_now_s();
        zp_info("epoch %d/%d: train loss %.4f, %.0f examples/s, communication %.1f%%", epoch,
                cfg->epochs, loss_sum / spe, (double)spe * bex / (now - epoch_start),
                100.0 * res->comm_s / (res->comm_s + res->compute_s));
        loss_sum = 0;
        epoch_start = now;
        if (t->rank == 0 && epoch % cfg->eval_every == 0 && epoch < cfg->epochs) {
            /* The pulls of step c are in flight into t->w: finish them
             * first, evaluate what they brought, then start them again. */
            zp_eval ev;
            rc = zeps_wait_all(t->pulls, t->ntables);
            double e0 = zp_now_s();
            if (rc == 0)
                rc = t->ops->evaluate(t->model, t->w, &ev);
            res->eval_s += zp_now_s() - e0;
            if (rc == 0) {
                char what[64];
                snprintf(what, sizeof(what), "epoch %d/%d", epoch, cfg->epochs);
                log_eval(t, what, &ev);
                rc = start_pulls(t, c);
            }
            epoch_start = zp_now_s();
        }
    }
    zeps_wait_all(t->pulls, t->ntables);
    res->wall_s += zp_now_s() - t_start;
    return rc;
}

int zp_train_run(const zp_config *cfg, int rank, zp_train_result *out)
{
    /* ctr trains sparse tables: its own loop (train_ctr.c) */
    if (strcmp(cfg->model, "ctr") == 0)
        return zp_train_ctr_run(cfg, rank, out, (volatile int *)&stop_requested);
    trainer t = {.cfg = cfg, .rank = rank};
    zp_train_result res = {.rank = rank, .epochs = cfg->epochs};
    char err[1024] = "";
    t.ops = zp_model_find(cfg->model);
    if (!t.ops) {
        zp_error("unknown model '%s' (known: %s)", cfg->model, zp_model_names());
        return ZEPS_ECONFIG;
    }
    int rc = t.ops->create(&t.model, cfg, rank, cfg->num_workers, err, sizeof(err));
    if (rc != 0) {
        zp_error("model %s: %s", cfg->model, err);
        return rc;
    }
    rc = zeps_client_new(&t.client, cfg->path, (uint32_t)rank);
    if (rc == 0)
        zeps_client_set_interrupt(t.client, (volatile int *)&stop_requested);
    if (rc == 0)
        rc = declare_tables(&t);
    /* A worker replacing one that died (or a job restored from a snapshot)
     * resumes at the clock the shards recorded for its rank; the others are
     * past the start-up barrier, so it does not wait there. */
    int64_t start = rc == 0 ? zeps_resume_clock(t.client) : 0;
    int rejoined = rc == 0 && zeps_rejoined(t.client);
    if (rc == 0 && !rejoined)
        rc = zeps_barrier(t.client);
    int64_t total = (int64_t)t.ops->steps_per_epoch(t.model) * cfg->epochs;
    if (rc == 0) {
        zp_info("training %s: %d epochs of %d steps, %d tables, %s%s", cfg->model, cfg->epochs,
                t.ops->steps_per_epoch(t.model), t.ntables, zp_consistency_name(cfg->consistency),
                rejoined ? " (rejoining)" : "");
        if (start > 0)
            zp_warn("resuming at clock %lld of %lld (recorded by the shards)", (long long)start,
                    (long long)total);
        log_delay(&t);
        for (;;) {
            rc = train_loop(&t, &res, start);
            /* Everyone finished pushing: rank 0 evaluates the final parameters. */
            if (rc == 0)
                rc = zeps_barrier(t.client);
            if (rc == ZEPS_ERESTARTED && recover(&t, &start) == 0)
                continue; /* a shard restarted while others were still training */
            break;
        }
        if (rc == ZEPS_ECLOSED)
            res.stopped = 1; /* interrupted in a wait or between steps */
        if (rc != 0 && rc != ZEPS_EDIVERGED && rc != ZEPS_ECLOSED)
            zp_error("training stopped: %s", zeps_last_error(t.client));
    }
    if (rc == 0 && rank == 0) {
        rc = evaluate_now(&t, total, &res.final, &res);
        if (rc == 0) {
            res.evaluated = 1;
            log_eval(&t, "final", &res.final);
        }
    }
    if (t.client)
        zeps_client_get_stats(t.client, &res.comm);
    if (res.comm.restarts)
        zp_info("recovered from %llu ERESTARTED answer(s)", (unsigned long long)res.comm.restarts);
    zeps_client_destroy(&t.client);
    for (int i = 0; i < t.ntables; i++) {
        free(t.w[i]);
        free(t.g[i]);
        free(t.m[i]);
    }
    t.ops->destroy(&t.model);
    *out = res;
    return rc;
}

static void json_num(FILE *f, const char *key, double v, int valid)
{
    if (valid && isfinite(v))
        fprintf(f, ",\"%s\":%.10g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

/* A JSON number, or null for NaN/Inf (JSON has neither). */
static void json_value(FILE *f, const char *sep, double v)
{
    if (isfinite(v))
        fprintf(f, "%s%.10g", sep, v);
    else
        fprintf(f, "%snull", sep);
}

/* ,"curve":[[step,loss,rel_distance,distance,accuracy,version],...] - always
 * present, [] when no curve was recorded, so readers need not test for it. */
static void write_curve(FILE *f, const zp_curve *c)
{
    fprintf(f, ",\"curve\":[");
    for (size_t i = 0; i < c->n; i++) {
        const zp_curve_point *pt = &c->points[i];
        fprintf(f, "%s[%lld", i ? "," : "", (long long)pt->step);
        json_value(f, ",", pt->loss);
        json_value(f, ",", pt->rel_distance);
        json_value(f, ",", pt->distance);
        json_value(f, ",", pt->accuracy);
        fprintf(f, ",%llu]", (unsigned long long)pt->version);
    }
    fprintf(f, "]");
}

int zp_train_write_json(const zp_config *cfg, const zp_train_result *r, const char *path)
{
    char tmp[ZP_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        zp_error("cannot write %s: %s", tmp, strerror(errno));
        return ZEPS_EIO;
    }
    double active = r->compute_s + r->comm_s;
    fprintf(f, "{\"rank\":%d,\"model\":\"%s\",\"consistency\":\"%s\",\"epochs\":%d", r->rank,
            cfg->model, zp_consistency_name(cfg->consistency), r->epochs);
    fprintf(f, ",\"iterations\":%lld,\"examples\":%lld", (long long)r->iterations,
            (long long)r->examples);
    json_num(f, "wall_s", r->wall_s, 1);
    json_num(f, "compute_s", r->compute_s, 1);
    json_num(f, "comm_s", r->comm_s, 1);
    json_num(f, "eval_s", r->eval_s, 1);
    json_num(f, "examples_per_s", r->wall_s > 0 ? r->examples / r->wall_s : 0, 1);
    json_num(f, "comm_share", active > 0 ? r->comm_s / active : 0, 1);
    /* payload bytes on the wire and as f32, per direction, and codec time */
    fprintf(f, ",\"bytes_out\":%llu,\"bytes_out_raw\":%llu,\"bytes_in\":%llu,\"bytes_in_raw\":%llu",
            (unsigned long long)r->comm.bytes_out, (unsigned long long)r->comm.bytes_out_raw,
            (unsigned long long)r->comm.bytes_in, (unsigned long long)r->comm.bytes_in_raw);
    json_num(f, "encode_s", r->comm.encode_s, 1);
    json_num(f, "decode_s", r->comm.decode_s, 1);
    /* [bytes_out, bytes_in, t_s] of each curve point (same order as "curve") */
    fprintf(f, ",\"curve_comm\":[");
    for (size_t i = 0; i < r->curve.n; i++)
        fprintf(f, "%s[%llu,%llu,%.4f]", i ? "," : "",
                (unsigned long long)r->curve.points[i].bytes_out,
                (unsigned long long)r->curve.points[i].bytes_in, r->curve.points[i].t_s);
    fprintf(f, "]");
    /* classifiers report accuracy, quadratic the distance to x*; the other is null */
    int classifier = r->evaluated && !isnan(r->final.accuracy);
    json_num(f, "final_loss", r->final.loss, r->evaluated);
    json_num(f, "final_accuracy", r->final.accuracy, classifier);
    json_num(f, "final_distance", r->final.distance, r->evaluated && !classifier);
    json_num(f, "final_rel_distance", r->final.rel_distance, r->evaluated && !classifier);
    if (strcmp(cfg->model, "ctr") == 0) /* loss is then the test logloss */
        json_num(f, "final_auc", r->final.auc, r->evaluated);
    fprintf(f, ",\"diverged\":%s,\"stopped\":%s", r->diverged ? "true" : "false",
            r->stopped ? "true" : "false");
    json_num(f, "diverged_step", (double)r->diverged_step, r->diverged);
    write_curve(f, &r->curve);
    fprintf(f, "}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        zp_error("cannot write %s: %s", path, strerror(errno));
        return ZEPS_EIO;
    }
    return 0;
}
