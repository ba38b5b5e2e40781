/*
 * restore.h - a shard's state put back from its snapshots (restore.c): the
 * newest restorable set at start-up, and a bsp rollback to a cut.
 */
#ifndef ZP_RESTORE_H
#define ZP_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct zp_server zp_server;

/* Restore the newest restorable set of snapshot_dir for this shard (before
 * serving). Sets skipped (a corrupt file, another shard count) are logged
 * with the reason. Returns 0 (restored, or nothing to restore) or a
 * zeps_err with a message: sets exist but none can be read. */
int zp_restore_newest(zp_server *s, char *err, size_t errlen);

/* A backup takes the whole state of its primary from the snapshot file
 * `path` (repl/xfer.c): its slot map, every table and worker record
 * replaced, workers kept joined as the primary has them. Returns 0 or a zeps_err with a
 * message (then the replica's tables may be partly replaced: it must be
 * sent the state again). */
int zp_restore_transfer(zp_server *s, const char *path, char *err, size_t errlen);

/* bsp recovery: put this shard back to the cut `clock` of set
 * `setid` from its own file of that set (docs/faults.md), for the recovery
 * `recovery` (the restarted shard's incarnation, as ERESTARTED named it; 0
 * from a client that names none). Every worker but `requester` must say
 * HELLO again. A shard that already rolled back for that recovery (a late
 * ROLLBACK from a worker answering it), whose state came from that cut
 * (restored or rolled back to it) and still stands there, or, for recovery
 * 0, already stands at that cut does nothing; one that reached the cut by
 * training rolls back all the same, dropping the pushes it holds for the
 * open round (sent before the recovery). Returns 0 with *rolled_back
 * telling whether the state changed (the caller then answers what waited
 * with ERESTARTED), or a zeps_err with a message (ESTATE: the mode has no
 * rollback; ECLOCK: the shard is behind the cut; EDATA: no such file). */
int zp_restore_rollback(zp_server *s, int64_t clock, uint64_t setid, uint64_t recovery,
                        uint32_t requester, bool *rolled_back, char *err, size_t errlen);

#endif
