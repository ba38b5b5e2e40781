/*
 * fuzz_shm.c - libFuzzer target: shared-memory descriptors (common/shmseg.c)
 * between a real client segment (a sealed memfd) and the shard's mapping
 * of it, under any sequence of allocations, takes, releases and requests
 * answered, with descriptors from the input (made up, or real ones with
 * bits flipped).
 *
 * Input: bytes read as operations until the input ends, each an op byte
 * and its arguments (fuzz_input.h). What must hold, or the target aborts:
 * a take that succeeds lies inside the area, names a buffer the writer
 * wrote at that generation and reads exactly the bytes written then; the writer never hands out a
 * buffer that overlaps one the reader holds; a refused take changes nothing the reader holds.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input.h"
#include "shmseg.h"

#define AREA  (64u << 10)
#define SLOTS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct written {
    zp_shm_desc d;
    int used;
} written;

/* Every allocation's (offset, generation, length), by generation: what a
 * take of it must read (the byte pattern_of(generation)). */
#define HISTORY 8192 /* more allocations than any input of libFuzzer's default length makes */
typedef struct history {
    zp_shm_desc d[HISTORY];
} history;

static uint8_t pattern_of(uint64_t gen)
{
    return (uint8_t)(gen * 37 + 1);
}

typedef struct taken {
    zp_shm_desc d;
    const uint8_t *p;
    int used;
} taken;

static zp_shm_desc made_up(zf_cursor *c, const written *w)
{
    zp_shm_desc d;
    if (zf_byte(c) & 1) { /* a real one, perhaps with bits flipped */
        d = w[zf_byte(c) % SLOTS].d;
        d.offset ^= zf_byte(c) & 1 ? (uint64_t)zf_u32(c) : 0;
        d.length ^= zf_byte(c) & 1 ? (uint64_t)zf_u32(c) << (zf_byte(c) % 40) : 0;
        d.generation ^= zf_byte(c) & 1 ? (uint64_t)zf_byte(c) : 0;
    } else {
        d.offset = zf_u32(c) | (uint64_t)zf_u32(c) << 32;
        d.length = zf_u32(c) | (uint64_t)(zf_byte(c) & 3) << 32;
        d.generation = zf_u32(c);
    }
    return d;
}

static int overlaps(const zp_shm_desc *a, const zp_shm_desc *b)
{
    return a->offset - 64 < b->offset + b->length && b->offset - 64 < a->offset + a->length;
}

static void do_take(zp_shmseg *shard, zp_shm_desc d, const history *h, taken *t)
{
    int held = zp_shmseg_held(shard);
    const void *p = NULL;
    char err[256];
    if (zp_shmseg_take(shard, &d, &p, err, sizeof(err)) != 0) {
        if (zp_shmseg_held(shard) != held)
            abort(); /* a refusal took something */
        return;
    }
    if (d.offset < 64 || d.offset + d.length > AREA || d.length == 0)
        abort(); /* accepted outside the area */
    const zp_shm_desc *src = &h->d[d.generation % HISTORY];
    if (src->generation != d.generation || src->offset != d.offset || d.length > src->length + 63)
        abort(); /* took a buffer the writer never wrote at that generation */
    const uint8_t *b = p;
    for (uint64_t i = 0; i < d.length && i < src->length; i++)
        if (b[i] != pattern_of(d.generation))
            abort(); /* read what the writer did not write at that generation */
    for (int i = 0; i < SLOTS; i++)
        if (!t[i].used) {
            t[i] = (taken){.d = d, .p = p, .used = 1};
            return;
        }
    zp_shmseg_release(shard, p); /* no slot to keep it in */
}

static void do_alloc(zp_shmseg *client, size_t len, int slot, written *w, const taken *t,
                     history *h)
{
    zp_shm_desc d;
    void *p;
    if (w[slot].used)
        zp_shmseg_done(client, &w[slot].d);
    w[slot].used = 0;
    if (zp_shmseg_alloc(client, len, &d, &p) != 0)
        return;
    for (int i = 0; i < SLOTS; i++)
        if (t[i].used && overlaps(&d, &t[i].d))
            abort(); /* handed out a buffer the reader holds */
    memset(p, pattern_of(d.generation), len);
    zp_shmseg_written(client, &d, 1);
    w[slot] = (written){.d = d, .used = 1};
    h->d[d.generation % HISTORY] = d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zp_shmseg *client = NULL, *shard = NULL;
    int fd;
    char err[256];
    if (zp_shmseg_create(&client, &fd, AREA, err, sizeof(err)) != 0)
        abort();
    if (zp_shmseg_attach(&shard, fd, err, sizeof(err)) != 0)
        abort();
    close(fd);
    written w[SLOTS] = {0};
    taken t[SLOTS] = {0};
    static history h;
    memset(&h, 0, sizeof(h));
    zf_cursor c = {data, size};
    while (c.left) {
        uint8_t op = zf_byte(&c);
        int slot = zf_byte(&c) % SLOTS;
        if (op % 4 == 0) {
            do_alloc(client, 1 + zf_u32(&c) % (AREA / 3), slot, w, t, &h);
        } else if (op % 4 == 1) {
            do_take(shard, made_up(&c, w), &h, t);
        } else if (op % 4 == 2 && t[slot].used) {
            zp_shmseg_release(shard, t[slot].p);
            t[slot].used = 0;
        } else if (op % 4 == 3 && w[slot].used) {
            zp_shmseg_done(client, &w[slot].d);
            w[slot].used = 0;
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (t[i].used)
            zp_shmseg_release(shard, t[i].p);
    if (zp_shmseg_held(shard) != 0)
        abort();
    zp_shmseg_unref(&client);
    zp_shmseg_unref(&shard);
    return 0;
}
