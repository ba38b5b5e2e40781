/*
 * config.h - the cluster file, parsed with libconfig.
 *
 * One cluster file describes a whole cluster and is read by every process:
 * servers, workers, zepsctl. Unknown keys, wrong types, missing required values
 * and out-of-range values are errors that name the file, the line and the key
 * (zp_config_load), so a process exits before it touches the network.
 * The accepted keys are documented in docs/configuration.md.
 */
#ifndef ZP_CONFIG_H
#define ZP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_MAX_SHARDS            256
#define ZP_MAX_WORKERS           4096
#define ZP_NAME_MAX              64
#define ZP_PATH_MAX              1024
#define ZP_ENDPOINT_MAX          256
#define ZP_MAX_REPLICAS          5   /* processes per shard (cluster.replicas) */
#define ZP_MAX_REPLICA_ENDPOINTS 256 /* endpoints beyond each shard's first, all shards */

/* Staleness weighting functions w(tau) of the weighted mode. */
typedef enum zp_weight_fn {
    ZP_WEIGHT_NONE = 0,    /* "none": 1 */
    ZP_WEIGHT_INVERSE = 1, /* "inverse": 1 / (1 + tau) */
    ZP_WEIGHT_EXP = 2,     /* "exp": exp(-lambda * tau) */
    ZP_WEIGHT_LR_OVER_TAU =
        3, /* "lr_over_tau": 1 / max(1, tau) (step alpha0/max(1,tau), alpha0 = lr) */
} zp_weight_fn;

/* Distribution of the injected per-step compute delay of a worker. */
typedef enum zp_delay_dist {
    ZP_DELAY_FIXED = 0,     /* "fixed": delay_ms */
    ZP_DELAY_UNIFORM = 1,   /* "uniform": delay_ms + U[0, delay_jitter_ms) */
    ZP_DELAY_LOGNORMAL = 2, /* "lognormal": median delay_ms, log-stddev delay_sigma */
} zp_delay_dist;

#define ZP_MAX_SLOW_RANKS 64

/* Staleness injected by the shard for studies (cluster.inject, server/state/inject.c):
 * the law of the tau a pull is served with. */
typedef enum zp_inject_schedule {
    ZP_INJECT_OFF = 0,       /* "off": pulls see the newest version (default) */
    ZP_INJECT_FIXED = 1,     /* "fixed": every pull tau old */
    ZP_INJECT_UNIFORM = 2,   /* "uniform": tau ~ U{0..max_tau} */
    ZP_INJECT_GEOMETRIC = 3, /* "geometric": P(tau = k) = p (1-p)^k, cut at max_tau */
    ZP_INJECT_REPLAY = 4,    /* "replay": tau drawn from a histogram file ("tau count" lines) */
    ZP_INJECT_STRAGGLER = 5, /* "straggler": rank `straggler` tau old, the others fresh */
} zp_inject_schedule;

