/*
 * handover.h - the bsp pushes a live move hands from its source to its
 * target (handover.c; docs/elastic.md, "Moves under bsp").
 *
 * Under bsp a sparse push is held in its open round (table/rround.h) and
 * applied at the round's close, merged in rank order. A row of the moving
 * slot set M may therefore have pushes held at the source that no row
 * record carries. At the cut-over the source takes them out of its rounds
 * (zp_handover_take), and the rows of M of every push it holds after that
 * until its last page (zp_handover_take_table): no row of M changes there
 * from then on (its other requests of M are parked, and its pushes after
 * the last page). A worker that sends its CLOCK without waiting for its
 * push's answer thus never has a push of M parked behind its CLOCK
 * unless it came in the last round trip. The tool carries them with the last pages, as
 * round records. The target keeps them apart until the commit (SLOTS),
 * then holds them in its own rounds, in the order they were held, so
 * that its close of each round merges exactly what the source's would
 * have; a round it closed already is merged then, whole: the records of
 * one round may come in several pages, before and after the target's
 * close of it (a push held in the cut-over is answered, and its worker's
 * CLOCK may reach the target before the page that carries it). An abort
 * gives them back to the source.
 *
 * A round record (little-endian, padded to 8 bytes):
 *
 *     u32 rank, u32 flags (bit 0: versions follow), i64 clock, u64 n,
 *     n u64 ids, n * dim f32 gradients, [n u32 row versions read]
 *
 * A page holds records of one sparse table (Header.move_table) and
 * ZP_FLAG_HELD (MOVE ROWS reply and MOVE PUT).
 *
 * Threading: the shard's loop only.
 */
#ifndef ZP_HANDOVER_H
#define ZP_HANDOVER_H

#include <stddef.h>
#include <stdint.h>

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;

/* Bytes of the fixed part of a round record. */
#define ZP_HANDOVER_HEAD 24u

/* The source, at the cut-over: take every held push's rows of M out of
 * the sparse tables' rounds into the move (s->move, source). Returns the
 * rows taken. */
uint64_t zp_handover_take(zp_server *s);

/* The source, in the cut-over before its last page: a push just held in
 * t's rounds names rows of M: they are taken too, after the ones before
 * (each rank's pushes keep their order). Returns the rows taken. */
uint64_t zp_handover_take_table(zp_server *s, zp_table *t);

/* The source: round records taken and not yet paged out. */
uint64_t zp_handover_left(const zp_server *s);

/* The source: the next page of round records, of one table (*t), at most
 * `room` bytes unless a single record is larger (then that one alone).
 * Returns the records in the page, 0 when none is left; *buf (the
 * caller owns it; free) and *len the page. */
uint64_t zp_handover_page(zp_server *s, uint64_t room, uint8_t **buf, size_t *len, zp_table **t);

/* The source, at an abort: every push taken goes back into its table's
 * rounds (after what was held since, which names no row of M). The
 * caller then lets the policy apply those of rounds already closed
 * (zp_handover_apply). */
void zp_handover_give_back(zp_server *s);

/* The target: keep the `count` round records of page[0..len) of sparse
 * table t, apart from its rounds until the commit, all or none: each
 * checked (rank, clock, sizes, ids in M, finite gradients) first. 0, or
 * an error code with why. */
int zp_handover_put(zp_server *s, zp_table *t, const uint8_t *page, size_t len, uint64_t count,
                    char *why, size_t whylen);

/* The target, at its commit: every record kept goes into its table's
 * rounds, after what they hold. Returns the rows. The caller then lets the
 * policy apply those of rounds already closed (zp_handover_apply). */
uint64_t zp_handover_adopt(zp_server *s);

/* The policy applies what a move put into the rounds of every sparse
 * table that rounds here have passed already (its rows_handed hook: bsp
 * merges each such round whole, oldest first). */
void zp_handover_apply(zp_server *s);

/* s took a new map (SLOTS, or the node in ZooKeeper): zp_move_map_taken,
 * with the records of a move it ends as the target put into the rounds
 * first (zp_handover_adopt) and applied where their round closed here. */
void zp_handover_map_taken(zp_server *s);

/* The target, at an abort: drop every held push's rows of M (the records
 * kept apart go with the move). Returns the rows dropped. */
uint64_t zp_handover_drop(zp_server *s);

/* The source while a move runs: the held pushes of rounds below `below`
 * (about to close: every live worker ended them) name rows that change
 * now: those of M are sent again. */
void zp_handover_note(zp_server *s, zp_table *t, int64_t below);

#endif
