/*
 * slotmap.c - hash slots and the slot -> shard map (see slotmap.h). The map
 * is an array of u16 owners indexed by slot; a lookup is the id's shard
 * hash, one modulo and one load.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "densemap.h"
#include "errors.h"
#include "slotmap.h"
#include "sparse_hash.h"

struct zp_slotmap {
    uint64_t epoch;
    uint32_t slots;
    int nshards;
    int base;  /* shards of the cluster file; those past it joined at run time */
    char *eps; /* [nshards - base][ZP_SLOTMAP_EP_MAX]: the joined shards' endpoints */
    uint64_t retired[ZP_SLOTMAP_SHARDS_MAX / 64]; /* bit k: shard k retired (owns no slot) */
    zp_densemap *dense; /* the dense tables a move cut (densemap.h); NULL: none */
    uint16_t owner[];   /* [slots] */
};

static zp_slotmap *alloc_map(uint32_t slots, int nshards, uint64_t epoch)
{
    zp_slotmap *m = zp_alloc(sizeof(*m) + (size_t)slots * sizeof(uint16_t));
    m->epoch = epoch;
    m->slots = slots;
    m->nshards = nshards;
    m->base = nshards;
    m->eps = NULL;
    m->dense = NULL;
    memset(m->retired, 0, sizeof(m->retired));
    return m;
}

/* n's joined and retired shards and dense pieces as m's (n has none yet). */
static void copy_joined(zp_slotmap *n, const zp_slotmap *m)
{
    n->dense = zp_densemap_copy(m->dense);
    n->nshards = m->nshards;
    n->base = m->base;
    memcpy(n->retired, m->retired, sizeof(n->retired));
    if (m->eps) {
        size_t len = (size_t)(m->nshards - m->base) * ZP_SLOTMAP_EP_MAX;
        n->eps = zp_alloc(len);
        memcpy(n->eps, m->eps, len);
    }
}

int zp_slotmap_new_default(zp_slotmap **out, int nshards)
{
    if (!out || nshards < 1 || nshards > ZP_SLOTS_DEFAULT)
        return ZEPS_EINVAL;
    uint32_t slots = (uint32_t)nshards * (ZP_SLOTS_DEFAULT / (uint32_t)nshards);
    zp_slotmap *m = alloc_map(slots, nshards, 0);
    for (uint32_t n = 0; n < slots; n++)
        m->owner[n] = (uint16_t)(n % (uint32_t)nshards);
    *out = m;
    return 0;
}

void zp_slotmap_destroy(zp_slotmap **mp)
{
    if (!mp || !*mp)
        return;
    free((*mp)->eps);
    zp_densemap_destroy(&(*mp)->dense);
    free(*mp);
    *mp = NULL;
}

uint64_t zp_slotmap_epoch(const zp_slotmap *m)
{
    return m->epoch;
}

uint32_t zp_slotmap_slots(const zp_slotmap *m)
{
    return m->slots;
}

int zp_slotmap_shards(const zp_slotmap *m)
{
    return m->nshards;
}

int zp_slotmap_base(const zp_slotmap *m)
{
    return m->base;
}

const char *zp_slotmap_endpoint(const zp_slotmap *m, int k)
{
    if (k < m->base || k >= m->nshards)
        return NULL;
    return m->eps + (size_t)(k - m->base) * ZP_SLOTMAP_EP_MAX;
}

int zp_slotmap_joined(const zp_slotmap *m, const char *endpoint, zp_slotmap **out, char *err,
                      size_t errlen)
{
    size_t len = endpoint ? strlen(endpoint) : 0;
    if (len == 0 || len >= ZP_SLOTMAP_EP_MAX)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "an endpoint of %zu bytes (1..%d)", len,
                             ZP_SLOTMAP_EP_MAX - 1);
    if (m->nshards >= ZP_SLOTMAP_SHARDS_MAX)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "the map names %d shards already (at most %d)", m->nshards,
                             ZP_SLOTMAP_SHARDS_MAX);
    for (int k = m->base; k < m->nshards; k++)
        if (strcmp(zp_slotmap_endpoint(m, k), endpoint) == 0)
            return zp_errors_set(err, errlen, ZEPS_EINVAL,
                                 "%s is shard %d of the map (epoch %" PRIu64 ") already", endpoint,
                                 k, m->epoch);
    zp_slotmap *n = alloc_map(m->slots, m->nshards + 1, m->epoch + 1);
    memcpy(n->owner, m->owner, (size_t)m->slots * sizeof(uint16_t));
    n->base = m->base;
    size_t had = (size_t)(m->nshards - m->base) * ZP_SLOTMAP_EP_MAX;
    n->eps = zp_alloc_zeroed(had + ZP_SLOTMAP_EP_MAX, 1);
    if (had)
        memcpy(n->eps, m->eps, had);
    memcpy(n->eps + had, endpoint, len);
    memcpy(n->retired, m->retired, sizeof(n->retired));
    n->dense = zp_densemap_copy(m->dense);
    *out = n;
    return 0;
}

