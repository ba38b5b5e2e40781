/*
 * test_dispatch.c - server/dispatch.c, server/reply.c and the op handlers
 * of server/op/, in process: a message in, the replies out through a
 * capture sink (inproc.h), no sockets. Malformed messages, the checks every
 * op shares, HELLO's mode and capabilities, DECLARE, dense PULL and PUSH
 * (values, duplicates, parking under bsp), CLOCK, BARRIER, STATS, BYE.
 * A compressed push under bsp (decoded into its frame) gets one answer, a
 * pull is counted in its worker's STATS, and a payload is copied only
 * when it is misaligned (zp_request_aligned). A ROLLBACK to a snapshot
 * answers the pulls parked before it ERESTARTED with the cut.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_main.h"
#include "codec.h"
#include "inproc.h"
#include "ops.h"
#include "persist.h"
#include "scratch.h"
#include "zeps_errors.h"

START_TEST(test_malformed)
{
    zt_shard *z = zt_shard_new("async", 1);
    zp_frames m = {.n = 1};
    zmq_msg_init_size(&m.f[0], 2);
    memcpy(zmq_msg_data(&m.f[0]), "w0", 2);
    zp_dispatch(z->s, &m); /* no header frame */
    zp_wire_frames_close(&m);
    ck_assert_int_eq(z->n, 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EPROTO);
    ck_assert_str_eq(zt_last(z)->to, "w0");
    Zeps__Header h = zt_header(z, ZEPS__OP__HELLO, 0);
    h.version = 99;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__ERROR);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EVERSION);
    h = zt_header(z, 42, 0);
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EOP);
    h = zt_header(z, ZEPS__OP__PUSH, 0xffffffffu); /* a tool may not push */
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANK);
    ck_assert_ptr_nonnull(strstr(zt_last(z)->h->error_text, "tools may only send"));
    ck_assert_uint_eq(z->s->errors, 4);
    ck_assert_uint_eq(z->s->requests, 4);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_hello_caps)
{
    static const struct {
        const char *mode;
        uint32_t caps;
    } modes[] = {{"bsp", ZP_CAP_CUTS | ZP_CAP_ROLLBACK},
                 {"async", 0},
                 {"ssp", ZP_CAP_BOUND},
                 {"weighted", 0}};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        zt_shard *z = zt_shard_new(modes[i].mode, 2);
        zt_hello(z, 1);
        const Zeps__Header *rep = zt_last(z)->h;
        ck_assert_str_eq(rep->consistency, modes[i].mode);
        ck_assert_uint_eq(rep->caps, modes[i].caps | ZP_CAP_MAPS); /* MAPS: every shard */
        ck_assert_uint_eq(rep->num_workers, 2);
        ck_assert_uint_eq(rep->num_shards, 1);
        ck_assert_uint_eq(rep->req_id, z->req);
        ck_assert_int_eq(rep->clock, 0);
        Zeps__Header h = zt_header(z, ZEPS__OP__HELLO, 5); /* outside the cluster */
        zt_send(z, &h, NULL, 0);
        ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANK);
        zt_shard_free(z);
    }
}
END_TEST

START_TEST(test_requires_hello)
{
    zt_shard *z = zt_shard_new("async", 2);
    float g[4] = {0};
    zt_push(z, 0, 0, 0, g, 4, 0, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ESTATE);
    zt_hello(z, 0);
    zt_push(z, 0, 0, 0, g, 4, 0, 0); /* no table 0 yet */
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ETABLE);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_declare)
{
    zp_config *c = zt_config("async", 1, 3);
    zt_shard *z = zt_shard_start(c, 1);
    uint32_t id = zt_declare(z, 0xffffffffu, "w", 10, 0.5);
    ck_assert_uint_eq(id, 0);
    ck_assert_uint_eq(zt_last(z)->h->offset, 3); /* shard 1 of 3: [3, 6) */
    ck_assert_uint_eq(zt_last(z)->h->count, 3);
    ck_assert_uint_eq(zt_declare(z, 0xffffffffu, "w", 10, 0.5), 0); /* the same again */
    ck_assert_uint_eq(z->s->ntables, 1);
    ck_assert_uint_eq(zt_declare(z, 0xffffffffu, "v", 4, 0.5), 1);
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = "w";
    spec.length = 11;
    spec.optimizer = "sgd";
    Zeps__Header h = zt_header(z, ZEPS__OP__DECLARE, 0xffffffffu);
    h.spec = &spec;
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ECONFLICT);
    h = zt_header(z, ZEPS__OP__DECLARE, 0xffffffffu);
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EPROTO);
    zt_shard_free(z);
}
END_TEST

