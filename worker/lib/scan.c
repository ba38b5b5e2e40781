/*
 * scan.c - libzeps: a table read page by page with its optimizer state
 * (SCAN, zeps_scan) and written back (PUT, zeps_put_dense and
 * zeps_put_rows), for checkpoints a program keeps itself.
 *
 * A page is one shard's reply, kept as received (the engine keeps the
 * frame, req.c) and handed to the caller without a copy until
 * zeps_page_release. A PUT is cut like a push: a dense range by the shards'
 * slices, rows by the shard each id lives on (the client's slot map), and each
 * shard's part into pieces under max_message_mb; every piece is assembled
 * in a buffer its sub-request owns (values then state blocks, or records),
 * since the caller's layout is not the wire's.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "client.h"
#include "req.h"
#include "sparse_hash.h"
#include "tables.h"
#include "zeps.h"

/* Most rows or elements one SCAN or PUT may name (the shard's bound). */
#define SCAN_MAX_COUNT ((uint64_t)1 << 24)

/* Room left beside a payload for the header under max_message_mb. */
#define HEADER_ROOM 4096u

/* Units (rows, elements of `unit` bytes) one PUT piece carries: what fits
 * max_message_mb (without a limit, 64 MiB pieces), at most SCAN_MAX_COUNT,
 * at least 1. */
static uint64_t piece_units(const zeps_client *c, uint64_t unit)
{
    uint64_t room = c->opt.max_message_bytes ? c->opt.max_message_bytes : (uint64_t)64 << 20;
    uint64_t n = room > HEADER_ROOM ? (room - HEADER_ROOM) / unit : 0;
    n = n < SCAN_MAX_COUNT ? n : SCAN_MAX_COUNT;
    return n ? n : 1;
}

/* The page of a finished SCAN sub-request, checked against the layout its
 * header names; on success the page takes the frame. */
static int page_from(zeps_client *c, const zp_table *ti, zp_req_sub *s, zeps_page *page)
{
    uint64_t unit = ti->dim ? ZEPS_ROW_RECORD_BYTES(ti->dim, s->spv) : 4u * (1u + (uint64_t)s->spv);
    size_t len = zmq_msg_size(&s->frame);
    if (s->spv > 16 || s->count > SCAN_MAX_COUNT || len != s->count * unit)
        return zp_fail(c, ZEPS_EPROTO,
                       "shard %d answered a SCAN of table '%s' with %zu bytes for %" PRIu64
                       " %s with %u state floats per value",
                       s->shard, ti->name, len, s->count, ti->dim ? "rows" : "elements", s->spv);
    zmq_msg_t *frame = zp_alloc(sizeof(*frame));
    zmq_msg_init(frame);
    zmq_msg_move(frame, &s->frame);
    *page = (zeps_page){.count = s->count,
                        .offset = s->offset,
                        .next = s->cursor,
                        .version = s->data_version,
                        .dim = ti->dim,
                        .state_per_value = s->spv,
                        .data = zmq_msg_data(frame),
                        .bytes = len,
                        .priv = frame};
    return 0;
}

/* The first element of shard k's first piece of dense table ti under
 * the client's map, UINT64_MAX if it holds none (a shard that joined).
 * A base shard with no element (a table shorter than the shard count)
 * answers its empty slice, as before pieces. */
static uint64_t first_piece(const zeps_client *c, const zp_table *ti, int k)
{
    zp_dense_piece *pc;
    size_t np = zp_tables_pieces(c, ti, &pc);
    uint64_t at = UINT64_MAX;
    for (size_t i = 0; i < np && at == UINT64_MAX; i++)
        if (pc[i].owner == k)
            at = pc[i].lo;
    free(pc);
    if (at == UINT64_MAX && k < c->ndense &&
        !zp_densemap_names(zp_slotmap_dense(c->slots), ti->name))
        at = zp_tables_slice_begin(ti->length, k, c->ndense);
    return at;
}

