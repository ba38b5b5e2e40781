/*
 * relay.h - a TCP relay that records what crosses it, for tests that check
 * what is on the wire (test_curve: a plain run carries a float pattern in
 * clear, a CURVE run does not), and that can hold what clients send, for
 * tests that need a request to arrive late (test_recovery: a request sent
 * on a connection the client has since closed, delivered after what it
 * sent on its new one).
 *
 * zt_relay_start listens on a free loopback port, connects each client it
 * accepts to 127.0.0.1:port (zt_relay_start_ipc: to a Unix socket, a
 * shard's ipc:// endpoint) and copies bytes both ways on its own thread,
 * appending every byte to a record. The zt_relay is the caller's (embedded,
 * started once, stopped once); the record and held bytes are freed by
 * zt_relay_stop. Every function asserts with Check: call them from a test.
 */
#ifndef ZT_RELAY_H
#define ZT_RELAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct zt_relay {
    int lfd, port, cmd[2];
    char path[108]; /* upstream Unix socket, or "" for 127.0.0.1:port */
    pthread_t th;
    pthread_mutex_t mu; /* guards rec, len, cap, held, acked */
    pthread_cond_t cv;  /* signalled when the thread has applied a command */
    char *rec;
    size_t len, cap;
    size_t held;     /* bytes held now, all connections */
    unsigned acked;  /* commands applied by the thread */
    unsigned issued; /* commands sent to it (caller's thread only) */
} zt_relay;

/* Start relaying to 127.0.0.1:port; returns the port clients connect to. */
int zt_relay_start(zt_relay *r, int port);

/* Start relaying to the Unix socket at `path` (an ipc:// endpoint's path);
 * returns the port clients connect to. */
int zt_relay_start_ipc(zt_relay *r, const char *path);

/* Stop the thread, close every socket, free the record. */
void zt_relay_stop(zt_relay *r);

/* Bytes recorded so far, both directions. */
size_t zt_relay_bytes(zt_relay *r);

/* Whether the record holds needle[0..n) anywhere. */
bool zt_relay_saw(zt_relay *r, const void *needle, size_t n);

/* From now on, hold what the clients connected now send (connections
 * accepted later pass as before); a held connection whose client closes
 * keeps its upstream side open for what it holds. Returns once the relay
 * thread applies it. */
void zt_relay_hold(zt_relay *r);

/* Bytes held now. */
size_t zt_relay_held(zt_relay *r);

/* Send upstream what was held, in order, and pass what comes next. Returns
 * once the relay thread has written it. */
void zt_relay_release(zt_relay *r);

#endif
