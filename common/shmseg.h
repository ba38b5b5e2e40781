/*
 * shmseg.h - the shared-memory segment of one worker-shard connection
 * (shmseg.c): a sealed memfd mapped by both processes, two areas in it (the
 * client's requests, the shard's replies), buffers allocated in an area by
 * the side that writes it and taken by the side that reads it, named on the
 * wire by a descriptor (offset, length, generation). docs/protocol.md,
 * "Shared memory", has the layout and the rules; this module checks them.
 *
 * Each buffer starts with a 64-byte header in the segment whose first word
 * is its tag, generation << 8 | state, changed only by compare-and-swap, so
 * the writer reusing a buffer and the reader taking it (a resend) can never
 * both win. The reader trusts none of the segment's bytes for its own
 * memory safety: bounds come from the size it mapped, overlap from its own
 * list of buffers held.
 *
 * Threads: a segment is used by one thread of each process, except that
 * zp_shmseg_release may be called from any thread (ZeroMQ's I/O thread
 * releases frames it sent); the reader's list is locked.
 */
#ifndef ZP_SHMSEG_H
#define ZP_SHMSEG_H

#include <stddef.h>
#include <stdint.h>

#define ZP_SHM_HEAD     4096u /* the segment's head: magic and sizes */
#define ZP_SHM_ALIGN    64u   /* buffers, and their headers, are 64-byte aligned */
#define ZP_SHM_MAX_LIVE 256   /* buffers a writer has allocated at once */
#define ZP_SHM_MAX_HELD 1024  /* buffers a reader holds at once */

/* Areas: the client writes AREA_REQ and reads AREA_REP; the shard the reverse. */
enum { ZP_SHM_AREA_REQ = 0, ZP_SHM_AREA_REP = 1 };

/* Where a payload lives: `offset` bytes into the area (the buffer's data,
 * past its header), `length` bytes, written at `generation`. */
typedef struct zp_shm_desc {
    uint64_t offset, length, generation;
} zp_shm_desc;

typedef struct zp_shmseg zp_shmseg;

/* The client's side: make a memfd of `area_bytes` per area (rounded up to
 * pages), seal its size (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), map it.
 * On success *out is the segment (one reference) and *fd the memfd, which
 * the caller hands to the shard and then closes; the mapping keeps the
 * memory. Returns 0 or a zeps_err with a message in err. */
int zp_shmseg_create(zp_shmseg **out, int *fd, uint64_t area_bytes, char *err, size_t errlen);

/* The shard's side: map a memfd received from a client. Refused (EPROTO)
 * unless its size cannot change (sealed against shrinking and growing:
 * otherwise the client could truncate it under the shard's reads) and its
 * head names the size it has. The fd stays the caller's. */
int zp_shmseg_attach(zp_shmseg **out, int fd, char *err, size_t errlen);

/* Another reference (a frame built on the segment holds one). */
zp_shmseg *zp_shmseg_ref(zp_shmseg *g);

/* Drop a reference; the mapping goes with the last. Sets *gp to NULL; NULL is fine. */
void zp_shmseg_unref(zp_shmseg **gp);

/* Bytes of each area. */
uint64_t zp_shmseg_area_bytes(const zp_shmseg *g);

/* Writer: room for `len` bytes (len >= 1) in the area this side writes,
 * reusing buffers the reader released. 0 with *d and *data set (the caller
 * fills data, then calls zp_shmseg_written), or -1 when the area has no
 * room or ZP_SHM_MAX_LIVE buffers are out (send the payload inline).
 * The buffer stays this side's until zp_shmseg_written; from then on the
 * reader may take it. */
int zp_shmseg_alloc(zp_shmseg *g, size_t len, zp_shm_desc *d, void **data);

/* Writer: the bytes of d are written; the reader may take them.
 * `keep`: the writer still needs the buffer (a request not yet answered
 * may be resent): it is not reused until zp_shmseg_done(g, d). */
void zp_shmseg_written(zp_shmseg *g, const zp_shm_desc *d, int keep);

/* Writer: the request that used d is over; its buffer is reused once the
 * reader released it (or, if the reader never took it, at once: a late
 * resend is then refused as stale). */
void zp_shmseg_done(zp_shmseg *g, const zp_shm_desc *d);

/* Reader: check d against the area this side reads and take the buffer.
 * 0 with *data set, or a zeps_err (ESHM) with the reason in err and
 * nothing taken: outside the area, not aligned, overlapping a buffer this
 * side still holds (the same buffer again, a resend, is taken once more),
 * or a generation that is not the buffer's (stale). Each successful take
 * is released once with zp_shmseg_release. */
int zp_shmseg_take(zp_shmseg *g, const zp_shm_desc *d, const void **data, char *err, size_t errlen);

/* Reader: done with the buffer at `data` (from zp_shmseg_take). The last
 * release of a buffer gives it back to the writer. Any thread. */
void zp_shmseg_release(zp_shmseg *g, const void *data);

/* Buffers the reader holds now, and the writer's buffers not yet reusable. */
int zp_shmseg_held(zp_shmseg *g);
int zp_shmseg_live(const zp_shmseg *g);

#endif
