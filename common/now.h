/*
 * now.h - the monotonic clock every zeps process reads.
 */
#ifndef ZP_NOW_H
#define ZP_NOW_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds / in seconds. Any thread. */
uint64_t zp_now_ns(void);
double zp_now_s(void);

#endif
