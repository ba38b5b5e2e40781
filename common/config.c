/*
 * config.c - reads and validates the cluster file (libconfig 1.5).
 *
 * libconfig does the parsing; this file only walks the parsed tree and checks
 * it against the const key tables of config_keys.c, one per section (cluster,
 * training) and one per nested group (cluster.weighting, training.ctr);
 * config_read.c reads and checks each value. The few limits that depend on
 * another key (backup_workers and slow_ranks against workers) are checked
 * once the whole file has been read, since the sections may come in either
 * order. Every problem - a syntax error, an unknown key, a wrong type, a
 * missing or out-of-range value - becomes ZEPS_ECONFIG and one message of the
 * form "file:line: what is wrong with 'section.key'", so a process stops
 * before it touches the network.
 *
 * zp_config_load reads the whole file into memory and hands it to
 * zp_config_parse; the one code path keeps messages identical for files and
 * strings, and keeps the source text at hand for the 32-bit literal check
 * in config_read.c.
 */
#include "config.h"

#include "config_int.h"
#include "errors.h"
#include "zeps_errors.h"

#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cluster file is a few hundred bytes; anything this big is a mistake. */
#define CONFIG_FILE_MAX (16u << 20)

static int read_section(zp_config *cfg, parse_ctx *p, const char *path, const section_spec *sec,
                        const config_setting_t *group);

/* cluster.consistency: a word naming a mode; which modes exist is checked
 * by the program that runs them (zp_config_check_mode). */
static int read_mode(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                     const config_setting_t *s)
{
    int rc = zp_config_read_string(cfg, p, key, k, s);
    if (rc != ZEPS_OK)
        return rc;
    cfg->consistency_line = config_setting_source_line(s);
    size_t len = strlen(cfg->consistency);
    if (len == 0 || strspn(cfg->consistency, "abcdefghijklmnopqrstuvwxyz0123456789_") != len)
        return zp_config_read_fail(p, cfg->consistency_line,
                                   "'%s' = \"%s\" is not a mode name (lowercase letters, digits "
                                   "and '_', e.g. bsp, ssp, async, weighted)",
                                   key, cfg->consistency);
    return ZEPS_OK;
}

int zp_config_check_mode(const zp_config *cfg, const char *const *known, char *err, size_t errlen)
{
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; known[i] != NULL; i++) {
        if (strcmp(known[i], cfg->consistency) == 0)
            return ZEPS_OK;
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", known[i]);
        used += n > 0 && (size_t)n < sizeof(list) - used ? (size_t)n : 0;
    }
    return zp_errors_set(err, errlen, ZEPS_ECONFIG,
                         "%s:%u: 'cluster.consistency' = \"%s\" is not one of %s", cfg->path,
                         cfg->consistency_line, cfg->consistency, list);
}

static int read_key(zp_config *cfg, parse_ctx *p, const char *section, const key_spec *k,
                    const config_setting_t *s)
{
    char key[96];
    snprintf(key, sizeof(key), "%s.%s", section, k->name);
    if (k->off == FIELD(backup_workers) && k->kind == K_INT)
        p->backup_line = config_setting_source_line(s);
    if (k->off == FIELD(delay_dist) && k->kind == K_ENUM)
        p->delay_dist_seen = true;
    if (k->off == FIELD(inject) && k->kind == K_ENUM)
        p->inject_line = config_setting_source_line(s);
    if (k->off == FIELD(replicas) && k->kind == K_INT)
        cfg->replicas_line = config_setting_source_line(s);
    if (k->off == FIELD(consistency))
        return read_mode(cfg, p, key, k, s);

    switch (k->kind) {
    case K_INT:
    case K_UINT64:
    case K_MEGABYTES:
        return zp_config_read_integer(cfg, p, key, k, s);
    case K_FLOAT:
        return zp_config_read_float(cfg, p, key, k, s);
    case K_BOOL:
        if (config_setting_type(s) != CONFIG_TYPE_BOOL)
            return zp_config_read_fail(p, config_setting_source_line(s),
                                       "'%s' must be a boolean, true or false (got %s)", key,
                                       zp_config_read_type_name(s));
        *(bool *)((char *)cfg + k->off) = config_setting_get_bool(s) != 0;
        return ZEPS_OK;
    case K_STRING:
    case K_CHOICE:
    case K_ENUM:
    case K_FLAG:
        return zp_config_read_string(cfg, p, key, k, s);
    case K_RANKS:
        return zp_config_read_ranks(cfg, p, key, s);
    case K_ENDPOINTS:
        return zp_config_read_endpoints(cfg, p, key, k, s);
    case K_GROUP:
        if (config_setting_type(s) != CONFIG_TYPE_GROUP)
            return zp_config_read_fail(p, config_setting_source_line(s),
                                       "'%s' must be a group, %s = { ... } (got %s)", key, k->name,
                                       zp_config_read_type_name(s));
        return read_section(cfg, p, key, k->group, s);
    }
    return ZEPS_EINTERNAL;
}

