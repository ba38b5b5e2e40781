/*
 * alloc.c - see alloc.h.
 */
#include "alloc.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "zeps: out of memory allocating %zu bytes\n", n);
    abort();
}

void *zp_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *zp_alloc_zeroed(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size);
    return p;
}

void *zp_alloc_resize(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *zp_alloc_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = zp_alloc(n);
    memcpy(p, s, n);
    return p;
}

void zp_alloc_tune(void)
{
    /* 1 GiB: buffers up to that size are reused from the heap. Trimming is
     * raised with it so freed message buffers are not handed back at once. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    /* One arena: ZeroMQ's I/O thread would otherwise get its own, whose
     * heaps hold at most 64 MB and are unmapped as soon as they empty, so
     * every large receive faulted in fresh pages (measured: 311k faults for
     * 105 pairs of 32 MB push+pull; 24.6k with one arena). */
    mallopt(M_ARENA_MAX, 1);
}
