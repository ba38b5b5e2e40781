/*
 * versions.h - the last versions of a dense slice, kept for staleness on
 * demand (cluster.inject, state/inject.h): a pull can be served as the slice
 * was tau updates ago.
 *
 * The slice's parameters are a copy-on-write buffer (buf.h): an update
 * writes a fresh copy while anyone else holds a reference. So keeping a
 * version is keeping a reference to its buffer, and the ring costs one
 * copy of the slice per update and (keep) slices of memory, nothing else.
 */
#ifndef ZP_VERSIONS_H
#define ZP_VERSIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

typedef struct zp_versions {
    zp_buf **buf;      /* cap entries; each held one holds one reference */
    uint64_t *version; /* the version of buf[i] */
    uint32_t cap, len; /* entries kept at most / now */
    uint32_t head;     /* index of the newest */
} zp_versions;

/* Keep up to `keep` (>= 1) versions. A zeroed zp_versions keeps none. */
void zp_versions_init(zp_versions *v, uint32_t keep);

/* Release every kept buffer and the ring; tolerates a zeroed *v. */
void zp_versions_fini(zp_versions *v);

/* Drop the kept versions (a slice put back to a snapshot), keep the ring. */
void zp_versions_clear(zp_versions *v);

/* b is now `version` (newer than any kept): keep it with a reference of
 * the ring's own, dropping the oldest when full. */
void zp_versions_note(zp_versions *v, zp_buf *b, uint64_t version);

/* The newest kept buffer whose version is <= want (the oldest kept if all
 * are newer), with its version in *got; NULL if nothing is kept. No
 * reference is taken: take one (zp_buf_ref) to hand it on. */
zp_buf *zp_versions_find(const zp_versions *v, uint64_t want, uint64_t *got);

/* The oldest kept version (0 if none). */
uint64_t zp_versions_oldest(const zp_versions *v);

/* Bytes of parameters the ring alone keeps alive (the newest is the
 * slice's own and not counted). */
uint64_t zp_versions_bytes(const zp_versions *v);

#endif
