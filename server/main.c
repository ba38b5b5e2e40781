/*
 * main.c - zeps-server: run one shard of a cluster.
 *
 *   zeps-server --config cluster.conf --shard 1
 *
 * The shard index comes from --shard, else from ZEPS_SHARD, else from the
 * engine's variables (SLURM_PROCID), so one command line serves every shard
 * of a deployment. The cluster file is read and checked before any socket
 * is opened; a bad one exits with status 2.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "mathenv.h"
#include "server.h"
#include "util.h"
#include "zeps_errors.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zeps-server --config FILE [--shard N] [--log-level LEVEL]\n"
               "  --config, -c FILE   the cluster file (see docs/configuration.md)\n"
               "  --shard, -s N       this server's shard index (default: $ZEPS_SHARD,\n"
               "                      then $SLURM_PROCID)\n"
               "  --log-level LEVEL   debug | info | warn | error (overrides the file)\n"
               "  --version           print the version and exit\n");
}

static int parse_index(const char *text, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (!*text || *end || v < 0 || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"shard", required_argument, NULL, 's'},
        {"log-level", required_argument, NULL, 'l'}, {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *path = NULL, *shard_text = NULL, *level = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "c:s:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            path = optarg;
            break;
        case 's':
            shard_text = optarg;
            break;
        case 'l':
            level = optarg;
            break;
        case 'V':
            printf("zeps-server %s (protocol %d)\n", ZP_VERSION, ZP_PROTOCOL_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!path || optind < argc) {
        usage(stderr);
        return 2;
    }
    if (!shard_text)
        shard_text = getenv("ZEPS_SHARD");
    if (!shard_text)
        shard_text = getenv("SLURM_PROCID");
    int shard;
    if (!shard_text || parse_index(shard_text, &shard) != 0) {
        fprintf(stderr, "zeps-server: no valid shard index (--shard, $ZEPS_SHARD or $SLURM_PROCID)%s%s\n",
                shard_text ? ": got " : "", shard_text ? shard_text : "");
        return 2;
    }

    zp_config cfg;
    char err[1024];
    if (zp_config_load(&cfg, path, err, sizeof(err)) != 0) {
        fprintf(stderr, "zeps-server: %s\n", err);
        return 2;
    }
    int lv = zp_log_level_from_name(level ? level : cfg.log_level);
    if (lv < 0) {
        fprintf(stderr, "zeps-server: unknown log level '%s'\n", level);
        return 2;
    }
    char who[32];
    snprintf(who, sizeof(who), "server[%d]", shard);
    zp_log_init(who, (zp_log_level)lv);
    zp_malloc_tune();
    signal(SIGPIPE, SIG_IGN);

    zp_server *srv;
    if (zp_server_new(&srv, &cfg, shard, err, sizeof(err)) != 0) {
        zp_error("%s", err);
        return 1;
    }
    int rc = zp_server_run(srv);
    zp_server_destroy(&srv);
    zp_info("stopped");
    return rc == 0 ? 0 : 1;
}
