/*
 * main.c - zeps-worker: one training process of a cluster.
 *
 *   zeps-worker --config cluster.conf --rank 3
 *
 * The rank comes from --rank, else ZEPS_RANK, else the engine's variables
 * (JOB_COMPLETION_INDEX on Kubernetes, SLURM_PROCID on Slurm; the order is
 * in common/identity.h). Exit status (common/exitcode.h, docs/operations.md):
 * 0 when training finished, 1 when it failed while training (or no shard
 * answered in time), 2 on a start-up failure the operator must fix (usage,
 * cluster file, keys or a key the shards refuse, model or data, result_dir),
 * 3 when training diverged, 143 when stopped by SIGTERM and 130 by SIGINT.
 * Stopped, it gives up what it waits for (a parked pull, a barrier, the
 * start-up HELLO), says BYE to every shard (bounded, about a second:
 * zeps_client_destroy) and writes the result JSON so far.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "config.h"
#include "exitcode.h"
#include "folder.h"
#include "log.h"
#include "mathenv.h"
#include "train.h"
#include "alloc.h"
#include "zeps.h"

/* Which signal stopped the process (0: none), for the exit status; a
 * signal handler cannot be given a context. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    if (!zp_train_talking()) {
        /* loading data or building the model: no shard has heard of us,
         * nothing is written yet; a stop must not wait for that to end */
        static const char msg[] = "zeps-worker: stopped by a signal before contacting any shard\n";
        ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)n;
        _exit(sig == SIGINT ? ZP_EXIT_INTERRUPTED : ZP_EXIT_STOPPED);
    }
    if (!stop_signal)
        stop_signal = sig;
    zp_train_request_stop();
}

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    zp_daemon_args args;
    int rc = zp_daemon_parse(ZP_DAEMON_WORKER, argc, argv, &args);
    if (rc >= 0)
        return rc;
    zp_config *cfg = zp_alloc(sizeof(*cfg));
    rc = zp_daemon_load(ZP_DAEMON_WORKER, &args, cfg);
    if (rc >= 0) {
        free(cfg);
        return rc;
    }
    long rank = args.index;
    char err[1024];
    if (cfg->result_dir[0] && zp_folder_ready("result_dir", cfg->result_dir, err, sizeof(err))) {
        zp_error("%s", err);
        free(cfg);
        return ZP_EXIT_SETUP;
    }
    zp_alloc_tune();
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    zp_train_result res;
    rc = zp_train_run(cfg, (int)rank, &res);
    /* A diverged run still leaves its result (curve, step), for studies. */
    if ((rc == 0 || rc == ZEPS_EDIVERGED || rc == ZEPS_ECLOSED) && cfg->result_dir[0]) {
        char out[ZP_PATH_MAX + 64];
        snprintf(out, sizeof(out), "%s/worker-%ld.json", cfg->result_dir, rank);
        int wrc = zp_result_write_json(cfg, &res, out);
        if (rc == 0)
            rc = wrc;
    }
    if (rc == 0)
        zp_info("done: %lld iterations in %.1f s (%.1f%% communicating)", (long long)res.iterations,
                res.wall_s, 100.0 * res.comm_s / (res.comm_s + res.compute_s + 1e-12));
    zp_result_fini(&res);
    free(cfg);
    if (rc == 0)
        return ZP_EXIT_OK;
    if (rc == ZEPS_EDIVERGED)
        return ZP_EXIT_DIVERGED;
    if (rc == ZEPS_ECLOSED)
        return stop_signal == SIGINT ? ZP_EXIT_INTERRUPTED : ZP_EXIT_STOPPED;
    return res.started ? ZP_EXIT_FAILED : zp_exitcode_startup(rc);
}
