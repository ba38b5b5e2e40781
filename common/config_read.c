/*
 * config_read.c - reads one setting of the cluster file into its zp_config
 * field, checking its type and range against its key_spec row, and words
 * every problem as one "file:line: what is wrong with 'section.key'"
 * message (ZEPS_ECONFIG).
 *
 * It also works around libconfig 1.5's 32-bit integer literals
 * (int_wrapped below), and checks endpoints, choice lists and the distinct
 * ranks of training.slow_ranks. Which setting to read, and the limits that
 * involve several keys, are config.c's.
 */
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "config_int.h"
#include "wire.h"
#include "zeps_errors.h"

/* Write "name:line: <message>" (or "name: " without a line) into p->err and
 * return ZEPS_ECONFIG. snprintf truncates and terminates for us. */
int zp_config_read_fail(parse_ctx *p, unsigned line, const char *fmt, ...)
{
    if (p->err == NULL || p->errlen == 0)
        return ZEPS_ECONFIG;
    int n = line ? snprintf(p->err, p->errlen, "%s:%u: ", p->name, line)
                 : snprintf(p->err, p->errlen, "%s: ", p->name);
    if (n >= 0 && (size_t)n < p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return ZEPS_ECONFIG;
}

const char *zp_config_read_type_name(const config_setting_t *s)
{
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        return "an integer";
    case CONFIG_TYPE_FLOAT:
        return "a float";
    case CONFIG_TYPE_STRING:
        return "a string";
    case CONFIG_TYPE_BOOL:
        return "a boolean";
    case CONFIG_TYPE_ARRAY:
        return "an array";
    case CONFIG_TYPE_LIST:
        return "a list";
    case CONFIG_TYPE_GROUP:
        return "a group";
    default:
        return "nothing";
    }
}

static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '*';
}

/*
 * libconfig 1.5 reads an integer literal without an L suffix with atoi(), so
 * "seed = 5000000000;" silently becomes 705032704 (later releases promote such
 * literals to int64). The parsed tree keeps no trace of this, so look at the
 * literal itself: find "name =" or "name :" on the setting's line and, if the
 * number there does not fit in 32 bits and wraps to exactly what libconfig
 * stored, copy it into lit and return true. Requiring the wrapped value to
 * match keeps numbers in comments or strings on the same line from counting.
 */
static bool int_wrapped(const parse_ctx *p, const config_setting_t *s, char *lit, size_t litlen)
{
    const char *name = config_setting_name(s);
    unsigned line = config_setting_source_line(s);
    if (p->text == NULL || name == NULL || line == 0 || config_setting_source_file(s) != NULL ||
        config_setting_type(s) != CONFIG_TYPE_INT)
        return false; /* no source at hand (e.g. an @include), or not an int */

    const char *bol = p->text;
    for (unsigned l = 1; l < line && bol != NULL; l++) {
        bol = strchr(bol, '\n');
        if (bol != NULL)
            bol++;
    }
    if (bol == NULL)
        return false;
    const char *eol = strchr(bol, '\n');
    if (eol == NULL)
        eol = bol + strlen(bol);

    size_t nlen = strlen(name);
    for (const char *q = bol; q + nlen <= eol; q++) {
        if (strncmp(q, name, nlen) != 0 || (q > bol && is_name_char(q[-1])))
            continue;
        const char *v = q + nlen;
        v += strspn(v, " \t");
        if (*v != '=' && *v != ':')
            continue;
        v++;
        v += strspn(v, " \t");
        const char *start = v;
        bool hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X');
        char *end;
        bool fits;
        int wrapped;
        errno = 0;
        if (hex) {
            unsigned long long u = strtoull(v, &end, 16);
            fits = errno == 0 && u <= 0xffffffffull;
            wrapped = (int)(unsigned)u; /* strtoul saturates, as libconfig's does */
        } else {
            long long ll = strtoll(v, &end, 10);
            fits = errno == 0 && ll >= INT_MIN && ll <= INT_MAX;
            wrapped = (int)ll; /* glibc atoi() is (int)strtol() */
        }
        if (end == start || fits || wrapped != config_setting_get_int(s))
            continue;
        snprintf(lit, litlen, "%.*s", (int)(end - start), start);
        return true;
    }
    return false;
}

