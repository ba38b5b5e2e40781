/*
 * config.c - reads and validates the cluster file (libconfig 1.5).
 *
 * libconfig does the parsing; this file only walks the parsed tree and checks
 * it against const key tables, one per section (cluster, training) and one
 * per nested group (cluster.weighting). Each table row says the key's kind,
 * where it lands in zp_config, whether it is required and its allowed range,
 * so adding a key is adding one row (and a line in docs/configuration.md).
 * The few limits that depend on another key (backup_workers and slow_ranks
 * against workers) are checked once the whole file has been read, since the
 * sections may come in either order. Every problem - a syntax error, an unknown
 * key, a wrong type, a missing or out-of-range value - becomes ZEPS_ECONFIG
 * and one message of the form "file:line: what is wrong with 'section.key'",
 * so a process stops before it touches the network.
 *
 * zp_config_load reads the whole file into memory and hands it to
 * zp_config_parse; the one code path keeps messages identical for files and
 * strings, and keeps the source text at hand for the 32-bit literal check
 * below.
 */
#include "config.h"

#include "zeps_errors.h"

#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A cluster file is a few hundred bytes; anything this big is a mistake. */
#define CONFIG_FILE_MAX (16u << 20)

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
    unsigned backup_line;                   /* line of cluster.backup_workers */
    unsigned slow_lines[ZP_MAX_SLOW_RANKS]; /* line of each training.slow_ranks[i] */
    bool delay_dist_seen;                   /* training.delay_dist was given */
} parse_ctx;

#define FIELD(f) offsetof(zp_config, f)
#define STR(f)   FIELD(f), sizeof(((zp_config *)0)->f)

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const models[] = {"quadratic", "softmax", "mlp", "ctr", NULL};
static const char *const ctr_formats[] = {"criteo", "libsvm", NULL};
static const char *const sparse_optimizers[] = {"adagrad", "sgd", "adam", "ftrl", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "adagrad", "adam", NULL};
/* randk is not contractive: a copy updated with it would run away */
static const char *const pull_codecs[] = {"none", "fp16", "bf16", "int8", "sign", "topk", NULL};
static const char *const codecs[] = {"none", "fp16", "bf16", "int8", "sign", "topk", "randk",
                                     NULL};

/* Enum name tables, indexed by the enum and NULL-terminated so that K_ENUM
 * rows and the *_name / *_from_name functions share them. */
static const char *const consistency_names[] = {
    [ZP_CONSISTENCY_BSP] = "bsp",
    [ZP_CONSISTENCY_ASYNC] = "async",
    [ZP_CONSISTENCY_SSP] = "ssp",
    [ZP_CONSISTENCY_WEIGHTED] = "weighted",
    NULL,
};
static const char *const weight_fn_names[] = {
    [ZP_WEIGHT_NONE] = "none",
    [ZP_WEIGHT_INVERSE] = "inverse",
    [ZP_WEIGHT_EXP] = "exp",
    [ZP_WEIGHT_LR_OVER_TAU] = "lr_over_tau",
    NULL,
};
static const char *const delay_dist_names[] = {
    [ZP_DELAY_FIXED] = "fixed",
    [ZP_DELAY_UNIFORM] = "uniform",
    [ZP_DELAY_LOGNORMAL] = "lognormal",
    NULL,
};
static const char *const late_push_names[] = {"drop", "weighted", NULL}; /* late_weighted */
static const char *const lost_worker_names[] = {"wait", "continue", NULL}; /* lost_continue */

/* K_ENUM writes through an int *. */
_Static_assert(sizeof(zp_consistency) == sizeof(int) && sizeof(zp_weight_fn) == sizeof(int) &&
                   sizeof(zp_delay_dist) == sizeof(int),
               "enum fields must be int-sized");

