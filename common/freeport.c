/*
 * freeport.c - see freeport.h.
 */
#include "freeport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LOWEST 20000

static int ephemeral_low(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

static int can_bind(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0) {
        int keep = errno;
        close(fd);
        errno = keep;
    }
    return ok;
}

/* The first port from offset `start` that can be bound (-1: none). */
static int first_free(int start, int span)
{
    for (int i = 0; i < span; i++) {
        int port = LOWEST + (start + i) % span;
        if (can_bind(port))
            return port;
    }
    return -1;
}

/* The pick, walking the range from where the last pick on this host
 * stopped ("<dir>/zeps-freeport", read and written under flock), so that
 * processes picking at the same moment (tests run in parallel) get
 * different ports even before either binds. -2 without the file. */
static int pick_in_turn(int span)
{
    const char *dir = getenv("TMPDIR");
    char path[512], buf[32] = "";
    snprintf(path, sizeof(path), "%s/zeps-freeport", dir && dir[0] ? dir : "/tmp");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return -2;
    int port = -2;
    if (flock(fd, LOCK_EX) == 0) {
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        int last = n > 0 ? atoi(buf) : 0;
        port = first_free(last >= 0 && last < span ? last + 1 : 0, span);
        int len = snprintf(buf, sizeof(buf), "%d\n", port > 0 ? port - LOWEST : 0);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len)
            port = port > 0 ? port : -2;
    }
    close(fd); /* unlocks */
    return port;
}

int zp_freeport_pick(void)
{
    int span = ephemeral_low() - LOWEST;
    if (span < 1000)
        span = 1000;
    int port = pick_in_turn(span);
    if (port == -2) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)t.tv_nsec;
        port = first_free((int)(rand_r(&seed) % (unsigned)span), span);
    }
    if (port < 0)
        errno = EADDRINUSE;
    return port;
}
