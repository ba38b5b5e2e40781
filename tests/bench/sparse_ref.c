/*
 * sparse_ref.c - the reference sparse server of bench_sparse --ref (see
 * sparse_ref.h), written as a product would be written if it did nothing
 * but the work: one open-addressing table per dimension (16-byte slots
 * {id, row}, linear probing, Fibonacci hashing of id ^ a random seed, load
 * <= 0.7, doubled), rows [values | accumulators] in one dense array grown
 * geometrically, and the index work batched: for each group of GROUP ids
 * the slots are hashed and prefetched, then probed (rows created on first
 * touch) and the rows prefetched, then the rows are copied or updated.
 * Adagrad in float, as one fused loop the compiler vectorises.
 */
#define _GNU_SOURCE
#include "sparse_ref.h"

#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#define GROUP   16
#define NDIMS   8
#define REF_LR  0.01f
#define REF_EPS 1e-8f

typedef struct rslot {
    uint64_t id;
    uint32_t row; /* UINT32_MAX: empty */
    uint32_t pad;
} rslot;

typedef struct rmap {
    uint32_t dim;
    int lg;
    rslot *slots;
    uint64_t cap, n, seed;
    float *rows; /* n rows of 2 * dim floats */
    uint64_t rows_cap;
} rmap;

typedef struct rhdr {
    uint32_t op, dim;
    uint64_t count;
} rhdr;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t slot_of(const rmap *m, uint64_t id)
{
    return ((id ^ m->seed) * 0x9e3779b97f4a7c15ull) >> (64 - m->lg);
}

static void map_init(rmap *m, uint32_t dim)
{
    memset(m, 0, sizeof(*m));
    m->dim = dim;
    m->lg = 10;
    m->cap = (uint64_t)1 << m->lg;
    m->slots = malloc(m->cap * sizeof(rslot));
    memset(m->slots, 0xff, m->cap * sizeof(rslot));
    m->seed = mix64((uint64_t)getpid() ^ (uint64_t)(uintptr_t)m);
}

static void map_free(rmap *m)
{
    free(m->slots);
    free(m->rows);
    memset(m, 0, sizeof(*m));
}

