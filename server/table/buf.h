/*
 * buf.h - a reference-counted float buffer (buf.c): a dense slice's
 * parameters, shared without copying by the replies in flight (copy-on-
 * write: an update with other references outstanding writes a copy).
 */
#ifndef ZP_BUF_H
#define ZP_BUF_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct zp_buf {
    atomic_int refs;
    size_t n;     /* floats */
    float data[]; /* 64-byte aligned start not required: f32 needs 4 */
} zp_buf;

/* Drop one reference; frees the buffer at zero. Callable from any thread
 * (ZeroMQ calls it from its I/O thread); signature fits zmq_free_fn. */
void zp_buf_release(void *data, void *hint);

/* Take one more reference on b (released with zp_buf_release); returns b. */
zp_buf *zp_buf_ref(zp_buf *b);

/* A buffer of n floats holding one reference (the caller's), or NULL. */
zp_buf *zp_buf_new(size_t n);

#endif
