/*
 * rbatch.c - see rbatch.h. The batch is four growable arrays (pushes,
 * sums, sparse merges, replies); the entry is encoded once, when it is
 * logged, but for the sparse merges, encoded as they are handed over (the
 * table's merge buffers are reused by the next round).
 */
#include "rbatch.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "now.h"
#include "zeps.pb-c.h"

#define ITEM_FIXED  24 /* u32 header length, u32 flags, u64 wire bytes, u64 sum start */
#define ITEM_CLOSES 1u /* flags: it closed its (dense) round */
#define ITEM_ROWS   2u /* flags: it closed sparse rounds; a u64 rows start follows */
#define REC_FIXED   32 /* u32 table, u32 flags, i64 clock, u64 n, u32 dim, u32 0 */
#define REC_VERS    1u /* a merge's flags: the row versions read follow */
#define MAX_DIM     (1u << 20)

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* little-endian hosts only, as every frame of the protocol */
}

static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

void zp_rbatch_held_close(zp_repl_held *h)
{
    zmq_msg_close(&h->identity);
    free(h->header);
    if (h->ffn)
        h->ffn(h->data, h->hint);
    else
        free(h->data);
}

void zp_rbatch_clear(zp_repl_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        for (int k = 0; k < b->items[i].e.n; k++)
            zmq_msg_close(&b->items[i].e.f[k]);
    b->n = 0;
    b->open = 0;
    b->npush = 0;
    b->nsums = 0;
    b->rows.len = 0;
    b->rows.nrec = 0;
}

void zp_rbatch_fini(zp_repl_batch *b)
{
    zp_rbatch_clear(b);
    for (size_t i = 0; i < b->nheld; i++)
        zp_rbatch_held_close(&b->held[i]);
    free(b->items);
    free(b->sums);
    free(b->held);
    free(b->rows.p);
    memset(b, 0, sizeof(*b));
}

/* Mark the open pushes of `table` closed: its round closed. */
static void close_round(zp_repl_batch *b, uint32_t table)
{
    for (size_t i = 0; i < b->n; i++) {
        zp_repl_item *it = &b->items[i];
        if (it->table == table && !it->closed) {
            it->closed = true;
            b->open--;
        }
    }
}

/* A new item holding new references to frames f[0..n). */
static zp_repl_item *item_new(zp_repl_batch *b, zmq_msg_t *f, int n)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 64;
        b->items = zp_alloc_resize(b->items, b->cap * sizeof(*b->items));
    }
    zp_repl_item *it = &b->items[b->n++];
    memset(it, 0, sizeof(*it));
    it->rank = UINT32_MAX;
    it->e.n = n;
    b->last_s = zp_now_s();
    for (int k = 0; k < n; k++) {
        zmq_msg_init(&it->e.f[k]);
        zmq_msg_copy(&it->e.f[k], &f[k]);
    }
    return it;
}

void zp_rbatch_add_plain(zp_repl_batch *b, zmq_msg_t *f, int n)
{
    zp_repl_item *it = item_new(b, f, n);
    it->table = UINT32_MAX;
    it->closed = true; /* no round of its own */
}

void zp_rbatch_add(zp_repl_batch *b, zmq_msg_t *f, int n, uint32_t table, uint64_t wire,
                   float **sum, size_t nsum)
{
    zp_repl_item *it = item_new(b, f, n);
    b->npush++;
    it->table = table;
    it->wire = wire;
    b->open++;
    if (!*sum)
        return;
    it->closes = true;
    it->sum_at = b->nsums;
    if (b->nsums + nsum > b->capsums) {
        b->capsums = (b->nsums + nsum) * 2;
        b->sums = zp_alloc_resize(b->sums, b->capsums * sizeof(float));
    }
    memcpy(b->sums + b->nsums, *sum, nsum * sizeof(float));
    b->nsums += nsum;
    free(*sum);
    *sum = NULL;
    close_round(b, table);
}

void zp_rbatch_add_sparse(zp_repl_batch *b, zmq_msg_t *f, int n, uint32_t table, int64_t clock,
                          uint64_t wire)
{
    zp_repl_item *it = item_new(b, f, n);
    b->npush++;
    it->table = table;
    it->sparse = true;
    it->clock = clock;
    it->wire = wire;
    b->open++;
}

void zp_rbatch_sender(zp_repl_batch *b, uint32_t rank, uint64_t seq)
{
    if (b->n == 0)
        return;
    b->items[b->n - 1].rank = rank;
    b->items[b->n - 1].seq = seq;
}

/* Room for `more` bytes at the end of *buf. */
static uint8_t *buf_room(zp_rbatch_buf *buf, size_t more)
{
    if (buf->len + more > buf->cap) {
        buf->cap = (buf->len + more) * 2;
        buf->p = zp_alloc_resize(buf->p, buf->cap);
    }
    return buf->p + buf->len;
}

