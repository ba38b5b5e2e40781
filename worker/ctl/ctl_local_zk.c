/*
 * ctl_local_zk.c - `zepsctl local --replicas R`: the replicas' side of a
 * local run. A one-node ZooKeeper in the run directory (<dir>/zookeeper:
 * zoo.cfg, data, zookeeper.log), started the way tests/support/zk-server.sh
 * starts the tests' (Debian's zookeeper package: java with
 * /usr/share/java/zookeeper.jar and slf4j-simple), ready once `srvr` names
 * its mode; and the wait for every shard's first replica to be elected
 * primary, so that workers, which reach replica 0 of each shard, find a
 * primary there (libzeps does not follow redirects yet).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "ctl_local.h"
#include "ctl_probe.h"
#include "curve.h"
#include "now.h"
#include "spawn.h"
#include "zeps.pb-c.h"

#define ZK_JAR    "/usr/share/java/zookeeper.jar"
#define SLF4J_JAR "/usr/share/java/slf4j-simple.jar"
#define ZK_WAIT_S 60.0

static void nap_ms(int ms)
{
    struct timespec t = {0, (long)ms * 1000000L};
    nanosleep(&t, NULL);
}

/* Whether a ZooKeeper serves on 127.0.0.1:port: `srvr` names its mode
 * (it answers `ruok` before it serves requests). */
static bool zk_serving(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char buf[1024];
    size_t got = 0;
    /* a server still starting may take the connection and never answer:
     * give up on this try after a second (found hung for minutes) */
    struct timeval tv = {.tv_sec = 1};
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        write(fd, "srvr", 4) == 4) {
        ssize_t n;
        while (got + 1 < sizeof(buf) && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
            got += (size_t)n;
    }
    if (fd >= 0)
        close(fd);
    buf[got] = '\0';
    return strstr(buf, "Mode: ") != NULL;
}

/* <dir>/zookeeper/zoo.cfg: the data beside it, loopback only, no admin
 * server. tickTime 500 ms: sessions of 1 to 10 s may be asked for. */
static bool write_zoo_cfg(const local_run *r, const char *zdir, char *cfg, size_t len)
{
    snprintf(cfg, len, "%s/zoo.cfg", zdir);
    FILE *f = fopen(cfg, "w");
    if (!f) {
        fprintf(stderr, "zepsctl local: cannot write %s: %s\n", cfg, strerror(errno));
        return false;
    }
    fprintf(f,
            "# Written by zepsctl local --replicas: the run's coordination service.\n"
            "tickTime=500\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,stat\nmaxClientCnxns=0\n",
            zdir, r->zk_port);
    return fclose(f) == 0;
}

bool zp_ctl_local_zk_start(local_run *r)
{
    char java[PATH_MAX], zdir[ZP_PATH_MAX + 16], data[ZP_PATH_MAX + 32], cfg[ZP_PATH_MAX + 32];
    char log[ZP_PATH_MAX + 32], cp[64] = ZK_JAR ":" SLF4J_JAR;
    if (access(ZK_JAR, R_OK) != 0 || access(SLF4J_JAR, R_OK) != 0) {
        fprintf(stderr,
                "zepsctl local: --replicas needs ZooKeeper (%s, %s): bash "
                "deploy/install-deps.sh zk\n",
                ZK_JAR, SLF4J_JAR);
        return false;
    }
    if (!zp_ctl_local_conf_find_bin("java", java, sizeof(java)))
        return false;
    snprintf(zdir, sizeof(zdir), "%s/zookeeper", r->dir);
    snprintf(data, sizeof(data), "%s/data", zdir);
    snprintf(log, sizeof(log), "%s/zookeeper.log", zdir);
    if ((mkdir(zdir, 0755) != 0 && errno != EEXIST) ||
        (mkdir(data, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "zepsctl local: cannot make %s: %s\n", data, strerror(errno));
        return false;
    }
    if (!write_zoo_cfg(r, zdir, cfg, sizeof(cfg)))
        return false;
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
                        .sigmask = &r->oldmask};
    if ((r->zk_pid = zp_spawn_start(argv, &so)) < 0) {
        fprintf(stderr, "zepsctl local: cannot start ZooKeeper: %s\n", strerror(errno));
        return false;
    }
    r->zk_running = true;
    double t0 = zp_now_s();
    while (zp_now_s() - t0 < ZK_WAIT_S && !zk_serving(r->zk_port))
        nap_ms(100);
    if (!zk_serving(r->zk_port)) {
        fprintf(stderr,
                "zepsctl local: ZooKeeper did not serve on 127.0.0.1:%d within %.0f s; "
                "see %s\n",
                r->zk_port, ZK_WAIT_S, log);
        return false;
    }
    printf("zeps local: ZooKeeper serving on 127.0.0.1:%d after %.1f s (%s)\n", r->zk_port,
           zp_now_s() - t0, zdir);
    fflush(stdout);
    return true;
}

/* Whether replica 0 of every shard says it is primary now. */
static bool primaries(const local_run *r, const zp_curve_client_keys *keys)
{
    int n = r->cfg->num_shards;
    answer *a = zp_alloc_zeroed((size_t)n, sizeof(*a));
    zp_ctl_probe(r->cfg, keys, 0, n, 0, zp_now_s() + 1.0, 1000, a);
    bool all = true;
    for (int k = 0; k < n; k++) {
        Zeps__ShardStats *st =
            a[k].buf ? zeps__shard_stats__unpack(NULL, a[k].len, a[k].buf) : NULL;
        all &= st && strcmp(st->role, "primary") == 0;
        zeps__shard_stats__free_unpacked(st, NULL);
        free(a[k].buf);
    }
    free(a);
    return all;
}

bool zp_ctl_local_zk_wait_primaries(local_run *r, double timeout_s)
{
    zp_curve_client_keys keys;
    char err[512];
    if (zp_curve_load_client(r->cfg, &keys, err, sizeof(err)) != 0) {
        fprintf(stderr, "zepsctl local: %s\n", err);
        return false;
    }
    double t0 = zp_now_s();
    bool ok;
    while (!(ok = primaries(r, &keys)) && zp_now_s() - t0 < timeout_s)
        nap_ms(100);
    explicit_bzero(&keys, sizeof(keys));
    if (!ok)
        fprintf(stderr,
                "zepsctl local: replica 0 of every shard was not primary within %.0f s; "
                "see the servers' logs in %s\n",
                timeout_s, r->dir);
    return ok;
}
