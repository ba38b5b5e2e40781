/*
 * seen.h - the ids a cold tier has been given: a filter that answers "never
 * given" for nearly every id that was not, and never for one that was, so
 * that a new id (a first touch) costs the tier no read of its store.
 *
 * Blocked Bloom filters (one 64-byte block per id, SEEN_K bits in it):
 * the ids are not kept, so a full filter cannot be rebuilt larger; the
 * next one, twice its size, takes the ids from then on, and a lookup asks
 * each (a few: sizes double from 64Ki ids). 1.5 to 3.5 bytes per id
 * given (12 bits each, and the newest filter's room not yet filled); a
 * false "maybe" (about 0.5 % per filter) costs one read, as without the
 * filter. Deleted ids stay: the filter says "maybe", the read "not
 * there".
 *
 * Threading: the loop's thread only (tier.c).
 */
#ifndef ZP_SEEN_H
#define ZP_SEEN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct zp_seen zp_seen;

/* An empty filter; *out is the caller's (zp_seen_free). */
void zp_seen_new(zp_seen **out);

/* Free s; NULL and *sp NULL tolerated; *sp NULL afterwards. */
void zp_seen_free(zp_seen **sp);

/* Id given to the tier (again: nothing changes). */
void zp_seen_add(zp_seen *s, uint64_t id);

/* false: id was never added; true: it may have been. */
bool zp_seen_may(const zp_seen *s, uint64_t id);

/* Bytes the filters take. */
uint64_t zp_seen_bytes(const zp_seen *s);

#endif
