/*
 * relay.c - see relay.h. One thread polls the listening socket, a stop pipe
 * and both ends of every pair; a pair is dropped when either side closes.
 */
#define _GNU_SOURCE
#include "relay.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"

static void record(zt_relay *r, const char *p, size_t n)
{
    pthread_mutex_lock(&r->mu);
    if (r->len + n > r->cap) {
        r->cap = (r->len + n) * 2;
        r->rec = zp_alloc_resize(r->rec, r->cap);
    }
    memcpy(r->rec + r->len, p, n);
    r->len += n;
    pthread_mutex_unlock(&r->mu);
}

#define RELAY_MAX 16 /* client connections at once */

static void *relay_main(void *arg)
{
    zt_relay *r = arg;
    int a[RELAY_MAX], b[RELAY_MAX], n = 0;
    char buf[1 << 16];
    for (;;) {
        struct pollfd p[2 + 2 * RELAY_MAX];
        p[0] = (struct pollfd){.fd = r->stop[0], .events = POLLIN};
        p[1] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
        for (int i = 0; i < n; i++) {
            p[2 + 2 * i] = (struct pollfd){.fd = a[i], .events = POLLIN};
            p[3 + 2 * i] = (struct pollfd){.fd = b[i], .events = POLLIN};
        }
        if (poll(p, (nfds_t)(2 + 2 * n), -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        if ((p[1].revents & POLLIN) && n < RELAY_MAX) {
            int c = accept(r->lfd, NULL, NULL);
            struct sockaddr_in sa = {.sin_family = AF_INET,
                                     .sin_port = htons((uint16_t)r->port),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (c >= 0 && s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
                a[n] = c;
                b[n] = s;
                n++;
            } else {
                if (c >= 0)
                    close(c);
                if (s >= 0)
                    close(s);
            }
        }
        for (int i = 0; i < n; i++) {
            for (int d = 0; d < 2; d++) {
                struct pollfd *q = &p[2 + 2 * i + d];
                if (!(q->revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                int from = d ? b[i] : a[i], to = d ? a[i] : b[i];
                ssize_t got = read(from, buf, sizeof(buf));
                if (got > 0) {
                    record(r, buf, (size_t)got);
                    for (ssize_t off = 0; off < got;) {
                        ssize_t w = write(to, buf + off, (size_t)(got - off));
                        if (w <= 0)
                            break;
                        off += w;
                    }
                } else {
                    /* one side closed: drop the pair */
                    close(a[i]);
                    close(b[i]);
                    a[i] = a[n - 1];
                    b[i] = b[n - 1];
                    n--;
                    i--;
                    break;
                }
            }
        }
    }
    for (int i = 0; i < n; i++) {
        close(a[i]);
        close(b[i]);
    }
    return NULL;
}

int zt_relay_start(zt_relay *r, int port)
{
    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    r->port = port;
    ck_assert_int_eq(pipe(r->stop), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert(bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
    ck_assert(listen(r->lfd, 8) == 0);
    ck_assert(getsockname(r->lfd, (struct sockaddr *)&a, &len) == 0);
    ck_assert_int_eq(pthread_create(&r->th, NULL, relay_main, r), 0);
    return ntohs(a.sin_port);
}

void zt_relay_stop(zt_relay *r)
{
    ck_assert_int_eq(write(r->stop[1], "x", 1), 1);
    pthread_join(r->th, NULL);
    close(r->lfd);
    close(r->stop[0]);
    close(r->stop[1]);
    free(r->rec);
    pthread_mutex_destroy(&r->mu);
}

size_t zt_relay_bytes(zt_relay *r)
{
    pthread_mutex_lock(&r->mu);
    size_t len = r->len;
    pthread_mutex_unlock(&r->mu);
    return len;
}

bool zt_relay_saw(zt_relay *r, const void *needle, size_t n)
{
    pthread_mutex_lock(&r->mu);
    bool seen = memmem(r->rec, r->len, needle, n) != NULL;
    pthread_mutex_unlock(&r->mu);
    return seen;
}
