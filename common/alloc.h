/*
 * alloc.h - allocation that aborts on exhaustion, and the malloc tuning of
 * every zeps process.
 *
 * Out-of-memory policy (written down once): small and fixed-size allocations
 * go through zp_alloc & co., which abort with a message, since a daemon that
 * cannot allocate a few hundred bytes cannot do anything useful. Sizes that
 * come from the network or from a table declaration are checked against the
 * configured limits first and allocated with plain malloc, and failure is an
 * ENOMEM reply, not an abort.
 */
#ifndef ZP_ALLOC_H
#define ZP_ALLOC_H

#include <stddef.h>

/* malloc, calloc, realloc and strdup that never return NULL (a size of 0
 * allocates 1 byte). The caller owns the result and frees it with free(). */
void *zp_alloc(size_t n);
void *zp_alloc_zeroed(size_t n, size_t size);
void *zp_alloc_resize(void *p, size_t n);
char *zp_alloc_strdup(const char *s);

/* Array p of `had` elements of `size` bytes (NULL if had is 0) resized to
 * n >= had elements, those from had on zeroed: an array that grows by
 * index. The caller owns the result in p's stead (it may move); aborts
 * like zp_alloc. */
void *zp_alloc_grow(void *p, size_t had, size_t n, size_t size);

/* A large array read at random for a long time (a sparse table's record
 * chunks and its index). From ZP_ALLOC_HUGE_MIN bytes on it is its own
 * mapping, aligned to 2 MiB and advised to the kernel for transparent huge
 * pages (MADV_HUGEPAGE; the kernel may decline), so that ids spread over
 * tens of MB do not each miss the TLB; smaller arrays come from malloc.
 * The memory is not cleared. The caller owns it and gives it back with
 * zp_alloc_huge_free(p, n), n the size it asked for. Aborts like
 * zp_alloc. */
#define ZP_ALLOC_HUGE_MIN ((size_t)2 << 20)
void *zp_alloc_huge(size_t n);
void zp_alloc_huge_free(void *p, size_t n);

/* Keep large buffers on the heap instead of fresh mmaps: glibc maps every
 * allocation over 32 MB anew (and every heap of a secondary arena) and the
 * kernel faults it in page by page on every use, which halves the
 * throughput of large messages. Call once at start-up, before threads. */
void zp_alloc_tune(void);

#endif
