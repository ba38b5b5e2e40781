/*
 * result.c - what a training run leaves: its convergence curve and the
 * result JSON each worker writes (<result_dir>/worker-<rank>.json, flat
 * keys as docs/operations.md lists them). The loop (train.c) fills a
 * zp_train_result; this file only records and writes it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "train.h"

void zp_result_curve_add(zp_curve *c, int64_t step, uint64_t version, const zp_eval *e)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->points = zp_alloc_resize(c->points, c->cap * sizeof(*c->points));
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

void zp_result_fini(zp_train_result *r)
{
    free(r->curve.points);
    r->curve = (zp_curve){0};
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

int zp_result_write_json(const zp_config *cfg, const zp_train_result *r, const char *path)
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
            cfg->model, cfg->consistency, r->epochs);
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
    /* requests sent (one per shard a pull or push reached; resends apart) */
    fprintf(f, ",\"requests\":%llu,\"retries\":%llu", (unsigned long long)r->comm.requests,
            (unsigned long long)r->comm.retries);
    json_num(f, "encode_s", r->comm.encode_s, 1);
    json_num(f, "decode_s", r->comm.decode_s, 1);
    /* push requests the shards acknowledged (per shard reached): the shards'
     * per-worker applied-push counters must add up to this (test_chaos.sh) */
    fprintf(f, ",\"pushes_acked\":%llu", (unsigned long long)r->comm.pushes_acked);
    /* replicated shards: moves to a new primary (docs/replication.md) */
    fprintf(f, ",\"redirects\":%llu", (unsigned long long)r->comm.redirects);
    fprintf(f, ",\"pulled_in_place\":%llu,\"pulled_copied\":%llu",
            (unsigned long long)r->pulled_in_place, (unsigned long long)r->pulled_copied);
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
    if (r->has_auc) /* loss is then the test logloss */
        json_num(f, "final_auc", r->final.auc, r->evaluated);
    fprintf(f, ",\"diverged\":%s,\"stopped\":%s", r->diverged ? "true" : "false",
            r->stopped ? "true" : "false");
    json_num(f, "diverged_step", (double)r->diverged_step, r->diverged);
    if (cfg->target_accuracy > 0 || cfg->target_rel_distance > 0) {
        fprintf(f, ",\"reached_target\":%s", r->reached_target ? "true" : "false");
        json_num(f, "target_step", (double)r->target_step, r->reached_target);
        fprintf(f, ",\"finished\":%s", r->finished ? "true" : "false");
        json_num(f, "finished_step", (double)r->finished_step, r->finished);
    }
    write_curve(f, &r->curve);
    fprintf(f, "}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        zp_error("cannot write %s: %s", path, strerror(errno));
        return ZEPS_EIO;
    }
    return 0;
}
