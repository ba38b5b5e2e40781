/*
 * persist.h - snapshots of a running shard (persist.c: a forked writer, so
 * serving never pauses; restore.h puts them back). The file format is common/snapshot's; the design
 * is in docs/snapshots.md. Whether snapshots are consistent cuts and whether a rollback is possible
 * is the policy's (ZP_CAP_CUTS, ZP_CAP_ROLLBACK and its cut hook); nothing here compares the mode.
 */
#ifndef ZP_PERSIST_H
#define ZP_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct zp_server zp_server;

/* Writers may overlap: a cut is never skipped because the previous one is
 * still being written (a set missing one shard's file would be useless). */
#define ZP_PERSIST_WRITERS 4

typedef struct zp_writer {
    pid_t pid; /* 0 = free slot */
    uint64_t setid;
    int64_t clock;
    double started;
    char why[24];
} zp_writer;

typedef struct zp_persist {
    zp_writer writers[ZP_PERSIST_WRITERS];
    int64_t last_cut;     /* bsp: the last clock snapshotted (or restored) */
    uint64_t last_period; /* every-seconds: the last period index */
    uint64_t last_setid;
    uint64_t written, failures;
    uint64_t last_failed_setid; /* the set of the last writer that failed (0 = none) */
    struct {                    /* the final snapshot (zp_persist_final), when one was written */
        bool written;
        uint64_t setid, created_ns; /* with the incarnation, the file's identity */
    } final;
    double last_duration_s;
    double last_done_s; /* zp_now_s() when the last snapshot was complete (0 = none) */
    /* on request (SNAPSHOT op): bsp cut armed for clock `requested_cut`
     * (-1 = none) */
    int64_t requested_cut;
    /* auto (Young/Daly) */
    double auto_interval_s;    /* the interval in force (0 = not measured yet) */
    int64_t auto_every_clocks; /* bsp: the interval in clocks, a power of two */
    double round_s;            /* bsp: smoothed seconds per round */
    double last_round_at;      /* when the last round closed */
    uint64_t auto_period_s;    /* other modes: the interval in whole seconds, a power of two */
    uint64_t auto_last;        /* other modes: the last auto set id (wall-clock seconds) */
} zp_persist;

/* Start writing a snapshot of the current state as set `setid` (cut
 * `clock`, -1 for a point in time) in a forked child. Up to
 * ZP_PERSIST_WRITERS run at once; with all busy it first waits for the
 * oldest (logged). Returns 0 when started, ZEPS_ESTATE if snapshots are off,
 * ZEPS_EIO if fork failed. */
int zp_persist_start(zp_server *s, int64_t clock, uint64_t setid, const char *why);

/* SNAPSHOT on request. bsp: a cut at clock `clock` (now if every table is
 * there, else armed for when the last table closes it); other modes: now,
 * as set `setid` (0: the wall-clock second). Returns 0, ZEPS_ESTATE
 * (snapshots off), or ZEPS_ECLOCK when the shard is already past `clock`;
 * a message goes to err. */
int zp_persist_request(zp_server *s, int64_t clock, uint64_t setid, char *err, size_t errlen);

/* A round closed (the op layer calls it when a policy says so): snapshot
 * if it completes a cut every K clocks, on request or auto. */
void zp_persist_on_round(zp_server *s);

/* Reap finished writers (with `block`, wait for every running one). */
void zp_persist_reap(zp_server *s, int block);

/* Timer: reap a finished writer (logging how long it took); start the
 * every-seconds snapshot when its period begins. */
void zp_persist_tick(zp_server *s);

/* Write the shard's state now as one snapshot file of set `setid` in
 * `dir` (no manifest, no pruning: a replica's state transfer, repl/xfer.c),
 * in a forked child like a snapshot writer. Returns the child's pid (the
 * caller reaps it), or -1 if fork failed (logged). */
pid_t zp_persist_fork_file(zp_server *s, const char *dir, uint64_t setid);

/* At exit (snapshot_on_exit): wait for a running writer, then write the
 * final snapshot in-process. Returns 0 or a zeps_err (logged). */
int zp_persist_final(zp_server *s);

#endif
