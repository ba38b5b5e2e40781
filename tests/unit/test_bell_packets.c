/*
 * test_bell_packets.c - the packets of the attach connection (common/
 * bell.c) over a real SOCK_SEQPACKET socket pair, in process: a message
 * sent arrives as one packet and parses back to its header and payload
 * (also with errno left at EINTR by an earlier call, and with a header
 * past the sender's 512-byte stack buffer); a packet of exactly
 * ZP_BELL_MAX bytes is sent, one byte more is refused ESIZE with nothing
 * sent; a full socket or a closed peer is ETRANSPORT at once; a RESEND
 * parses to its req_id.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bell.h"
#include "check_main.h"
#include "wire.h"
#include "zeps_errors.h"

static void pair(int sv[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
}

/* The next packet on fd (none waiting: a test failure), into buf of
 * ZP_BELL_MAX + 1 bytes; its length, *trunc if it was longer. */
static size_t next_packet(int fd, uint8_t *buf, int *trunc)
{
    ssize_t n = recv(fd, buf, ZP_BELL_MAX + 1, MSG_DONTWAIT | MSG_TRUNC);
    ck_assert_msg(n >= 0, "no packet waiting: %s", strerror(errno));
    *trunc = n > ZP_BELL_MAX;
    return (size_t)n;
}

static void assert_none_waiting(int fd)
{
    uint8_t b[16];
    ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
    ck_assert_msg(n < 0 && errno == EAGAIN, "a packet of %zd bytes more", n);
}

/* A header of op PULL and req_id id with an error_text of tlen bytes. */
static Zeps__Header header(uint64_t id, char *text, size_t tlen)
{
    Zeps__Header h = ZEPS__HEADER__INIT;
    h.version = 1;
    h.op = ZEPS__OP__PULL;
    h.req_id = id;
    memset(text, 'x', tlen);
    text[tlen] = '\0';
    h.error_text = text;
    return h;
}

/* Parse packet buf[0..n) as a MESSAGE: its header's req_id and text
 * length, and its payload (len bytes of pattern `fill`, or none). */
static void assert_message(const uint8_t *buf, size_t n, uint64_t id, size_t tlen, size_t len,
                           int fill)
{
    zp_frames m = {0};
    int kind = 0;
    uint64_t rid = 0;
    char err[256] = "";
    ck_assert_int_eq(zp_bell_parse(buf, n, 0, &m, &kind, &rid, err, sizeof(err)), 0);
    ck_assert_int_eq(kind, ZP_BELL_MESSAGE);
    ck_assert_int_eq(m.n, len ? 2 : 1);
    ck_assert_uint_eq(m.bytes, n - ZP_BELL_PRELUDE); /* what the shard counts as bytes in */
    Zeps__Header *h = zp_wire_unpack_header(&m.f[0]);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(h->req_id, id);
    ck_assert_uint_eq(strlen(h->error_text), tlen);
    zeps__header__free_unpacked(h, NULL);
    if (len) {
        ck_assert_uint_eq(zmq_msg_size(&m.f[1]), len);
        const uint8_t *p = zmq_msg_data(&m.f[1]);
        for (size_t i = 0; i < len; i++)
            ck_assert_int_eq(p[i], (uint8_t)(fill + i));
    }
    zp_wire_frames_close(&m);
}

