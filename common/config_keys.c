/*
 * config_keys.c - the cluster file's keys: one const table per section
 * (cluster, training) and per nested group (cluster.weighting,
 * training.ctr), the defaults, and the enum name tables behind the
 * zp_*_name / zp_*_from_name functions.
 *
 * Each table row says the key's kind, where it lands in zp_config, whether it
 * is required and its allowed range, so adding a key is adding one row here,
 * its default in zp_config_keys_defaults, and a line in docs/configuration.md.
 * config.c walks these tables; config_read.c reads one value.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_int.h"

static const char *const log_levels[] = {"debug", "info", "warn", "error", NULL};
static const char *const transports[] = {"tcp", "auto", NULL};
static const char *const models[] = {"quadratic", "softmax", "mlp", "ctr", NULL};
static const char *const ctr_formats[] = {"criteo", "libsvm", NULL};
static const char *const sparse_optimizers[] = {"adagrad", "sgd", "adam", "ftrl", NULL};
static const char *const optimizers[] = {"sgd", "momentum", "adagrad", "adam", NULL};
/* randk is not contractive: a copy updated with it would run away */
static const char *const pull_codecs[] = {"none", "fp16", "bf16", "int8", "sign", "topk", NULL};
static const char *const codecs[] = {"none", "fp16", "bf16", "int8", "sign", "topk", "randk", NULL};

/* Enum name tables, indexed by the enum and NULL-terminated so that K_ENUM
 * rows and the *_name / *_from_name functions share them. */
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
static const char *const inject_names[] = {
    [ZP_INJECT_OFF] = "off",
    [ZP_INJECT_FIXED] = "fixed",
    [ZP_INJECT_UNIFORM] = "uniform",
    [ZP_INJECT_GEOMETRIC] = "geometric",
    [ZP_INJECT_REPLAY] = "replay",
    [ZP_INJECT_STRAGGLER] = "straggler",
    NULL,
};
static const char *const late_push_names[] = {"drop", "weighted", NULL};   /* late_weighted */
static const char *const lost_worker_names[] = {"wait", "continue", NULL}; /* lost_continue */

/* K_ENUM writes through an int *. */
_Static_assert(sizeof(zp_weight_fn) == sizeof(int) && sizeof(zp_delay_dist) == sizeof(int) &&
                   sizeof(zp_inject_schedule) == sizeof(int),
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
    {.name = "dc_mean_square", .kind = K_FLOAT, .off = FIELD(dc_mean_square), .fmin = 0, .fmax = 1,
     .fmax_open = true},
    {.name = "bound", .kind = K_INT, .off = FIELD(weighted_bound), .imin = -1, .imax = 1000000},
};

static const section_spec weighting_group = {
    .name = "weighting", .keys = weighting_keys,
    .nkeys = sizeof(weighting_keys) / sizeof(weighting_keys[0]),
};

/* the schedule's own needs (max_tau, replay_file, straggler < workers) are
 * checked in check_cross */
static const key_spec inject_keys[] = {
    {.name = "schedule", .kind = K_ENUM, .off = FIELD(inject), .choices = inject_names},
    {.name = "tau", .kind = K_INT, .off = FIELD(inject_tau), .imin = 0, .imax = 1000000},
    {.name = "max_tau", .kind = K_INT, .off = FIELD(inject_max_tau), .imin = 0, .imax = 1000000},
    {.name = "p", .kind = K_FLOAT, .off = FIELD(inject_p), .fmin = 0, .fmin_open = true, .fmax = 1},
    {.name = "replay_file", .kind = K_STRING, .off = STR(inject_replay)},
    {.name = "straggler", .kind = K_INT, .off = FIELD(inject_straggler), .imin = 0,
     .imax = ZP_MAX_WORKERS - 1},
    {.name = "window", .kind = K_INT, .off = FIELD(inject_window), .imin = 0, .imax = 1000000},
    {.name = "turns", .kind = K_BOOL, .off = FIELD(inject_turns)},
    {.name = "seed", .kind = K_UINT64, .off = FIELD(inject_seed), .imin = 0, .imax = LLONG_MAX},
};

