/*
 * table.c - a dense table's slice: creation from a declaration, updates with
 * copy-on-write of the parameter buffer, and the declaration check. See
 * table.h.
 */
#include "table.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zeps_errors.h"

/* The largest dense table: 2^36 elements (256 GiB of f32) is beyond any one
 * machine; the bound keeps size arithmetic far from overflow. */
#define ZP_TABLE_MAX_LENGTH (1ull << 36)

void zp_buf_release(void *data, void *hint)
{
    zp_buf *b = hint;
    (void)data;
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

static zp_buf *buf_new(size_t n)
{
    zp_buf *b = malloc(sizeof(*b) + n * sizeof(float));
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->n = n;
    return b;
}

static int valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > 63)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
            return 0;
    return 1;
}

static void hyper_from_spec(zp_hyper *h, const Zeps__TableSpec *spec)
{
    h->lr = (float)spec->lr;
    h->momentum = (float)spec->momentum;
    h->beta1 = (float)spec->beta1;
    h->beta2 = (float)spec->beta2;
    h->eps = (float)spec->eps;
    h->weight_decay = (float)spec->weight_decay;
    zp_hyper_defaults(h);
}

static int check_spec(const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    if (!spec->name || !valid_name(spec->name)) {
        snprintf(err, errlen, "table name '%s' must be 1-63 characters of [A-Za-z0-9_.-]",
                 spec->name ? spec->name : "");
        return ZEPS_EINVAL;
    }
    if (spec->kind != ZP_TABLE_DENSE && spec->kind != ZP_TABLE_SPARSE) {
        snprintf(err, errlen, "table '%s': kind %u is not supported (0 = dense, 1 = sparse)",
                 spec->name, spec->kind);
        return ZEPS_EINVAL;
    }
    if (spec->kind == ZP_TABLE_SPARSE) {
        if (zp_init_from_name(spec->init) < 0)
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "table '%s': unknown initializer '%s' (zeros, constant, uniform, normal)",
                             spec->name, spec->init);
        if (zp_evict_from_name(spec->evict) < 0)
            return zp_seterr(err, errlen, ZEPS_EINVAL,
                             "table '%s': unknown eviction policy '%s' (lru, lfu)", spec->name,
                             spec->evict);
        return 0; /* the rest is checked by zp_sparse_new */
    }
    if (spec->length == 0 || spec->length > ZP_TABLE_MAX_LENGTH) {
        snprintf(err, errlen, "table '%s': length %llu must be in [1, 2^36]", spec->name,
                 (unsigned long long)spec->length);
        return ZEPS_EINVAL;
    }
    if (zp_init_from_name(spec->init) < 0) {
        snprintf(err, errlen, "table '%s': unknown initializer '%s' (zeros, constant, uniform, normal)",
                 spec->name, spec->init);
        return ZEPS_EINVAL;
    }
    if (!isfinite(spec->init_scale)) {
        snprintf(err, errlen, "table '%s': init_scale must be finite", spec->name);
        return ZEPS_EINVAL;
    }
    zp_hyper h;
    hyper_from_spec(&h, spec);
    char oerr[200];
    if (zp_optim_validate(spec->optimizer, &h, oerr, sizeof(oerr)) != 0) {
        snprintf(err, errlen, "table '%s': %s", spec->name, oerr);
        return ZEPS_EOPTIM;
    }
    return 0;
}

static void sparse_opts_from_spec(zp_sparse_opts *o, const Zeps__TableSpec *spec)
{
    memset(o, 0, sizeof(*o));
    o->dim = spec->dim;
    o->optimizer = spec->optimizer;
    o->lr = (float)spec->lr;
    o->beta1 = (float)spec->beta1;
    o->beta2 = (float)spec->beta2;
    o->eps = (float)spec->eps;
    o->weight_decay = (float)spec->weight_decay;
    o->l1 = (float)spec->l1;
    o->l2 = (float)spec->l2;
    o->ftrl_beta = (float)spec->ftrl_beta;
    o->init = (zp_init_kind)zp_init_from_name(spec->init);
    o->init_scale = spec->init_scale;
    o->seed = spec->seed;
    o->admit_count = spec->admit_count;
    o->admit_prob = spec->admit_prob;
    o->ttl_clocks = spec->ttl_clocks;
    o->capacity_rows = spec->capacity_rows;
    o->memory_budget = spec->memory_budget;
    o->evict = (zp_evict_policy)zp_evict_from_name(spec->evict);
}

/* A sparse table: rows in a zp_sparse; the dense fields stay empty (a
 * zero-length parameter buffer, a stateless optimizer) so code that walks
 * every table's slice sees nothing to do. */
