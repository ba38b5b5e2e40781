/*
 * arena.h - large arrays carved one after another out of 2 MiB-aligned
 * mappings advised for transparent huge pages (zp_alloc_huge).
 *
 * For memory that grows in pieces, lives until the end and is read at
 * random (a sparse table's record chunks): the pieces sit back to back, so
 * the only huge page partly used is the last one touched, and lookups
 * spread over tens of MB do not each miss the TLB as with 4 KiB pages. The
 * kernel may decline the advice; the memory then works as before.
 */
#ifndef ZP_ARENA_H
#define ZP_ARENA_H

#include <stddef.h>

#define ZP_ARENA_REGION ((size_t)256 << 20) /* one mapping (zp_alloc_huge), virtual until touched */

typedef struct zp_arena {
    char **regions;     /* zp_alloc_huge mappings of lens[i] bytes */
    size_t *lens;
    size_t nregions, cap;
    size_t used;        /* bytes handed out of the last region */
} zp_arena;

/* n bytes, not cleared, 64-byte aligned, valid until zp_arena_fini. The
 * arena owns them. Aborts when the memory cannot be mapped (as zp_alloc). */
void *zp_arena_take(zp_arena *a, size_t n);

/* Unmap everything taken; the arena is empty (all zero) again. */
void zp_arena_fini(zp_arena *a);

#endif
