/*
 * ctl_echo.c - the workers' output, to their logs and (prefixed, rate
 * limited) to the terminal; see ctl_echo.h.
 */
#include "ctl_echo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "now.h"

void zp_ctl_echo_init(zp_echo *e, int nworkers, int out)
{
    e->src = zp_alloc_zeroed((size_t)(nworkers > 0 ? nworkers : 1), sizeof(zp_echo_src));
    e->n = nworkers;
    e->out = out;
    for (int i = 0; i < nworkers; i++)
        e->src[i] = (zp_echo_src){.fd = -1, .log = -1, .rank = i, .last_s = -1e9};
}

void zp_ctl_echo_add(zp_echo *e, int rank, int fd, int log)
{
    e->src[rank].fd = fd;
    e->src[rank].log = log;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (fd >= 0 && n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a closed terminal or a full disk must not stop the run */
        p += w;
        n -= (size_t)w;
    }
}

/* Always shown: what tells that something went wrong. */
static bool urgent(const char *line)
{
    return strstr(line, " WARN ") || strstr(line, " ERROR ") || strstr(line, "Traceback") ||
           strstr(line, "Error:") || strstr(line, "error:");
}

/* One whole line of s (NUL-terminated, no newline) to the terminal, or
 * held back by the rate limit. */
static void show(zp_echo *e, zp_echo_src *s)
{
    double now = zp_now_s();
    if (s->rank != 0 && !urgent(s->line) && now - s->last_s < ZP_ECHO_EVERY_S) {
        s->held++;
        memcpy(s->last, s->line, strlen(s->line) + 1);
        return;
    }
    char head[64];
    int k = snprintf(head, sizeof(head), "[rank %d] ", s->rank);
    if (s->held)
        k += snprintf(head + k, sizeof(head) - (size_t)k, "(+%u lines in its log) ", s->held);
    if (s->rank != 0)
        s->last_s = now;
    s->held = 0;
    write_all(e->out, head, (size_t)k);
    write_all(e->out, s->line, strlen(s->line));
    write_all(e->out, "\n", 1);
}

/* Split n bytes of output into lines (a line longer than the buffer is
 * shown cut, its rest dropped up to the newline). */
static void take(zp_echo *e, zp_echo_src *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            s->line[s->len < ZP_ECHO_LINE ? s->len : ZP_ECHO_LINE - 1] = '\0';
            show(e, s);
            s->len = 0;
        } else if (s->len < ZP_ECHO_LINE - 1) {
            s->line[s->len++] = p[i];
        } else {
            s->len = ZP_ECHO_LINE; /* cut: the rest of this line is not shown */
        }
    }
}

static void close_src(zp_echo *e, zp_echo_src *s)
{
    s->last_s = -1e9; /* its last words are shown */
    if (s->len > 0 && s->len < ZP_ECHO_LINE) { /* without a newline */
        s->line[s->len] = '\0';
        show(e, s);
    } else if (s->held) {
        s->held--; /* the line shown is not counted among those left out */
        memcpy(s->line, s->last, strlen(s->last) + 1);
        show(e, s);
    }
    s->len = 0;
    close(s->fd);
    s->fd = -1;
    if (s->log >= 0)
        close(s->log);
    s->log = -1;
}

void zp_ctl_echo_pump(zp_echo *e, int rank, bool drain)
{
    zp_echo_src *s = &e->src[rank];
    char buf[65536];
    while (s->fd >= 0) {
        ssize_t n = read(s->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close_src(e, s);
            return;
        }
        write_all(s->log, buf, (size_t)n);
        take(e, s, buf, (size_t)n);
        if (!drain)
            return;
    }
}

int zp_ctl_echo_pollfds(const zp_echo *e, struct pollfd *p, int max)
{
    int k = 0;
    for (int i = 0; i < e->n && k < max; i++)
        if (e->src[i].fd >= 0)
            p[k++] = (struct pollfd){.fd = e->src[i].fd, .events = POLLIN};
    return k;
}

void zp_ctl_echo_ready(zp_echo *e, const struct pollfd *p, int n)
{
    for (int k = 0; k < n; k++) {
        if (!p[k].revents)
            continue;
        for (int i = 0; i < e->n; i++)
            if (e->src[i].fd == p[k].fd)
                zp_ctl_echo_pump(e, i, false);
    }
}

void zp_ctl_echo_fini(zp_echo *e)
{
    for (int i = 0; i < e->n; i++)
        if (e->src[i].fd >= 0)
            close_src(e, &e->src[i]);
    free(e->src);
    e->src = NULL;
    e->n = 0;
}
