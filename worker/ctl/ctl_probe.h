/*
 * ctl_probe.h - `zepsctl status` asking shards one by one (ctl_probe.c).
 */
#ifndef ZP_CTL_PROBE_H
#define ZP_CTL_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "curve.h"

/* What one shard answered: the packed ShardStats, or why there is none. */
typedef struct answer {
    void *buf; /* malloc'ed; NULL if the shard did not answer */
    size_t len;
    char why[320];
    bool refused;             /* the shard refused our CURVE key (a socket monitor saw it) */
    char ep[ZP_ENDPOINT_MAX]; /* a shard that joined at run time: where it listens; else "" */
    bool retired;             /* the newest slot map retires it (zp_ctl_probe_joined) */
} answer;

/* Send STATS straight to replica `replica` of shards [first, first + n) of
 * cfg (replica 0: the servers' endpoints), each on its own
 * DEALER socket (with CURVE, watched by a socket monitor), and collect into
 * a[] the replies that come before `deadline` (zp_now_s() time), or why
 * there is none: no answer (within timeout_ms, the caller's whole wait, as
 * the message says), a wrong shard, or a refused key (a[k].refused, said at
 * once). The caller owns a[] and frees each a[k].buf. */
void zp_ctl_probe(const zp_config *cfg, const zp_curve_client_keys *keys, int first, int n,
                  int replica, double deadline, int timeout_ms, answer *a);

/* Ask the shards that joined at run time, those the newest slot map among
 * the cluster file's shards names past them (learnt as `zepsctl shards
 * add` learns them: zp_ctl_mover_joined), for STATS, each request waiting
 * at most timeout_ms: returns how many there are (at most max; 0 when none
 * joined or no shard of the file answered HELLO), with a[j] the answer of
 * shard base + j (base: the file's shard count) and a[j].ep its endpoint.
 * A shard that map retires is not asked (it may be stopped for good):
 * a[j].retired, and file[k].retired for the file's shards k < nfile. The
 * caller owns a[] and frees each a[j].buf. */
int zp_ctl_probe_joined(const char *conf, int timeout_ms, answer *file, int nfile, answer *a,
                        int max);

#endif
