/*
 * ops.h - the op handlers of a shard, one file per op family, and the few
 * entry points one op family offers another.
 *
 * Each handler takes a request whose header dispatch.c has decoded and
 * checked (protocol version, frame count, tool ranks) and answers it
 * exactly once. Handlers call down into policy/, table/ and state/, and
 * sideways only in this order: admin, clock, push -> pull, record, turns;
 * clock -> owner; pull -> record, sparse_ops, turns; scan -> sparse_ops,
 * owner; sparse_ops -> owner, turns; move -> owner, sparse_ops; nothing
 * calls back up.
 */
#ifndef ZP_OPS_H
#define ZP_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "consistency.h"
#include "request.h"
#include "parked.h"
#include "slotmap.h"
#include "trace.h"

/* owner.c: the index of the first of ids[0..n) whose slot another shard
 * owns (s->slots), or -1 when this shard owns them all. */
ptrdiff_t zp_owner_foreign(const zp_server *s, const uint64_t *ids, size_t n);

/* owner.c: SLOTS (tools): take the slot map of the payload if its epoch
 * is higher than this shard's and it moves none of the rows this shard
 * holds to another shard; else refuse and change nothing. */
void zp_owner_on_slots(zp_server *s, zp_request *r);

/* Refuse a dense request whose range begins at element `at` of table
 * `name`, in piece `p` that the shard's map gives shard p->owner: EMOVED
 * naming it, with the map as the payload (nothing applied or recorded). */
void zp_owner_refuse_dense(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req,
                           const char *name, uint64_t at, const zp_dense_piece *p);

/* A pull parked on dense record t whose range no piece here holds whole
 * any more (a cut, or a move of its piece): zp_owner_refuse_dense by the
 * shard's map; p (taken off t's list by the caller) is freed. */
struct zp_parked;
void zp_owner_refuse_parked_pull(zp_server *s, const zp_table *t, struct zp_parked *p);

/* pieces.c: the pieces of dense tables placed by range (docs/elastic.md,
 * "Dense tables by range"). The pieces map m gives this shard of table
 * `name` into a new array *out (the caller frees it), one empty piece if
 * none; how many. */
size_t zp_pieces_mine(const zp_server *s, const zp_slotmap *m, const char *name, uint64_t length,
                      zp_dense_piece **out);

/* ZEPS_ESTATE with a reason in why if the shard may not take `next` for
 * its dense pieces: it changes the pieces of a table this shard wrote
 * (pushes, PUTs; written pieces move only by a move, not built), or the
 * shard takes snapshots; else 0. */
int zp_pieces_refused(const zp_server *s, const zp_slotmap *next, char *why, size_t len);

/* After the shard took a new map (s->slots; `old` the one before): make
 * the records of every dense table whose pieces here changed again from
 * its declaration, keeping their ids, with what the records before held
 * of their elements (zp_pieces_refused let nothing written go). A pull
 * parked on a record that is cut waits on the new record holding its
 * range, or is handed to `refuse` (which answers it and takes it) when
 * none does. */
typedef void (*zp_pieces_refuse_fn)(zp_server *s, const zp_table *t, zp_parked *p);
void zp_pieces_rebuild(zp_server *s, const zp_slotmap *old, zp_pieces_refuse_fn refuse);

/* owner.c: send reply header rep with slot_epoch set and the shard's slot
 * map as its payload (HELLO when the map is not the default, EMOVED). */
void zp_owner_send_with_map(zp_server *s, zmq_msg_t *identity, Zeps__Header *rep);

/* owner.c: refuse `req` with EMOVED for id `id` at position `pos` of its
 * ids (`what` says which request, "PUSH of sparse table 'e'"): the owner
 * and map epoch in the header, the map as the payload. */
void zp_owner_refuse(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, const char *what,
                     uint64_t id, size_t pos);

/* batch.c: a bsp round entry of the primary's log (a PUSH with
 * ZP_FLAG_ROUND, repl/rbatch.h), on a backup: its pushes replayed in order
 * through zp_push_on without their values, each round closing on the sum
 * the primary applied. */
void zp_batch_on(zp_server *s, zp_request *r);

/* hello.c: HELLO: a worker (or a tool, rank 0xffffffff) registers. */
void zp_hello_on(zp_server *s, zp_request *r);

/* declare.c: DECLARE: create a table, or check a re-declaration. */
void zp_declare_on(zp_server *s, zp_request *r);

/* pull.c: PULL: answer now, or park until the policy allows it. */
void zp_pull_on(zp_server *s, zp_request *r);
/* Answer every parked pull of t that its policy now allows. */
void zp_pull_serve_parked(zp_server *s, zp_table *t);
/* The same for every table. */
void zp_pull_serve_all(zp_server *s);
/* Under cluster.inject turns, serve the parked pulls whose turn came by a
 * change no request makes (a worker declared lost, or in the final
 * barrier); from the housekeeping timer. */
