/*
 * round.h - a dense table's BSP round state: the rounds closed so far, the
 * gradient frames held for the open round (one per rank, as received, no
 * copy), the data version each was computed from, and the rank-ordered sum.
 *
 * This module stores and sums; it decides nothing. policy/bsp.c decides when
 * a push is held and when the round closes; the op layer records what a
 * closed round applied from the record zp_round_close leaves here.
 */
#ifndef ZP_ROUND_H
#define ZP_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

typedef struct zp_round {
    int64_t closed; /* rounds closed so far = the round being collected */
    int nworkers;   /* 0: a table without rounds (sparse) */
    int npending;
    zmq_msg_t *pending;        /* [nworkers] frames held until the round closes */
    bool *have;                /* [nworkers] */
    uint64_t *pending_version; /* [nworkers] data_version of each held push */
    float *acc;                /* n floats: the rank-ordered sum, made on first use */
    size_t n;                  /* floats per frame (the slice) */
    /* the last closed round, in rank order (zp_round_close) */
    int nlast;
    uint32_t *last_rank;
    uint64_t *last_version;
    /* a backup replaying a round entry (op/batch.c): the sum its primary
     * applied, borrowed until the round closes or zp_round_give(NULL) */
    const float *given;
} zp_round;

/* Set up the state of a slice of n floats for `nworkers` ranks. Returns 0
 * or ZEPS_ENOMEM (then zp_round_fini cleans up what was made). */
int zp_round_init(zp_round *rd, int nworkers, size_t n);

/* Close every held frame and free the arrays. */
void zp_round_fini(zp_round *rd);

/* True if rank holds a push for the open round. */
bool zp_round_holds(const zp_round *rd, uint32_t rank);

/* Hold rank's push for the open round: the round takes the frame's bytes
 * (zmq_msg_move; *frame is left empty). frame NULL: a push without its
 * values (a backup replaying a round entry, whose sum is given). Returns
 * 0, or ZEPS_ENOMEM when the sum buffer cannot be made (nothing taken). */
int zp_round_hold(zp_round *rd, uint32_t rank, zmq_msg_t *frame, uint64_t data_version);

/* Hold a copy of rank's push of n floats at g (rd->n of them), computed
 * from data_version: a push handed over by a live move, or a part of one
 * held by a piece that was cut. The caller keeps g. Returns 0, or
 * ZEPS_ENOMEM (nothing held). */
int zp_round_hold_copy(zp_round *rd, uint32_t rank, const float *g, uint64_t data_version);

/* A piece cut from a dense slice: `to` (a slice of to->n floats) takes
 * from's count of closed rounds and a copy of elements [off, off + to->n)
 * of each push from holds (off + to->n <= from->n), so its round sums
 * what from's would have for those elements. to holds nothing before.
 * Returns 0, or ZEPS_ENOMEM (to then holds a part: reset it). */
int zp_round_take_part(zp_round *to, const zp_round *from, size_t off);

/* Drop rank's held push, if any (it rejoined and redoes its clock). */
void zp_round_forget(zp_round *rd, uint32_t rank);

/* The gradient of the open round: the sum given (zp_round_give), else the
 * one held frame itself, or the sum of the held frames in rank order in acc
 * (bit-for-bit the same whatever order they arrived in). *k is the number
 * of pushes summed. */
const float *zp_round_sum(zp_round *rd, int *k);

/* A backup replaying a round entry: the open round's sum is g (n floats,
 * borrowed until the round closes; NULL: none). True if a push without
 * values is held and no sum is given: the round cannot be summed here. */
void zp_round_give(zp_round *rd, const float *g);
bool zp_round_lacks_sum(const zp_round *rd);

/* The round was applied: record its ranks and versions (zp_round's last_*),
 * close the frames, and count it closed. */
void zp_round_close(zp_round *rd);

/* Drop every held push and set the count of closed rounds (rollback,
 * restore). */
void zp_round_reset(zp_round *rd, int64_t closed);

/* Bytes of the sum buffer (the frames belong to ZeroMQ's accounting). */
uint64_t zp_round_bytes(const zp_round *rd);

#endif