void zp_rbatch_rows_put(zp_rbatch_buf *buf, uint32_t table, int64_t clock, const uint64_t *ids,
                        size_t n, const float *g, uint32_t dim, const uint32_t *vers)
{
    size_t data = n * sizeof(uint64_t) + n * dim * sizeof(float) + (vers ? n * 4 : 0);
    size_t pad = (8 - data % 8) % 8;
    uint8_t *p = buf_room(buf, REC_FIXED + data + pad);
    memset(p, 0, REC_FIXED);
    put32(p, table);
    put32(p + 4, vers ? REC_VERS : 0);
    put64(p + 8, (uint64_t)clock);
    put64(p + 16, n);
    put32(p + 24, dim);
    p += REC_FIXED;
    memcpy(p, ids, n * sizeof(uint64_t));
    p += n * sizeof(uint64_t);
    memcpy(p, g, n * dim * sizeof(float));
    p += n * dim * sizeof(float);
    if (vers) {
        memcpy(p, vers, n * 4);
        p += n * 4;
    }
    memset(p, 0, pad);
    buf->len += REC_FIXED + data + pad;
    buf->nrec++;
}

int zp_rbatch_rec_read(const uint8_t *p, size_t len, size_t *off, zp_rbatch_rec *rec)
{
    if (*off > len || len - *off < REC_FIXED)
        return -1;
    const uint8_t *q = p + *off;
    uint32_t flags;
    uint64_t clock;
    memcpy(&rec->table, q, 4);
    memcpy(&flags, q + 4, 4);
    memcpy(&clock, q + 8, 8);
    memcpy(&rec->n, q + 16, 8);
    memcpy(&rec->dim, q + 24, 4);
    rec->clock = (int64_t)clock;
    size_t left = len - *off - REC_FIXED;
    if ((flags & ~REC_VERS) || rec->dim == 0 || rec->dim > MAX_DIM || rec->n == 0 ||
        rec->n > left / 8)
        return -1;
    uint64_t data = rec->n * (8 + 4 * (uint64_t)rec->dim + ((flags & REC_VERS) ? 4 : 0));
    uint64_t padded = data + (8 - data % 8) % 8;
    if (padded > left)
        return -1;
    rec->ids = q + REC_FIXED;
    rec->g = rec->ids + rec->n * 8;
    rec->vers = (flags & REC_VERS) ? rec->g + rec->n * 4 * rec->dim : NULL;
    *off += REC_FIXED + (size_t)padded;
    return 0;
}

int zp_rbatch_rows_group(const uint8_t *p, size_t len, size_t *off, uint32_t *count)
{
    if (*off > len || len - *off < 8)
        return -1;
    memcpy(count, p + *off, 4);
    *off += 8;
    return 0;
}

/* Mark the open sparse pushes of round `clock` of `table` closed. */
static void close_rows_round(zp_repl_batch *b, uint32_t table, int64_t clock)
{
    for (size_t i = 0; i < b->n; i++) {
        zp_repl_item *it = &b->items[i];
        if (it->sparse && it->table == table && it->clock == clock && !it->closed) {
            it->closed = true;
            b->open--;
        }
    }
}

void zp_rbatch_attach_rows(zp_repl_batch *b, zp_rbatch_buf *recs)
{
    if (b->n == 0 || recs->nrec == 0)
        return;
    zp_repl_item *it = &b->items[b->n - 1];
    it->has_rows = true;
    it->rows_at = b->rows.len;
    uint8_t *p = buf_room(&b->rows, 8 + recs->len);
    put32(p, recs->nrec);
    put32(p + 4, 0);
    memcpy(p + 8, recs->p, recs->len);
    b->rows.len += 8 + recs->len;
    b->rows.nrec += recs->nrec;
    size_t off = 0;
    zp_rbatch_rec rec;
    while (off < recs->len && zp_rbatch_rec_read(recs->p, recs->len, &off, &rec) == 0)
        close_rows_round(b, rec.table, rec.clock);
    recs->len = 0;
    recs->nrec = 0;
}

/* Whether worker `rank` last sent a request whose reply the batch holds. */
static bool waits_on_batch(const zp_repl_batch *b, uint32_t rank, uint64_t seq_hi)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].rank == rank && b->items[i].seq == seq_hi)
            return true;
    return false;
}