static void map_grow(rmap *m)
{
    uint64_t ncap = m->cap * 2;
    rslot *ns = malloc(ncap * sizeof(rslot));
    memset(ns, 0xff, ncap * sizeof(rslot));
    m->lg++;
    for (uint64_t i = 0; i < m->cap; i++) {
        if (m->slots[i].row == UINT32_MAX)
            continue;
        uint64_t j = slot_of(m, m->slots[i].id);
        while (ns[j].row != UINT32_MAX)
            j = (j + 1) & (ncap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
}

/* Room for `more` new rows without growing inside a group. */
static void map_reserve(rmap *m, uint64_t more)
{
    while ((m->n + more) * 10 > m->cap * 7)
        map_grow(m);
    if (m->n + more > m->rows_cap) {
        uint64_t nc = m->rows_cap ? m->rows_cap * 2 : 1024;
        while (nc < m->n + more)
            nc *= 2;
        m->rows = realloc(m->rows, nc * 2 * m->dim * sizeof(float));
        m->rows_cap = nc;
    }
}

static uint32_t probe(rmap *m, uint64_t id, uint64_t j)
{
    uint64_t mask = m->cap - 1;
    for (;;) {
        rslot *s = &m->slots[j];
        if (s->row == UINT32_MAX) { /* first touch: a new row */
            uint32_t r = (uint32_t)m->n++;
            s->id = id;
            s->row = r;
            float *v = m->rows + (size_t)r * 2 * m->dim;
            for (uint32_t d = 0; d < m->dim; d++) {
                v[d] = ((float)(mix64(id + d) >> 40) * (1.0f / 16777216.0f) - 0.5f) * 0.02f;
                v[m->dim + d] = 0;
            }
            return r;
        }
        if (s->id == id)
            return s->row;
        j = (j + 1) & mask;
    }
}

static inline void adagrad(float *restrict w, float *restrict acc, const float *restrict g,
                           uint32_t dim)
{
    for (uint32_t d = 0; d < dim; d++) {
        acc[d] += g[d] * g[d];
        w[d] -= REF_LR * g[d] / (sqrtf(acc[d]) + REF_EPS);
    }
}

/* Pull (g == NULL: copy rows out) or push (apply g) over ids[0..n). */
static void map_run(rmap *m, const uint64_t *ids, size_t n, float *out, const float *g,
                    int variant)
{
    const uint32_t dim = m->dim, rl = 2 * dim;
    if (variant == REF_MAP_NAIVE) {
        map_reserve(m, n);
        for (size_t i = 0; i < n; i++) {
            float *row = m->rows + (size_t)probe(m, ids[i], slot_of(m, ids[i])) * rl;
            if (g)
                adagrad(row, row + dim, g + i * dim, dim);
            else
                memcpy(out + i * dim, row, dim * sizeof(float));
        }
        return;
    }
    uint64_t at[GROUP];
    uint32_t rows[GROUP];
    for (size_t i0 = 0; i0 < n; i0 += GROUP) {
        size_t k = n - i0 < GROUP ? n - i0 : GROUP;
        map_reserve(m, k);
        for (size_t j = 0; j < k; j++) {
            at[j] = slot_of(m, ids[i0 + j]);
            __builtin_prefetch(&m->slots[at[j]]);
        }
        for (size_t j = 0; j < k; j++) {
            rows[j] = probe(m, ids[i0 + j], at[j]);
            __builtin_prefetch(m->rows + (size_t)rows[j] * rl, 1);
        }
        for (size_t j = 0; j < k; j++) {
            float *row = m->rows + (size_t)rows[j] * rl;
            if (g)
                adagrad(row, row + dim, g + (i0 + j) * dim, dim);
            else
                memcpy(out + (i0 + j) * dim, row, dim * sizeof(float));
        }
    }
}

struct zt_smap {
    rmap m;
};

zt_smap *zt_smap_new(uint32_t dim)
{
    zt_smap *s = malloc(sizeof(*s));
    if (!s)
        abort();
    map_init(&s->m, dim);
    return s;
}

void zt_smap_run(zt_smap *s, const uint64_t *ids, size_t n, float *out, const float *g)
{
    map_run(&s->m, ids, n, out, g, REF_MAP_BATCHED);
}

void zt_smap_free(zt_smap **sp)
{
    if (*sp)
        map_free(&(*sp)->m);
    free(*sp);
    *sp = NULL;
}

static void free_cb(void *data, void *hint)
{
    (void)hint;
    free(data);
}

static int more(void *s)
{
    int m = 0;
    size_t len = sizeof m;
    zmq_getsockopt(s, ZMQ_RCVMORE, &m, &len);
    return m;
}

/* One request; -1 when the socket is gone. */
static int serve_one(void *s, rmap *maps, int variant)
{
    zmq_msg_t ident, hm, idm, gm;
    zmq_msg_init(&ident);
    zmq_msg_init(&hm);
    zmq_msg_init(&idm);
    zmq_msg_init(&gm);
    if (zmq_msg_recv(&ident, s, 0) < 0 || zmq_msg_recv(&hm, s, 0) < 0)
        return -1;
    rhdr h = {0};
    if (zmq_msg_size(&hm) == sizeof h)
        memcpy(&h, zmq_msg_data(&hm), sizeof h);
    if (more(s))
        zmq_msg_recv(&idm, s, 0);
    if (more(s))
        zmq_msg_recv(&gm, s, 0);
    while (more(s)) { /* nothing else is sent; drop it */
        zmq_msg_t x;
        zmq_msg_init(&x);
        zmq_msg_recv(&x, s, 0);
        zmq_msg_close(&x);
    }
    rmap *m = NULL;
    for (int i = 0; i < NDIMS && h.dim; i++) {
        if (maps[i].dim == h.dim || maps[i].dim == 0) {
            if (maps[i].dim == 0)
                map_init(&maps[i], h.dim);
            m = &maps[i];
            break;
        }
    }
    float *out = NULL;
    size_t n = (size_t)h.count, out_len = 0;
    const uint64_t *ids = zmq_msg_data(&idm);
    if (h.op == REF_RESET) {
        for (int i = 0; i < NDIMS; i++)
            map_free(&maps[i]);
        malloc_trim(0);
    } else if (m && zmq_msg_size(&idm) == n * sizeof(uint64_t)) {
        if (h.op == REF_PULL) {
            out_len = n * m->dim * sizeof(float);
            out = malloc(out_len ? out_len : 1);
            map_run(m, ids, n, out, NULL, variant);
        } else if (h.op == REF_PUSH && zmq_msg_size(&gm) == n * m->dim * sizeof(float)) {
            map_run(m, ids, n, NULL, zmq_msg_data(&gm), variant);
        }
    }
    int rc = zmq_msg_send(&ident, s, ZMQ_SNDMORE) < 0 ||
                     zmq_send(s, &h, sizeof h, out ? ZMQ_SNDMORE : 0) != sizeof h
                 ? -1
                 : 0;
    if (rc == 0 && out) {
        zmq_msg_t om;
        zmq_msg_init_data(&om, out, out_len, free_cb, NULL);
        rc = zmq_msg_send(&om, s, 0) < 0 ? -1 : 0;
    }
    zmq_msg_close(&hm);
    zmq_msg_close(&idm);
    zmq_msg_close(&gm);
    return rc;
}

static void child_main(const char *ep, int wfd, int variant)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    char ok = zmq_bind(s, ep) == 0 ? 1 : 0;
    if (write(wfd, &ok, 1) != 1 || !ok)
        _exit(1);
    close(wfd);
    rmap maps[NDIMS];
    memset(maps, 0, sizeof(maps));
    while (serve_one(s, maps, variant) == 0)
        ;
    _exit(0);
}

int zt_sref_start(zt_sref *r, int variant)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->endpoint, sizeof(r->endpoint), "ipc:///tmp/zeps-sref-%d.sock", (int)getpid());
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    r->pid = fork();
    if (r->pid == 0) {
        close(fds[0]);
        child_main(r->endpoint, fds[1], variant);
    }
    close(fds[1]);
    char ok = 0;
    if (r->pid < 0 || read(fds[0], &ok, 1) != 1 || !ok) {
        close(fds[0]);
        return -1;
    }
    close(fds[0]);
    r->ctx = zmq_ctx_new();
    r->sock = zmq_socket(r->ctx, ZMQ_DEALER);
    int zero = 0, timeout = 120000;
    zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    return zmq_connect(r->sock, r->endpoint) == 0 ? 0 : -1;
}

