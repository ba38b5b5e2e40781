/*
 * daemon.h - the command line and start-up shared by the zeps daemons.
 *
 *   zeps-server --config FILE [--shard N|auto] [--replica R] [--log-level L]
 *               [--metrics-listen H:P] [--join ENDPOINT [--bind ENDPOINT]]
 *   zeps-worker --config FILE [--rank N|auto]  [--log-level L] [--metrics-listen H:P]
 *
 * A daemon's index (shard or rank) comes from its flag, else from the
 * environment (common/identity.h has the order), so one command line serves
 * every instance under systemd templates, Kubernetes and Slurm. The
 * cluster file is loaded and checked, and the index checked against it,
 * before the daemon touches the network.
 */
#ifndef ZP_DAEMON_H
#define ZP_DAEMON_H

#include "config.h"

typedef enum zp_daemon_kind {
    ZP_DAEMON_SERVER = 0, /* index = shard, < num_shards */
    ZP_DAEMON_WORKER = 1, /* index = rank, < num_workers */
} zp_daemon_kind;

typedef struct zp_daemon_args {
    const char *config;
    const char *log_level;      /* NULL: the file's */
    const char *metrics_listen; /* --metrics-listen HOST:PORT, else $ZEPS_METRICS_LISTEN, else NULL:
                                   the file's */
    int index;
    char index_source[160];   /* where the index came from, for the log */
    const char *replica_text; /* zeps-server: --replica, NULL if absent */
    int replica;              /* zeps-server: the replica index, resolved by zp_daemon_load
                                 (0 with replicas = 1) */
    char replica_source[160];
    const char *join; /* zeps-server --join ENDPOINT, NULL if absent */
    const char *bind; /* zeps-server --bind ENDPOINT (with --join), NULL if absent */
} zp_daemon_args;

/* Parse argv for a daemon of `kind`. Returns -1 when the daemon should go
 * on (*out filled), else the exit status (0 after --help or --version, 2 on
 * bad usage, with a message). */
int zp_daemon_parse(zp_daemon_kind kind, int argc, char **argv, zp_daemon_args *out);

/* Load the cluster file into cfg, check the index against it and set up the
 * log as "server[i]" / "worker[r]" ("server[i.r]" for replica r of a
 * replicated shard; a->replica is set there: the replica index needs the
 * file's replicas). --metrics-listen (or $ZEPS_METRICS_LISTEN)
 * replaces the file's metrics_listen of this kind of daemon. Returns -1 to go on, else the exit
 * status (2) after printing what is wrong. */
int zp_daemon_load(zp_daemon_kind kind, zp_daemon_args *a, zp_config *cfg);

#endif
