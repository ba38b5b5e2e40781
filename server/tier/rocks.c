/*
 * rocks.c - the cold tier's store on RocksDB (Debian librocksdb-dev), one
 * database per sparse table and shard (cold.h).
 *
 * Keys are ids as 8 big-endian bytes, so RocksDB's order is the ids'
 * order; values are a row record as the hot tier holds it. The settings
 * follow RocksDB's tuning guide for point lookups on data the page cache
 * holds, and why:
 *   - the write-ahead log is off: a cold row is also lost with a crash of
 *     the shard that held it hot, so logging each demotion would buy
 *     nothing the snapshots (a checkpoint with the table's file) do not
 *     give, and would double every demotion's writes;
 *   - no compression: rows are floats, which compress poorly, and a cold
 *     read should cost one block read and no inflate;
 *   - 1 KiB blocks with a hash index inside each (kDataBlockBinaryAndHash):
 *     a read copies one block from the page cache and checks its checksum,
 *     so a block of a few records costs a quarter of the default 4 KiB
 *     (copying the 4 KiB block was the largest cost of a MultiGet in perf);
 *   - a full bloom filter of 10 bits per key on the files, and one on the
 *     write buffer (whole keys): most lookups miss most files and the
 *     buffer, and new ids miss them all;
 *   - a table with a memory_budget gives RocksDB a share of it (tier.h,
 *     zp_tier_share) and RocksDB stays inside it (bounded(), below): write
 *     buffers and a block cache holding the index and filter blocks too,
 *     a quarter of the share each, the rest for what RocksDB does not
 *     report;
 *   - a table without one (capacity_rows) keeps the unbounded settings:
 *     16 MiB write buffers, index and filters held beside an 8 MiB block
 *     cache that reads do not fill (cold reads are spread over the table,
 *     the hot tier is the cache, so caching their blocks only costs an
 *     insert and an eviction each);
 *   - MultiGet in its batched form (ZP_ROCKS_BATCH keys a call), which
 *     probes filters and indexes for a batch at once;
 *   - a skiplist write buffer (a hashed one made RocksDB's flush
 *     sort every buffer, a third of the shard's time) and level compaction
 *     with dynamic level sizes;
 *   - writes gathered (put, del) and written by commit, or when BATCH_MAX
 *     wait, in one write batch sorted by key: one write per batch instead
 *     of one per row, and inserts into the write buffer in key order.
 * Threading: RocksDB's own background threads flush and compact; reads
 * (get_many) may run on other threads than writes, one call at a time
 * per thread; put, del, commit and iterations from one thread at a time.
 */
#include "rocks.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cold.h"
#include "errors.h"
#include "zeps_errors.h"

/* A write gathered: a put of vals[at] (del false), or a delete. */
typedef struct gathered {
    uint64_t id;
    uint32_t seq; /* its place among the gathered: a later write of an id wins */
    bool del;
} gathered;

struct zp_cold {
    rocksdb_t *db;
    rocksdb_column_family_handle_t *cf; /* the default one: batched MultiGet asks for it */
    zp_rocks_settings set;
    rocksdb_writeoptions_t *wo;
    rocksdb_writebatch_t *batch; /* the gathered writes, at commit */
    gathered *w;                 /* writes not yet written (commit) */
    size_t nw;
    unsigned char *vals; /* their values, BATCH_MAX of vlen bytes */
    size_t vlen;
    rocksdb_readoptions_t *scan;
};

#define CACHE_BYTES  ((size_t)8 << 20)
#define BUFFER_BYTES ((size_t)16 << 20)
#define BLOCK_BYTES  1024
#define BATCH_MAX    1024 /* writes a batch gathers before it is written */

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

/* The settings shared by both kinds of table. */
static rocksdb_options_t *common_options(void)
{
    rocksdb_options_t *o = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(o, 1);
    rocksdb_options_set_compression(o, rocksdb_no_compression);
    rocksdb_options_set_max_background_jobs(o, 2);
    rocksdb_options_set_keep_log_file_num(o, 2);
    rocksdb_options_set_level_compaction_dynamic_level_bytes(o, 1);
    rocksdb_options_set_memtable_whole_key_filtering(o, 1);
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(o, 0.02);
    return o;
}

