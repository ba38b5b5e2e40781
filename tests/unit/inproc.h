/*
 * inproc.h - a shard in the test's own process, without sockets: a
 * zp_server made by zp_server_new_core whose replies go to a capture sink,
 * and messages built here and handed to zp_dispatch as if received. Used
 * by the in-process tests of tests/unit (test_dispatch.c, test_policy.c,
 * test_sparse_ops.c, test_stats.c and others).
 *
 * Each captured reply owns an unpacked copy of its header and of its
 * payload; zt_shard_free releases them with the shard.
 */
#ifndef ZT_INPROC_H
#define ZT_INPROC_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dispatch.h"
#include "server.h"
#include "slotmap.h"
#include "wire.h"

#define ZT_MAX_REPLIES 256

typedef struct zt_reply {
    Zeps__Header *h;
    char to[16]; /* the identity it was sent to */
    void *data;  /* payload copy or NULL */
    size_t len;
} zt_reply;

typedef struct zt_shard {
    zp_server *s;
    zp_config *cfg;
    zt_reply r[ZT_MAX_REPLIES];
    int n;
    uint64_t seq[8]; /* the next seq of each rank */
    uint64_t req;
} zt_shard;

static inline size_t zt_capture(void *arg, zmq_msg_t *identity, const Zeps__Header *rep,
                                const void *data, size_t len, zmq_free_fn *ffn, void *hint)
{
    zt_shard *z = arg;
    ck_assert_int_lt(z->n, ZT_MAX_REPLIES);
    zt_reply *r = &z->r[z->n++];
    size_t hl = zeps__header__get_packed_size(rep);
    uint8_t *buf = malloc(hl ? hl : 1);
    zeps__header__pack(rep, buf);
    r->h = zeps__header__unpack(NULL, hl, buf);
    free(buf);
    size_t il =
        zmq_msg_size(identity) < sizeof(r->to) - 1 ? zmq_msg_size(identity) : sizeof(r->to) - 1;
    memcpy(r->to, zmq_msg_data(identity), il);
    r->to[il] = 0;
    if (data) {
        r->data = malloc(len ? len : 1);
        memcpy(r->data, data, len);
        r->len = len;
    }
    if (ffn)
        ffn((void *)data, hint); /* the sink owns data from the call on */
    return hl + (data ? len : 0);
}

/* A config of `nworkers` workers and `nshards` shards in mode `mode`; the
 * caller may change it before zt_shard_start. */
static inline zp_config *zt_config(const char *mode, int nworkers, int nshards)
{
    zp_config *c = malloc(sizeof(*c));
    zp_config_keys_defaults(c);
    c->num_workers = nworkers;
    c->num_shards = nshards;
    snprintf(c->consistency, sizeof(c->consistency), "%s", mode);
    return c;
}

static inline zt_shard *zt_shard_start(zp_config *cfg, int shard)
{
    zt_shard *z = calloc(1, sizeof(*z));
    z->cfg = cfg;
    char err[512];
    zp_reply_sink sink = {.send = zt_capture, .arg = z};
    int rc = zp_server_new_core(&z->s, cfg, shard, sink, err, sizeof(err));
    ck_assert_msg(rc == 0, "zp_server_new_core: %s", err);
    return z;
}

static inline zt_shard *zt_shard_new(const char *mode, int nworkers)
{
    return zt_shard_start(zt_config(mode, nworkers, 1), 0);
}

static inline void zt_clear(zt_shard *z)
{
    for (int i = 0; i < z->n; i++) {
        zeps__header__free_unpacked(z->r[i].h, NULL);
        free(z->r[i].data);
    }
    memset(z->r, 0, sizeof(z->r));
    z->n = 0;
}

static inline void zt_shard_free(zt_shard *z)
{
    zt_clear(z);
    zp_server_destroy(&z->s);
    ck_assert_ptr_null(z->s);
    free(z->cfg);
    free(z);
}

/* A request header of `op` from `rank` (its incarnation is rank + 100),
 * with the next seq of that rank. */
static inline Zeps__Header zt_header(zt_shard *z, int op, uint32_t rank)
{
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = op;
    h.rank = rank;
    h.incarnation = rank + 100;
    h.req_id = ++z->req;
    h.seq = rank < 8 ? ++z->seq[rank] : 0;
    return h;
}

/* Dispatch [identity "w<rank>"][h][payload] as if received; returns the
 * number of replies it produced. */
static inline int zt_send(zt_shard *z, const Zeps__Header *h, const void *payload, size_t len)
{
    int before = z->n;
    zp_frames m = {.n = payload ? 3 : 2};
    char id[16];
    snprintf(id, sizeof(id), "w%u", h->rank);
    zmq_msg_init_size(&m.f[0], strlen(id));
    memcpy(zmq_msg_data(&m.f[0]), id, strlen(id));
    size_t hl = zeps__header__get_packed_size(h);
    zmq_msg_init_size(&m.f[1], hl);
    zeps__header__pack(h, zmq_msg_data(&m.f[1]));
    if (payload) {
        zmq_msg_init_size(&m.f[2], len);
        memcpy(zmq_msg_data(&m.f[2]), payload, len);
    }
    m.bytes = strlen(id) + hl + len;
    zp_dispatch(z->s, &m);
    zp_wire_frames_close(&m);
    return z->n - before;
}