/* Keep in step with docs/configuration.md. */
/* One row per key reads as a table; clang-format would split every row. */
/* clang-format off */
static const key_spec weighting_keys[] = {
    {.name = "function", .kind = K_ENUM, .off = FIELD(weight_fn), .choices = weight_fn_names},
    {.name = "lambda", .kind = K_FLOAT, .off = FIELD(weight_lambda), .fmin = 0, .fmin_open = true,
     .fmax = INFINITY},
    {.name = "max_staleness", .kind = K_INT, .off = FIELD(max_staleness), .imin = -1,
     .imax = INT_MAX},
    {.name = "dc_lambda", .kind = K_FLOAT, .off = FIELD(dc_lambda), .fmin = 0, .fmax = INFINITY},
    {.name = "bound", .kind = K_INT, .off = FIELD(weighted_bound), .imin = -1, .imax = 1000000},
};

static const section_spec weighting_group = {
    .name = "weighting", .keys = weighting_keys,
    .nkeys = sizeof(weighting_keys) / sizeof(weighting_keys[0]),
};

static const key_spec ctr_keys[] = {
    {.name = "format", .kind = K_CHOICE, .off = STR(ctr_format), .choices = ctr_formats},
    {.name = "train_file", .kind = K_STRING, .off = STR(ctr_train_file)},
    {.name = "test_file", .kind = K_STRING, .off = STR(ctr_test_file)},
    {.name = "emb_dim", .kind = K_INT, .off = FIELD(ctr_emb_dim), .imin = 1, .imax = 1024},
    {.name = "sparse_optimizer", .kind = K_CHOICE, .off = STR(ctr_sparse_optimizer),
     .choices = sparse_optimizers},
    {.name = "sparse_lr", .kind = K_FLOAT, .off = FIELD(ctr_sparse_lr), .fmin = 0,
     .fmin_open = true, .fmax = 1000},
    {.name = "emb_lr", .kind = K_FLOAT, .off = FIELD(ctr_emb_lr), .fmin = 0, .fmin_open = true,
     .fmax = 1000},
    {.name = "emb_init", .kind = K_FLOAT, .off = FIELD(ctr_emb_init), .fmin = 0, .fmax = 10},
    {.name = "l1", .kind = K_FLOAT, .off = FIELD(ctr_l1), .fmin = 0, .fmax = 1000},
    {.name = "l2", .kind = K_FLOAT, .off = FIELD(ctr_l2), .fmin = 0, .fmax = 1000},
    {.name = "max_test_examples", .kind = K_INT, .off = FIELD(ctr_max_test_examples), .imin = 0,
     .imax = INT_MAX},
};

static const section_spec ctr_group = {
    .name = "ctr", .keys = ctr_keys, .nkeys = sizeof(ctr_keys) / sizeof(ctr_keys[0]),
};