/* "1 <= workers <= 4096" or "seed >= 0" */
static void int_range_text(char *buf, size_t len, const key_spec *k)
{
    if (k->imax == LLONG_MAX)
        snprintf(buf, len, "%s >= %lld", k->name, k->imin);
    else
        snprintf(buf, len, "%lld <= %s <= %lld", k->imin, k->name, k->imax);
}

/* "0 <= momentum < 1" or "lr > 0" */
static void float_range_text(char *buf, size_t len, const key_spec *k)
{
    const char *lo = k->fmin_open ? "<" : "<=";
    const char *hi = k->fmax_open ? "<" : "<=";
    if (isinf(k->fmax))
        snprintf(buf, len, "%s %s %g", k->name, k->fmin_open ? ">" : ">=", k->fmin);
    else
        snprintf(buf, len, "%g %s %s %s %g", k->fmin, lo, k->name, hi, k->fmax);
}

int zp_config_read_integer(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                           const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    int type = config_setting_type(s);
    char range[128], lit[64];

    if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
        return zp_config_read_fail(p, line, "'%s' must be an integer (got %s)", key,
                                   zp_config_read_type_name(s));
    int_range_text(range, sizeof(range), k);
    if (int_wrapped(p, s, lit, sizeof(lit))) {
        if (k->kind == K_UINT64)
            return zp_config_read_fail(
                p, line, "'%s' = %s does not fit in 32 bits; write it with an L suffix (%sL)", key,
                lit, lit);
        return zp_config_read_fail(p, line, "'%s' = %s is out of range (allowed: %s)", key, lit,
                                   range);
    }
    long long v = config_setting_get_int64(s);
    if (v < k->imin || v > k->imax)
        return zp_config_read_fail(p, line, "'%s' = %lld is out of range (allowed: %s)", key, v,
                                   range);

    void *field = (char *)cfg + k->off;
    if (k->kind == K_INT)
        *(int *)field = (int)v;
    else if (k->kind == K_UINT64)
        *(uint64_t *)field = (uint64_t)v;
    else
        *(uint64_t *)field = (uint64_t)v << 20;
    return ZEPS_OK;
}

int zp_config_read_float(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                         const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    int type = config_setting_type(s);
    char range[128], lit[64];
    double v;

    /* libconfig types "100" as an int; a float key takes it as 100.0. */
    if (type == CONFIG_TYPE_FLOAT) {
        v = config_setting_get_float(s);
    } else if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64) {
        if (int_wrapped(p, s, lit, sizeof(lit)))
            return zp_config_read_fail(
                p, line, "'%s' = %s does not fit in 32 bits; write it as %s.0", key, lit, lit);
        v = (double)config_setting_get_int64(s);
    } else {
        return zp_config_read_fail(p, line, "'%s' must be a number (got %s)", key,
                                   zp_config_read_type_name(s));
    }
    float_range_text(range, sizeof(range), k);
    if (!isfinite(v) || v < k->fmin || v > k->fmax || (k->fmin_open && v == k->fmin) ||
        (k->fmax_open && v == k->fmax))
        return zp_config_read_fail(p, line, "'%s' = %g is out of range (allowed: %s)", key, v,
                                   range);
    *(double *)((char *)cfg + k->off) = v;
    return ZEPS_OK;
}

/* Why `ep` is not a usable ZeroMQ endpoint, or NULL if it is. A bind may use
 * '*' for the host or the port; a server address (connect side) may not. */
static const char *endpoint_problem(const char *ep, bool bind)
{
    static const char *const schemes[] = {"tcp://", "ipc://", "inproc://"};
    const char *rest = NULL;
    for (size_t i = 0; i < NKEYS(schemes); i++)
        if (strncmp(ep, schemes[i], strlen(schemes[i])) == 0)
            rest = ep + strlen(schemes[i]);
    if (rest == NULL)
        return "must start with tcp://, ipc:// or inproc://";
    if (*rest == '\0')
        return "has no address after the scheme";
    if (strpbrk(ep, " \t\r\n") != NULL)
        return "contains whitespace";
    if (strncmp(ep, "tcp://", 6) != 0)
        return NULL;

    const char *colon = strrchr(rest, ':');
    if (colon == NULL || colon == rest || colon[1] == '\0')
        return "must be tcp://host:port";
    const char *port = colon + 1;
    if (strcmp(port, "*") == 0)
        return bind ? NULL : "needs a port number ('*' is only for binds)";
    if (!bind && colon - rest == 1 && rest[0] == '*')
        return "needs a host name or address ('*' is only for binds)";
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 || atoi(port) < 1 ||
        atoi(port) > 65535)
        return "has a port outside 1..65535";
    return NULL;
}

