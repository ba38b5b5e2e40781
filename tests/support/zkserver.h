/*
 * zkserver.h - a real one-node ZooKeeper for the tests of the
 * coordination layer: started from tests/support/zk-server.sh in a
 * scratch folder on a free loopback port, ready once `srvr` names its
 * mode (it answers `ruok` before it serves requests),
 * stopped (SIGTERM, or SIGKILL for a crash) and started again on the same
 * port and data. The child dies with the test (PR_SET_PDEATHSIG).
 */
#ifndef ZT_ZKSERVER_H
#define ZT_ZKSERVER_H

#include <sys/types.h>

typedef struct zt_zk {
    char dir[256];
    char hosts[64]; /* "127.0.0.1:<port>" for the client */
    int port;
    pid_t pid;      /* 0 while stopped */
    double start_s; /* how long the last start took until `ruok` answered */
} zt_zk;

/* Start a server in a new scratch folder on a free port; waits until it
 * answers (30 s at most). Returns 0, or -1 (nothing left running). */
int zt_zk_start(zt_zk *z);

/* Stop it with `sig` (SIGTERM: a clean stop; SIGKILL: a crash) and wait. */
void zt_zk_stop(zt_zk *z, int sig);

/* Start it again on the same folder and port; waits as zt_zk_start. */
int zt_zk_restart(zt_zk *z);

/* Whether a ZooKeeper serves on the port now. */
int zt_zk_ok(const zt_zk *z);

#endif