static const key_spec cluster_keys[] = {
    {.name = "servers", .kind = K_ENDPOINTS, .off = FIELD(servers), .required = true},
    {.name = "binds", .kind = K_ENDPOINTS, .off = FIELD(binds)},
    {.name = "workers", .kind = K_INT, .off = FIELD(num_workers), .required = true,
     .imin = 1, .imax = ZP_MAX_WORKERS},
    {.name = "consistency", .kind = K_ENUM, .off = FIELD(consistency),
     .choices = consistency_names},
    {.name = "staleness", .kind = K_INT, .off = FIELD(staleness), .imin = 0, .imax = 1000000},
    /* < workers is checked in check_cross, once workers is known */
    {.name = "backup_workers", .kind = K_INT, .off = FIELD(backup_workers), .imin = 0,
     .imax = ZP_MAX_WORKERS - 1},
    {.name = "late_pushes", .kind = K_FLAG, .off = FIELD(late_weighted),
     .choices = late_push_names},
    {.name = "weighting", .kind = K_GROUP, .group = &weighting_group},
    {.name = "trace_dir", .kind = K_STRING, .off = STR(trace_dir)},
    {.name = "snapshot_dir", .kind = K_STRING, .off = STR(snapshot_dir)},
    {.name = "snapshot_every_clocks", .kind = K_INT, .off = FIELD(snapshot_every_clocks),
     .imin = 0, .imax = 1000000000},
    {.name = "snapshot_every_s", .kind = K_FLOAT, .off = FIELD(snapshot_every_s), .fmin = 0,
     .fmax = 31536000},
    {.name = "snapshot_keep", .kind = K_INT, .off = FIELD(snapshot_keep), .imin = 1,
     .imax = 1000000},
    {.name = "snapshot_on_exit", .kind = K_BOOL, .off = FIELD(snapshot_on_exit)},
    {.name = "snapshot_mtbf_s", .kind = K_FLOAT, .off = FIELD(snapshot_mtbf_s), .fmin = 0,
     .fmax = 1e9},
    {.name = "snapshot_nice", .kind = K_INT, .off = FIELD(snapshot_nice), .imin = 0, .imax = 19},
    {.name = "lost_worker_timeout_s", .kind = K_FLOAT, .off = FIELD(lost_worker_timeout_s),
     .fmin = 0, .fmax = 1e6},
    {.name = "on_lost_worker", .kind = K_FLAG, .off = FIELD(lost_continue),
     .choices = lost_worker_names},
    {.name = "request_timeout_ms", .kind = K_INT, .off = FIELD(request_timeout_ms), .imin = 10,
     .imax = 600000},
    {.name = "max_retries", .kind = K_INT, .off = FIELD(max_retries), .imin = 0, .imax = 1000},
    {.name = "hello_timeout_ms", .kind = K_INT, .off = FIELD(hello_timeout_ms), .imin = 100,
     .imax = 3600000},
    {.name = "max_message_mb", .kind = K_MEGABYTES, .off = FIELD(max_message_bytes), .imin = 1,
     .imax = 65536},
    {.name = "reject_nonfinite", .kind = K_BOOL, .off = FIELD(reject_nonfinite)},
    {.name = "log_level", .kind = K_CHOICE, .off = STR(log_level), .choices = log_levels},
    /* key files are read and checked when a process starts (common/curve.c) */
    {.name = "curve_server_secret", .kind = K_STRING, .off = STR(curve_server_secret)},
    {.name = "curve_server_public", .kind = K_STRING, .off = STR(curve_server_public)},
    {.name = "curve_client_secret", .kind = K_STRING, .off = STR(curve_client_secret)},
    {.name = "curve_client_public", .kind = K_STRING, .off = STR(curve_client_public)},
    {.name = "curve_allow_dir", .kind = K_STRING, .off = STR(curve_allow_dir)},
    {.name = "insecure", .kind = K_BOOL, .off = FIELD(insecure)},
};

