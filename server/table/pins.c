/*
 * pins.c - what a sparse table's store keeps for the pulls that waited for
 * their cold rows (op/sparse_ops.c, tier/fetch.c): the rows made hot for
 * them, pinned until touched so that eviction passes them over; and the ids
 * the read found in neither tier, so that their first touch makes the row
 * without reading the cold tier again. Private to the store (sparse_int.h).
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

void zp_pins_pin(zp_sparse *t, uint32_t r)
{
    size_t words = (size_t)(r >> 6) + 1;
    if (words > t->pin_words) {
        size_t nw = words < 64 ? 64 : 2 * words;
        t->pins = zp_alloc_resize(t->pins, nw * sizeof(uint64_t));
        memset(t->pins + t->pin_words, 0, (nw - t->pin_words) * sizeof(uint64_t));
        t->pin_words = nw;
    }
    if (!zp_sparse_pinned(t, r)) {
        t->pins[r >> 6] |= (uint64_t)1 << (r & 63);
        t->npinned++;
    }
}