START_TEST(test_message_once)
{
    int sv[2];
    pair(sv);
    uint8_t *buf = malloc(ZP_BELL_MAX + 1), data[300];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(7 + i);
    char text[32];
    Zeps__Header h = header(41, text, 10);
    /* errno as an interrupted call elsewhere left it: one packet still */
    errno = EINTR;
    ck_assert_int_eq(zp_bell_send(sv[0], &h, 1, data, sizeof(data)), 0);
    int trunc;
    size_t n = next_packet(sv[1], buf, &trunc);
    assert_message(buf, n, 41, 10, sizeof(data), 7);
    assert_none_waiting(sv[1]);
    errno = EINTR; /* no payload */
    ck_assert_int_eq(zp_bell_send(sv[0], &h, 0, data, sizeof(data)), 0);
    n = next_packet(sv[1], buf, &trunc);
    assert_message(buf, n, 41, 10, 0, 0);
    assert_none_waiting(sv[1]);
    errno = EINTR;
    ck_assert_int_eq(zp_bell_send_resend(sv[0], 0x1122334455667788ull), 0);
    n = next_packet(sv[1], buf, &trunc);
    ck_assert_uint_eq(n, ZP_BELL_PRELUDE + 8);
    zp_frames m = {0};
    int kind = 0;
    uint64_t rid = 0;
    char err[256] = "";
    ck_assert_int_eq(zp_bell_parse(buf, n, trunc, &m, &kind, &rid, err, sizeof(err)), 0);
    ck_assert_int_eq(kind, ZP_BELL_RESEND);
    ck_assert_uint_eq(rid, 0x1122334455667788ull);
    ck_assert_int_eq(m.n, 0);
    assert_none_waiting(sv[1]);
    free(buf);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* A header of 600-odd bytes is packed into a buffer of its own, not the
 * sender's 512-byte one on the stack. */
START_TEST(test_header_past_stack_buffer)
{
    int sv[2];
    pair(sv);
    uint8_t *buf = malloc(ZP_BELL_MAX + 1), data[64];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(3 * i);
    char text[2048];
    for (size_t tlen = 500; tlen <= 2000; tlen += 500) {
        Zeps__Header h = header(tlen, text, tlen);
        ck_assert_int_eq(zp_bell_send(sv[0], &h, 1, data, 1), 0);
        int trunc;
        size_t n = next_packet(sv[1], buf, &trunc);
        assert_message(buf, n, tlen, tlen, 1, 0);
    }
    free(buf);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* A message that makes a packet of ZP_BELL_MAX bytes exactly is sent
 * whole; one byte more is ESIZE and sends nothing. */
START_TEST(test_largest_packet)
{
    int sv[2];
    pair(sv);
    int big = 4 * ZP_BELL_MAX;
    ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big)), 0);
    uint8_t *buf = malloc(ZP_BELL_MAX + 1), *data = malloc(ZP_BELL_MAX);
    for (size_t i = 0; i < ZP_BELL_MAX; i++)
        data[i] = (uint8_t)(5 + i);
    char text[32];
    Zeps__Header h = header(9, text, 20);
    size_t len = ZP_BELL_MAX - ZP_BELL_PRELUDE - zeps__header__get_packed_size(&h);
    ck_assert_int_eq(zp_bell_send(sv[0], &h, 1, data, len + 1), ZEPS_ESIZE);
    assert_none_waiting(sv[1]);
    ck_assert_int_eq(zp_bell_send(sv[0], &h, 1, data, len), 0);
    int trunc;
    size_t n = next_packet(sv[1], buf, &trunc);
    ck_assert_uint_eq(n, ZP_BELL_MAX);
    ck_assert_int_eq(trunc, 0);
    assert_message(buf, n, 9, 20, len, 5);
    free(data);
    free(buf);
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* A peer that reads nothing: sends go on until the socket is full, then
 * ETRANSPORT at once (the call never waits); a closed peer likewise. */
START_TEST(test_full_and_closed)
{
    int sv[2];
    pair(sv);
    uint8_t data[4096];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)i;
    char text[32];
    Zeps__Header h = header(1, text, 4);
    int rc = 0, sent = 0;
    while (rc == 0 && sent < 100000) {
        rc = zp_bell_send(sv[0], &h, 1, data, sizeof(data));
        sent += rc == 0;
    }
    ck_assert_int_eq(rc, ZEPS_ETRANSPORT);
    ck_assert_int_gt(sent, 0);
    ck_assert_int_eq(zp_bell_send_resend(sv[0], 5), ZEPS_ETRANSPORT);
    uint8_t *buf = malloc(ZP_BELL_MAX + 1);
    for (int i = 0; i < sent; i++) {
        int trunc;
        size_t n = next_packet(sv[1], buf, &trunc);
        assert_message(buf, n, 1, 4, sizeof(data), 0);
    }
    assert_none_waiting(sv[1]); /* the refused sends left nothing */
    free(buf);
    close(sv[1]);
    ck_assert_int_eq(zp_bell_send(sv[0], &h, 0, NULL, 0), ZEPS_ETRANSPORT);
    ck_assert_int_eq(zp_bell_send_resend(sv[0], 5), ZEPS_ETRANSPORT);
    close(sv[0]);
}
END_TEST

/* Parse a packet of a prelude (magic, kind, frames, header_len) and
 * `rest` bytes of 0xab after it: 0 with its kind and frames' sizes in
 * sizes[], or the error with err holding its text; nothing appended. */
