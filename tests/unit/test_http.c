/*
 * test_http.c - the bounded HTTP listener (common/http.c) in process: a
 * libuv loop on this thread serves, a client thread speaks HTTP over a real
 * loopback socket. Checks the handler's reply, the 4xx answers (405, 414,
 * 431, 400), the timer that closes a silent client, eviction of the oldest
 * connection over the cap, the counters, and that closing frees everything
 * (the loop closes with no handle left).
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "http.h"

typedef struct fixture {
    uv_loop_t loop;
    uv_async_t done;
    zp_http *h;
    int port;
    void (*client)(struct fixture *f);
    int closed;
} fixture;

static void serve(void *arg, const char *path, const char *query, zp_http_reply *rep)
{
    (void)arg;
    if (strcmp(path, "/hello") == 0)
        zp_http_printf(rep, "hello %s\n", query);
    else
        rep->status = 404;
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Send req (may be NULL), read the reply until EOF into out. */
static size_t ask(int port, const char *req, size_t reqlen, char *out, size_t cap)
{
    int fd = dial(port);
    if (req)
        ck_assert_int_eq(write(fd, req, reqlen), (ssize_t)reqlen);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(fd);
    return n;
}

static void *client_main(void *arg)
{
    fixture *f = arg;
    f->client(f);
    uv_async_send(&f->done);
    return NULL;
}

static void on_closed(void *arg)
{
    ((fixture *)arg)->closed = 1;
}

static void on_done(uv_async_t *a)
{
    fixture *f = a->data;
    zp_http_close(&f->h, on_closed, f);
    uv_close((uv_handle_t *)&f->done, NULL);
}

static void run(void (*client)(fixture *f), const zp_http_limits *lim, zp_http_counts *counts)
{
    fixture f = {.client = client};
    char err[256];
    ck_assert_int_eq(uv_loop_init(&f.loop), 0);
    ck_assert_int_eq(
        zp_http_start(&f.h, &f.loop, "127.0.0.1:0", lim, serve, NULL, err, sizeof(err)), 0);
    f.port = zp_http_port(f.h);
    ck_assert_int_gt(f.port, 0);
    uv_async_init(&f.loop, &f.done, on_done);
    f.done.data = &f;
    pthread_t t;
    pthread_create(&t, NULL, client_main, &f);
    zp_http *h = f.h;
    while (f.h) { /* the counters as of the turn that closes it (then it is freed) */
        *counts = zp_http_get_counts(h);
        uv_run(&f.loop, UV_RUN_ONCE);
    }
    uv_run(&f.loop, UV_RUN_DEFAULT);
    pthread_join(t, NULL);
    ck_assert_int_eq(f.closed, 1);
    ck_assert_int_eq(uv_loop_close(&f.loop), 0); /* no handle left open */
}

static void client_get(fixture *f)
{
    char buf[4096];
    const char *req = "GET /hello?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
    ask(f->port, req, strlen(req), buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "HTTP/1.1 200 OK\r\n") == buf, "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "Content-Length: 10\r\n"));
    ck_assert_ptr_nonnull(strstr(buf, "Connection: close\r\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nhello x=1\n"));
    req = "HEAD /hello HTTP/1.1\r\n\r\n";
    ask(f->port, req, strlen(req), buf, sizeof(buf));
    ck_assert_ptr_null(strstr(buf, "hello"));
    req = "GET /nope HTTP/1.0\r\n\r\n";
    ask(f->port, req, strlen(req), buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "HTTP/1.1 404") == buf, "%s", buf);
}

START_TEST(get_head_404)
{
    zp_http_counts c;
    run(client_get, NULL, &c);
    ck_assert_uint_eq(c.served, 3);
    ck_assert_uint_eq(c.bad, 0);
}
END_TEST

static void client_bad(fixture *f)
{
    char buf[4096], big[12000];
    const char *req = "POST /hello HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
    ask(f->port, req, strlen(req), buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "HTTP/1.1 405") == buf, "%s", buf);
    int n = snprintf(big, sizeof(big), "GET /%0300d HTTP/1.1\r\n\r\n", 0);
    ask(f->port, big, (size_t)n, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "HTTP/1.1 414") == buf, "%s", buf);
    n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nX: %09000d\r\n\r\n", 0);
    ask(f->port, big, (size_t)n, buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "HTTP/1.1 431") == buf, "%s", buf);
    req = "\x01\x02 junk\r\n\r\n";
    ask(f->port, req, strlen(req), buf, sizeof(buf));
    ck_assert_msg(strstr(buf, "HTTP/1.1 400") == buf, "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "malformed request"));
}

START_TEST(bad_requests)
{
    zp_http_counts c;
    run(client_bad, NULL, &c);
    ck_assert_uint_eq(c.bad, 4);
    ck_assert_uint_eq(c.served, 0);
}
END_TEST

static void client_slow(fixture *f)
{
    char buf[256];
    /* half a request, then silence: the 300 ms timer closes it (EOF) */
    ck_assert_uint_eq(ask(f->port, "GET /hel", 8, buf, sizeof(buf)), 0);
}

START_TEST(slow_client_times_out)
{
    zp_http_counts c;
    zp_http_limits lim = {.request_ms = 300};
    run(client_slow, &lim, &c);
    ck_assert_uint_eq(c.timed_out, 1);
}
END_TEST

static void client_cap(fixture *f)
{
    int a = dial(f->port), b = dial(f->port);
    usleep(100000);
    int c = dial(f->port); /* over a cap of 2: the oldest (a) is closed */
    char buf[4096];
    struct timeval tv = {.tv_sec = 2};
    setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ck_assert_int_eq(read(a, buf, sizeof(buf)), 0);
    const char *req = "GET /hello HTTP/1.1\r\n\r\n";
    ck_assert_int_eq(write(c, req, strlen(req)), (ssize_t)strlen(req));
    ck_assert_int_gt(read(c, buf, sizeof(buf)), 0);
    close(a);
    close(b);
    close(c);
}

START_TEST(cap_evicts_oldest)
{
    zp_http_counts c;
    zp_http_limits lim = {.max_conns = 2};
    run(client_cap, &lim, &c);
    ck_assert_uint_eq(c.evicted, 1);
    ck_assert_uint_eq(c.served, 1);
}
END_TEST

START_TEST(listen_errors)
{
    char host[64], err[256];
    int port;
    ck_assert_int_ne(zp_http_parse_listen("nohost", "metrics_listen", host, sizeof(host), &port,
                                          err, sizeof(err)),
                     0);
    ck_assert_ptr_nonnull(strstr(err, "metrics_listen = \"nohost\" must be HOST:PORT"));
    ck_assert_int_ne(
        zp_http_parse_listen("a:70000", "k", host, sizeof(host), &port, err, sizeof(err)), 0);
    ck_assert_int_eq(
        zp_http_parse_listen("127.0.0.1:9400", "k", host, sizeof(host), &port, err, sizeof(err)),
        0);
    ck_assert_int_eq(port, 9400);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("http");
    tcase_set_timeout(tc, 20);
    tcase_add_test(tc, get_head_404);
    tcase_add_test(tc, bad_requests);
    tcase_add_test(tc, slow_client_times_out);
    tcase_add_test(tc, cap_evicts_oldest);
    tcase_add_test(tc, listen_errors);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
