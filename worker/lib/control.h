/*
 * control.h - libzeps: what control.c offers the rest of the library
 * besides the public calls of zeps.h. Internal to libzeps.
 */
#ifndef ZP_CONTROL_H
#define ZP_CONTROL_H

#include "zeps.h"

/* Say HELLO to every shard and wait for the answers, which set each
 * shard's incarnation, clock and rejoined flag, the client's worker count
 * and caps, and its slot map when a shard's is not the default; a shard is
 * waited for up to opt.hello_timeout_ms. Returns 0 or the first error. */
int zp_control_hello_all(zeps_client *c);

#endif
