/*
 * ctl_zk.c - see ctl_zk.h. A one-node ZooKeeper in a folder of the run
 * (zoo.cfg, data, zookeeper.log), started the way tests/support/zk-server.sh
 * starts the tests' (Debian's zookeeper package: java with
 * /usr/share/java/zookeeper.jar and slf4j-simple), ready once `srvr` names
 * its mode. One helper for every command that needs one, so that they start
 * it alike.
 */
#define _GNU_SOURCE
#include "ctl_zk.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ctl_local.h"
#include "now.h"
#include "spawn.h"

#define ZK_JAR    "/usr/share/java/zookeeper.jar"
#define SLF4J_JAR "/usr/share/java/slf4j-simple.jar"
#define ZK_WAIT_S 60.0

static void nap_ms(int ms)
{
    struct timespec t = {0, (long)ms * 1000000L};
    nanosleep(&t, NULL);
}

/* Whether a ZooKeeper serves on 127.0.0.1:port: `srvr` names its mode
 * (it answers `ruok` before it serves requests). Each read and write gives
 * up after a second: a JVM still starting may accept a connection and not
 * answer it (seen: a read that never returned). */
static bool zk_serving(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 1};
    char buf[1024];
    size_t got = 0;
    if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0 &&
        connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && write(fd, "srvr", 4) == 4) {
        ssize_t n;
        while (got + 1 < sizeof(buf) && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
            got += (size_t)n;
    }
    if (fd >= 0)
        close(fd);
    buf[got] = '\0';
    return strstr(buf, "Mode: ") != NULL;
}

/* <dir>/zoo.cfg: the data beside it, loopback only, no admin server.
 * tickTime 500 ms: sessions of 1 to 10 s may be asked for. */
static bool write_zoo_cfg(const zp_ctl_zk_opts *o, char *cfg, size_t len)
{
    snprintf(cfg, len, "%s/zoo.cfg", o->dir);
    FILE *f = fopen(cfg, "w");
    if (!f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", o->who, cfg, strerror(errno));
        return false;
    }
    fprintf(f,
            "# Written by %s %s: the run's coordination service.\n"
            "tickTime=500\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,stat\nmaxClientCnxns=0\n",
            o->who, o->why, o->dir, o->port);
    return fclose(f) == 0;
}

/* The folder, its data folder and zoo.cfg; false if any could not be had
 * (said on stderr). */
static bool prepare(const zp_ctl_zk_opts *o, char *cfg, size_t len)
{
    char data[PATH_MAX];
    snprintf(data, sizeof(data), "%s/data", o->dir);
    if ((mkdir(o->dir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(data, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "%s: cannot make %s: %s\n", o->who, data, strerror(errno));
        return false;
    }
    return write_zoo_cfg(o, cfg, len);
}

double zp_ctl_zk_start(const zp_ctl_zk_opts *o, pid_t *pid)
{
    char java[PATH_MAX], cfg[PATH_MAX], log[PATH_MAX], cp[64] = ZK_JAR ":" SLF4J_JAR;
    *pid = 0;
    if (access(ZK_JAR, R_OK) != 0 || access(SLF4J_JAR, R_OK) != 0) {
        fprintf(stderr, "%s: %s needs ZooKeeper (%s, %s): bash deploy/install-deps.sh zk\n", o->who,
                o->why, ZK_JAR, SLF4J_JAR);
        return -1;
    }
    if (!zp_ctl_local_conf_find_bin("java", java, sizeof(java)) || !prepare(o, cfg, sizeof(cfg)))
        return -1;
    snprintf(log, sizeof(log), "%s/zookeeper.log", o->dir);
    /* a small heap, the serial collector, C1 only: a quick start on a small
     * machine, for a server of a few sessions */
    char *argv[] = {java,
                    "-Xmx96m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-cp",
                    cp,
                    "org.apache.zookeeper.server.ZooKeeperServerMain",
                    cfg,
                    NULL};
    zp_spawn_opts so = {.log = log,
                        .log_fd = -1,
                        .flags = ZP_SPAWN_GROUP | ZP_SPAWN_NULLIN,
                        .deathsig = SIGTERM,
                        .sigmask = o->sigmask};
    pid_t child = zp_spawn_start(argv, &so);
    if (child < 0) {
        fprintf(stderr, "%s: cannot start ZooKeeper: %s\n", o->who, strerror(errno));
        return -1;
    }
    *pid = child;
    double t0 = zp_now_s();
    bool up;
    while (!(up = zk_serving(o->port)) && zp_now_s() - t0 < ZK_WAIT_S && !(o->stop && *o->stop))
        nap_ms(100);
    if (!up && o->stop && *o->stop) {
        fprintf(stderr, "%s: stopped waiting for ZooKeeper\n", o->who);
        return -1;
    }
    if (!up) {
        fprintf(stderr, "%s: ZooKeeper did not serve on 127.0.0.1:%d within %.0f s; see %s\n",
                o->who, o->port, ZK_WAIT_S, log);
        return -1;
    }
    return zp_now_s() - t0;
}