static const section_spec inject_group = {
    .name = "inject", .keys = inject_keys, .nkeys = sizeof(inject_keys) / sizeof(inject_keys[0]),
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
    {.name = "hot_rows", .kind = K_UINT64, .off = FIELD(ctr_hot_rows), .imin = 0,
     .imax = 1LL << 31},
    {.name = "tier", .kind = K_BOOL, .off = FIELD(ctr_tier)},
};

static const section_spec ctr_group = {
    .name = "ctr", .keys = ctr_keys, .nkeys = sizeof(ctr_keys) / sizeof(ctr_keys[0]),
};

/* cluster.coordination: the service that elects each shard's primary when
 * replicas >= 2 (docs/replication.md); the key naming the servers names the
 * backend, so another service would be another key */
static const key_spec coordination_keys[] = {
    {.name = "zookeeper", .kind = K_STRING, .off = STR(coord_zookeeper)},
    {.name = "name", .kind = K_STRING, .off = STR(coord_name)},
    {.name = "session_timeout_ms", .kind = K_INT, .off = FIELD(coord_session_timeout_ms),
     .imin = 200, .imax = 600000},
    {.name = "connect_timeout_ms", .kind = K_INT, .off = FIELD(coord_connect_timeout_ms),
     .imin = 100, .imax = 3600000},
};

static const section_spec coordination_group = {
    .name = "coordination", .keys = coordination_keys, .nkeys = NKEYS(coordination_keys),
};

/* cluster.replication: the primary's log and the in-sync set's lag bound */
static const key_spec replication_keys[] = {
    {.name = "max_lag_ms", .kind = K_INT, .off = FIELD(repl_max_lag_ms), .imin = 10,
     .imax = 600000},
    {.name = "log_mb", .kind = K_INT, .off = FIELD(repl_log_mb), .imin = 1, .imax = 1 << 20},
};

static const section_spec replication_group = {
    .name = "replication", .keys = replication_keys, .nkeys = NKEYS(replication_keys),
};

