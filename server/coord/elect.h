/*
 * elect.h - who may become primary, decided from what the service holds
 * (docs/replication.md, "Election"): the live member with the lowest
 * sequence number among those in the in-sync set. Pure functions.
 */
#ifndef ZP_ELECT_H
#define ZP_ELECT_H

#include <stdbool.h>

#include "znode.h"

/* The index in `live` (member names, any order) of the member that should
 * be primary: the lowest sequence among those whose process is in `isr`
 * (a member node made again after its session expired counts: the same
 * process, the same state; znode.h), or among all of them while the set
 * names nobody (before the first election). -1 if no live member may be
 * primary (every in-sync replica is gone: the shard waits for one rather
 * than lose acknowledged updates). */
int zp_elect_pick(const char *const *live, int nlive, const zp_znode_isr *isr);

/* Whether `member`'s process is named in `isr`. */
bool zp_elect_in_isr(const zp_znode_isr *isr, const char *member);

/* The in-sync set a new primary `me` writes at `epoch`: `me` first, then
 * the members of `old` whose process is still live, by their live node's
 * name. */
void zp_elect_next_isr(zp_znode_isr *next, const zp_znode_isr *old, const char *const *live,
                       int nlive, const char *me, uint64_t epoch);

#endif
