/*
 * arena.c - see arena.h.
 */
#include "arena.h"

#include <stdlib.h>

#include "alloc.h"

void *zp_arena_take(zp_arena *a, size_t n)
{
    n = (n + 63) & ~(size_t)63;
    if (a->nregions == 0 || a->used + n > a->lens[a->nregions - 1]) {
        if (a->nregions == a->cap) {
            a->cap = a->cap ? 2 * a->cap : 4;
            a->regions = zp_alloc_resize(a->regions, a->cap * sizeof(*a->regions));
            a->lens = zp_alloc_resize(a->lens, a->cap * sizeof(*a->lens));
        }
        size_t len = n > ZP_ARENA_REGION ? n : ZP_ARENA_REGION;
        a->regions[a->nregions] = zp_alloc_huge(len); /* len >= ZP_ALLOC_HUGE_MIN: mapped */
        a->lens[a->nregions++] = len;
        a->used = 0;
    }
    void *p = a->regions[a->nregions - 1] + a->used;
    a->used += n;
    return p;
}

void zp_arena_fini(zp_arena *a)
{
    for (size_t i = 0; i < a->nregions; i++)
        zp_alloc_huge_free(a->regions[i], a->lens[i]);
    free(a->regions);
    free(a->lens);
    *a = (zp_arena){0};
}