static bool is_retired(const zp_slotmap *m, int k)
{
    return (m->retired[k / 64] >> (k % 64)) & 1;
}

static int is_retired_arg(int k, const void *arg)
{
    return is_retired(arg, k);
}

static int count_retired(const zp_slotmap *m)
{
    int n = 0;
    for (int k = 0; k < m->nshards; k++)
        n += is_retired(m, k);
    return n;
}

bool zp_slotmap_retired(const zp_slotmap *m, int k)
{
    return k >= 0 && k < m->nshards && is_retired(m, k);
}

int zp_slotmap_unretires(const zp_slotmap *have, const zp_slotmap *next)
{
    for (int k = 0; k < have->nshards; k++)
        if (is_retired(have, k) && !zp_slotmap_retired(next, k))
            return k;
    return -1;
}

static int is_shard(int k, const void *arg)
{
    return k == *(const int *)arg;
}

int zp_slotmap_retire(const zp_slotmap *m, int k, zp_slotmap **out, char *err, size_t errlen)
{
    if (k <= 0 || k >= m->nshards)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "shard %d cannot be retired: the map names shards 0-%d, and shard 0 "
                             "keeps the cluster's BARRIER",
                             k, m->nshards - 1);
    if (is_retired(m, k))
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "shard %d is retired already (slot map epoch %" PRIu64 ")", k,
                             m->epoch);
    uint32_t owns = zp_slotmap_count(m, k);
    if (owns > 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "shard %d owns %u slots at slot map epoch %" PRIu64
                             ": move them away first (zepsctl shards remove %d)",
                             k, owns, m->epoch, k);
    if (zp_densemap_any_owner(m->dense, is_shard, &k) >= 0)
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "shard %d holds a piece of a dense table at slot map epoch %" PRIu64
                             ": move it away first (zepsctl shards remove %d)",
                             k, m->epoch, k);
    zp_slotmap *n = alloc_map(m->slots, m->nshards, m->epoch + 1);
    memcpy(n->owner, m->owner, (size_t)m->slots * sizeof(uint16_t));
    copy_joined(n, m);
    n->retired[k / 64] |= (uint64_t)1 << (k % 64);
    *out = n;
    return 0;
}

uint32_t zp_slotmap_slot_of(const zp_slotmap *m, uint64_t id)
{
    return (uint32_t)(zp_sparse_hash_id(id, ZP_SHARD_HASH_SEED) % m->slots);
}

int zp_slotmap_owner(const zp_slotmap *m, uint64_t id)
{
    return m->owner[zp_slotmap_slot_of(m, id)];
}

int zp_slotmap_slot_owner(const zp_slotmap *m, uint32_t slot)
{
    return m->owner[slot];
}

uint32_t zp_slotmap_count(const zp_slotmap *m, int k)
{
    uint32_t n = 0;
    for (uint32_t s = 0; s < m->slots; s++)
        n += m->owner[s] == k;
    return n;
}

/* --- the map file --- */

/* The parser's state: what the header lines said, and which slots the
 * ranges covered so far (owner 0xffff: not yet). */
typedef struct parse {
    uint64_t epoch;
    uint32_t slots;
    int nshards;
    zp_slotmap *m; /* made at the first range line, once slots is known */
    char *err;
    size_t errlen;
} parse;

static int read_u64(const char **p, uint64_t *v)
{
    while (**p == ' ' || **p == '\t')
        (*p)++;
    if (!isdigit((unsigned char)**p))
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(*p, &end, 10);
    if (errno)
        return -1;
    *v = x;
    *p = end;
    return 0;
}

