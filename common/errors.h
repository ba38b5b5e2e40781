/*
 * errors.h - the internal half of the one error channel: zeps_err codes
 * (zeps_errors.h, public) travel with a message written by zp_errors_set.
 */
#ifndef ZP_ERRORS_H
#define ZP_ERRORS_H

#include <stddef.h>

#include "zeps_errors.h"

/* Write a printf-style message into err (errlen bytes, always terminated;
 * nothing if err is NULL) and return `code`: the one helper behind every
 * "return an error code with a message" in zeps. Any thread. */
int zp_errors_set(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