/* async: a pull returns the values, a push moves them by -lr * g once; a
 * retried push (same seq) is acknowledged as a duplicate, not applied. */
START_TEST(test_async_push_pull)
{
    zt_shard *z = zt_shard_new("async", 1);
    zt_hello(z, 0);
    uint32_t t = zt_declare(z, 0, "w", 4, 0.5);
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 4, 0), 1);
    zt_reply *r = zt_last(z);
    ck_assert_uint_eq(r->len, 16);
    ck_assert_float_eq(((float *)r->data)[3], 1.0f);
    ck_assert_uint_eq(r->h->data_version, 0);
    float g[2] = {1.0f, -2.0f};
    ck_assert_int_eq(zt_push(z, 0, t, 1, g, 2, 0, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PUSH);
    ck_assert_uint_eq(zt_last(z)->h->flags, 0);
    z->seq[0]--; /* a retry: the same seq again */
    zt_push(z, 0, t, 1, g, 2, 0, 0);
    ck_assert_uint_eq(zt_last(z)->h->flags, ZP_FLAG_DUPLICATE);
    zt_pull(z, 0, t, 0, 4, 1);
    const float *v = zt_last(z)->data;
    ck_assert_float_eq(v[0], 1.0f);
    ck_assert_float_eq(v[1], 0.5f);
    ck_assert_float_eq(v[2], 2.0f);
    ck_assert_uint_eq(zt_last(z)->h->data_version, 1);
    zt_push(z, 0, t, 3, g, 2, 0, 1); /* past the slice */
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANGE);
    zt_push(z, 0, t, 0, g, 2, 0, 7); /* a version the slice never had */
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EINVAL);
    float nan[1] = {NAN};
    zt_push(z, 0, t, 0, nan, 1, 0, 1);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ENONFINITE);
    zt_shard_free(z);
}
END_TEST

/* A dense table declared with optimizer `opt` (constant init 1). */
static uint32_t declare_opt(zt_shard *z, const char *name, uint64_t length, const char *opt)
{
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = (char *)name;
    spec.length = length;
    spec.optimizer = (char *)opt;
    spec.lr = 0.01;
    spec.momentum = 0.9;
    spec.beta1 = 0.9;
    spec.beta2 = 0.999;
    spec.eps = 1e-8;
    spec.init = "constant";
    spec.init_scale = 1.0;
    Zeps__Header h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    return zt_last(z)->h->table;
}

/* Modes that apply on arrival check a gradient in the pass that applies
 * it (push.c, zp_push.unchecked): a NaN or Inf anywhere - the first value,
 * the middle, the very last (the last chunk of sgd's one-pass kernel) -
 * is refused with ENONFINITE and changes no weight, no optimizer state and
 * not the version, for every optimizer; the next good push applies. Also
 * weighted with DC-ASGD and a push dropped as too stale. */
