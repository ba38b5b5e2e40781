/*
 * freeport.c - see freeport.h.
 */
#include "freeport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
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

int zp_freeport_pick(void)
{
    int span = ephemeral_low() - LOWEST;
    if (span < 1000)
        span = 1000;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)t.tv_nsec;
    int start = (int)(rand_r(&seed) % (unsigned)span);
    for (int i = 0; i < span; i++) {
        int port = LOWEST + (start + i) % span;
        if (can_bind(port))
            return port;
    }
    errno = EADDRINUSE;
    return -1;
}
