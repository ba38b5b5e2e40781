/*
 * move.h - a live move of a slot set on this shard (move.c): the state
 * of the source (the rows still to send, the requests parked at the
 * cut-over) or of the target (the slots it imports), and nothing of the
 * wire: op/move.c answers the tool and the parked requests.
 *
 * A move takes slot set M from source shard A to target shard B
 * (docs/elastic.md, "Live migration of a slot set"). A tool drives it
 * step by step (MOVE, docs/protocol.md "Moving slots"); this shard keeps
 * what its part needs between the steps:
 *
 * - the source: M (the slots the map to commit gives from A to B), one
 *   dirty set of row ids per sparse table (every row of M at the start,
 *   then every id of M a request touched), the round being sent, and
 *   from the cut-over on the requests naming M, parked until the commit
 *   or the abort;
 * - the target: M, so that the tool's pages of rows of M are taken while
 *   the shard's map still gives M to A (its clients' requests for M are
 *   refused with EMOVED naming A until the commit).
 *
 * Both end when the tool says so or when the tool's lease (or the
 * cut-over's bound) passes without it: a move never waits for ever.
 *
 * Threading: the shard's loop only.
 */
#ifndef ZP_MOVE_H
#define ZP_MOVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "idset.h"
#include "rround.h"
#include "zeps.pb-c.h"

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;
typedef struct zp_slotmap zp_slotmap;

enum { ZP_MOVE_SOURCE = 1, ZP_MOVE_TARGET = 2 };

/* A request of M that reached the source during the cut-over: what its
 * EMOVED answer needs. */
typedef struct zp_move_parked {
    struct zp_move_parked *next;
    zmq_msg_t identity; /* a copy: the parked request's own */
    Zeps__Header h;     /* op, req_id, rank, incarnation, seq, table (dense: count) */
    uint64_t id;        /* its first id of M, at position pos */
    size_t pos;
    char what[96];  /* "PUSH of sparse table 'emb'" */
    char dense[64]; /* a dense request: its table ("" sparse); id: its first element */
    uint64_t count; /* ... and its element count */
} zp_move_parked;

/* A whole piece of a dense table that a dense move takes (dmove.c). */
typedef struct zp_move_piece {
    char name[64];
    uint64_t lo, hi;
    zp_table *in; /* target: the piece imported, owned until the commit */
} zp_move_piece;

/* The ids of one sparse table a round sends. */
typedef struct zp_move_round {
    uint64_t *ids; /* owned */
    size_t n, at;  /* sent: ids[0..at) */
} zp_move_round;

typedef struct zp_move {
    int role;             /* ZP_MOVE_SOURCE or ZP_MOVE_TARGET */
    int peer;             /* the other shard */
    zp_slotmap *next;     /* the map the move commits (epoch + 1, M on the target); owned */
    uint8_t *moving;      /* per slot: 1 if in M; owned */
    uint32_t nmoving;     /* slots in M */
    double heard_s;       /* the tool's last step */
    double lease_s;       /* ... after which the move aborts */
    bool frozen;          /* source: the cut-over: requests of M are parked */
    double frozen_s;      /* when it began */
    double bound_s;       /* ... and how long it may last */
    bool drained;         /* source: a ROWS page after the freeze came back empty */
    bool fencing;         /* ended by time: asking ZooKeeper first (op/zkmap.c) ... */
    uint32_t fences;      /* ... how many times */
    /* source, without coordination: ended by time after its last rows were
     * sent, it asks the target what became of the move (op/move_ask.c) */
    void *ask_sock;      /* a DEALER to the target; owned */
    uint32_t asks;       /* asked so often ... */
    double ask_s;        /* ... the last time at ... */
    double ask_wait_s;   /* ... waiting this long for the answer ... */
    double doubt_s;      /* ... since this time */
    char doubt[320];     /* what STATS says of it ("" until the first ask) */
    zp_idset *dirty;      /* source: per table index, the ids of M to send (again) */
    zp_move_round *round; /* source: per table index, the round being sent */
    uint32_t ntables;     /* entries of dirty and round */
    uint64_t rounds;      /* rounds begun */
    uint64_t rows_sent, bytes_sent;
    zp_move_parked *parked, **parked_tail; /* source, cut-over: FIFO */
    size_t nparked;
    /* source, from the cut-over on: per table index, the held bsp pushes'
     * rows of M taken out of its rounds (handover.h), and how many of
     * them were paged out */
    zp_rround *handed;
    size_t *hand_sent;
    uint32_t nhanded;
    uint64_t handed_rows; /* rows of held pushes handed over (either side) */
    zp_move_piece *pieces; /* a dense move (no slot moves): the pieces from A to B; owned */
    size_t npieces;
    size_t piece_at;  /* source, after FREEZE: the piece being copied ... */
    uint64_t elem_at; /* ... and its next element */
    /* source, a dense move under bsp: the pieces' open rounds paged out
     * after their elements (dround.h): the piece, and its pages sent */
    size_t round_piece;
    size_t round_sent;
} zp_move;