/* Read the keys of `group` against sec; `path` ("cluster", "cluster.weighting")
 * prefixes every key in messages. */
static int read_section(zp_config *cfg, parse_ctx *p, const char *path, const section_spec *sec,
                        const config_setting_t *group)
{
    uint64_t seen = 0;
    int n = config_setting_length(group);

    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        const char *name = config_setting_name(s);
        size_t j = 0;
        while (j < sec->nkeys && strcmp(sec->keys[j].name, name) != 0)
            j++;
        if (j == sec->nkeys)
            return zp_config_read_fail(p, config_setting_source_line(s), "unknown key '%s.%s'",
                                       path, name);
        int rc = read_key(cfg, p, path, &sec->keys[j], s);
        if (rc != ZEPS_OK)
            return rc;
        seen |= 1ull << j;
    }
    for (size_t j = 0; j < sec->nkeys; j++)
        if (sec->keys[j].required && !(seen & (1ull << j)))
            return zp_config_read_fail(p, config_setting_source_line(group),
                                       "missing required key '%s.%s'", path, sec->keys[j].name);
    return ZEPS_OK;
}

/* What the injection schedule needs from the other keys of cluster.inject
 * (the replay file's largest tau is checked when a server reads it). */
static int check_inject(const zp_config *cfg, parse_ctx *p)
{
    const char *name = zp_config_keys_inject_name(cfg->inject);
    int largest = cfg->inject_tau;
    switch (cfg->inject) {
    case ZP_INJECT_OFF:
    case ZP_INJECT_REPLAY:
        if (cfg->inject == ZP_INJECT_REPLAY && !cfg->inject_replay[0])
            return zp_config_read_fail(p, p->inject_line,
                                       "'cluster.inject.schedule' = \"replay\" needs "
                                       "'cluster.inject.replay_file'");
        return ZEPS_OK;
    case ZP_INJECT_UNIFORM:
    case ZP_INJECT_GEOMETRIC:
        if (cfg->inject_max_tau < 1)
            return zp_config_read_fail(p, p->inject_line,
                                       "'cluster.inject.schedule' = \"%s\" needs "
                                       "'cluster.inject.max_tau' >= 1",
                                       name);
        largest = cfg->inject_max_tau;
        break;
    case ZP_INJECT_STRAGGLER:
        if (cfg->inject_straggler >= cfg->num_workers)
            return zp_config_read_fail(
                p, p->inject_line,
                "'cluster.inject.straggler' = %d is out of range (allowed: 0 <= rank < "
                "workers = %d)",
                cfg->inject_straggler, cfg->num_workers);
        break;
    case ZP_INJECT_FIXED:
        break;
    }
    if (cfg->inject_window != 0 && cfg->inject_window < largest)
        return zp_config_read_fail(p, p->inject_line,
                                   "'cluster.inject.window' = %d keeps fewer versions than "
                                   "schedule \"%s\" can ask for (tau up to %d)",
                                   cfg->inject_window, name, largest);
    return ZEPS_OK;
}

/* Replicated shards: as many endpoints per shard as replicas, and a
 * coordination service to elect their primaries. */
