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
    free(rr->kept);
    free(rr->given);
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
    if (n) { /* n 0: a backup's push without rows (ids NULL) */
        memcpy(p->ids, ids, n * sizeof(uint64_t));
        memcpy(p->g, g, n * dim * sizeof(float));
    }
    if (vers && n)
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

/* The given merge of `clock`, or -1. */
static ptrdiff_t given_of(const zp_rround *rr, int64_t clock)
{
    for (size_t i = 0; i < rr->ngiven; i++)
        if (rr->given[i].clock == clock)
            return (ptrdiff_t)i;
    return -1;
}

/* Take given merge `gi` as the merge of its clock, whose k held pushes
 * (order[0..k)) go. */
static size_t take_given(zp_rround *rr, size_t gi, size_t k, size_t dim)
{
    zp_rround_done *d = &rr->given[gi];
    if (reserve(rr, d->n, dim) != 0)
        return (size_t)-1;
    memcpy(rr->ids, d->ids, d->n * sizeof(uint64_t));
    memcpy(rr->g, d->g, d->n * dim * sizeof(float));
    if (d->vers)
        memcpy(rr->vers, d->vers, d->n * sizeof(uint32_t));
    rr->n = d->n;
    rr->vers_ok = d->vers_ok;
    for (size_t i = 0; i < k; i++)
        if (i == 0 || rr->held[rr->order[i]].rank != rr->held[rr->order[i - 1]].rank)
            rr->nranks++;
    drop_if(rr, of_clock, 0, d->clock);
    free(d->ids);
    rr->given[gi] = rr->given[--rr->ngiven];
    return rr->n;
}

size_t zp_rround_merge(zp_rround *rr, int64_t clock, size_t dim)
{
    rr->n = 0;
    rr->nranks = 0;
    rr->vers_ok = 0;
    ptrdiff_t gi = given_of(rr, clock);
    if (rr->nheld == 0 && gi < 0)
        return 0;
    size_t *order = realloc(rr->order, (rr->nheld ? rr->nheld : 1) * sizeof(*order));
    if (!order)
        return (size_t)-1;
    rr->order = order;
    size_t rows;
    int all_vers;
    size_t k = pick(rr, clock, &rows, &all_vers);
    if (gi >= 0)
        return take_given(rr, (size_t)gi, k, dim);
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
    zp_rround_kept_clear(rr);
    zp_rround_given_clear(rr);
}

/* Push p's rows that `choose` chooses (or, with `want` 0, the others) into
 * a new push of `into`, in p's order; 0, or ZEPS_ENOMEM. */
static int part_hold(zp_rround *into, const zp_rround_push *p, int (*choose)(uint64_t, void *),
                     void *arg, int want, size_t m, size_t dim)
{
    uint64_t *ids = malloc((m ? m : 1) * sizeof(uint64_t));
    float *g = malloc((m ? m * dim : 1) * sizeof(float));
    uint32_t *vers = p->vers ? malloc((m ? m : 1) * sizeof(uint32_t)) : NULL;
    int rc = ZEPS_ENOMEM;
    if (ids && g && (vers || !p->vers)) {
        size_t k = 0;
        for (size_t j = 0; j < p->n; j++) {
            if ((choose(p->ids[j], arg) != 0) != want)
                continue;
            ids[k] = p->ids[j];
            memcpy(g + k * dim, p->g + j * dim, dim * sizeof(float));
            if (vers)
                vers[k] = p->vers[j];
            k++;
        }
        rc = zp_rround_hold(into, p->rank, p->clock, ids, m, g, dim, vers);
    }
    free(ids);
    free(g);
    free(vers);
    return rc;
}

