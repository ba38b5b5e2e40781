/*
 * fetch.c - cold rows read off the loop (fetch.h): one uv_work_t per
 * batch, the MultiGet on the pool, the stale records dropped on the loop.
 */
#include "fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "zeps_errors.h"

struct zp_fetch {
    uv_work_t work;
    zp_tier *tier;
    uint64_t tag;
    size_t n, rec;
    uint64_t *ids;
    unsigned char *recs;
    bool *found;
    bool *absent;
    int rc;
    char err[512];
    zp_fetch_done done;
    void *arg;
};

static void on_pool(uv_work_t *w)
{
    zp_fetch *f = w->data;
    f->rc = zp_tier_read_many(f->tier, f->ids, f->n, f->recs, f->found, f->err, sizeof f->err);
}

/* Back on the loop: what was written meanwhile is not handed out. */
static void on_loop(uv_work_t *w, int status)
{
    zp_fetch *f = w->data;
    if (status != 0 && f->rc == 0) {
        f->rc = ZEPS_EINTERNAL;
        snprintf(f->err, sizeof f->err, "the read was cancelled (%s)", uv_strerror(status));
    }
    for (size_t i = 0; i < f->n; i++) {
        bool touched = zp_tier_touched(f->tier, f->ids[i]);
        f->absent[i] = f->rc == 0 && !f->found[i] && !touched;
        if (f->rc != 0 || (f->found[i] && touched))
            f->found[i] = false;
    }
    zp_tier_read_end(f->tier, f->n);
    f->done(f, f->arg); /* takes f */
}

int zp_fetch_start(uv_loop_t *loop, zp_tier *t, const uint64_t *ids, size_t n, uint64_t tag,
                   zp_fetch_done done, void *arg)
{
    zp_fetch *f = zp_alloc_zeroed(1, sizeof(*f));
    f->tier = t;
    f->tag = tag;
    f->n = n;
    f->rec = (zp_tier_record_bytes(t) + 7) / 8 * 8;
    f->ids = zp_alloc(n * sizeof(uint64_t));
    memcpy(f->ids, ids, n * sizeof(uint64_t));
    f->recs = zp_alloc(n * f->rec);
    f->found = zp_alloc_zeroed(n, sizeof(bool));
    f->absent = zp_alloc_zeroed(n, sizeof(bool));
    f->done = done;
    f->arg = arg;
    f->work.data = f;
    zp_tier_read_begin(t);
    if (uv_queue_work(loop, &f->work, on_pool, on_loop) != 0) {
        zp_tier_read_end(t, 0);
        zp_fetch_free(&f);
        return ZEPS_EINTERNAL;
    }
    return 0;
}

uint64_t zp_fetch_tag(const zp_fetch *f)
{
    return f->tag;
}

size_t zp_fetch_count(const zp_fetch *f)
{
    return f->n;
}

uint64_t zp_fetch_id(const zp_fetch *f, size_t i)
{
    return f->ids[i];
}

const void *zp_fetch_record(const zp_fetch *f, size_t i)
{
    return f->found[i] ? f->recs + i * f->rec : NULL;
}

bool zp_fetch_absent(const zp_fetch *f, size_t i)
{
    return f->absent[i];
}

const char *zp_fetch_error(const zp_fetch *f)
{
    return f->rc != 0 ? f->err : NULL;
}

void zp_fetch_free(zp_fetch **fp)
{
    if (fp == NULL || *fp == NULL)
        return;
    zp_fetch *f = *fp;
    free(f->ids);
    free(f->recs);
    free(f->found);
    free(f->absent);
    free(f);
    *fp = NULL;
}
