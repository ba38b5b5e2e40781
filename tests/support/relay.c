/*
 * relay.c - see relay.h. One thread polls the listening socket, a command
 * pipe and both ends of every pair; a pair is dropped when its upstream
 * closes, or its client does while nothing is held for it. Writes use
 * MSG_NOSIGNAL: a side that closed is not a reason to kill the test.
 */
#define _GNU_SOURCE
#include "relay.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"

#define RELAY_MAX 16 /* client connections at once */

typedef struct pair {
    int a, b;  /* client side (-1 once it closed while held), upstream side */
    bool held; /* what a sends is kept in buf until release */
    char *buf;
    size_t len, cap;
} pair;

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

static void add_held(zt_relay *r, long n)
{
    pthread_mutex_lock(&r->mu);
    r->held = (size_t)((long)r->held + n);
    pthread_mutex_unlock(&r->mu);
}

static void send_all(int fd, const char *p, size_t n)
{
    for (size_t off = 0; fd >= 0 && off < n;) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

static int connect_upstream(const zt_relay *r)
{
    if (r->path[0]) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", r->path);
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(s);
            s = -1;
        }
        return s;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)r->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(s);
        s = -1;
    }
    return s;
}

static void drop(zt_relay *r, pair *ps, int *n, int i)
{
    if (ps[i].a >= 0)
        close(ps[i].a);
    close(ps[i].b);
    add_held(r, -(long)ps[i].len);
    free(ps[i].buf);
    ps[i] = ps[*n - 1];
    (*n)--;
}

/* Apply command c: 'h' hold every pair, 'r' release every pair. */
static void command(zt_relay *r, pair *ps, int n, char c)
{
    for (int i = 0; i < n; i++) {
        if (c == 'h') {
            ps[i].held = true;
        } else if (c == 'r' && ps[i].held) {
            send_all(ps[i].b, ps[i].buf, ps[i].len);
            add_held(r, -(long)ps[i].len);
            ps[i].len = 0;
            ps[i].held = false;
        }
    }
    pthread_mutex_lock(&r->mu);
    r->acked++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Move what side d (0: client, 1: upstream) of pair p has to read.
 * Returns false when the pair is to be dropped. */
static bool move(zt_relay *r, pair *p, int d, char *buf, size_t cap)
{
    int from = d ? p->b : p->a;
    ssize_t got = read(from, buf, cap);
    if (got <= 0) {
        if (d == 0 && p->held && p->len > 0) {
            close(p->a); /* the client left; what it sent still goes up at release */
            p->a = -1;
            return true;
        }
        return false;
    }
    record(r, buf, (size_t)got);
    if (d == 0 && p->held) {
        if (p->len + (size_t)got > p->cap) {
            p->cap = (p->len + (size_t)got) * 2;
            p->buf = zp_alloc_resize(p->buf, p->cap);
        }
        memcpy(p->buf + p->len, buf, (size_t)got);
        p->len += (size_t)got;
        add_held(r, got);
        return true;
    }
    send_all(d ? p->a : p->b, buf, (size_t)got);
    return true;
}

static void *relay_main(void *arg)
{
    zt_relay *r = arg;
    pair ps[RELAY_MAX];
    int n = 0;
    char buf[1 << 16];
    for (;;) {
        struct pollfd p[2 + 2 * RELAY_MAX];
        p[0] = (struct pollfd){.fd = r->cmd[0], .events = POLLIN};
        p[1] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
        for (int i = 0; i < n; i++) {
            p[2 + 2 * i] = (struct pollfd){.fd = ps[i].a, .events = POLLIN}; /* -1: ignored */
            p[3 + 2 * i] = (struct pollfd){.fd = ps[i].b, .events = POLLIN};
        }
        if (poll(p, (nfds_t)(2 + 2 * n), -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents) {
            char c = 'x';
            if (read(r->cmd[0], &c, 1) != 1 || c == 'x')
                break;
            command(r, ps, n, c);
            continue; /* the pairs' poll results are from before the command */
        }
        if ((p[1].revents & POLLIN) && n < RELAY_MAX) {
            int c = accept(r->lfd, NULL, NULL);
            int s = c >= 0 ? connect_upstream(r) : -1;
            if (c >= 0 && s >= 0) {
                ps[n++] = (pair){.a = c, .b = s};
            } else if (c >= 0) {
                close(c);
            }
        }
        for (int i = 0; i < n; i++) {
            for (int d = 0; d < 2; d++) {
                struct pollfd *q = &p[2 + 2 * i + d];
                if (q->fd < 0 || !(q->revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                if (!move(r, &ps[i], d, buf, sizeof(buf))) {
                    drop(r, ps, &n, i);
                    i--;
                    break;
                }
            }
        }
    }
    while (n > 0)
        drop(r, ps, &n, 0);
    return NULL;
}

static int start(zt_relay *r)
{
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    ck_assert_int_eq(pipe(r->cmd), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert(bind(r->lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
    ck_assert(listen(r->lfd, 8) == 0);
    ck_assert(getsockname(r->lfd, (struct sockaddr *)&a, &len) == 0);
    ck_assert_int_eq(pthread_create(&r->th, NULL, relay_main, r), 0);
    return ntohs(a.sin_port);
}

int zt_relay_start(zt_relay *r, int port)
{
    memset(r, 0, sizeof(*r));
    r->port = port;
    return start(r);
}

int zt_relay_start_ipc(zt_relay *r, const char *path)
{
    memset(r, 0, sizeof(*r));
    ck_assert_uint_lt(strlen(path), sizeof(r->path));
    snprintf(r->path, sizeof(r->path), "%s", path);
    return start(r);
}

/* Send command c to the relay thread and wait until it applied it. */
static void issue(zt_relay *r, char c)
{
    ck_assert_int_eq(write(r->cmd[1], &c, 1), 1);
    unsigned want = ++r->issued;
    pthread_mutex_lock(&r->mu);
    while (r->acked < want)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void zt_relay_stop(zt_relay *r)
{
    ck_assert_int_eq(write(r->cmd[1], "x", 1), 1);
    pthread_join(r->th, NULL);
    close(r->lfd);
    close(r->cmd[0]);
    close(r->cmd[1]);
    free(r->rec);
    pthread_cond_destroy(&r->cv);
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

void zt_relay_hold(zt_relay *r)
{
    issue(r, 'h');
}

size_t zt_relay_held(zt_relay *r)
{
    pthread_mutex_lock(&r->mu);
    size_t held = r->held;
    pthread_mutex_unlock(&r->mu);
    return held;
}

void zt_relay_release(zt_relay *r)
{
    issue(r, 'r');
}