static int parse_made(uint32_t magic, uint16_t kind, uint16_t frames, uint32_t hlen, size_t rest,
                      int *out_kind, size_t sizes[2], char *err, size_t errlen)
{
    uint8_t b[64];
    ck_assert_uint_le(ZP_BELL_PRELUDE + rest, sizeof(b));
    memcpy(b, &magic, 4);
    memcpy(b + 4, &kind, 2);
    memcpy(b + 6, &frames, 2);
    memcpy(b + 8, &hlen, 4);
    memset(b + ZP_BELL_PRELUDE, 0xab, rest);
    zp_frames m = {0};
    uint64_t rid = 0;
    err[0] = '\0';
    int rc = zp_bell_parse(b, ZP_BELL_PRELUDE + rest, 0, &m, out_kind, &rid, err, errlen);
    if (rc != 0)
        ck_assert_int_eq(m.n, 0);
    for (int i = 0; i < m.n; i++)
        sizes[i] = zmq_msg_size(&m.f[i]);
    ck_assert_uint_eq(m.bytes, rc == 0 ? rest : 0);
    zp_wire_frames_close(&m);
    return rc;
}

#define REFUSED(words, ...)                                                                        \
    do {                                                                                           \
        ck_assert_int_eq(parse_made(__VA_ARGS__, &kind, sizes, err, sizeof(err)), ZEPS_EPROTO);    \
        ck_assert_msg(strstr(err, words), "'%s' does not say '%s'", err, words);                   \
    } while (0)

/* The edges of what a packet may be: its length at the prelude's, a
 * MESSAGE whose rest is a RESEND's 8 bytes, kinds and frame counts not
 * known, a header past the packet, a truncated packet. */
START_TEST(test_parse_edges)
{
    int kind = 0;
    size_t sizes[2] = {99, 99};
    char err[256];
    /* a prelude alone: a MESSAGE of an empty header (zeps.Header's defaults) */
    ck_assert_int_eq(
        parse_made(ZP_BELL_MAGIC, ZP_BELL_MESSAGE, 1, 0, 0, &kind, sizes, err, sizeof(err)), 0);
    ck_assert_int_eq(kind, ZP_BELL_MESSAGE);
    ck_assert_uint_eq(sizes[0], 0);
    /* 8 bytes after the prelude, as a RESEND's, but a MESSAGE's header */
    kind = 0;
    ck_assert_int_eq(
        parse_made(ZP_BELL_MAGIC, ZP_BELL_MESSAGE, 1, 8, 8, &kind, sizes, err, sizeof(err)), 0);
    ck_assert_int_eq(kind, ZP_BELL_MESSAGE);
    ck_assert_uint_eq(sizes[0], 8);
    ck_assert_int_eq(
        parse_made(ZP_BELL_MAGIC, ZP_BELL_MESSAGE, 2, 3, 8, &kind, sizes, err, sizeof(err)), 0);
    ck_assert_uint_eq(sizes[0], 3);
    ck_assert_uint_eq(sizes[1], 5);
    REFUSED("not the magic", ZP_BELL_MAGIC + 1, ZP_BELL_MESSAGE, 1, 4, 4);
    REFUSED("of kind 3 with 1 frames", ZP_BELL_MAGIC, 3, 1, 4, 4);
    REFUSED("of kind 0 with 2 frames", ZP_BELL_MAGIC, 0, 2, 4, 8);
    REFUSED("of kind 1 with 0 frames", ZP_BELL_MAGIC, ZP_BELL_MESSAGE, 0, 0, 4);
    REFUSED("of kind 1 with 3 frames", ZP_BELL_MAGIC, ZP_BELL_MESSAGE, 3, 4, 8);
    REFUSED("of kind 2 with 0 frames and 4 bytes", ZP_BELL_MAGIC, ZP_BELL_RESEND, 0, 0, 4);
    REFUSED("names a 5-byte header in the 4 bytes", ZP_BELL_MAGIC, ZP_BELL_MESSAGE, 2, 5, 4);
    REFUSED("names a 3-byte header in the 4 bytes", ZP_BELL_MAGIC, ZP_BELL_MESSAGE, 1, 3, 4);
    uint8_t b[ZP_BELL_PRELUDE] = {0};
    zp_frames m = {0};
    uint64_t rid = 0;
    ck_assert_int_eq(zp_bell_parse(b, sizeof(b) - 1, 0, &m, &kind, &rid, err, sizeof(err)),
                     ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "packet of 11 bytes"));
    ck_assert_ptr_nonnull(strstr(err, "shorter than its 12-byte prelude"));
    /* a packet cut by the reader's buffer */
    ck_assert_int_eq(zp_bell_parse(b, sizeof(b), 1, &m, &kind, &rid, err, sizeof(err)),
                     ZEPS_EPROTO);
    ck_assert_ptr_nonnull(strstr(err, "longer than 65536 bytes"));
    ck_assert_int_eq(m.n, 0);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"bell_packets",
         20,
         {test_message_once, test_header_past_stack_buffer, test_largest_packet,
          test_full_and_closed, test_parse_edges, NULL}},
    };
    return zt_run_cases("bell_packets", cases, sizeof(cases) / sizeof(cases[0]));
}
