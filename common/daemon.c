/*
 * daemon.c - see daemon.h. getopt_long does the parsing.
 */
#include "daemon.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exitcode.h"
#include "identity.h"
#include "log.h"
#include "wire.h"

typedef struct daemon_desc {
    const char *prog;
    const char *flag;    /* "shard" */
    int short_flag;      /* 's' */
    const char *what;    /* "shard index" */
    zp_identity_kind id; /* how the index is found without the flag */
    int max;
} daemon_desc;

static const daemon_desc descs[] = {
    [ZP_DAEMON_SERVER] = {"zeps-server", "shard", 's', "shard index", ZP_IDENTITY_SHARD,
                          ZP_MAX_SHARDS},
    [ZP_DAEMON_WORKER] = {"zeps-worker", "rank", 'r', "rank", ZP_IDENTITY_RANK, ZP_MAX_WORKERS},
};

static void usage(const daemon_desc *d, FILE *f)
{
    char flag[32];
    snprintf(flag, sizeof(flag), "--%s, -%c N", d->flag, d->short_flag);
    fprintf(f,
            "usage: %s --config FILE [--%s N|auto] [--log-level LEVEL]\n"
            "  --config, -c FILE   the cluster file (see docs/configuration.md)\n"
            "  %-18s  this process's %s:\n"
            "                      %s\n"
            "                      (docs/operations.md: identity)\n"
            "  --log-level LEVEL   debug | info | warn | error (overrides the file)\n"
            "  --metrics-listen HOST:PORT  serve /metrics, /healthz, /readyz there\n"
            "                      (overrides metrics_listen and $ZEPS_METRICS_LISTEN;\n"
            "                      \"\" turns it off; docs/operations.md)\n"
            "  --version           print the version and exit\n",
            d->prog, d->flag, flag, d->what, zp_identity_help(d->id));
    if (d->id == ZP_IDENTITY_SHARD)
        fprintf(f,
                "  --replica R         this process's replica of its shard (cluster.replicas):\n"
                "                      %s\n",
                zp_identity_help(ZP_IDENTITY_REPLICA));
    if (d->id == ZP_IDENTITY_SHARD)
        fprintf(f, "  --join ENDPOINT     a shard past the cluster file's servers (its index\n"
                   "                      the next one, N for N servers) that listens at\n"
                   "                      ENDPOINT and joins the running cluster by\n"
                   "                      'zepsctl shards add ENDPOINT' (docs/elastic.md);\n"
                   "                      %%d in ENDPOINT stands for the index, and a shard\n"
                   "                      of the file's servers then starts as one of them\n"
                   "  --bind ENDPOINT     with --join: where that shard binds, when ENDPOINT\n"
                   "                      names a host (e.g. tcp://*:5555)\n");
    if (d->id == ZP_IDENTITY_SHARD)
        fprintf(f, "  --bench-apply [REPS]  time the dense optimizer kernels against saxpy\n"
                   "                      on 4M and 8M floats (best of REPS, 11) and exit\n");
}

int zp_daemon_parse(zp_daemon_kind kind, int argc, char **argv, zp_daemon_args *out)
{
    const daemon_desc *d = &descs[kind];
    struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {d->flag, required_argument, NULL, 'i'},
        {"log-level", required_argument, NULL, 'l'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {"metrics-listen", required_argument, NULL, 'm'},
        {"replica", required_argument, NULL, 'R'}, /* zeps-server only */
        {"join", required_argument, NULL, 'J'},    /* zeps-server only */
        {"bind", required_argument, NULL, 'B'},    /* zeps-server only */
        {NULL, 0, NULL, 0},
    };
    if (kind != ZP_DAEMON_SERVER)
        opts[6] = (struct option){NULL, 0, NULL, 0};
    char shortopts[8] = {'c', ':', (char)d->short_flag, ':', 'h', 0};
    const char *index_text = NULL;
    zp_daemon_args a = {0};
    int c;
    while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        if (c == 'c')
            a.config = optarg;
        else if (c == 'i' || c == d->short_flag)
            index_text = optarg;
        else if (c == 'l')
            a.log_level = optarg;
        else if (c == 'm')
            a.metrics_listen = optarg;
        else if (c == 'R')
            a.replica_text = optarg;
        else if (c == 'J')
            a.join = optarg;
        else if (c == 'B')
            a.bind = optarg;
        else if (c == 'V')
            return printf("%s %s (protocol %d)\n", d->prog, ZP_VERSION, ZP_PROTOCOL_VERSION), 0;
        else if (c == 'h')
            return usage(d, stdout), 0;
        else
            return usage(d, stderr), ZP_EXIT_SETUP;
    }
    if (!a.metrics_listen)
        a.metrics_listen = getenv("ZEPS_METRICS_LISTEN");
    if (!a.config || optind < argc)
        return usage(d, stderr), ZP_EXIT_SETUP;
    zp_identity id;
    char err[512];
    if (zp_identity_resolve(d->id, index_text, NULL, d->max, &id, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", d->prog, err);
        return ZP_EXIT_SETUP;
    }
    a.index = id.index;
    snprintf(a.index_source, sizeof(a.index_source), "%s", id.source);
    *out = a;
    return -1;
}

/* The replica index of a server: 0 with replicas = 1 unless another is
 * given, else from --replica or $ZEPS_REPLICA. -1 to go on, else 2. */
