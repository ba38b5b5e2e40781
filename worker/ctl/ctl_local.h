/*
 * ctl_local.h - what the parts of `zepsctl local` share: the run, its
 * children and its options. ctl_local.c runs the cluster;
 * ctl_local_conf.c writes its cluster file; ctl_local_report.c reads the workers' results and
 * summarises them.
 */
#ifndef ZP_CTL_LOCAL_H
#define ZP_CTL_LOCAL_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "config.h"
#include "ctl_echo.h"

/* The overrides of the embedded default: option, where its value goes in the
 * cluster file, type ('i' integer, 'f' float, 's' string, 'n' the number of
 * servers, which become that many free ports) and range (ctl_local_conf.c). */
typedef struct zp_local_override {
    const char *opt, *group, *key;
    char type;
    double lo, hi;
} zp_local_override;
#define N_OVERRIDES 10
extern const zp_local_override zp_ctl_local_conf_overrides[N_OVERRIDES];

typedef struct local_opts {
    const char *config;          /* --config FILE; NULL: the embedded default */
    const char *dir;             /* --dir DIR; NULL: a new $TMPDIR/zeps-local-XXXXXX */
    const char *json;            /* --json PATH; NULL: <dir>/summary.json */
    double timeout_s;            /* --timeout; 0: none */
    bool quiet;                  /* -q: the workers' output only goes to their logs */
    const char *exec;            /* --exec CMD: run `sh -c CMD` as each worker; NULL: zeps-worker */
    bool metrics;                /* --metrics: every process serves /metrics on a free port */
    const char *ov[N_OVERRIDES]; /* override values as given; NULL: not given */
    int noverrides;
    bool print_config; /* --print-config: print the default cluster file, run nothing */
    int replicas;      /* --replicas R: R processes per shard and a ZooKeeper; 0: not given */
    int zk_port;       /* with replicas >= 2: the port ZooKeeper serves on (ctl_local_zk.c) */
} local_opts;

typedef struct kid {
    const char *role; /* "server" | "worker" */
    int index;        /* shard or rank */
    int replica;      /* servers of a replicated shard: the replica (-1: replicas = 1) */
    pid_t pid;        /* 0 before it is started */
    bool running;     /* started and not reaped yet */
    bool judged;      /* its exit was looked at by check_exits */
    bool killed;      /* stop_kids had to SIGKILL it */
    bool failed_over; /* a replica that ended while its shard carried on */
    int status;       /* wait status once reaped */
    char log[PATH_MAX];
    int metrics_port; /* --metrics: the port given to it; 0 = none */
} kid;

typedef struct local_run {
    local_opts o;
    zp_config *cfg;        /* the validated cluster file */
    char dir[ZP_PATH_MAX]; /* absolute; it becomes training.result_dir */
    char conf[PATH_MAX], json[PATH_MAX];
    char server_bin[PATH_MAX], worker_bin[PATH_MAX];
    /* --exec: the environment of user workers (ctl_local_conf.c) */
    char env_config[PATH_MAX + 16], env_result[ZP_PATH_MAX + 32], env_python[2 * PATH_MAX + 16];
    kid *kids; /* servers [0, nservers), then workers by rank */
    int nkids, nservers;
    int sigfd;
    sigset_t oldmask;
    zp_echo echo; /* the workers' output to their logs and the terminal */
    int signo;    /* first SIGINT/SIGTERM received; 0 if none */
    int nsignals;
    int failed; /* index of the kid whose exit failed the run; -1 if none */
    double t0;  /* when the first child was started */
    /* --replicas: the run's ZooKeeper (ctl_local_zk.c) */
    int zk_port;
    pid_t zk_pid; /* 0: none started */
    bool zk_running;
} local_run;

typedef enum run_end { END_DONE, END_FAILED, END_SIGNAL, END_TIMEOUT } run_end;

/* Find program `name` beside zepsctl, else on PATH: true and its path. */
bool zp_ctl_local_conf_find_bin(const char *name, char *out, size_t len);

/* Make r->dir (--dir, or a new $TMPDIR/zeps-local-XXXXXX). */
bool zp_ctl_local_conf_make_run_dir(local_run *r);

/* --metrics: give every kid a free loopback port, write them as a Prometheus
 * file_sd list to <dir>/prometheus-targets.json and print them. False if no
 * port or the file could not be had (reported). */
bool zp_ctl_local_conf_metrics(local_run *r);

/* --print-config: print the embedded default with free loopback ports, the
 * overrides of `o` and training.result_dir = "results" to stdout. Returns
 * the exit status. */
int zp_ctl_local_conf_print(const local_opts *o);

/* Load and validate the cluster file at path into r->cfg. */
bool zp_ctl_local_conf_load(local_run *r, const char *path);

/* Write r->conf from the default or --config, with result_dir = r->dir,
 * and load it. Returns -1 on success, else zepsctl's exit status. */
int zp_ctl_local_conf_make(local_run *r);

/* --exec: fill r's env_* strings: the cluster file, the run directory and,
 * when the build tree holds the Python package beside zepsctl's folder
 * (bin/../python/zeps), PYTHONPATH with it first. */
void zp_ctl_local_conf_exec_env(local_run *r);

/* --replicas: start a one-node ZooKeeper in <dir>/zookeeper on r->zk_port
 * and wait until it serves (reported when it does not; r->zk_pid is then
 * still to be stopped). */
bool zp_ctl_local_zk_start(local_run *r);

/* --replicas: wait until replica 0 of every shard is primary (workers reach
 * replica 0) with at least in_sync replicas in its in-sync set, up to
 * timeout_s; false (reported) if not. */
bool zp_ctl_local_zk_wait_primaries(local_run *r, int in_sync, double timeout_s);

/* Read every worker's result file, print the summary and write the
 * summary JSON (r->json). t_end: when the workers were done; clean: every
 * process ended well; outcome: how the run ended, in words. Returns 0 if
 * every result was read, the run was clean and the JSON written, else 1. */
int zp_ctl_local_report(local_run *r, double t_end, bool clean, const char *outcome);

#endif
