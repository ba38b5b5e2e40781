/*
 * warm.c - rows waiting to be written to a cold tier's store, by id, and
 * the thread that writes them (warm.h).
 */
#include "warm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "errors.h"
#include "zeps_errors.h"

/* A slot of a buffer in the writer's sort. */
struct order {
    uint64_t id;
    uint32_t slot;
};

/* One buffer: rows by slot in arrival order, found by an open-addressing
 * table of slot + 1 (0: empty) twice the slots' size. */
typedef struct buf {
    uint64_t *ids;
    unsigned char *recs;
    bool *del;
    uint32_t *table;
    struct order *order; /* the slots by id: the writer's */
    size_t n, mask;
} buf;

struct zp_warm {
    const zp_cold_ops *ops;
    zp_cold *db;
    size_t rec, cap;
    buf b[2];
    buf *fill;    /* the loop's */
    buf *writing; /* handed to the writer, until the loop takes it back */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go, done, stop; /* under mu: writing handed over, its write ended, stop */
    int rc;              /* under mu: the first failed write */
    char err[512];
};

static size_t slot_of(uint64_t id, size_t mask)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (size_t)id & mask;
}

static void buf_init(buf *b, size_t cap, size_t rec)
{
    size_t tc = 1;
    while (tc < 2 * cap)
        tc <<= 1;
    b->ids = zp_alloc(cap * sizeof(uint64_t));
    b->recs = zp_alloc(cap * rec);
    b->del = zp_alloc(cap * sizeof(bool));
    b->order = zp_alloc(cap * sizeof(struct order));
    b->table = zp_alloc_zeroed(tc, sizeof(uint32_t));
    b->mask = tc - 1;
    b->n = 0;
}

static void buf_fini(buf *b)
{
    free(b->ids);
    free(b->recs);
    free(b->del);
    free(b->order);
    free(b->table);
}

/* The table position of id: its own, or the empty one it would take. */
static size_t buf_find(const buf *b, uint64_t id)
{
    size_t i = slot_of(id, b->mask);
    while (b->table[i] != 0 && b->ids[b->table[i] - 1] != id)
        i = (i + 1) & b->mask;
    return i;
}

static void buf_clear(buf *b)
{
    if (b->n > 0)
        memset(b->table, 0, (b->mask + 1) * sizeof(uint32_t));
    b->n = 0;
}

static int by_id(const void *x, const void *y)
{
    uint64_t a = ((const struct order *)x)->id, b = ((const struct order *)y)->id;
    return a < b ? -1 : a > b; /* ids are unique in a buffer */
}

/* Write buffer b to the store in id order (the writer thread). */
static int write_buf(zp_warm *w, buf *b, char *err, size_t errlen)
{
    for (size_t i = 0; i < b->n; i++)
        b->order[i] = (struct order){.id = b->ids[i], .slot = (uint32_t)i};
    qsort(b->order, b->n, sizeof(struct order), by_id);
    int rc = 0;
    for (size_t k = 0; k < b->n && rc == 0; k++) {
        uint32_t i = b->order[k].slot;
        rc = b->del[i] ? w->ops->del(w->db, b->ids[i], err, errlen)
                       : w->ops->put(w->db, b->ids[i], b->recs + i * w->rec, w->rec, err, errlen);
    }
    return rc != 0 ? rc : w->ops->commit(w->db, err, errlen);
}