/* An endpoint given so far: its canonical form and its key. */
typedef struct seen_ep {
    char canon[ZP_ENDPOINT_MAX + 16];
    char key[96];
} seen_ep;

/* One endpoint `ep` at `key` ("cluster.servers[1][0]"), checked and, for
 * servers, compared with the n before it. */
static int read_one_endpoint(parse_ctx *p, unsigned line, const char *key, const char *ep,
                             bool bind, seen_ep *seen, int n, char *out)
{
    size_t len = strlen(ep);
    if (len >= ZP_ENDPOINT_MAX)
        return zp_config_read_fail(p, line, "'%s' is too long (%zu bytes, at most %d)", key, len,
                                   ZP_ENDPOINT_MAX - 1);
    const char *why = endpoint_problem(ep, bind);
    if (why != NULL)
        return zp_config_read_fail(p, line, "'%s' = \"%s\" %s", key, ep, why);
    zp_wire_canonical_endpoint(ep, seen[n].canon, sizeof(seen[n].canon));
    snprintf(seen[n].key, sizeof(seen[n].key), "%s", key);
    for (int j = 0; !bind && j < n; j++)
        if (strcmp(seen[j].canon, seen[n].canon) == 0)
            return zp_config_read_fail(p, line, "'%s' = \"%s\" repeats '%s'", key, ep, seen[j].key);
    memcpy(out, ep, len + 1);
    return ZEPS_OK;
}

/* Entry i of servers or binds: a string (one replica), or an array of the
 * endpoints of the shard's replicas, as wide as every other entry. */
static int read_entry(zp_config *cfg, parse_ctx *p, const char *key, bool bind,
                      const config_setting_t *e, int i, int *width, seen_ep *seen, int *nseen)
{
    unsigned line = config_setting_source_line(e)
                        ? config_setting_source_line(e)
                        : config_setting_source_line(config_setting_parent(e));
    int type = config_setting_type(e);
    bool one = type == CONFIG_TYPE_STRING;
    int n = one ? 1 : config_setting_length(e);
    if (!one && type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
        return zp_config_read_fail(p, line,
                                   "'%s[%d]' must be a string (got %s), or with replicas the array "
                                   "of the shard's replicas' endpoints",
                                   key, i, zp_config_read_type_name(e));
    if (!one && (n < 1 || n > ZP_MAX_REPLICAS))
        return zp_config_read_fail(p, line, "'%s[%d]' has %d endpoints (allowed: 1..%d replicas)",
                                   key, i, n, ZP_MAX_REPLICAS);
    if (i == 0)
        *width = n;
    else if (n != *width)
        return zp_config_read_fail(p, line,
                                   "'%s[%d]' gives %d endpoint(s) but '%s[0]' gives %d: every "
                                   "shard has the same number of replicas",
                                   key, i, n, key, *width);
    for (int r = 0; r < n; r++) {
        const config_setting_t *x = one ? e : config_setting_get_elem(e, (unsigned)r);
        char name[96];
        snprintf(name, sizeof(name), one ? "%s[%d]" : "%s[%d][%d]", key, i, r);
        if (config_setting_type(x) != CONFIG_TYPE_STRING)
            return zp_config_read_fail(p, line, "'%s' must be a string (got %s)", name,
                                       zp_config_read_type_name(x));
        int slot = i * (n - 1) + r - 1; /* in the replica pool, for r >= 1 */
        if (r > 0 && slot >= ZP_MAX_REPLICA_ENDPOINTS)
            return zp_config_read_fail(
                p, line, "'%s' lists more than %d endpoints beyond each shard's first", key,
                ZP_MAX_REPLICA_ENDPOINTS);
        char *out = r == 0 ? (bind ? cfg->binds[i] : cfg->servers[i])
                           : (bind ? cfg->replica_binds[slot] : cfg->replica_servers[slot]);
        int rc =
            read_one_endpoint(p, line, name, config_setting_get_string(x), bind, seen, *nseen, out);
        if (rc != ZEPS_OK)
            return rc;
        (*nseen)++;
    }
    return ZEPS_OK;
}

int zp_config_read_endpoints(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                             const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    int type = config_setting_type(s);
    bool bind = k->off == FIELD(binds);

    if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
        return zp_config_read_fail(p, line, "'%s' must be an array of strings (got %s)", key,
                                   zp_config_read_type_name(s));
    int n = config_setting_length(s);
    if (!bind && (n < 1 || n > ZP_MAX_SHARDS))
        return zp_config_read_fail(p, line, "'%s' has %d entries (allowed: 1..%d)", key, n,
                                   ZP_MAX_SHARDS);
    if (bind && n > ZP_MAX_SHARDS)
        return zp_config_read_fail(p, line, "'%s' has %d entries (at most %d)", key, n,
                                   ZP_MAX_SHARDS);
    /* the canonical forms given so far, to refuse a repeated endpoint */
    seen_ep *seen = zp_alloc_zeroed(ZP_MAX_SHARDS + ZP_MAX_REPLICA_ENDPOINTS, sizeof(*seen));
    int nseen = 0, width = 1, rc = ZEPS_OK;
    for (int i = 0; i < n && rc == ZEPS_OK; i++)
        rc = read_entry(cfg, p, key, bind, config_setting_get_elem(s, (unsigned)i), i, &width, seen,
                        &nseen);
    free(seen);
    if (rc != ZEPS_OK)
        return rc;
    if (bind) {
        p->nbinds = n;
        p->bind_line = line;
        p->bind_width = width;
    } else {
        p->nservers = n;
        p->server_line = line;
        p->server_width = width;
        cfg->num_shards = n;
    }
    return ZEPS_OK;
}

int zp_config_read_string(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                          const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return zp_config_read_fail(p, line, "'%s' must be a string (got %s)", key,
                                   zp_config_read_type_name(s));
    const char *v = config_setting_get_string(s);

    if (k->kind != K_STRING) {
        int c = zp_config_keys_index_of(k->choices, v);
        if (c < 0) {
            char list[128] = "";
            size_t used = 0;
            for (int i = 0; k->choices[i] != NULL && used < sizeof(list); i++) {
                int n = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
                                 k->choices[i]);
                used += n > 0 ? (size_t)n : 0;
            }
            return zp_config_read_fail(p, line, "'%s' = \"%s\" is not one of %s", key, v, list);
        }
        if (k->kind == K_ENUM) {
            *(int *)((char *)cfg + k->off) = c;
            return ZEPS_OK;
        }
        if (k->kind == K_FLAG) {
            *(bool *)((char *)cfg + k->off) = c != 0;
            return ZEPS_OK;
        }
    }
    size_t len = strlen(v);
    if (len >= k->size)
        return zp_config_read_fail(p, line, "'%s' is too long (%zu bytes, at most %zu)", key, len,
                                   k->size - 1);
    memcpy((char *)cfg + k->off, v, len + 1);
    return ZEPS_OK;
}