static const key_spec cluster_keys[] = {
    {.name = "servers", .kind = K_ENDPOINTS, .off = FIELD(servers), .required = true},
    {.name = "binds", .kind = K_ENDPOINTS, .off = FIELD(binds)},
    /* the servers' shape, the coordination service: check_replicas */
    {.name = "replicas", .kind = K_INT, .off = FIELD(replicas), .imin = 1,
     .imax = ZP_MAX_REPLICAS},
    {.name = "coordination", .kind = K_GROUP, .group = &coordination_group},
    {.name = "replication", .kind = K_GROUP, .group = &replication_group},
    {.name = "workers", .kind = K_INT, .off = FIELD(num_workers), .required = true,
     .imin = 1, .imax = ZP_MAX_WORKERS},
    {.name = "consistency", .kind = K_STRING, .off = STR(consistency)},
    {.name = "staleness", .kind = K_INT, .off = FIELD(staleness), .imin = 0, .imax = 1000000},
    /* < workers is checked in check_cross, once workers is known */
    {.name = "backup_workers", .kind = K_INT, .off = FIELD(backup_workers), .imin = 0,
     .imax = ZP_MAX_WORKERS - 1},
    {.name = "late_pushes", .kind = K_FLAG, .off = FIELD(late_weighted),
     .choices = late_push_names},
    {.name = "weighting", .kind = K_GROUP, .group = &weighting_group},
    {.name = "inject", .kind = K_GROUP, .group = &inject_group},
    {.name = "trace_dir", .kind = K_STRING, .off = STR(trace_dir)},
    {.name = "metrics_listen", .kind = K_STRING, .off = STR(metrics_listen)},
    {.name = "snapshot_dir", .kind = K_STRING, .off = STR(snapshot_dir)},
    {.name = "tier_dir", .kind = K_STRING, .off = STR(tier_dir)},
    {.name = "slot_map", .kind = K_STRING, .off = STR(slot_map)},
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
    /* negative (-1, the default) = auto: server/op/clock.c */
    {.name = "lost_worker_timeout_s", .kind = K_FLOAT, .off = FIELD(lost_worker_timeout_s),
     .fmin = -1, .fmax = 1e6},
    {.name = "lost_worker_wait_s", .kind = K_FLOAT, .off = FIELD(lost_worker_wait_s),
     .fmin = -1, .fmax = 1e6},
    {.name = "on_lost_worker", .kind = K_FLAG, .off = FIELD(lost_continue),
     .choices = lost_worker_names},
    {.name = "request_timeout_ms", .kind = K_INT, .off = FIELD(request_timeout_ms), .imin = 10,
     .imax = 600000},
    {.name = "max_retries", .kind = K_INT, .off = FIELD(max_retries), .imin = 0, .imax = 1000},
    {.name = "hello_timeout_ms", .kind = K_INT, .off = FIELD(hello_timeout_ms), .imin = 100,
     .imax = 3600000},
    {.name = "max_message_mb", .kind = K_MEGABYTES, .off = FIELD(max_message_bytes), .imin = 1,
     .imax = 65536},
    {.name = "max_tables", .kind = K_INT, .off = FIELD(max_tables), .imin = 1, .imax = 1000000},
    {.name = "max_rows", .kind = K_UINT64, .off = FIELD(max_rows), .imin = 0,
     .imax = 1ll << 40},
    {.name = "max_memory_mb", .kind = K_MEGABYTES, .off = FIELD(max_memory_bytes), .imin = 0,
     .imax = 1ll << 30},
    {.name = "reject_nonfinite", .kind = K_BOOL, .off = FIELD(reject_nonfinite)},
    {.name = "log_level", .kind = K_CHOICE, .off = STR(log_level), .choices = log_levels},
    {.name = "transport", .kind = K_CHOICE, .off = STR(transport), .choices = transports},
    {.name = "shm_segment_mb", .kind = K_MEGABYTES, .off = FIELD(shm_area_bytes), .imin = 1,
     .imax = 65536},
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
    {.name = "depth", .kind = K_INT, .off = FIELD(depth), .imin = 1, .imax = 8},
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
    {.name = "target_accuracy", .kind = K_FLOAT, .off = FIELD(target_accuracy), .fmin = 0,
     .fmax = 1},
    {.name = "target_rel_distance", .kind = K_FLOAT, .off = FIELD(target_rel_distance), .fmin = 0,
     .fmax = 1},
    {.name = "result_dir", .kind = K_STRING, .off = STR(result_dir)},
    {.name = "metrics_listen", .kind = K_STRING, .off = STR(worker_metrics_listen)},
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
    {.name = "prefetch", .kind = K_INT, .off = FIELD(prefetch), .imin = 0, .imax = 64},
    {.name = "max_inflight", .kind = K_INT, .off = FIELD(max_inflight), .imin = 0, .imax = 64},
    {.name = "pull_views", .kind = K_BOOL, .off = FIELD(pull_views)},
};

/* clang-format on */

const section_spec zp_config_keys_sections[ZP_CONFIG_NSECTIONS] = {
    {.name = "cluster", .required = true, .keys = cluster_keys, .nkeys = NKEYS(cluster_keys)},
    {.name = "training", .keys = training_keys, .nkeys = NKEYS(training_keys)},
};

/* read_section marks seen keys in a 64-bit mask. */
_Static_assert(NKEYS(cluster_keys) <= 64 && NKEYS(training_keys) <= 64 &&
                   NKEYS(weighting_keys) <= 64 && NKEYS(ctr_keys) <= 64 &&
                   NKEYS(inject_keys) <= 64 && NKEYS(coordination_keys) <= 64 &&
                   NKEYS(replication_keys) <= 64,
               "seen mask too small");

