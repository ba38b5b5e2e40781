/*
 * bind.c - a CURVE key's identity binding (see bind.h), read with
 * libconfig so its file has the cluster file's syntax and its errors the
 * same file:line form.
 */
#include "bind.h"

#include <libconfig.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "zeps_errors.h"

/* One element of `ranks`: an int, or [first, last]. */
static int add_range(zp_bind *b, const config_setting_t *e, const char *path, char *err,
                     size_t errlen)
{
    long long lo, hi;
    int line = config_setting_source_line(e);
    if (config_setting_type(e) == CONFIG_TYPE_INT || config_setting_type(e) == CONFIG_TYPE_INT64) {
        lo = hi = config_setting_get_int64(e);
    } else if (config_setting_is_array(e) && config_setting_length(e) == 2) {
        lo = config_setting_get_int64_elem(e, 0);
        hi = config_setting_get_int64_elem(e, 1);
    } else {
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s:%d: each element of 'ranks' is a rank or [first, last]", path,
                             line);
    }
    if (lo < 0 || hi < lo || hi >= 0xffffffffLL)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s:%d: rank range %lld..%lld is not 0 <= first <= last", path, line,
                             lo, hi);
    if (b->nranges == ZP_BIND_MAX_RANGES)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s:%d: more than %d rank ranges", path,
                             line, ZP_BIND_MAX_RANGES);
    b->lo[b->nranges] = (uint32_t)lo;
    b->hi[b->nranges++] = (uint32_t)hi;
    return 0;
}

/* The settings of the file's root: ranks, tool; nothing else. */
static int read_root(zp_bind *b, const config_setting_t *root, const char *path, char *err,
                     size_t errlen)
{
    for (int i = 0; i < config_setting_length(root); i++) {
        const config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *name = config_setting_name(s);
        int line = config_setting_source_line(s);
        if (strcmp(name, "tool") == 0 && config_setting_type(s) == CONFIG_TYPE_BOOL) {
            b->tool = config_setting_get_bool(s);
        } else if (strcmp(name, "ranks") == 0 && config_setting_is_aggregate(s)) {
            for (int j = 0; j < config_setting_length(s); j++) {
                int rc = add_range(b, config_setting_get_elem(s, (unsigned)j), path, err, errlen);
                if (rc)
                    return rc;
            }
        } else {
            return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                                 "%s:%d: unknown or mistyped setting '%s' (a key binding has "
                                 "'ranks = [...]' and 'tool = true|false')",
                                 path, line, name);
        }
    }
    if (!b->tool && b->nranges == 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s: binds its key to nothing (give 'ranks' or 'tool = true')", path);
    return 0;
}

int zp_bind_load(const char *path, zp_bind *b, char *err, size_t errlen)
{
    memset(b, 0, sizeof(*b));
    config_t c;
    config_init(&c);
    int rc;
    if (!config_read_file(&c, path)) {
        if (config_error_type(&c) == CONFIG_ERR_FILE_IO)
            rc = zp_errors_set(err, errlen, ZEPS_EIO, "%s: cannot read", path);
        else
            rc = zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s:%d: %s", path, config_error_line(&c),
                               config_error_text(&c));
    } else {
        rc = read_root(b, config_root_setting(&c), path, err, errlen);
    }
    config_destroy(&c);
    if (rc)
        memset(b, 0, sizeof(*b));
    return rc;
}

bool zp_bind_allows(const zp_bind *b, uint32_t rank)
{
    if (b->any)
        return true;
    if (rank == 0xffffffffu)
        return b->tool;
    for (int i = 0; i < b->nranges; i++)
        if (rank >= b->lo[i] && rank <= b->hi[i])
            return true;
    return false;
}

void zp_bind_describe(const zp_bind *b, char *buf, size_t len)
{
    if (b->any) {
        snprintf(buf, len, "any rank and tools");
        return;
    }
    size_t at = (size_t)snprintf(buf, len, "%s", b->nranges ? "ranks " : "");
    for (int i = 0; i < b->nranges && at < len; i++) {
        if (b->lo[i] == b->hi[i])
            at += (size_t)snprintf(buf + at, len - at, "%s%u", i ? ", " : "", b->lo[i]);
        else
            at +=
                (size_t)snprintf(buf + at, len - at, "%s%u-%u", i ? ", " : "", b->lo[i], b->hi[i]);
    }
    if (b->tool && at < len)
        snprintf(buf + at, len - at, "%s", b->nranges ? " and tools" : "tools only");
    else if (at < len)
        snprintf(buf + at, len - at, " (no tools)");
}
