/*
 * idset.c - the set of ids a live move must send (again): see idset.h.
 *
 * The hash is a 64-bit finalizer (splitmix64's): ids are often small
 * counters or already hashed, and a linear probe needs their low bits
 * mixed. Taking the set walks the table once and clears it, which costs
 * its capacity: a round takes it once, not per id.
 */
#include "idset.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void zp_idset_init(zp_idset *s)
{
    memset(s, 0, sizeof(*s));
}

void zp_idset_fini(zp_idset *s)
{
    free(s->keys);
    zp_idset_init(s);
}

/* Put key k (id + 1, not 0) into keys[0..cap) without a size check. */
static int place(uint64_t *keys, size_t cap, uint64_t k)
{
    size_t mask = cap - 1;
    for (size_t i = mix(k) & mask;; i = (i + 1) & mask) {
        if (keys[i] == k)
            return 0;
        if (keys[i] == 0) {
            keys[i] = k;
            return 1;
        }
    }
}

static void grow(zp_idset *s)
{
    size_t cap = s->cap ? 2 * s->cap : 64;
    uint64_t *keys = zp_alloc_zeroed(cap, sizeof(uint64_t));
    for (size_t i = 0; i < s->cap; i++)
        if (s->keys[i] != 0)
            place(keys, cap, s->keys[i]);
    free(s->keys);
    s->keys = keys;
    s->cap = cap;
}

void zp_idset_add(zp_idset *s, uint64_t id)
{
    if (id == UINT64_MAX) {
        s->n += !s->has_max;
        s->has_max = 1;
        return;
    }
    if (2 * (s->n + 1) > s->cap)
        grow(s);
    s->n += (size_t)place(s->keys, s->cap, id + 1);
}

int zp_idset_has(const zp_idset *s, uint64_t id)
{
    if (id == UINT64_MAX)
        return s->has_max;
    if (s->cap == 0)
        return 0;
    size_t mask = s->cap - 1;
    for (size_t i = mix(id + 1) & mask; s->keys[i] != 0; i = (i + 1) & mask)
        if (s->keys[i] == id + 1)
            return 1;
    return 0;
}

size_t zp_idset_size(const zp_idset *s)
{
    return s->n;
}

void zp_idset_take(zp_idset *s, uint64_t **ids, size_t *n)
{
    *n = s->n;
    *ids = NULL;
    if (s->n == 0)
        return;
    uint64_t *out = zp_alloc(s->n * sizeof(uint64_t));
    size_t k = 0;
    for (size_t i = 0; i < s->cap; i++)
        if (s->keys[i] != 0)
            out[k++] = s->keys[i] - 1;
    if (s->has_max)
        out[k++] = UINT64_MAX;
    if (s->cap)
        memset(s->keys, 0, s->cap * sizeof(uint64_t));
    s->n = 0;
    s->has_max = 0;
    *ids = out;
}