typedef struct zp_config {
    char path[ZP_PATH_MAX]; /* the file it was read from ("" for defaults) */

    /* cluster = { ... } */
    int num_shards;                               /* = number of entries in servers */
    char servers[ZP_MAX_SHARDS][ZP_ENDPOINT_MAX]; /* endpoints workers connect to */
    char binds[ZP_MAX_SHARDS][ZP_ENDPOINT_MAX]; /* endpoints servers bind ("" = same as servers) */
    /* Replicated shards (docs/replication.md): servers[k] and binds[k] are
     * replica 0's; the others' are here, read through zp_config_endpoint. */
    int replicas;           /* "replicas": processes per shard, default 1 */
    unsigned replicas_line; /* where it was set (0: the default) */
    char replica_servers[ZP_MAX_REPLICA_ENDPOINTS][ZP_ENDPOINT_MAX]; /* [k * (R-1) + r - 1] */
    char replica_binds[ZP_MAX_REPLICA_ENDPOINTS][ZP_ENDPOINT_MAX];   /* the same for binds */
    /* cluster.coordination = { ... } (optional group; used when replicas >= 2) */
    char coord_zookeeper[ZP_PATH_MAX]; /* "zookeeper": "host:port,host:port"; "" = none */
    char coord_name[ZP_NAME_MAX];      /* "name": nodes under /zeps/<name>; default "zeps" */
    int coord_session_timeout_ms;      /* "session_timeout_ms": default 6000 */
    int coord_connect_timeout_ms;      /* "connect_timeout_ms": default 15000 */
    /* cluster.replication = { ... } (optional group; used when replicas >= 2) */
    int repl_max_lag_ms;  /* "max_lag_ms": a backup this far behind leaves the in-sync set; 2000 */
    int repl_log_mb;      /* "log_mb": log entries a primary keeps for backups to catch up; 256 */
    int num_workers;      /* required, 1..ZP_MAX_WORKERS */
    char consistency[16]; /* the mode's name, default "bsp"; which names exist is
                             the server's policy registry's business:
                             zp_config_check_mode */
    unsigned consistency_line; /* where it was set (0: the default) */
    int staleness;             /* ssp bound in clocks, default 0, 0..1000000 */
    int backup_workers; /* bsp: a round closes after workers - k pushes; default 0, < workers */
    bool late_weighted; /* bsp backup: "late_pushes" = "drop" (false, default) | "weighted" */
    /* cluster.weighting = { ... } (optional group; used by "weighted", and by bsp late pushes) */
    zp_weight_fn weight_fn; /* "function": default "inverse" */
    double weight_lambda;   /* "lambda": exp decay, default 0.5, > 0 */
    int max_staleness;      /* "max_staleness": drop pushes with tau above it (versions); -1 = never
                               (default) */
    double dc_lambda;       /* "dc_lambda": DC-ASGD compensation strength, default 0 (off), >= 0 */
    double dc_mean_square;  /* "dc_mean_square": DC-ASGD-a, the momentum m of the mean
                               square of g that scales lambda (0: constant lambda), [0, 1) */
    int weighted_bound;     /* "bound": also hold pulls as ssp with this bound (clocks); -1 = none
                               (default) */
    char metrics_listen[ZP_ENDPOINT_MAX];        /* "metrics_listen": HOST:PORT of each shard's HTTP
                                                    endpoint; "" = off (default) */
    char worker_metrics_listen[ZP_ENDPOINT_MAX]; /* training "metrics_listen": HOST:PORT of each
                                                    zeps-worker's HTTP endpoint; "" = off (default)
                                                  */
    /* cluster.inject = { ... } (optional group; docs/consistency.md, "Staleness on demand") */
    zp_inject_schedule inject;       /* "schedule": default off */
    int inject_tau;                  /* "tau": fixed, straggler; default 1, 0..1000000 */
    int inject_max_tau;              /* "max_tau": uniform, geometric; default 0 */
    double inject_p;                 /* "p": geometric, (0, 1], default 0.5 */
    char inject_replay[ZP_PATH_MAX]; /* "replay_file": replay's histogram */
    int inject_straggler;            /* "straggler": the slow rank, default 0, < workers */
    int inject_window;               /* "window": versions kept; 0 = the schedule's largest tau */
    bool inject_turns;               /* "turns": pulls of a table take turns by rank so
                                        no push comes between a pull and its push (exact tau);
                                        default true; unused where pushes wait for rounds */
    uint64_t inject_seed;            /* "seed": default 1 */
    char trace_dir[ZP_PATH_MAX];    /* "trace_dir": each shard writes <dir>/trace-shard<i>.csv; "" =
                                       off (default) */
    char snapshot_dir[ZP_PATH_MAX]; /* snapshots and restore; "" = off (default) */
    char tier_dir[ZP_PATH_MAX];     /* cold tiers of sparse tables declared with tier; "" = none */
    char slot_map[ZP_PATH_MAX];     /* the shards' slot -> shard map file (docs/elastic.md);
                                       "" = the default map of num_shards (hash mod S) */
    char join[ZP_ENDPOINT_MAX];     /* not from the file: zeps-server --join ENDPOINT, a shard
                                       past the servers list that joins at run time there
                                       (docs/elastic.md, "Adding a shard"); "" = none */
    char join_bind[ZP_ENDPOINT_MAX]; /* not from the file: zeps-server --bind, where that shard
                                        binds; "" = its join endpoint */
    int snapshot_every_clocks;       /* bsp: a consistent cut every K clocks; 0 = off */
    double snapshot_every_s;         /* other modes: every T seconds; 0 = off */
    int snapshot_keep;               /* complete sets kept, default 3, >= 1 */
    bool snapshot_on_exit;           /* a final snapshot on SIGTERM/SIGINT, default true */
    double snapshot_mtbf_s;          /* auto (Young/Daly) interval from this MTBF; 0 = off */
    int snapshot_nice;               /* nice value of the forked writer, default 10, 0..19 */
    double lost_worker_timeout_s;    /* declare a silent worker lost after this; 0 = never,
                                        negative = auto (default -1, docs/faults.md) */
    double lost_worker_wait_s;       /* on_lost_worker = wait: how long a wait on a lost or
                                        departed worker lasts before it fails; < 0 = auto */
    bool lost_continue;              /* "on_lost_worker": "wait" (false, default) | "continue" */
    int request_timeout_ms;          /* default 2000, 10..600000 */
    int max_retries;                 /* default 10, 0..1000 */
    int hello_timeout_ms;            /* default 30000 */
    uint64_t max_message_bytes;      /* default 1 GiB; from max_message_mb */
    int max_tables;                  /* tables per shard, default 1024, 1..1000000 */
    uint64_t max_rows; /* sparse rows per shard, all tables; 0 = max_memory / 64 (default) */
    uint64_t max_memory_bytes; /* bytes per shard, all tables; from max_memory_mb; 0 = half the
                                  machine's or cgroup's memory (default) */
    bool reject_nonfinite;     /* default true */
    char log_level[16];        /* "debug" | "info" | "warn" | "error"; default info */
    char transport[8];         /* "tcp" (default) | "auto": shared memory between processes of
                                  one host (docs/protocol.md, "Shared memory") */
    uint64_t shm_area_bytes;   /* each area of a client's segment; from shm_segment_mb (256) */
    /* CurveZMQ (common/curve.h): key file paths, "" = not set */
    char curve_server_secret[ZP_PATH_MAX]; /* server: its secret key (turns CURVE on) */
    char curve_server_public[ZP_PATH_MAX]; /* clients: the servers' public key */
    char curve_client_secret[ZP_PATH_MAX]; /* clients: their secret key */
    char curve_client_public[ZP_PATH_MAX]; /* clients: their public key (checked) */
    char curve_allow_dir[ZP_PATH_MAX];     /* server: directory of allowed clients' .pub files */
    bool insecure; /* allow a non-loopback bind without CURVE; default false */

    /* training = { ... } (read by zeps-worker; optional for servers) */
    char model[ZP_NAME_MAX];           /* "quadratic" | "softmax" | "mlp" | "ctr"; default mlp */
    char data_dir[ZP_PATH_MAX];        /* default /usr/share/datasets/fashion-mnist */
    int epochs;                        /* default 10 */
    int batch_size;                    /* per worker, default 64 */
    int hidden;                        /* mlp hidden units per layer, default 256 */
    int depth;                         /* mlp hidden layers, default 1, 1..8 */
    int iterations;                    /* quadratic: iterations per worker, default 1000 */
    int dim;                           /* quadratic: dimension, default 100 */
    double condition;                  /* quadratic: condition number, default 100 */
    char optimizer[ZP_NAME_MAX];       /* default "momentum" */
    double lr;                         /* default 0.05 */
    double momentum;                   /* default 0.9 */
    double beta1, beta2, eps;          /* adam, defaults 0.9 0.999 1e-8 */
    double weight_decay;               /* default 0 */
    uint64_t seed;                     /* default 1 */
    int eval_every;                    /* evaluate every N epochs (rank 0), default 1 */
    int max_train_examples;            /* 0 = all; caps the training set (for fast tests) */
    zp_delay_dist delay_dist;          /* "fixed" | "uniform" | "lognormal"; default fixed */
    double delay_ms;                   /* injected compute delay per iteration, default 0 */
    double delay_jitter_ms;            /* uniform: extra delay in [0, jitter), default 0 */
    double delay_sigma;                /* lognormal: stddev of log(delay), default 0.5 */
    int num_slow_ranks;                /* entries of slow_ranks */
    int slow_ranks[ZP_MAX_SLOW_RANKS]; /* these ranks' delays are multiplied by slow_factor */
    double slow_factor;                /* default 1, >= 1 */
    int eval_every_steps;   /* rank 0 evaluates its pulled parameters every N steps (curve); 0 = off
                             */
    double target_accuracy; /* rank 0 stops at the first curve point this accurate; 0 = off */
    double target_rel_distance;   /* or this close to x* (quadratic, relative); 0 = off */
    char result_dir[ZP_PATH_MAX]; /* where workers write result JSON ("" = none) */
    char push_codec[16];    /* none | fp16 | bf16 | int8 | sign | topk | randk; default none */
    double codec_fraction;  /* topk/randk: share of elements sent, default 0.01, (0, 1] */
    int codec_block;        /* int8: elements per scale, default 256 */
    bool error_feedback;    /* keep the compression residual per table, default true */
    double worker_momentum; /* heavy-ball momentum on the worker, before compression
                               (pushes m = mu m + g); default 0 = off, [0, 1) */
    int prefetch;           /* sparse models: steps whose rows are pulled ahead of the
                               one computed (zeps_pipe); default 0, 0..64 */
    int max_inflight;       /* sparse models: steps whose pushes may stay unanswered;
                               default 0, 0..64 */

    /* training.ctr = { ... } (model "ctr": sparse LR + FM over click logs) */
    char ctr_format[16];              /* "format": "criteo" (default) | "libsvm" */
    char ctr_train_file[ZP_PATH_MAX]; /* "train_file" (required for ctr) */
    char ctr_test_file[ZP_PATH_MAX];  /* "test_file" (required for ctr) */
    int ctr_emb_dim;                  /* "emb_dim": FM embedding size, default 8 */
    char ctr_sparse_optimizer[16]; /* "sparse_optimizer": adagrad (default) | sgd | adam | ftrl */
    double ctr_sparse_lr;          /* "sparse_lr": linear rows' step (ftrl: alpha), default 0.05 */
    double ctr_emb_lr;             /* "emb_lr": embedding rows' step, default 0.003 */
    double ctr_emb_init;           /* "emb_init": embeddings start N(0, s^2), default 0.01 */
    double ctr_l1, ctr_l2;         /* "l1" (ftrl), "l2": sparse regularisation, default 0 */
    int ctr_max_test_examples;     /* "max_test_examples": 0 = all */
    uint64_t ctr_hot_rows;         /* "hot_rows": ctr_rows per shard kept hot; 0 = all */
    bool ctr_tier;                 /* "tier": rows past hot_rows go to the cold tier (tier_dir) */
    char pull_codec[16];           /* none | fp16 | bf16 | int8 | sign | topk; default none */
    bool pull_views;               /* dense models read plain pulls where they were received
                                      (zeps_pull_view_start); default true */
} zp_config;

