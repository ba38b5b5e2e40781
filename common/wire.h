/*
 * wire.h - framing of zeps messages on ZeroMQ sockets.
 *
 * A zeps message is multipart: [header][payload...]. On a ROUTER socket the
 * routing identity comes first. The header is a protobuf-c zeps.Header; the
 * payload frames are raw bytes read in place from the received zmq_msg_t and
 * sent, where the caller asks, without copying (zmq_msg_init_data). The
 * protocol itself is described in docs/protocol.md.
 */
#ifndef ZP_WIRE_H
#define ZP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "zeps.pb-c.h"

/* Bumped on any incompatible change of the header or of an op's frames. */
#define ZP_PROTOCOL_VERSION 1

/* Header.flags */
#define ZP_FLAG_CLOCK        0x1u  /* PUSH: also advance the worker's clock to clock + 1 */
#define ZP_FLAG_DUPLICATE    0x2u  /* reply: this request was seen before and not applied again */
#define ZP_FLAG_PARKED       0x4u  /* reply: the request is parked on the server; keep waiting */
#define ZP_FLAG_DROPPED      0x8u  /* PUSH reply: received but not applied (too stale, or late) */
#define ZP_FLAG_ROW_VERSIONS 0x10u /* sparse PUSH: the payload ends with the row versions read */
#define ZP_FLAG_DONE                                                                               \
    0x20u /* BYE: the worker ran all its steps (clock: its last); it will not come back */
/* PULL request: answer with a compressed delta against view_id (docs/compression.md);
 * PULL reply: the payload is C(params - view), to be added to the worker's copy. */
#define ZP_FLAG_PULL_DELTA 0x100u
/* PULL reply to a PULL_DELTA request: the payload is the full f32 values (the
 * worker's view was unknown or stale); the worker's copy is replaced. */
#define ZP_FLAG_PULL_FULL 0x200u
#define ZP_FLAG_REJOINED  0x1000u /* HELLO reply: this rank was known under another incarnation */
#define ZP_FLAG_STATE     0x2000u /* REPLICATE: a chunk of the primary's whole state, or its ack */
#define ZP_FLAG_RESUME                                                                             \
    0x4000u /* HELLO: what was outstanding follows with its own seqs (a resend                     \
               to a restarted shard or a new primary): it raises no bsp fence */
/* Replication entries only (a primary's log, docs/replication.md; refused
 * from anyone else): a PUSH that is a bsp round entry (pushes without
 * their values, and the sums of the rounds they closed), and a CLOCK that
 * declares worker `rank` lost. */
#define ZP_FLAG_ROUND 0x8000u
#define ZP_FLAG_LOST  0x10000u
/* STATS: the stats of each sparse table carry its declaration (spec), so a
 * tool can declare it on a shard that joins (zepsctl shards add) */
#define ZP_FLAG_SPECS 0x20000u
/* CLOCK: slot_epoch is the epoch of the sender's slot map; a shard whose
 * map is newer answers with it as the reply's payload (docs/elastic.md:
 * a worker that never touches a moved slot learns the map by its clocks) */
#define ZP_FLAG_MAP 0x40000u
/* MOVE ROWS reply and MOVE PUT: the page holds round records (bsp pushes
 * of the moving slots held in open rounds, move/handover.h), not rows */
#define ZP_FLAG_HELD 0x80000u

/* Most frames a zeps message has (identity + header + 2 payload frames);
 * receiving more is a protocol error, and the extra frames are discarded. */
/* What the cluster's consistency mode implies for a client, sent in the
 * HELLO reply (Header.caps) and in STATS (ShardStats.caps), so that no
 * client or tool decides anything by the mode's name (docs/protocol.md). */