/* Why shard s may not take part in a move now, with the code (0: it may;
 * why untouched): another move, bsp, replicas, a cold tier. */
int zp_move_refused(const zp_server *s, char *why, size_t len);

/* Start s's part of the move that commits `next` (its epoch above s's
 * map, the same slot count; the caller checked) with `peer` as the other
 * shard, in `role`. M is the slots `next` gives from the source to the
 * target that s's map gives to the source; anything else `next` changes
 * is refused (ZEPS_EINVAL in why), as is an empty M. The source marks
 * every row of M it holds to be sent. On success s->move owns `*next`
 * (set to NULL) and *rows is the rows of M held here; on error nothing
 * changed and the caller still owns it. */
int zp_move_start(zp_server *s, int role, zp_slotmap **next, int peer, double lease_s,
                  uint64_t *rows, char *why, size_t len);

/* Whether id is in the moving slot set of m. */
bool zp_move_has(const zp_move *m, uint64_t id);

/* The source: ids[0..n) of sparse table t were touched (pulled, pushed,
 * put): those of M are to be sent again. Nothing without a move. */
void zp_move_note(zp_server *s, const zp_table *t, const uint64_t *ids, size_t n);

/* The index of the first of ids[0..n) in M while the source is in its
 * cut-over, else -1. */
ptrdiff_t zp_move_frozen(const zp_server *s, const uint64_t *ids, size_t n);

/* Park request h (from `identity`, copied) whose id `id` at `pos` is in
 * M until the cut-over ends; a resend of a parked (rank, seq) is not
 * parked twice. */
void zp_move_park(zp_server *s, const zmq_msg_t *identity, const Zeps__Header *h, uint64_t id,
                  size_t pos, const char *what);

/* The source: the next page of at most `max` rows to send, as row
 * records (the SCAN layout, table/rows.h) into out (room for `max`
 * records of the largest table): *t the table they belong to, the rows
 * written returned. A round takes every dirty set whole; a page holds
 * rows of one table; rows gone since they were marked are skipped. When
 * the round is sent the next one begins; 0 rows when nothing is left.
 * *left: the ids still to send after this page (this round's and the
 * next's). */
uint64_t zp_move_page(zp_server *s, uint64_t max, uint8_t *out, zp_table **t, uint64_t *left);

/* Ids still to send (source). */
uint64_t zp_move_left(const zp_server *s);

/* Drop every row of M from every sparse table (the source at the
 * commit, the target at an abort). Returns rows dropped. */
uint64_t zp_move_drop_rows(zp_server *s);

/* Drop every row that `next` gives to another shard than s's, from every
 * sparse table (a backup applying its primary's commit, which had no move
 * of its own). Returns rows dropped. */
uint64_t zp_move_drop_foreign(zp_server *s, const zp_slotmap *next);

/* Whether s's move passed its lease (the tool silent) or its cut-over
 * bound at time now_s. */
bool zp_move_expired(const zp_server *s, double now_s);

/* Whether s's move is a cut-over past its bound at time now_s; without
 * coordination a source's bound counts only until its last page (the tool
 * may have committed at the target since, docs/elastic.md). */
bool zp_move_past_bound(const zp_server *s, double now_s);

/* Whether `next` is the map the move s imports commits: then no row of
 * s leaves it (its own slots keep their owner, the moving ones come to
 * it), and SLOTS need not look at every row in its cut-over. */
