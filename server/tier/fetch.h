/*
 * fetch.h - a batch of cold rows read off the shard's loop: the ids go to
 * libuv's thread pool, which reads them with one MultiGet (tier.h,
 * zp_tier_read_many); the loop is told when they are in, and serves other
 * requests meanwhile. A record that the loop wrote or deleted while the
 * read ran is not handed out (zp_tier_touched): it may be stale, and the
 * touch that needs it reads it again on the loop.
 *
 * Threading: start, the done callback and the accessors on the loop's
 * thread; only the read itself runs on the pool.
 */
#ifndef ZP_FETCH_H
#define ZP_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "tier.h"

typedef struct zp_fetch zp_fetch;

/* Called on the loop when the read is over; the callee (the callback)
 * owns f from then on and frees it with zp_fetch_free. */
typedef void (*zp_fetch_done)(zp_fetch *f, void *arg);

/* Read ids[0..n) (copied) of tier t; `tag` is the caller's, handed back
 * by zp_fetch_tag. t must stay open until done has run. Returns 0, or
 * ZEPS_EINTERNAL if libuv refused the work (nothing started). */
int zp_fetch_start(uv_loop_t *loop, zp_tier *t, const uint64_t *ids, size_t n, uint64_t tag,
                   zp_fetch_done done, void *arg);

uint64_t zp_fetch_tag(const zp_fetch *f);
size_t zp_fetch_count(const zp_fetch *f);
uint64_t zp_fetch_id(const zp_fetch *f, size_t i);
/* Id i's record (the tier's record bytes, 8-aligned), or NULL: not in the
 * tier, written meanwhile, or the read failed (zp_fetch_error). */
const void *zp_fetch_record(const zp_fetch *f, size_t i);
/* Whether id i is known not to be in the tier: read and not there, and
 * not written since the read began (so, until the loop next writes it). */
bool zp_fetch_absent(const zp_fetch *f, size_t i);

/* The read's failure, or NULL. */
const char *zp_fetch_error(const zp_fetch *f);

void zp_fetch_free(zp_fetch **fp);

#endif
