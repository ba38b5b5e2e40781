/*
 * dround.h - the open bsp rounds of the dense pieces a live move takes,
 * handed from the source to the target (dround.c; docs/elastic.md,
 * "Moves under bsp").
 *
 * Under bsp a dense push is held in its piece's open round (table/
 * round.h: one frame per rank) until every worker pushed, then the round
 * is summed in rank order and applied once. At FREEZE the source parks
 * the writes of the moving pieces, so a piece's round may hold the
 * pushes of some ranks while the others' are parked. After a piece's
 * elements the tool therefore carries its round: the count of rounds it
 * closed and a copy of each push it holds; the target holds them in its
 * piece's round for the same ranks, and the parked pushes, answered
 * EMOVED at the commit, complete it there. A round's sum is in rank
 * order whatever the arrival, so its close gives the bits it would have
 * given at the source. The source copies and keeps: an abort changes
 * nothing there.
 *
 * A round page (little-endian, one per held push, or one without a push
 * when the round holds none; MOVE ROWS reply and MOVE PUT with
 * ZP_FLAG_HELD, Header.move_table, offset the piece's first element,
 * count its elements):
 *
 *     i64 rounds closed, u32 flags (bit 0: a push follows), u32 rank,
 *     u64 data version of the push, [count f32 the push's gradient]
 *
 * Threading: the shard's loop only.
 */
#ifndef ZP_DROUND_H
#define ZP_DROUND_H

#include <stddef.h>
#include <stdint.h>

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;

/* Bytes of a round page before its gradient. */
#define ZP_DROUND_HEAD 24u

/* The source: round pages still to send (0 outside a frozen dense move
 * or in a mode without rounds). */
uint64_t zp_dround_left(const zp_server *s);

/* The source: the next round page into *buf (the caller owns it; free),
 * its length the return; *t the piece's record. 0 when none is left. */
size_t zp_dround_page(zp_server *s, uint8_t **buf, zp_table **t);

/* The target: hold round page[0..len) in the round of the piece being
 * imported that is [lo, lo + count) of dense table `name`: checked first
 * (the piece, sizes, the rank, a push per rank, one count of closed
 * rounds per piece, finite values). 0, or an error code with why
 * (nothing held). */
int zp_dround_put(zp_server *s, const char *name, uint64_t lo, uint64_t count, const void *page,
                  size_t len, char *why, size_t whylen);

#endif