/* cluster.replicas and cluster.coordination */
static void replica_defaults(zp_config *cfg)
{
    cfg->replicas = 1;
    snprintf(cfg->coord_name, sizeof(cfg->coord_name), "zeps");
    cfg->coord_session_timeout_ms = 6000;
    cfg->coord_connect_timeout_ms = 15000;
    cfg->repl_max_lag_ms = 2000;
    cfg->repl_log_mb = 256;
}

/* cluster.inject */
static void inject_defaults(zp_config *cfg)
{
    cfg->inject = ZP_INJECT_OFF;
    cfg->inject_tau = 1;
    cfg->inject_max_tau = 0;
    cfg->inject_p = 0.5;
    cfg->inject_straggler = 0;
    cfg->inject_window = 0;
    cfg->inject_turns = true;
    cfg->inject_seed = 1;
}

/* Fill *cfg with the defaults documented in config.h. Any thread. */
void zp_config_keys_defaults(zp_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->consistency, sizeof(cfg->consistency), "bsp");
    replica_defaults(cfg);
    cfg->staleness = 0;
    cfg->backup_workers = 0;
    cfg->late_weighted = false;
    cfg->weight_fn = ZP_WEIGHT_INVERSE;
    cfg->weight_lambda = 0.5;
    cfg->max_staleness = -1;
    cfg->dc_lambda = 0.0;
    cfg->dc_mean_square = 0.0;
    cfg->weighted_bound = -1;
    inject_defaults(cfg);
    cfg->trace_dir[0] = '\0';
    cfg->slot_map[0] = '\0'; /* the default map (docs/elastic.md) */
    cfg->metrics_listen[0] = '\0';
    cfg->worker_metrics_listen[0] = '\0';
    cfg->lost_worker_timeout_s = -1; /* auto */
    cfg->lost_worker_wait_s = -1;    /* auto */
    cfg->request_timeout_ms = 2000;
    cfg->max_retries = 10;
    cfg->hello_timeout_ms = 30000;
    cfg->max_message_bytes = 1024ull << 20;
    cfg->max_tables = 1024;
    cfg->max_rows = 0;
    cfg->max_memory_bytes = 0;
    cfg->reject_nonfinite = true;
    snprintf(cfg->log_level, sizeof(cfg->log_level), "info");
    snprintf(cfg->transport, sizeof(cfg->transport), "tcp");
    cfg->shm_area_bytes = 256ull << 20;

    snprintf(cfg->model, sizeof(cfg->model), "mlp");
    snprintf(cfg->data_dir, sizeof(cfg->data_dir), "/usr/share/datasets/fashion-mnist");
    cfg->epochs = 10;
    cfg->batch_size = 64;
    cfg->hidden = 256;
    cfg->depth = 1;
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
    cfg->prefetch = 0;
    cfg->max_inflight = 0;
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
    cfg->pull_views = true;
}

/* names[v] of a NULL-terminated table, "unknown" outside it. */
static const char *name_of(const char *const *names, size_t n, unsigned v)
{
    return v < n - 1 ? names[v] : "unknown";
}

/* See config_int.h. */
int zp_config_keys_index_of(const char *const *names, const char *name)
{
    for (int i = 0; name != NULL && names[i] != NULL; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* The *_name functions return a static name, "unknown" for a value outside
 * the enum; the *_from_name functions the value named exactly `name`, or -1.
 * Any thread. */
const char *zp_config_keys_weight_fn_name(zp_weight_fn f)
{
    return name_of(weight_fn_names, NKEYS(weight_fn_names), (unsigned)f);
}

int zp_config_keys_weight_fn_from_name(const char *name)
{
    return zp_config_keys_index_of(weight_fn_names, name);
}

const char *zp_config_keys_delay_dist_name(zp_delay_dist d)
{
    return name_of(delay_dist_names, NKEYS(delay_dist_names), (unsigned)d);
}

int zp_config_keys_delay_dist_from_name(const char *name)
{
    return zp_config_keys_index_of(delay_dist_names, name);
}

const char *zp_config_keys_inject_name(zp_inject_schedule k)
{
    return name_of(inject_names, NKEYS(inject_names), (unsigned)k);
}
