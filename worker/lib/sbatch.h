/*
 * sbatch.h - libzeps internal: the body of a sparse batch (zeps_sbatch,
 * zeps.h), shared by sparse.c, which builds, pulls and pushes it, and
 * sbspare.c, which keeps a freed batch's arrays for the client's next one.
 */
#ifndef ZP_SBATCH_H
#define ZP_SBATCH_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"
#include "zeps.h"

struct zeps_sbatch {
    zeps_client *c;
    zp_sbspare *spare; /* where zeps_sbatch_free leaves the arrays (one reference) */
    uint32_t table, dim;
    int nshards;
    size_t n, nu;
    size_t ncap;         /* positions the arrays below hold (>= n + 1) */
    int in_order;        /* one shard, no repeats: unique u is position u */
    int unique_io;       /* the request being started reads/writes unique rows */
    uint32_t *pos_u;     /* [n] unique index (in shard order) of each position */
    uint32_t *pos_fa;    /* [n] unique index in first-appearance order (several shards) */
    uint32_t *fa_of;     /* [nu] first-appearance index of each unique in shard order */
    uint64_t *ukeys;     /* [nu] unique ids in shard order */
    size_t *sbegin;      /* [nshards + 1] shard k holds uniques [sbegin[k], sbegin[k+1]) */
    size_t *pbegin;      /* [nu + 1] positions of unique u: plist[pbegin[u] .. pbegin[u+1]) */
    uint32_t *plist;     /* [n] */
    uint32_t *uversions; /* [nu] row versions the last pull saw */
    int pull_started;    /* a pull was started; with pull_replies == pull_parts > 0, */
    int pull_parts, pull_replies; /* uversions is valid: every shard of it replied */
    float *rows;                  /* destination of the pull in flight */
    unsigned char *push;          /* push payload, shard blocks at boff[k] */
    size_t push_cap;
    size_t *boff;       /* [nshards + 1] */
    unsigned char *enc; /* compressed push payload, shard k at eoff[k], elen[k] bytes */
    size_t enc_cap;
    size_t *eoff, *elen;
    uint32_t codec; /* of the push being sent (0: raw) */
};

/* A batch for client c with room for n positions over c's shards: the
 * kept one if there is one (its arrays grown if too small), else a new
 * one. The caller owns it and its reference to the spare holder. */
zeps_sbatch *zp_sbspare_take(zeps_client *c, size_t n);

/* Take back batch b (zeps_sbatch_free): its arrays go to its client's
 * spare holder when the client is alive and keeps none yet (and they are
 * not too large), its state cleared; else they are freed. */
void zp_sbspare_give(zeps_sbatch *b);

/* At zeps_client_destroy: the client's reference; batches still alive
 * free their arrays when they are freed. */
void zp_sbspare_close(zeps_client *c);

#endif