void zp_pull_turns_check(zp_server *s);
/* Answer every parked pull with ERESTARTED (cut `cut` of set `set`). */
void zp_pull_abort_parked(zp_server *s, int64_t cut, uint64_t set);
/* After FINISH: answer every parked pull but the finisher's EFINISHED. */
void zp_pull_finish_parked(zp_server *s);

/* turns.c: staleness on demand (cluster.inject): */
/* whether rank's pulls are served stale (a worker, under injection) */
bool zp_turns_injecting(const zp_server *s, uint32_t rank);
/* whether pulls take turns (inject.turns, in a mode without rounds) */
bool zp_turns_on(const zp_server *s);
/* whether rank may be served a pull of dense t now (always, without turns) */
bool zp_turns_mine(const zp_server *s, const zp_table *t, uint32_t rank);
/* whether rank may be served a pull of sparse t for step `clock` now (its
 * turn, in a round up to that step; always, without turns) */
bool zp_turns_rows_mine(const zp_server *s, const zp_table *t, uint32_t rank, int64_t clock);
/* rank was served a pull of t: the turn is taken until its push */
void zp_turns_take(zp_server *s, zp_table *t, uint32_t rank);
/* a push by rank to t was answered: the turn moves on if it was rank's */
void zp_turns_done(zp_server *s, zp_table *t, uint32_t rank);
/* A reference on the buffer a pull of dense t by rank is served from
 * (tau behind under injection), its version in *served. */
zp_buf *zp_turns_dense_params(zp_server *s, zp_table *t, uint32_t rank, uint64_t *served);
/* Before rank's pull of sparse t is answered: keep the rows' versions if
 * it is served stale. Returns 0, or ZEPS_EINVAL with a message in err
 * (rows of t's dim cannot keep the window). */
int zp_turns_rows_ready(zp_server *s, zp_table *t, uint32_t rank, char *err, size_t errlen);
/* rank's pull of ids[0..n) of sparse t read rows and versions: serve each
 * row tau of its updates behind (in place) if rank is served stale. */
void zp_turns_rows(zp_server *s, zp_table *t, uint32_t rank, const uint64_t *ids, size_t n,
                   float *rows, uint32_t *versions);

/* push.c: PUSH: check, hand to the policy, record, reply, serve. */
void zp_push_on(zp_server *s, zp_request *r);

/* sparse_ops.c: PULL and PUSH of a sparse table, once the worker and the
 * table are checked. The pull always replies; the push returns 0 when
 * applied (the caller replies with *reply_flags) or -1 after replying with
 * an error. */
void zp_sparse_ops_on_pull(zp_server *s, zp_request *r, zp_worker *w, zp_table *t);
int zp_sparse_ops_on_push(zp_server *s, zp_request *r, zp_worker *w, zp_table *t,
                          uint32_t *reply_flags);

/* After the shard's map changed: every pull parked (by the policy) that
 * names an id the map now gives another shard is answered EMOVED, so it
 * is never served from rows this shard no longer owns (a move's commit at
 * its source, op/move.c). */
void zp_sparse_ops_refuse_moved(zp_server *s);

/* Whether the rows ids[0..n) of sparse t would make fit the shard's
 * limits (state/quota.c); false after replying ENOMEM. */
bool zp_sparse_ops_room(zp_server *s, zp_request *r, const zp_table *t, const uint64_t *ids,
                        size_t n);

/* scan.c: SCAN, a page of a table with its optimizer state (rows from a
 * cursor, or a dense slice's elements from an offset); PUT, values and
 * optimizer state written (rows made if missing), applied once per seq. */
void zp_scan_on(zp_server *s, zp_request *r);
void zp_scan_on_put(zp_server *s, zp_request *r);

/* clock.c: CLOCK and BARRIER, the workers' clocks, lost workers. */
void zp_clock_on_clock(zp_server *s, zp_request *r);
void zp_clock_on_barrier(zp_server *s, zp_request *r);
/* Worker w finished clock `finished`: advance its clock and what follows
 * (bounds, sparse expiry). */
void zp_clock_advance(zp_server *s, zp_worker *w, int64_t finished);
/* Answer every worker waiting in the barrier with ERESTARTED. */
void zp_clock_barrier_abort(zp_server *s, int64_t cut, uint64_t set);
/* Timer: declare silent workers lost and, with on_lost_worker = continue,
 * close the rounds and release the waits that no longer need them. */
void zp_clock_check_lost(zp_server *s);
/* Recompute the workers' clock bounds and let the policy close what they
 * release (a sparse table's held bsp rounds; a snapshot if the cut moved).
 * Every change of a worker's clock or liveness goes through here. */
void zp_clock_bounds(zp_server *s);
/* The live workers changed (lost or left under on_lost_worker = continue):
 * close the rounds the smaller quorum completes, serve what waited. */
void zp_clock_quorum_changed(zp_server *s);

/* The lost-worker timeout in effect: lost_worker_timeout_s, or when it is
 * auto (< 0) max(10 s, 5 x request_timeout, 4 x the longest silence of a
 * worker this shard has seen after its first clock); 0 = off. */
double zp_clock_lost_timeout(const zp_server *s);
/* How long a worker's incarnation holds its rank after it was last heard
 * from: the lost-worker timeout, or when that is off max(10 s, 5 x
 * request_timeout). A HELLO of another incarnation is refused within it. */
