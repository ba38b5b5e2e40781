/*
 * giveup.h - libzeps: the error a sub-request fails with once its retries
 * are spent, and what a parked one says (giveup.c). Internal to libzeps; req.c calls it.
 */
#ifndef ZP_GIVEUP_H
#define ZP_GIVEUP_H

#include "req.h"

/* Record (zp_fail) why sub s of shard k gives up after its retries and
 * return the code: ERANK for a HELLO refused while a live incarnation
 * holds the rank, the failover's code when no replica was primary, else
 * ETIMEDOUT. Thread: the client's. */
int zp_giveup_error(zeps_client *c, int k, const zp_req_sub *s);

/* Sub s of shard k was answered PARKED with header h (its shard is alive
 * and holds it): its retries start over, and the wait its shard describes
 * (h->error_text) is logged, at most once a minute per request and not
 * before it waited 10 s. Thread: the client's. */
void zp_giveup_parked(zeps_client *c, zp_req_sub *s, int k, const Zeps__Header *h);

#endif
