/*
 * role.h - this process's place in its shard's replica set: primary or
 * backup, at which epoch, and where the primary is (docs/replication.md).
 *
 * With cluster.replicas = 1 there is no coordination and the shard is
 * its own primary, at epoch 0, forever. With replicas >= 2 the role owns
 * the shard's zp_coord (server/coord/): it is made on the shard's loop at
 * start-up and ended at stop, and its callbacks set what this module
 * keeps. The rest of the shard asks (zp_role_serves, zp_role_refusal)
 * and never sees the coordination service.
 *
 * Threading: the loop thread only, as the coord it owns.
 */
#ifndef ZP_ROLE_H
#define ZP_ROLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "config.h"
#include "coord.h"

typedef enum zp_role_kind {
    ZP_ROLE_PRIMARY = 0, /* serves workers (always, with replicas = 1) */
    ZP_ROLE_BACKUP = 1,  /* another replica is the primary */
    ZP_ROLE_NONE = 2,    /* no primary known: an election is due, or no session yet */
} zp_role_kind;

/* The coordination session as last heard (zp_coord_session and two more). */
typedef enum zp_role_session {
    ZP_ROLE_SESSION_OFF = 0,     /* replicas = 1: no coordination */
    ZP_ROLE_SESSION_CONNECTING,  /* started, no session yet */
    ZP_ROLE_SESSION_CONNECTED,   /* a session (new, or resumed) */
    ZP_ROLE_SESSION_SUSPENDED,   /* connection lost; the session may live */
    ZP_ROLE_SESSION_EXPIRED,     /* the session was lost; a new one is being made */
    ZP_ROLE_SESSION_UNREACHABLE, /* no session for connect_timeout_ms */
} zp_role_session;

typedef struct zp_role {
    int replicas, replica; /* cluster.replicas; this process's index */
    int shard;
    zp_coord *coord; /* NULL with replicas = 1, and once stopped */
    zp_role_kind kind;
    uint64_t epoch;      /* the primary's epoch (0: none yet, or replicas = 1) */
    int primary_replica; /* -1: none known */
    char primary_endpoint[ZP_ENDPOINT_MAX];
    char me[ZP_COORD_MEMBER_MAX]; /* this replica's member node ("" before it registered) */
    zp_role_session session;
    bool connected_once;   /* a session was made since start-up */
    bool start_failed;     /* UNREACHABLE before any session: the shard must exit */
    bool fenced;           /* the session expired while this replica was primary: it must
                              not acknowledge anything (the replication code's flag) until
                              it is elected again */
    uint64_t role_changes; /* the role callback's changes of kind or epoch */
    char why[256];         /* the session's last news, for the log and status */
    /* the in-sync set as the service holds it, and the live members: a
     * primary admits the live members `in_sync` says (the replication
     * log's rule, set by the shard; every live member when NULL) */
    bool (*in_sync)(void *arg, const char *member, bool in_set);
    void *in_sync_arg;
    struct {
        int n;
        char m[ZP_COORD_ISR_MAX][ZP_COORD_MEMBER_MAX];
        int32_t version; /* -1: not heard yet */
        uint64_t epoch;  /* of the primary that wrote it */
        bool writing;    /* a write of ours is in flight */
        uint64_t writes; /* writes of ours that landed */
    } isr;
    int nlive;
    char live[ZP_COORD_ISR_MAX][ZP_COORD_MEMBER_MAX];
    /* the cluster's slot map node as last read (docs/elastic.md, "The map
     * in ZooKeeper"): its bytes (owned) and version (-1: no node); the
     * shard's `slots_heard` is called when it is read and when this replica
     * becomes primary, which then takes it before it serves */
    struct {
        bool read;
        uint8_t *map;
        size_t len;
        int32_t version;
    } zkmap;
    void (*slots_heard)(void *arg);
    void *slots_arg;
    struct { /* the clean-exit record's write (zp_role_leave) */
        void (*done)(void *arg, int rc);
        void *arg;
    } leave;
} zp_role;

/* Set up *r for replica `replica` of `cfg->replicas` of shard `shard`:
 * primary at epoch 0 with one replica, else NONE until the coordination
 * service says. Makes nothing. */
void zp_role_init(zp_role *r, const zp_config *cfg, int shard, int replica);

/* With replicas >= 2: start the coordination session on `loop`, publishing
 * `endpoint` (where workers reach this replica) and `restored` (the
 * snapshot restored at start, zp_coord_snapshot_name; "" for none) in a
 * member node named by the process's `incarnation` (server/coord/znode.h). 0, or a zeps_err
 * with a message (nothing left open). With one replica: 0, nothing done. */
int zp_role_start(zp_role *r, uv_loop_t *loop, const zp_config *cfg, const char *endpoint,
                  uint64_t incarnation, const char *restored, char *err, size_t errlen);

/* End the session (a backup takes over at once when this was the primary)
 * and close its handles; the loop must run until they are closed. Safe to
 * call twice and without zp_role_start; not from a role callback. */
void zp_role_stop(zp_role *r);

/* A primary stopping on a signal, its final snapshot `snapshot` written:
 * write the clean-exit record (zp_coord_clean_set); `done` gets the
 * outcome, on the loop, from a coord callback (it must not call
 * zp_role_stop itself). Returns 0 if sent, else a zeps_err (ZEPS_ESTATE:
 * not the primary, or no session) and `done` is never called. */
int zp_role_leave(zp_role *r, const char *snapshot, void (*done)(void *arg, int rc), void *arg);

/* Whether this replica serves workers now (primary, or replicas = 1). */
bool zp_role_serves(const zp_role *r);

/* The refusal a backup (or a replica with no primary known) gives a
 * request: "shard 0 replica 1 is a backup at epoch 2; the primary is
 * replica 0 at tcp://...". Writes len bytes at most, always terminated. */
void zp_role_refusal(const zp_role *r, char *buf, size_t len);

/* "primary" | "backup" | "none", and the session's state as a word
 * ("off", "connecting", "connected", "suspended", "expired", "unreachable"). */
const char *zp_role_kind_name(zp_role_kind k);
const char *zp_role_session_name(zp_role_session s);

/* Primary: write the in-sync set again if the rule (in_sync) now gives
 * another one; at most one write in flight. */
void zp_role_sync_isr(zp_role *r);

/* Replicas in the in-sync set as last heard (replicas = 1: 1). */
int zp_role_in_sync(const zp_role *r);

/* The coordination counters (all zero with replicas = 1). */
void zp_role_coord_stats(const zp_role *r, zp_coord_stats *st);

#endif