void zt_sref_stop(zt_sref *r)
{
    if (r->sock)
        zmq_close(r->sock);
    if (r->ctx)
        zmq_ctx_term(r->ctx);
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        waitpid(r->pid, NULL, 0);
    }
    unlink(r->endpoint + strlen("ipc://"));
    memset(r, 0, sizeof(*r));
}

static void no_free(void *data, void *hint)
{
    (void)data, (void)hint;
}

/* Send [hdr][ids][grads] (frames without copying; the call waits for the
 * reply, so the caller's buffers outlive the send) and receive the reply;
 * rows (if any) are copied into `rows`. */
static int call(zt_sref *r, uint32_t op, uint32_t dim, const uint64_t *ids, size_t n,
                const float *grads, float *rows)
{
    rhdr h = {.op = op, .dim = dim, .count = n};
    zmq_msg_t m;
    int last = ids == NULL;
    if (zmq_send(r->sock, &h, sizeof h, last ? 0 : ZMQ_SNDMORE) != sizeof h)
        return -1;
    if (ids) {
        zmq_msg_init_data(&m, (void *)ids, n * sizeof(uint64_t), no_free, NULL);
        if (zmq_msg_send(&m, r->sock, grads ? ZMQ_SNDMORE : 0) < 0)
            return -1;
    }
    if (grads) {
        zmq_msg_init_data(&m, (void *)grads, n * dim * sizeof(float), no_free, NULL);
        if (zmq_msg_send(&m, r->sock, 0) < 0)
            return -1;
    }
    rhdr rep;
    if (zmq_recv(r->sock, &rep, sizeof rep, 0) != sizeof rep || rep.op != op)
        return -1;
    if (!rows)
        return more(r->sock) ? -1 : 0;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, r->sock, 0) < 0 || zmq_msg_size(&m) != n * dim * sizeof(float)) {
        zmq_msg_close(&m);
        return -1;
    }
    memcpy(rows, zmq_msg_data(&m), n * dim * sizeof(float));
    zmq_msg_close(&m);
    return 0;
}

int zt_sref_reset(zt_sref *r)
{
    return call(r, REF_RESET, 0, NULL, 0, NULL, NULL);
}

uint64_t zt_sref_rss(zt_sref *r)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)r->pid);
    FILE *f = fopen(path, "r");
    uint64_t kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

int zt_sref_pull(zt_sref *r, uint32_t dim, const uint64_t *ids, size_t n, float *rows)
{
    return call(r, REF_PULL, dim, ids, n, NULL, rows);
}

int zt_sref_push(zt_sref *r, uint32_t dim, const uint64_t *ids, size_t n, const float *grads)
{
    return call(r, REF_PUSH, dim, ids, n, grads, NULL);
}