int zeps_scan(zeps_client *c, uint32_t table, int shard, uint64_t cursor, uint64_t max,
              zeps_page *page)
{
    if (!c || !page)
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (shard < 0 || shard >= c->nshards)
        return zp_fail(c, ZEPS_EINVAL, "SCAN of table '%s': shard %d of %d", ti->name, shard,
                       c->nshards);
    /* a dense scan starts at the shard's first piece: the wire names
     * elements (the shard goes on from piece to piece) */
    uint64_t at = cursor;
    if (!ti->dim && cursor == 0)
        at = first_piece(c, ti, shard);
    if (!ti->dim && at == UINT64_MAX) { /* a shard that holds no piece (joined) */
        *page = (zeps_page){.offset = ti->length};
        return 0;
    }
    zp_req *r = zp_req_new(c, ZEPS__OP__SCAN, 1);
    zp_req_sub *s = zp_req_add(r, shard);
    s->table = ti->ids[shard];
    s->offset = at;
    s->count = max ? max : SCAN_MAX_COUNT;
    zp_req_send(r, s);
    int rc = zp_req_finish(r);
    if (rc == 0)
        rc = page_from(c, ti, s, page);
    zp_req_free(r);
    return rc;
}

void zeps_page_release(zeps_page *page)
{
    if (!page)
        return;
    zmq_msg_t *frame = page->priv;
    if (frame) {
        zmq_msg_close(frame);
        free(frame);
    }
    memset(page, 0, sizeof(*page));
}

/* One PUT piece to shard k (dense: its first element at `offset`):
 * `bytes` of payload the sub takes (buf). */
static void send_piece(zp_req *r, const zp_table *ti, int k, uint64_t offset, uint64_t count,
                       uint32_t spv, uint64_t version, void *buf, size_t bytes)
{
    zp_req_sub *s = zp_req_add(r, k);
    s->table = ti->ids[k];
    s->offset = offset;
    s->count = count;
    s->spv = spv;
    s->data_version = version;
    s->encoded = buf; /* freed with the request, after ZeroMQ released it */
    s->data = buf;
    s->data_len = bytes;
    r->c->stats.bytes_out += bytes;
    zp_req_send(r, s);
}

/* The pieces of [lo, hi) (inside one shard's slice) of a dense PUT from
 * the caller's values and state (k blocks of `count` from `offset`). */
static void put_slice(zp_req *r, const zp_table *ti, int k, uint64_t lo, uint64_t hi, uint64_t per,
                      uint64_t offset, uint64_t count, uint32_t spv, const float *values,
                      const float *state, uint64_t version)
{
    for (uint64_t a = lo; a < hi; a += per) {
        uint64_t n = hi - a < per ? hi - a : per;
        float *buf = zp_alloc((size_t)(n * (1u + spv)) * sizeof(float));
        memcpy(buf, values + (a - offset), (size_t)n * sizeof(float));
        for (uint32_t j = 0; j < spv; j++)
            memcpy(buf + (size_t)(j + 1) * n, state + (size_t)j * count + (a - offset),
                   (size_t)n * sizeof(float));
        send_piece(r, ti, k, a, n, spv, version, buf, (size_t)(n * (1u + spv)) * sizeof(float));
    }
}

