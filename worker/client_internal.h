/*
 * client_internal.h - what the parts of libzeps share and do not export:
 * client.c runs requests; sbatch.c builds sparse payloads and reads sparse
 * replies. Not installed.
 */
#ifndef ZP_CLIENT_INTERNAL_H
#define ZP_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>
#include <stdbool.h>

#include <zmq.h>

#include "codec.h"
#include "config.h"
#include "curve.h"
#include "zeps.h"
#include "zeps.pb-c.h"

/* Error-feedback residuals of a sparse table, one row per id pushed (sbatch.c). */
typedef struct zp_rowres zp_rowres;
void zp_rowres_free(zp_rowres **rp);

/* Fewer than the server's dedup window (ZP_SEQ_WINDOW = 64) in flight per shard. */
#define MAX_IN_FLIGHT 48

typedef struct zeps_sub zeps_sub;

typedef struct zeps_shard {
    void *sock;
    void *monitor;      /* CURVE: PAIR receiving the socket's handshake failures */
    char handshake[96]; /* CURVE: the last handshake failure seen, for messages */
    char endpoint[ZP_ENDPOINT_MAX];
    uint64_t next_seq;
    uint64_t incarnation; /* the server's, from HELLO */
    zeps_sub *out;        /* sub-requests sent and not yet answered */
    int nout;
    int64_t hello_clock; /* HELLO reply: the clock this worker resumes at on this shard */
    int need_hello;      /* the shard answered ERESTARTED: say HELLO again */
    int rejoined;        /* HELLO reply: the shard knew this rank under another incarnation */
} zeps_shard;

typedef struct zeps_table_info {
    char name[64];
    uint64_t length;
    uint32_t *ids;        /* [nshards] the table's id on each shard */
    uint64_t *version;    /* [nshards] version returned by the last pull */
    const zp_codec_ops *codec; /* push codec, NULL = raw f32 */
    zp_codec_params cparams;
    float *residual;      /* error feedback, length elements, or NULL */
    uint32_t dim;         /* sparse tables: values per row (0 for dense) */
    zp_rowres *row_residual; /* sparse tables with error feedback: per touched row */
    int row_ef;
    const zp_codec_ops *pcodec; /* compressed pulls: codec, NULL = plain pulls */
    zp_codec_params pparams;
    uint64_t *view_id; /* [nshards] the server's name for what the caller's buffer
                          holds of that shard's slice; 0 = nothing (made on first use) */
} zeps_table_info;

struct zeps_client {
    void *zctx;
    int nshards;
    zeps_shard *shards;
    zmq_pollitem_t *items;
    uint32_t rank;
    uint64_t incarnation;
    int nworkers;
    char consistency[16];
    zeps_options opt;
    uint64_t next_req_id;
    zeps_table_info *tables;
    uint32_t ntables, cap_tables;
    zeps_client_stats stats;
    int drop_sends;       /* fault injection: sends still to drop */
    volatile int *interrupt; /* zeps_client_set_interrupt */
    int64_t resume_clock;    /* zeps_resume_clock */
    uint64_t resume_set;     /* the snapshot set of the cut to resume from */
    int abort_all;           /* bsp: a shard restarted; fail every outstanding request */
    int in_rehello;
    int npoll;               /* items polled: shards, then (CURVE) their monitors */
    unsigned monitor_gen;    /* makes each monitor endpoint unique */
    bool curve;
    char curve_server[ZP_CURVE_KEY_LEN + 1], curve_public[ZP_CURVE_KEY_LEN + 1],
        curve_secret[ZP_CURVE_KEY_LEN + 1];
    char err[1024];
};

struct zeps_sub {
    zeps_sub *next;       /* in the shard's list of outstanding subs */
    zeps_req *req;
    int shard;
    uint64_t req_id, seq;
    uint32_t table;       /* id on that shard */
    uint64_t offset, count;
    uint64_t data_version;
    uint32_t flags;
    const void *data;     /* PUSH payload */
    size_t data_len;      /* its bytes */
    void *encoded;        /* compressed payload owned by the sub (data points here) */
    uint32_t codec;
    int compressed;                 /* a compressed PULL: */
    zp_codec_params cparams;        /* the codec's parameters (a copy: tables may move) */
    uint64_t view_id;               /* the view dst holds */
    float *dst;           /* PULL destination (NULL for a view) */
    zmq_msg_t frame;      /* view PULL: the received values */
    int has_frame;
    zeps_sbatch *sb;      /* sparse PULL/PUSH: the batch it belongs to */
    uint64_t deadline_ns;
    int retries;
    int max_retries;
    int done;
};

struct zeps_req {
    zeps_client *c;
    int op;
    int64_t clock;
    uint32_t table;       /* client handle */
    const Zeps__TableSpec *spec;
    uint64_t cut_set; /* ROLLBACK */
    int nsub, ndone;
    int err;
    int view;             /* a zero-copy pull */
    atomic_int zrefs;     /* payload frames ZeroMQ still holds */
    void *stats_buf;
    size_t stats_len;
    zeps_sub subs[];
};

/* --- the request engine (client.c), for tables.c --- */

/* Record a printf-style message as the client's last error; returns code. */
int zp_fail(zeps_client *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A request of `op` with room for nsub sub-requests (freed by zeps_wait). */
zeps_req *zp_req_new(zeps_client *c, int op, int nsub);

/* Add a sub-request for shard k (waiting while k has MAX_IN_FLIGHT out);
 * the caller fills it, then sends it with zp_req_send. */
zeps_sub *zp_req_add(zeps_req *r, int k);
void zp_req_send(zeps_req *r, zeps_sub *s);

/* Wait until every sub-request of r is answered or failed and ZeroMQ
 * released r's payloads; r stays allocated. Returns r's first error. */
int zp_req_finish(zeps_req *r);

/* One shard's part of a sparse request: its payload (borrowed; it must stay
 * valid until the request is waited for), the number of ids in it, flags. */
typedef struct zp_sparse_part {
    int shard;
    const void *data;
    size_t len;
    uint64_t nkeys;
    uint32_t flags;
    uint32_t codec;   /* push: Header.codec of the rows (0: raw f32) */
    size_t raw_len;   /* push: bytes of the rows as f32 */
} zp_sparse_part;

/* Record `msg` as the client's last error; returns code. */
int zp_client_fail(zeps_client *c, int code, const char *msg);

/* 0 and *dim if `table` is a sparse table of c; else an error (recorded). */
int zp_client_sparse_table(zeps_client *c, uint32_t table, uint32_t *dim);

/* Start a sparse PULL (push = 0) or PUSH of batch b: one sub-request per
 * part. Pull replies are handed to zp_sbatch_pull_reply. On success *out is
 * the wait handle. */
int zp_client_sparse_start(zeps_client *c, int push, uint32_t table, int64_t clock,
                           zeps_sbatch *b, const zp_sparse_part *parts, int nparts,
                           zeps_req **out);

/* The push codec of sparse `table` (NULL: raw f32) and its parameters, and
 * where its row residuals live (NULL without error feedback; *residual is
 * created on first use). */
void zp_client_sparse_codec(zeps_client *c, uint32_t table, const zp_codec_ops **codec,
                            const zp_codec_params **params, zp_rowres ***residual);

/* A sparse pull reply from `shard` for batch b: scatter its rows to the
 * batch's positions. Returns 0, or -1 with a message in err when the payload
 * does not fit the request. */
int zp_sbatch_pull_reply(zeps_sbatch *b, int shard, const void *data, size_t len, char *err,
                         size_t errlen);

#endif
