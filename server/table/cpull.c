/*
 * cpull.c - compressed pulls on the shard: per-worker views, the delta and
 * its encoding. It owns zp_table.cpull; the op layer (op/pull.c) asks it
 * for a reply and sends it. See cpull.h; docs/compression.md has the
 * protocol.
 */
#include "cpull.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "now.h"
#include "rng.h"
#include "table.h"
#include "zeps_errors.h"

int zp_cpull_parse(const Zeps__Header *h, zp_cpull_req *out, char *err, size_t errlen)
{
    const zp_codec_ops *codec = zp_codec_by_id(h->codec);
    if (!codec)
        return zp_errors_set(err, errlen, ZEPS_EPROTO, "unknown codec %u in a compressed PULL",
                             h->codec);
    if (codec->id == ZP_CODEC_RANDK)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "randk cannot compress pulls: its n/k scaling is not contractive, so "
                             "the worker's copy would move away from the parameters");
    zp_codec_params p;
    zp_codec_params_init(&p);
    if (h->codec_fraction != 0)
        p.fraction = h->codec_fraction;
    p.count = h->codec_count;
    if (h->codec_block)
        p.block = h->codec_block;
    p.seed = h->codec_seed;
    char why[256];
    if (zp_codec_params_check(codec, &p, why, sizeof(why)) != 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "compressed PULL with codec %s: %s",
                             codec->name, why);
    out->codec = codec;
    out->params = p;
    out->view_id = h->view_id;
    return 0;
}

/* The id after `id` for worker `rank` of t: a fresh view starts from a hash
 * of (incarnation, table, rank), later ones count up; never 0. */
static uint64_t next_id(const zp_table *t, uint32_t rank, uint64_t id, uint64_t incarnation)
{
    if (id == 0)
        id = zp_rng_mix64(incarnation ^ ((uint64_t)t->id << 40) ^ ((uint64_t)rank << 8));
    else
        id++;
    return id ? id : 1;
}

int zp_cpull_prepare(zp_table *t, uint32_t rank, const zp_cpull_req *rq, const float *params,
                     uint64_t incarnation, zp_cpull_reply *out, char *err, size_t errlen)
{
    double t0 = zp_now_s();
    if (!t->cpull.views && !(t->cpull.views = calloc((size_t)t->nworkers, sizeof(*t->cpull.views))))
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "no memory for the pull views of table '%s'",
                             t->name);
    zp_pull_view *view = &t->cpull.views[rank];
    size_t n = t->n;
    int fresh = !view->v;
    if (fresh && !(view->v = malloc((n ? n : 1) * sizeof(float))))
        return zp_errors_set(err, errlen, ZEPS_ENOMEM,
                             "no memory for worker %u's pull view of table '%s' (%zu bytes)", rank,
                             t->name, n * sizeof(float));
    memset(out, 0, sizeof(*out));
    /* codec none: the values themselves (a delta sent as f32 and added back
     * would not reproduce them exactly) */
    if (fresh || rq->view_id == 0 || rq->view_id != view->id || rq->codec->id == ZP_CODEC_NONE) {
        if (rq->codec->id != ZP_CODEC_NONE)
            t->stats.pull_resyncs++;
        memcpy(view->v, params, n * sizeof(float));
        view->id = next_id(t, rank, view->id, incarnation);
        out->full = 1;
        out->view_id = view->id;
        t->stats.encode_s += zp_now_s() - t0;
        return 0;
    }
    if (!t->cpull.delta && !(t->cpull.delta = malloc((n ? n : 1) * sizeof(float))))
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "no memory for the pull delta of table '%s'",
                             t->name);
    size_t cap = rq->codec->max_size(n, &rq->params);
    void *buf = malloc(cap ? cap : 1);
    if (!buf)
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "no memory for a %zu-byte pull payload",
                             cap);
    float *restrict d = t->cpull.delta;
    const float *restrict v = view->v;
    for (size_t i = 0; i < n; i++)
        d[i] = params[i] - v[i];
    uint64_t id = next_id(t, rank, view->id, incarnation);
    size_t len = rq->codec->encode(d, n, &rq->params, id, buf);
    /* exactly what the worker does with the payload, so both copies agree */
    rq->codec->decode_add(buf, len, n, 1.0f, view->v);
    view->id = id;
    out->buf = buf;
    out->len = len;
    out->codec = (uint32_t)rq->codec->id;
    out->view_id = id;
    t->stats.encode_s += zp_now_s() - t0;
    return 0;
}

void zp_cpull_forget(zp_table *t, uint32_t rank)
{
    if (!t->cpull.views || rank >= (uint32_t)t->nworkers)
        return;
    /* the id is kept: the next view continues its sequence, so an id handed
     * out before cannot name it */
    free(t->cpull.views[rank].v);
    t->cpull.views[rank].v = NULL;
}

void zp_cpull_free(zp_table *t)
{
    for (int r = 0; t->cpull.views && r < t->nworkers; r++)
        free(t->cpull.views[r].v);
    free(t->cpull.views);
    free(t->cpull.delta);
    t->cpull.views = NULL;
    t->cpull.delta = NULL;
}

uint64_t zp_cpull_bytes(const zp_table *t)
{
    uint64_t floats = t->cpull.delta ? t->n : 0;
    for (int r = 0; t->cpull.views && r < t->nworkers; r++)
        if (t->cpull.views[r].v)
            floats += t->n;
    return floats * sizeof(float);
}
