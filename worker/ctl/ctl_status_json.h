/*
 * ctl_status_json.h - one shard's statistics as JSON (ctl_status_json.c).
 */
#ifndef ZP_CTL_STATUS_JSON_H
#define ZP_CTL_STATUS_JSON_H

#include "ctl_probe.h"
#include "zeps.pb-c.h"

/* Print shard i's object (no trailing comma or newline) to stdout: `st`
 * decoded from its answer a (NULL: it did not answer, a->why says why),
 * ep where it was asked, and "joined": true when a->ep names a shard that
 * joined at run time. Nothing is taken from the caller. */
void zp_ctl_status_json_shard(int i, const Zeps__ShardStats *st, const answer *a, const char *ep);

#endif
