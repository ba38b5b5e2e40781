/*
 * seen.c - the ids a cold tier has been given (seen.h): blocked Bloom
 * filters of 512-bit blocks, SEEN_K bits per id in the block its hash
 * picks, so an id costs one cache line per filter to add or look up.
 */
#include "seen.h"

#include <stdlib.h>

#include "alloc.h"
#include "rng.h"

#define SEEN_K      6
#define BITS_PER_ID 12
#define FIRST_IDS   ((uint64_t)1 << 16)
#define MAX_FILTERS 40
#define WORDS       8 /* a block: 512 bits */
#define SEEN_SEED   0x7365656e69647321ull

typedef struct filter {
    uint64_t *w; /* nblocks * WORDS words */
    uint64_t nblocks, cap, n;
} filter;

struct zp_seen {
    filter f[MAX_FILTERS];
    int nf;
};

void zp_seen_new(zp_seen **out)
{
    *out = zp_alloc_zeroed(1, sizeof(zp_seen));
}

void zp_seen_free(zp_seen **sp)
{
    if (sp == NULL || *sp == NULL)
        return;
    for (int i = 0; i < (*sp)->nf; i++)
        free((*sp)->f[i].w);
    free(*sp);
    *sp = NULL;
}

/* The block of f id's hash h picks, and the SEEN_K bits in it (9 bits of
 * a second hash each). */
static const uint64_t *block_of(const filter *f, uint64_t h)
{
    return f->w + (uint64_t)(((unsigned __int128)h * f->nblocks) >> 64) * WORDS;
}

static void add_filter(zp_seen *s)
{
    uint64_t cap = s->nf == 0 ? FIRST_IDS : 2 * s->f[s->nf - 1].cap;
    filter *f = &s->f[s->nf++];
    f->cap = cap;
    f->nblocks = (cap * BITS_PER_ID + 511) / 512;
    f->w = zp_alloc_zeroed(f->nblocks * WORDS, sizeof(uint64_t));
    f->n = 0;
}

void zp_seen_add(zp_seen *s, uint64_t id)
{
    /* an id given again (a row demoted, promoted, demoted again) is not
     * counted again: the filters grow with the ids, not the demotions */
    if (zp_seen_may(s, id))
        return;
    if (s->nf == 0 || (s->f[s->nf - 1].n >= s->f[s->nf - 1].cap && s->nf < MAX_FILTERS))
        add_filter(s);
    filter *f = &s->f[s->nf - 1];
    uint64_t h = zp_rng_mix64(id ^ SEEN_SEED), g = zp_rng_mix64(h);
    uint64_t *b = (uint64_t *)block_of(f, h);
    for (int k = 0; k < SEEN_K; k++, g >>= 9)
        b[(g & 511) >> 6] |= (uint64_t)1 << (g & 63);
    f->n++;
}

bool zp_seen_may(const zp_seen *s, uint64_t id)
{
    uint64_t h = zp_rng_mix64(id ^ SEEN_SEED), g0 = zp_rng_mix64(h);
    /* the blocks of every filter asked at once: their cache misses
     * overlap instead of following one another */
    for (int i = 0; i < s->nf; i++)
        __builtin_prefetch(block_of(&s->f[i], h));
    for (int i = s->nf - 1; i >= 0; i--) {
        const uint64_t *b = block_of(&s->f[i], h);
        uint64_t g = g0;
        int k = 0;
        for (; k < SEEN_K && (b[(g & 511) >> 6] >> (g & 63) & 1); k++, g >>= 9)
            ;
        if (k == SEEN_K)
            return true;
    }
    return false;
}

uint64_t zp_seen_bytes(const zp_seen *s)
{
    uint64_t b = sizeof(*s);
    for (int i = 0; i < s->nf; i++)
        b += s->f[i].nblocks * WORDS * sizeof(uint64_t);
    return b;
}
