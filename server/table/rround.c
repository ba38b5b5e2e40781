/*
 * rround.c - a sparse table's held BSP rounds; see rround.h. A held push is
 * one allocation (ids, gradients, versions); a merge walks the pushes of a
 * clock in (rank, arrival) order and sums repeated rows through an
 * open-addressing index of the merged ids.
 */
#include "rround.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

void zp_rround_init(zp_rround *rr)
{
    memset(rr, 0, sizeof(*rr));
    rr->seed = zp_rng_random64();
}

void zp_rround_fini(zp_rround *rr)
{
    zp_rround_clear(rr);
    free(rr->held);
    free(rr->ids);
    free(rr->g);
    free(rr->vers);
    free(rr->order);
    free(rr->slots);
    memset(rr, 0, sizeof(*rr));
}

static size_t push_bytes(size_t n, size_t dim, int vers)
{
    return n * (sizeof(uint64_t) + dim * sizeof(float) + (vers ? sizeof(uint32_t) : 0));
}

int zp_rround_hold(zp_rround *rr, uint32_t rank, int64_t clock, const uint64_t *ids, size_t n,
                   const float *g, size_t dim, const uint32_t *vers)
{
    if (rr->nheld == rr->cap) {
        size_t cap = rr->cap ? 2 * rr->cap : 8;
        zp_rround_push *held = realloc(rr->held, cap * sizeof(*held));
        if (!held)
            return ZEPS_ENOMEM;
        rr->held = held;
        rr->cap = cap;
    }
    size_t bytes = push_bytes(n, dim, vers != NULL);
    unsigned char *mem = malloc(bytes ? bytes : 1);
    if (!mem)
        return ZEPS_ENOMEM;
    zp_rround_push *p = &rr->held[rr->nheld++];
    p->clock = clock;
    p->rank = rank;
    p->n = n;
    p->ids = (uint64_t *)mem;
    p->g = (float *)(mem + n * sizeof(uint64_t));
    p->vers = vers ? (uint32_t *)(p->g + n * dim) : NULL;
    p->held_bytes = bytes;
    memcpy(p->ids, ids, n * sizeof(uint64_t));
    memcpy(p->g, g, n * dim * sizeof(float));
    if (vers)
        memcpy(p->vers, vers, n * sizeof(uint32_t));
    rr->bytes += bytes;
    return 0;
}

/* order[0..k): the positions in held of clock's pushes, by (rank, arrival);
 * *rows: the ids they name, repeats counted; *all_vers: every one carried
 * versions. Returns k. */
static size_t pick(zp_rround *rr, int64_t clock, size_t *rows, int *all_vers)
{
    size_t k = 0;
    *rows = 0;
    *all_vers = 1;
    for (size_t i = 0; i < rr->nheld; i++) {
        const zp_rround_push *p = &rr->held[i];
        if (p->clock != clock)
            continue;
        /* insertion by rank after every earlier push of a rank <= p's: the
         * pushes of one rank keep their arrival order */
        size_t at = k++;
        while (at > 0 && rr->held[rr->order[at - 1]].rank > p->rank) {
            rr->order[at] = rr->order[at - 1];
            at--;
        }
        rr->order[at] = i;
        *rows += p->n;
        *all_vers &= p->vers != NULL;
    }
    return k;
}

/* Room to merge up to `rows` rows of dim floats. */
static int reserve(zp_rround *rr, size_t rows, size_t dim)
{
    size_t slots = 16;
    while (slots < 2 * rows)
        slots *= 2;
    if (slots > rr->nslots) {
        uint32_t *s = realloc(rr->slots, slots * sizeof(*s));
        if (!s)
            return ZEPS_ENOMEM;
        rr->slots = s;
        rr->nslots = slots;
    }
    if (rows > rr->mcap) {
        uint64_t *ids = realloc(rr->ids, rows * sizeof(*ids));
        if (ids)
            rr->ids = ids;
        float *g = realloc(rr->g, rows * dim * sizeof(*g));
        if (g)
            rr->g = g;
        uint32_t *v = realloc(rr->vers, rows * sizeof(*v));
        if (v)
            rr->vers = v;
        if (!ids || !g || !v)
            return ZEPS_ENOMEM;
        rr->mcap = rows;
        rr->mdim = dim;
    }
    memset(rr->slots, 0, rr->nslots * sizeof(*rr->slots));
    return 0;
}

