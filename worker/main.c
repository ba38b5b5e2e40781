/*
 * main.c - zeps-worker: one training process of a cluster.
 *
 *   zeps-worker --config cluster.conf --rank 3
 *
 * The rank comes from --rank, else ZEPS_RANK, else the engine's variables
 * (JOB_COMPLETION_INDEX on Kubernetes, SLURM_PROCID on Slurm). Exits 0 when
 * training finished, 1 when it failed, 2 on bad usage or configuration, 3
 * when training diverged (the result JSON is still written).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "mathenv.h"
#include "train.h"
#include "util.h"
#include "zeps.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: zeps-worker --config FILE [--rank N] [--log-level LEVEL]\n"
               "  --config, -c FILE   the cluster file (see docs/configuration.md)\n"
               "  --rank, -r N        this worker's rank (default: $ZEPS_RANK,\n"
               "                      $JOB_COMPLETION_INDEX, then $SLURM_PROCID)\n"
               "  --log-level LEVEL   debug | info | warn | error (overrides the file)\n"
               "  --version           print the version and exit\n");
}

static const char *rank_from_env(void)
{
    static const char *const vars[] = {"ZEPS_RANK", "JOB_COMPLETION_INDEX", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            return getenv(vars[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"rank", required_argument, NULL, 'r'},
        {"log-level", required_argument, NULL, 'l'}, {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *path = NULL, *rank_text = NULL, *level = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "c:r:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            path = optarg;
            break;
        case 'r':
            rank_text = optarg;
            break;
        case 'l':
            level = optarg;
            break;
        case 'V':
            printf("zeps-worker %s\n", ZEPS_VERSION_STRING);
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
    if (!rank_text)
        rank_text = rank_from_env();
    char *end = NULL;
    long rank = rank_text ? strtol(rank_text, &end, 10) : -1;
    if (!rank_text || !*rank_text || *end || rank < 0 || rank >= ZP_MAX_WORKERS) {
        fprintf(stderr, "zeps-worker: no valid rank (--rank, $ZEPS_RANK, $JOB_COMPLETION_INDEX "
                        "or $SLURM_PROCID)\n");
        return 2;
    }
    zp_config *cfg = zp_xmalloc(sizeof(*cfg));
    char err[1024];
    if (zp_config_load(cfg, path, err, sizeof(err)) != 0) {
        fprintf(stderr, "zeps-worker: %s\n", err);
        free(cfg);
        return 2;
    }
    if (rank >= cfg->num_workers) {
        fprintf(stderr, "zeps-worker: rank %ld is outside the cluster of %d workers in %s\n", rank,
                cfg->num_workers, path);
        free(cfg);
        return 2;
    }
    int lv = zp_log_level_from_name(level ? level : cfg->log_level);
    char who[32];
    snprintf(who, sizeof(who), "worker[%ld]", rank);
    zp_log_init(who, lv < 0 ? ZP_LOG_INFO : (zp_log_level)lv);
    zp_malloc_tune();
    signal(SIGPIPE, SIG_IGN);

    zp_train_result res;
    int rc = zp_train_run(cfg, (int)rank, &res);
    /* A diverged run still leaves its result (curve, step), for studies. */
    if ((rc == 0 || rc == ZEPS_EDIVERGED) && cfg->result_dir[0]) {
        char out[ZP_PATH_MAX + 64];
        snprintf(out, sizeof(out), "%s/worker-%ld.json", cfg->result_dir, rank);
        int wrc = zp_train_write_json(cfg, &res, out);
        if (rc == 0)
            rc = wrc;
    }
    if (rc == 0)
        zp_info("done: %lld iterations in %.1f s (%.1f%% communicating)",
                (long long)res.iterations, res.wall_s,
                100.0 * res.comm_s / (res.comm_s + res.compute_s + 1e-12));
    zp_train_result_fini(&res);
    free(cfg);
    return rc == 0 ? 0 : rc == ZEPS_EDIVERGED ? 3 : 1;
}
