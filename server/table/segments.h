/*
 * segments.h - a dense table's initial values by segment: a declaration
 * may cover its table with consecutive segments, each initialised as a
 * table of its own length would be (its init, scale and seed, element
 * indices counted from the segment's start). Several parameters then live
 * in one table, and so travel in one request per shard, with the values
 * each would have had in a table of its own (zeps.torch's DenseParameters).
 */
#ifndef ZP_SEGMENTS_H
#define ZP_SEGMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "zeps.pb-c.h"

/* Most segments one declaration may name. */
#define ZP_SEGMENTS_MAX 4096

/* 0 if spec's segments (if any) are valid: at most ZP_SEGMENTS_MAX, each
 * of length >= 1 with a known initializer and a finite scale, summing to
 * spec->length; else ZEPS_EINVAL with the first fault in err. */
int zp_segments_check(const Zeps__TableSpec *spec, char *err, size_t errlen);

/* Write the initial values of elements [begin, begin + n) of spec's table
 * into dst, by its segments (spec must have some and be checked). */
void zp_segments_fill(const Zeps__TableSpec *spec, float *dst, uint64_t begin, size_t n);

/* A digest of spec's segments (0 when it has none), to tell whether two
 * declarations name the same ones. */
uint64_t zp_segments_digest(const Zeps__TableSpec *spec);

#endif
