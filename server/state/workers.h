/*
 * workers.h - what a shard knows about each worker rank: its incarnation,
 * clock, which request sequence numbers it has already seen (so a retried
 * request is never applied twice), liveness and counters; and what follows
 * from all of them: the live count, the bsp quorum, the slowest and fastest
 * clocks, and which workers have gone silent (lost).
 */
#ifndef ZP_WORKERS_H
#define ZP_WORKERS_H

#include <stdbool.h>
#include <stdint.h>

#include <zmq.h>

#include "hist.h"

/* Sequence numbers are tracked in a window: the largest seen plus a bitmap of
 * the ZP_SEQ_WINDOW below it. The client keeps fewer requests than that in
 * flight per shard, so an older number can only be a duplicate. */
#define ZP_SEQ_WINDOW 64

/* Pulls of one rank that may wait (parked) on a shard at once, over all its
 * tables: a client has at most 48 requests in flight per shard; the margin
 * covers pulls an earlier incarnation of the rank left waiting. */
#define ZP_PARKED_MAX (4 * ZP_SEQ_WINDOW)

typedef struct zp_worker {
    bool joined;         /* said HELLO at least once */
    bool left;           /* said BYE */
    bool done;           /* said BYE with ZP_FLAG_DONE: ran all its steps (`clock` of them) */
    bool rehello;        /* restored from a snapshot (start-up or rollback): requests are
                            answered ERESTARTED until it says HELLO again */
    bool lost;           /* silent past lost_worker_timeout_s (docs/faults.md) */
    bool evicted;        /* released by an operator (EVICT): a new incarnation may take it */
    double held_warn_s;  /* when a HELLO refused for this live rank was last logged */
    uint64_t lost_count; /* times declared lost */
    uint64_t incarnation;
    int64_t clock;       /* clocks finished */
    int64_t hello_clock; /* clocks finished when this incarnation said HELLO (or was
                            restored): those below it were finished by an earlier one */
    uint64_t max_seq;
    uint64_t window;    /* bit i: max_seq - 1 - i seen */
    uint64_t seq_hi;    /* highest seq of any request of this incarnation (HELLO included) */
    bool jump_logged;   /* a seq jump of this incarnation was logged (once) */
    uint64_t fence;     /* modes with rollback: seq of its latest HELLO; anything it sent
                           before is refused (zp_workers_fenced) */
    bool fence_logged;  /* a request below the fence was logged (once per HELLO) */
    uint64_t seq_jumps; /* requests refused for a seq jump, ever */
    double last_seen_s;
    uint32_t parked; /* pulls of this rank parked now, all tables (at most ZP_PARKED_MAX) */
    uint64_t pushes, pulls, duplicates;
    zp_hist tau; /* staleness of this worker's applied pushes */
    uint64_t dropped, late;
    uint64_t push_bytes_wire, push_bytes_raw;
    uint64_t pull_bytes_wire, pull_bytes_raw, pull_resyncs;

    /* barrier: the generation this worker waits in (0 = not waiting) */
    uint64_t barrier_gen;
    zmq_msg_t barrier_identity;
    uint64_t barrier_req;
} zp_worker;

typedef struct zp_workers {
    int n;
    zp_worker *w;
    int64_t min_clock; /* slowest live worker's clock (never-joined count as 0) */
    int64_t max_clock; /* most advanced worker's clock (never decreases) */
} zp_workers;

void zp_workers_init(zp_workers *ws, int n);
void zp_workers_fini(zp_workers *ws);

/* A worker (re)registered with `incarnation`: a new incarnation forgets the
 * old sequence numbers (its clock is kept: a restarted worker resumes from
 * it). The same incarnation as a record restored from a snapshot keeps the
 * restored window, so retries of requests the snapshot holds stay
 * duplicates. Clears `rehello` and `lost`. Returns true if it was new or
 * changed. */
bool zp_workers_hello(zp_worker *w, uint64_t incarnation);

/* True if a HELLO of `incarnation` must be refused because the rank is
 * held by another incarnation heard from within `lease` s of `now`: joined,
 * not gone (BYE, lost), not restored from a snapshot, not released by an
 * operator (docs/faults.md, "Two processes with one rank"). */
bool zp_workers_held(const zp_worker *w, uint64_t incarnation, double lease, double now);

/* True if `seq` was already recorded for this incarnation. */
bool zp_workers_seen(const zp_worker *w, uint64_t seq);

/* Record `seq` as handled. */
void zp_workers_record(zp_worker *w, uint64_t seq);

/* True if `seq` is more than ZP_SEQ_WINDOW above the highest seq this
 * incarnation has sent (w->seq_hi): no client of this protocol gets there
 * (it keeps fewer requests in flight than the window), and accepting it
 * would push every request still to come below the window, where it counts
 * as a duplicate. */
bool zp_workers_seq_jump(const zp_worker *w, uint64_t seq);

/* Note `seq` as sent by this incarnation (raises w->seq_hi). */
void zp_workers_note_seq(zp_worker *w, uint64_t seq);

/* The worker said HELLO with `seq` in a mode that rolls back (bsp): a
 * HELLO there starts the worker over from a cut (zeps_rollback), and every
 * request it sent before, on a connection it has since closed, belongs to
 * the clocks it gave up. Raises w->fence to `seq`. */
void zp_workers_fence(zp_worker *w, uint64_t seq);

/* True if `seq` was sent before the worker's latest fencing HELLO: such a
 * request may still arrive after it (ZeroMQ reads the old connection and the
 * new one in turn), and must not be applied. */
bool zp_workers_fenced(const zp_worker *w, uint64_t seq);

/* Workers counted as live: under on_lost_worker = continue all but those
 * declared lost or gone with BYE; under wait all of them (a round waits
 * for a departed worker until op/waits.c gives up on it). */
int zp_workers_live(const zp_workers *ws, bool lost_continue);

/* Pushes a bsp round needs before it closes: the workers not lost (under
 * on_lost_worker = continue) minus `backup`, at least 1. */
int zp_workers_quorum(const zp_workers *ws, bool lost_continue, int backup);

/* Recompute min_clock/max_clock over live workers (not left, not lost under
 * on_lost_worker = continue; a worker that has not joined counts with clock
 * 0). */
void zp_workers_update_bounds(zp_workers *ws, bool lost_continue);

/* Declare joined workers silent for `timeout` s as of `now` lost (logged,
 * counted in lost_count). Returns how many were newly declared. */
int zp_workers_check_lost(zp_workers *ws, double timeout, bool lost_continue, double now);

#endif
