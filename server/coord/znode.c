/*
 * znode.c - the paths and contents of a shard's coordination nodes; see
 * znode.h. Contents are short text, readable with zkCli.sh when an
 * operator wants to look.
 */
#include "znode.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "zeps_errors.h"

static int name_ok(const char *s)
{
    if (!s[0] || strlen(s) > 64 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return 0;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') &&
            *s != '.' && *s != '_' && *s != '-')
            return 0;
    return 1;
}

int zp_znode_paths_make(zp_znode_paths *p, const char *cluster, int shard, char *err, size_t errlen)
{
    if (!name_ok(cluster))
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "cluster name '%s' cannot name a znode (1 to 64 of a-z A-Z 0-9 . _ -)",
                             cluster);
    if (shard < 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "shard %d is negative", shard);
    memset(p, 0, sizeof(*p));
    /* every path from the checked parts, so no snprintf can truncate */
    const char *c = cluster;
    snprintf(p->tree[0], sizeof(p->tree[0]), "/zeps");
    snprintf(p->tree[1], sizeof(p->tree[1]), "/zeps/%.64s", c);
    snprintf(p->tree[2], sizeof(p->tree[2]), "/zeps/%.64s/shards", c);
    snprintf(p->tree[3], sizeof(p->tree[3]), "/zeps/%.64s/shards/%d", c, shard);
    snprintf(p->tree[4], sizeof(p->tree[4]), "/zeps/%.64s/shards/%d/members", c, shard);
    snprintf(p->tree[5], sizeof(p->tree[5]), "/zeps/%.64s/shards/%d/epoch", c, shard);
    snprintf(p->members, sizeof(p->members), "%s", p->tree[4]);
    snprintf(p->epoch, sizeof(p->epoch), "%s", p->tree[5]);
    snprintf(p->primary, sizeof(p->primary), "/zeps/%.64s/shards/%d/primary", c, shard);
    snprintf(p->isr, sizeof(p->isr), "/zeps/%.64s/shards/%d/isr", c, shard);
    snprintf(p->clean, sizeof(p->clean), "/zeps/%.64s/shards/%d/clean", c, shard);
    snprintf(p->slots, sizeof(p->slots), "/zeps/%.64s/slots", c);
    return 0;
}

int64_t zp_znode_seq(const char *member)
{
    const char *dash = strrchr(member, '-');
    if (strncmp(member, "m-", 2) != 0 || !dash || dash == member + 1 || !dash[1])
        return -1;
    char *end;
    long long v = strtoll(dash + 1, &end, 10);
    return *end || v < 0 ? -1 : (int64_t)v;
}

void zp_znode_member_prefix(char *buf, size_t len, uint64_t incarnation)
{
    snprintf(buf, len, "m-%" PRIx64 "-", incarnation);
}

bool zp_znode_same_process(const char *a, const char *b)
{
    const char *da = strrchr(a, '-'), *db = strrchr(b, '-');
    return da && db && da - a == db - b && strncmp(a, b, (size_t)(da - a)) == 0;
}

/* The node's bytes as a NUL-terminated string in buf; 0 or -1 if too long. */
static int text(char *buf, size_t len, const char *data, int n)
{
    if (!data || n < 0 || (size_t)n >= len)
        return -1;
    memcpy(buf, data, (size_t)n);
    buf[n] = '\0';
    return 0;
}

static int member_ok(const char *m)
{
    return zp_znode_seq(m) >= 0 && strlen(m) < ZP_COORD_MEMBER_MAX;
}

int zp_znode_primary_format(char *buf, size_t len, const zp_znode_primary *p)
{
    int n = snprintf(buf, len, "%" PRIu64 " %s %d %s", p->epoch, p->member, p->replica,
                     p->endpoint[0] ? p->endpoint : "-");
    return n > 0 && (size_t)n < len ? 0 : ZEPS_EINVAL;
}

int zp_znode_primary_parse(const char *data, int len, zp_znode_primary *p)
{
    char s[512], member[ZP_COORD_MEMBER_MAX], ep[256];
    uint64_t epoch;
    int replica, used = 0;
    if (text(s, sizeof(s), data, len) != 0 ||
        sscanf(s, "%" SCNu64 " %63s %d %255s%n", &epoch, member, &replica, ep, &used) != 4 ||
        s[used] != '\0' || !member_ok(member) || replica < 0)
        return ZEPS_EPROTO;
    p->epoch = epoch;
    snprintf(p->member, sizeof(p->member), "%s", member);
    p->replica = replica;
    snprintf(p->endpoint, sizeof(p->endpoint), "%s", strcmp(ep, "-") == 0 ? "" : ep);
    return 0;
}