static int sparse_table_new(zp_table *t, const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    zp_sparse_opts o;
    sparse_opts_from_spec(&o, spec);
    char serr[300];
    int rc = zp_sparse_new(&t->sparse, &o, serr, sizeof(serr));
    if (rc != 0)
        return zp_seterr(err, errlen, rc, "table '%s': %s", spec->name, serr);
    t->kind = ZP_TABLE_SPARSE;
    t->dim = spec->dim;
    /* kept to compare re-declarations field by field */
    size_t len = zeps__table_spec__get_packed_size(spec);
    uint8_t *buf = zp_xmalloc(len ? len : 1);
    zeps__table_spec__pack(spec, buf);
    t->sparse_spec = zeps__table_spec__unpack(NULL, len, buf);
    free(buf);
    if (!t->sparse_spec)
        abort(); /* we just packed it */
    t->opt = zp_optim_find("sgd");
    t->params = buf_new(0);
    return 0;
}

int zp_table_new(zp_table **out, uint32_t id, const Zeps__TableSpec *spec, int shard, int nshards,
                 int nworkers, char *err, size_t errlen)
{
    int rc = check_spec(spec, err, errlen);
    if (rc != 0)
        return rc;
    if (spec->kind == ZP_TABLE_SPARSE) {
        zp_table *t = zp_xcalloc(1, sizeof(*t));
        t->id = id;
        snprintf(t->name, sizeof(t->name), "%s", spec->name);
        snprintf(t->optimizer, sizeof(t->optimizer), "%s", spec->optimizer ? spec->optimizer : "");
        t->init = (zp_init_kind)zp_init_from_name(spec->init);
        t->init_scale = spec->init_scale;
        t->seed = spec->seed;
        t->has_staleness = spec->has_staleness;
        t->staleness = spec->staleness;
        t->nworkers = nworkers;
        t->parked_tail = &t->parked;
        rc = sparse_table_new(t, spec, err, errlen);
        if (rc != 0) {
            free(t);
            return rc;
        }
        *out = t;
        return 0;
    }
    zp_table *t = zp_xcalloc(1, sizeof(*t));
    t->id = id;
    snprintf(t->name, sizeof(t->name), "%s", spec->name);
    t->length = spec->length;
    t->begin = spec->length * (uint64_t)shard / (uint64_t)nshards;
    t->end = spec->length * (uint64_t)(shard + 1) / (uint64_t)nshards;
    t->n = (size_t)(t->end - t->begin);
    snprintf(t->optimizer, sizeof(t->optimizer), "%s", spec->optimizer);
    hyper_from_spec(&t->hyper, spec);
    t->init = (zp_init_kind)zp_init_from_name(spec->init);
    t->init_scale = spec->init_scale;
    t->seed = spec->seed;
    t->has_staleness = spec->has_staleness;
    t->staleness = spec->staleness;
    t->opt = zp_optim_find(spec->optimizer);
    t->nworkers = nworkers;
    t->parked_tail = &t->parked;

    size_t nstate = (size_t)t->opt->state_per_param * t->n;
    t->params = buf_new(t->n);
    t->state = nstate ? calloc(nstate, sizeof(float)) : NULL;
    t->pending = calloc((size_t)nworkers, sizeof(zmq_msg_t));
    t->have = calloc((size_t)nworkers, sizeof(bool));
    t->pending_version = calloc((size_t)nworkers, sizeof(uint64_t));
    if (!t->params || (nstate && !t->state) || !t->pending || !t->have || !t->pending_version) {
        snprintf(err, errlen, "table '%s': cannot allocate %llu bytes for its slice", t->name,
                 (unsigned long long)((2 + t->opt->state_per_param) * t->n * sizeof(float)));
        if (!t->params)
            t->params = buf_new(0);
        zp_table_destroy(&t);
        return ZEPS_ENOMEM;
    }
    zp_init_fill(t->params->data, t->begin, t->n, t->init, t->init_scale, t->seed);
    *out = t;
    return 0;
}

void zp_table_destroy(zp_table **tp)
{
    zp_table *t = *tp;
    if (!t)
        return;
    for (int r = 0; r < t->nworkers && t->have; r++)
        if (t->have[r])
            zmq_msg_close(&t->pending[r]);
    zp_parked *p = t->parked;
    while (p) {
        zp_parked *next = p->next;
        zp_parked_free(p);
        p = next;
    }
    zp_sparse_destroy(&t->sparse);
    free(t->ids);
    free(t->set_keys);
    free(t->set_gen);
    free(t->grads);
    free(t->vers);
    if (t->sparse_spec)
        zeps__table_spec__free_unpacked(t->sparse_spec, NULL);
    if (t->params)
        zp_buf_release(t->params->data, t->params);
    for (int r = 0; r < t->nworkers && t->pulled; r++)
        if (t->pulled[r])
            zp_buf_release(t->pulled[r]->data, t->pulled[r]);
    free(t->pulled);
    free(t->scratch);
    free(t->push_scratch);
    zp_cpull_free(t);
    free(t->pending_version);
    free(t->state);
    free(t->acc);
    free(t->pending);
    free(t->have);
    free(t);
    *tp = NULL;
}

