/*
 * move_fixture.h - what the live-move tests share (move_fixture.c):
 * test_migrate (moves under load, held pulls, duplicate windows),
 * test_migrate_abort (moves that fail or are refused), test_bsp_move,
 * test_move_replicas and the other tests of moves. Every function asserts
 * with Check: call them from a test.
 */
#ifndef ZT_MOVE_FIXTURE_H
#define ZT_MOVE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "slotmap.h"
#include "zeps.h"

#define DIM  2    /* the table's row width */
#define NIDS 3000 /* ids the workers push */

/* n distinct ids from `seed`. */
void zt_move_ids(uint64_t *ids, size_t n, uint64_t seed);

/* Declare the sparse table "emb" (dim DIM, sgd lr 1, zeros): its id. */
uint32_t zt_move_declare(zeps_client *c);

/* A tool client (rank ZEPS_RANK_TOOL) of the cluster. */
zeps_client *zt_move_tool(const zt_cluster *cl);

/* Start zepsctl with args (the arguments after the program, NULL-ended,
 * at most 30), its output to `log`: its pid, the caller's to wait for. */
pid_t zt_move_zepsctl_start(const char *log, char **args);

/* Run zepsctl with args (as zt_move_zepsctl_start), its output to `log`:
 * its exit status (-1 if it did not exit in 120 s). */
int zt_move_zepsctl(const char *log, char **args);

/* Wait up to secs for the zepsctl of pid (zt_move_zepsctl_start), print
 * its log, and check that it exited with `code`. */
void zt_move_zepsctl_exits(pid_t pid, const char *log, double secs, int code);

/* zt_move_zepsctl with its output to <cl's folder>/<name>.log, printed
 * once it ended: its exit status. */
int zt_move_zepsctl_logged(const zt_cluster *cl, const char *name, char **args);

/* The held bsp pushes handed over by the moves that <cl's folder>/<name>.log
 * (a zepsctl log) tells of: the sum over its cut-over lines. */
long zt_move_handed(const zt_cluster *cl, const char *name);

/* Whether the file at path holds `needle`; print it, each line "  | ". */
int zt_move_file_has(const char *path, const char *needle);
void zt_move_print_file(const char *path);

/* Rows of table 0 on shard k, and (if epoch) its slot map epoch. */
uint64_t zt_move_rows(zeps_client *c, int k, uint64_t *epoch);

/* Push every id of ids[0..n) once: column 0 gains 1, column 1 i % 5 + 1. */
void zt_move_populate(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n);

/* The rows of ids[0..n) (a sample) that the default map of 3 gives shards
 * 0 and 1 are `times` zt_move_populate()s. */
void zt_move_check_values(zeps_client *c, uint32_t t, const uint64_t *ids, size_t n, int times);

/* A raw DEALER socket to shard k that said HELLO as worker `rank` of
 * incarnation inc (the caller closes it). */
void *zt_move_raw_worker(void *zctx, const zt_cluster *cl, int k, uint32_t rank, uint64_t inc);

/* MOVE step `step` (peer `peer`, payload wire[0..len) if wire is not
 * NULL) to shard k as a tool, on a socket of its own: the reply's header
 * (the caller frees it). */
Zeps__Header *zt_move_step(const zt_cluster *cl, int k, uint32_t peer, uint32_t step,
                           const void *wire, size_t len);

/* The map of 3 shards over `slots` slots at `epoch`, slot n on n mod 3
 * but slot 0 on `peer`, in its wire form (a static buffer). */
const uint8_t *zt_move_map_wire(uint64_t epoch, uint32_t slots, uint32_t peer);

/* Worker process w (forked; exits, never returns): push every id of
 * zt_move_ids(seed 0) (column 0 gains 1, column 1 w + 1) until `stop`
 * exists and at least 20 times, then write the pushes answered to `out`
 * and leave (BYE). Exit 0, or 1 on any error (printed). */
void zt_move_push_worker(const zt_cluster *cl, int w, const char *stop, const char *out);

/* The endpoint of a shard that joins as index k: ipc:// in the cluster's
 * folder. */
void zt_move_join_endpoint(const zt_cluster *cl, int k, char *buf, size_t len);

/* Start server k with --join at zt_move_join_endpoint(k), that endpoint
 * into buf[0..len). */
void zt_move_join(zt_cluster *cl, int k, char *buf, size_t len);

/* Worker processes 0..n-1 of zt_move_push_worker into pids[], stopping at
 * <dir>/stop, each writing <dir>/worker-W.out. */
void zt_move_workers_start(const zt_cluster *cl, int n, pid_t *pids);

/* Every one of the n workers still runs. */
void zt_move_workers_run(const pid_t *pids, int n);

/* Stop the n workers (the stop file), wait for each to exit 0 (60 s) and
 * sum the pushes they were answered: the sum, and into *weighted the sum
 * of each worker's pushes times w + 1. */
long zt_move_workers_end(const zt_cluster *cl, int n, const pid_t *pids, long *weighted);

/* A sparse PUSH of -1, -1 (one row of DIM) to id in table t as worker
 * `rank` of incarnation inc, with seq and req_id, on raw socket sock (no
 * wait for the reply); and whether a reply comes on sock within ms. */
void zt_move_raw_push(void *sock, uint32_t rank, uint64_t inc, uint32_t t, uint64_t id,
                      uint64_t seq, uint64_t req_id);
bool zt_move_replied(void *sock, int ms);

/* On raw socket sock (worker 1 of incarnation inc, which said HELLO to
 * shard 0, the source of a move whose FREEZE was sent): a push of id (seq
 * 2) parked by the cut-over, and its retry, not answered; abort_move(arg)
 * ends the move; then one EMOVED answer, a late copy of seq 2 answered
 * DUPLICATE, and the resend as seq 3 applied (the row gains 1). */
void zt_move_parked_then_late(void *sock, uint64_t inc, uint32_t t, uint64_t id,
                              void (*abort_move)(void *arg), void *arg);

/* The counter oracle through the final map, without a redirect: every one
 * of the NIDS ids holds `sum` in column 0 and `weighted` in column 1. */
void zt_move_check_oracle(const zt_cluster *cl, long sum, long weighted);

#endif
