/*
 * identity.c - see identity.h. Numbers are read with strtol and checked
 * whole: "3x", "", "-1" and out-of-range values are errors that name where
 * the value came from, never a silent 0.
 */
#define _GNU_SOURCE
#include "identity.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "zeps_errors.h"

typedef struct kind_desc {
    const char *flag; /* "--shard" */
    const char *var;  /* "ZEPS_SHARD" */
    const char *what; /* "shard index" */
} kind_desc;

static const kind_desc kinds[] = {
    [ZP_IDENTITY_SHARD] = {"--shard", "ZEPS_SHARD", "shard index"},
    [ZP_IDENTITY_RANK] = {"--rank", "ZEPS_RANK", "worker rank"},
    [ZP_IDENTITY_REPLICA] = {"--replica", "ZEPS_REPLICA", "replica index"},
};

/* The engine variables tried by "auto" and when nothing is given. */
static const char *const engine_vars[] = {"JOB_COMPLETION_INDEX", "SLURM_PROCID", NULL};

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Parse `text` (from `where`, e.g. "SLURM_PROCID" or "--shard") as an index
 * in [0, max). */
static int parse_index(const char *text, const char *where, int max, int *out, char *err,
                       size_t errlen)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno == ERANGE || end == text)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s='%s' is not a number", where, text);
    if (v < 0 || v >= max)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s='%s' is out of range (0..%d)", where,
                             text, max - 1);
    *out = (int)v;
    return 0;
}

/* The StatefulSet ordinal: the digits after the last '-' of the host name
 * (the first label of it, if the name is fully qualified). */
static int from_hostname(const char *hostname, int max, zp_identity *out, char *err, size_t errlen)
{
    char buf[256];
    if (!hostname) {
        if (gethostname(buf, sizeof(buf)) != 0)
            return zp_errors_set(err, errlen, ZEPS_ECONFIG, "cannot read the host name: %s",
                                 strerror(errno));
        buf[sizeof(buf) - 1] = 0;
    } else {
        snprintf(buf, sizeof(buf), "%s", hostname);
    }
    char *dot = strchr(buf, '.');
    if (dot)
        *dot = 0;
    const char *dash = strrchr(buf, '-');
    const char *digits = dash ? dash + 1 : "";
    bool ok = *digits != 0 && strlen(digits) <= 9;
    for (const char *p = digits; ok && *p; p++)
        ok = *p >= '0' && *p <= '9';
    if (!ok)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "host name '%s' does not end in an ordinal (want NAME-N, as a "
                             "StatefulSet names its pods: zeps-server-3)",
                             buf);
    int v = atoi(digits);
    if (v >= max)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "host name '%s': ordinal %d is out of range (0..%d)", buf, v, max - 1);
    out->index = v;
    snprintf(out->source, sizeof(out->source), "host name %.100s", buf);
    return 0;
}

/* Steps 3 and 4: the first engine variable that is set. Returns 1 if none. */
static int from_engine(int max, zp_identity *out, char *err, size_t errlen)
{
    for (int i = 0; engine_vars[i]; i++) {
        const char *v = env(engine_vars[i]);
        if (!v)
            continue;
        int rc = parse_index(v, engine_vars[i], max, &out->index, err, errlen);
        if (rc == 0)
            snprintf(out->source, sizeof(out->source), "$%s=%s", engine_vars[i], v);
        return rc;
    }
    return 1;
}

/* A value given by flag or ZEPS_* variable (`where` names which). */
static int from_value(const char *value, const char *where, const char *hostname, int max,
                      zp_identity *out, char *err, size_t errlen)
{
    if (strcmp(value, "auto") == 0) {
        int rc = from_engine(max, out, err, errlen);
        return rc == 1 ? from_hostname(hostname, max, out, err, errlen) : rc;
    }
    if (strcmp(value, "hostname") == 0)
        return from_hostname(hostname, max, out, err, errlen);
    if (strncmp(value, "env:", 4) == 0) {
        const char *name = value + 4;
        const char *v = *name ? env(name) : NULL;
        if (!*name)
            return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s='%s' names no variable", where,
                                 value);
        if (!v)
            return zp_errors_set(err, errlen, ZEPS_ECONFIG, "%s='%s', but %s is not set", where,
                                 value, name);
        int rc = parse_index(v, name, max, &out->index, err, errlen);
        if (rc == 0)
            snprintf(out->source, sizeof(out->source), "$%s=%s (%s)", name, v, where);
        return rc;
    }
    char *end;
    strtol(value, &end, 10);
    if (!*value || *end)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s='%s' is not a number (want N, auto, hostname or env:NAME)", where,
                             value);
    int rc = parse_index(value, where, max, &out->index, err, errlen);
    if (rc == 0)
        snprintf(out->source, sizeof(out->source), "%s%s=%s", where[0] == '-' ? "" : "$", where,
                 value);
    return rc;
}

int zp_identity_resolve(zp_identity_kind kind, const char *flag, const char *hostname, int max,
                        zp_identity *out, char *err, size_t errlen)
{
    const kind_desc *d = &kinds[kind];
    zp_identity id = {.index = -1};
    int rc;
    const char *given = flag ? flag : env(d->var);
    if (kind == ZP_IDENTITY_REPLICA && !given)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "no %s: give %s N, or set %s", d->what,
                             d->flag, d->var);
    if (kind == ZP_IDENTITY_REPLICA && strcmp(given, "auto") == 0)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                             "%s='auto': a replica index is N, hostname or env:NAME",
                             flag ? d->flag : d->var);
    if (flag) {
        rc = from_value(flag, d->flag, hostname, max, &id, err, errlen);
    } else if (env(d->var)) {
        char where[32];
        snprintf(where, sizeof(where), "%s", d->var);
        rc = from_value(env(d->var), where, hostname, max, &id, err, errlen);
    } else {
        rc = from_engine(max, &id, err, errlen);
        if (rc == 1)
            rc = zp_errors_set(err, errlen, ZEPS_ECONFIG,
                               "no %s: give %s N (or %s auto), or set %s, JOB_COMPLETION_INDEX or "
                               "SLURM_PROCID",
                               d->what, d->flag, d->flag, d->var);
    }
    if (rc != 0)
        return rc;
    *out = id;
    return 0;
}

const char *zp_identity_help(zp_identity_kind kind)
{
    if (kind == ZP_IDENTITY_REPLICA)
        return "N | hostname | env:NAME; default: $ZEPS_REPLICA, else 0\n"
               "                      with replicas = 1 (docs/replication.md)";
    return kind == ZP_IDENTITY_SHARD
               ? "N | auto | hostname | env:NAME; default: $ZEPS_SHARD, then\n"
                 "                      $JOB_COMPLETION_INDEX, then $SLURM_PROCID"
               : "N | auto | hostname | env:NAME; default: $ZEPS_RANK, then\n"
                 "                      $JOB_COMPLETION_INDEX, then $SLURM_PROCID";
}