double zp_rbatch_patience(const zp_repl_batch *b, const zp_workers *ws, bool lost_continue)
{
    bool any = false;
    int64_t c = INT64_MAX;
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].sparse && !b->items[i].closed && b->items[i].clock < c) {
            c = b->items[i].clock;
            any = true;
        }
    if (!any)
        return -1;
    for (int i = 0; i < ws->n; i++) {
        const zp_worker *w = &ws->w[i];
        if (w->left || (w->lost && lost_continue) || w->clock > c)
            continue; /* gone, or finished the round */
        if (!waits_on_batch(b, (uint32_t)i, w->seq_hi))
            return ZP_RBATCH_IDLE_S; /* it may still send its clock */
    }
    return ZP_RBATCH_STUCK_S;
}

void zp_rbatch_hold(zp_repl_batch *b, const zp_repl_held *h)
{
    if (b->nheld == b->capheld) {
        b->capheld = b->capheld ? b->capheld * 2 : 64;
        b->held = zp_alloc_resize(b->held, b->capheld * sizeof(*b->held));
    }
    b->held[b->nheld] = *h; /* zmq_msg_t moves by value, as the held ring does */
    b->held[b->nheld].lsn = b->n - 1;
    b->nheld++;
}

bool zp_rbatch_ready(const zp_repl_batch *b)
{
    return b->n > 0 && b->open == 0;
}

static void free_sums(void *data, void *hint)
{
    (void)hint;
    free(data);
}

int zp_rbatch_entry(zp_repl_batch *b, zmq_msg_t f[3])
{
    size_t len = 0;
    for (size_t i = 0; i < b->n; i++)
        len += ITEM_FIXED + (b->items[i].has_rows ? 8 : 0) + zmq_msg_size(&b->items[i].e.f[0]);
    size_t rows_at = b->rows.len ? zp_rbatch_rows_start(len) : len;
    size_t total = rows_at + b->rows.len;
    zmq_msg_init_size(&f[1], total ? total : 1);
    uint8_t *p = zmq_msg_data(&f[1]);
    for (size_t i = 0; i < b->n; i++) {
        const zp_repl_item *it = &b->items[i];
        size_t hl = zmq_msg_size((zmq_msg_t *)&it->e.f[0]);
        put32(p, (uint32_t)hl);
        put32(p + 4, (it->closes ? ITEM_CLOSES : 0u) | (it->has_rows ? ITEM_ROWS : 0u));
        put64(p + 8, it->wire);
        put64(p + 16, it->sum_at);
        p += ITEM_FIXED;
        if (it->has_rows) {
            put64(p, it->rows_at);
            p += 8;
        }
        memcpy(p, zmq_msg_data((zmq_msg_t *)&it->e.f[0]), hl);
        p += hl;
    }
    if (b->rows.len) { /* after the items, from an 8-byte boundary */
        memset(p, 0, rows_at - len);
        memcpy((uint8_t *)zmq_msg_data(&f[1]) + rows_at, b->rows.p, b->rows.len);
    }
    if (b->nsums) {
        zmq_msg_init_data(&f[2], b->sums, b->nsums * sizeof(float), free_sums, NULL);
        b->sums = NULL; /* the frame owns it now */
        b->capsums = 0;
    } else {
        zmq_msg_init(&f[2]);
    }
    Zeps__Header h;
    zeps__header__init(&h);
    h.version = ZP_PROTOCOL_VERSION;
    h.op = ZEPS__OP__PUSH;
    h.flags = ZP_FLAG_ROUND;
    h.count = b->n;
    size_t hl = zeps__header__get_packed_size(&h);
    zmq_msg_init_size(&f[0], hl);
    zeps__header__pack(&h, zmq_msg_data(&f[0]));
    return 3;
}

size_t zp_rbatch_rows_start(size_t items_end)
{
    return (items_end + 7) & ~(size_t)7;
}

int zp_rbatch_read(const uint8_t *p, size_t len, size_t *off, zp_rbatch_view *v)
{
    if (*off > len || len - *off < ITEM_FIXED)
        return -1;
    const uint8_t *q = p + *off;
    uint32_t hl, flags;
    memcpy(&hl, q, 4);
    memcpy(&flags, q + 4, 4);
    memcpy(&v->wire, q + 8, 8);
    memcpy(&v->sum_at, q + 16, 8);
    size_t fixed = ITEM_FIXED + ((flags & ITEM_ROWS) ? 8 : 0);
    if (len - *off < fixed || len - *off - fixed < hl || (flags & ~(ITEM_CLOSES | ITEM_ROWS)))
        return -1;
    v->has_rows = flags & ITEM_ROWS;
    v->rows_at = 0;
    if (v->has_rows)
        memcpy(&v->rows_at, q + ITEM_FIXED, 8);
    v->header = q + fixed;
    v->header_len = hl;
    v->closes = flags & ITEM_CLOSES;
    *off += fixed + hl;
    return 0;
}
