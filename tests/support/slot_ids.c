/*
 * slot_ids.c - ids by slot under the default map, and maps that give
 * their slots away: see slot_ids.h.
 */
#include "slot_ids.h"

#include <check.h>
#include <stdlib.h>

/* The default map of `shards` shards (the caller destroys it). */
static zp_slotmap *default_map(int shards)
{
    zp_slotmap *d = NULL;
    ck_assert_int_eq(zp_slotmap_new_default(&d, shards), 0);
    return d;
}

uint64_t zt_slot_id_in(int shards, uint32_t slot, uint64_t after)
{
    zp_slotmap *d = default_map(shards);
    ck_assert_uint_lt(slot, zp_slotmap_slots(d));
    uint64_t id = after + 1;
    while (zp_slotmap_slot_of(d, id) != slot)
        id++;
    zp_slotmap_destroy(&d);
    return id;
}

uint64_t zt_slot_id_on(int shards, int k, uint32_t below, uint64_t after)
{
    zp_slotmap *d = default_map(shards);
    ck_assert(k >= 0 && k < shards && below > 0);
    uint64_t id = after + 1;
    while (zp_slotmap_slot_of(d, id) >= below || zp_slotmap_owner(d, id) != k)
        id++;
    zp_slotmap_destroy(&d);
    return id;
}

zp_slotmap *zt_slot_map_giving(const zp_slotmap *from, const uint64_t *ids, size_t n, int to)
{
    uint8_t *which = calloc(zp_slotmap_slots(from), 1);
    ck_assert_ptr_nonnull(which);
    for (size_t i = 0; i < n; i++)
        which[zp_slotmap_slot_of(from, ids[i])] = 1;
    zp_slotmap *next = NULL;
    ck_assert_int_eq(zp_slotmap_moved(from, which, to, &next), 0);
    free(which);
    return next;
}