static const key_spec training_keys[] = {
    {.name = "model", .kind = K_CHOICE, .off = STR(model), .choices = models},
    {.name = "data_dir", .kind = K_STRING, .off = STR(data_dir)},
    {.name = "epochs", .kind = K_INT, .off = FIELD(epochs), .imin = 1, .imax = 1000000},
    {.name = "batch_size", .kind = K_INT, .off = FIELD(batch_size), .imin = 1, .imax = 1048576},
    {.name = "hidden", .kind = K_INT, .off = FIELD(hidden), .imin = 1, .imax = 65536},
    {.name = "iterations", .kind = K_INT, .off = FIELD(iterations), .imin = 1,
     .imax = 1000000000},
    {.name = "dim", .kind = K_INT, .off = FIELD(dim), .imin = 1, .imax = 100000000},
    {.name = "condition", .kind = K_FLOAT, .off = FIELD(condition), .fmin = 1, .fmax = 1e12},
    {.name = "optimizer", .kind = K_CHOICE, .off = STR(optimizer), .choices = optimizers},
    {.name = "lr", .kind = K_FLOAT, .off = FIELD(lr), .fmin = 0, .fmin_open = true, .fmax = 1000},
    {.name = "momentum", .kind = K_FLOAT, .off = FIELD(momentum), .fmin = 0, .fmax = 1,
     .fmax_open = true},
    {.name = "beta1", .kind = K_FLOAT, .off = FIELD(beta1), .fmin = 0, .fmax = 1,
     .fmax_open = true},
    {.name = "beta2", .kind = K_FLOAT, .off = FIELD(beta2), .fmin = 0, .fmax = 1,
     .fmax_open = true},
    {.name = "eps", .kind = K_FLOAT, .off = FIELD(eps), .fmin = 0, .fmin_open = true, .fmax = 1},
    {.name = "weight_decay", .kind = K_FLOAT, .off = FIELD(weight_decay), .fmin = 0, .fmax = 1},
    {.name = "seed", .kind = K_UINT64, .off = FIELD(seed), .imin = 0, .imax = LLONG_MAX},
    {.name = "eval_every", .kind = K_INT, .off = FIELD(eval_every), .imin = 1, .imax = 1000000},
    {.name = "max_train_examples", .kind = K_INT, .off = FIELD(max_train_examples), .imin = 0,
     .imax = INT_MAX},
    {.name = "delay_ms", .kind = K_FLOAT, .off = FIELD(delay_ms), .fmin = 0, .fmax = 60000},
    {.name = "delay_jitter_ms", .kind = K_FLOAT, .off = FIELD(delay_jitter_ms), .fmin = 0,
     .fmax = 60000},
    {.name = "delay_dist", .kind = K_ENUM, .off = FIELD(delay_dist), .choices = delay_dist_names},
    {.name = "delay_sigma", .kind = K_FLOAT, .off = FIELD(delay_sigma), .fmin = 0,
     .fmin_open = true, .fmax = 10},
    /* each < workers is checked in check_cross, once workers is known */
    {.name = "slow_ranks", .kind = K_RANKS, .off = FIELD(slow_ranks)},
    {.name = "slow_factor", .kind = K_FLOAT, .off = FIELD(slow_factor), .fmin = 1, .fmax = 1000},
    {.name = "eval_every_steps", .kind = K_INT, .off = FIELD(eval_every_steps), .imin = 0,
     .imax = INT_MAX},
    {.name = "result_dir", .kind = K_STRING, .off = STR(result_dir)},
    {.name = "push_codec", .kind = K_CHOICE, .off = STR(push_codec), .choices = codecs},
    {.name = "codec_fraction", .kind = K_FLOAT, .off = FIELD(codec_fraction), .fmin = 0,
     .fmin_open = true, .fmax = 1},
    {.name = "codec_block", .kind = K_INT, .off = FIELD(codec_block), .imin = 1,
     .imax = 1 << 20},
    {.name = "error_feedback", .kind = K_BOOL, .off = FIELD(error_feedback)},
    {.name = "ctr", .kind = K_GROUP, .group = &ctr_group},
    {.name = "pull_codec", .kind = K_CHOICE, .off = STR(pull_codec), .choices = pull_codecs},
    {.name = "worker_momentum", .kind = K_FLOAT, .off = FIELD(worker_momentum), .fmin = 0,
     .fmax = 1, .fmax_open = true},
};

/* clang-format on */

#define NKEYS(a) (sizeof(a) / sizeof((a)[0]))

static const section_spec sections[] = {
    {.name = "cluster", .required = true, .keys = cluster_keys, .nkeys = NKEYS(cluster_keys)},
    {.name = "training", .keys = training_keys, .nkeys = NKEYS(training_keys)},
};

/* read_section marks seen keys in a 64-bit mask. */
_Static_assert(NKEYS(cluster_keys) <= 64 && NKEYS(training_keys) <= 64 &&
                   NKEYS(weighting_keys) <= 64 && NKEYS(ctr_keys) <= 64,
               "seen mask too small");

