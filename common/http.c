/*
 * http.c - the bounded HTTP/1.x listener of http.h. libhttp-parser (Debian's
 * libhttp-parser-dev) reads requests; this file owns the connections: a
 * uv_tcp_t and a uv_timer_t each, kept in accept order so the oldest is the
 * one closed when the cap is reached. A connection is freed once both of its
 * handles are closed; the listener once its socket and every connection are.
 *
 * Nothing here blocks: reads go into one shared buffer (libuv calls read
 * callbacks one at a time on the loop's thread), a reply is one uv_write,
 * and the timer bounds each connection's whole life, so a client that sends
 * one byte a second, or nothing at all, costs a slot for request_ms at most.
 */
#include "http.h"

#include <http_parser.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "zeps_errors.h"

#define URL_MAX 256

typedef struct conn conn;

struct zp_http {
    uv_tcp_t listener;
    uv_loop_t *loop;
    zp_http_limits lim;
    zp_http_handler handler;
    void *arg;
    conn *oldest, *newest;
    zp_http_counts counts;
    int port;
    bool closing, listener_closed;
    void (*done)(void *arg);
    void *done_arg;
    char rbuf[4096];
};

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    http_parser parser;
    zp_http *h;
    conn *prev, *next;
    int open_handles;
    bool replied, closing;
    size_t bytes, url_len;
    char url[URL_MAX];
    char *out;
};

static void maybe_free_http(zp_http *h)
{
    if (h->closing && h->listener_closed && h->oldest == NULL) {
        void (*done)(void *) = h->done;
        void *arg = h->done_arg;
        free(h);
        if (done)
            done(arg);
    }
}

static void on_conn_handle_closed(uv_handle_t *handle)
{
    conn *c = handle->data;
    if (--c->open_handles > 0)
        return;
    zp_http *h = c->h;
    if (c->prev)
        c->prev->next = c->next;
    else
        h->oldest = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        h->newest = c->prev;
    h->counts.open--;
    free(c->out);
    free(c);
    maybe_free_http(h);
}

static void conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static const char *status_text(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    default:
        return "Error";
    }
}

static void on_written(uv_write_t *wr, int status)
{
    (void)status;
    conn *c = wr->data;
    conn_close(c);
}

/* Send rep (status line, headers, body unless HEAD) and close after it. */
static void send_reply(conn *c, const zp_http_reply *rep, bool head)
{
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->replied = true;
    char hdr[256];
    int n = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     rep->status, status_text(rep->status),
                     rep->type ? rep->type : "text/plain; charset=utf-8", rep->len);
    size_t body = head ? 0 : rep->len;
    c->out = zp_alloc((size_t)n + body + 1);
    memcpy(c->out, hdr, (size_t)n);
    if (body)
        memcpy(c->out + n, rep->body, body);
    uv_buf_t b = uv_buf_init(c->out, (unsigned)((size_t)n + body));
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
        conn_close(c);
}

/* A 4xx reply whose body says what was wrong. */
static void send_error(conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_error(conn *c, int status, const char *fmt, ...)
{
    zp_http_reply rep = {.status = status};
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    zp_http_printf(&rep, "%s\n", msg);
    c->h->counts.bad++;
    send_reply(c, &rep, false);
    free(rep.body);
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    conn *c = p->data;
    if (c->url_len + len >= URL_MAX)
        return 1; /* answered 414 by the reader */
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = '\0';
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    (void)p, (void)at, (void)len;
    return 0; /* GET bodies are ignored (their bytes still count toward max_header) */
}

static int on_complete(http_parser *p)
{
    conn *c = p->data;
    bool head = p->method == HTTP_HEAD;
    if (p->method != HTTP_GET && !head) {
        send_error(c, 405, "method %s is not allowed: only GET and HEAD",
                   http_method_str((enum http_method)p->method));
        return 1;
    }
    char *q = strchr(c->url, '?');
    if (q)
        *q++ = '\0';
    zp_http_reply rep = {.status = 200};
    c->h->handler(c->h->arg, c->url, q ? q : "", &rep);
    c->h->counts.served++;
    send_reply(c, &rep, head);
    free(rep.body);
    return 1; /* one request per connection: stop parsing */
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_body = on_body,
    .on_message_complete = on_complete,
};

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn *c = handle->data;
    *buf = uv_buf_init(c->h->rbuf, sizeof(c->h->rbuf));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = stream->data;
    if (nread == 0 || c->replied)
        return;
    if (nread < 0) { /* EOF or error before a whole request */
        if (!c->replied)
            c->h->counts.bad++;
        conn_close(c);
        return;
    }
    c->bytes += (size_t)nread;
    if (c->bytes > c->h->lim.max_header) {
        send_error(c, 431, "request over %zu bytes", c->h->lim.max_header);
        return;
    }
    http_parser_execute(&c->parser, &settings, buf->base, (size_t)nread);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
    if (c->replied || e == HPE_OK)
        return;
    if (e == HPE_CB_url)
        send_error(c, 414, "URL longer than %d bytes", URL_MAX - 1);
    else
        send_error(c, 400, "malformed request: %s", http_errno_description(e));
}