static int rest_blank(const char *p, const char *end)
{
    for (; p < end; p++)
        if (*p != ' ' && *p != '\t' && *p != '\r')
            return 0;
    return 1;
}

/* One range line `LO-HI SHARD` or `SLOT SHARD` (a copy, terminated). */
static int parse_range(parse *ps, const char *p, const char *end, unsigned line)
{
    uint64_t lo, hi, k;
    if (read_u64(&p, &lo) != 0)
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                             "line %u: expected `epoch E`, `slots N` or `LO-HI SHARD`", line);
    hi = lo;
    if (*p == '-') {
        p++;
        if (read_u64(&p, &hi) != 0)
            return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                                 "line %u: a range is LO-HI (both slots, inclusive)", line);
    }
    if (read_u64(&p, &k) != 0 || !rest_blank(p, end))
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                             "line %u: a range line is `LO-HI SHARD`", line);
    if (!ps->m) {
        if (!ps->epoch || !ps->slots)
            return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                                 "line %u: `epoch` and `slots` must come before the ranges", line);
        ps->m = alloc_map(ps->slots, ps->nshards, ps->epoch);
        memset(ps->m->owner, 0xff, ps->slots * sizeof(uint16_t));
    }
    if (lo > hi || hi >= ps->slots)
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                             "line %u: range %" PRIu64 "-%" PRIu64 " is not within slots 0-%u",
                             line, lo, hi, ps->slots - 1);
    if (k >= (uint64_t)ps->nshards)
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                             "line %u: shard %" PRIu64 " is not one of the cluster's %d", line, k,
                             ps->nshards);
    for (uint64_t s = lo; s <= hi; s++) {
        if (ps->m->owner[s] != 0xffff)
            return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                                 "line %u: slot %" PRIu64 " is named twice", line, s);
        ps->m->owner[s] = (uint16_t)k;
    }
    return 0;
}

static int parse_line(parse *ps, const char *p, const char *end, unsigned line)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= end)
        return 0;
    const char *hash = memchr(p, '#', (size_t)(end - p));
    if (hash)
        end = hash;
    if (rest_blank(p, end))
        return 0;
    char buf[128];
    size_t n = (size_t)(end - p);
    if (n >= sizeof(buf))
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG, "line %u is too long", line);
    memcpy(buf, p, n);
    buf[n] = '\0';
    const char *q = buf;
    int is_epoch = strncmp(q, "epoch", 5) == 0, is_slots = strncmp(q, "slots", 5) == 0;
    if (!is_epoch && !is_slots)
        return parse_range(ps, buf, buf + n, line);
    q += 5;
    uint64_t v;
    if (ps->m || read_u64(&q, &v) != 0 || !rest_blank(q, buf + n))
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                             "line %u: `%s N` (a number, before the ranges)", line,
                             is_epoch ? "epoch" : "slots");
    if (is_epoch && v == 0)
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                             "line %u: epoch 0 is the default map's; a map file starts at 1", line);
    if (is_slots && (v == 0 || v > ZP_SLOTS_MAX))
        return zp_errors_set(ps->err, ps->errlen, ZEPS_ECONFIG,
                             "line %u: slots %" PRIu64 " is not in 1..%d", line, v, ZP_SLOTS_MAX);
    if (is_epoch)
        ps->epoch = v;
    else
        ps->slots = (uint32_t)v;
    return 0;
}

int zp_slotmap_parse(zp_slotmap **out, const char *text, size_t len, int nshards, char *err,
                     size_t errlen)
{
    if (!out || !text || nshards < 1 || nshards > 0xffff)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "bad arguments");
    parse ps = {.nshards = nshards, .err = err, .errlen = errlen};
    const char *p = text, *end = text + len;
    int rc = 0;
    for (unsigned line = 1; p < end && rc == 0; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        rc = parse_line(&ps, p, le, line);
        p = nl ? nl + 1 : end;
    }
    if (rc == 0 && !ps.m)
        rc = zp_errors_set(err, errlen, ZEPS_ECONFIG, "no slot ranges (epoch, slots, then ranges)");
    for (uint32_t s = 0; rc == 0 && s < ps.slots; s++)
        if (ps.m->owner[s] == 0xffff)
            rc = zp_errors_set(err, errlen, ZEPS_ECONFIG, "slot %u has no shard", s);
    if (rc != 0) {
        free(ps.m);
        return rc;
    }
    *out = ps.m;
    return 0;
}