/* Fill *cfg with the defaults documented in config.h. Any thread. */
void zp_config_defaults(zp_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->consistency = ZP_CONSISTENCY_BSP;
    cfg->staleness = 0;
    cfg->backup_workers = 0;
    cfg->late_weighted = false;
    cfg->weight_fn = ZP_WEIGHT_INVERSE;
    cfg->weight_lambda = 0.5;
    cfg->max_staleness = -1;
    cfg->dc_lambda = 0.0;
    cfg->weighted_bound = -1;
    cfg->trace_dir[0] = '\0';
    cfg->request_timeout_ms = 2000;
    cfg->max_retries = 10;
    cfg->hello_timeout_ms = 30000;
    cfg->max_message_bytes = 1024ull << 20;
    cfg->reject_nonfinite = true;
    snprintf(cfg->log_level, sizeof(cfg->log_level), "info");

    snprintf(cfg->model, sizeof(cfg->model), "mlp");
    snprintf(cfg->data_dir, sizeof(cfg->data_dir), "/usr/share/datasets/fashion-mnist");
    cfg->epochs = 10;
    cfg->batch_size = 64;
    cfg->hidden = 256;
    cfg->iterations = 1000;
    cfg->dim = 100;
    cfg->condition = 100.0;
    snprintf(cfg->optimizer, sizeof(cfg->optimizer), "momentum");
    cfg->lr = 0.05;
    cfg->momentum = 0.9;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->weight_decay = 0.0;
    cfg->seed = 1;
    cfg->eval_every = 1;
    cfg->max_train_examples = 0;
    cfg->delay_dist = ZP_DELAY_FIXED;
    cfg->delay_ms = 0.0;
    cfg->delay_jitter_ms = 0.0;
    cfg->delay_sigma = 0.5;
    cfg->num_slow_ranks = 0;
    cfg->slow_factor = 1.0;
    cfg->eval_every_steps = 0;
    cfg->snapshot_keep = 3;
    cfg->snapshot_on_exit = true;
    cfg->snapshot_nice = 10;
    snprintf(cfg->push_codec, sizeof(cfg->push_codec), "none");
    cfg->codec_fraction = 0.01;
    cfg->codec_block = 256;
    cfg->error_feedback = true;
    snprintf(cfg->ctr_format, sizeof(cfg->ctr_format), "criteo");
    cfg->ctr_emb_dim = 8;
    snprintf(cfg->ctr_sparse_optimizer, sizeof(cfg->ctr_sparse_optimizer), "adagrad");
    cfg->ctr_sparse_lr = 0.05;
    cfg->ctr_emb_lr = 0.003;
    cfg->ctr_emb_init = 0.01;
    snprintf(cfg->pull_codec, sizeof(cfg->pull_codec), "none");
}

/* names[v] of a NULL-terminated table, "unknown" outside it. */
static const char *name_of(const char *const *names, size_t n, unsigned v)
{
    return v < n - 1 ? names[v] : "unknown";
}