#define SAME_D(field, label)                                                                       \
    do {                                                                                           \
        zp_hyper h_;                                                                               \
        hyper_from_spec(&h_, spec);                                                                \
        if (h_.field != t->hyper.field) {                                                          \
            snprintf(err, errlen, "table '%s' already declared with %s = %g, not %g", t->name,    \
                     label, (double)t->hyper.field, (double)h_.field);                             \
            return ZEPS_ECONFLICT;                                                                 \
        }                                                                                          \
    } while (0)

#define SAME_S(field, fmt, label)                                                                  \
    do {                                                                                           \
        if (spec->field != d->field)                                                               \
            return zp_seterr(err, errlen, ZEPS_ECONFLICT,                                          \
                             "table '%s' already declared with %s = " fmt ", not " fmt, t->name,  \
                             label, d->field, spec->field);                                        \
    } while (0)

static const char *str_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

static int check_same_sparse(const zp_table *t, const Zeps__TableSpec *spec, char *err,
                             size_t errlen)
{
    const Zeps__TableSpec *d = t->sparse_spec;
    if (spec->kind != ZP_TABLE_SPARSE)
        return zp_seterr(err, errlen, ZEPS_ECONFLICT,
                         "table '%s' already declared as sparse, not kind %u", t->name, spec->kind);
    if (strcmp(str_or(spec->optimizer, ""), str_or(d->optimizer, "")) != 0)
        return zp_seterr(err, errlen, ZEPS_ECONFLICT,
                         "table '%s' already declared with optimizer '%s', not '%s'", t->name,
                         str_or(d->optimizer, ""), str_or(spec->optimizer, ""));
    if (strcmp(str_or(spec->init, "zeros"), str_or(d->init, "zeros")) != 0)
        return zp_seterr(err, errlen, ZEPS_ECONFLICT,
                         "table '%s' already declared with init '%s', not '%s'", t->name,
                         str_or(d->init, "zeros"), str_or(spec->init, "zeros"));
    if (strcmp(str_or(spec->evict, "lru"), str_or(d->evict, "lru")) != 0)
        return zp_seterr(err, errlen, ZEPS_ECONFLICT,
                         "table '%s' already declared with evict '%s', not '%s'", t->name,
                         str_or(d->evict, "lru"), str_or(spec->evict, "lru"));
    SAME_S(dim, "%u", "dim");
    SAME_S(lr, "%g", "lr");
    SAME_S(beta1, "%g", "beta1");
    SAME_S(beta2, "%g", "beta2");
    SAME_S(eps, "%g", "eps");
    SAME_S(weight_decay, "%g", "weight_decay");
    SAME_S(l1, "%g", "l1");
    SAME_S(l2, "%g", "l2");
    SAME_S(ftrl_beta, "%g", "ftrl_beta");
    SAME_S(init_scale, "%g", "init_scale");
    SAME_S(seed, "%" PRIu64, "seed");
    SAME_S(admit_count, "%u", "admit_count");
    SAME_S(admit_prob, "%g", "admit_prob");
    SAME_S(ttl_clocks, "%" PRIu64, "ttl_clocks");
    SAME_S(capacity_rows, "%" PRIu64, "capacity_rows");
    SAME_S(memory_budget, "%" PRIu64, "memory_budget");
    if (spec->has_staleness != d->has_staleness ||
        (d->has_staleness && spec->staleness != d->staleness))
        return zp_seterr(err, errlen, ZEPS_ECONFLICT,
                         "table '%s' already declared with another staleness bound", t->name);
    return 0;
}

