/*
 * shmseg.c - a connection's shared-memory segment: creation and sealing
 * (client), checked mapping (shard), the writer's allocator and the
 * reader's checks; see shmseg.h.
 *
 * The writer keeps its buffers in a short array sorted by offset and
 * allocates first fit from the start of its area, so a connection keeps
 * touching the same pages (a memfd's pages stay once faulted in). A buffer
 * is reusable when its tag says the reader released it, swapped to FREE
 * under compare-and-swap so that a resend taken at the same moment loses
 * cleanly (it is refused as stale) or wins (the writer leaves the buffer).
 */
#define _GNU_SOURCE
#include "shmseg.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "errors.h"
#include "zeps_errors.h"

#define MAGIC 0x314d48535350455aull /* "ZEPSSHM1" */

/* tag states */
enum { ST_FREE = 0, ST_WRITING = 1, ST_WRITTEN = 2, ST_HELD = 3, ST_DONE = 4 };
#define TAG(gen, st) ((gen) << 8 | (uint64_t)(st))
#define TAG_GEN(t)   ((t) >> 8)
#define TAG_ST(t)    ((unsigned)((t)&0xff))

typedef struct head {
    uint64_t magic;
    uint64_t area_bytes;
} head;

typedef struct bufhdr { /* ZP_SHM_ALIGN bytes before each buffer's data */
    _Atomic uint64_t tag;
    _Atomic uint64_t cap; /* data bytes the writer allocated; 0 once reclaimed */
} bufhdr;

typedef struct live {  /* a writer's buffer */
    uint64_t off, end; /* its header's offset, and past its data */
    uint64_t gen;
    int keep; /* the writer still needs it (zp_shmseg_done not yet called) */
} live;

typedef struct held { /* a buffer the reader took */
    uint64_t off, len, gen;
    int refs;
} held;

struct zp_shmseg {
    _Atomic int refs;
    char *base;
    size_t size;
    uint64_t area; /* bytes of each area */
    int wr, rd;    /* the area this side writes, and the one it reads */
    /* writer */
    live lv[ZP_SHM_MAX_LIVE];
    int nlive;
    uint64_t next_gen;
    /* reader */
    pthread_mutex_t lock;
    held hd[ZP_SHM_MAX_HELD];
    int nheld;
};

static char *area_base(const zp_shmseg *g, int a)
{
    return g->base + ZP_SHM_HEAD + (size_t)a * g->area;
}

static bufhdr *hdr_at(const zp_shmseg *g, int a, uint64_t data_off)
{
    return (bufhdr *)(area_base(g, a) + data_off - ZP_SHM_ALIGN);
}

static zp_shmseg *seg_new(char *base, size_t size, uint64_t area, int wr)
{
    zp_shmseg *g = zp_alloc_zeroed(1, sizeof(*g));
    atomic_init(&g->refs, 1);
    g->base = base;
    g->size = size;
    g->area = area;
    g->wr = wr;
    g->rd = !wr;
    g->next_gen = 1;
    pthread_mutex_init(&g->lock, NULL);
    return g;
}

int zp_shmseg_create(zp_shmseg **out, int *fd, uint64_t area_bytes, char *err, size_t errlen)
{
    uint64_t area = (area_bytes + 4095) & ~(uint64_t)4095;
    if (area < 4096 || area > ((uint64_t)1 << 40))
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "shared-memory area of %" PRIu64 " bytes (4 KiB to 1 TiB)",
                             area_bytes);
    size_t size = ZP_SHM_HEAD + 2 * area;
    int f = memfd_create("zeps-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0)
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "memfd_create: %s", strerror(errno));
    if (ftruncate(f, (off_t)size) != 0 ||
        fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        int e = errno;
        close(f);
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "sizing and sealing a memfd: %s",
                             strerror(e));
    }
    char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(f);
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "mmap of %zu bytes: %s", size,
                             strerror(e));
    }
    head *h = (head *)base;
    h->area_bytes = area;
    h->magic = MAGIC;
    *out = seg_new(base, size, area, ZP_SHM_AREA_REQ);
    *fd = f;
    return 0;
}

int zp_shmseg_attach(zp_shmseg **out, int fd, char *err, size_t errlen)
{
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &st) != 0 || seals < 0)
        return zp_errors_set(err, errlen, ZEPS_EPROTO, "the descriptor sent is not a memfd");
    if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "the memfd sent is not sealed against resizing (seals 0x%x)", seals);
    size_t size = (size_t)st.st_size;
    if (size < ZP_SHM_HEAD + 2 * 4096)
        return zp_errors_set(err, errlen, ZEPS_EPROTO, "the memfd sent has %zu bytes", size);
    char *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return zp_errors_set(err, errlen, ZEPS_ETRANSPORT, "mmap of %zu bytes: %s", size,
                             strerror(errno));
    head h;
    memcpy(&h, base, sizeof(h)); /* read once: the peer may write it */
    if (h.magic != MAGIC || h.area_bytes % 4096 || h.area_bytes == 0 ||
        h.area_bytes > (size - ZP_SHM_HEAD) / 2 || ZP_SHM_HEAD + 2 * h.area_bytes != size) {
        munmap(base, size);
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "the memfd's head does not describe its %zu bytes", size);
    }
    *out = seg_new(base, size, h.area_bytes, ZP_SHM_AREA_REP);
    return 0;
}

