/*
 * rmsg.c - see rmsg.h.
 */
#include "rmsg.h"

#include "server.h"

void zp_rmsg_header(const zp_server *s, Zeps__Header *h, Zeps__Op op, uint64_t epoch)
{
    zeps__header__init(h);
    h->version = ZP_PROTOCOL_VERSION;
    h->op = op;
    h->rank = 0xffffffffu;
    h->shard = (uint32_t)s->shard;
    h->incarnation = s->incarnation;
    h->replica = (uint32_t)s->replica;
    h->epoch = epoch;
    h->lsn = s->repl.lsn;
    h->lsn_epoch = s->repl.epoch;
    h->log_base = s->repl.base;
}

int zp_rmsg_send_to(zp_server *s, zmq_msg_t *identity, const Zeps__Header *h, bool more)
{
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, identity);
    if (zmq_msg_send(&id, s->sock, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        return -1;
    }
    return zp_wire_send_header(s->sock, h, (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0 ? -1 : 0;
}
