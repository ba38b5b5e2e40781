/*
 * wmetrics.c - zeps-worker's metrics endpoint: a thread with its own libuv
 * loop runs the common/http.c listener; the training thread publishes its
 * counters into a mutex-guarded copy after every step, and a scrape renders
 * that copy. The loop is set up (listener bound, so a bad address is an
 * error at start) before the thread is created; from then on only the
 * thread touches it, and a uv_async asks it to close everything and return.
 */
#include "wmetrics.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "http.h"
#include "log.h"

/* step time: bucket i counts steps in [2^(i-1), 2^i) microseconds; the
 * last one (STEP_TOP) the rest */
#define STEP_TOP 27

struct zp_wmetrics {
    uv_loop_t loop;
    uv_async_t stop;
    zp_http *http;
    pthread_t thread;
    pthread_mutex_t mu;
    int rank;
    /* guarded by mu */
    zp_train_result res; /* counters only: curve and model fields unused */
    zeps_client_stats cs;
    uint64_t step_counts[STEP_TOP + 1], steps;
    double step_sum_s;
};

static void out_counter(zp_http_reply *r, const char *name, const char *help, int rank, double v)
{
    zp_http_printf(r, "# HELP %s %s\n# TYPE %s counter\n%s{rank=\"%d\"} %.17g\n", name, help, name,
                   name, rank, v);
}

static void render(zp_wmetrics *m, zp_http_reply *r)
{
    pthread_mutex_lock(&m->mu);
    zp_train_result res = m->res;
    zeps_client_stats cs = m->cs;
    uint64_t counts[STEP_TOP + 1], steps = m->steps;
    memcpy(counts, m->step_counts, sizeof(counts));
    double step_sum = m->step_sum_s;
    pthread_mutex_unlock(&m->mu);
    int k = m->rank;
    out_counter(r, "zeps_worker_steps_total", "Training steps done.", k, (double)res.iterations);
    out_counter(r, "zeps_worker_examples_total", "Examples trained on.", k, (double)res.examples);
    zp_http_printf(r, "# HELP zeps_worker_time_seconds_total Time by activity: compute "
                      "(gradients, injected delays), communication (blocked on the shards), "
                      "evaluation.\n# TYPE zeps_worker_time_seconds_total counter\n");
    zp_http_printf(r, "zeps_worker_time_seconds_total{rank=\"%d\",activity=\"compute\"} %.9f\n", k,
                   res.compute_s);
    zp_http_printf(r,
                   "zeps_worker_time_seconds_total{rank=\"%d\",activity=\"communication\"} %.9f\n",
                   k, res.comm_s);
    zp_http_printf(r, "zeps_worker_time_seconds_total{rank=\"%d\",activity=\"evaluation\"} %.9f\n",
                   k, res.eval_s);
    zp_http_printf(r, "# HELP zeps_worker_step_seconds Time per training step (compute and "
                      "communication).\n# TYPE zeps_worker_step_seconds histogram\n");
    uint64_t cum = 0;
    for (int i = 0; i < STEP_TOP; i++) {
        cum += counts[i];
        zp_http_printf(r, "zeps_worker_step_seconds_bucket{rank=\"%d\",le=\"%.9g\"} %" PRIu64 "\n",
                       k, (double)(1ull << i) * 1e-6, cum);
    }
    zp_http_printf(r, "zeps_worker_step_seconds_bucket{rank=\"%d\",le=\"+Inf\"} %" PRIu64 "\n", k,
                   steps);
    zp_http_printf(r, "zeps_worker_step_seconds_sum{rank=\"%d\"} %.9f\n", k, step_sum);
    zp_http_printf(r, "zeps_worker_step_seconds_count{rank=\"%d\"} %" PRIu64 "\n", k, steps);
    out_counter(r, "zeps_worker_requests_total", "Requests sent to the shards (retries excluded).",
                k, (double)cs.requests);
    out_counter(r, "zeps_worker_retries_total", "Requests sent again after a timeout.", k,
                (double)cs.retries);
    out_counter(r, "zeps_worker_restarts_total", "ERESTARTED answers (a shard restored).", k,
                (double)cs.restarts);
    out_counter(r, "zeps_worker_dropped_pushes_total", "Pushes the shards did not apply.", k,
                (double)cs.dropped);
    out_counter(r, "zeps_worker_redirects_total",
                "Times a replicated shard's requests moved to its new primary.", k,
                (double)cs.redirects);
    zp_http_printf(r,
                   "# HELP zeps_worker_payload_bytes_total Payload bytes pushed (out) and pulled "
                   "(in): on the wire and as f32; f32 - wire is what compression saved.\n"
                   "# TYPE zeps_worker_payload_bytes_total counter\n");
    const struct {
        const char *dir, *enc;
        uint64_t v;
    } b[] = {{"out", "wire", cs.bytes_out},
             {"out", "f32", cs.bytes_out_raw},
             {"in", "wire", cs.bytes_in},
             {"in", "f32", cs.bytes_in_raw}};
    for (int i = 0; i < 4; i++)
        zp_http_printf(r,
                       "zeps_worker_payload_bytes_total{rank=\"%d\",direction=\"%s\","
                       "encoding=\"%s\"} %" PRIu64 "\n",
                       k, b[i].dir, b[i].enc, b[i].v);
    zp_http_printf(r,
                   "# HELP zeps_worker_codec_seconds_total Time compressing pushes and "
                   "decoding compressed pulls.\n# TYPE zeps_worker_codec_seconds_total counter\n");
    zp_http_printf(r, "zeps_worker_codec_seconds_total{rank=\"%d\",stage=\"encode\"} %.9f\n", k,
                   cs.encode_s);
    zp_http_printf(r, "zeps_worker_codec_seconds_total{rank=\"%d\",stage=\"decode\"} %.9f\n", k,
                   cs.decode_s);
    r->type = "text/plain; version=0.0.4; charset=utf-8";
}

