/*
 * httpget.c - see httpget.h.
 */
#define _GNU_SOURCE /* memrchr */
#include "httpget.h"

#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void zt_http_get(int port, const char *path, char *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect to port %d", port);
    char req[300];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd);
}

int zt_metrics_port(const zt_cluster *c, int k)
{
    ck_assert_msg(zt_wait_log(c, k, "metrics listening on"), "shard %d logged no metrics port", k);
    char path[400], line[512];
    snprintf(path, sizeof(path), "%s/server-%d.log", c->dir, k);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int port = 0;
    while (port == 0 && fgets(line, sizeof(line), f)) {
        const char *p = strstr(line, "metrics listening on");
        if (p && (p = strstr(p, "(port ")) != NULL)
            port = atoi(p + 6);
    }
    fclose(f);
    ck_assert_int_gt(port, 0);
    return port;
}

void zt_metrics_unique(const char *text)
{
    const char *l = strstr(text, "\r\n\r\n");
    l = l ? l + 4 : text;
    size_t n = 0, cap = 8192;
    const char **seen = calloc(cap, sizeof(*seen));
    size_t *keys = calloc(cap, sizeof(*keys));
    while (*l) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        const char *sp = memrchr(l, ' ', len);
        if (*l != '#' && sp != NULL) { /* a sample: name{labels} value */
            size_t key = (size_t)(sp - l);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(keys[i] != key || memcmp(seen[i], l, key) != 0,
                              "/metrics has the series %.*s twice", (int)key, l);
            ck_assert_uint_lt(n, cap);
            seen[n] = l;
            keys[n++] = key;
        }
        l += len + (end != NULL);
    }
    free(seen);
    free(keys);
}