/* The index of the entry named exactly `name`, or -1 (also for NULL). */
static int index_of(const char *const *names, const char *name)
{
    for (int i = 0; name != NULL && names[i] != NULL; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* The *_name functions return a static name, "unknown" for a value outside
 * the enum; the *_from_name functions the value named exactly `name`, or -1.
 * Any thread. */
const char *zp_consistency_name(zp_consistency c)
{
    return name_of(consistency_names, NKEYS(consistency_names), (unsigned)c);
}

int zp_consistency_from_name(const char *name)
{
    return index_of(consistency_names, name);
}

const char *zp_weight_fn_name(zp_weight_fn f)
{
    return name_of(weight_fn_names, NKEYS(weight_fn_names), (unsigned)f);
}

int zp_weight_fn_from_name(const char *name)
{
    return index_of(weight_fn_names, name);
}

const char *zp_delay_dist_name(zp_delay_dist d)
{
    return name_of(delay_dist_names, NKEYS(delay_dist_names), (unsigned)d);
}

int zp_delay_dist_from_name(const char *name)
{
    return index_of(delay_dist_names, name);
}

/* Write "name:line: <message>" (or "name: " without a line) into p->err and
 * return ZEPS_ECONFIG. snprintf truncates and terminates for us. */
__attribute__((format(printf, 3, 4))) static int fail(parse_ctx *p, unsigned line, const char *fmt,
                                                      ...)
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

static const char *type_name(const config_setting_t *s)
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

static int read_integer(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                        const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    int type = config_setting_type(s);
    char range[128], lit[64];

    if (type != CONFIG_TYPE_INT && type != CONFIG_TYPE_INT64)
        return fail(p, line, "'%s' must be an integer (got %s)", key, type_name(s));
    int_range_text(range, sizeof(range), k);
    if (int_wrapped(p, s, lit, sizeof(lit))) {
        if (k->kind == K_UINT64)
            return fail(p, line,
                        "'%s' = %s does not fit in 32 bits; write it with an L suffix (%sL)", key,
                        lit, lit);
        return fail(p, line, "'%s' = %s is out of range (allowed: %s)", key, lit, range);
    }
    long long v = config_setting_get_int64(s);
    if (v < k->imin || v > k->imax)
        return fail(p, line, "'%s' = %lld is out of range (allowed: %s)", key, v, range);

    void *field = (char *)cfg + k->off;
    if (k->kind == K_INT)
        *(int *)field = (int)v;
    else if (k->kind == K_UINT64)
        *(uint64_t *)field = (uint64_t)v;
    else
        *(uint64_t *)field = (uint64_t)v << 20;
    return ZEPS_OK;
}

static int read_float(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
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
            return fail(p, line, "'%s' = %s does not fit in 32 bits; write it as %s.0", key, lit,
                        lit);
        v = (double)config_setting_get_int64(s);
    } else {
        return fail(p, line, "'%s' must be a number (got %s)", key, type_name(s));
    }
    float_range_text(range, sizeof(range), k);
    if (!isfinite(v) || v < k->fmin || v > k->fmax || (k->fmin_open && v == k->fmin) ||
        (k->fmax_open && v == k->fmax))
        return fail(p, line, "'%s' = %g is out of range (allowed: %s)", key, v, range);
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

static int read_endpoints(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                          const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    int type = config_setting_type(s);
    bool bind = k->off == FIELD(binds);

    if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
        return fail(p, line, "'%s' must be an array of strings (got %s)", key, type_name(s));
    int n = config_setting_length(s);
    if (!bind && (n < 1 || n > ZP_MAX_SHARDS))
        return fail(p, line, "'%s' has %d entries (allowed: 1..%d)", key, n, ZP_MAX_SHARDS);
    if (bind && n > ZP_MAX_SHARDS)
        return fail(p, line, "'%s' has %d entries (at most %d)", key, n, ZP_MAX_SHARDS);

    char(*out)[ZP_ENDPOINT_MAX] = (char(*)[ZP_ENDPOINT_MAX])((char *)cfg + k->off);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        unsigned eline = config_setting_source_line(e) ? config_setting_source_line(e) : line;
        if (config_setting_type(e) != CONFIG_TYPE_STRING)
            return fail(p, eline, "'%s[%d]' must be a string (got %s)", key, i, type_name(e));
        const char *ep = config_setting_get_string(e);
        size_t len = strlen(ep);
        if (len >= ZP_ENDPOINT_MAX)
            return fail(p, eline, "'%s[%d]' is too long (%zu bytes, at most %d)", key, i, len,
                        ZP_ENDPOINT_MAX - 1);
        const char *why = endpoint_problem(ep, bind);
        if (why != NULL)
            return fail(p, eline, "'%s[%d]' = \"%s\" %s", key, i, ep, why);
        for (int j = 0; !bind && j < i; j++)
            if (strcmp(out[j], ep) == 0)
                return fail(p, eline, "'%s[%d]' = \"%s\" repeats '%s[%d]'", key, i, ep, key, j);
        memcpy(out[i], ep, len + 1);
    }
    if (bind) {
        p->nbinds = n;
        p->bind_line = line;
    } else {
        p->nservers = n;
        cfg->num_shards = n;
    }
    return ZEPS_OK;
}

static int read_string(zp_config *cfg, parse_ctx *p, const char *key, const key_spec *k,
                       const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return fail(p, line, "'%s' must be a string (got %s)", key, type_name(s));
    const char *v = config_setting_get_string(s);

    if (k->kind != K_STRING) {
        int c = index_of(k->choices, v);
        if (c < 0) {
            char list[128] = "";
            size_t used = 0;
            for (int i = 0; k->choices[i] != NULL && used < sizeof(list); i++) {
                int n = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
                                 k->choices[i]);
                used += n > 0 ? (size_t)n : 0;
            }
            return fail(p, line, "'%s' = \"%s\" is not one of %s", key, v, list);
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
        return fail(p, line, "'%s' is too long (%zu bytes, at most %zu)", key, len, k->size - 1);
    memcpy((char *)cfg + k->off, v, len + 1);
    return ZEPS_OK;
}

/* training.slow_ranks: distinct ranks below ZP_MAX_WORKERS here; below
 * workers in check_cross, which needs the lines kept in p->slow_lines. */
static int read_ranks(zp_config *cfg, parse_ctx *p, const char *key, const config_setting_t *s)
{
    unsigned line = config_setting_source_line(s);
    int type = config_setting_type(s);

    if (type != CONFIG_TYPE_ARRAY && type != CONFIG_TYPE_LIST)
        return fail(p, line, "'%s' must be an array of integers (got %s)", key, type_name(s));
    int n = config_setting_length(s);
    if (n > ZP_MAX_SLOW_RANKS)
        return fail(p, line, "'%s' has %d entries (at most %d)", key, n, ZP_MAX_SLOW_RANKS);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        unsigned eline = config_setting_source_line(e) ? config_setting_source_line(e) : line;
        int etype = config_setting_type(e);
        if (etype != CONFIG_TYPE_INT && etype != CONFIG_TYPE_INT64)
            return fail(p, eline, "'%s[%d]' must be an integer (got %s)", key, i, type_name(e));
        long long r = config_setting_get_int64(e);
        if (r < 0 || r >= ZP_MAX_WORKERS)
            return fail(p, eline, "'%s[%d]' = %lld is out of range (allowed: 0 <= rank < %d)", key,
                        i, r, ZP_MAX_WORKERS);
        for (int j = 0; j < i; j++)
            if (cfg->slow_ranks[j] == r)
                return fail(p, eline, "'%s[%d]' = %lld repeats '%s[%d]'", key, i, r, key, j);
        cfg->slow_ranks[i] = (int)r;
        p->slow_lines[i] = eline;
    }
    cfg->num_slow_ranks = n;
    return ZEPS_OK;
}

static int read_section(zp_config *cfg, parse_ctx *p, const char *path, const section_spec *sec,
                        const config_setting_t *group);

static int read_key(zp_config *cfg, parse_ctx *p, const char *section, const key_spec *k,
                    const config_setting_t *s)
{
    char key[96];
    snprintf(key, sizeof(key), "%s.%s", section, k->name);
    if (k->off == FIELD(backup_workers) && k->kind == K_INT)
        p->backup_line = config_setting_source_line(s);
    if (k->off == FIELD(delay_dist) && k->kind == K_ENUM)
        p->delay_dist_seen = true;

    switch (k->kind) {
    case K_INT:
    case K_UINT64:
    case K_MEGABYTES:
        return read_integer(cfg, p, key, k, s);
    case K_FLOAT:
        return read_float(cfg, p, key, k, s);
    case K_BOOL:
        if (config_setting_type(s) != CONFIG_TYPE_BOOL)
            return fail(p, config_setting_source_line(s),
                        "'%s' must be a boolean, true or false (got %s)", key, type_name(s));
        *(bool *)((char *)cfg + k->off) = config_setting_get_bool(s) != 0;
        return ZEPS_OK;
    case K_STRING:
    case K_CHOICE:
    case K_ENUM:
    case K_FLAG:
        return read_string(cfg, p, key, k, s);
    case K_RANKS:
        return read_ranks(cfg, p, key, s);
    case K_ENDPOINTS:
        return read_endpoints(cfg, p, key, k, s);
    case K_GROUP:
        if (config_setting_type(s) != CONFIG_TYPE_GROUP)
            return fail(p, config_setting_source_line(s),
                        "'%s' must be a group, %s = { ... } (got %s)", key, k->name, type_name(s));
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
            return fail(p, config_setting_source_line(s), "unknown key '%s.%s'", path, name);
        int rc = read_key(cfg, p, path, &sec->keys[j], s);
        if (rc != ZEPS_OK)
            return rc;
        seen |= 1ull << j;
    }
    for (size_t j = 0; j < sec->nkeys; j++)
        if (sec->keys[j].required && !(seen & (1ull << j)))
            return fail(p, config_setting_source_line(group), "missing required key '%s.%s'", path,
                        sec->keys[j].name);
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
        return fail(p, p->backup_line,
                    "'cluster.backup_workers' = %d is out of range (allowed: 0 <= backup_workers "
                    "< workers = %d)",
                    cfg->backup_workers, cfg->num_workers);
    if (strcmp(cfg->model, "ctr") == 0 && (!cfg->ctr_train_file[0] || !cfg->ctr_test_file[0]))
        return fail(p, 0,
                    "model \"ctr\" needs 'training.ctr.train_file' and "
                    "'training.ctr.test_file'");
    for (int i = 0; i < cfg->num_slow_ranks; i++)
        if (cfg->slow_ranks[i] >= cfg->num_workers)
            return fail(p, p->slow_lines[i],
                        "'training.slow_ranks[%d]' = %d is out of range (allowed: 0 <= rank < "
                        "workers = %d)",
                        i, cfg->slow_ranks[i], cfg->num_workers);
    return ZEPS_OK;
}

static int read_root(zp_config *cfg, parse_ctx *p, const config_setting_t *root)
{
    bool seen[NKEYS(sections)] = {false};
    int n = config_setting_length(root);

    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
        const char *name = config_setting_name(s);
        unsigned line = config_setting_source_line(s);
        size_t j = 0;
        while (j < NKEYS(sections) && strcmp(sections[j].name, name) != 0)
            j++;
        if (j == NKEYS(sections))
            return fail(p, line, "unknown key '%s'", name);
        if (config_setting_type(s) != CONFIG_TYPE_GROUP)
            return fail(p, line, "'%s' must be a group, %s = { ... } (got %s)", name, name,
                        type_name(s));
        int rc = read_section(cfg, p, sections[j].name, &sections[j], s);
        if (rc != ZEPS_OK)
            return rc;
        seen[j] = true;
    }
    for (size_t j = 0; j < NKEYS(sections); j++)
        if (sections[j].required && !seen[j])
            return fail(p, 0, "missing required key '%s'", sections[j].name);
    if (p->nbinds >= 0 && p->nbinds != p->nservers)
        return fail(p, p->bind_line,
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
        fail(&p, 0, "no configuration given");
        return ZEPS_EINVAL;
    }
    zp_config_defaults(cfg);
    snprintf(cfg->path, sizeof(cfg->path), "%s", p.name);

    config_t lc;
    config_init(&lc);
    int rc;
    if (!config_read_string(&lc, text)) {
        /* An @include'd file has its own name; the main text has none. */
        if (config_error_file(&lc) != NULL)
            p.name = config_error_file(&lc);
        rc = fail(&p, (unsigned)config_error_line(&lc), "%s", config_error_text(&lc));
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
        fail(p, 0, "cannot open: %s", strerror(e));
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
                rc = fail(p, 0, "larger than %u MiB; not a cluster file", CONFIG_FILE_MAX >> 20);
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
        fail(p, 0, "read error: %s", strerror(e));
        rc = ZEPS_EIO;
        goto fail_read;
    }
    buf[len] = '\0';
    if (memchr(buf, '\0', len) != NULL) {
        rc = fail(p, 0, "contains a NUL byte; not a text file");
        goto fail_read;
    }
    fclose(fp);
    *out = buf;
    return ZEPS_OK;

fail_nomem:
    fail(p, 0, "out of memory reading the file");
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
        fail(&p, 0, "no configuration file given");
        return ZEPS_EINVAL;
    }
    if (strlen(path) >= ZP_PATH_MAX) {
        fail(&p, 0, "path is longer than %d bytes", ZP_PATH_MAX - 1);
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
