/*
 * bell.h - zeps messages as packets of the attach connection (bell.c): the
 * SOCK_SEQPACKET unix socket a co-located worker attached its segment on
 * carries its requests and the shard's replies too, one packet per
 * message, so they skip ZeroMQ's I/O threads (docs/protocol.md, "Shared
 * memory", "Headers on the attach connection").
 *
 * A packet is a 12-byte prelude (u32 magic "ZPBL", u16 kind, u16 frames,
 * u32 header length, little-endian as in memory: both ends are on one
 * host), then for a MESSAGE its header and, with frames = 2, its payload
 * (the rest of the packet); for a RESEND, a u64 req_id: the reply to that
 * request did not fit a packet and the shard had no route to the client's
 * DEALER, send the request again over ZeroMQ.
 *
 * A reply that cannot go as a packet (too big, or the connection is full)
 * goes on the shard's ROUTER to the client's DEALER, whose routing id the
 * client sets from the segment's name (zp_bell_route), so the shard can
 * name it; the client's first request after the attach goes on that
 * DEALER, so it is connected before a reply needs it.
 */
#ifndef ZP_BELL_H
#define ZP_BELL_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"
#include "zeps.pb-c.h"

#define ZP_BELL_MAGIC   0x4c42505au /* "ZPBL" */
#define ZP_BELL_PRELUDE 12
/* The largest packet either side sends or takes: a message that does not
 * fit goes over ZeroMQ (a request), or is answered RESEND (a reply). */
#define ZP_BELL_MAX (64 * 1024)

/* The routing id of a client's DEALER while its requests go on the attach
 * connection: 'B', then the segment's name (u64, as in memory); a chosen
 * routing id may not start with a zero, and no attach connection's
 * identity (a zero first) looks so. */
#define ZP_BELL_ROUTE_LEN 9

#define ZP_BELL_MESSAGE 1
#define ZP_BELL_RESEND  2

/* Send header h and, if `payload`, the len bytes at data (copied by the
 * kernel) as one packet on fd without waiting. 0 if sent; ZEPS_ESIZE if it
 * would be larger than ZP_BELL_MAX, ZEPS_ETRANSPORT if the socket took
 * nothing (full: EAGAIN, or closed): nothing was sent either way. */
int zp_bell_send(int fd, const Zeps__Header *h, int payload, const void *data, size_t len);

/* Send a RESEND packet for req_id on fd: 0, or ZEPS_ETRANSPORT. */
int zp_bell_send_resend(int fd, uint64_t req_id);

/* The DEALER routing id for segment `segment` into out. */
void zp_bell_route(uint64_t segment, uint8_t out[ZP_BELL_ROUTE_LEN]);

/* Read packet p[0..n) (trunc: the packet was longer than the buffer it was
 * read into). A MESSAGE: its frames appended to m (copied; the header
 * first), *kind = ZP_BELL_MESSAGE. A RESEND: *kind = ZP_BELL_RESEND and
 * *req_id. Returns 0, or ZEPS_EPROTO with the reason in err and nothing
 * appended. m must have room for 2 more frames. */
int zp_bell_parse(const void *p, size_t n, int trunc, zp_frames *m, int *kind, uint64_t *req_id,
                  char *err, size_t errlen);

#endif