zp_shmseg *zp_shmseg_ref(zp_shmseg *g)
{
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    return g;
}

void zp_shmseg_unref(zp_shmseg **gp)
{
    zp_shmseg *g = *gp;
    *gp = NULL;
    if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    munmap(g->base, g->size);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

uint64_t zp_shmseg_area_bytes(const zp_shmseg *g)
{
    return g->area;
}

/* The writer's buffer i may be reused: swap its tag to FREE if the reader
 * released it, or (no longer kept) never took it. */
static int reclaim(zp_shmseg *g, const live *e)
{
    if (e->keep)
        return 0;
    bufhdr *b = (bufhdr *)(area_base(g, g->wr) + e->off);
    uint64_t t = atomic_load_explicit(&b->tag, memory_order_acquire);
    if (TAG_GEN(t) != e->gen)
        return 1; /* not ours any more (the peer wrote the header): nobody may take it */
    /* the shard never reclaims a WRITTEN reply: the client has not read it yet */
    unsigned st = TAG_ST(t);
    if (st != ST_DONE && !(st == ST_WRITTEN && g->wr == ZP_SHM_AREA_REQ))
        return 0;
    /* tag 0 (generation 0, which no descriptor names) and capacity 0: a
     * later buffer whose data covers this header with a few bytes cannot
     * make it a buffer again (a take needs a generation, a state and a
     * capacity, 16 bytes, to match) */
    if (!atomic_compare_exchange_strong_explicit(&b->tag, &t, TAG(0, ST_FREE), memory_order_acq_rel,
                                                 memory_order_acquire))
        return 0;
    atomic_store_explicit(&b->cap, 0, memory_order_relaxed);
    return 1;
}

int zp_shmseg_alloc(zp_shmseg *g, size_t len, zp_shm_desc *d, void **data)
{
    uint64_t need =
        ZP_SHM_ALIGN + (((uint64_t)len + ZP_SHM_ALIGN - 1) & ~(uint64_t)(ZP_SHM_ALIGN - 1));
    if (len == 0 || need > g->area)
        return -1;
    uint64_t prev = 0;
    int at = -1;
    for (int i = 0; i < g->nlive; i++) {
        if (reclaim(g, &g->lv[i])) {
            memmove(&g->lv[i], &g->lv[i + 1], (size_t)(g->nlive - i - 1) * sizeof(live));
            g->nlive--;
            i--;
            continue;
        }
        if (at < 0 && g->lv[i].off - prev >= need)
            at = i;
        prev = g->lv[i].end;
    }
    if (at < 0) {
        if (g->area - prev < need)
            return -1;
        at = g->nlive;
    }
    if (g->nlive == ZP_SHM_MAX_LIVE)
        return -1;
    uint64_t off = at == 0 ? 0 : g->lv[at - 1].end;
    memmove(&g->lv[at + 1], &g->lv[at], (size_t)(g->nlive - at) * sizeof(live));
    g->nlive++;
    live *e = &g->lv[at];
    *e = (live){.off = off, .end = off + need, .gen = g->next_gen++, .keep = 1};
    bufhdr *b = (bufhdr *)(area_base(g, g->wr) + off);
    atomic_store_explicit(&b->tag, TAG(e->gen, ST_WRITING), memory_order_relaxed);
    atomic_store_explicit(&b->cap, need - ZP_SHM_ALIGN, memory_order_relaxed);
    *d = (zp_shm_desc){.offset = off + ZP_SHM_ALIGN, .length = len, .generation = e->gen};
    *data = area_base(g, g->wr) + off + ZP_SHM_ALIGN;
    return 0;
}

static live *find_live(zp_shmseg *g, const zp_shm_desc *d)
{
    for (int i = 0; i < g->nlive; i++)
        if (g->lv[i].off + ZP_SHM_ALIGN == d->offset && g->lv[i].gen == d->generation)
            return &g->lv[i];
    return NULL;
}

void zp_shmseg_written(zp_shmseg *g, const zp_shm_desc *d, int keep)
{
    live *e = find_live(g, d);
    if (!e)
        return;
    e->keep = keep;
    atomic_store_explicit(&hdr_at(g, g->wr, d->offset)->tag, TAG(e->gen, ST_WRITTEN),
                          memory_order_release);
}

void zp_shmseg_done(zp_shmseg *g, const zp_shm_desc *d)
{
    live *e = find_live(g, d);
    if (e)
        e->keep = 0;
}

/* Check d's place; 0 or -1 with the reason in err. */
static int check_place(const zp_shmseg *g, const zp_shm_desc *d, char *err, size_t errlen)
{
    if (d->length == 0 || d->length > g->area || d->offset > g->area - d->length)
        return zp_errors_set(err, errlen, ZEPS_ESHM,
                             "shared-memory descriptor [%" PRIu64 ", +%" PRIu64
                             ") is outside its area of %" PRIu64 " bytes",
                             d->offset, d->length, g->area);
    if (d->generation == 0)
        return zp_errors_set(
            err, errlen, ZEPS_ESHM,
            "shared-memory descriptor names generation 0 (generations start at 1)");
    if (d->offset < ZP_SHM_ALIGN || d->offset % ZP_SHM_ALIGN)
        return zp_errors_set(err, errlen, ZEPS_ESHM,
                             "shared-memory descriptor offset %" PRIu64
                             " is not a buffer's (64-byte aligned, past its header)",
                             d->offset);
    return 0;
}

/* A held buffer that d overlaps (header included), or NULL. */
static held *overlapping(zp_shmseg *g, const zp_shm_desc *d)
{
    uint64_t lo = d->offset - ZP_SHM_ALIGN, hi = d->offset + d->length;
    for (int i = 0; i < g->nheld; i++) {
        held *h = &g->hd[i];
        if (lo < h->off + h->len && h->off - ZP_SHM_ALIGN < hi)
            return h;
    }
    return NULL;
}

/* Swap the buffer's tag from WRITTEN (or DONE: a resend) at d's generation
 * to HELD, if d fits its capacity; a refusal writes nothing. */
static int claim(zp_shmseg *g, const zp_shm_desc *d, char *err, size_t errlen)
{
    bufhdr *b = hdr_at(g, g->rd, d->offset);
    uint64_t t = atomic_load_explicit(&b->tag, memory_order_acquire);
    for (;;) {
        if (TAG_GEN(t) != d->generation || (TAG_ST(t) != ST_WRITTEN && TAG_ST(t) != ST_DONE))
            return zp_errors_set(
                err, errlen, ZEPS_ESHM,
                "shared-memory descriptor at offset %" PRIu64 " names generation %" PRIu64
                ", but its buffer is at generation %" PRIu64 " (state %u): stale, nothing read",
                d->offset, d->generation, TAG_GEN(t), TAG_ST(t));
        /* the capacity the writer set before the tag t (acquired) */
        uint64_t cap = atomic_load_explicit(&b->cap, memory_order_relaxed);
        if (d->length > cap)
            return zp_errors_set(err, errlen, ZEPS_ESHM,
                                 "shared-memory descriptor of %" PRIu64
                                 " bytes is longer than its buffer (%" PRIu64 ")",
                                 d->length, cap);
        if (atomic_compare_exchange_weak_explicit(&b->tag, &t, TAG(d->generation, ST_HELD),
                                                  memory_order_acq_rel, memory_order_acquire))
            return 0;
    }
}

int zp_shmseg_take(zp_shmseg *g, const zp_shm_desc *d, const void **data, char *err, size_t errlen)
{
    if (check_place(g, d, err, errlen) != 0)
        return ZEPS_ESHM;
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    held *h = overlapping(g, d);
    if (h && h->off == d->offset && h->gen == d->generation && h->len == d->length) {
        h->refs++; /* a resend of a buffer still held: the bytes are still there */
    } else if (h) {
        rc = zp_errors_set(err, errlen, ZEPS_ESHM,
                           "shared-memory descriptor [%" PRIu64 ", +%" PRIu64
                           ") generation %" PRIu64 " overlaps a buffer in flight ([%" PRIu64
                           ", +%" PRIu64 ") generation %" PRIu64 ")",
                           d->offset, d->length, d->generation, h->off, h->len, h->gen);
    } else if (g->nheld == ZP_SHM_MAX_HELD) {
        rc = zp_errors_set(err, errlen, ZEPS_ESHM, "%d shared-memory buffers already held",
                           g->nheld);
    } else if ((rc = claim(g, d, err, errlen)) == 0) {
        g->hd[g->nheld++] =
            (held){.off = d->offset, .len = d->length, .gen = d->generation, .refs = 1};
    }
    pthread_mutex_unlock(&g->lock);
    if (rc == 0)
        *data = area_base(g, g->rd) + d->offset;
    return rc;
}

void zp_shmseg_release(zp_shmseg *g, const void *data)
{
    uint64_t off = (uint64_t)((const char *)data - area_base(g, g->rd));
    pthread_mutex_lock(&g->lock);
    for (int i = 0; i < g->nheld; i++) {
        held *h = &g->hd[i];
        if (h->off != off || --h->refs > 0)
            continue;
        uint64_t t = TAG(h->gen, ST_HELD);
        atomic_compare_exchange_strong_explicit(&hdr_at(g, g->rd, off)->tag, &t,
                                                TAG(h->gen, ST_DONE), memory_order_acq_rel,
                                                memory_order_acquire);
        g->hd[i] = g->hd[--g->nheld];
        break;
    }
    pthread_mutex_unlock(&g->lock);
}

int zp_shmseg_held(zp_shmseg *g)
{
    pthread_mutex_lock(&g->lock);
    int n = g->nheld;
    pthread_mutex_unlock(&g->lock);
    return n;
}

int zp_shmseg_live(const zp_shmseg *g)
{
    return g->nlive;
}