static void serve(void *arg, const char *path, const char *query, zp_http_reply *rep)
{
    (void)query;
    zp_wmetrics *m = arg;
    if (strcmp(path, "/metrics") == 0) {
        render(m, rep);
    } else if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0) {
        zp_http_printf(rep, "ok\n");
    } else {
        rep->status = 404;
        zp_http_printf(rep, "no such path '%s': try /metrics or /healthz\n", path);
    }
}

static void on_stop(uv_async_t *a)
{
    zp_wmetrics *m = a->data;
    zp_http_close(&m->http, NULL, NULL);
    uv_close((uv_handle_t *)&m->stop, NULL);
}

static void *run(void *arg)
{
    zp_wmetrics *m = arg;
    uv_run(&m->loop, UV_RUN_DEFAULT);
    return NULL;
}

int zp_wmetrics_start(zp_wmetrics **out, const char *listen, int rank, char *err, size_t errlen)
{
    zp_wmetrics *m = zp_alloc_zeroed(1, sizeof(*m));
    m->rank = rank;
    pthread_mutex_init(&m->mu, NULL);
    uv_loop_init(&m->loop);
    int rc = zp_http_start(&m->http, &m->loop, listen, NULL, serve, m, err, errlen);
    if (rc != 0) {
        uv_run(&m->loop, UV_RUN_DEFAULT); /* let the failed listener close */
        uv_loop_close(&m->loop);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return rc;
    }
    uv_async_init(&m->loop, &m->stop, on_stop);
    m->stop.data = m;
    zp_info("metrics listening on %s (port %d): /metrics /healthz", listen, zp_http_port(m->http));
    pthread_create(&m->thread, NULL, run, m);
    *out = m;
    return 0;
}

void zp_wmetrics_update(zp_wmetrics *m, const zp_train_result *res, const zeps_client_stats *cs,
                        double step_s)
{
    uint64_t us = step_s > 0 ? (uint64_t)(step_s * 1e6) : 0;
    int b = us == 0 ? 0 : 64 - __builtin_clzll(us);
    pthread_mutex_lock(&m->mu);
    m->res.iterations = res->iterations;
    m->res.examples = res->examples;
    m->res.compute_s = res->compute_s;
    m->res.comm_s = res->comm_s;
    m->res.eval_s = res->eval_s;
    m->cs = *cs;
    m->step_counts[b < STEP_TOP ? b : STEP_TOP]++;
    m->steps++;
    m->step_sum_s += step_s;
    pthread_mutex_unlock(&m->mu);
}

void zp_wmetrics_stop(zp_wmetrics **mp)
{
    zp_wmetrics *m = *mp;
    if (!m)
        return;
    *mp = NULL;
    uv_async_send(&m->stop);
    pthread_join(m->thread, NULL);
    uv_loop_close(&m->loop);
    pthread_mutex_destroy(&m->mu);
    free(m);
}
