/*
 * client_internal.h - what the parts of libzeps share and do not export:
 * client.c runs requests; sbatch.c builds sparse payloads and reads sparse
 * replies. Not installed.
 */
#ifndef ZP_CLIENT_INTERNAL_H
#define ZP_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "zeps.h"

/* Error-feedback residuals of a sparse table, one row per id pushed (sbatch.c). */
typedef struct zp_rowres zp_rowres;
void zp_rowres_free(zp_rowres **rp);

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