/* Add row `id` of push p (its position j) to the merge. */
static void merge_row(zp_rround *rr, const zp_rround_push *p, size_t j, size_t dim)
{
    size_t mask = rr->nslots - 1;
    size_t at = (size_t)zp_sparse_hash_id(p->ids[j], rr->seed) & mask;
    const float *src = p->g + j * dim;
    for (;; at = (at + 1) & mask) {
        uint32_t s = rr->slots[at];
        if (s == 0)
            break;
        if (rr->ids[s - 1] == p->ids[j]) {
            float *acc = rr->g + (size_t)(s - 1) * dim;
            for (size_t d = 0; d < dim; d++)
                acc[d] += src[d];
            return;
        }
    }
    size_t m = rr->n++;
    rr->slots[at] = (uint32_t)(m + 1);
    rr->ids[m] = p->ids[j];
    memcpy(rr->g + m * dim, src, dim * sizeof(float));
    rr->vers[m] = p->vers ? p->vers[j] : 0;
}

/* Drop the held pushes `drop` says, keeping the others' order. */
static void drop_if(zp_rround *rr, int (*drop)(const zp_rround_push *, uint32_t, int64_t),
                    uint32_t rank, int64_t clock)
{
    size_t out = 0;
    for (size_t i = 0; i < rr->nheld; i++) {
        zp_rround_push *p = &rr->held[i];
        if (drop(p, rank, clock)) {
            rr->bytes -= p->held_bytes;
            free(p->ids);
            continue;
        }
        rr->held[out++] = *p;
    }
    rr->nheld = out;
}

static int of_clock(const zp_rround_push *p, uint32_t rank, int64_t clock)
{
    (void)rank;
    return p->clock == clock;
}

static int redone(const zp_rround_push *p, uint32_t rank, int64_t from)
{
    return p->rank == rank && p->clock >= from;
}

static int any(const zp_rround_push *p, uint32_t rank, int64_t clock)
{
    (void)p, (void)rank, (void)clock;
    return 1;
}

size_t zp_rround_merge(zp_rround *rr, int64_t clock, size_t dim)
{
    rr->n = 0;
    rr->nranks = 0;
    rr->vers_ok = 0;
    if (rr->nheld == 0)
        return 0;
    size_t *order = realloc(rr->order, rr->nheld * sizeof(*order));
    if (!order)
        return (size_t)-1;
    rr->order = order;
    size_t rows;
    int all_vers;
    size_t k = pick(rr, clock, &rows, &all_vers);
    if (k == 0)
        return 0;
    if (rows > UINT32_MAX - 1 || reserve(rr, rows, dim) != 0)
        return (size_t)-1;
    for (size_t i = 0; i < k; i++) {
        const zp_rround_push *p = &rr->held[rr->order[i]];
        if (i == 0 || p->rank != rr->held[rr->order[i - 1]].rank)
            rr->nranks++;
        for (size_t j = 0; j < p->n; j++)
            merge_row(rr, p, j, dim);
    }
    drop_if(rr, of_clock, 0, clock);
    rr->vers_ok = all_vers;
    return rr->n;
}

void zp_rround_forget(zp_rround *rr, uint32_t rank, int64_t from)
{
    drop_if(rr, redone, rank, from);
}

void zp_rround_clear(zp_rround *rr)
{
    drop_if(rr, any, 0, 0);
}

int zp_rround_holds_before(const zp_rround *rr, int64_t clock)
{
    for (size_t i = 0; i < rr->nheld; i++)
        if (rr->held[i].clock < clock)
            return 1;
    return 0;
}

uint64_t zp_rround_bytes(const zp_rround *rr)
{
    return rr->bytes + rr->mcap * (sizeof(uint64_t) + sizeof(uint32_t)) +
           (rr->mcap ? rr->mdim * rr->mcap * sizeof(float) : 0) + rr->nslots * sizeof(uint32_t);
}
