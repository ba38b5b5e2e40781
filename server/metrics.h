/*
 * metrics.h - what a shard serves over HTTP (docs/operations.md): the
 * Prometheus exposition (metrics.c) and the listener's routes with the
 * health and readiness checks (endpoint.c).
 */
#ifndef ZP_METRICS_H
#define ZP_METRICS_H

#include "http.h"

typedef struct zp_server zp_server;

/* Per-rank series are exported only for clusters of at most this many
 * workers, so a large cluster cannot blow up a scrape. */
#define ZP_METRICS_MAX_RANKS 64

/* Append s's metrics in the text exposition format to r (loop thread). */
void zp_metrics_render(const zp_server *s, zp_http_reply *r);

/* Start the HTTP listener on `listen` ("HOST:PORT") in s's loop: s->http
 * owns it and s->http_port is the port bound. 0, or a zeps_err with a
 * message in err (nothing left open). */
int zp_endpoint_start(zp_server *s, const char *listen, char *err, size_t errlen);

/* Close the listener if any; done(arg) runs once it is freed (at once,
 * from here, if there is none). */
void zp_endpoint_stop(zp_server *s, void (*done)(void *arg), void *arg);

#endif
