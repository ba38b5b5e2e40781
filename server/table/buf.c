/*
 * buf.c - the reference-counted parameter buffer of a dense slice (buf.h).
 * A pull reply hands its bytes to ZeroMQ with one reference; the table
 * holds another; DC-ASGD state may hold a third. The last release frees.
 */
#include "buf.h"

#include <stdlib.h>

void zp_buf_release(void *data, void *hint)
{
    zp_buf *b = hint;
    (void)data;
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

zp_buf *zp_buf_new(size_t n)
{
    zp_buf *b = malloc(sizeof(*b) + n * sizeof(float));
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->n = n;
    return b;
}

zp_buf *zp_buf_ref(zp_buf *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}
