/*
 * reply.c - how a shard answers; see reply.h. Every request gets exactly
 * one reply, built here and delivered by the shard's sink (the socket, or a
 * test's capture); nothing here knows which op it answers.
 */
#include "reply.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "now.h"
#include "server.h"
#include "zeps_errors.h"

#define ERRLEN 512

/* Log a failed send, at most as often as s->logs.send allows. */
static void send_failed(zp_server *s, const char *what, const char *why)
{
    char note[96];
    if (zp_ratelimit_due(&s->logs.send, zp_now_s(), note, sizeof(note)))
        zp_warn("sending %s failed: %s%s", what, why, note);
}

/* Send rep, and data[0..len) as a frame unless NULL (given to ffn either
 * way), on the ROUTER to `identity`: the bytes sent, 0 if not; *unroutable
 * says the ROUTER knows no peer of that identity. */
static size_t router_send(zp_server *s, const zmq_msg_t *identity, const Zeps__Header *rep,
                          const void *data, size_t len, zmq_free_fn *ffn, void *hint,
                          bool *unroutable)
{
    void *sock = s->sock;
    zmq_msg_t id;
    zmq_msg_init(&id);
    zmq_msg_copy(&id, (zmq_msg_t *)identity);
    int more = data ? ZMQ_SNDMORE : 0;
    if (zmq_msg_send(&id, sock, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        *unroutable = zmq_errno() == EHOSTUNREACH;
        zp_debug("reply to a gone peer dropped: %s", zmq_strerror(zmq_errno()));
        zmq_msg_close(&id);
        if (ffn)
            ffn((void *)data, hint);
        return 0;
    }
    if (zp_wire_send_header(sock, rep, more | ZMQ_DONTWAIT) < 0) {
        send_failed(s, zp_wire_op_name(rep->op), zmq_strerror(zmq_errno()));
        if (ffn)
            ffn((void *)data, hint);
        return 0;
    }
    size_t out = zeps__header__get_packed_size(rep);
    if (data) {
        if (zp_wire_send_data(sock, data, len, ffn, hint, ZMQ_DONTWAIT) < 0)
            send_failed(s, "a reply's payload", zmq_strerror(zmq_errno()));
        else
            out += len;
    }
    return out;
}

/* A reply to a request read on an attach connection: a packet there, or
 * (too big for one, or the connection full) on the ROUTER to the client's
 * DEALER; RESEND or dropped when the ROUTER has no route to it yet. */
static size_t conn_send(zp_server *s, const zmq_msg_t *identity, const Zeps__Header *rep,
                        const void *data, size_t len, zmq_free_fn *ffn, void *hint)
{
    zp_shmhost_out out;
    zp_shmhost_send(&s->shm, identity, rep, data, len, &out);
    if (!out.route || !out.payload) { /* sent, dropped, or its payload in the segment */
        if (ffn)
            ffn((void *)data, hint);
        data = NULL;
        ffn = NULL;
    }
    if (!out.route)
        return out.bytes;
    bool unroutable = false;
    size_t n = router_send(s, &out.dealer, &out.rep, data, len, ffn, hint, &unroutable);
    if (unroutable)
        zp_shmhost_unrouted(&s->shm, identity, &out);
    else
        zmq_msg_close(&out.dealer);
    return n;
}

size_t zp_reply_socket_send(void *server, zmq_msg_t *identity, const Zeps__Header *rep,
                            const void *data, size_t len, zmq_free_fn *ffn, void *hint)
{
    zp_server *s = server;
    if (zp_shmhost_is_conn(identity)) /* the request came on an attach connection */
        return conn_send(s, identity, rep, data, len, ffn, hint);
    Zeps__Header placed;
    if (data && s->shm.on) {
        placed = *rep;
        if (zp_shmhost_place(&s->shm, identity, &placed, data, len)) {
            /* copied into the client's segment: the payload is ours to give back now */
            if (ffn)
                ffn((void *)data, hint);
            data = NULL;
            ffn = NULL;
            rep = &placed;
        }
    }
    bool unroutable;
    return router_send(s, identity, rep, data, len, ffn, hint, &unroutable);
}

void zp_reply_init(const zp_server *s, const Zeps__Header *req, Zeps__Header *rep)
{
    zeps__header__init(rep);
    rep->version = ZP_PROTOCOL_VERSION;
    rep->incarnation = s->incarnation;
    rep->shard = (uint32_t)s->shard;
    if (s->role.replicas > 1)
        rep->epoch = s->role.epoch; /* a client learns the primary's epoch from any reply */
    if (req) {
        rep->op = req->op;
        rep->req_id = req->req_id;
        rep->table = req->table;
        rep->seq = req->seq;
    }
}

void zp_reply_send(zp_server *s, zmq_msg_t *identity, const Zeps__Header *rep, const void *data,
                   size_t len, zmq_free_fn *ffn, void *hint)
{
    s->bytes_out += s->sink.send(s->sink.arg, identity, rep, data, len, ffn, hint);
}

void zp_reply_ok(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, uint32_t flags)
{
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.flags = flags;
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}

void zp_reply_count_error(zp_server *s, unsigned op, int code)
{
    s->errors++;
    s->errors_by[op < ZP_SERVER_OPS ? op : 0][code >= 0 && code < ZP_SERVER_CODES ? code : 0]++;
}

void zp_reply_error(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, int code,
                    const char *fmt, ...)
{
    char text[ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.error = code;
    rep.error_text = text;
    zp_reply_count_error(s, req ? (unsigned)req->op : 0, code);
    char note[96];
    if (zp_ratelimit_due(&s->logs.refused, zp_now_s(), note, sizeof(note)))
        zp_info("%s from rank %d refused (%s): %s%s", req ? zp_wire_op_name(req->op) : "message",
                req ? (int)req->rank : -1, zeps_errname(code), text, note);
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}

void zp_reply_error_to(zp_server *s, zmq_msg_t *identity, int op, uint64_t req_id, int code,
                       const char *fmt, ...)
{
    char text[ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    Zeps__Header rep;
    zp_reply_init(s, NULL, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.req_id = req_id;
    rep.error = code;
    rep.error_text = text;
    zp_reply_count_error(s, (unsigned)op, code);
    if (code == ZEPS_EFINISHED) /* the normal end of a job with a target */
        zp_info("held %s answered %s: %s", zp_wire_op_name(op), zeps_errname(code), text);
    else
        zp_warn("held %s answered %s: %s", zp_wire_op_name(op), zeps_errname(code), text);
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}

void zp_reply_restarted(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req, uint64_t req_id,
                        int64_t cut, uint64_t set)
{
    char text[ERRLEN];
    snprintf(text, sizeof(text),
             "shard %d was restored from snapshot set %016" PRIx64 " (clock %lld): say HELLO "
             "again and resume from there",
             s->shard, set, (long long)cut);
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    if (!req)
        rep.req_id = req_id;
    rep.op = ZEPS__OP__ERROR;
    rep.error = ZEPS_ERESTARTED;
    rep.error_text = text;
    rep.cut = cut;
    rep.cut_set = set;
    rep.recovery = s->recovery;
    /* without a request header it answers a parked pull (zp_pull_abort_parked) */
    zp_reply_count_error(s, req ? (unsigned)req->op : ZEPS__OP__PULL, ZEPS_ERESTARTED);
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}

void zp_reply_not_primary(zp_server *s, zmq_msg_t *identity, const Zeps__Header *req)
{
    char text[ERRLEN];
    zp_role_refusal(&s->role, text, sizeof(text));
    Zeps__Header rep;
    zp_reply_init(s, req, &rep);
    rep.op = ZEPS__OP__ERROR;
    rep.error = ZEPS_ENOTPRIMARY;
    rep.error_text = text;
    rep.primary = s->role.primary_endpoint;
    rep.primary_replica = s->role.primary_replica;
    rep.epoch = s->role.epoch;
    zp_reply_count_error(s, req ? (unsigned)req->op : 0, ZEPS_ENOTPRIMARY);
    char note[96];
    if (zp_ratelimit_due(&s->logs.refused, zp_now_s(), note, sizeof(note)))
        zp_info("%s from rank %d refused (ENOTPRIMARY): %s%s",
                req ? zp_wire_op_name(req->op) : "message", req ? (int)req->rank : -1, text, note);
    zp_reply_send(s, identity, &rep, NULL, 0, NULL, NULL);
}