size_t zp_rround_split(zp_rround *rr, zp_rround *into, int (*choose)(uint64_t id, void *arg),
                       void *arg, size_t dim)
{
    size_t moved = 0, out = 0;
    for (size_t i = 0; i < rr->nheld; i++) {
        zp_rround_push p = rr->held[i];
        size_t m = 0, had = p.n;
        for (size_t j = 0; j < p.n; j++)
            m += choose(p.ids[j], arg) != 0;
        if (m > 0 && part_hold(into, &p, choose, arg, 1, m, dim) != 0)
            m = 0;              /* out of memory: this push stays whole */
        if (m > 0 && m < p.n) { /* the rest stays, in its place */
            zp_rround tmp;
            memset(&tmp, 0, sizeof(tmp));
            if (part_hold(&tmp, &p, choose, arg, 0, p.n - m, dim) == 0) {
                rr->bytes -= p.held_bytes;
                free(p.ids);
                p = tmp.held[0];
                rr->bytes += p.held_bytes;
            } else { /* the part went, the push stays whole: take the part back */
                into->bytes -= into->held[--into->nheld].held_bytes;
                free(into->held[into->nheld].ids);
                m = 0;
            }
            free(tmp.held);
        } else if (m > 0) { /* all of it went */
            rr->bytes -= p.held_bytes;
            free(p.ids);
        }
        moved += m;
        if (m < had || had == 0) /* some rows stay (p is what is left of them) */
            rr->held[out++] = p;
    }
    rr->nheld = out;
    return moved;
}

int64_t zp_rround_first_clock(const zp_rround *rr)
{
    int64_t c = -1;
    for (size_t i = 0; i < rr->nheld; i++)
        if (c < 0 || rr->held[i].clock < c)
            c = rr->held[i].clock;
    return c;
}

int zp_rround_holds_before(const zp_rround *rr, int64_t clock)
{
    for (size_t i = 0; i < rr->nheld; i++)
        if (rr->held[i].clock < clock)
            return 1;
    for (size_t i = 0; i < rr->ngiven; i++)
        if (rr->given[i].clock < clock)
            return 1;
    return 0;
}

/* A new merge at the end of list *l (*n, *cap) holding a copy of ids, g
 * and vers (or none); 0, or ZEPS_ENOMEM. */
static int done_add(zp_rround_done **l, size_t *n, size_t *cap, int64_t clock, const uint64_t *ids,
                    size_t rows, const float *g, size_t dim, const uint32_t *vers)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        zp_rround_done *m = realloc(*l, c * sizeof(*m));
        if (!m)
            return ZEPS_ENOMEM;
        *l = m;
        *cap = c;
    }
    unsigned char *mem = malloc(push_bytes(rows, dim, vers != NULL) + 1);
    if (!mem)
        return ZEPS_ENOMEM;
    zp_rround_done *d = &(*l)[(*n)++];
    d->clock = clock;
    d->n = rows;
    d->vers_ok = vers != NULL;
    d->ids = (uint64_t *)mem;
    d->g = (float *)(mem + rows * sizeof(uint64_t));
    d->vers = vers ? (uint32_t *)(d->g + rows * dim) : NULL;
    memcpy(d->ids, ids, rows * sizeof(uint64_t));
    memcpy(d->g, g, rows * dim * sizeof(float));
    if (vers)
        memcpy(d->vers, vers, rows * sizeof(uint32_t));
    return 0;
}

int zp_rround_keep(zp_rround *rr, int64_t clock, size_t dim)
{
    return done_add(&rr->kept, &rr->nkept, &rr->capkept, clock, rr->ids, rr->n, rr->g, dim,
                    rr->vers_ok ? rr->vers : NULL);
}

const zp_rround_done *zp_rround_kept(const zp_rround *rr, size_t *n)
{
    *n = rr->nkept;
    return rr->kept;
}

void zp_rround_kept_clear(zp_rround *rr)
{
    for (size_t i = 0; i < rr->nkept; i++)
        free(rr->kept[i].ids);
    rr->nkept = 0;
}

int zp_rround_give(zp_rround *rr, int64_t clock, const uint64_t *ids, size_t n, const float *g,
                   size_t dim, const uint32_t *vers)
{
    return done_add(&rr->given, &rr->ngiven, &rr->capgiven, clock, ids, n, g, dim, vers);
}

size_t zp_rround_given_clear(zp_rround *rr)
{
    size_t n = rr->ngiven;
    for (size_t i = 0; i < n; i++)
        free(rr->given[i].ids);
    rr->ngiven = 0;
    return n;
}

uint64_t zp_rround_bytes(const zp_rround *rr)
{
    return rr->bytes + rr->mcap * (sizeof(uint64_t) + sizeof(uint32_t)) +
           (rr->mcap ? rr->mdim * rr->mcap * sizeof(float) : 0) + rr->nslots * sizeof(uint32_t);
}