#define ZP_CAP_CUTS     0x1u /* snapshots are consistent cuts at a common clock */
#define ZP_CAP_ROLLBACK 0x2u /* a restored shard sends the whole job back to its cut */
#define ZP_CAP_BOUND    0x4u /* pulls wait for a staleness bound (TableStats.staleness) */
/* HELLO replies only, not a mode's: the shard answers a CLOCK with flag
 * ZP_FLAG_MAP with its slot map when the sender's is older (a shard older
 * than this refuses the flag, so a client sets it only where this says) */
#define ZP_CAP_MAPS 0x8u
/* The same bits are public in zeps.h as ZEPS_CAP_* (zeps_consistency). */

#define ZP_MAX_FRAMES 4

/* MOVE steps (Header.move_step; docs/protocol.md, "Moving slots"): a
 * tool moves a slot set from source shard A to target shard B. */
#define ZP_MOVE_BEGIN  1 /* to A: payload the map to commit; peer B; bound the tool's lease */
#define ZP_MOVE_IMPORT 2 /* to B: the same map; peer A; bound the tool's lease */
#define ZP_MOVE_ROWS   3 /* to A: the next page of rows to send (count: most rows) */
#define ZP_MOVE_PUT    4 /* to B: a page of rows of table move_table (payload: records) */
#define ZP_MOVE_FREEZE 5 /* to A: cut-over: park requests of the slots for at most bound ms */
#define ZP_MOVE_COMMIT 6 /* to A: payload the map again; A takes it and drops the rows */
#define ZP_MOVE_ABORT  7 /* to A or B: end the move, change nothing (B drops what it took) */
#define ZP_MOVE_ASK    8 /* A to B, no tool: what became of the move committing the payload's map */

/* A received multipart message. */
typedef struct zp_frames {
    int n;        /* frames held in f[] */
    int dropped;  /* frames beyond ZP_MAX_FRAMES, received and discarded */
    size_t bytes; /* total bytes of all frames */
    zmq_msg_t f[ZP_MAX_FRAMES];
} zp_frames;

/* Receive one whole multipart message. flags is 0 or ZMQ_DONTWAIT (for the
 * first frame; the rest of a multipart message is always there at once).
 * Returns 0, or -1 with errno from zmq (EAGAIN when nothing is there). On
 * success the caller owns the frames and releases them with zp_wire_frames_close. */
int zp_wire_frames_recv(void *sock, zp_frames *m, int flags);
void zp_wire_frames_close(zp_frames *m);

/* Decode frame `i` as a header. Returns NULL if it is not a valid
 * zeps.Header; free a result with zeps__header__free_unpacked(h, NULL). */
Zeps__Header *zp_wire_unpack_header(const zmq_msg_t *frame);

/* Pack `h` into a new frame and send it with `flags` (ZMQ_SNDMORE,
 * ZMQ_DONTWAIT). Returns 0 or -1 with errno from zmq. */
int zp_wire_send_header(void *sock, const Zeps__Header *h, int flags);

/* Send `len` bytes at `data` as one frame. With `ffn` non-NULL the bytes are
 * not copied: ZeroMQ calls ffn(data, hint) from its I/O thread once it no
 * longer needs them (also when the send fails). With ffn NULL they are
 * copied. Returns 0 or -1 with errno from zmq. */
int zp_wire_send_data(void *sock, const void *data, size_t len, zmq_free_fn *ffn, void *hint,
                      int flags);

/* Name of an op for messages ("PUSH"); "OP(n)" style for unknown ones is
 * written into a static buffer-free form: returns "UNKNOWN" then. */
const char *zp_wire_op_name(int op);

/* The endpoint ZeroMQ can bind for `ep`, and the one two endpoints are
 * compared by: a tcp host named "localhost" becomes 127.0.0.1 (ZeroMQ
 * binds interfaces and addresses, not host names: "tcp://localhost:P"
 * failed with "No such device"); anything else is copied. Returns false if
 * the result does not fit in len bytes. Thread-safe. */
bool zp_wire_canonical_endpoint(const char *ep, char *out, size_t len);

#endif
