/*
 * relay.h - a TCP relay that records what crosses it, for tests that check
 * what is on the wire (test_curve: a plain run carries a float pattern in
 * clear, a CURVE run does not).
 *
 * zt_relay_start listens on a free loopback port, connects each client it
 * accepts to 127.0.0.1:port and copies bytes both ways on its own thread,
 * appending every byte to a record. The zt_relay is the caller's (embedded,
 * started once, stopped once); the record is freed by zt_relay_stop. Start
 * and stop assert with Check: call them from a test.
 */
#ifndef ZT_RELAY_H
#define ZT_RELAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct zt_relay {
    int lfd, port, stop[2];
    pthread_t th;
    pthread_mutex_t mu; /* guards rec, len, cap */
    char *rec;
    size_t len, cap;
} zt_relay;

/* Start relaying to 127.0.0.1:port; returns the port clients connect to. */
int zt_relay_start(zt_relay *r, int port);

/* Stop the thread, close every socket, free the record. */
void zt_relay_stop(zt_relay *r);

/* Bytes recorded so far, both directions. */
size_t zt_relay_bytes(zt_relay *r);

/* Whether the record holds needle[0..n) anywhere. */
bool zt_relay_saw(zt_relay *r, const void *needle, size_t n);

#endif