START_TEST(test_nonfinite_applies_nothing)
{
    static const char *const opts[] = {"sgd", "momentum", "adagrad", "adam"};
    static const struct {
        const char *mode;
        int dc, drop;
    } modes[] = {{"async", 0, 0}, {"ssp", 0, 0}, {"weighted", 0, 0}, {"weighted", 1, 0},
                 {"weighted", 0, 1}};
    const size_t n = 3 * 4096 + 37;
    const size_t at[] = {0, n / 2, n - 1};
    int mi = _i / 4;
    const char *opt = opts[_i % 4];
    zp_config *cfg = zt_config(modes[mi].mode, 1, 1);
    if (modes[mi].dc)
        cfg->dc_lambda = 0.04;
    if (modes[mi].drop)
        cfg->max_staleness = 0;
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    uint32_t t = declare_opt(z, "w", n, opt);
    zp_table *tb = z->s->tables[t];
    float *g = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        g[i] = (float)((int)(i % 7) - 3) * 0.125f;
    zt_pull(z, 0, t, 0, n, 0); /* DC-ASGD keeps what was pulled */
    ck_assert_int_eq(zt_push(z, 0, t, 0, g, n, 0, 0), 1); /* state is not all zero now */
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    size_t ns = (size_t)tb->opt->state_per_param * n;
    float *w0 = malloc(n * sizeof(float)), *s0 = malloc((ns ? ns : 1) * sizeof(float));
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
        for (size_t b = 0; b < 3; b++) {
            memcpy(w0, tb->params->data, n * sizeof(float));
            if (ns)
                memcpy(s0, tb->state, ns * sizeof(float));
            uint64_t v0 = tb->version;
            float keep = g[at[k]];
            g[at[k]] = bad[b];
            /* drop: a push from version 0 is too stale once v0 > 0 */
            zt_push(z, 0, t, 0, g, n, 0, modes[mi].drop ? 0 : v0);
            g[at[k]] = keep;
            ck_assert_msg(zt_last(z)->h->error == ZEPS_ENONFINITE, "%s/%s: bad at %zu: error %d",
                          modes[mi].mode, opt, at[k], (int)zt_last(z)->h->error);
            ck_assert_uint_eq(tb->version, v0);
            ck_assert_msg(memcmp(w0, tb->params->data, n * sizeof(float)) == 0,
                          "%s/%s: weights changed by a refused push (bad at %zu)", modes[mi].mode,
                          opt, at[k]);
            ck_assert_msg(!ns || memcmp(s0, tb->state, ns * sizeof(float)) == 0,
                          "%s/%s: state changed by a refused push (bad at %zu)", modes[mi].mode,
                          opt, at[k]);
        }
    zt_push(z, 0, t, 0, g, n, 0, tb->version);
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    ck_assert(modes[mi].drop || memcmp(w0, tb->params->data, n * sizeof(float)) != 0);
    free(g);
    free(w0);
    free(s0);
    zt_shard_free(z);
}
END_TEST

/* bsp: a pull of clock 1 is parked until round 0 closes; the round closes
 * when both pushed, and applies their mean once; the parked pull is then
 * answered with the new values. */
START_TEST(test_bsp_parks_until_round)
{
    zt_shard *z = zt_shard_new("bsp", 2);
    zt_hello(z, 0);
    zt_hello(z, 1);
    uint32_t t = zt_declare(z, 0, "w", 2, 1.0);
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 2, 1), 0); /* parked: no reply */
    ck_assert_uint_eq(z->s->tables[t]->parked.n, 1);
    zt_pull(z, 0, t, 0, 2, 1);
    z->seq[0]--;
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 2, 1), 1); /* its retry: a keep-alive */
    ck_assert_uint_eq(zt_last(z)->h->flags, ZP_FLAG_PARKED);
    float g0[2] = {1.0f, 2.0f}, g1[2] = {3.0f, 6.0f};
    ck_assert_int_eq(zt_push(z, 1, t, 0, g1, 2, 0, 0), 1);
    ck_assert_uint_eq(z->s->tables[t]->version, 0);        /* kept for the round */
    ck_assert_int_eq(zt_push(z, 0, t, 0, g0, 2, 0, 0), 3); /* ack + both parked pulls */
    ck_assert_uint_eq(z->s->tables[t]->version, 1);
    ck_assert_uint_eq(z->s->tables[t]->parked.n, 0);
    const float *v = zt_last(z)->data;
    ck_assert_float_eq(v[0], 1.0f - 2.0f);
    ck_assert_float_eq(v[1], 1.0f - 4.0f);
    ck_assert_int_eq(zt_last(z)->h->clock, 1);
    ck_assert_uint_eq(z->s->tables[t]->stats.tau.n, 2); /* both pushes recorded */
    zt_push(z, 0, t, 0, g0, 1, 1, 1);                   /* not the whole slice */
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ERANGE);
    zt_shard_free(z);
}
END_TEST

