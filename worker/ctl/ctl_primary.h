/*
 * ctl_primary.h - which replica of each replicated shard is its primary,
 * for the tools that send a shard what only its primary takes (the steps
 * of a live move: ctl_mover.c). ctl_primary.c.
 */
#ifndef ZP_CTL_PRIMARY_H
#define ZP_CTL_PRIMARY_H

#include <stddef.h>

#include "config.h"
#include "curve.h"

/* Where the primary of each of cfg's shards listens, into ep[k] (the
 * caller's array of cfg->num_shards endpoints): every replica is asked
 * STATS (zp_ctl_probe, each wait at most timeout_ms) and the one that
 * says it is primary, not fenced, at the highest epoch, is taken. 0, or ZEPS_ENOTPRIMARY with err
 * naming the first shard without a primary and what each replica said (ep[k] is then replica 0's
 * endpoint for a shard without one). */
int zp_ctl_primary_find(const zp_config *cfg, const zp_curve_client_keys *keys, int timeout_ms,
                        char (*ep)[ZP_ENDPOINT_MAX], char *err, size_t errlen);

#endif
