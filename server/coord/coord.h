/*
 * coord.h - the shard's view of the coordination service: who is the
 * primary of its replica set, at which epoch, and which replicas are in
 * sync (docs/replication.md). One module talks to the service, the way a
 * transport carries bytes: the rest of the shard asks it "am I primary,
 * at which epoch?" and hears from it when that changes.
 *
 * A backend is a `zp_coord_ops` table (ZooKeeper today, `zk.c`); the
 * caller picks it by name and never sees the service's own API. Everything
 * runs on the caller's libuv loop thread: every call must be made from it,
 * and every callback (session, role, in-sync set, write completion) runs
 * on it, never from inside another coord call. A callback may call
 * zp_coord_isr_set and the accessors; it must not destroy the coord.
 *
 * Ownership: every pointer a callback receives (views, strings, member
 * arrays) belongs to the coord and is valid only until the callback
 * returns; copy what you keep.
 */
#ifndef ZP_COORD_H
#define ZP_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#define ZP_COORD_MEMBER_MAX 64 /* "m-<incarnation hex>-<10 digits>" and its NUL */
#define ZP_COORD_ISR_MAX    16 /* replicas a shard's in-sync set may name */
#define ZP_COORD_SNAP_MAX   64 /* a snapshot's name (zp_coord_snapshot_name) and its NUL */

/* What happened to the session with the service. */
typedef enum zp_coord_session {
    ZP_COORD_CONNECTED,   /* a new session is up (the first, or after EXPIRED) */
    ZP_COORD_RESUMED,     /* the same session is back after SUSPENDED: nothing was lost */
    ZP_COORD_SUSPENDED,   /* the connection is lost; the session may still live */
    ZP_COORD_EXPIRED,     /* the session is gone with its nodes: stop acknowledging
                             now; a new session is being made */
    ZP_COORD_UNREACHABLE, /* no session within connect_timeout_ms (keeps trying) */
} zp_coord_session;

/* Who is primary. `primary[0] == '\0'`: none now (an election is due or
 * waits for an in-sync replica). */
typedef struct zp_coord_view {
    uint64_t epoch;                    /* the primary's epoch (0 before the first election) */
    char primary[ZP_COORD_MEMBER_MAX]; /* its member node name */
    int primary_replica;               /* its replica index, -1 if none */
    const char *primary_endpoint;      /* where workers reach it ("" if none) */
    bool is_primary;                   /* this replica is the primary at `epoch` */
    const char *me;                    /* this replica's member name ("" before it registered) */
} zp_coord_view;

/* The in-sync set as the service holds it. */
typedef struct zp_coord_isr {
    uint64_t epoch;  /* the epoch of the primary that wrote it */
    int32_t version; /* the node's version: the `version` for zp_coord_isr_set */
    int n;
    const char *const *members; /* n member names */
} zp_coord_isr;

typedef struct zp_coord_cbs {
    void (*session)(void *arg, zp_coord_session ev, const char *why);
    void (*role)(void *arg, const zp_coord_view *v);
    void (*isr)(void *arg, const zp_coord_isr *isr);
    /* the live members (n names, in the service's order) when they changed */
    void (*members)(void *arg, const char *const *live, int n);
    /* the cluster's slot map node (/zeps/<name>/slots, docs/elastic.md "Where
     * the map lives"): its bytes and version, read at each new or resumed
     * session and after each change; len 0 and version -1: no node. May be
     * NULL. */
    void (*slots)(void *arg, const void *map, size_t len, int32_t version);
    void *arg;
} zp_coord_cbs;

typedef struct zp_coord_opts {
    const char *backend;    /* "zookeeper" */
    const char *hosts;      /* "127.0.0.1:2181,10.0.0.2:2181" */
    const char *cluster;    /* cluster name: the nodes live under /zeps/<cluster> */
    int shard, replica;     /* this process */
    uint64_t incarnation;   /* this process's, drawn at its start: names its member
                             * nodes across sessions (znode.h); 0: one is drawn */
    const char *endpoint;   /* this replica's endpoint, published in its member node */
    const char *restored;   /* the snapshot it restored at start (zp_coord_snapshot_name),
                             * published in its member node; NULL or "": none */
    int session_timeout_ms; /* asked of the service (which may clamp it) */
    int connect_timeout_ms; /* UNREACHABLE after this long without a session */
} zp_coord_opts;

/* Counters for logs and metrics. */
typedef struct zp_coord_stats {
    bool connected;
    uint64_t sessions;     /* sessions made */
    uint64_t suspensions;  /* connections lost */
    uint64_t expirations;  /* sessions lost */
    uint64_t elections;    /* elections this replica won */
    uint64_t isr_writes;   /* in-sync set writes that succeeded */
    uint64_t isr_refused;  /* ... refused (stale version, not primary) */
    double disconnected_s; /* how long the current outage has lasted (0 when connected) */
} zp_coord_stats;

typedef struct zp_coord zp_coord;

/* A write's completion: 0, ZEPS_ESTALE (the set changed since `version`:
 * re-read it; or this replica is not the primary), ZEPS_ECLOSED (the
 * connection dropped before the answer: it may or may not have happened,
 * the isr callback will tell), or another zeps_err. */