START_TEST(test_clock_barrier_bye)
{
    zt_shard *z = zt_shard_new("ssp", 2);
    zt_hello(z, 0);
    zt_hello(z, 1);
    Zeps__Header h = zt_header(z, ZEPS__OP__CLOCK, 0);
    h.clock = 2;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_int_eq(z->s->workers.w[0].clock, 3);
    ck_assert_int_eq(z->s->workers.min_clock, 0);
    ck_assert_int_eq(z->s->workers.max_clock, 3);
    h = zt_header(z, ZEPS__OP__CLOCK, 0);
    h.clock = 0; /* backwards */
    zt_send(z, &h, NULL, 0);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ECLOCK);
    h = zt_header(z, ZEPS__OP__BARRIER, 0);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 0); /* waits */
    h = zt_header(z, ZEPS__OP__BARRIER, 1);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 2); /* both released */
    ck_assert_str_eq(z->r[z->n - 2].to, "w0");
    ck_assert_int_eq(z->r[z->n - 2].h->op, ZEPS__OP__BARRIER);
    h = zt_header(z, ZEPS__OP__BYE, 1);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_int_eq(z->s->workers.min_clock, 3); /* the slowest left */
    zt_shard_free(z);
}
END_TEST

START_TEST(test_stats)
{
    zt_shard *z = zt_shard_new("weighted", 2);
    zt_hello(z, 0);
    uint32_t t = zt_declare(z, 0, "w", 3, 0.1);
    float g[3] = {1, 1, 1};
    zt_push(z, 0, t, 0, g, 3, 0, 0);
    zt_push(z, 0, t, 0, g, 3, 0, 0); /* tau 1 */
    Zeps__Header h = zt_header(z, ZEPS__OP__STATS, 0xffffffffu);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    const Zeps__ShardStats *st = zt_last(z)->h->stats;
    ck_assert_ptr_nonnull(st);
    ck_assert_str_eq(st->consistency, "weighted");
    ck_assert_uint_eq(st->n_tables, 1);
    ck_assert_uint_eq(st->tables[0]->pushes, 2);
    ck_assert_uint_eq(st->tables[0]->version, 2);
    ck_assert_uint_eq(st->tables[0]->tau->n, 2);
    ck_assert_uint_eq(st->tables[0]->tau->sum, 1);
    ck_assert_uint_eq(st->n_workers, 1); /* only rank 0 joined */
    ck_assert_uint_eq(st->workers[0]->pushes, 2);
    ck_assert_uint_eq(st->requests, 5);
    zt_shard_free(z);
}
END_TEST

/* Under weighted with DC-ASGD, compressed pulls are refused (the policy's
 * cpull_ok hook); in async they are served. */
START_TEST(test_cpull_by_policy)
{
    for (int dc = 0; dc < 2; dc++) {
        zp_config *c = zt_config(dc ? "weighted" : "async", 1, 1);
        c->dc_lambda = dc ? 0.5 : 0.0;
        zt_shard *z = zt_shard_start(c, 0);
        zt_hello(z, 0);
        uint32_t t = zt_declare(z, 0, "w", 4, 0.1);
        Zeps__Header h = zt_header(z, ZEPS__OP__PULL, 0);
        h.table = t;
        h.count = 4;
        h.flags = ZP_FLAG_PULL_DELTA;
        h.codec = ZP_CODEC_NONE;
        ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
        if (dc) {
            ck_assert_int_eq(zt_last(z)->h->error, ZEPS_EINVAL);
        } else {
            ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PULL);
            ck_assert_uint_eq(zt_last(z)->h->flags, ZP_FLAG_PULL_FULL);
        }
        zt_shard_free(z);
    }
}
END_TEST

