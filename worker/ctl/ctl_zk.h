/*
 * ctl_zk.h - a one-node ZooKeeper for the zepsctl commands that run
 * replicated shards on this machine (`zepsctl local --replicas`, `zepsctl
 * bench --replicas`): ctl_zk.c.
 */
#ifndef ZP_CTL_ZK_H
#define ZP_CTL_ZK_H

#include <signal.h>
#include <sys/types.h>

typedef struct zp_ctl_zk_opts {
    const char *dir;                   /* its folder: zoo.cfg, data/, zookeeper.log */
    int port;                          /* the loopback port it serves on */
    const char *who;                   /* what the messages start with ("zepsctl local") */
    const char *why;                   /* the option that asked for it ("--replicas") */
    const sigset_t *sigmask;           /* the child's signal mask (NULL: the caller's) */
    const volatile sig_atomic_t *stop; /* when set, stop waiting (NULL: never) */
} zp_ctl_zk_opts;

/* Start a one-node ZooKeeper in o->dir (made if missing) serving on
 * 127.0.0.1:o->port, from Debian's zookeeper package, and wait up to 60 s
 * until it serves (`srvr` names its mode). Returns the seconds it took, or
 * -1 after saying why on stderr. *pid is the child (in its own process
 * group, SIGTERM when this process dies) whenever one was started, also on
 * failure: the caller stops and reaps it; 0 if none was. Call from the main
 * thread. */
double zp_ctl_zk_start(const zp_ctl_zk_opts *o, pid_t *pid);

#endif
