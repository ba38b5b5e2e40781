/*
 * alloc.c - see alloc.h.
 */
#include "alloc.h"

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

void *zp_alloc_grow(void *p, size_t had, size_t n, size_t size)
{
    char *q = zp_alloc_resize(p, n * size);
    memset(q + had * size, 0, (n - had) * size);
    return q;
}

char *zp_alloc_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = zp_alloc(n);
    memcpy(p, s, n);
    return p;
}

/* The mapping's length: n rounded up to whole huge pages. */
static size_t huge_len(size_t n)
{
    return (n + ZP_ALLOC_HUGE_MIN - 1) & ~(ZP_ALLOC_HUGE_MIN - 1);
}

void *zp_alloc_huge(size_t n)
{
    if (n < ZP_ALLOC_HUGE_MIN)
        return zp_alloc(n);
    size_t len = huge_len(n), span = len + ZP_ALLOC_HUGE_MIN;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        oom(n);
    /* keep the 2 MiB-aligned len bytes inside the span, unmap the rest */
    uintptr_t a = ((uintptr_t)m + ZP_ALLOC_HUGE_MIN - 1) & ~(uintptr_t)(ZP_ALLOC_HUGE_MIN - 1);
    char *p = (char *)a;
    if (p > m)
        munmap(m, (size_t)(p - m));
    if (p + len < m + span)
        munmap(p + len, (size_t)(m + span - (p + len)));
    (void)madvise(p, len, MADV_HUGEPAGE); /* advice: 4 KiB pages still work */
    return p;
}

void zp_alloc_huge_free(void *p, size_t n)
{
    if (!p)
        return;
    if (n < ZP_ALLOC_HUGE_MIN)
        free(p);
    else
        munmap(p, huge_len(n));
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