static int load_replica(const daemon_desc *d, zp_daemon_args *a, const zp_config *cfg)
{
    char err[512];
    zp_identity id;
    a->replica = 0;
    snprintf(a->replica_source, sizeof(a->replica_source), "the default, replicas = 1");
    if (cfg->replicas == 1 && !a->replica_text && !getenv("ZEPS_REPLICA"))
        return -1;
    if (zp_identity_resolve(ZP_IDENTITY_REPLICA, a->replica_text, NULL, ZP_MAX_REPLICAS, &id, err,
                            sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s (%s: replicas = %d)\n", d->prog, err, a->config, cfg->replicas);
        return ZP_EXIT_SETUP;
    }
    if (id.index >= cfg->replicas) {
        fprintf(stderr, "%s: replica index %d is outside the %d replica(s) of each shard in %s\n",
                d->prog, id.index, cfg->replicas, a->config);
        return ZP_EXIT_SETUP;
    }
    a->replica = id.index;
    snprintf(a->replica_source, sizeof(a->replica_source), "%s", id.source);
    return -1;
}

/* --join's endpoint for a's shard into out (len bytes), "" for none: as
 * given, or with the index put for "%d" in it (one command line for every
 * pod of a StatefulSet: a shard of the file's `servers` then starts as one
 * of them, one past them joins). 0, or -1 if it does not fit. */
static int join_endpoint(const zp_daemon_args *a, int servers, char *out, size_t len)
{
    const char *p = a->join ? strstr(a->join, "%d") : NULL;
    int n;
    if (!a->join || (p && a->index < servers))
        n = snprintf(out, len, "%s", "");
    else if (!p)
        n = snprintf(out, len, "%s", a->join);
    else
        n = snprintf(out, len, "%.*s%d%s", (int)(p - a->join), a->join, a->index, p + 2);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

int zp_daemon_load(zp_daemon_kind kind, zp_daemon_args *a, zp_config *cfg)
{
    const daemon_desc *d = &descs[kind];
    char err[1024];
    if (zp_config_load(cfg, a->config, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", d->prog, err);
        return ZP_EXIT_SETUP;
    }
    if (a->metrics_listen) {
        char *dst = kind == ZP_DAEMON_SERVER ? cfg->metrics_listen : cfg->worker_metrics_listen;
        if (strlen(a->metrics_listen) >= ZP_ENDPOINT_MAX) {
            fprintf(stderr, "%s: --metrics-listen '%s' is too long\n", d->prog, a->metrics_listen);
            return ZP_EXIT_SETUP;
        }
        snprintf(dst, ZP_ENDPOINT_MAX, "%s", a->metrics_listen);
    }
    int limit = kind == ZP_DAEMON_SERVER ? cfg->num_shards : cfg->num_workers;
    int bad = join_endpoint(a, limit, cfg->join, sizeof(cfg->join));
    if (a->bind && (!a->join || strlen(a->bind) >= ZP_ENDPOINT_MAX)) {
        fprintf(
            stderr,
            "%s: --bind %s goes with --join (where a joining shard binds), in at most %d bytes\n",
            d->prog, a->bind, ZP_ENDPOINT_MAX - 1);
        return ZP_EXIT_SETUP;
    }
    if (cfg->join[0] && a->bind)
        snprintf(cfg->join_bind, sizeof(cfg->join_bind), "%s", a->bind);
    if (bad || (cfg->join[0] && a->index < limit)) {
        fprintf(stderr,
                "%s: --join %s: a joining shard takes an index past the %d servers of %s "
                "(--shard %d or more) and an endpoint of at most %d bytes\n",
                d->prog, a->join, limit, a->config, limit, ZP_ENDPOINT_MAX - 1);
        return ZP_EXIT_SETUP;
    }
    if (cfg->join[0])
        limit = ZP_MAX_SHARDS;
    if (a->index >= limit) {
        fprintf(stderr, "%s: %s %d is outside the cluster of %d %s in %s\n", d->prog, d->what,
                a->index, limit, kind == ZP_DAEMON_SERVER ? "shards" : "workers", a->config);
        return ZP_EXIT_SETUP;
    }
    if (kind == ZP_DAEMON_SERVER && load_replica(d, a, cfg) >= 0)
        return ZP_EXIT_SETUP;
    int lv = zp_log_level_from_name(a->log_level ? a->log_level : cfg->log_level);
    if (lv < 0) {
        fprintf(stderr, "%s: unknown log level '%s'\n", d->prog, a->log_level);
        return ZP_EXIT_SETUP;
    }
    char who[32];
    if (kind == ZP_DAEMON_SERVER && cfg->replicas > 1)
        snprintf(who, sizeof(who), "server[%d.%d]", a->index, a->replica);
    else
        snprintf(who, sizeof(who), "%s[%d]", kind == ZP_DAEMON_SERVER ? "server" : "worker",
                 a->index);
    zp_log_init(who, (zp_log_level)lv);
    if (cfg->join[0])
        zp_info("%s %d, joining the cluster of %d at %s (from %s)", d->what, a->index,
                cfg->num_shards, cfg->join, a->index_source);
    else
        zp_info("%s %d of %d (from %s)", d->what, a->index, limit, a->index_source);
    if (kind == ZP_DAEMON_SERVER && cfg->replicas > 1)
        zp_info("replica %d of %d (from %s)", a->replica, cfg->replicas, a->replica_source);
    return -1;
}
