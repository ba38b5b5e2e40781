/*
 * exitcode.h - the one exit-status table of zeps-server, zeps-worker and
 * zepsctl (docs/operations.md, "Exit status"). Each binary ends through
 * these numbers, so the systemd units' RestartPreventExitStatus and the
 * table in the docs cannot say something the programs do not do.
 */
#ifndef ZP_EXITCODE_H
#define ZP_EXITCODE_H

enum {
    ZP_EXIT_OK = 0,            /* done (a shard stopped by SIGTERM/SIGINT too) */
    ZP_EXIT_FAILED = 1,        /* failed while running; a restart may help */
    ZP_EXIT_SETUP = 2,         /* bad usage, configuration or start-up condition the
                                  operator must fix; a restart repeats it */
    ZP_EXIT_DIVERGED = 3,      /* zeps-worker: training diverged */
    ZP_EXIT_NOCOORD = 4,       /* zeps-server with replicas >= 2: no session with the
                                  coordination service within connect_timeout_ms of
                                  start-up; a restart helps once it answers */
    ZP_EXIT_INTERRUPTED = 130, /* zeps-worker, zepsctl local: stopped by SIGINT (128 + 2) */
    ZP_EXIT_STOPPED = 143,     /* zeps-worker, zepsctl local: stopped by SIGTERM (128 + 15) */
};

/* The exit status for a start-up failure with zeps_err `err`: ZP_EXIT_SETUP,
 * except what the operator cannot fix by editing files or keys (out of
 * memory, internal errors, a shard that did not answer in time):
 * ZP_EXIT_FAILED. Any thread. */
int zp_exitcode_startup(int err);

#endif
