/*
 * fail.h - libzeps: the client's last error (zeps_last_error). The lowest
 * file of the library: every other one may record an error through it.
 */
#ifndef ZP_FAIL_H
#define ZP_FAIL_H

typedef struct zeps_client zeps_client;

/* Record a printf-style message as c's last error; returns code. */
int zp_fail(zeps_client *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