typedef void (*zp_coord_done)(void *arg, int rc, int32_t new_version);

/* A read's completion: 0 with the node's bytes (valid during the call) and
 * version (-1 and len 0: no node), or ZEPS_ECLOSED / ZEPS_EIO. */
typedef void (*zp_coord_got)(void *arg, int rc, const void *data, size_t len, int32_t version);

/* The backend's operations (one const table per service). */
typedef struct zp_coord_ops {
    const char *name;
    int (*create)(void **impl, uv_loop_t *loop, const zp_coord_opts *o, const zp_coord_cbs *cbs,
                  char *err, size_t errlen);
    void (*destroy)(void *impl);
    int (*isr_set)(void *impl, const char *const *members, int n, int32_t version,
                   zp_coord_done done, void *arg);
    int (*clean_set)(void *impl, const char *snapshot, zp_coord_done done, void *arg);
    void (*view)(void *impl, zp_coord_view *v);
    void (*stats)(void *impl, zp_coord_stats *st);
    int (*slots_get)(void *impl, zp_coord_got got, void *arg);
    int (*slots_set)(void *impl, const void *map, size_t len, int32_t version, zp_coord_done done,
                     void *arg);
} zp_coord_ops;

/* Start talking to the service named by o->backend: connect, make the
 * shard's nodes, register this replica, take part in elections. Returns 0
 * and *out, or a zeps_err with a message (nothing left open). Strings of
 * `o` are copied; `cbs` is copied. */
int zp_coord_new(zp_coord **out, uv_loop_t *loop, const zp_coord_opts *o, const zp_coord_cbs *cbs,
                 char *err, size_t errlen);

/* End the session (its nodes go at once, so a backup takes over without
 * waiting for the session timeout) and close the handles; no callback runs
 * after this. The memory is freed once the loop has run the close
 * callbacks. May block up to a few seconds flushing the close request.
 * Tolerates NULL; sets *cp to NULL. */
void zp_coord_destroy(zp_coord **cp);

/* Primary only: replace the in-sync set by `members` (which must include
 * this replica) if the set is still at `version` (from the last isr
 * callback). `done` (may be NULL) gets the outcome; the members are
 * copied. Returns 0 if the write was sent, ZEPS_ESTATE if this replica is
 * not the primary or has no session, ZEPS_EINVAL for a bad set. */
int zp_coord_isr_set(zp_coord *c, const char *const *members, int n, int32_t version,
                     zp_coord_done done, void *arg);

/* Primary only, stopping on a signal: write the clean-exit record (the
 * node `clean`: this primary's epoch, its member, `snapshot`) saying that
 * the final snapshot `snapshot` holds every update it acknowledged. The
 * write is conditional on the epoch node being where this primary's
 * election left it, so a deposed primary cannot write one. `done` gets 0,
 * ZEPS_ESTALE (the epoch moved: not written) or ZEPS_ECLOSED/EIO. Returns
 * 0 if sent, ZEPS_ESTATE if not primary or no session, ZEPS_EINVAL for a
 * bad name. Any later election makes the record void (docs/replication.md,
 * "A whole shard restarted"). */
int zp_coord_clean_set(zp_coord *c, const char *snapshot, zp_coord_done done, void *arg);

/* Read the cluster's slot map node now (not from a cache); `got` gets it.
 * Returns 0 if sent, ZEPS_ESTATE without a session. */
int zp_coord_slots_get(zp_coord *c, zp_coord_got got, void *arg);

/* Write map[0..len) (copied) to the slot map node if it is still at
 * `version` (-1: create it, if there is none). `done` gets 0, ZEPS_ESTALE
 * (the node changed or exists: read it again), ZEPS_ECLOSED (unknown
 * whether it happened) or ZEPS_EIO. Returns 0 if sent, ZEPS_ESTATE without
 * a session. The version is the whole point: a move commits by this write
 * and a shard whose move ends by time fences the node by it, so that of a
 * tool's commit and a shard's fence only the first lands
 * (docs/elastic.md, "The map in ZooKeeper"). */
int zp_coord_slots_set(zp_coord *c, const void *map, size_t len, int32_t version,
                       zp_coord_done done, void *arg);

/* A snapshot file's name as the nodes carry it: its set id, the
 * incarnation of the server that wrote it and its creation time, which
 * tell two files of the same set apart ("<set>-<incarnation>-<ns>", hex,
 * hex, decimal). */
void zp_coord_snapshot_name(char *buf, size_t len, uint64_t setid, uint64_t incarnation,
                            uint64_t created_ns);

/* The current view (strings valid until the next loop turn). */
void zp_coord_view_get(zp_coord *c, zp_coord_view *v);

/* Whether a message stamped with `epoch` comes from a deposed primary:
 * older than the newest epoch this replica has seen. */
bool zp_coord_is_stale(zp_coord *c, uint64_t epoch);

void zp_coord_stats_get(zp_coord *c, zp_coord_stats *st);

/* The backend of this build named `name` ("zookeeper"), or NULL. */
const zp_coord_ops *zp_coord_find(const char *name);

#endif