bool zp_move_commits(const zp_server *s, const zp_slotmap *next);

/* Whether the map s holds ends its move as the target's commit: the map
 * the move commits, or a later one. */
bool zp_move_taken_ends(const zp_server *s);

/* s took a new map (SLOTS): the target's move ends if zp_move_taken_ends
 * (the caller put its bsp round records into the rounds first,
 * handover.h). */
void zp_move_map_taken(zp_server *s);

/* End s's move: its state freed (the parked requests must have been
 * answered: it asserts none is left). */
void zp_move_end(zp_server *s);

/* SLOTS of `next` at s: ZEPS_ESTATE with why if it commits a move whose
 * target part s ended when its source asked (s->fenced, op/move_ask.c),
 * else 0. */
int zp_move_fenced(const zp_server *s, const zp_slotmap *next, char *why, size_t len);

/* --- the requests the source parks in its cut-over (move_parked.c) --- */

/* Append a request h (from `identity`, copied) to m's parked ones: op,
 * req_id, rank, incarnation, seq and table in the entry's header, for its
 * caller to add what its answer needs; NULL (nothing parked) if it
 * resends a parked (rank, seq, op). m owns the entry until
 * zp_move_parked_take hands it on; identity and h stay the caller's. */
zp_move_parked *zp_move_parked_add(zp_move *m, const zmq_msg_t *identity, const Zeps__Header *h);

/* Remove and return the oldest parked request (the caller frees it with
 * zp_move_parked_free), or NULL. */
zp_move_parked *zp_move_parked_take(zp_server *s);
void zp_move_parked_free(zp_move_parked *p);

/* --- a dense move (dmove.c): whole pieces of dense tables from A to B,
 * copied during the cut-over (docs/elastic.md, "Dense tables by range") --- */

/* The pieces `next` gives from shard src to shard dst into m (a move of
 * this shard as `role`): at the source each must be one of its records,
 * at the target one is made for each (empty, like the table's records
 * here). Their count (0: next changes no dense piece), or -1 with why
 * (ZEPS_EINVAL's) if next changes anything else of the dense tables. */
int64_t zp_dmove_plan(zp_server *s, zp_move *m, const zp_slotmap *next, int src, int dst, char *why,
                      size_t len);

/* Whether a request of op `op` to record t must be parked: the source's
 * cut-over of a dense move taking t, and a write (PUSH, PUT). */
bool zp_dmove_parks(const zp_server *s, const zp_table *t, int op);

/* Park it (a resend of a parked one is not parked twice). */
void zp_dmove_park(zp_server *s, const zmq_msg_t *identity, const Zeps__Header *h,
                   const char *table);

/* The source, after FREEZE: the next page of at most `max` elements of
 * the moving pieces into out (values, then the optimizer's blocks: the
 * dense SCAN layout; room for max * (1 + k) floats, k <= 3) with the
 * piece's record in *t and the first element in *at; the elements sent;
 * *left: those still to send. 0 when all are sent. */
uint64_t zp_dmove_page(zp_server *s, uint64_t max, float *out, zp_table **t, uint64_t *at,
                       uint64_t *left);

/* The source: its record of the move's piece i (i < npieces), NULL if
 * none. */
zp_table *zp_dmove_record(zp_server *s, size_t i);

/* The target: the imported piece of table `name` holding [at, at + n),
 * NULL if none. */
zp_table *zp_dmove_piece_in(zp_server *s, const char *name, uint64_t at, uint64_t n);

/* The source's commit: each moving record replaced by an empty one of
 * the same id (the map gives the elements away); the elements dropped. */
uint64_t zp_dmove_drop(zp_server *s);

/* The target's commit: the imported pieces join the shard's tables. */
void zp_dmove_adopt(zp_server *s);

/* Whether record t is a piece the dense move in progress takes; the
 * first record of table `name` here, NULL if none. */
bool zp_dmove_moving(const zp_server *s, const zp_table *t);
const zp_table *zp_dmove_any(const zp_server *s, const char *name);

/* Free what a dense move holds (imported pieces not adopted). */
void zp_dmove_fini(zp_move *m);

#endif
