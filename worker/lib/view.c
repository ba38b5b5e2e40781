/*
 * view.c - libzeps: zero-copy pulls (zeps_pull_view_start, zeps_wait_view).
 *
 * A view pull keeps each shard's reply frame instead of copying it; when
 * the request is waited for, the frames move from the request into a
 * zeps_view, which the caller owns and releases with zeps_view_release. The
 * engine (req.c) keeps the frames; this file only hands them over.
 */
#include <stdlib.h>

#include <zmq.h>

#include "alloc.h"
#include "client.h"
#include "req.h"
#include "zeps.h"

struct zeps_view {
    int nparts;
    uint64_t *offset, *count;
    zmq_msg_t *frames;
};

/* On success the caller owns *out (zeps_view_release); the request is
 * consumed either way. */
int zeps_wait_view(zeps_req **rp, zeps_view **out)
{
    if (!rp || !*rp || !out)
        return ZEPS_EINVAL;
    zp_req *r = *rp;
    *rp = NULL;
    int err = zp_req_finish(r);
    if (err == 0 && !r->view)
        err = zp_fail(r->c, ZEPS_EINVAL, "zeps_wait_view on a request that is not a view pull");
    if (err != 0) {
        zp_req_free(r);
        return err;
    }
    zeps_view *v = zp_alloc_zeroed(1, sizeof(*v));
    v->nparts = r->nsub;
    v->offset = zp_alloc_zeroed((size_t)r->nsub, sizeof(uint64_t));
    v->count = zp_alloc_zeroed((size_t)r->nsub, sizeof(uint64_t));
    v->frames = zp_alloc_zeroed((size_t)r->nsub, sizeof(zmq_msg_t));
    for (int i = 0; i < r->nsub; i++) { /* subs are in shard order = element order */
        zp_req_sub *s = &r->subs[i];
        v->offset[i] = s->offset;
        v->count[i] = s->count;
        zmq_msg_init(&v->frames[i]);
        zmq_msg_move(&v->frames[i], &s->frame);
        zmq_msg_close(&s->frame);
        s->has_frame = 0;
    }
    zp_req_free(r);
    *out = v;
    return 0;
}

int zeps_view_parts(const zeps_view *v)
{
    return v ? v->nparts : 0;
}

const float *zeps_view_part(const zeps_view *v, int i, uint64_t *offset, uint64_t *count)
{
    if (!v || i < 0 || i >= v->nparts)
        return NULL;
    if (offset)
        *offset = v->offset[i];
    if (count)
        *count = v->count[i];
    return zmq_msg_data(&v->frames[i]);
}

void zeps_view_release(zeps_view **vp)
{
    zeps_view *v = vp ? *vp : NULL;
    if (!v)
        return;
    for (int i = 0; i < v->nparts; i++)
        zmq_msg_close(&v->frames[i]);
    free(v->frames);
    free(v->offset);
    free(v->count);
    free(v);
    *vp = NULL;
}