int zp_table_check_same(const zp_table *t, const Zeps__TableSpec *spec, char *err, size_t errlen)
{
    if (t->kind == ZP_TABLE_SPARSE)
        return check_same_sparse(t, spec, err, errlen);
    if (spec->kind != 0) {
        snprintf(err, errlen, "table '%s' already declared as dense, not kind %u", t->name,
                 spec->kind);
        return ZEPS_ECONFLICT;
    }
    if (spec->length != t->length) {
        snprintf(err, errlen, "table '%s' already declared with length %llu, not %llu", t->name,
                 (unsigned long long)t->length, (unsigned long long)spec->length);
        return ZEPS_ECONFLICT;
    }
    if (strcmp(spec->optimizer ? spec->optimizer : "", t->optimizer) != 0) {
        snprintf(err, errlen, "table '%s' already declared with optimizer '%s', not '%s'",
                 t->name, t->optimizer, spec->optimizer ? spec->optimizer : "");
        return ZEPS_ECONFLICT;
    }
    SAME_D(lr, "lr");
    SAME_D(momentum, "momentum");
    SAME_D(beta1, "beta1");
    SAME_D(beta2, "beta2");
    SAME_D(eps, "eps");
    SAME_D(weight_decay, "weight_decay");
    if (spec->has_staleness != t->has_staleness ||
        (t->has_staleness && spec->staleness != t->staleness)) {
        snprintf(err, errlen, "table '%s' already declared with %s, not %s", t->name,
                 t->has_staleness ? "its own staleness bound" : "the cluster's staleness bound",
                 spec->has_staleness ? "its own" : "the cluster's");
        return ZEPS_ECONFLICT;
    }
    if (zp_init_from_name(spec->init) != (int)t->init || spec->init_scale != t->init_scale ||
        spec->seed != t->seed) {
        snprintf(err, errlen,
                 "table '%s' already declared with init %s(scale %g, seed %llu), not %s(scale %g, "
                 "seed %llu)",
                 t->name, zp_init_name(t->init), t->init_scale, (unsigned long long)t->seed,
                 spec->init && *spec->init ? spec->init : "zeros", spec->init_scale,
                 (unsigned long long)spec->seed);
        return ZEPS_ECONFLICT;
    }
    return 0;
}

/* Before an update: a reply still reading the current bytes gets to keep
 * them, the update goes into a copy. */
static void own_params(zp_table *t)
{
    if (atomic_load_explicit(&t->params->refs, memory_order_acquire) > 1) {
        /* A reply still reads the current bytes: write into a copy. */
        zp_buf *fresh = buf_new(t->n);
        if (!fresh) {
            fprintf(stderr, "zeps: out of memory copying table '%s'\n", t->name);
            abort();
        }
        memcpy(fresh->data, t->params->data, t->n * sizeof(float));
        zp_buf_release(t->params->data, t->params);
        t->params = fresh;
    }
}

void zp_table_apply(zp_table *t, const float *g, size_t off, size_t count, float scale)
{
    own_params(t);
    t->opt->apply(t->params->data + off, t->state ? t->state + off : NULL, g, count, t->n,
                  &t->hyper, t->version, scale);
    t->version++;
}

bool zp_table_sparse_ok(const zp_table *t)
{
    /* a linear optimizer without a weight-decay term: w -= lr * scale * g */
    return t->opt->linear && t->hyper.weight_decay == 0.0f;
}

void zp_table_apply_sparse(zp_table *t, const zp_codec_ops *codec, const void *buf, size_t len,
                           size_t off, size_t count, float scale)
{
    own_params(t);
    /* the same alpha as the linear optimizer's w += (-lr * scale) * g */
    codec->decode_add(buf, len, count, -t->hyper.lr * scale, t->params->data + off);
    t->version++;
}

zp_buf *zp_table_params_ref(zp_table *t)
{
    atomic_fetch_add_explicit(&t->params->refs, 1, memory_order_relaxed);
    return t->params;
}

void zp_table_reset_to(zp_table *t, const float *params, const float *state, uint64_t version,
                       int64_t round)
{
    if (atomic_load_explicit(&t->params->refs, memory_order_acquire) > 1) {
        zp_buf *fresh = buf_new(t->n);
        if (!fresh) {
            fprintf(stderr, "zeps: out of memory resetting table '%s'\n", t->name);
            abort();
        }
        zp_buf_release(t->params->data, t->params);
        t->params = fresh;
    }
    memcpy(t->params->data, params, t->n * sizeof(float));
    if (t->state)
        memcpy(t->state, state, (size_t)t->opt->state_per_param * t->n * sizeof(float));
    t->version = version;
    t->round = round;
    for (int r = 0; r < t->nworkers && t->have; r++) {
        if (!t->have[r])
            continue;
        zmq_msg_close(&t->pending[r]);
        t->have[r] = false;
    }
    t->npending = 0;
}

uint64_t zp_table_bytes(const zp_table *t)
{
    if (t->sparse) {
        zp_sparse_counters c;
        zp_sparse_get_counters(t->sparse, &c);
        return c.bytes;
    }
    uint64_t floats = (uint64_t)t->n * (1u + (unsigned)t->opt->state_per_param);
    if (t->acc)
        floats += t->n;
    if (t->scratch)
        floats += t->n;
    if (t->push_scratch)
        floats += t->n;
    return floats * sizeof(float);
}

void zp_table_park(zp_table *t, zp_parked *p)
{
    p->next = NULL;
    *t->parked_tail = p;
    t->parked_tail = &p->next;
    t->nparked++;
}

void zp_parked_free(zp_parked *p)
{
    zmq_msg_close(&p->identity);
    if (p->has_keys)
        zmq_msg_close(&p->keys);
    free(p);
}