/* Bounded to `mem` bytes (the table's budget's share, tier.h): a quarter
 * of it for writes (the tier's two buffers of unwritten rows, a 64th
 * each, and RocksDB's write buffers: two at most, of 7/64 each, and
 * RocksDB's own total for them), a quarter for a block cache that holds
 * the index and filter blocks too (partitioned, so a read needs one
 * partition of each in the cache, not a file's whole index; the top level
 * and level 0's pinned there), and half left for what RocksDB holds
 * without reporting it (flush and compaction buffers, table readers'
 * state) and the allocator's slack: without such a reserve the shard's
 * RSS passed budget + 15 % in bench_tier part 4 (docs/sparse.md).
 * Reads fill the cache: a partition read from the file must be kept, and
 * data blocks take the low-priority part only. */
static void bounded(zp_rocks_settings *s, rocksdb_options_t *o, uint64_t mem)
{
    /* the writes' quarter less the tier's own two buffers of unwritten
     * rows (a 64th of the share each, tier.c and warm.h) */
    uint64_t wb = mem / 4 - mem / 32, cache = mem / 4;
    rocksdb_options_set_write_buffer_size(o, (size_t)(wb / 2));
    rocksdb_options_set_max_write_buffer_number(o, 2);
    rocksdb_options_set_db_write_buffer_size(o, (size_t)wb);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(s->table, 1);
    rocksdb_block_based_options_set_cache_index_and_filter_blocks_with_high_priority(s->table, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(s->table, 1);
    rocksdb_block_based_options_set_index_type(
        s->table, rocksdb_block_based_table_index_type_two_level_index_search);
    rocksdb_block_based_options_set_partition_filters(s->table, 1);
    rocksdb_block_based_options_set_metadata_block_size(s->table, 4096);
    rocksdb_block_based_options_set_pin_top_level_index_and_filter(s->table, 1);
    s->cache = rocksdb_cache_create_lru((size_t)cache);
    rocksdb_readoptions_set_fill_cache(s->read, 1);
}

void zp_rocks_settings_init(zp_rocks_settings *s, uint64_t mem)
{
    rocksdb_options_t *o = common_options();
    s->table = rocksdb_block_based_options_create();
    rocksdb_block_based_options_set_block_size(s->table, BLOCK_BYTES);
    rocksdb_block_based_options_set_data_block_index_type(
        s->table, rocksdb_block_based_table_data_block_index_type_binary_search_and_hash);
    rocksdb_block_based_options_set_data_block_hash_ratio(s->table, 0.75);
    rocksdb_block_based_options_set_filter_policy(s->table,
                                                  rocksdb_filterpolicy_create_bloom_full(10));
    s->read = rocksdb_readoptions_create();
    if (mem != 0) {
        bounded(s, o, mem);
    } else {
        rocksdb_options_set_write_buffer_size(o, BUFFER_BYTES);
        s->cache = rocksdb_cache_create_lru(CACHE_BYTES);
        rocksdb_readoptions_set_fill_cache(s->read, 0);
    }
    rocksdb_block_based_options_set_block_cache(s->table, s->cache);
    rocksdb_options_set_block_based_table_factory(o, s->table);
    s->opts = o;
}

void zp_rocks_settings_fini(zp_rocks_settings *s)
{
    rocksdb_readoptions_destroy(s->read);
    rocksdb_options_destroy(s->opts);
    rocksdb_block_based_options_destroy(s->table);
    rocksdb_cache_destroy(s->cache);
    memset(s, 0, sizeof(*s));
}

static void rocks_close(zp_cold **cp)
{
    if (cp == NULL || *cp == NULL)
        return;
    zp_cold *c = *cp;
    if (c->cf)
        rocksdb_column_family_handle_destroy(c->cf);
    if (c->db)
        rocksdb_close(c->db);
    rocksdb_writeoptions_destroy(c->wo);
    rocksdb_writebatch_destroy(c->batch);
    free(c->w);
    free(c->vals);
    rocksdb_readoptions_destroy(c->scan);
    zp_rocks_settings_fini(&c->set);
    free(c);
    *cp = NULL;
}

/* Open the database in `path` (read_only: an existing one, changed in
 * nothing, else created if missing). */
static int open_db(zp_cold **out, const char *path, uint64_t mem, bool read_only, char *err,
                   size_t errlen)
{
    zp_cold *c = zp_alloc_zeroed(1, sizeof(*c));
    zp_rocks_settings_init(&c->set, mem);
    c->wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(c->wo, 1);
    c->batch = rocksdb_writebatch_create();
    c->w = zp_alloc(BATCH_MAX * sizeof(gathered));
    c->scan = rocksdb_readoptions_create();
    char *rerr = NULL;
    const char *names[1] = {"default"};
    const rocksdb_options_t *cfo[1] = {c->set.opts};
    rocksdb_column_family_handle_t *cf[1] = {NULL};
    if (read_only) {
        rocksdb_options_set_create_if_missing(c->set.opts, 0);
        c->db = rocksdb_open_for_read_only_column_families(c->set.opts, path, 1, names, cfo, cf, 0,
                                                           &rerr);
    } else {
        c->db = rocksdb_open_column_families(c->set.opts, path, 1, names, cfo, cf, &rerr);
    }
    if (rerr != NULL) {
        c->db = NULL;
        rocks_close(&c);
        if (read_only) {
            int rc = zp_errors_set(err, errlen, ZEPS_EDATA, "RocksDB open (read-only): %s", rerr);
            rocksdb_free(rerr);
            return rc;
        }
        return fail(rerr, "open", err, errlen);
    }
    c->cf = cf[0];
    *out = c;
    return 0;
}

static int rocks_open(zp_cold **out, const char *path, uint64_t mem, char *err, size_t errlen)
{
    return open_db(out, path, mem, false, err, errlen);
}

static int rocks_open_read(zp_cold **out, const char *path, char *err, size_t errlen)
{
    return open_db(out, path, 0, true, err, errlen);
}

static int rocks_destroy(const char *path, char *err, size_t errlen)
{
    zp_rocks_settings s;
    zp_rocks_settings_init(&s, 0);
    char *rerr = NULL;
    rocksdb_destroy_db(s.opts, path, &rerr);
    zp_rocks_settings_fini(&s);
    return rerr ? fail(rerr, "destroy", err, errlen) : 0;
}

static int by_id(const void *a, const void *b)
{
    const gathered *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The gathered writes in one write batch, in id order: RocksDB's write
 * buffer is a skiplist whose inserts start from where the last one went
 * (its splice), so inserting in key order walks a fraction of it. */
static int rocks_commit(zp_cold *c, char *err, size_t errlen)
{
    if (c->nw == 0)
        return 0;
    qsort(c->w, c->nw, sizeof(gathered), by_id);
    for (size_t i = 0; i < c->nw; i++) {
        char k[8];
        key_of(c->w[i].id, k);
        if (c->w[i].del)
            rocksdb_writebatch_delete(c->batch, k, 8);
        else
            rocksdb_writebatch_put(c->batch, k, 8, (const char *)c->vals + c->w[i].seq * c->vlen,
                                   c->vlen);
    }
    c->nw = 0;
    char *rerr = NULL;
    rocksdb_write(c->db, c->wo, c->batch, &rerr);
    rocksdb_writebatch_clear(c->batch); /* written or failed: the tier stops on a failure */
    return rerr ? fail(rerr, "write", err, errlen) : 0;
}

/* Gather a write of id (a delete if val is NULL); written once BATCH_MAX
 * wait. Every value of a store has one length (a row record). */
static int gather(zp_cold *c, uint64_t id, const void *val, size_t len, char *err, size_t errlen)
{
    if (val != NULL && len != c->vlen) {
        int rc = rocks_commit(c, err, errlen);
        if (rc != 0)
            return rc;
        free(c->vals);
        c->vals = zp_alloc(BATCH_MAX * len);
        c->vlen = len;
    }
    if (val != NULL)
        memcpy(c->vals + c->nw * c->vlen, val, len);
    c->w[c->nw] = (gathered){.id = id, .seq = (uint32_t)c->nw, .del = val == NULL};
    return ++c->nw == BATCH_MAX ? rocks_commit(c, err, errlen) : 0;
}

static int rocks_put(zp_cold *c, uint64_t id, const void *val, size_t len, char *err, size_t errlen)
{
    return gather(c, id, val, len, err, errlen);
}

static int rocks_del(zp_cold *c, uint64_t id, char *err, size_t errlen)
{
    return gather(c, id, NULL, 0, err, errlen);
}

/* One batch of get_many: at most ZP_ROCKS_BATCH keys. */
static int get_batch(zp_cold *c, const uint64_t *ids, size_t n, char *vals, size_t len, bool *found,
                     char *err, size_t errlen)
{
    enum { B = ZP_ROCKS_BATCH };
    char keys[B][8], *errs[B];
    const char *kl[B];
    size_t ks[B];
    rocksdb_pinnableslice_t *vl[B];
    for (size_t i = 0; i < n; i++) {
        key_of(ids[i], keys[i]);
        kl[i] = keys[i];
        ks[i] = 8;
    }
    rocksdb_batched_multi_get_cf(c->db, c->set.read, c->cf, n, kl, ks, vl, errs, false);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        size_t vs = 0;
        const char *v = vl[i] != NULL ? rocksdb_pinnableslice_value(vl[i], &vs) : NULL;
        if (errs[i] != NULL) {
            rc = rc ? (rocksdb_free(errs[i]), rc) : fail(errs[i], "multi-get", err, errlen);
        } else if (v != NULL && vs != len && rc == 0) {
            rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                               "cold row %llu holds %zu bytes, not the %zu of a row record",
                               (unsigned long long)ids[i], vs, len);
        } else if (v != NULL) {
            memcpy(vals + i * len, v, len);
        }
        found[i] = v != NULL && vs == len;
        rocksdb_pinnableslice_destroy(vl[i]);
    }
    return rc;
}

