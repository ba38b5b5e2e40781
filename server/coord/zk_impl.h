/*
 * zk_impl.h - what the ZooKeeper backend's files share (zk.c: the nodes,
 * membership, evaluation and election; zk_clean.c: the clean-exit record
 * and the rule that elects on it; zk_req.c: the request tracker, below
 * both; zk_slots.c: the slot map node). Calls go down: zk.c calls zk_clean.c, which hands its pick
 * back through the callback it is given. Private to server/coord/: nothing outside includes it.
 *
 * Ownership: a `req` is made by zp_zk_req_new for one asynchronous call
 * and freed in that call's completion (the client answers every request
 * exactly once, with ZCLOSING at close).
 */
#ifndef ZP_ZK_IMPL_H
#define ZP_ZK_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

#include "coord.h"
#include "zk_session.h"
#include "znode.h"

#define EVAL_READS 6
#define MAX_LIVE   64

typedef struct zk zk;

/* This replica may stand on the clean-exit record (zk.c's take-over). */
typedef void (*zp_zk_stand_fn)(zk *z);

struct zk {
    zp_coord_cbs cbs;
    zp_znode_paths paths;
    int shard, replica;
    uint64_t incarnation; /* names this process's member nodes */
    char endpoint[256];
    char restored[ZP_COORD_SNAP_MAX]; /* the snapshot restored at start ("" none) */
    zp_zk_session *sess;
    uint64_t gen; /* bumped at every expiry */
    bool closing, tree_done, tree_failed, joining, electing;
    char me[ZP_COORD_MEMBER_MAX];
    struct { /* the evaluation in flight: what the reads returned */
        bool running, dirty, failed;
        int pending;
        int nlive;
        char live[MAX_LIVE][ZP_COORD_MEMBER_MAX];
        bool has_primary;
        zp_znode_primary primary;
        zp_znode_isr isr;
        int32_t isr_version, epoch_version;
        uint64_t epoch;
        bool has_clean; /* a clean-exit record exists (and reads as zeps wrote it) */
        zp_znode_clean clean;
        int32_t clean_version;
    } ev;
    struct {            /* the members' contents, read when the clean-exit rule is asked */
        uint64_t round; /* answers of an older round are dropped */
        int pending, n;
        bool failed;
        char live[MAX_LIVE][ZP_COORD_MEMBER_MAX];
        char restored[MAX_LIVE][ZP_COORD_SNAP_MAX];
        char last_why[900];   /* the last waiting reason logged (logged again when it changes) */
        zp_zk_stand_fn stand; /* from the last zp_zk_clean_consider */
    } cl;
    struct { /* what the callbacks were last told */
        bool has, is_primary;
        zp_znode_primary primary;
        uint64_t max_epoch;
        int32_t isr_version; /* -1: not yet told */
        int nlive;           /* -1: not yet told */
        char live[MAX_LIVE][ZP_COORD_MEMBER_MAX];
    } told;
    uint64_t elections, isr_writes, isr_refused;
};

typedef struct req {
    zk *z;
    uint64_t gen;
    uint64_t round; /* zk_clean.c's reads: the round they belong to */
    int idx;        /* ... and the member they read */
    bool last;      /* the last request of a batch (tree) */
    zp_coord_done done;
    zp_coord_got got; /* a read's (zk_slots.c) */
    void *arg;
    zoo_op_result_t res[4];
} req;

/* A request's tracker for zk `z`'s current session (zk_req.c). */
req *zp_zk_req_new(zk *z);

/* The request's zk if its answer still matters (same session, not
 * closing), else NULL. Frees nothing. */
zk *zp_zk_req_live(const void *data);

zhandle_t *zp_zk_req_handle(zk *z);

/* A write's answer as a zeps_err: 0, ZEPS_ESTALE (a version moved),
 * ZEPS_ECLOSED (unknown whether it happened: the connection or session
 * went), ZEPS_EIO. */
int zp_zk_req_write_rc(int rc);

/* A write's completion: frees the request `data` (which stops being valid)
 * and gives its zk, callback and argument; returns -1 when the zk is being
 * destroyed (call nothing), else the answer as zp_zk_req_write_rc gives it
 * (ZEPS_ECLOSED too when the session it was sent in is gone). */
int zp_zk_req_end_write(const void *data, int rc, zk **z, zp_coord_done *done, void **arg);

/* No in-sync member lives and no primary exists: read the live members'
 * contents and, if the clean-exit record allows this replica, call
 * `stand` (on the loop, from a read's completion); else log why the shard
 * waits (zk_clean.c). */
void zp_zk_clean_consider(zk *z, zp_zk_stand_fn stand);

/* The backend's clean_set (zp_coord_clean_set). */
int zp_zk_clean_set(void *impl, const char *snapshot, zp_coord_done done, void *arg);

/* The slot map node (zk_slots.c): watch it, telling the slots callback
 * each version (called at every new or resumed session, before anything
 * else is sent); the backend's slots_get and slots_set. */
void zp_zk_slots_watch(zk *z);
int zp_zk_slots_get(void *impl, zp_coord_got got, void *arg);
int zp_zk_slots_set(void *impl, const void *map, size_t len, int32_t version, zp_coord_done done,
                    void *arg);

#endif
