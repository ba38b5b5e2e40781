/*
 * xfer.h - a whole-state transfer from a primary to a backup whose place
 * in the log the log no longer holds (docs/replication.md): the primary
 * waits for a moment when no table holds pushes of an open bsp round,
 * writes its state at that LSN as one snapshot file in a forked child
 * (state/persist.c), and streams the file in chunks on the FOLLOW
 * connection; the backup writes the chunks to a file of its own, fsyncs
 * it, replaces its state with it (state/restore.c), and follows the log
 * from that LSN on.
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_XFER_H
#define ZP_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "zeps.pb-c.h"

typedef struct zp_server zp_server;
typedef struct zp_repl_follower zp_repl_follower;
typedef struct zp_frames zp_frames;

#define ZP_XFER_CHUNK  (1u << 20) /* bytes of state per REPLICATE message */
#define ZP_XFER_WINDOW 16         /* chunks sent and not acknowledged, at most */

typedef enum zp_xfer_phase {
    ZP_XFER_NONE = 0,  /* the follower takes the log */
    ZP_XFER_WAIT,      /* for a moment with no open round's pushes held */
    ZP_XFER_WRITING,   /* the child writes the state file */
    ZP_XFER_STREAMING, /* chunks go out */
} zp_xfer_phase;

/* The primary's transfer to one follower. */
typedef struct zp_xfer {
    zp_xfer_phase phase;
    pid_t pid;                    /* the writer child */
    uint64_t lsn;                 /* the state is the log up to this entry */
    uint64_t lsn_epoch;           /* which was logged at this epoch */
    char path[ZP_PATH_MAX + 128]; /* the state file (removed when done) */
    unsigned char *data;          /* its bytes, read once written */
    size_t size, sent, acked;
    double started_s;
} zp_xfer;

/* The backup's side: the file being received. */
typedef struct zp_xfer_in {
    int fd; /* -1: none */
    char path[ZP_PATH_MAX + 128];
    uint64_t lsn, size, got;
} zp_xfer_in;

/* Primary: start a transfer to f (its FOLLOW could not be served from the
 * log). */
void zp_xfer_begin(zp_server *s, zp_repl_follower *f);

/* Primary: move f's transfer on (write the file when the shard is quiet,
 * send chunks inside the window); true while it is not done. */
bool zp_xfer_pump(zp_server *s, zp_repl_follower *f);

/* Primary: f acknowledged `bytes` of the state. */
void zp_xfer_acked(zp_server *s, zp_repl_follower *f, uint64_t bytes);

/* Primary: drop f's transfer (the follower went away). */
void zp_xfer_end(zp_repl_follower *f);

/* Backup: a state chunk (h: its REPLICATE header with ZP_FLAG_STATE, m:
 * its frames, the chunk last). Returns 0 with *got the bytes received so
 * far (the caller acknowledges them), 1 when the state is in place (the
 * caller starts its log at h->lsn, zp_rlog_reset, and acknowledges), or -1 if
 * the transfer failed (logged; the caller asks again). */
int zp_xfer_take(zp_server *s, const Zeps__Header *h, zp_frames *m, uint64_t *got);

void zp_xfer_in_init(zp_xfer_in *in);
void zp_xfer_in_fini(zp_xfer_in *in);

#endif
