/*
 * ctr_local.c - single-process training of the ctr model (ctr_local.h).
 *
 * The hash map is open addressing over ids with linear probing; each slot
 * points at a row block [w, v_0..v_{D-1}, acc_w, acc_v..., grad_w, grad_v...]
 * in one growing array. A batch first gathers rows per position (creating
 * rows on first touch, as the servers do), runs the model, sums the
 * per-position gradients into the rows' grad parts, then applies Adagrad
 * once to every row the batch touched.
 */
#include "ctr_local.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctr_metrics.h"
#include "ctr_math.h"
#include "sparse_hash.h"
#include "now.h"
#include "rng.h"

typedef struct rowmap {
    uint64_t *keys;
    uint32_t *slot; /* row index + 1; 0 = empty */
    size_t cap, n;
    float *rows;     /* n blocks of 3 * (1 + dim) */
    uint64_t *stamp; /* per row: the last batch that touched it, + 1 */
    size_t rcap;
    uint32_t dim;
    double init_scale;
    uint64_t seed;
} rowmap;

static size_t block(const rowmap *m)
{
    return 3u * (1u + m->dim);
}

static void map_grow(rowmap *m)
{
    size_t ncap = m->cap ? 2 * m->cap : 1u << 16;
    uint64_t *keys = calloc(ncap, sizeof(uint64_t));
    uint32_t *slot = calloc(ncap, sizeof(uint32_t));
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slot[i])
            continue;
        size_t h = zp_sparse_hash_id(m->keys[i], ZP_INDEX_HASH_SEED) & (ncap - 1);
        while (slot[h])
            h = (h + 1) & (ncap - 1);
        keys[h] = m->keys[i];
        slot[h] = m->slot[i];
    }
    free(m->keys);
    free(m->slot);
    m->keys = keys;
    m->slot = slot;
    m->cap = ncap;
}

/* The index of the row block of `id`, created (w = 0, v ~ N(0, s^2)) on
 * first touch. Creating may move the blocks: hold indices, not pointers. */
static size_t map_row(rowmap *m, uint64_t id)
{
    if (2 * (m->n + 1) > m->cap)
        map_grow(m);
    size_t h = zp_sparse_hash_id(id, ZP_INDEX_HASH_SEED) & (m->cap - 1);
    while (m->slot[h] && m->keys[h] != id)
        h = (h + 1) & (m->cap - 1);
    if (m->slot[h])
        return m->slot[h] - 1;
    if (m->n == m->rcap) {
        m->rcap = m->rcap ? 2 * m->rcap : 1u << 16;
        m->rows = realloc(m->rows, m->rcap * block(m) * sizeof(float));
        m->stamp = realloc(m->stamp, m->rcap * sizeof(uint64_t));
    }
    m->stamp[m->n] = 0;
    float *r = &m->rows[m->n * block(m)];
    memset(r, 0, block(m) * sizeof(float));
    zp_rng rng;
    zp_rng_seed(&rng, m->seed, id, 0);
    for (uint32_t k = 0; k < m->dim; k++)
        r[1 + k] = (float)(m->init_scale * zp_rng_normal(&rng));
    m->keys[h] = id;
    m->slot[h] = (uint32_t)(++m->n);
    return m->n - 1;
}

static void adagrad(float *w, float *acc, float *g, size_t n, double lr, double l2)
{
    for (size_t i = 0; i < n; i++) {
        double gi = g[i] + l2 * w[i];
        acc[i] += (float)(gi * gi);
        w[i] -= (float)(lr * gi / (sqrt(acc[i]) + 1e-8));
        g[i] = 0;
    }
}

static void evaluate(const zp_ctr_data *test, rowmap *m, const float *dw, zt_ctr_local_result *r)
{
    uint32_t D = m->dim;
    float *logit = malloc(test->n * sizeof(float));
    size_t chunk = 1024;
    size_t *ex = malloc(chunk * sizeof(size_t));
    for (size_t a = 0; a < test->n; a += chunk) {
        size_t nb = test->n - a < chunk ? test->n - a : chunk;
        for (size_t b = 0; b < nb; b++)
            ex[b] = a + b;
        size_t np = zp_ctr_math_batch_positions(test, ex, nb);
        float *rows = malloc(np * (1 + D) * sizeof(float));
        for (size_t p = 0; p < np; p++) {
            /* an unseen id reads as a fresh row, as on a server */
            const float *row = &m->rows[map_row(m, test->ids[test->off[a] + p]) * block(m)];
            memcpy(&rows[p * (1 + D)], row, (1 + D) * sizeof(float));
        }
        zp_ctr_math_pass(test, ex, nb, D, rows, dw, &logit[a], NULL, 0, NULL);
        free(rows);
    }
    r->auc = zp_ctr_metrics_auc(logit, test->label, test->n);
    r->logloss = zp_ctr_metrics_logloss(logit, test->label, test->n);
    r->accuracy = zp_ctr_metrics_accuracy(logit, test->label, test->n);
    free(ex);
    free(logit);
}