int zeps_put_dense(zeps_client *c, uint32_t table, uint64_t offset, uint64_t count, uint32_t k,
                   const float *values, const float *state, uint64_t version)
{
    if (!c || !values || (k && !state) || k > 16)
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (ti->dim)
        return zp_fail(c, ZEPS_EINVAL, "table '%s' is sparse: zeps_put_rows writes it", ti->name);
    if (count == 0 || offset > ti->length || count > ti->length - offset)
        return zp_fail(c, ZEPS_ERANGE,
                       "elements [%" PRIu64 ", %" PRIu64 "+%" PRIu64
                       ") are outside table '%s' of %" PRIu64,
                       offset, offset, count, ti->name, ti->length);
    uint64_t per = piece_units(c, 4u * (1u + (uint64_t)k)), nsub = 0;
    zp_dense_piece *pc;
    size_t np = zp_tables_pieces(c, ti, &pc);
    for (size_t i = 0; i < np; i++) { /* parts per piece, to size the request */
        uint64_t lo = offset > pc[i].lo ? offset : pc[i].lo;
        uint64_t hi = offset + count < pc[i].hi ? offset + count : pc[i].hi;
        nsub += lo < hi ? (hi - lo + per - 1) / per : 0;
    }
    zp_req *r = zp_req_new(c, ZEPS__OP__PUT, (int)nsub);
    for (size_t i = 0; i < np; i++) {
        uint64_t lo = offset > pc[i].lo ? offset : pc[i].lo;
        uint64_t hi = offset + count < pc[i].hi ? offset + count : pc[i].hi;
        put_slice(r, ti, pc[i].owner, lo, hi, per, offset, count, k, values, state, version);
    }
    free(pc);
    return zeps_wait(&r);
}

/* The records of shard k's n rows (their indexes in order[0..n)), copied
 * into pieces of at most `per` rows. */
static void put_shard_rows(zp_req *r, const zp_table *ti, int k, const uint8_t *records,
                           uint64_t rec, const uint64_t *order, uint64_t n, uint64_t per,
                           uint32_t spv, uint64_t version)
{
    for (uint64_t a = 0; a < n; a += per) {
        uint64_t m = n - a < per ? n - a : per;
        uint8_t *buf = zp_alloc((size_t)(m * rec));
        for (uint64_t i = 0; i < m; i++)
            memcpy(buf + i * rec, records + order[a + i] * rec, (size_t)rec);
        send_piece(r, ti, k, 0, m, spv, version, buf, (size_t)(m * rec));
    }
}

int zeps_put_rows(zeps_client *c, uint32_t table, uint32_t k, const void *records, uint64_t n,
                  uint64_t version)
{
    if (!c || (n && !records) || k > 16)
        return ZEPS_EINVAL;
    zp_table *ti = zp_tables_get(c, table);
    if (!ti)
        return ZEPS_ETABLE;
    if (!ti->dim)
        return zp_fail(c, ZEPS_EINVAL, "table '%s' is dense: zeps_put_dense writes it", ti->name);
    if (n == 0)
        return 0;
    const uint8_t *recs = records;
    uint64_t rec = ZEPS_ROW_RECORD_BYTES(ti->dim, k), per = piece_units(c, rec), nsub = 0;
    /* a counting sort of the rows by shard: rows of shard s are
     * order[first[s] .. first[s + 1]) */
    uint64_t *first = zp_alloc_zeroed((size_t)c->nshards + 1, sizeof(uint64_t));
    uint64_t *order = zp_alloc((size_t)n * sizeof(uint64_t));
    int *home = zp_alloc((size_t)n * sizeof(int));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id;
        memcpy(&id, recs + i * rec, 8);
        home[i] = zp_slotmap_owner(c->slots, id);
        first[home[i] + 1]++;
    }
    for (int s = 0; s < c->nshards; s++) {
        nsub += (first[s + 1] + per - 1) / per;
        first[s + 1] += first[s];
    }
    uint64_t *fill = zp_alloc((size_t)c->nshards * sizeof(uint64_t));
    memcpy(fill, first, (size_t)c->nshards * sizeof(uint64_t));
    for (uint64_t i = 0; i < n; i++)
        order[fill[home[i]]++] = i;
    zp_req *r = zp_req_new(c, ZEPS__OP__PUT, (int)nsub);
    for (int s = 0; s < c->nshards; s++)
        put_shard_rows(r, ti, s, recs, rec, order + first[s], first[s + 1] - first[s], per, k,
                       version);
    free(fill);
    free(home);
    free(order);
    free(first);
    return zeps_wait(&r);
}
