/*
 * evict.c - which rows a sparse table's store drops, and when.
 *
 * TTL: zp_evict_expire scans all records at most every max(1, ttl/4)
 * clocks, so a row untouched for ttl clocks is gone at most
 * max(1, ttl/4) - 1 clocks later. Capacity and memory budget: before a new
 * row would pass either, the least recently (lru: smallest last_clock, then
 * smallest freq) or least frequently (lfu: smallest freq, then oldest clock)
 * touched of SAMPLE_SIZE randomly drawn rows is evicted (the Redis
 * approximation; exact order would cost a list or heap per row). The budget
 * is checked against the bytes the table would hold after the insert (a new
 * chunk, a doubled index), so the held bytes (c.bytes: chunks, index,
 * sketch; not the push's marks, which are scratch) never pass it.
 *
 * With a cold tier (tier/tier.h) a row evicted under capacity or budget is
 * written there first (demoted) and leaves the hot tier only once written
 * (into the tier's buffer of unwritten rows: tier.h); the TTL still drops
 * rows for good (a cold row's TTL is checked when it is next touched,
 * sparse.c, against the clock of the last scan here; a hot row's
 * out-of-date copy in the tier is deleted with it).
 *
 * Everything here works on the store's records and index (sparse_int.h,
 * rowindex.h); an evicted record goes on the store's free list.
 */
#include "evict.h"

#include <string.h>

#include "rowindex.h"
#include "sparse_int.h"
#include "tier.h"
#include "alloc.h"
#include "errors.h"
#include "rng.h"

#define SAMPLE_SIZE 16

int zp_evict_from_name(const char *name)
{
    if (name == NULL || *name == '\0' || strcmp(name, "lru") == 0)
        return ZP_EVICT_LRU;
    if (strcmp(name, "lfu") == 0)
        return ZP_EVICT_LFU;
    return -1;
}

const char *zp_evict_name(zp_evict_policy p)
{
    return p == ZP_EVICT_LFU ? "lfu" : p == ZP_EVICT_LRU ? "lru" : "?";
}

void zp_evict_init(zp_sparse *t)
{
    zp_rng_seed(&t->rng_sample, t->seed, 0x65766963ull, 1);
}

/* Drop live row r: out of the index, its record onto the free list. */
static void drop(zp_sparse *t, uint32_t r)
{
    rowhdr *h = zp_sparse_rec_at(t, r);
    int64_t at = zp_rowindex_find(t, h->id, zp_rowindex_hash(t, h->id));
    zp_rowindex_delete(t, (uint64_t)at);
    zp_sparse_unpin(t, r);
    zp_sparse_copy_gone(t, r);
    h->last_clock = CLOCK_FREE;
    h->freq = t->free_head;
    t->free_head = r;
    t->c.rows--;
}

/* Is record ra a worse eviction candidate than rb (i.e. evict it
 * first)? A pinned row (made hot for a pull waiting for it) is the last
 * choice; then by the policy. */
static bool colder(const zp_sparse *t, uint32_t ra, uint32_t rb)
{
    bool pa = zp_sparse_pinned(t, ra), pb = zp_sparse_pinned(t, rb);
    if (pa != pb)
        return pb;
    const rowhdr *a = zp_sparse_rec_at(t, ra), *b = zp_sparse_rec_at(t, rb);
    if (t->evict == ZP_EVICT_LFU)
        return a->freq != b->freq ? a->freq < b->freq : a->last_clock < b->last_clock;
    return a->last_clock != b->last_clock ? a->last_clock < b->last_clock : a->freq < b->freq;
}

/* Evict the coldest of SAMPLE_SIZE random live rows. false if no row. */
static bool evict_one(zp_sparse *t)
{
    uint32_t best = ROW_NONE;
    int found = 0;

    if (t->c.rows == 0)
        return false;
    /* Random record numbers, skipping free records; bounded tries, then a
     * scan, so a table with many free records still finds a victim. */
    for (int tries = 0; tries < 8 * SAMPLE_SIZE && found < SAMPLE_SIZE; tries++) {
        uint32_t r = (uint32_t)(zp_rng_next(&t->rng_sample) % t->nalloc);
        rowhdr *h = zp_sparse_rec_at(t, r);
        if (!zp_sparse_rec_live(h))
            continue;
        found++;
        if (best == ROW_NONE || colder(t, r, best))
            best = r;
    }
    if (best == ROW_NONE) {
        uint32_t start = (uint32_t)(zp_rng_next(&t->rng_sample) % t->nalloc);
        for (uint32_t k = 0; k < t->nalloc && best == ROW_NONE; k++) {
            uint32_t r = (start + k) % t->nalloc;
            if (zp_sparse_rec_live(zp_sparse_rec_at(t, r)))
                best = r;
        }
    }
    if (t->cold != NULL) { /* demoted, never dropped: a row not written stays */
        rowhdr *h = zp_sparse_rec_at(t, best);
        if (zp_tier_demote(t->cold, h->id, h) != 0)
            return false;
        drop(t, best);
        return true;
    }
    drop(t, best);
    t->c.evicted_capacity++;
    return true;
}

/* The bytes held after adding one row now. */
static uint64_t bytes_after_insert(const zp_sparse *t)
{
    uint64_t b = t->c.bytes;
    if (zp_sparse_need_chunk(t))
        b += t->rec << t->chunk_log2;
    if (zp_rowindex_needs_grow(t))
        b += t->icap * sizeof(slot);
    return b;
}

bool zp_evict_make_room(zp_sparse *t)
{
    while ((t->capacity != 0 && t->c.rows >= t->capacity) ||
           (t->budget != 0 && bytes_after_insert(t) > t->budget) || t->c.rows >= MAX_ROWS) {
        if (!evict_one(t))
            return false;
    }
    return true;
}

size_t zp_evict_expire(zp_sparse *t, int64_t clock)
{
    size_t n = 0;

    if (t->ttl == 0 || (t->scanned && clock < t->next_scan))
        return 0;
    uint64_t period = t->ttl / 4 > 1 ? t->ttl / 4 : 1;
    t->scanned = true;
    t->last_scan = clock;
    t->next_scan = clock > INT64_MAX - (int64_t)period ? INT64_MAX : clock + (int64_t)period;
    for (uint32_t r = 0; r < t->nalloc; r++) {
        rowhdr *hd = zp_sparse_rec_at(t, r);
        /* clock - last_clock in u64: a row touched "in the future" (clock
         * went back, e.g. a restore) is not old. */
        if (zp_sparse_rec_live(hd) && clock >= hd->last_clock &&
            (uint64_t)clock - (uint64_t)hd->last_clock >= t->ttl) {
            if (t->cold != NULL && zp_sparse_has_copy(t, r))
                zp_tier_forget(t->cold, hd->id, false); /* a failure stops the tier */
            drop(t, r);
            n++;
        }
    }
    t->c.evicted_ttl += n;
    return n;
}

size_t zp_evict_drop_where(zp_sparse *t, bool (*pred)(uint64_t id, void *arg), void *arg)
{
    size_t n = 0;
    for (uint32_t r = 0; r < t->nalloc; r++) {
        rowhdr *hd = zp_sparse_rec_at(t, r);
        if (zp_sparse_rec_live(hd) && pred(hd->id, arg)) {
            if (t->cold != NULL && zp_sparse_has_copy(t, r))
                zp_tier_forget(t->cold, hd->id, false);
            drop(t, r);
            n++;
        }
    }
    return n;
}
