/*
 * rawreq.h - hand-built requests on a raw DEALER socket, for the tests that
 * speak the wire protocol to a real shard directly (test_protocol,
 * test_cpull, test_dedup, test_sparse_server): send a header and payload
 * frames exactly as given, wait for the reply with a timeout, unpack its
 * header, and check an ERROR reply's code and message; and a tool's
 * request (SLOTS, STATS, MOVE) to one shard on a socket of its own.
 *
 * The socket comes from zt_raw_socket (harness.h) and stays the caller's.
 * Every function here asserts with Check (a send that fails, no reply in
 * time, a reply that does not unpack all fail the test): call them from a
 * test. harness.h's zt_raw_request is the non-asserting form, for a test
 * that wants to word its own failure.
 */
#ifndef ZT_RAWREQ_H
#define ZT_RAWREQ_H

#include <stddef.h>

#include <zmq.h>

#include "harness.h"
#include "slotmap.h"
#include "zeps.pb-c.h"

/* How long zt_raw_req and zt_raw_req_frames wait for a reply. */
#define ZT_RAW_TIMEOUT_MS 5000

/* Send n frames, frames[i] of lens[i] bytes, as one message. */
void zt_raw_send_frames(void *sock, const void *const *frames, const size_t *lens, int n);

/* Send header h packed, then one frame payload[0..len) if payload is not
 * NULL (len may be 0: an empty frame). */
void zt_raw_send(void *sock, const Zeps__Header *h, const void *payload, size_t len);

/* The next reply's header, which must come within timeout_ms; the caller
 * frees it with zeps__header__free_unpacked. */
Zeps__Header *zt_raw_recv(void *sock, int timeout_ms);

/* zt_raw_recv, and the reply's first payload frame into *payload (empty
 * if it has none), which the caller closes. */
Zeps__Header *zt_raw_recv_payload(void *sock, int timeout_ms, zmq_msg_t *payload);

/* zt_raw_send (or zt_raw_send_frames), then zt_raw_recv with
 * ZT_RAW_TIMEOUT_MS: the reply's header, which the caller frees. */
Zeps__Header *zt_raw_req(void *sock, const Zeps__Header *h, const void *payload, size_t len);
Zeps__Header *zt_raw_req_frames(void *sock, const void *const *frames, const size_t *lens, int n);

/* A tool's header for `op` into h: this protocol's version, req_id 1,
 * rank 0xffffffff (no worker); the caller sets the op's own fields. */
void zt_raw_tool_header(Zeps__Header *h, Zeps__Op op);

/* zt_raw_req to shard k of cl, on a socket and context of this call's own
 * (closed before it returns): the reply's header, which the caller frees. */
Zeps__Header *zt_raw_req_once(const zt_cluster *cl, int k, const Zeps__Header *h,
                              const void *payload, size_t len);

/* SLOTS with `map` to shard k of cl, as a tool on a socket of its own:
 * the reply's error code (0: taken; the refusal's text printed). */
int zt_raw_slots(const zt_cluster *cl, int k, const zp_slotmap *map);

/* Check that rep is an ERROR reply with error `code` and an error_text that
 * contains `needle`, then free it (this call takes rep). */
void zt_raw_expect_error(Zeps__Header *rep, int code, const char *needle);

#endif