int zt_ctr_local_train(const zp_ctr_data *train, const zp_ctr_data *test,
                       const zt_ctr_local_opts *o, zt_ctr_local_result *out)
{
    double t0 = zp_now_s();
    uint32_t D = o->dim;
    rowmap m = {.dim = D, .init_scale = o->init_scale, .seed = o->seed};
    int nd = train->ndense;
    float dw[ZP_CTR_MAX_DENSE + 1] = {0}, dacc[ZP_CTR_MAX_DENSE + 1] = {0},
                                gd[ZP_CTR_MAX_DENSE + 1];
    uint32_t *order = malloc(train->n * sizeof(uint32_t));
    size_t *ex = malloc(o->batch * sizeof(size_t));
    size_t maxp = 0;
    for (size_t i = 0; i < train->n; i++) {
        size_t k = train->off[i + 1] - train->off[i];
        maxp = k > maxp ? k : maxp;
    }
    maxp *= o->batch;
    float *rows = malloc(maxp * (1 + D) * sizeof(float));
    float *grows = malloc(maxp * (1 + D) * sizeof(float));
    size_t *rowi = malloc(maxp * sizeof(size_t));
    size_t *touched = malloc(maxp * sizeof(size_t));
    uint64_t nbatch = 0;
    for (int ep = 0; ep < o->epochs; ep++) {
        for (size_t i = 0; i < train->n; i++)
            order[i] = (uint32_t)i;
        zp_rng rng;
        zp_rng_seed(&rng, o->seed, 99, (uint64_t)ep);
        zp_rng_shuffle(&rng, order, train->n);
        for (size_t a = 0; a < train->n; a += o->batch) {
            size_t nb = train->n - a < o->batch ? train->n - a : o->batch;
            for (size_t b = 0; b < nb; b++)
                ex[b] = order[a + b];
            size_t p = 0;
            for (size_t b = 0; b < nb; b++)
                for (size_t q = train->off[ex[b]]; q < train->off[ex[b] + 1]; q++)
                    rowi[p++] = map_row(&m, train->ids[q]);
            for (size_t i = 0; i < p; i++)
                memcpy(&rows[i * (1 + D)], &m.rows[rowi[i] * block(&m)], (1 + D) * sizeof(float));
            zp_ctr_math_pass(train, ex, nb, D, rows, dw, NULL, grows, 1.0, gd);
            /* sum the gradients of each distinct row, then one step per row */
            nbatch++;
            size_t nt = 0;
            for (size_t i = 0; i < p; i++) {
                float *r = &m.rows[rowi[i] * block(&m)];
                float *g = r + 2 * (1 + D);
                if (m.stamp[rowi[i]] != nbatch) {
                    m.stamp[rowi[i]] = nbatch;
                    touched[nt++] = rowi[i];
                }
                for (uint32_t k = 0; k <= D; k++)
                    g[k] += grows[i * (1 + D) + k];
            }
            for (size_t t = 0; t < nt; t++) {
                float *r = &m.rows[touched[t] * block(&m)];
                adagrad(r, r + (1 + D), r + 2 * (1 + D), 1, o->lr_sparse, o->l2);
                adagrad(r + 1, r + (1 + D) + 1, r + 2 * (1 + D) + 1, D, o->lr_emb, o->l2);
            }
            adagrad(dw, dacc, gd, (size_t)nd + 1, o->lr_dense, 0);
        }
    }
    memset(out, 0, sizeof(*out));
    evaluate(test, &m, dw, out);
    out->rows = m.n;
    out->seconds = zp_now_s() - t0;
    free(order);
    free(ex);
    free(rows);
    free(grows);
    free(rowi);
    free(touched);
    free(m.stamp);
    free(m.keys);
    free(m.slot);
    free(m.rows);
    return 0;
}