/* bsp holds frames: a compressed push is decoded into its frame, applied
 * at the round's close and answered once; a malformed one is answered
 * once, with its error, and applies nothing. */
START_TEST(test_bsp_compressed_push)
{
    zt_shard *z = zt_shard_new("bsp", 1);
    zt_hello(z, 0);
    uint32_t t = zt_declare(z, 0, "w", 2, 1.0);
    const float g[2] = {0.5f, 2.0f};
    zp_codec_params cp;
    zp_codec_params_init(&cp);
    uint8_t wire[64];
    size_t len = zp_float_fp16_ops.encode(g, 2, &cp, 0, wire);
    ck_assert_uint_eq(len, 4);
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.table = t;
    h.count = 2;
    h.codec = ZP_CODEC_FP16;
    ck_assert_int_eq(zt_send(z, &h, wire, len), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__PUSH);
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    ck_assert_uint_eq(z->s->tables[t]->version, 1); /* the round of one closed */
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 2, 1), 1);
    const float *v = zt_last(z)->data;
    ck_assert_float_eq(v[0], 0.5f);
    ck_assert_float_eq(v[1], -1.0f);
    h = zt_header(z, ZEPS__OP__PUSH, 0);
    h.table = t;
    h.count = 2;
    h.clock = 1;
    h.codec = ZP_CODEC_FP16;
    ck_assert_int_eq(zt_send(z, &h, wire, len - 1), 1); /* one fp16 short */
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__ERROR);
    ck_assert_int_eq(zt_last(z)->h->error, ZEPS_ESIZE);
    ck_assert_uint_eq(z->s->tables[t]->version, 1);
    zt_shard_free(z);
}
END_TEST

/* A worker's pull counts its bytes in the worker's STATS, not only the
 * table's. */
START_TEST(test_pull_worker_bytes)
{
    zt_shard *z = zt_shard_new("async", 2);
    zt_hello(z, 0);
    zt_hello(z, 1);
    uint32_t t = zt_declare(z, 0, "w", 8, 0.1);
    ck_assert_int_eq(zt_pull(z, 1, t, 0, 8, 0), 1);
    ck_assert_int_eq(zt_pull(z, 1, t, 2, 3, 0), 1);
    Zeps__Header h = zt_header(z, ZEPS__OP__STATS, 0xffffffffu);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    const Zeps__ShardStats *st = zt_last(z)->h->stats;
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(st->tables[0]->pull_bytes_wire, 11 * sizeof(float));
    ck_assert_uint_eq(st->n_workers, 2);
    for (size_t i = 0; i < st->n_workers; i++) {
        uint64_t want = st->workers[i]->rank == 1 ? 11 * sizeof(float) : 0;
        ck_assert_uint_eq(st->workers[i]->pull_bytes_wire, want);
        ck_assert_uint_eq(st->workers[i]->pull_bytes_raw, want);
    }
    zt_shard_free(z);
}
END_TEST

/* zp_request_aligned: an aligned payload is used where it lies (no copy);
 * a misaligned one is moved to an aligned copy of the same bytes. */
