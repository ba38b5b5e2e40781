/*
 * request.h - one request being handled, and the checks every op shares
 * (request.c): the worker it comes from, the table it names, the range it
 * covers. Each check replies with an error itself when it fails, so a
 * handler's path stays linear: check, act, reply.
 */
#ifndef ZP_REQUEST_H
#define ZP_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include <zmq.h>

#include "zeps.pb-c.h"

typedef struct zp_server zp_server;
typedef struct zp_table zp_table;
typedef struct zp_worker zp_worker;

/* Borrowed views into the received frames (dispatch.c owns them). A
 * handler may take the payload frame's bytes (zmq_msg_move). */
typedef struct zp_request {
    zmq_msg_t *identity;
    const Zeps__Header *h;
    zmq_msg_t *payload; /* first payload frame or NULL */
    int npayload;
    /* a backup replaying a round entry (op/batch.c): a dense bsp push
     * without its values (the entry gives its round's sum), which carried
     * `wire` payload bytes at the primary */
    bool phantom;
    uint64_t wire;
} zp_request;

/* The worker a request comes from, if it is a registered worker of this
 * incarnation (a lost one is live again) and the request's seq is not more
 * than ZP_SEQ_WINDOW past the highest it sent (then the seq is noted);
 * otherwise replies with an error (ERESTARTED after a restore, EPROTO for a
 * seq jump) and returns NULL. */
zp_worker *zp_request_worker(zp_server *s, zp_request *r);

/* The table the request names, or NULL after replying ETABLE. */
zp_table *zp_request_table(zp_server *s, zp_request *r);

/* 0 if [offset, offset + count) lies inside a piece this shard holds of
 * dense table *tp (its slice, or another piece of the same table: *tp is
 * set to that piece's record); else -1 after replying EMOVED (the range
 * begins in a piece the shard's map gives another shard) or ERANGE. */
int zp_request_range(zp_server *s, zp_request *r, zp_table **tp);

/* The record of this shard's piece of dense table `t` (any of its pieces)
 * whose [begin, end] holds element `at`, NULL if none; the one after
 * piece p (the next higher begin), NULL after the last. */
zp_table *zp_request_piece_at(zp_server *s, const zp_table *t, uint64_t at);
zp_table *zp_request_piece_after(zp_server *s, const zp_table *p);

/* 0 if the request's clock is in [0, INT64_MAX) (so clock + 1, the clocks
 * finished after it, is representable); else -1 after replying ECLOCK. */
int zp_request_clock(zp_server *s, zp_request *r);

/* 0 if worker w may park one more pull (fewer than ZP_PARKED_MAX wait);
 * else -1 after replying ENOMEM (counted as a refusal of the limits). */
int zp_request_may_park(zp_server *s, zp_request *r, const zp_worker *w);

/* The cut a worker resumes from after a restore: the policy's cut, or the
 * restored clock in modes without cuts. */
int64_t zp_request_resume_cut(const zp_server *s);

/* A payload frame's bytes aligned to `align` (a power of two): the frame's
 * own when they are, else a copy in a frame of its own that replaces it
 * (ZeroMQ hands small frames inside its receive buffer at any offset; large
 * ones are read in place). */
void *zp_request_aligned(zmq_msg_t *frame, size_t align);

#endif