static void *writer(void *arg)
{
    zp_warm *w = arg;
    char err[512];
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->go && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (!w->go)
            break;
        w->go = false;
        buf *b = w->writing;
        pthread_mutex_unlock(&w->mu);
        int rc = write_buf(w, b, err, sizeof err);
        pthread_mutex_lock(&w->mu);
        if (rc != 0 && w->rc == 0) {
            w->rc = rc;
            snprintf(w->err, sizeof w->err, "%s", err);
        }
        w->done = true;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int zp_warm_new(zp_warm **out, const zp_cold_ops *ops, zp_cold *db, size_t rec, size_t cap,
                char *err, size_t errlen)
{
    zp_warm *w = zp_alloc_zeroed(1, sizeof(*w));
    w->ops = ops;
    w->db = db;
    w->rec = rec;
    w->cap = cap < 16 ? 16 : cap;
    buf_init(&w->b[0], w->cap, rec);
    buf_init(&w->b[1], w->cap, rec);
    w->fill = &w->b[0];
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->th, NULL, writer, w) != 0) {
        w->stop = true;
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        buf_fini(&w->b[0]);
        buf_fini(&w->b[1]);
        free(w);
        return zp_errors_set(err, errlen, ZEPS_EINTERNAL, "cannot start the tier's writer thread");
    }
    *out = w;
    return 0;
}

/* The write in flight, if any, waited for (wait) or looked at: its buffer
 * taken back once written. 0, or the writer's failure. */
static int settle(zp_warm *w, bool wait, char *err, size_t errlen)
{
    pthread_mutex_lock(&w->mu);
    while (wait && w->writing != NULL && !w->done)
        pthread_cond_wait(&w->cv, &w->mu);
    if (w->writing != NULL && w->done) {
        buf_clear(w->writing);
        w->writing = NULL;
        w->done = false;
    }
    int rc = w->rc;
    if (rc != 0)
        zp_errors_set(err, errlen, rc, "%s", w->err);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* The filled buffer handed to the writer (after the one before it). */
static int hand_over(zp_warm *w, char *err, size_t errlen)
{
    int rc = settle(w, true, err, errlen);
    if (rc != 0 || w->fill->n == 0)
        return rc;
    pthread_mutex_lock(&w->mu);
    w->writing = w->fill;
    w->go = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    w->fill = w->fill == &w->b[0] ? &w->b[1] : &w->b[0];
    return 0;
}

int zp_warm_put(zp_warm *w, uint64_t id, const void *rec, char *err, size_t errlen)
{
    buf *b = w->fill;
    size_t i = buf_find(b, id);
    if (b->table[i] == 0) {
        if (b->n == w->cap) {
            int rc = hand_over(w, err, errlen);
            if (rc != 0)
                return rc;
            b = w->fill;
            i = buf_find(b, id);
        }
        b->ids[b->n] = id;
        b->table[i] = (uint32_t)++b->n;
    }
    size_t s = b->table[i] - 1;
    b->del[s] = rec == NULL;
    if (rec != NULL)
        memcpy(b->recs + s * w->rec, rec, w->rec);
    return settle(w, false, err, errlen);
}

/* id in buffer b: 1 (*rec), -1 (a delete) or 0. */
static int buf_get(const zp_warm *w, const buf *b, uint64_t id, const void **rec)
{
    if (b == NULL || b->n == 0)
        return 0;
    size_t i = buf_find(b, id);
    if (b->table[i] == 0)
        return 0;
    size_t s = b->table[i] - 1;
    if (b->del[s])
        return -1;
    *rec = b->recs + s * w->rec;
    return 1;
}

int zp_warm_get(zp_warm *w, uint64_t id, const void **rec)
{
    int r = buf_get(w, w->fill, id, rec);
    return r != 0 ? r : buf_get(w, w->writing, id, rec);
}

int zp_warm_drain(zp_warm *w, char *err, size_t errlen)
{
    int rc = hand_over(w, err, errlen);
    return rc != 0 ? rc : settle(w, true, err, errlen);
}

uint64_t zp_warm_bytes(const zp_warm *w)
{
    uint64_t one = w->cap * (w->rec + sizeof(uint64_t) + sizeof(bool) + sizeof(struct order)) +
                   (w->b[0].mask + 1) * sizeof(uint32_t);
    return 2 * one;
}

void zp_warm_free(zp_warm **wp)
{
    if (wp == NULL || *wp == NULL)
        return;
    zp_warm *w = *wp;
    char err[64];
    settle(w, true, err, sizeof err);
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    buf_fini(&w->b[0]);
    buf_fini(&w->b[1]);
    free(w);
    *wp = NULL;
}
