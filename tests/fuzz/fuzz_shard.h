/*
 * fuzz_shard.h - a shard in the fuzz program's own process (fuzz_server.c,
 * and fuzz_seeds.c, which records real messages and snapshots from it):
 * made by zp_server_new_core, replies to a sink that drops them, messages
 * handed to zp_dispatch as if received.
 *
 * zf_shard_start puts it in the state the seeds assume: every worker said
 * HELLO (rank r, incarnation r + 100, seq 1) and rank 0 declared three
 * tables (seqs 2..4): dense "w" (64 floats, sgd, id 0), dense "a" (32
 * floats, adam, id 1) and sparse "emb" (rows of 4, adagrad, id 2).
 */
#ifndef ZF_SHARD_H
#define ZF_SHARD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bell.h"
#include "config.h"
#include "dispatch.h"
#include "reply.h"
#include "server.h"
#include "wire.h"
#include "zeps_errors.h"

static const char *const zf_modes[] = {"bsp", "async", "ssp", "weighted"};

/* The reply sink: the replies are not checked, only produced. The sink owns
 * data from the call on. */
static inline size_t zf_drop_reply(void *arg, zmq_msg_t *identity, const Zeps__Header *rep,
                                   const void *data, size_t len, zmq_free_fn *ffn, void *hint)
{
    if (ffn)
        ffn((void *)data, hint);
    return len;
}

/* Dispatch [identity][frames...] as if received. */
static inline void zf_deliver(zp_server *s, const char *id, const void *const *frame,
                              const size_t *flen, int nframes, int dropped)
{
    zp_frames m = {.n = 1 + nframes, .dropped = dropped};
    zmq_msg_init_size(&m.f[0], strlen(id));
    memcpy(zmq_msg_data(&m.f[0]), id, strlen(id));
    m.bytes = strlen(id);
    for (int i = 0; i < nframes; i++) {
        zmq_msg_init_size(&m.f[1 + i], flen[i]);
        if (flen[i])
            memcpy(zmq_msg_data(&m.f[1 + i]), frame[i], flen[i]);
        m.bytes += flen[i];
    }
    zp_dispatch(s, &m);
    zp_wire_frames_close(&m);
}

/* Bytes as a packet of an attach connection (common/bell.h) from `id`:
 * read by the packet parser, then dispatched as a message, or refused
 * EPROTO as the shard refuses it (xport/shmhost.c). */
static inline void zf_deliver_packet(zp_server *s, const char *id, const void *p, size_t n)
{
    zp_frames m = {.n = 1};
    zmq_msg_init_size(&m.f[0], strlen(id));
    memcpy(zmq_msg_data(&m.f[0]), id, strlen(id));
    char err[256] = "a RESEND packet";
    int kind = 0;
    uint64_t req_id;
    if (zp_bell_parse(p, n, 0, &m, &kind, &req_id, err, sizeof(err)) == 0 &&
        kind == ZP_BELL_MESSAGE)
        zp_dispatch(s, &m);
    else
        zp_reply_error(s, &m.f[0], NULL, ZEPS_EPROTO, "%s", err);
    zp_wire_frames_close(&m);
}

/* Apply frames as an entry of the primary's log, as a backup does
 * (zp_dispatch_entry: no identity, replies dropped, the entry's flags such
 * as a bsp round entry's accepted). */
static inline void zf_apply_entry(zp_server *s, const void *const *frame, const size_t *flen,
                                  int nframes)
{
    zmq_msg_t f[3];
    for (int i = 0; i < nframes; i++) {
        zmq_msg_init_size(&f[i], flen[i]);
        if (flen[i])
            memcpy(zmq_msg_data(&f[i]), frame[i], flen[i]);
    }
    zp_dispatch_entry(s, f, nframes);
    for (int i = 0; i < nframes; i++)
        zmq_msg_close(&f[i]);
}

/* Pack h and deliver it alone from rank `rank`. */
static inline void zf_send_header(zp_server *s, uint32_t rank, Zeps__Header *h)
{
    uint8_t buf[512];
    size_t n = zeps__header__get_packed_size(h);
    if (n > sizeof(buf))
        abort();
    zeps__header__pack(h, buf);
    char id[16];
    snprintf(id, sizeof(id), "w%u", rank);
    const void *f[1] = {buf};
    zf_deliver(s, id, f, &n, 1, 0);
}

static inline void zf_declare(zp_server *s, uint64_t *seq, const char *name, uint32_t kind,
                              uint64_t length, uint32_t dim, const char *optimizer)
{
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = (char *)name;
    spec.kind = kind;
    spec.length = length;
    spec.dim = dim;
    spec.optimizer = (char *)optimizer;
    spec.lr = 0.1;
    spec.init = "constant";
    spec.init_scale = 1.0;
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__DECLARE;
    h.incarnation = 100;
    h.req_id = ++*seq;
    h.seq = *seq;
    h.spec = &spec;
    zf_send_header(s, 0, &h);
}

/* A shard of the input's cluster with its workers and tables in place. */
static inline zp_server *zf_shard_start(zp_config *cfg, uint8_t shape)
{
    zp_config_keys_defaults(cfg);
    snprintf(cfg->consistency, sizeof(cfg->consistency), "%s", zf_modes[shape & 3]);
    cfg->num_workers = 1 + (shape >> 2) % 3;
    cfg->num_shards = 1 + ((shape >> 4) & 1);
    zp_server *s;
    char err[512];
    if (zp_server_new_core(&s, cfg, 0, (zp_reply_sink){.send = zf_drop_reply}, err, sizeof(err)))
        abort();
    uint64_t seq[3] = {0};
    for (uint32_t r = 0; r < (uint32_t)cfg->num_workers; r++) {
        Zeps__Header h;
        zeps__header__init(&h);
        h.version = ZP_PROTOCOL_VERSION;
        h.op = ZEPS__OP__HELLO;
        h.rank = r;
        h.incarnation = r + 100;
        h.req_id = ++seq[r];
        h.seq = seq[r];
        zf_send_header(s, r, &h);
    }
    zf_declare(s, &seq[0], "w", 0, 64, 0, "sgd");
    zf_declare(s, &seq[0], "a", 0, 32, 0, "adam");
    zf_declare(s, &seq[0], "emb", 1, 0, 4, "adagrad");
    return s;
}

#endif
