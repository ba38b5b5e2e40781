/*
 * zkserver.c - a real ZooKeeper for tests; see zkserver.h.
 */
#include "zkserver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "scratch.h"
#include "spawn.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int zt_zk_ok(const zt_zk *z)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)z->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    /* `ruok` answers imok before the server serves requests; `srvr`
     * names its mode only once it does */
    char buf[1024];
    size_t got = 0;
    ssize_t n = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && write(fd, "srvr", 4) == 4)
        while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
            got += (size_t)n;
    close(fd);
    buf[got] = '\0';
    return strstr(buf, "Mode: ") != NULL;
}

static int launch(zt_zk *z)
{
    char port[16], log[320];
    snprintf(port, sizeof(port), "%d", z->port);
    snprintf(log, sizeof(log), "%s/zk.log", z->dir);
    char *argv[] = {"bash", ZT_ZK_SCRIPT, z->dir, port, NULL};
    zp_spawn_opts o = {.log = log, .log_fd = -1, .deathsig = SIGKILL, .flags = ZP_SPAWN_PATH};
    double t0 = now_s();
    z->pid = zp_spawn_start(argv, &o);
    if (z->pid <= 0)
        return -1;
    while (now_s() - t0 < 30) {
        if (zt_zk_ok(z)) {
            z->start_s = now_s() - t0;
            return 0;
        }
        int st;
        if (zp_spawn_wait(z->pid, 0.05, &st) == 1) { /* it died: see zk.log */
            fprintf(stderr, "ZooKeeper exited at start (%d): see %s\n", zp_spawn_exit_code(st),
                    log);
            z->pid = 0;
            return -2;
        }
    }
    zt_zk_stop(z, SIGKILL);
    return -1;
}

int zt_zk_start(zt_zk *z)
{
    memset(z, 0, sizeof(*z));
    if (zt_scratch_dir(z->dir, sizeof(z->dir), "zk") != 0)
        return -1;
    /* a server that died at start gets a new port: another test may have
     * bound the one picked between the pick and ZooKeeper's bind (its log
     * says "Address already in use") */
    int rc = -2;
    for (int tries = 0; tries < 3 && rc == -2; tries++) {
        if ((z->port = zt_free_port()) <= 0)
            return -1;
        snprintf(z->hosts, sizeof(z->hosts), "127.0.0.1:%d", z->port);
        rc = launch(z);
    }
    return rc == 0 ? 0 : -1;
}

void zt_zk_stop(zt_zk *z, int sig)
{
    if (z->pid > 0)
        zp_spawn_stop(z->pid, sig, 10.0, NULL);
    z->pid = 0;
}

int zt_zk_restart(zt_zk *z)
{
    zt_zk_stop(z, SIGKILL);
    return launch(z) == 0 ? 0 : -1;
}
