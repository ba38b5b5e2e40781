/*
 * http.h - a small, bounded HTTP/1.x listener inside a libuv loop, for
 * GET endpoints that operators scrape (/metrics, /healthz, /readyz). Requests
 * are parsed by Debian's libhttp-parser; this module owns the listening
 * socket, the connections, their timers and the limits, and knows nothing
 * of what it serves: each complete request goes to a handler that fills a
 * reply.
 *
 * Bounds (docs/operations.md, "The metrics endpoint"): at most max_conns
 * connections (a new one closes the oldest), at most max_header bytes of
 * request line and headers, one request per connection (the reply says
 * "Connection: close"), and request_ms from accept to the last byte written
 * (a slow or silent client is closed by its timer). Bad requests get a 4xx
 * reply naming what was wrong, then the connection is closed.
 *
 * Threading: every function runs on the loop's thread.
 */
#ifndef ZP_HTTP_H
#define ZP_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

typedef struct zp_http zp_http;

typedef struct zp_http_limits {
    int max_conns;       /* open connections at most (default 64) */
    size_t max_header;   /* request line + headers, bytes (default 8192) */
    uint64_t request_ms; /* accept to reply written (default 5000) */
} zp_http_limits;

/* What the listener counted (exported as zeps_http_* metrics). */
typedef struct zp_http_counts {
    uint64_t accepted, served, bad, evicted, timed_out;
    int open;
} zp_http_counts;

/* A reply being built by a handler: status 200 and text/plain unless set. */
typedef struct zp_http_reply {
    int status;
    const char *type; /* Content-Type, static */
    char *body;       /* owned by the listener */
    size_t len, cap;
} zp_http_reply;

/* Called for each complete GET request with the URL's path and its query
 * ("" if none). Fills rep with zp_http_printf; must not keep rep. */
typedef void (*zp_http_handler)(void *arg, const char *path, const char *query, zp_http_reply *rep);

/* Listen on "HOST:PORT" (port 0: any free port) in `loop`. On success *out
 * owns the listener; on error returns a zeps_err with a message in err and
 * nothing is left open. lim may be NULL (defaults). */
int zp_http_start(zp_http **out, uv_loop_t *loop, const char *listen, const zp_http_limits *lim,
                  zp_http_handler handler, void *arg, char *err, size_t errlen);

/* The port actually bound. */
int zp_http_port(const zp_http *h);

/* A copy of the counters. */
zp_http_counts zp_http_get_counts(const zp_http *h);

/* Close the listener and every connection; done(arg) runs from the loop
 * once the last handle is closed and the memory is freed. Takes *hp and
 * sets it to NULL; NULL is ignored (done is then not called). */
void zp_http_close(zp_http **hp, void (*done)(void *arg), void *arg);

/* Append printf-style text to a reply's body. */
void zp_http_printf(zp_http_reply *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Split "HOST:PORT" into host (hostlen bytes) and port; 0 on success, else
 * ZEPS_ECONFIG with a message naming `what` in err. */
int zp_http_parse_listen(const char *listen, const char *what, char *host, size_t hostlen,
                         int *port, char *err, size_t errlen);

#endif
