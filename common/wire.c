/*
 * wire.c - see wire.h.
 */
#include "wire.h"

#include <errno.h>
#include <string.h>

int zp_wire_frames_recv(void *sock, zp_frames *m, int flags)
{
    m->n = 0;
    m->dropped = 0;
    m->bytes = 0;
    for (;;) {
        zmq_msg_t tmp;
        zmq_msg_t *dst = m->n < ZP_MAX_FRAMES ? &m->f[m->n] : &tmp;
        zmq_msg_init(dst);
        if (zmq_msg_recv(dst, sock, m->n == 0 && m->dropped == 0 ? flags : 0) < 0) {
            int e = errno;
            zmq_msg_close(dst);
            zp_wire_frames_close(m);
            errno = e;
            return -1;
        }
        m->bytes += zmq_msg_size(dst);
        int more = zmq_msg_more(dst);
        if (dst == &tmp) {
            zmq_msg_close(&tmp);
            m->dropped++;
        } else {
            m->n++;
        }
        if (!more)
            return 0;
    }
}

void zp_wire_frames_close(zp_frames *m)
{
    for (int i = 0; i < m->n; i++)
        zmq_msg_close(&m->f[i]);
    m->n = 0;
}

Zeps__Header *zp_wire_unpack_header(const zmq_msg_t *frame)
{
    return zeps__header__unpack(NULL, zmq_msg_size((zmq_msg_t *)frame),
                                zmq_msg_data((zmq_msg_t *)frame));
}

int zp_wire_send_header(void *sock, const Zeps__Header *h, int flags)
{
    size_t len = zeps__header__get_packed_size(h);
    zmq_msg_t msg;
    if (zmq_msg_init_size(&msg, len) != 0)
        return -1;
    zeps__header__pack(h, zmq_msg_data(&msg));
    if (zmq_msg_send(&msg, sock, flags) < 0) {
        int e = errno;
        zmq_msg_close(&msg);
        errno = e;
        return -1;
    }
    return 0;
}

int zp_wire_send_data(void *sock, const void *data, size_t len, zmq_free_fn *ffn, void *hint,
                      int flags)
{
    zmq_msg_t msg;
    int rc =
        ffn ? zmq_msg_init_data(&msg, (void *)data, len, ffn, hint) : zmq_msg_init_size(&msg, len);
    if (rc != 0) {
        if (ffn)
            ffn((void *)data, hint);
        return -1;
    }
    if (!ffn && len)
        memcpy(zmq_msg_data(&msg), data, len);
    if (zmq_msg_send(&msg, sock, flags) < 0) {
        int e = errno;
        zmq_msg_close(&msg); /* calls ffn */
        errno = e;
        return -1;
    }
    return 0;
}

const char *zp_wire_op_name(int op)
{
    switch (op) {
    case ZEPS__OP__HELLO:
        return "HELLO";
    case ZEPS__OP__DECLARE:
        return "DECLARE";
    case ZEPS__OP__PULL:
        return "PULL";
    case ZEPS__OP__PUSH:
        return "PUSH";
    case ZEPS__OP__CLOCK:
        return "CLOCK";
    case ZEPS__OP__BARRIER:
        return "BARRIER";
    case ZEPS__OP__STATS:
        return "STATS";
    case ZEPS__OP__BYE:
        return "BYE";
    case ZEPS__OP__ERROR:
        return "ERROR";
    case ZEPS__OP__SNAPSHOT:
        return "SNAPSHOT";
    case ZEPS__OP__ROLLBACK:
        return "ROLLBACK";
    case ZEPS__OP__EVICT:
        return "EVICT";
    case ZEPS__OP__FINISH:
        return "FINISH";
    case ZEPS__OP__TUNE:
        return "TUNE";
    case ZEPS__OP__SCAN:
        return "SCAN";
    case ZEPS__OP__PUT:
        return "PUT";
    case ZEPS__OP__FOLLOW:
        return "FOLLOW";
    case ZEPS__OP__REPLICATE:
        return "REPLICATE";
    case ZEPS__OP__SLOTS:
        return "SLOTS";
    case ZEPS__OP__MOVE:
        return "MOVE";
    default:
        return "UNKNOWN";
    }
}

bool zp_wire_canonical_endpoint(const char *ep, char *out, size_t len)
{
    static const char local[] = "tcp://localhost:";
    int n;
    if (strncmp(ep, local, sizeof(local) - 1) == 0)
        n = snprintf(out, len, "tcp://127.0.0.1:%s", ep + sizeof(local) - 1);
    else
        n = snprintf(out, len, "%s", ep);
    return n >= 0 && (size_t)n < len;
}
