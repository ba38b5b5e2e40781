/*
 * httpget.h - a shard's HTTP endpoint (/metrics, /healthz) read by a
 * test: one GET over loopback, the port a shard logged when it was given
 * `metrics_listen = "127.0.0.1:0"`, and a check of a Prometheus text.
 * Every function asserts with Check: call them from a test.
 */
#ifndef ZT_HTTPGET_H
#define ZT_HTTPGET_H

#include <stddef.h>

#include "harness.h"

/* GET `path` from 127.0.0.1:port into buf (the whole reply, headers too,
 * NUL-terminated; cut at len - 1 bytes). */
void zt_http_get(int port, const char *path, char *buf, size_t len);

/* The port shard k logged its metrics endpoint on ("metrics listening on
 * ... (port N)"); waits up to 10 s for the line. */
int zt_metrics_port(const zt_cluster *c, int k);

/* Fails the test if two samples of the Prometheus text `text` have the
 * same name and labels (a scrape Prometheus refuses). */
void zt_metrics_unique(const char *text);

#endif
