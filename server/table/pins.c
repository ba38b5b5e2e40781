/*
 * pins.c - what a sparse table's store keeps for the pulls that waited for
 * their cold rows (op/sparse_ops.c, tier/fetch.c): the rows made hot for
 * them, pinned until touched so that eviction passes them over; and the ids
 * the read found in neither tier, so that their first touch makes the row
 * without reading the cold tier again; and the hot rows whose out-of-date
 * record the cold tier still holds (a promotion does not delete it).
 * Private to the store (sparse_int.h).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "rng.h"
#include "sparse_int.h"

static size_t hint_slot(const zp_sparse *t, uint64_t id)
{
    return (size_t)zp_rng_mix64(id) & (t->hint_cap - 1);
}

void zp_pins_hint(zp_sparse *t, const uint64_t *ids, size_t n)
{
    if (t->nhint > 0) {
        memset(t->hint_state, 0, t->hint_cap);
        t->nhint = 0;
    }
    if (n == 0)
        return;
    if (2 * n > t->hint_cap) {
        size_t cap = 1024;
        while (cap < 2 * n)
            cap <<= 1;
        free(t->hint);
        free(t->hint_state);
        t->hint = zp_alloc(cap * sizeof(uint64_t));
        t->hint_state = zp_alloc_zeroed(cap, 1);
        t->hint_cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k = hint_slot(t, ids[i]);
        while (t->hint_state[k] == 1 && t->hint[k] != ids[i])
            k = (k + 1) & (t->hint_cap - 1);
        t->hint[k] = ids[i];
        t->hint_state[k] = 1;
    }
    t->nhint = n;
}

bool zp_pins_take_hint(zp_sparse *t, uint64_t id)
{
    if (t->nhint == 0)
        return false;
    for (size_t k = hint_slot(t, id); t->hint_state[k] != 0; k = (k + 1) & (t->hint_cap - 1))
        if (t->hint[k] == id) {
            bool held = t->hint_state[k] == 1;
            t->hint_state[k] = 2;
            return held;
        }
    return false;
}

/* Bit r of a bitmap (*words long, grown to cover r) set; whether it was. */
static bool bit_set(uint64_t **map, size_t *words, uint32_t r)
{
    size_t need = (size_t)(r >> 6) + 1;
    if (need > *words) {
        size_t nw = need < 64 ? 64 : 2 * need;
        *map = zp_alloc_resize(*map, nw * sizeof(uint64_t));
        memset(*map + *words, 0, (nw - *words) * sizeof(uint64_t));
        *words = nw;
    }
    bool was = (*map)[r >> 6] >> (r & 63) & 1;
    (*map)[r >> 6] |= (uint64_t)1 << (r & 63);
    return was;
}

void zp_pins_copy_kept(zp_sparse *t, uint32_t r)
{
    bit_set(&t->copies, &t->copy_words, r);
}

void zp_pins_pin(zp_sparse *t, uint32_t r)
{
    if (!bit_set(&t->pins, &t->pin_words, r))
        t->npinned++;
}
