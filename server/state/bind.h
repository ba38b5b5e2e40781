/*
 * bind.h - which identities a CURVE client key may speak as: worker ranks
 * and/or a tool (zepsctl). A key's binding is the file NAME.id beside its
 * NAME.pub in curve_allow_dir (libconfig syntax, docs/operations.md
 * Security):
 *
 *   ranks = [0, 1];          # worker ranks, and/or
 *   ranks = ( [0, 15], 20 ); # ranges [first, last] and single ranks
 *   tool = true;             # may speak as a tool (rank 0xffffffff)
 *
 * A key without a binding (an allow-list from before bindings existed) may
 * speak as anything; state/zap.c decides when that is allowed.
 */
#ifndef ZP_BIND_H
#define ZP_BIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_BIND_MAX_RANGES 64

typedef struct zp_bind {
    bool any;  /* no binding: any rank, and tools */
    bool tool; /* may speak as a tool */
    int nranges;
    uint32_t lo[ZP_BIND_MAX_RANGES], hi[ZP_BIND_MAX_RANGES]; /* worker ranks lo..hi */
} zp_bind;

/* Read the binding file at `path` into *b. Returns 0, or ZEPS_ECONFIG /
 * ZEPS_EIO with a message naming the file, line and what is wrong (an
 * unknown setting, a negative or reversed rank, a binding that allows
 * nothing). */
int zp_bind_load(const char *path, zp_bind *b, char *err, size_t errlen);

/* True if b lets its key speak as `rank` (0xffffffff: a tool). */
bool zp_bind_allows(const zp_bind *b, uint32_t rank);

/* "ranks 0-3, 7 and tools" (or "any rank and tools") into buf. */
void zp_bind_describe(const zp_bind *b, char *buf, size_t len);

#endif