static int check_replicas(const zp_config *cfg, parse_ctx *p)
{
    int r = cfg->replicas;
    if (p->server_width != r && p->server_width == 1)
        return zp_config_read_fail(
            p, cfg->replicas_line,
            "'cluster.replicas' = %d, but 'cluster.servers' gives one endpoint per shard: write "
            "each shard's entry as the array of its %d replicas' endpoints, servers = ( "
            "[\"tcp://a:5600\", \"tcp://b:5600\"], ... )",
            r, r);
    if (p->server_width != r)
        return zp_config_read_fail(p, p->server_line,
                                   "'cluster.servers' gives %d endpoints per shard, but "
                                   "'cluster.replicas' = %d",
                                   p->server_width, r);
    if (p->nbinds > 0 && p->bind_width != r)
        return zp_config_read_fail(p, p->bind_line,
                                   "'cluster.binds' gives %d endpoint(s) per shard, but "
                                   "'cluster.replicas' = %d: one bind per replica",
                                   p->bind_width, r);
    if (r >= 2 && !cfg->coord_zookeeper[0])
        return zp_config_read_fail(
            p, cfg->replicas_line,
            "'cluster.replicas' = %d needs a coordination service to elect each shard's primary: "
            "set 'cluster.coordination.zookeeper' = \"host:port,...\"",
            r);
    size_t len = strlen(cfg->coord_name);
    if (len == 0 ||
        strspn(cfg->coord_name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789._-") != len ||
        strcmp(cfg->coord_name, ".") == 0 || strcmp(cfg->coord_name, "..") == 0)
        return zp_config_read_fail(p, 0,
                                   "'cluster.coordination.name' = \"%s\" must be a name of "
                                   "letters, digits, '.', '_' and '-'",
                                   cfg->coord_name);
    return ZEPS_OK;
}

/* Limits that involve keys of both sections; run after everything was read. */
static int check_cross(zp_config *cfg, parse_ctx *p)
{
    /* Before delay_dist existed, a jitter alone meant a uniform delay; keep
     * such files meaning what they did. */
    if (!p->delay_dist_seen && cfg->delay_jitter_ms > 0)
        cfg->delay_dist = ZP_DELAY_UNIFORM;
    if (cfg->backup_workers >= cfg->num_workers)
        return zp_config_read_fail(
            p, p->backup_line,
            "'cluster.backup_workers' = %d is out of range (allowed: 0 <= backup_workers "
            "< workers = %d)",
            cfg->backup_workers, cfg->num_workers);
    if (strcmp(cfg->model, "ctr") == 0 && (!cfg->ctr_train_file[0] || !cfg->ctr_test_file[0]))
        return zp_config_read_fail(p, 0,
                                   "model \"ctr\" needs 'training.ctr.train_file' and "
                                   "'training.ctr.test_file'");
    for (int i = 0; i < cfg->num_slow_ranks; i++)
        if (cfg->slow_ranks[i] >= cfg->num_workers)
            return zp_config_read_fail(
                p, p->slow_lines[i],
                "'training.slow_ranks[%d]' = %d is out of range (allowed: 0 <= rank < "
                "workers = %d)",
                i, cfg->slow_ranks[i], cfg->num_workers);
    if (cfg->dc_mean_square > 0 && cfg->dc_lambda == 0)
        return zp_config_read_fail(
            p, 0,
            "'cluster.weighting.dc_mean_square' = %g needs "
            "'cluster.weighting.dc_lambda' > 0 (DC-ASGD-a scales that lambda)",
            cfg->dc_mean_square);
    int rc = check_replicas(cfg, p);
    return rc != ZEPS_OK ? rc : check_inject(cfg, p);
}

const char *zp_config_endpoint(const zp_config *cfg, int shard, int replica)
{
    if (shard >= cfg->num_shards && cfg->join[0] && replica == 0)
        return cfg->join; /* a shard joining at run time (zeps-server --join) */
    if (shard < 0 || shard >= cfg->num_shards || replica < 0 || replica >= cfg->replicas)
        return "";
    return replica == 0 ? cfg->servers[shard]
                        : cfg->replica_servers[shard * (cfg->replicas - 1) + replica - 1];
}

const char *zp_config_bind(const zp_config *cfg, int shard, int replica)
{
    if (shard >= cfg->num_shards && cfg->join[0] && replica == 0)
        return cfg->join_bind; /* zeps-server --bind, or "": its join endpoint */
    if (shard < 0 || shard >= cfg->num_shards || replica < 0 || replica >= cfg->replicas)
        return "";
    return replica == 0 ? cfg->binds[shard]
                        : cfg->replica_binds[shard * (cfg->replicas - 1) + replica - 1];
}

static int read_root(zp_config *cfg, parse_ctx *p, const config_setting_t *root)
{
    const section_spec *sections = zp_config_keys_sections;
    bool seen[ZP_CONFIG_NSECTIONS] = {false};
    int n = config_setting_length(root);

    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *name = config_setting_name(s);
        unsigned line = config_setting_source_line(s);
        size_t j = 0;
        while (j < ZP_CONFIG_NSECTIONS && strcmp(sections[j].name, name) != 0)
            j++;
        if (j == ZP_CONFIG_NSECTIONS)
            return zp_config_read_fail(p, line, "unknown key '%s'", name);
        if (config_setting_type(s) != CONFIG_TYPE_GROUP)
            return zp_config_read_fail(p, line, "'%s' must be a group, %s = { ... } (got %s)", name,
                                       name, zp_config_read_type_name(s));
        int rc = read_section(cfg, p, sections[j].name, &sections[j], s);
        if (rc != ZEPS_OK)
            return rc;
        seen[j] = true;
    }
    for (size_t j = 0; j < ZP_CONFIG_NSECTIONS; j++)
        if (sections[j].required && !seen[j])
            return zp_config_read_fail(p, 0, "missing required key '%s'", sections[j].name);
    if (p->nbinds >= 0 && p->nbinds != p->nservers)
        return zp_config_read_fail(p, p->bind_line,
                                   "'cluster.binds' has %d entries but 'cluster.servers' has %d; "
                                   "give one bind per server",
                                   p->nbinds, p->nservers);
    return check_cross(cfg, p);
}

