/*
 * redirect.h - libzeps: following an EMOVED redirect (redirect.c,
 * docs/elastic.md). Internal to libzeps; below the request engine, which
 * calls it: it builds pieces and learns maps, req.c sends and finishes.
 */
#ifndef ZP_REDIRECT_H
#define ZP_REDIRECT_H

#include "req.h"
#include "wire.h"

/* Shard k sent its slot map as frame 1 of m (an EMOVED, or a HELLO reply
 * with slot_epoch > 0): take it if its epoch is higher than the client's
 * (a bad map is logged and ignored). Returns the epoch of the shard's map
 * (UINT64_MAX for a bad one). m stays the caller's. */
uint64_t zp_redirect_learn(zeps_client *c, int k, const zp_frames *m);

/* Shard k answered sub s with EMOVED (frames m: the map is
 * m->f[1]): take the map if it is newer than the client's, and say
 * whether s is to be sent again (1: the caller parks it on c->moved and
 * progress() splits it with zp_redirect_split, not before s->split_ns) or
 * failed with the error (0: a piece of an earlier redirect refused at
 * the map it was split by, or by an older one for request_timeout_ms, a
 * compressed push, or a request of another kind). Counts every redirect
 * followed by a newer map in c->stats.slot_redirects (a piece that waits
 * for a shard behind the map is not one). m stays the caller's. */
int zp_redirect_take(zeps_client *c, int k, zp_req_sub *s, const zp_frames *m);

/* The ids of redirected sub s split for sending again: one piece per
 * shard that owns some of them under the client's map (new sub-requests
 * with new seqs, not sent), in a follow-up request that s's request owns
 * from here (freed with it); the caller sends every piece (zp_req_send).
 * s is finished when its last piece is (req.c). NULL if a shard it needs
 * has ZP_REQ_MAX_IN_FLIGHT out: nothing was made; try again later. */
zp_req *zp_redirect_split(zeps_client *c, zp_req_sub *s);

#endif
