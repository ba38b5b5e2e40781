/*
 * tables.h - the tables a client declared (tables.c), by handle: what the
 * dense transfers (dense.c) and sparse batches (sparse.c) look up before
 * they build requests. Internal to libzeps.
 */
#ifndef ZP_TABLES_H
#define ZP_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "densemap.h"
#include "rowres.h"
#include "zeps.h"

typedef struct zp_table {
    char name[64];
    uint64_t length;
    uint32_t *ids;             /* [ZP_MAX_SHARDS] the table's id on each shard (dense: of
                                  the first ndense) */
    uint64_t *version;         /* [ZP_MAX_SHARDS] version returned by the last pull */
    const zp_codec_ops *codec; /* push codec, NULL = raw f32 */
    zp_codec_params cparams;
    float *residual;         /* error feedback, length elements, or NULL */
    uint32_t dim;            /* sparse tables: values per row (0 for dense) */
    zp_rowres *row_residual; /* sparse tables with error feedback: per touched row */
    int row_ef;
    const zp_codec_ops *pcodec; /* compressed pulls: codec, NULL = plain pulls */
    zp_codec_params pparams;
    uint64_t *view_id; /* [nshards] the server's name for what the caller's buffer
                          holds of that shard's slice; 0 = nothing (made on first use) */
    uint8_t *spec;     /* a sparse table's declaration, packed (join.c declares it on a
                          shard that joins), or NULL */
    size_t spec_len;
} zp_table;

/* The first element of shard k's slice of a dense table of `length`. */
uint64_t zp_tables_slice_begin(uint64_t length, int k, int nshards);

/* The pieces of dense table ti under the client's map (the default
 * slices of the cluster file's shards unless the map places it by range,
 * docs/elastic.md "Dense tables by range") into a new array *out, the
 * caller's to free; how many. */
size_t zp_tables_pieces(const zeps_client *c, const zp_table *ti, zp_dense_piece **out);

/* Whether shard k holds an element of [offset, offset + count) of dense
 * table ti under the client's map. */
bool zp_tables_touches(const zeps_client *c, const zp_table *ti, int k, uint64_t offset,
                       uint64_t count);

/* The table with handle `table`, or NULL with ZEPS_ETABLE recorded as the
 * client's last error. The pointer is the client's and valid until the next
 * declaration. */
zp_table *zp_tables_get(zeps_client *c, uint32_t table);

/* Free every table of c (at zeps_client_destroy). */
void zp_tables_free(zeps_client *c);

#endif
