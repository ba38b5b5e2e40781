/*
 * rocks.c - the cold tier's store on RocksDB (Debian librocksdb-dev), one
 * database per sparse table and shard (cold.h).
 *
 * Keys are ids as 8 big-endian bytes, so RocksDB's order is the ids'
 * order; values are a row record as the hot tier holds it. Settings, and
 * why:
 *   - the write-ahead log is off: a cold row is also lost with a crash of
 *     the shard that held it hot, so logging each demotion would buy
 *     nothing the snapshots (a checkpoint with the table's file) do not
 *     give, and would double every demotion's writes;
 *   - no compression: rows are floats, which compress poorly, and a cold
 *     read should cost one block read and no inflate;
 *   - a bloom filter of 10 bits per key: most misses of a pull are new
 *     ids, which the filter answers without reading a block;
 *   - a small block cache (8 MiB) and write buffer (16 MiB): the hot tier
 *     is the cache; what RocksDB holds counts against the shard's memory;
 *   - the write buffer hashed by id (ids are the whole key): a demotion, a
 *     promotion's delete and a read are point operations, where the default
 *     skiplist spent most of a shard's time finding its place; iterations
 *     (SCAN, restore) ask for the total order.
 * Threading: RocksDB's own background threads flush and compact; calls
 * come from one thread at a time.
 */
#include <stdlib.h>
#include <string.h>

#include <rocksdb/c.h>

#include "alloc.h"
#include "cold.h"
#include "errors.h"
#include "zeps_errors.h"

struct zp_cold {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_block_based_table_options_t *table;
    rocksdb_cache_t *cache;
    rocksdb_writeoptions_t *wo;
    rocksdb_readoptions_t *ro;
    rocksdb_readoptions_t *scan; /* iterations: in id order over the hashed write buffer */
};

#define CACHE_BYTES  ((size_t)8 << 20)
#define BUFFER_BYTES ((size_t)16 << 20)
#define HASH_BUCKETS ((size_t)1 << 17) /* about the rows a write buffer holds */

static void key_of(uint64_t id, char k[8])
{
    for (int i = 0; i < 8; i++)
        k[i] = (char)(id >> (56 - 8 * i));
}

static uint64_t id_of(const char *k)
{
    uint64_t id = 0;
    for (int i = 0; i < 8; i++)
        id = id << 8 | (unsigned char)k[i];
    return id;
}

/* ZEPS_EIO with RocksDB's message (freed here), naming what failed. */
static int fail(char *rerr, const char *what, char *err, size_t errlen)
{
    int rc = zp_errors_set(err, errlen, ZEPS_EIO, "RocksDB %s: %s", what, rerr);
    rocksdb_free(rerr);
    return rc;
}

static rocksdb_options_t *make_opts(zp_cold *c)
{
    rocksdb_options_t *o = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(o, 1);
    rocksdb_options_set_compression(o, rocksdb_no_compression);
    rocksdb_options_set_write_buffer_size(o, BUFFER_BYTES);
    rocksdb_options_set_max_background_jobs(o, 2);
    rocksdb_options_set_keep_log_file_num(o, 2);
    /* the write buffer as a hash of ids (each bucket a short skiplist):
     * every demotion, promotion and miss is a point operation on it */
    rocksdb_options_set_prefix_extractor(o, rocksdb_slicetransform_create_fixed_prefix(8));
    rocksdb_options_set_hash_skip_list_rep(o, HASH_BUCKETS, 4, 4);
    rocksdb_options_set_allow_concurrent_memtable_write(o, 0); /* one writer: the loop */
    if (c != NULL) {
        c->table = rocksdb_block_based_options_create();
        rocksdb_block_based_options_set_filter_policy(c->table,
                                                      rocksdb_filterpolicy_create_bloom(10));
        c->cache = rocksdb_cache_create_lru(CACHE_BYTES);
        rocksdb_block_based_options_set_block_cache(c->table, c->cache);
        rocksdb_options_set_block_based_table_factory(o, c->table);
    }
    return o;
}

static void rocks_close(zp_cold **cp)
{
    if (cp == NULL || *cp == NULL)
        return;
    zp_cold *c = *cp;
    if (c->db)
        rocksdb_close(c->db);
    rocksdb_writeoptions_destroy(c->wo);
    rocksdb_readoptions_destroy(c->ro);
    rocksdb_readoptions_destroy(c->scan);
    rocksdb_options_destroy(c->opts);
    rocksdb_block_based_options_destroy(c->table);
    rocksdb_cache_destroy(c->cache);
    free(c);
    *cp = NULL;
}

static int rocks_open(zp_cold **out, const char *path, char *err, size_t errlen)
{
    zp_cold *c = zp_alloc_zeroed(1, sizeof(*c));
    c->opts = make_opts(c);
    c->wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(c->wo, 1);
    c->ro = rocksdb_readoptions_create();
    c->scan = rocksdb_readoptions_create();
    rocksdb_readoptions_set_total_order_seek(c->scan, 1);
    char *rerr = NULL;
    c->db = rocksdb_open(c->opts, path, &rerr);
    if (rerr != NULL) {
        rocks_close(&c);
        return fail(rerr, "open", err, errlen);
    }
    *out = c;
    return 0;
}

