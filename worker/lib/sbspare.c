/*
 * sbspare.c - libzeps: the arrays of the last sparse batch freed, kept for
 * the next zeps_sbatch_new of the same client. The holder is shared by the client and its live
 * batches (refs counts them) and freed by the last of them, so a batch may
 * still be freed after zeps_client_destroy (its arrays are then freed).
 * Building a batch per request then touches no fresh pages: glibc would
 * otherwise hand arrays this large back to the kernel at free and fault
 * them in again.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "sbatch.h"

struct zp_sbspare {
    unsigned refs;
    int open;          /* the client is alive: a freed batch is kept */
    zeps_sbatch *kept; /* arrays only: no client, no references */
};

/* A kept batch holds at most this much; a larger one is freed. */
#define SPARE_MAX_BYTES ((size_t)64 << 20)

static void body_free(zeps_sbatch *b)
{
    if (!b)
        return;
    free(b->pos_u);
    free(b->pos_fa);
    free(b->fa_of);
    free(b->ukeys);
    free(b->sbegin);
    free(b->pbegin);
    free(b->plist);
    free(b->uversions);
    free(b->push);
    free(b->boff);
    free(b->enc);
    free(b->eoff);
    free(b->elen);
    free(b);
}

static size_t body_bytes(const zeps_sbatch *b)
{
    size_t per = sizeof(uint32_t) * 5 + sizeof(uint64_t) + sizeof(size_t);
    return b->ncap * per + b->push_cap + b->enc_cap;
}

zeps_sbatch *zp_sbspare_take(zeps_client *c, size_t n)
{
    zp_sbspare *sp = c->sbspare;
    if (!sp) {
        sp = c->sbspare = zp_alloc_zeroed(1, sizeof(*sp));
        sp->refs = 1; /* the client's */
        sp->open = 1;
    }
    zeps_sbatch *b = sp->kept;
    sp->kept = NULL;
    if (!b) {
        b = zp_alloc_zeroed(1, sizeof(*b));
        size_t S1 = (size_t)ZP_MAX_SHARDS + 1; /* shards may join while it is kept */
        b->sbegin = zp_alloc(S1 * sizeof(size_t));
        b->boff = zp_alloc(S1 * sizeof(size_t));
    }
    size_t n1 = n + 1;
    if (n1 > b->ncap) {
        free(b->pos_u);
        free(b->pos_fa);
        free(b->fa_of);
        free(b->ukeys);
        free(b->pbegin);
        free(b->plist);
        free(b->uversions);
        b->pos_u = zp_alloc(n1 * sizeof(uint32_t));
        b->pos_fa = zp_alloc(n1 * sizeof(uint32_t));
        b->fa_of = zp_alloc(n1 * sizeof(uint32_t));
        b->ukeys = zp_alloc(n1 * sizeof(uint64_t));
        b->pbegin = zp_alloc((n1 + 1) * sizeof(size_t));
        b->plist = zp_alloc(n1 * sizeof(uint32_t));
        b->uversions = zp_alloc(n1 * sizeof(uint32_t));
        b->ncap = n1;
    }
    memset(b->sbegin, 0, ((size_t)c->nshards + 1) * sizeof(size_t));
    memset(b->boff, 0, ((size_t)c->nshards + 1) * sizeof(size_t));
    b->c = c;
    b->spare = sp;
    sp->refs++;
    return b;
}

/* Drop one reference to sp; the last one frees it and what it kept. */
static void spare_unref(zp_sbspare *sp)
{
    if (--sp->refs > 0)
        return;
    body_free(sp->kept);
    free(sp);
}

void zp_sbspare_close(zeps_client *c)
{
    zp_sbspare *sp = c->sbspare;
    if (!sp)
        return;
    c->sbspare = NULL;
    sp->open = 0;
    body_free(sp->kept);
    sp->kept = NULL;
    spare_unref(sp);
}

void zp_sbspare_give(zeps_sbatch *b)
{
    zp_sbspare *sp = b->spare;
    if (sp->open && !sp->kept && body_bytes(b) <= SPARE_MAX_BYTES) {
        b->c = NULL;
        b->spare = NULL;
        b->pull_started = b->pull_parts = b->pull_replies = 0;
        b->rows = NULL;
        b->codec = 0;
        sp->kept = b;
    } else {
        body_free(b);
    }
    spare_unref(sp);
}
