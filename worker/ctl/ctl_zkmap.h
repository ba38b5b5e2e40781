/*
 * ctl_zkmap.h - the slot map in ZooKeeper as a tool commits a move
 * (ctl_zkmap.c; docs/elastic.md, "The map in ZooKeeper"): with
 * `cluster.coordination`, a move commits by one conditional write of the
 * new map to /zeps/<name>/slots, which the shards watch. A session to
 * read in at the move's begin and one made anew for its commit (the
 * first is not served while the tool copies), used by one thread; every
 * call blocks at most its timeout.
 */
#ifndef ZP_CTL_ZKMAP_H
#define ZP_CTL_ZKMAP_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef struct zp_ctl_zkmap zp_ctl_zkmap;

/* A session with the cluster's ZooKeeper (cfg->coord_zookeeper, nodes
 * under /zeps/<cfg->coord_name>), made within timeout_ms (also the wait
 * for each later answer): 0, or a zeps_err with the reason in err. */
int zp_ctl_zkmap_open(zp_ctl_zkmap **out, const zp_config *cfg, int timeout_ms, char *err,
                      size_t errlen);

/* End the session. Tolerates NULL; sets *zp to NULL. */
void zp_ctl_zkmap_close(zp_ctl_zkmap **zp);

/* A move from shard `source`, whose map is at epoch `have`, begins: read
 * the slot map node and remember its version and that of the source's
 * epoch node (its primary's election), on which the commit is
 * conditional. 0; ZEPS_ETIMEDOUT if the node holds a newer map than the
 * source's (one it has not taken yet: try again); ZEPS_ETRANSPORT if
 * ZooKeeper did not answer; the reason in err. */
int zp_ctl_zkmap_begin(zp_ctl_zkmap *z, int source, uint64_t have, char *err, size_t errlen);

/* The move's commit point: write map wire[0..len) to the node if neither
 * it nor the source's epoch node changed since zp_ctl_zkmap_begin. 0
 * (committed: every shard takes it from the node's watch), ZEPS_ESTALE (a
 * node changed: a shard of the move fenced the map when its part ended by
 * time, another move committed, or the source's primary changed; the move
 * must abort) or another zeps_err (ZooKeeper did not answer, and a read
 * after it did not show the map: a write whose answer was lost may still
 * land, so the outcome is the node's and the caller must not abort the
 * shards, which decide by the node); the reason in err. */
int zp_ctl_zkmap_commit(zp_ctl_zkmap *z, const void *wire, size_t len, char *err, size_t errlen);

#endif