/* training.slow_ranks: distinct ranks below ZP_MAX_WORKERS here; below
 * workers in check_cross, which needs the lines kept in p->slow_lines. */
int zp_config_read_ranks(zp_config *cfg, parse_ctx *p, const char *key, const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    int type = config_setting_type(s);

    if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
        return zp_config_read_fail(p, line, "'%s' must be an array of integers (got %s)", key,
                                   zp_config_read_type_name(s));
    int n = config_setting_length(s);
    if (n > ZP_MAX_SLOW_RANKS)
        return zp_config_read_fail(p, line, "'%s' has %d entries (at most %d)", key, n,
                                   ZP_MAX_SLOW_RANKS);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        unsigned eline = config_setting_source_line(e) ? config_setting_source_line(e) : line;
        int etype = config_setting_type(e);
        if (etype != CONFIG_TYPE_INT && etype != CONFIG_TYPE_INT64)
            return zp_config_read_fail(p, eline, "'%s[%d]' must be an integer (got %s)", key, i,
                                       zp_config_read_type_name(e));
        long long r = config_setting_get_int64(e);
        if (r < 0 || r >= ZP_MAX_WORKERS)
            return zp_config_read_fail(p, eline,
                                       "'%s[%d]' = %lld is out of range (allowed: 0 <= rank < %d)",
                                       key, i, r, ZP_MAX_WORKERS);
        for (int j = 0; j < i; j++)
            if (cfg->slow_ranks[j] == r)
                return zp_config_read_fail(p, eline, "'%s[%d]' = %lld repeats '%s[%d]'", key, i, r,
                                           key, j);
        cfg->slow_ranks[i] = (int)r;
        p->slow_lines[i] = eline;
    }
    cfg->num_slow_ranks = n;
    return ZEPS_OK;
}
