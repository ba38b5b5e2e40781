/*
 * rlog.h - a replicated shard's log (docs/replication.md): on the primary,
 * the requests that change state, numbered (LSN) in the order they were
 * applied, streamed to each backup that follows, and the replies to them
 * held until every in-sync backup has their entry (acks=all: a backup
 * acknowledges an entry kept in its log, and applies it in the same call,
 * follow.c); on a backup, the position it has applied up to.
 *
 * An entry is the request as it arrived (its header frame and payload
 * frames, shared with ZeroMQ's reference counts, never copied): a backup
 * runs the same handlers on the same requests in the same order and holds
 * the same bits. Two entries are the primary's own: under bsp, a round's
 * pushes as one entry with a dense round's sum or a sparse round's merge
 * (rbatch.h), and a
 * worker the lost-worker timer declared lost. With cluster.replicas = 1
 * nothing here runs.
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_REPL_LOG_H
#define ZP_REPL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "config.h"
#include "coord.h"
#include "rbatch.h"
#include "reply.h"
#include "xfer.h"
#include "wire.h"
#include "zeps.pb-c.h"

typedef struct zp_server zp_server;

#define ZP_REPL_WINDOW 4096 /* entries sent to a backup and not yet acknowledged, at most */

/* A backup following this primary. */
typedef struct zp_repl_follower {
    bool on;
    int replica;
    char member[ZP_COORD_MEMBER_MAX];
    zmq_msg_t identity; /* its FOLLOW's routing id at our ROUTER */
    uint64_t acked;     /* the last LSN it acknowledged (kept, and applied in that call) */
    uint64_t sent;      /* the last LSN sent to it */
    uint64_t target;    /* the log's end when it last caught up: reaching it catches up again */
    double since_s;     /* when it last caught up (0: not yet) */
    zp_xfer xfer;       /* the whole state, when the log cannot serve it */
} zp_repl_follower;

typedef struct zp_repl {
    bool on;          /* replicas >= 2 */
    uint64_t lsn;     /* primary: the last LSN assigned; backup: the last applied */
    uint64_t epoch;   /* the epoch entry `lsn` was logged at (0: none yet) */
    uint64_t base;    /* the state the log starts from (0: an empty shard) */
    uint64_t applied; /* entries applied as a backup, ever */
    /* the log: a ring of the newest entries, oldest at `first` */
    zp_repl_entry *ring;
    size_t cap, first, count, bytes, max_bytes;
    zp_repl_follower followers[ZP_MAX_REPLICAS];
    /* replies held for acks=all, in LSN order */
    zp_repl_held *held;
    size_t nheld, capheld, headheld;
    /* the request being handled (between zp_rlog_begin and zp_rlog_end):
     * logged once its handler answered it with no error */
    bool pending;
    zp_repl_entry entry; /* its frames, without an LSN yet */
    zmq_msg_t *identity; /* whom its reply goes to */
    uint64_t req_id;
    uint32_t rank; /* who sent it, and its seq */
    uint64_t seq;
    int error;          /* its reply's error (0: none, or not answered yet) */
    bool duplicate;     /* answered DUPLICATE: nothing to log, its reply waits for the
                           log's end (what it duplicates may not be acknowledged yet) */
    size_t held_from;   /* replies held while it was handled: from this index */
    zp_reply_sink sink; /* the shard's own sink, while pending */
    uint64_t released;  /* the last LSN every in-sync backup has */
    /* the request being handled is a dense bsp push kept for, or closing,
     * its round (zp_rnote_round_push) */
    bool note;
    bool note_clock; /* ... or a CLOCK, which joins a batch that holds pushes */
    uint32_t note_table;
    float *note_sum; /* the round's sum when it closed it (owned) */
    size_t note_nsum;
    uint64_t note_wire;
    bool note_sparse; /* ... or a sparse push kept for round note_round of note_table */
    int64_t note_round;
    zp_rbatch_buf note_rows; /* the merges of the sparse rounds it closed */
    double wake_s;           /* pump again within this long (the stuck guard), or -1 */
    zp_repl_batch batch;     /* the round pushes not logged yet (rbatch.h) */
    uint64_t round_entries;  /* round entries logged (primary) or applied (backup), ever */
    uint64_t round_pushes;   /* pushes those carried without their values */
    uint64_t flushed;        /* round pushes logged one by one instead (a flush), ever */
    uint64_t log_bytes;      /* bytes of the entries logged (primary) or kept (backup), ever */
    uint64_t held_total, dropped_isr, refused;
    uint64_t transfers; /* whole states sent (primary) or taken (backup) */
    double max_lag_s;
} zp_repl;

/* Set up *r from cfg (nothing runs with one replica). */
void zp_rlog_init(zp_repl *r, const zp_config *cfg);
void zp_rlog_fini(zp_repl *r);

/* Whether the request of header h is one the log carries: what changes a
 * shard's state (of MOVE, the steps that change the target's rows or the
 * map: IMPORT, PUT, COMMIT, ABORT). */
bool zp_rlog_logged(const Zeps__Header *h);

