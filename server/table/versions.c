/*
 * versions.c - the ring of kept versions of a dense slice (versions.h).
 */
#include "versions.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"

void zp_versions_init(zp_versions *v, uint32_t keep)
{
    memset(v, 0, sizeof(*v));
    v->cap = keep;
    v->buf = zp_alloc_zeroed(keep, sizeof(*v->buf));
    v->version = zp_alloc_zeroed(keep, sizeof(*v->version));
}

void zp_versions_clear(zp_versions *v)
{
    for (uint32_t i = 0; i < v->cap; i++)
        if (v->buf[i]) {
            zp_buf_release(v->buf[i]->data, v->buf[i]);
            v->buf[i] = NULL;
        }
    v->len = 0;
    v->head = 0;
}

void zp_versions_fini(zp_versions *v)
{
    if (v->cap)
        zp_versions_clear(v);
    free(v->buf);
    free(v->version);
    memset(v, 0, sizeof(*v));
}

void zp_versions_note(zp_versions *v, zp_buf *b, uint64_t version)
{
    uint32_t slot = v->len ? (v->head + 1) % v->cap : 0;
    if (v->buf[slot])
        zp_buf_release(v->buf[slot]->data, v->buf[slot]);
    v->buf[slot] = zp_buf_ref(b);
    v->version[slot] = version;
    v->head = slot;
    if (v->len < v->cap)
        v->len++;
}

/* The i-th newest kept entry (0 = newest). */
static uint32_t nth_newest(const zp_versions *v, uint32_t i)
{
    return (v->head + v->cap - i) % v->cap;
}

zp_buf *zp_versions_find(const zp_versions *v, uint64_t want, uint64_t *got)
{
    if (v->len == 0)
        return NULL;
    uint32_t slot = nth_newest(v, 0);
    for (uint32_t i = 0; i < v->len; i++) {
        slot = nth_newest(v, i);
        if (v->version[slot] <= want)
            break;
    }
    *got = v->version[slot];
    return v->buf[slot];
}

uint64_t zp_versions_oldest(const zp_versions *v)
{
    return v->len ? v->version[nth_newest(v, v->len - 1)] : 0;
}

uint64_t zp_versions_bytes(const zp_versions *v)
{
    uint64_t bytes = 0;
    for (uint32_t i = 1; i < v->len; i++) {
        const zp_buf *b = v->buf[nth_newest(v, i)];
        if (b != v->buf[v->head])
            bytes += b->n * sizeof(float);
    }
    return bytes;
}
