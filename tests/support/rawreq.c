/*
 * rawreq.c - see rawreq.h. The strictest of the copies this replaced: every
 * send and the reply are asserted, and an expected error is checked for a
 * reply at all, the ERROR op, the code (by number and name) and a message
 * that exists and names what was wrong.
 */
#include "rawreq.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "wire.h"
#include "zeps_errors.h"

void zt_raw_send_frames(void *sock, const void *const *frames, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_ge(zmq_send(sock, frames[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0), 0);
}

void zt_raw_send(void *sock, const Zeps__Header *h, const void *payload, size_t len)
{
    uint8_t buf[4096];
    ck_assert_uint_le(zeps__header__get_packed_size(h), sizeof(buf));
    size_t hl = zeps__header__pack(h, buf);
    const void *frames[2] = {buf, payload};
    size_t lens[2] = {hl, len};
    zt_raw_send_frames(sock, frames, lens, payload ? 2 : 1);
}

Zeps__Header *zt_raw_recv_payload(void *sock, int timeout_ms, zmq_msg_t *payload)
{
    zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
    ck_assert_msg(zmq_poll(&it, 1, timeout_ms) == 1, "no reply within %g s", timeout_ms / 1000.0);
    zp_frames m;
    ck_assert_int_eq(zp_wire_frames_recv(sock, &m, 0), 0);
    Zeps__Header *rep = zp_wire_unpack_header(&m.f[0]);
    if (rep && payload) {
        zmq_msg_init(payload);
        if (m.n > 1)
            zmq_msg_copy(payload, &m.f[1]);
    }
    zp_wire_frames_close(&m);
    ck_assert_ptr_nonnull(rep);
    return rep;
}

Zeps__Header *zt_raw_recv(void *sock, int timeout_ms)
{
    return zt_raw_recv_payload(sock, timeout_ms, NULL);
}

Zeps__Header *zt_raw_req(void *sock, const Zeps__Header *h, const void *payload, size_t len)
{
    zt_raw_send(sock, h, payload, len);
    return zt_raw_recv(sock, ZT_RAW_TIMEOUT_MS);
}

Zeps__Header *zt_raw_req_frames(void *sock, const void *const *frames, const size_t *lens, int n)
{
    zt_raw_send_frames(sock, frames, lens, n);
    return zt_raw_recv(sock, ZT_RAW_TIMEOUT_MS);
}

void zt_raw_expect_error(Zeps__Header *rep, int code, const char *needle)
{
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(rep->op, ZEPS__OP__ERROR);
    ck_assert_msg(rep->error == code, "error %d (%s), expected %d (%s): %s", rep->error,
                  zeps_errname(rep->error), code, zeps_errname(code), rep->error_text);
    ck_assert_msg(rep->error_text && strstr(rep->error_text, needle),
                  "message '%s' does not mention '%s'", rep->error_text, needle);
    zeps__header__free_unpacked(rep, NULL);
}

void zt_raw_tool_header(Zeps__Header *h, Zeps__Op op)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = op;
    h->req_id = 1;
    h->rank = 0xffffffffu;
}

Zeps__Header *zt_raw_req_once(const zt_cluster *cl, int k, const Zeps__Header *h,
                              const void *payload, size_t len)
{
    void *ctx = zmq_ctx_new(), *sock = zt_raw_socket(ctx, cl, k);
    Zeps__Header *rep = zt_raw_req(sock, h, payload, len);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return rep;
}

int zt_raw_slots(const zt_cluster *cl, int k, const zp_slotmap *map)
{
    size_t len = zp_slotmap_wire_size(map);
    void *wire = malloc(len);
    zp_slotmap_encode(map, wire);
    Zeps__Header h;
    zt_raw_tool_header(&h, ZEPS__OP__SLOTS);
    Zeps__Header *rep = zt_raw_req_once(cl, k, &h, wire, len);
    int rc = rep->op == ZEPS__OP__ERROR ? (int)rep->error : 0;
    if (rc)
        printf("SLOTS to shard %d: %s\n", k, rep->error_text);
    zeps__header__free_unpacked(rep, NULL);
    free(wire);
    return rc;
}
