/*
 * args.c - see args.h. getopt_long does the parsing.
 */
#include "args.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "wire.h"

typedef struct daemon_desc {
    const char *prog;
    const char *flag;       /* "shard" */
    int short_flag;         /* 's' */
    const char *what;       /* "shard index" */
    const char *env[4];     /* tried in order when the flag is absent */
    const char *env_text;   /* for messages */
    int max;
} daemon_desc;

static const daemon_desc descs[] = {
    [ZP_DAEMON_SERVER] = {"zeps-server", "shard", 's', "shard index",
                          {"ZEPS_SHARD", "SLURM_PROCID", NULL},
                          "$ZEPS_SHARD, then $SLURM_PROCID", ZP_MAX_SHARDS},
    [ZP_DAEMON_WORKER] = {"zeps-worker", "rank", 'r', "rank",
                          {"ZEPS_RANK", "JOB_COMPLETION_INDEX", "SLURM_PROCID", NULL},
                          "$ZEPS_RANK, $JOB_COMPLETION_INDEX, then $SLURM_PROCID", ZP_MAX_WORKERS},
};

static void usage(const daemon_desc *d, FILE *f)
{
    char flag[32];
    snprintf(flag, sizeof(flag), "--%s, -%c N", d->flag, d->short_flag);
    fprintf(f,
            "usage: %s --config FILE [--%s N] [--log-level LEVEL]\n"
            "  --config, -c FILE   the cluster file (see docs/configuration.md)\n"
            "  %-18s  this process's %s\n"
            "                      (default: %s)\n"
            "  --log-level LEVEL   debug | info | warn | error (overrides the file)\n"
            "  --version           print the version and exit\n",
            d->prog, d->flag, flag, d->what, d->env_text);
}

int zp_daemon_parse(zp_daemon_kind kind, int argc, char **argv, zp_daemon_args *out)
{
    const daemon_desc *d = &descs[kind];
    const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},    {d->flag, required_argument, NULL, 'i'},
        {"log-level", required_argument, NULL, 'l'}, {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0},
    };
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
        else if (c == 'V')
            return printf("%s %s (protocol %d)\n", d->prog, ZP_VERSION, ZP_PROTOCOL_VERSION), 0;
        else if (c == 'h')
            return usage(d, stdout), 0;
        else
            return usage(d, stderr), 2;
    }
    if (!a.config || optind < argc)
        return usage(d, stderr), 2;
    for (int i = 0; !index_text && d->env[i]; i++)
        index_text = getenv(d->env[i]);
    char *end = NULL;
    long v = index_text ? strtol(index_text, &end, 10) : -1;
    if (!index_text || !*index_text || *end || v < 0 || v >= d->max) {
        fprintf(stderr, "%s: no valid %s (--%s, %s)%s%s\n", d->prog, d->what, d->flag,
                d->env_text, index_text ? ": got " : "", index_text ? index_text : "");
        return 2;
    }
    a.index = (int)v;
    *out = a;
    return -1;
}

int zp_daemon_load(zp_daemon_kind kind, const zp_daemon_args *a, zp_config *cfg)
{
    const daemon_desc *d = &descs[kind];
    char err[1024];
    if (zp_config_load(cfg, a->config, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", d->prog, err);
        return 2;
    }
    int limit = kind == ZP_DAEMON_SERVER ? cfg->num_shards : cfg->num_workers;
    if (a->index >= limit) {
        fprintf(stderr, "%s: %s %d is outside the cluster of %d %s in %s\n", d->prog, d->what,
                a->index, limit, kind == ZP_DAEMON_SERVER ? "shards" : "workers", a->config);
        return 2;
    }
    int lv = zp_log_level_from_name(a->log_level ? a->log_level : cfg->log_level);
    if (lv < 0) {
        fprintf(stderr, "%s: unknown log level '%s'\n", d->prog, a->log_level);
        return 2;
    }
    char who[32];
    snprintf(who, sizeof(who), "%s[%d]", kind == ZP_DAEMON_SERVER ? "server" : "worker",
             a->index);
    zp_log_init(who, (zp_log_level)lv);
    return -1;
}