static void on_timeout(uv_timer_t *t)
{
    conn *c = t->data;
    c->h->counts.timed_out++;
    conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    zp_http *h = server->data;
    if (status < 0 || h->closing)
        return;
    conn *c = zp_alloc_zeroed(1, sizeof(*c));
    c->h = h;
    uv_tcp_init(h->loop, &c->tcp);
    uv_timer_init(h->loop, &c->timer);
    c->open_handles = 2;
    c->tcp.data = c->timer.data = c;
    c->prev = h->newest;
    if (h->newest)
        h->newest->next = c;
    else
        h->oldest = c;
    h->newest = c;
    h->counts.open++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    h->counts.accepted++;
    /* Over the cap: the oldest open connection makes room (it is the one
     * nearest its own timeout anyway). */
    int live = 0;
    for (conn *o = h->oldest; o; o = o->next)
        live += !o->closing;
    if (live > h->lim.max_conns) {
        for (conn *o = h->oldest; o; o = o->next)
            if (!o->closing) {
                h->counts.evicted++;
                conn_close(o);
                break;
            }
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_timer_start(&c->timer, on_timeout, h->lim.request_ms, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int zp_http_parse_listen(const char *listen, const char *what, char *host, size_t hostlen,
                         int *port, char *err, size_t errlen)
{
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : 0;
    char *end = NULL;
    long p = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || n == 0 || n >= hostlen || colon[1] == '\0' || *end != '\0' || p < 0 ||
        p > 65535) {
        snprintf(err, errlen, "%s = \"%s\" must be HOST:PORT with a port in 0..65535", what,
                 listen);
        return ZEPS_ECONFIG;
    }
    memcpy(host, listen, n);
    host[n] = '\0';
    *port = (int)p;
    return 0;
}

static void on_listener_closed(uv_handle_t *handle)
{
    zp_http *h = handle->data;
    h->listener_closed = true;
    maybe_free_http(h);
}

static int bind_listen(zp_http *h, const char *listen, char *err, size_t errlen)
{
    char host[128];
    int port,
        rc = zp_http_parse_listen(listen, "metrics_listen", host, sizeof(host), &port, err, errlen);
    if (rc != 0)
        return rc;
    struct sockaddr_storage ss;
    if (uv_ip4_addr(strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, port,
                    (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0) {
        snprintf(err, errlen, "metrics_listen = \"%s\": '%s' is not an IPv4 or IPv6 address",
                 listen, host);
        return ZEPS_ECONFIG;
    }
    int uvrc = uv_tcp_bind(&h->listener, (struct sockaddr *)&ss, 0);
    if (uvrc == 0)
        uvrc = uv_listen((uv_stream_t *)&h->listener, 128, on_connection);
    if (uvrc != 0) {
        snprintf(err, errlen, "cannot listen for HTTP on %s: %s", listen, uv_strerror(uvrc));
        return ZEPS_ETRANSPORT;
    }
    struct sockaddr_storage got;
    int len = sizeof(got);
    uv_tcp_getsockname(&h->listener, (struct sockaddr *)&got, &len);
    h->port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                              : ((struct sockaddr_in *)&got)->sin_port);
    return 0;
}

int zp_http_start(zp_http **out, uv_loop_t *loop, const char *listen, const zp_http_limits *lim,
                  zp_http_handler handler, void *arg, char *err, size_t errlen)
{
    zp_http *h = zp_alloc_zeroed(1, sizeof(*h));
    h->loop = loop;
    h->handler = handler;
    h->arg = arg;
    h->lim = (zp_http_limits){.max_conns = 64, .max_header = 8192, .request_ms = 5000};
    if (lim && lim->max_conns > 0)
        h->lim.max_conns = lim->max_conns;
    if (lim && lim->max_header > 0)
        h->lim.max_header = lim->max_header;
    if (lim && lim->request_ms > 0)
        h->lim.request_ms = lim->request_ms;
    uv_tcp_init(loop, &h->listener);
    h->listener.data = h;
    int rc = bind_listen(h, listen, err, errlen);
    if (rc != 0) {
        /* only the listener is open: close it and let the loop free h */
        h->closing = true;
        uv_close((uv_handle_t *)&h->listener, on_listener_closed);
        return rc;
    }
    *out = h;
    return 0;
}

int zp_http_port(const zp_http *h)
{
    return h->port;
}

zp_http_counts zp_http_get_counts(const zp_http *h)
{
    return h->counts;
}

void zp_http_close(zp_http **hp, void (*done)(void *arg), void *arg)
{
    zp_http *h = *hp;
    if (!h)
        return;
    *hp = NULL;
    h->closing = true;
    h->done = done;
    h->done_arg = arg;
    for (conn *c = h->oldest; c; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
}

void zp_http_printf(zp_http_reply *rep, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0)
        return;
    if (rep->len + (size_t)need + 1 > rep->cap) {
        size_t cap = rep->cap ? rep->cap : 4096;
        while (cap < rep->len + (size_t)need + 1)
            cap *= 2;
        rep->body = zp_alloc_resize(rep->body, cap);
        rep->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(rep->body + rep->len, rep->cap - rep->len, fmt, ap);
    va_end(ap);
    rep->len += (size_t)need;
}
