/*
 * payload.h - libzeps: a reply's payload delivered where its sub-request
 * says; see payload.c.
 */
#ifndef ZP_PAYLOAD_H
#define ZP_PAYLOAD_H

#include "client.h"
#include "req.h"
#include "wire.h"

/* A PULL's reply m to sub s (dense, compressed or sparse): checked against
 * what s asked and written where s says (m's payload frame may be moved
 * into s, a view). Returns 0, or an error recorded in c. */
int zp_payload_pull(zeps_client *c, zp_req_sub *s, const Zeps__Header *h, zp_frames *m);

/* A SCAN page: its frame kept in s for scan.c, which checks its size
 * against the layout the header names. Returns 0, or EPROTO recorded in c. */
int zp_payload_scan(zeps_client *c, zp_req_sub *s, const Zeps__Header *h, zp_frames *m);

/* A STATS reply's statistics, packed into r (r->stats_buf, r->stats_len:
 * what zeps_stats_raw hands on); none if h carries none. */
void zp_payload_stats(zp_req *r, const Zeps__Header *h);

#endif
