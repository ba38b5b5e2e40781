/*
 * rbatch.c - see rbatch.h. The batch is three growable arrays (pushes,
 * sums, replies); the entry is encoded once, when it is logged.
 */
#include "rbatch.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "zeps.pb-c.h"

#define ITEM_FIXED 24 /* u32 header length, u32 flags, u64 wire bytes, u64 sum start */

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
}

void zp_rbatch_fini(zp_repl_batch *b)
{
    zp_rbatch_clear(b);
    for (size_t i = 0; i < b->nheld; i++)
        zp_rbatch_held_close(&b->held[i]);
    free(b->items);
    free(b->sums);
    free(b->held);
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
    it->e.n = n;
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

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* little-endian hosts only, as every frame of the protocol */
}

static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
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
        len += ITEM_FIXED + zmq_msg_size(&b->items[i].e.f[0]);
    zmq_msg_init_size(&f[1], len ? len : 1);
    uint8_t *p = zmq_msg_data(&f[1]);
    for (size_t i = 0; i < b->n; i++) {
        const zp_repl_item *it = &b->items[i];
        size_t hl = zmq_msg_size((zmq_msg_t *)&it->e.f[0]);
        put32(p, (uint32_t)hl);
        put32(p + 4, it->closes ? 1u : 0u);
        put64(p + 8, it->wire);
        put64(p + 16, it->sum_at);
        memcpy(p + ITEM_FIXED, zmq_msg_data((zmq_msg_t *)&it->e.f[0]), hl);
        p += ITEM_FIXED + hl;
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
    if (len - *off - ITEM_FIXED < hl || (flags & ~1u))
        return -1;
    v->header = q + ITEM_FIXED;
    v->header_len = hl;
    v->closes = flags & 1u;
    *off += ITEM_FIXED + hl;
    return 0;
}