START_TEST(test_request_aligned)
{
    static _Alignas(8) uint8_t buf[72];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)i;
    zmq_msg_t f;
    zmq_msg_init_data(&f, buf, 64, NULL, NULL);
    ck_assert_ptr_eq(zp_request_aligned(&f, 8), buf);
    ck_assert_ptr_eq(zmq_msg_data(&f), buf);
    zmq_msg_close(&f);
    zmq_msg_init_data(&f, buf + 4, 64, NULL, NULL);
    ck_assert_ptr_eq(zp_request_aligned(&f, 4), buf + 4); /* aligned enough */
    uint8_t *p = zp_request_aligned(&f, 8);
    ck_assert_ptr_ne(p, buf + 4);
    ck_assert_uint_eq((uintptr_t)p % 8, 0);
    ck_assert_ptr_eq(zmq_msg_data(&f), p);
    ck_assert_uint_eq(zmq_msg_size(&f), 64);
    ck_assert_int_eq(memcmp(p, buf + 4, 64), 0);
    zmq_msg_close(&f);
}
END_TEST

/* bsp: a pull parked for round 2 (clock 3) when a worker rolls the shard
 * back to the cut at clock 1 (its snapshot set) is answered ERESTARTED
 * with that cut: nothing computed before the cut may finish. */
START_TEST(test_rollback_answers_parked)
{
    char dir[160], err[256] = "";
    ck_assert_int_eq(zt_scratch_dir(dir, sizeof(dir), "dispatch"), 0);
    zp_config *cfg = zt_config("bsp", 2, 1);
    snprintf(cfg->snapshot_dir, sizeof(cfg->snapshot_dir), "%s", dir);
    zt_shard *z = zt_shard_start(cfg, 0);
    zt_hello(z, 0);
    zt_hello(z, 1);
    uint32_t t = zt_declare(z, 0, "w", 2, 1.0);
    float g[2] = {1, 1};
    uint64_t set = 0;
    for (int64_t c = 0; c < 2; c++) {
        ck_assert_int_eq(zt_push(z, 0, t, 0, g, 2, c, 0), 1);
        ck_assert_int_eq(zt_push(z, 1, t, 0, g, 2, c, 0), 1);
        if (c == 0) { /* the cut at clock 1 */
            ck_assert_msg(zp_persist_request(z->s, 1, 0, err, sizeof(err)) == 0, "%s", err);
            zp_persist_reap(z->s, 1);
            set = z->s->persist.last_setid;
        }
    }
    ck_assert_int_eq(zt_pull(z, 0, t, 0, 2, 3), 0); /* parked until round 2 closes */
    uint64_t parked_req = z->req;
    ck_assert_uint_eq(z->s->tables[t]->parked.n, 1);
    Zeps__Header h = zt_header(z, ZEPS__OP__ROLLBACK, 1);
    h.clock = 1;
    h.cut_set = set;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 2);
    const zt_reply *r = &z->r[z->n - 2];
    ck_assert_str_eq(r->to, "w0");
    ck_assert_uint_eq(r->h->req_id, parked_req);
    ck_assert_int_eq(r->h->error, ZEPS_ERESTARTED);
    ck_assert_int_eq(r->h->cut, 1);
    ck_assert_uint_eq(r->h->cut_set, set);
    ck_assert_uint_eq(z->s->tables[t]->parked.n, 0);
    ck_assert_uint_eq(z->s->workers.w[0].parked, 0);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__ROLLBACK);
    ck_assert_int_eq(zt_last(z)->h->error, 0);
    zt_shard_free(z);
    ck_assert_int_eq(zt_scratch_remove(dir), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("dispatch");
    TCase *tc = tcase_create("ops");
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_hello_caps);
    tcase_add_test(tc, test_requires_hello);
    tcase_add_test(tc, test_declare);
    tcase_add_test(tc, test_async_push_pull);
    tcase_add_loop_test(tc, test_nonfinite_applies_nothing, 0, 20);
    tcase_add_test(tc, test_bsp_parks_until_round);
    tcase_add_test(tc, test_clock_barrier_bye);
    tcase_add_test(tc, test_stats);
    tcase_add_test(tc, test_cpull_by_policy);
    tcase_add_test(tc, test_bsp_compressed_push);
    tcase_add_test(tc, test_pull_worker_bytes);
    tcase_add_test(tc, test_request_aligned);
    tcase_add_test(tc, test_rollback_answers_parked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return zt_run_suite(suite());
}