static int rocks_get_many(zp_cold *c, const uint64_t *ids, size_t n, void *vals, size_t len,
                          bool *found, char *err, size_t errlen)
{
    for (size_t at = 0; at < n; at += ZP_ROCKS_BATCH) {
        size_t k = n - at < ZP_ROCKS_BATCH ? n - at : ZP_ROCKS_BATCH;
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
        int rc = rocks_commit(c, err, errlen);
        if (rc != 0)
            return -rc;
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

static void rocks_memory(zp_cold *c, zp_cold_memory *out)
{
    memset(out, 0, sizeof(*out));
    rocksdb_property_int(c->db, "rocksdb.cur-size-all-mem-tables", &out->write_buffers);
    rocksdb_property_int(c->db, "rocksdb.estimate-table-readers-mem", &out->table_readers);
    out->block_cache = rocksdb_cache_get_usage(c->set.cache);
}

static int rocks_checkpoint(zp_cold *c, const char *dir, char *err, size_t errlen)
{
    char *rerr = NULL;
    int rc = rocks_commit(c, err, errlen);
    if (rc != 0)
        return rc;
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
    .open_read = rocks_open_read,
    .close = rocks_close,
    .destroy = rocks_destroy,
    .put = rocks_put,
    .del = rocks_del,
    .commit = rocks_commit,
    .get_many = rocks_get_many,
    .iter_next = rocks_iter_next,
    .iter_free = rocks_iter_free,
    .bytes = rocks_bytes,
    .memory = rocks_memory,
    .checkpoint = rocks_checkpoint,
};