double zp_clock_lease(const zp_server *s);
/* How long a wait on a lost or departed worker lasts under on_lost_worker
 * = wait: lost_worker_wait_s, or when auto max(10 s, 2 x the timeout). */
double zp_clock_lost_wait(const zp_server *s);

/* waits.c: every held request (parked pull, barrier) names the ranks it
 * waits for in the log every few seconds, and fails with ETIMEDOUT once one
 * of them is gone past lost_worker_wait_s (on_lost_worker = wait). Timer. */
void zp_waits_check(zp_server *s);

/* admin.c: SNAPSHOT, ROLLBACK, BYE. */
void zp_admin_on_snapshot(zp_server *s, zp_request *r);
void zp_admin_on_rollback(zp_server *s, zp_request *r);
void zp_admin_on_bye(zp_server *s, zp_request *r);
/* EVICT (a tool, zepsctl evict): release rank h->evict_rank so that a new
 * incarnation's HELLO takes it. */
void zp_admin_on_evict(zp_server *s, zp_request *r);
/* FINISH (a worker that reached the job's target): from now on every other
 * worker's pulls, parked or new, are answered EFINISHED. */
void zp_admin_on_finish(zp_server *s, zp_request *r);

/* TUNE (declare.c): set table h->table's learning rate in force to
 * h->spec->lr on this shard (a sparse table's lead columns scale with it);
 * answered with an ack, or EINVAL/ETABLE/EOPTIM naming what is wrong. */
void zp_declare_on_tune(zp_server *s, zp_request *r);

/* stats.c: STATS. */
void zp_stats_on(zp_server *s, zp_request *r);

/* record.c: what the shard measures of each update (histograms of the
 * table and the worker, counters, trace). */
void zp_record_push(zp_server *s, zp_table *t, const zp_push *p, zp_trace_kind kind,
                    uint64_t version_applied, double weight, int applied);
/* Record what a policy did with push p (every push of a closed round). */
void zp_record_result(zp_server *s, zp_table *t, const zp_push *p, const zp_push_result *res);
/* Record an answered dense pull that waited wait_us parked and was served
 * the slice at version_sent (older than the newest under cluster.inject). */
void zp_record_pull(zp_server *s, zp_table *t, uint32_t rank, int64_t clock, double wait_us,
                    uint64_t version_sent);

/* move.c: MOVE (tools), a step of a live move of a slot set
 * (docs/protocol.md "Moving slots"). */
void zp_move_op_on(zp_server *s, zp_request *r);
/* Timer: whether this shard's move must end by time (its tool went
 * silent past the lease, or its cut-over passed its bound): the caller
 * ends it with zp_move_op_end_by_time, with the map in ZooKeeper once the
 * node says the move did not commit (zp_zkmap_fence). A demoted replica's
 * source part is ended here. */
bool zp_move_op_due(zp_server *s);
/* End the move as its lease or bound passing does: aborted, and the
 * abort logged for the backups. */
void zp_move_op_end_by_time(zp_server *s);
/* The source's commit of its move (its map taken, M's rows dropped, the
 * parked requests answered EMOVED naming the target, the move ended),
 * without a request; the rows dropped. */
uint64_t zp_move_op_commit(zp_server *s);
/* End this shard's part of its move with nothing changed (the target drops
 * what it imported, the source answers what it parked EMOVED naming
 * itself); why goes to the log. The rows dropped. */
uint64_t zp_move_op_abort(zp_server *s, const char *why);

/* move_ask.c: the window between the target's commit and the source's,
 * without coordination (docs/elastic.md, "What each failure does"). The
 * move's lease or bound passed: a source whose last rows were sent asks
 * the target what became of the move, and commits or aborts by its answer
 * (the slots' requests stay parked until then; asked again with a backoff,
 * said in the log and in STATS); true. Anything else: false, nothing done
 * (the caller aborts). */
bool zp_move_ask(zp_server *s);
/* MOVE ASK at the target: committed, or not (then its part of the move
 * ends, and a SLOTS of the move's map is refused from then on:
 * zp_move_fenced). Reached from dispatch.c, as it ends moves through
 * move.c. */
void zp_move_ask_on(zp_server *s, zp_request *r);

/* zkmap.c: the slot map in ZooKeeper (docs/elastic.md, "The map in
 * ZooKeeper"). The role's slots_heard hook (arg: the shard): a primary
 * takes a newer map read from the node. */
void zp_zkmap_heard(void *arg);
/* The move's lease or bound passed: with coordination, read the node
 * and commit or fence it, then abort (at most one read or write in
 * flight); true. Without coordination: false, nothing done. */
bool zp_zkmap_fence(zp_server *s);

/* FOLLOW: a backup asks for the log after its lsn (op/replicate.c). */
void zp_replicate_on_follow(zp_server *s, zp_request *r);

/* REPLICATE from a backup: it applied up to lsn. No reply. */
void zp_replicate_on_ack(zp_server *s, zp_request *r);

#endif