int zp_slotmap_load(zp_slotmap **out, const char *path, int nshards, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "slot map '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = zp_alloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            cap *= 2;
            buf = zp_alloc_resize(buf, cap);
        }
    }
    int bad = ferror(f);
    fclose(f);
    char why[256];
    int rc = bad ? zp_errors_set(why, sizeof(why), ZEPS_ECONFIG, "read error")
                 : zp_slotmap_parse(out, buf, len, nshards, why, sizeof(why));
    free(buf);
    if (rc != 0)
        zp_errors_set(err, errlen, rc, "slot map '%s': %s", path, why);
    return rc;
}

int zp_slotmap_start(zp_slotmap **out, const char *path, int nshards, char *err, size_t errlen)
{
    return path[0] ? zp_slotmap_load(out, path, nshards, err, errlen)
                   : zp_slotmap_new_default(out, nshards);
}

/* --- the wire form --- */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t zp_slotmap_wire_size(const zp_slotmap *m)
{
    size_t n = ZP_SLOTMAP_WIRE_HDR + (size_t)m->slots * 2;
    int retired = count_retired(m);
    if (m->nshards > m->base || retired || m->dense) {
        n += 4;
        for (int k = m->base; k < m->nshards; k++)
            n += 2 + strlen(zp_slotmap_endpoint(m, k));
    }
    if (retired || m->dense)
        n += 4 + 2 * (size_t)retired;
    if (m->dense)
        n += zp_densemap_wire_size(m->dense);
    return n;
}

void zp_slotmap_encode(const zp_slotmap *m, void *buf)
{
    unsigned char *p = buf;
    put32(p, (uint32_t)m->epoch);
    put32(p + 4, (uint32_t)(m->epoch >> 32));
    put32(p + 8, m->slots);
    put32(p + 12, (uint32_t)m->nshards);
    for (uint32_t s = 0; s < m->slots; s++) {
        p[16 + 2 * s] = (unsigned char)m->owner[s];
        p[17 + 2 * s] = (unsigned char)(m->owner[s] >> 8);
    }
    int retired = count_retired(m);
    if (m->nshards == m->base && !retired && !m->dense)
        return; /* the form of every map before shards could join, byte for byte */
    p += ZP_SLOTMAP_WIRE_HDR + (size_t)m->slots * 2;
    put32(p, (uint32_t)m->base);
    p += 4;
    for (int k = m->base; k < m->nshards; k++) {
        const char *ep = zp_slotmap_endpoint(m, k);
        size_t len = strlen(ep);
        p[0] = (unsigned char)len;
        p[1] = (unsigned char)(len >> 8);
        memcpy(p + 2, ep, len);
        p += 2 + len;
    }
    if (!retired && !m->dense)
        return; /* the form of every map before shards could retire, byte for byte */
    put32(p, (uint32_t)retired); /* 0 only before a dense list */
    p += 4;
    for (int k = 0; k < m->nshards; k++)
        if (is_retired(m, k)) {
            p[0] = (unsigned char)k;
            p[1] = (unsigned char)(k >> 8);
            p += 2;
        }
    if (m->dense)
        zp_densemap_encode(m->dense, p);
}

/* The dense list after the retired one (p, len bytes) into m: 0, or
 * ZEPS_EPROTO with a reason (a piece on a retired shard too). */
static int decode_dense(zp_slotmap *m, const unsigned char *p, size_t len, char *err, size_t errlen)
{
    int rc = zp_densemap_decode(&m->dense, p, len, m->nshards, err, errlen);
    if (rc != 0)
        return rc;
    int k = zp_densemap_any_owner(m->dense, is_retired_arg, m);
    if (k >= 0)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a dense piece of the map is on shard %d, which the map retires", k);
    return 0;
}

/* The retired shards' list after the joined ones (p, len bytes) into m:
 * a u32 count (>= 1, or 0 before a dense list), then that many u16 shard
 * indices, ascending, each a shard of the map but shard 0; then the dense
 * list, if any. 0, or ZEPS_EPROTO with a reason. */
