/*
 * heap.h - the heap in use, for the tests that check that something is
 * freed (test_move, test_inject, test_rows): glibc's count of the bytes
 * allocated, mapped blocks included (a large table's data is one).
 * Header-only, like check_main.h: it needs no library of its own.
 */
#ifndef ZT_HEAP_H
#define ZT_HEAP_H

#include <malloc.h>
#include <stddef.h>

/* Heap bytes in use now: the arena's and the mmapped blocks'. */
static inline size_t zt_heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

#endif