/* The last reply. */
static inline zt_reply *zt_last(zt_shard *z)
{
    ck_assert_int_gt(z->n, 0);
    return &z->r[z->n - 1];
}

/* The rank a tool's requests carry. */
#define ZT_TOOL 0xffffffffu

/* MOVE step `st` from the tool (peer `peer`, the map m as the payload if
 * not NULL, `count` for ROWS); its reply, the last of those it produced
 * (COMMIT and ABORT answer the parked requests first). */
static inline zt_reply *zt_move_step(zt_shard *z, uint32_t st, uint32_t peer, const zp_slotmap *m,
                                     uint64_t count)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__MOVE, ZT_TOOL);
    h.move_step = st;
    h.move_peer = peer;
    h.count = count;
    size_t len = m ? zp_slotmap_wire_size(m) : 0;
    uint8_t *wire = m ? malloc(len) : NULL;
    if (m)
        zp_slotmap_encode(m, wire);
    ck_assert_int_ge(zt_send(z, &h, wire, len), 1);
    free(wire);
    return zt_last(z);
}

/* Send a HELLO from `rank`; asserts it was accepted. */
static inline void zt_hello(zt_shard *z, uint32_t rank)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__HELLO, rank);
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__HELLO);
}

/* Declare a dense table of `length` (sgd, lr, constant init 1) as `rank`;
 * returns its id. */
static inline uint32_t zt_declare(zt_shard *z, uint32_t rank, const char *name, uint64_t length,
                                  double lr)
{
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = (char *)name;
    spec.length = length;
    spec.optimizer = "sgd";
    spec.lr = lr;
    spec.init = "constant";
    spec.init_scale = 1.0;
    Zeps__Header h = zt_header(z, ZEPS__OP__DECLARE, rank);
    h.spec = &spec;
    ck_assert_int_eq(zt_send(z, &h, NULL, 0), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__DECLARE);
    return zt_last(z)->h->table;
}

/* A PUSH of n values g to table `table` at [offset, offset + n), computed
 * at `clock` from `version`; returns the replies it produced. */
static inline int zt_push(zt_shard *z, uint32_t rank, uint32_t table, uint64_t offset,
                          const float *g, size_t n, int64_t clock, uint64_t version)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, rank);
    h.table = table;
    h.offset = offset;
    h.count = n;
    h.clock = clock;
    h.data_version = version;
    return zt_send(z, &h, g, n * sizeof(float));
}

/* A PULL of [offset, offset + n) at `clock`; returns the replies. */
static inline int zt_pull(zt_shard *z, uint32_t rank, uint32_t table, uint64_t offset, size_t n,
                          int64_t clock)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__PULL, rank);
    h.table = table;
    h.offset = offset;
    h.count = n;
    h.clock = clock;
    return zt_send(z, &h, NULL, 0);
}

/* Send the DECLARE of a sparse table `name` of dim floats a row (sgd,
 * lr 1, zeros) as rank 0; returns the replies (the reply is zt_last). */
static inline int zt_send_declare_sparse(zt_shard *z, const char *name, uint32_t dim)
{
    Zeps__TableSpec spec;
    zeps__table_spec__init(&spec);
    spec.name = (char *)name;
    spec.kind = 1;
    spec.dim = dim;
    spec.optimizer = "sgd";
    spec.lr = 1.0;
    spec.init = "zeros";
    Zeps__Header h = zt_header(z, ZEPS__OP__DECLARE, 0);
    h.spec = &spec;
    return zt_send(z, &h, NULL, 0);
}

/* The same, checked to succeed; returns the table's id. */
static inline uint32_t zt_declare_sparse(zt_shard *z, const char *name, uint32_t dim)
{
    ck_assert_int_eq(zt_send_declare_sparse(z, name, dim), 1);
    ck_assert_int_eq(zt_last(z)->h->op, ZEPS__OP__DECLARE);
    return zt_last(z)->h->table;
}

/* A sparse PULL of ids[0..n) at `clock`; returns the replies. */
static inline int zt_spull(zt_shard *z, uint32_t rank, uint32_t t, const uint64_t *ids, size_t n,
                           int64_t clock)
{
    Zeps__Header h = zt_header(z, ZEPS__OP__PULL, rank);
    h.table = t;
    h.count = n;
    h.clock = clock;
    return zt_send(z, &h, ids, n * sizeof(uint64_t));
}

/* A sparse PUSH of n ids with gradients g (ng floats: n * dim when valid)
 * and, if rv, row versions; returns the replies. */
static inline int zt_spush(zt_shard *z, uint32_t rank, uint32_t t, const uint64_t *ids, size_t n,
                           const float *g, size_t ng, const uint32_t *rv)
{
    unsigned char buf[4096];
    size_t len = n * 8;
    ck_assert_uint_le(n * 12 + ng * sizeof(float), sizeof(buf));
    memcpy(buf, ids, n * 8);
    memcpy(buf + len, g, ng * sizeof(float));
    len += ng * sizeof(float);
    if (rv) {
        memcpy(buf + len, rv, n * 4);
        len += n * 4;
    }
    Zeps__Header h = zt_header(z, ZEPS__OP__PUSH, rank);
    h.table = t;
    h.count = n;
    h.flags = rv ? ZP_FLAG_ROW_VERSIONS : 0;
    return zt_send(z, &h, buf, len);
}

#endif
