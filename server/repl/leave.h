/*
 * leave.h - a replicated primary stopping on SIGTERM/SIGINT (leave.c):
 * it has stopped taking requests, writes its final snapshot (which then
 * holds every update it acknowledged), writes the clean-exit record
 * naming that snapshot while its session still holds the epoch, and only
 * then ends the session. A whole shard stopped this way and started again
 * elects a replica that restored that snapshot (docs/replication.md, "A
 * whole shard restarted").
 *
 * Threading: the shard's loop thread only.
 */
#ifndef ZP_REPL_LEAVE_H
#define ZP_REPL_LEAVE_H

#include <stdbool.h>

#include <uv.h>

typedef struct zp_server zp_server;

typedef struct zp_leave {
    uv_timer_t timer; /* ends the session: at once when the record is written, or at the
                         bound (the session timeout) */
    bool signalled;   /* the stop came from SIGTERM/SIGINT (set by the shard) */
    bool final_done;  /* the final snapshot was attempted here: zp_server_run must not */
    int final_rc;     /* ... and its outcome (a zeps_err) */
} zp_leave;

/* Called by zp_server_stop after the shard stopped taking requests. For a
 * replicated primary stopped by a signal, with snapshot_on_exit: write the final snapshot now
 * and, when written, the clean-exit record; the session ends when the
 * record's write is answered or after coordination.session_timeout_ms.
 * Returns true if it took the session's end in charge (the loop must run
 * on until then), false if it did nothing: the caller ends the session. */
bool zp_leave_start(zp_server *s);

#endif
