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

/* Why the clean-exit rule elects nobody (zp_elect_pick_clean). */
typedef enum zp_elect_clean_why {
    ZP_ELECT_CLEAN_OK = 0,   /* a member may be elected */
    ZP_ELECT_CLEAN_NONE,     /* no clean-exit record: the primary did not stop cleanly */
    ZP_ELECT_CLEAN_VOID,     /* the record is of an older epoch: a later primary may have
                                acknowledged updates its snapshot does not hold */
    ZP_ELECT_CLEAN_NO_MATCH, /* no live member restored the snapshot it names */
} zp_elect_clean_why;

/* When no member of the in-sync set lives (zp_elect_pick gave -1): the
 * index in `live` of the member that may be elected on the clean-exit
 * record `clean` (NULL: there is none) - the lowest sequence among the
 * members that restored exactly clean->snapshot (restored[i], "" for
 * nothing), provided the record is of `epoch`, the epoch node's value (any
 * later election voids it). -1 otherwise, with *why saying which. */
int zp_elect_pick_clean(const char *const *live, const char *const *restored, int nlive,
                        const zp_znode_clean *clean, uint64_t epoch, zp_elect_clean_why *why);

#endif