/* Fill *cfg with the defaults above (no servers, num_workers 0). */
void zp_config_keys_defaults(zp_config *cfg);

/* Read and validate the cluster file at `path` into *cfg. On error returns
 * ZEPS_ECONFIG (or ZEPS_EIO if the file cannot be read) and writes a message
 * naming the file, line and key into err (errlen bytes, always terminated);
 * *cfg is then unspecified. */
int zp_config_load(zp_config *cfg, const char *path, char *err, size_t errlen);

/* The same from a string (for tests and the embedded default); `name` stands
 * in for the file name in messages. */
int zp_config_parse(zp_config *cfg, const char *text, const char *name, char *err, size_t errlen);

/* Check cfg->consistency against the modes a program knows (`known`,
 * NULL-terminated: the server passes its policy registry's names). The
 * loader itself only checks that the name is a word of lowercase letters,
 * digits and '_', so that a mode is added in the server alone. Returns 0,
 * or ZEPS_ECONFIG with "<file>:<line>: 'cluster.consistency' = "x" is not
 * one of a, b, ..." in err (errlen bytes, always terminated). Any thread. */
int zp_config_check_mode(const zp_config *cfg, const char *const *known, char *err, size_t errlen);

/* The endpoint workers reach replica `replica` of shard `shard` at, and
 * the one it binds ("" = the same); both "" outside the cluster. */
const char *zp_config_endpoint(const zp_config *cfg, int shard, int replica);
const char *zp_config_bind(const zp_config *cfg, int shard, int replica);

/* The same for weighting functions and delay distributions. */
const char *zp_config_keys_weight_fn_name(zp_weight_fn f);
int zp_config_keys_weight_fn_from_name(const char *name);
const char *zp_config_keys_delay_dist_name(zp_delay_dist d);
int zp_config_keys_delay_dist_from_name(const char *name);
const char *zp_config_keys_inject_name(zp_inject_schedule k);

#endif
