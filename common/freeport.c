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

/* The ports this process picked last: not picked again, since a server
 * given one may not have bound it yet (two endpoints of one cluster file
 * once got the same port). */
#define RECENT 64
static int recent[RECENT];
static unsigned nrecent;

static int picked_lately(int port)
{
    for (unsigned i = 0; i < RECENT; i++)
        if (__atomic_load_n(&recent[i], __ATOMIC_RELAXED) == port)
            return 1;
    return 0;
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
        if (!picked_lately(port) && can_bind(port)) {
            unsigned at = __atomic_fetch_add(&nrecent, 1, __ATOMIC_RELAXED) % RECENT;
            __atomic_store_n(&recent[at], port, __ATOMIC_RELAXED);
            return port;
        }
    }
    errno = EADDRINUSE;
    return -1;
}