static int decode_retired(zp_slotmap *m, const unsigned char *p, size_t len, char *err,
                          size_t errlen)
{
    uint32_t n = len >= 4 ? get32(p) : 0;
    size_t end = 4 + 2 * (size_t)n;
    if (len < 4 || len < end || (n == 0 && len == end))
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a slot map's list of retired shards of %zu bytes (a count >= 1, "
                             "then 2 bytes a shard)",
                             len);
    int last = 0;
    for (uint32_t i = 0; i < n; i++) {
        int k = p[4 + 2 * i] | p[5 + 2 * i] << 8;
        if (k <= last || k >= m->nshards)
            return zp_errors_set(err, errlen, ZEPS_EPROTO,
                                 "retired shard %d of the slot map is not one of shards 1-%d "
                                 "in ascending order",
                                 k, m->nshards - 1);
        m->retired[k / 64] |= (uint64_t)1 << (k % 64);
        last = k;
    }
    return len == end ? 0 : decode_dense(m, p + end, len - end, err, errlen);
}

/* The joined shards' list after the owners (p, len bytes) into m, whose
 * base must be `base`: 0, or ZEPS_EPROTO with a reason. */
static int decode_joined(zp_slotmap *m, const unsigned char *p, size_t len, int base, char *err,
                         size_t errlen)
{
    if (len < 4 || get32(p) != (uint32_t)base || m->nshards < base)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a slot map over %d shards whose list of joined shards (%zu bytes) "
                             "does not start from this cluster's %d",
                             m->nshards, len, base);
    m->base = base;
    m->eps = zp_alloc_zeroed((size_t)(m->nshards - base), ZP_SLOTMAP_EP_MAX);
    size_t at = 4;
    for (int k = base; k < m->nshards; k++) {
        size_t n = at + 2 <= len ? (size_t)(p[at] | p[at + 1] << 8) : 0;
        if (n == 0 || n >= ZP_SLOTMAP_EP_MAX || at + 2 + n > len || memchr(p + at + 2, 0, n))
            return zp_errors_set(err, errlen, ZEPS_EPROTO,
                                 "joined shard %d of the slot map has no usable endpoint", k);
        memcpy(m->eps + (size_t)(k - base) * ZP_SLOTMAP_EP_MAX, p + at + 2, n);
        at += 2 + n;
    }
    if (at == len && m->nshards == base)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a slot map with an empty list of joined shards and no retired one");
    return at == len ? 0 : decode_retired(m, p + at, len - at, err, errlen);
}

bool zp_slotmap_same(const zp_slotmap *a, const zp_slotmap *b)
{
    size_t len = zp_slotmap_wire_size(a);
    if (len != zp_slotmap_wire_size(b))
        return false;
    uint8_t *x = zp_alloc(len), *y = zp_alloc(len);
    zp_slotmap_encode(a, x);
    zp_slotmap_encode(b, y);
    bool same = memcmp(x, y, len) == 0;
    free(x);
    free(y);
    return same;
}

int zp_slotmap_decode(zp_slotmap **out, const void *buf, size_t len, int nshards, char *err,
                      size_t errlen)
{
    const unsigned char *p = buf;
    if (!out || (!p && len) || len < ZP_SLOTMAP_WIRE_HDR)
        return zp_errors_set(err, errlen, ZEPS_EPROTO, "a slot map of %zu bytes (at least %d)", len,
                             ZP_SLOTMAP_WIRE_HDR);
    uint64_t epoch = get32(p) | (uint64_t)get32(p + 4) << 32;
    uint32_t slots = get32(p + 8), shards = get32(p + 12);
    size_t owners = ZP_SLOTMAP_WIRE_HDR + (size_t)slots * 2;
    if (slots == 0 || slots > ZP_SLOTS_MAX || len < owners)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a slot map of %u slots (1..%d) in %zu bytes", slots, ZP_SLOTS_MAX,
                             len);
    if (len == owners ? shards != (uint32_t)nshards
                      : shards < (uint32_t)nshards || shards > ZP_SLOTMAP_SHARDS_MAX)
        return zp_errors_set(err, errlen, ZEPS_EPROTO,
                             "a slot map over %u shards%s; this cluster has %d", shards,
                             len == owners ? "" : " (with joined shards)", nshards);
    zp_slotmap *m = alloc_map(slots, (int)shards, epoch);
    int rc = len > owners ? decode_joined(m, p + owners, len - owners, nshards, err, errlen) : 0;
    for (uint32_t s = 0; rc == 0 && s < slots; s++) {
        m->owner[s] = (uint16_t)(p[16 + 2 * s] | p[17 + 2 * s] << 8);
        if (m->owner[s] >= shards)
            rc = zp_errors_set(err, errlen, ZEPS_EPROTO, "slot %u of the map names shard %d of %u",
                               s, m->owner[s], shards);
        else if (is_retired(m, m->owner[s]))
            rc = zp_errors_set(err, errlen, ZEPS_EPROTO,
                               "slot %u of the map names shard %d, which the map retires", s,
                               m->owner[s]);
    }
    if (rc != 0) {
        zp_slotmap_destroy(&m);
        return rc;
    }
    *out = m;
    return 0;
}

