/*
 * main.c - zeps-server: run one shard of a cluster.
 *
 *   zeps-server --config cluster.conf --shard 1 [--replica 0]
 *
 * The shard index comes from --shard (a number, or "auto": the engine's
 * variables, then the StatefulSet ordinal of the host name), else from
 * ZEPS_SHARD, JOB_COMPLETION_INDEX or SLURM_PROCID (common/identity.h has
 * the order). The cluster file is read and checked before
 * any socket is opened. Exit status (common/exitcode.h, docs/operations.md):
 * 0 stopped cleanly, 1 failed while serving (the final snapshot too), 2 a
 * start-up failure the operator must fix (usage, cluster file, keys,
 * allow-list, address, snapshot or trace folder, snapshot to restore), 4
 * no session with the coordination service at start-up (replicas >= 2).
 *
 *   zeps-server --bench-apply [REPS]
 *
 * times the dense optimizer kernels this binary runs against saxpy, on 4M
 * and 8M floats (optim/kbench.c), prints the table and exits 0; `zepsctl
 * bench --apply` runs it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "daemon.h"
#include "exitcode.h"
#include "kbench.h"
#include "log.h"
#include "mathenv.h"
#include "registry.h"
#include "server.h"

int main(int argc, char **argv)
{
    zp_mathenv_setup(argv);
    if (argc >= 2 && strcmp(argv[1], "--bench-apply") == 0) {
        static const size_t sizes[] = {(size_t)4 << 20, (size_t)8 << 20};
        zp_alloc_tune();
        return zp_kbench_run(stdout, sizes, 2, argc >= 3 ? atoi(argv[2]) : 11);
    }
    zp_daemon_args args;
    int rc = zp_daemon_parse(ZP_DAEMON_SERVER, argc, argv, &args);
    if (rc >= 0)
        return rc;
    static zp_config cfg; /* large: kept off the stack */
    rc = zp_daemon_load(ZP_DAEMON_SERVER, &args, &cfg);
    if (rc >= 0)
        return rc;
    const char *modes[16];
    char err[1024];
    zp_registry_names(modes, sizeof(modes) / sizeof(modes[0]));
    if (zp_config_check_mode(&cfg, modes, err, sizeof(err)) != 0) {
        zp_error("%s", err); /* a bad cluster file, as zp_daemon_load reports it */
        return ZP_EXIT_SETUP;
    }
    zp_alloc_tune();
    signal(SIGPIPE, SIG_IGN);

    zp_server *srv;
    rc = zp_server_new(&srv, &cfg, args.index, args.replica, err, sizeof(err));
    if (rc != 0) {
        zp_error("%s", err);
        return zp_exitcode_startup(rc);
    }
    rc = zp_server_run(srv);
    zp_server_destroy(&srv);
    zp_info("stopped");
    return rc;
}
