/*
 * bell.c - zeps messages as packets of the attach connection; see bell.h.
 * Sending gathers the prelude, the packed header and the payload in one
 * sendmsg (the kernel copies them once); reading checks every length
 * against the packet before anything is copied out of it.
 */
#include "bell.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "alloc.h"
#include "errors.h"
#include "zeps_errors.h"

typedef struct prelude {
    uint32_t magic;
    uint16_t kind;
    uint16_t frames;
    uint32_t header_len;
} prelude;
_Static_assert(sizeof(prelude) == ZP_BELL_PRELUDE, "the prelude is 12 bytes");

static int send_iov(int fd, struct iovec *iov, int n)
{
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t r;
    do
        r = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r < 0 ? ZEPS_ETRANSPORT : 0;
}

int zp_bell_send(int fd, const Zeps__Header *h, int payload, const void *data, size_t len)
{
    size_t hl = zeps__header__get_packed_size(h);
    if (ZP_BELL_PRELUDE + hl + (payload ? len : 0) > ZP_BELL_MAX)
        return ZEPS_ESIZE;
    uint8_t small[512];
    uint8_t *hb = hl <= sizeof(small) ? small : zp_alloc(hl);
    zeps__header__pack(h, hb);
    prelude p = {ZP_BELL_MAGIC, ZP_BELL_MESSAGE, payload ? 2 : 1, (uint32_t)hl};
    struct iovec iov[3] = {{&p, sizeof(p)}, {hb, hl}, {(void *)data, payload ? len : 0}};
    int rc = send_iov(fd, iov, payload && len ? 3 : 2);
    if (hb != small)
        free(hb);
    return rc;
}

int zp_bell_send_resend(int fd, uint64_t req_id)
{
    prelude p = {ZP_BELL_MAGIC, ZP_BELL_RESEND, 0, 0};
    struct iovec iov[2] = {{&p, sizeof(p)}, {&req_id, sizeof(req_id)}};
    return send_iov(fd, iov, 2);
}

void zp_bell_route(uint64_t segment, uint8_t out[ZP_BELL_ROUTE_LEN])
{
    out[0] = 'B';
    memcpy(out + 1, &segment, sizeof(segment));
}

static void frame_copy(zp_frames *m, const uint8_t *b, size_t n)
{
    zmq_msg_init_size(&m->f[m->n], n);
    if (n)
        memcpy(zmq_msg_data(&m->f[m->n]), b, n);
    m->n++;
    m->bytes += n;
}

int zp_bell_parse(const void *p, size_t n, int trunc, zp_frames *m, int *kind, uint64_t *req_id,
                  char *err, size_t errlen)
{
    prelude h;
    if (trunc)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a packet on the attach connection is longer than %d bytes",
                             ZP_BELL_MAX);
    if (n < sizeof(h))
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a packet of %zu bytes on the attach connection is shorter than "
                             "its %d-byte prelude",
                             n, ZP_BELL_PRELUDE);
    memcpy(&h, p, sizeof(h));
    const uint8_t *b = (const uint8_t *)p + sizeof(h);
    size_t rest = n - sizeof(h);
    if (h.magic != ZP_BELL_MAGIC)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a packet on the attach connection starts with 0x%08x, not the "
                             "magic 0x%08x",
                             h.magic, ZP_BELL_MAGIC);
    if (h.kind == ZP_BELL_RESEND && rest == sizeof(*req_id)) {
        memcpy(req_id, b, sizeof(*req_id));
        *kind = ZP_BELL_RESEND;
        return 0;
    }
    if (h.kind != ZP_BELL_MESSAGE || h.frames < 1 || h.frames > 2)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a packet on the attach connection of kind %u with %u frames and "
                             "%zu bytes after its prelude is not a message",
                             h.kind, h.frames, rest);
    if (h.header_len > rest || (h.frames == 1 && h.header_len != rest))
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a packet on the attach connection names a %u-byte header in the "
                             "%zu bytes after its prelude (%u frames)",
                             h.header_len, rest, h.frames);
    frame_copy(m, b, h.header_len);
    if (h.frames == 2)
        frame_copy(m, b + h.header_len, rest - h.header_len);
    *kind = ZP_BELL_MESSAGE;
    return 0;
}