int zp_slotmap_moved(const zp_slotmap *m, const uint8_t *which, int to, zp_slotmap **out)
{
    if (!m || !which || !out || to < 0 || to >= m->nshards || is_retired(m, to))
        return ZEPS_EINVAL;
    zp_slotmap *n = alloc_map(m->slots, m->nshards, m->epoch + 1);
    copy_joined(n, m);
    for (uint32_t k = 0; k < m->slots; k++)
        n->owner[k] = which[k] ? (uint16_t)to : m->owner[k];
    *out = n;
    return 0;
}

const zp_densemap *zp_slotmap_dense(const zp_slotmap *m)
{
    return m->dense;
}

size_t zp_slotmap_dense_pieces(const zp_slotmap *m, const char *name, uint64_t length,
                               zp_dense_piece *out, size_t max)
{
    return zp_densemap_pieces(m->dense, name, length, m->base, out, max);
}

size_t zp_slotmap_dense_find(const zp_slotmap *m, const char *name, uint64_t length, uint64_t at,
                             zp_dense_piece *out)
{
    return zp_densemap_find(m->dense, name, length, m->base, at, out);
}

int zp_slotmap_dense_moved(const zp_slotmap *m, const char *name, uint64_t length, uint64_t lo,
                           uint64_t hi, int to, zp_slotmap **out, char *err, size_t errlen)
{
    if (to < 0 || to >= m->nshards || is_retired(m, to))
        return zp_errors_set(err, errlen, ZEPS_EINVAL,
                             "shard %d is not a live shard of the map (epoch %" PRIu64 ")", to,
                             m->epoch);
    zp_densemap *d;
    int rc = zp_densemap_moved(m->dense, name, length, m->base, lo, hi, to, &d, err, errlen);
    if (rc != 0)
        return rc;
    zp_slotmap *n = alloc_map(m->slots, m->nshards, m->epoch + 1);
    memcpy(n->owner, m->owner, (size_t)m->slots * sizeof(uint16_t));
    copy_joined(n, m);
    zp_densemap_destroy(&n->dense);
    n->dense = d;
    *out = n;
    return 0;
}

int64_t zp_slotmap_parse_set(const char *text, uint32_t slots, uint8_t *which, char *err,
                             size_t errlen)
{
    memset(which, 0, slots);
    int64_t n = 0;
    const char *p = text;
    while (p && *p) {
        char *end;
        errno = 0;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        bool ok = end != p && errno == 0 && *p != '-' && *p != '+';
        if (ok && *end == '-') {
            const char *q = end + 1;
            hi = strtoul(q, &end, 10);
            ok = end != q && errno == 0 && *q != '-' && *q != '+';
        }
        if (!ok || (*end != ',' && *end != '\0') || lo > hi || hi >= slots) {
            snprintf(err, errlen,
                     "slot set '%s': '%.*s' is not SLOT or LO-HI with LO <= HI < %u (the map's "
                     "slots)",
                     text, (int)strcspn(p, ","), p, slots);
            return -1;
        }
        for (unsigned long k = lo; k <= hi; k++) {
            n += !which[k];
            which[k] = 1;
        }
        p = *end == ',' ? end + 1 : end;
        if (*end == ',' && *p == '\0') {
            snprintf(err, errlen, "slot set '%s' ends with a comma", text);
            return -1;
        }
    }
    if (n == 0)
        snprintf(err, errlen, "slot set '%s' names no slot", text);
    return n == 0 ? -1 : n;
}
