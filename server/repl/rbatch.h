/*
 * rbatch.h - a replicated primary's bsp round entry (docs/replication.md,
 * "Replication after aggregation"): the dense bsp pushes whose rounds are
 * still open are not logged one by one; they wait here, in the order they
 * were applied, with their replies, until every round they belong to has
 * closed. Then ONE entry carries them all without their values (each
 * push's header: rank, seq, clock, flags, version read) and the sums of
 * the rounds they closed, as applied; a backup replays the pushes in the
 * same order through the same handlers (op/batch.c), taking each round's
 * sum instead of summing values it never received, and reaches the same
 * bits. If anything else must be logged first, the waiting pushes are
 * logged one by one as they arrived (a flush), which is what a backup
 * applied before this existed.
 *
 * A worker's CLOCK handled while the batch holds pushes joins it too (its
 * header says everything it does): a shard that holds none of a step's
 * last table gets the step's clock alone, between the step's pushes.
 *
 * The entry (a PUSH request with ZP_FLAG_ROUND, frames after its header):
 *   items: per push (or CLOCK), little-endian: u32 header length, u32 flags (bit 0:
 *          it closed its round), u64 payload bytes as received, u64 where
 *          its round's sum starts in `sums` (floats; 0 unless it closed
 *          one), then its packed request header;
 *   sums:  the sums, f32, one table slice after another.
 *
 * This module keeps the batch and encodes and decodes the entry; rlog.c
 * decides when it is logged. Threading: the shard's loop thread only.
 */
#ifndef ZP_REPL_BATCH_H
#define ZP_REPL_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "wire.h"

#define ZP_RBATCH_MAX 4096 /* pushes a batch holds at most; the next one flushes it */

typedef struct zp_repl_entry {
    uint64_t lsn;
    uint64_t epoch; /* of the primary that logged it */
    int n;          /* frames: the request's header, then its payloads */
    size_t bytes;
    zmq_msg_t f[ZP_MAX_FRAMES - 1];
} zp_repl_entry;

/* A reply held until its entry is in every in-sync backup. */
typedef struct zp_repl_held {
    uint64_t lsn; /* in a batch: the index of the push it answers */
    zmq_msg_t identity;
    void *header; /* packed reply header */
    size_t header_len;
    void *data; /* payload (owned: freed by ffn, or a copy freed with free) */
    size_t len;
    zmq_free_fn *ffn;
    void *hint;
    double at_s;
} zp_repl_held;

/* Close a held reply unsent: its identity, header and payload (ffn or
 * free). */
void zp_rbatch_held_close(zp_repl_held *h);

/* A push waiting in the batch. */
typedef struct zp_repl_item {
    zp_repl_entry e; /* its request's frames (new references), logged alone on a flush */
    uint32_t table;
    bool closes;     /* it closed its table's round */
    bool closed;     /* its round has closed (by it or a later push) */
    uint64_t wire;   /* its payload's bytes as received */
    uint64_t sum_at; /* closes: where its round's sum starts in `sums` (floats) */
} zp_repl_item;

typedef struct zp_repl_batch {
    zp_repl_item *items;
    size_t n, cap;
    size_t open;  /* items whose round has not closed */
    size_t npush; /* items that are pushes (the others: CLOCKs) */
    float *sums;  /* owned; moves into the entry */
    size_t nsums, capsums;
    zp_repl_held *held; /* the items' replies, lsn = the item's index */
    size_t nheld, capheld;
} zp_repl_batch;

/* One push of a round entry, as read by zp_rbatch_read (views into the
 * items frame). */
typedef struct zp_rbatch_view {
    const uint8_t *header;
    uint32_t header_len;
    bool closes;
    uint64_t wire;
    uint64_t sum_at;
} zp_rbatch_view;

/* Free everything the batch holds, its held replies included (dropped
 * unanswered), and leave it empty. */
void zp_rbatch_fini(zp_repl_batch *b);

/* Add a push: frames f[0..n) (new references are kept), its table, its
 * payload's bytes; `sum` (nsum floats) when it closed its table's round:
 * on return the batch owns *sum and *sum is NULL. The push's replies
 * follow with zp_rbatch_hold. */
void zp_rbatch_add(zp_repl_batch *b, zmq_msg_t *f, int n, uint32_t table, uint64_t wire,
                   float **sum, size_t nsum);

/* Add a request that is no push but whose header says all it does (a
 * CLOCK): it is replayed in its place among the pushes. */
void zp_rbatch_add_plain(zp_repl_batch *b, zmq_msg_t *f, int n);

/* Keep reply *h (moved: the caller forgets it) with the last push added. */
void zp_rbatch_hold(zp_repl_batch *b, const zp_repl_held *h);

/* Every push of the batch has its round closed: it can be logged as one entry. */
bool zp_rbatch_ready(const zp_repl_batch *b);

/* The entry's frames: f[0] its header (a PUSH with ZP_FLAG_ROUND, count =
 * pushes), f[1] the items, f[2] the sums (the batch's buffer, moved into
 * the frame). The caller owns the three frames. Returns 3. */
int zp_rbatch_entry(zp_repl_batch *b, zmq_msg_t f[3]);

/* Forget the pushes (their frames closed) and sums; held replies must have
 * been taken already (nheld 0). */
void zp_rbatch_clear(zp_repl_batch *b);

/* Read the push at *off of an items frame (p, len) and move *off past it.
 * 0, or -1 if what is there is not a whole item. */
int zp_rbatch_read(const uint8_t *p, size_t len, size_t *off, zp_rbatch_view *v);

#endif