static int rocks_destroy(const char *path, char *err, size_t errlen)
{
    rocksdb_options_t *o = make_opts(NULL);
    char *rerr = NULL;
    rocksdb_destroy_db(o, path, &rerr);
    rocksdb_options_destroy(o);
    return rerr ? fail(rerr, "destroy", err, errlen) : 0;
}

static int rocks_put(zp_cold *c, uint64_t id, const void *val, size_t len, char *err, size_t errlen)
{
    char k[8], *rerr = NULL;
    key_of(id, k);
    rocksdb_put(c->db, c->wo, k, 8, val, len, &rerr);
    return rerr ? fail(rerr, "put", err, errlen) : 0;
}

static int rocks_del(zp_cold *c, uint64_t id, char *err, size_t errlen)
{
    char k[8], *rerr = NULL;
    key_of(id, k);
    rocksdb_delete(c->db, c->wo, k, 8, &rerr);
    return rerr ? fail(rerr, "delete", err, errlen) : 0;
}

/* One batch of get_many: at most 256 keys. */
static int get_batch(zp_cold *c, const uint64_t *ids, size_t n, char *vals, size_t len, bool *found,
                     char *err, size_t errlen)
{
    enum { B = 256 };
    char keys[B][8], *vl[B], *errs[B];
    const char *kl[B];
    size_t ks[B], vs[B];
    for (size_t i = 0; i < n; i++) {
        key_of(ids[i], keys[i]);
        kl[i] = keys[i];
        ks[i] = 8;
    }
    rocksdb_multi_get(c->db, c->ro, n, kl, ks, vl, vs, errs);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (errs[i] != NULL) {
            rc = rc ? (rocksdb_free(errs[i]), rc) : fail(errs[i], "multi-get", err, errlen);
        } else if (vl[i] != NULL && vs[i] != len && rc == 0) {
            rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                               "cold row %llu holds %zu bytes, not the %zu of a row record",
                               (unsigned long long)ids[i], vs[i], len);
        } else if (vl[i] != NULL) {
            memcpy(vals + i * len, vl[i], len);
        }
        found[i] = vl[i] != NULL && vs[i] == len;
        if (vl[i] != NULL)
            rocksdb_free(vl[i]);
    }
    return rc;
}

static int rocks_get_many(zp_cold *c, const uint64_t *ids, size_t n, void *vals, size_t len,
                          bool *found, char *err, size_t errlen)
{
    for (size_t at = 0; at < n; at += 256) {
        size_t k = n - at < 256 ? n - at : 256;
        int rc = get_batch(c, ids + at, k, (char *)vals + at * len, len, found + at, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void rocks_iter_free(zp_cold *c, void **it)
{
    (void)c;
    if (*it != NULL)
        rocksdb_iter_destroy(*it);
    *it = NULL;
}

static int rocks_iter_next(zp_cold *c, void **it, uint64_t *id, const void **val, size_t *len,
                           char *err, size_t errlen)
{
    rocksdb_iterator_t *i = *it;
    if (i == NULL) {
        i = rocksdb_create_iterator(c->db, c->scan);
        rocksdb_iter_seek_to_first(i);
        *it = i;
    } else {
        rocksdb_iter_next(i);
    }
    char *rerr = NULL;
    rocksdb_iter_get_error(i, &rerr);
    if (rerr != NULL) {
        rocks_iter_free(c, it);
        return -fail(rerr, "iterate", err, errlen);
    }
    if (!rocksdb_iter_valid(i)) {
        rocks_iter_free(c, it);
        return 0;
    }
    size_t klen;
    const char *k = rocksdb_iter_key(i, &klen);
    *id = klen == 8 ? id_of(k) : 0;
    *val = rocksdb_iter_value(i, len);
    return 1;
}

static uint64_t rocks_bytes(zp_cold *c)
{
    uint64_t sst = 0, mem = 0;
    rocksdb_property_int(c->db, "rocksdb.total-sst-files-size", &sst);
    rocksdb_property_int(c->db, "rocksdb.cur-size-all-mem-tables", &mem);
    return sst + mem;
}

static int rocks_checkpoint(zp_cold *c, const char *dir, char *err, size_t errlen)
{
    char *rerr = NULL;
    rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(c->db, &rerr);
    if (rerr != NULL)
        return fail(rerr, "checkpoint", err, errlen);
    /* log_size_for_flush 0: the write buffers are flushed first (the WAL
     * is off, so the checkpoint would miss them otherwise) */
    rocksdb_checkpoint_create(cp, dir, 0, &rerr);
    rocksdb_checkpoint_object_destroy(cp);
    return rerr ? fail(rerr, "checkpoint", err, errlen) : 0;
}

const zp_cold_ops zp_rocks_ops = {
    .name = "rocksdb",
    .open = rocks_open,
    .close = rocks_close,
    .destroy = rocks_destroy,
    .put = rocks_put,
    .del = rocks_del,
    .get_many = rocks_get_many,
    .iter_next = rocks_iter_next,
    .iter_free = rocks_iter_free,
    .bytes = rocks_bytes,
    .checkpoint = rocks_checkpoint,
};
