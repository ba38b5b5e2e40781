/*
 * znode.h - the coordination service's layout for one shard: the paths of
 * its nodes and what each node holds, as text (docs/replication.md, "The
 * znode layout"). Pure functions: no service, no loop; any backend that
 * stores paths and small values can use them.
 *
 *   /zeps/<cluster>/shards/<k>/members/m-<session>-<seq>  "<replica> <endpoint> <restored>"
 *   /zeps/<cluster>/shards/<k>/epoch                      "<epoch>"
 *   /zeps/<cluster>/shards/<k>/primary                    "<epoch> <member> <replica> <endpoint>"
 *   /zeps/<cluster>/shards/<k>/isr                        "<epoch>[ <member>...]"
 *   /zeps/<cluster>/shards/<k>/clean                      "<epoch> <member> <snapshot>"
 *   /zeps/<cluster>/slots                                 the slot map's wire form (binary)
 *
 * <restored> and <snapshot> name one snapshot file exactly (a
 * ZP_COORD_SNAP_MAX string, "-" for none): zp_coord_snapshot_name.
 */
#ifndef ZP_ZNODE_H
#define ZP_ZNODE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "coord.h"

#define ZP_ZNODE_PATH_MAX 256
#define ZP_ZNODE_TREE     6 /* nodes from /zeps down to .../members */

typedef struct zp_znode_paths {
    char tree[ZP_ZNODE_TREE][ZP_ZNODE_PATH_MAX]; /* parents first, made persistent */
    char members[ZP_ZNODE_PATH_MAX];
    char epoch[ZP_ZNODE_PATH_MAX];
    char primary[ZP_ZNODE_PATH_MAX];
    char isr[ZP_ZNODE_PATH_MAX];
    char clean[ZP_ZNODE_PATH_MAX];
    char slots[ZP_ZNODE_PATH_MAX]; /* the cluster's slot map, one for every shard */
} zp_znode_paths;

/* A member node's contents: its replica, where workers reach it, and the
 * snapshot it restored at start ("" for none). */
typedef struct zp_znode_member {
    int replica;
    char endpoint[256];
    char restored[ZP_COORD_SNAP_MAX];
} zp_znode_member;

/* The clean-exit record: the primary at `epoch`, member `member`, stopped
 * on a signal after writing its final snapshot `snapshot`, which holds
 * every update it acknowledged. Honoured only at that epoch. */
typedef struct zp_znode_clean {
    uint64_t epoch;
    char member[ZP_COORD_MEMBER_MAX];
    char snapshot[ZP_COORD_SNAP_MAX];
} zp_znode_clean;

/* A primary node's contents. */
typedef struct zp_znode_primary {
    uint64_t epoch;
    char member[ZP_COORD_MEMBER_MAX];
    int replica;
    char endpoint[256];
} zp_znode_primary;

/* An in-sync set's contents. */
typedef struct zp_znode_isr {
    uint64_t epoch;
    int n;
    char m[ZP_COORD_ISR_MAX][ZP_COORD_MEMBER_MAX];
} zp_znode_isr;

/* The paths of shard `shard` of cluster `cluster` (a name of letters,
 * digits, '.', '_' and '-'). Returns 0 or ZEPS_ECONFIG with a message. */
int zp_znode_paths_make(zp_znode_paths *p, const char *cluster, int shard, char *err,
                        size_t errlen);

/* The sequence number the service appended to a member name, or -1 if
 * the name is not "m-<incarnation>-<digits>". */
int64_t zp_znode_seq(const char *member);

/* "m-<incarnation hex>-": the prefix of a process's member nodes. The
 * incarnation is drawn at the process's start, so the node a replica
 * makes again after its session expired (a new sequence number) names the
 * same process, with the same state: the in-sync set names processes, and
 * a shard whose replicas all lost their sessions at once (a stalled
 * ZooKeeper, a paused host) elects one of them again. A restarted process
 * is a new incarnation: its state came from a snapshot, not the log. */
void zp_znode_member_prefix(char *buf, size_t len, uint64_t incarnation);

/* Whether members a and b are nodes of the same process (their names
 * equal up to the sequence number). */
bool zp_znode_same_process(const char *a, const char *b);

/* Node contents to text and back. The parsers take the bytes as the
 * service returns them (not NUL-terminated) and return 0, or ZEPS_EPROTO
 * for contents zeps did not write. */
int zp_znode_primary_format(char *buf, size_t len, const zp_znode_primary *p);
int zp_znode_primary_parse(const char *data, int len, zp_znode_primary *p);
int zp_znode_isr_format(char *buf, size_t len, const zp_znode_isr *s);
int zp_znode_isr_parse(const char *data, int len, zp_znode_isr *s);
int zp_znode_epoch_parse(const char *data, int len, uint64_t *epoch);
int zp_znode_member_format(char *buf, size_t len, const zp_znode_member *m);
int zp_znode_member_parse(const char *data, int len, zp_znode_member *m);
int zp_znode_clean_format(char *buf, size_t len, const zp_znode_clean *c);
int zp_znode_clean_parse(const char *data, int len, zp_znode_clean *c);

#endif
