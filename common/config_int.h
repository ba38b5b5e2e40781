/*
 * config_int.h - what the cluster-file reader's files share: the key tables'
 * row type, the state of one parse, and the value readers.
 *
 * config.c walks the parsed tree (sections, groups, cross-key limits) and
 * loads files; config_keys.c holds the key tables, the defaults and the
 * enum names; config_read.c turns one setting into a field, or into the
 * "file:line: ..." message every problem becomes. Internal to zeps_common.
 */
#ifndef ZP_CONFIG_INT_H
#define ZP_CONFIG_INT_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

typedef enum key_kind {
    K_INT,       /* int field, range imin..imax */
    K_UINT64,    /* uint64_t field from a non-negative int or int64 (seed) */
    K_MEGABYTES, /* uint64_t field in bytes, written in MiB */
    K_FLOAT,     /* double field, int or float accepted */
    K_BOOL,      /* bool field */
    K_STRING,    /* char[size] field, any string that fits */
    K_CHOICE,    /* char[size] field, one of choices */
    K_ENUM,      /* enum (int-sized) field, the index of one of choices */
    K_FLAG,      /* bool field named by a string: choices[0] = false, [1] = true */
    K_RANKS,     /* slow_ranks: array of distinct worker ranks */
    K_ENDPOINTS, /* servers / binds: array of endpoints */
    K_GROUP,     /* a nested group of keys, described by group */
} key_kind;

struct section_spec;

typedef struct key_spec {
    const char *name;
    key_kind kind;
    size_t off;  /* offset of the field in zp_config */
    size_t size; /* K_STRING, K_CHOICE: size of the char array */
    bool required;
    long long imin, imax;             /* integer kinds */
    double fmin, fmax;                /* K_FLOAT; fmax = INFINITY for no bound */
    bool fmin_open, fmax_open;        /* K_FLOAT: exclusive bounds */
    const char *const *choices;       /* K_CHOICE, K_ENUM, K_FLAG: NULL-terminated */
    const struct section_spec *group; /* K_GROUP */
} key_spec;

typedef struct section_spec {
    const char *name;
    bool required;
    const key_spec *keys;
    size_t nkeys;
} section_spec;

/* State of one parse: where messages go and what has been seen. */
typedef struct parse_ctx {
    const char *name; /* file name for messages */
    const char *text; /* the source, for the 32-bit literal check */
    char *err;
    size_t errlen;
    int nservers;                           /* entries in cluster.servers (0 = absent) */
    int nbinds;                             /* entries in cluster.binds (-1 = absent) */
    unsigned bind_line;                     /* line of cluster.binds */
    int server_width, bind_width;           /* endpoints per shard entry (1: strings) */
    unsigned server_line;                   /* line of cluster.servers */
    unsigned backup_line;                   /* line of cluster.backup_workers */
    unsigned slow_lines[ZP_MAX_SLOW_RANKS]; /* line of each training.slow_ranks[i] */
    bool delay_dist_seen;                   /* training.delay_dist was given */
    unsigned inject_line;                   /* line of cluster.inject.schedule */
} parse_ctx;

#define FIELD(f) offsetof(zp_config, f)
#define STR(f)   FIELD(f), sizeof(((zp_config *)0)->f)
#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))

/* The top-level sections, cluster and training, in config_keys.c. */
#define ZP_CONFIG_NSECTIONS 2
extern const section_spec zp_config_keys_sections[ZP_CONFIG_NSECTIONS];

/* The index of the entry named exactly `name` in a NULL-terminated table, or
 * -1 (also for NULL). */
int zp_config_keys_index_of(const char *const *names, const char *name);

/* Write "name:line: <message>" (or "name: " without a line) into p->err and
 * return ZEPS_ECONFIG. */
__attribute__((format(printf, 3, 4))) int zp_config_read_fail(parse_ctx *p, unsigned line,
                                                              const char *fmt, ...);

/* "an integer", "a string", ...: the libconfig type of s, for messages. */
const char *zp_config_read_type_name(const config_setting_t *s);

/* Read setting s into the field k names; `key` is its full name
 * ("cluster.workers") for messages. Each returns ZEPS_OK or ZEPS_ECONFIG
 * with the message in p->err. read_string covers K_STRING, K_CHOICE, K_ENUM
 * and K_FLAG; read_integer K_INT, K_UINT64 and K_MEGABYTES. */
int zp_config_read_integer(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                           const config_setting_t *s);
int zp_config_read_float(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                         const config_setting_t *s);
int zp_config_read_endpoints(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                             const config_setting_t *s);
int zp_config_read_string(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                          const config_setting_t *s);
int zp_config_read_ranks(zp_config *cfg, parse_ctx *p, const char *key, const config_setting_t *s);

#endif