int zp_znode_isr_format(char *buf, size_t len, const zp_znode_isr *s)
{
    size_t at = (size_t)snprintf(buf, len, "%" PRIu64, s->epoch);
    for (int i = 0; i < s->n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, " %s", s->m[i]);
    return at < len ? 0 : ZEPS_EINVAL;
}

int zp_znode_isr_parse(const char *data, int len, zp_znode_isr *s)
{
    char t[ZP_COORD_ISR_MAX * (ZP_COORD_MEMBER_MAX + 1) + 32], *save = NULL;
    if (text(t, sizeof(t), data, len) != 0)
        return ZEPS_EPROTO;
    char *tok = strtok_r(t, " ", &save), *end;
    if (!tok)
        return ZEPS_EPROTO;
    unsigned long long e = strtoull(tok, &end, 10);
    if (*end || tok[0] == '-')
        return ZEPS_EPROTO;
    memset(s, 0, sizeof(*s));
    s->epoch = e;
    while ((tok = strtok_r(NULL, " ", &save))) {
        if (s->n == ZP_COORD_ISR_MAX || !member_ok(tok))
            return ZEPS_EPROTO;
        snprintf(s->m[s->n++], ZP_COORD_MEMBER_MAX, "%s", tok);
    }
    return 0;
}

int zp_znode_epoch_parse(const char *data, int len, uint64_t *epoch)
{
    char t[32], *end;
    if (text(t, sizeof(t), data, len) != 0 || !t[0] || t[0] == '-')
        return ZEPS_EPROTO;
    unsigned long long e = strtoull(t, &end, 10);
    if (*end)
        return ZEPS_EPROTO;
    *epoch = e;
    return 0;
}

/* A snapshot's name as a node holds it: "-" for none, else what
 * zp_coord_snapshot_name makes (hex, '-', digits). */
static bool snap_ok(const char *t)
{
    if (strcmp(t, "-") == 0)
        return true;
    size_t n = strlen(t);
    if (n == 0 || n >= ZP_COORD_SNAP_MAX)
        return false;
    for (; *t; t++)
        if (!((*t >= '0' && *t <= '9') || (*t >= 'a' && *t <= 'f') || *t == '-'))
            return false;
    return true;
}

int zp_znode_member_format(char *buf, size_t len, const zp_znode_member *m)
{
    int n = snprintf(buf, len, "%d %s %s", m->replica, m->endpoint[0] ? m->endpoint : "-",
                     m->restored[0] ? m->restored : "-");
    return n > 0 && (size_t)n < len ? 0 : ZEPS_EINVAL;
}

int zp_znode_member_parse(const char *data, int len, zp_znode_member *m)
{
    char s[512], ep[256], snap[ZP_COORD_SNAP_MAX];
    int replica, used = 0;
    if (text(s, sizeof(s), data, len) != 0 ||
        sscanf(s, "%d %255s %63s%n", &replica, ep, snap, &used) != 3 || s[used] != '\0' ||
        replica < 0 || !snap_ok(snap))
        return ZEPS_EPROTO;
    m->replica = replica;
    snprintf(m->endpoint, sizeof(m->endpoint), "%s", strcmp(ep, "-") == 0 ? "" : ep);
    snprintf(m->restored, sizeof(m->restored), "%s", strcmp(snap, "-") == 0 ? "" : snap);
    return 0;
}

int zp_znode_clean_format(char *buf, size_t len, const zp_znode_clean *c)
{
    if (!c->snapshot[0] || strcmp(c->snapshot, "-") == 0 || !snap_ok(c->snapshot) ||
        !member_ok(c->member))
        return ZEPS_EINVAL;
    int n = snprintf(buf, len, "%" PRIu64 " %s %s", c->epoch, c->member, c->snapshot);
    return n > 0 && (size_t)n < len ? 0 : ZEPS_EINVAL;
}

int zp_znode_clean_parse(const char *data, int len, zp_znode_clean *c)
{
    char s[256], member[ZP_COORD_MEMBER_MAX], snap[ZP_COORD_SNAP_MAX];
    uint64_t epoch;
    int used = 0;
    if (text(s, sizeof(s), data, len) != 0 || s[0] == '-' ||
        sscanf(s, "%" SCNu64 " %63s %63s%n", &epoch, member, snap, &used) != 3 || s[used] != '\0' ||
        !member_ok(member) || !snap_ok(snap) || strcmp(snap, "-") == 0)
        return ZEPS_EPROTO;
    c->epoch = epoch;
    snprintf(c->member, sizeof(c->member), "%s", member);
    snprintf(c->snapshot, sizeof(c->snapshot), "%s", snap);
    return 0;
}