/* Primary, from a handler while its request is being logged: the request
 * changed nothing and is answered later, if at all (a move's cut-over
 * parked it): it is not logged. Nothing otherwise. */
void zp_rlog_skip(zp_server *s);

/* Primary, around the handler of a request that may change state (frames
 * f[0..n), its header first, unpacked in h; replies to `identity`): begin
 * keeps the frames (new references: the handler may move them out) and
 * holds every reply made until end. End logs the request as the next
 * entry and sends it to the followers, if its handler did not answer it
 * with an error (a refused request changed nothing, and how it was judged
 * may depend on time); the held replies then wait for the entry's
 * acknowledgements. Returns whether anything is held (false with one
 * replica, or on a backup). */
bool zp_rlog_begin(zp_server *s, zmq_msg_t *f, int n, zmq_msg_t *identity, const Zeps__Header *h);
void zp_rlog_end(zp_server *s);

/* Primary, from a dense push's handler while its request is being logged:
 * the policy kept it for its bsp round (sum NULL) or it closed the round
 * (*sum: the round's sum as applied, nsum floats, which this call takes;
 * *sum is NULL on return). The request then joins the round batch
 * (rbatch.h) instead of being logged alone, its replies held until the
 * batch's entry is acknowledged. Anything else logged flushes the batch
 * first. Does nothing (but free the sum) with one replica, or on a backup. */
void zp_rnote_round_push(zp_server *s, uint32_t table, uint64_t wire, float **sum, size_t nsum);

/* Primary, from CLOCK's handler while its request is being logged: it may
 * join the round batch if the batch holds pushes (rbatch.h). */
void zp_rnote_round_clock(zp_server *s);

/* Primary, from a sparse push's handler while its request is being logged:
 * the policy kept it for round `clock` of `table` under bsp (`wire`: its
 * payload's bytes). It joins the round batch without its rows (rbatch.h).
 * Does nothing with one replica, or on a backup. rnote.c. */
void zp_rnote_round_sparse(zp_server *s, uint32_t table, int64_t clock, uint64_t wire);

/* Primary: the sparse rounds of table `table` closed since the last call,
 * their merges kept in *rr (zp_rround_keep). If a logged request is being
 * handled they go with it into the round batch (rbatch.h; used if it joins
 * the batch); the kept merges are freed either way. rnote.c. */
struct zp_rround;
void zp_rnote_round_rows(zp_server *s, uint32_t table, uint32_t dim, struct zp_rround *rr);

/* Primary: a change outside any request, logged as an entry of its own
 * (header h, packed here, and payload[0..len) as its one payload frame
 * unless payload is NULL; both copied), after the round batch. Nothing
 * with one replica, or on a backup. */
void zp_rlog_own(zp_server *s, const Zeps__Header *h, const void *payload, size_t len);

/* Primary: worker `rank` was declared lost by the lost-worker timer:
 * zp_rlog_own of a CLOCK with ZP_FLAG_LOST naming it. */
void zp_rlog_lost(zp_server *s, uint32_t rank);

/* Primary: a FOLLOW request (op/replicate.c checks who sends it). Registers
 * the follower and starts streaming after its lsn, or the whole state
 * first when the log does not hold what it lacks (xfer.c); 0, or a
 * zeps_err with a message (the caller replies it). */
int zp_rlog_follow(zp_server *s, zmq_msg_t *identity, const Zeps__Header *h, char *err,
                   size_t errlen);

/* Primary: the backup of this identity applied up to h->lsn (or, with
 * ZP_FLAG_STATE, received h->offset bytes of the state sent to it). False
 * if no follower has that identity, or it was never sent that far. */
bool zp_rlog_acked(zp_server *s, zmq_msg_t *identity, const Zeps__Header *h);

/* Backup: its state was replaced by the primary's at entry lsn (logged at
 * `epoch`) of the log starting from `base`: the log it keeps starts there. */
void zp_rlog_reset(zp_repl *r, uint64_t lsn, uint64_t epoch, uint64_t base);

/* Primary: release held replies, send what followers lack, drop from the
 * in-sync set a backup behind past max_lag_ms, flush a round batch that
 * holds the replies its round waits for (ZP_RBATCH_STUCK_S). From the
 * loop's check and timer; afterwards r->wake_s says when to call it again
 * (-1: no need). */
void zp_rlog_pump(zp_server *s);

/* The in-sync rule (the role asks it of every live member, `in_set`
 * saying whether the member is in the set now): a member outside enters
 * once it has caught up with the log's end within max_lag_ms; a member
 * inside stays unless a reply has been held past max_lag_ms for an entry
 * it has not acknowledged. */
bool zp_rlog_in_sync(zp_server *s, const char *member, bool in_set);

/* Backup: keep entry `lsn` (frames f[0..n), new references) in this
 * replica's log, which it serves from if it becomes primary; the log now
 * ends at lsn. */
void zp_rlog_keep(zp_repl *r, zmq_msg_t *f, int n, uint64_t lsn, uint64_t epoch);

/* Replies held now. */
size_t zp_rlog_held_count(const zp_repl *r);

/* Primary: entries the furthest following backup lacks (0 without one). */
uint64_t zp_rlog_lag(const zp_repl *r);

#endif