/* Parse `text` (borrowed) into *cfg; see config.h. ZEPS_EINVAL for a NULL cfg
 * or text. Any thread: the libconfig object is local to the call. */
int zp_config_parse(zp_config *cfg, const char *text, const char *name, char *err, size_t errlen)
{
    parse_ctx p = {
        .name = name != NULL ? name : "<string>",
        .text = text,
        .err = err,
        .errlen = errlen,
        .nbinds = -1,
    };
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (cfg == NULL || text == NULL) {
        zp_config_read_fail(&p, 0, "no configuration given");
        return ZEPS_EINVAL;
    }
    zp_config_keys_defaults(cfg);
    snprintf(cfg->path, sizeof(cfg->path), "%s", p.name);

    config_t lc;
    config_init(&lc);
    int rc;
    if (!config_read_string(&lc, text)) {
        /* An @include'd file has its own name; the main text has none. */
        if (config_error_file(&lc) != NULL)
            p.name = config_error_file(&lc);
        rc =
            zp_config_read_fail(&p, (unsigned)config_error_line(&lc), "%s", config_error_text(&lc));
    } else {
        rc = read_root(cfg, &p, config_root_setting(&lc));
    }
    config_destroy(&lc);
    return rc;
}

/* Read all of `path` into a new NUL-terminated buffer that the caller frees. */
static int slurp(const char *path, char **out, parse_ctx *p)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL) {
        int e = errno;
        zp_config_read_fail(p, 0, "cannot open: %s", strerror(e));
        return ZEPS_EIO;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    int rc = ZEPS_OK;
    if (buf == NULL)
        goto fail_nomem;
    for (;;) {
        if (cap - len < 2) {
            if (cap >= CONFIG_FILE_MAX) {
                rc = zp_config_read_fail(p, 0, "larger than %u MiB; not a cluster file",
                                         CONFIG_FILE_MAX >> 20);
                goto fail_read;
            }
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL)
                goto fail_nomem;
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, fp);
        len += got;
        if (got == 0)
            break; /* end of file or error */
    }
    if (ferror(fp)) {
        int e = errno;
        zp_config_read_fail(p, 0, "read error: %s", strerror(e));
        rc = ZEPS_EIO;
        goto fail_read;
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len) != NULL) {
        rc = zp_config_read_fail(p, 0, "contains a NUL byte; not a text file");
        goto fail_read;
    }
    fclose(fp);
    *out = buf;
    return ZEPS_OK;

fail_nomem:
    zp_config_read_fail(p, 0, "out of memory reading the file");
    rc = ZEPS_ENOMEM;
fail_read:
    free(buf);
    fclose(fp);
    return rc;
}

/* Read the file at `path` and parse it; see config.h. ZEPS_EIO if it cannot be
 * opened or read, ZEPS_EINVAL for a NULL or over-long path. Any thread. */
int zp_config_load(zp_config *cfg, const char *path, char *err, size_t errlen)
{
    parse_ctx p = {.name = path != NULL ? path : "<null>", .err = err, .errlen = errlen};
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (cfg == NULL || path == NULL) {
        zp_config_read_fail(&p, 0, "no configuration file given");
        return ZEPS_EINVAL;
    }
    if (strlen(path) >= ZP_PATH_MAX) {
        zp_config_read_fail(&p, 0, "path is longer than %d bytes", ZP_PATH_MAX - 1);
        return ZEPS_EINVAL;
    }
    char *text = NULL;
    int rc = slurp(path, &text, &p);
    if (rc != ZEPS_OK)
        return rc;
    rc = zp_config_parse(cfg, text, path, err, errlen);
    free(text);
    return rc;
}
