/*
 * errors.c - text for the zeps_err codes, generated from the one table in
 * zeps_errors.h, and zp_errors_set, which pairs a code with a message.
 */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>

int zp_errors_set(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *zeps_strerror(int err)
{
    switch (err) {
#define X_(name, num, text)                                                                        \
    case num:                                                                                      \
        return text;
        ZEPS_ERROR_TABLE(X_)
#undef X_
    default:
        return "unknown error";
    }
}

const char *zeps_errname(int err)
{
    switch (err) {
#define X_(name, num, text)                                                                        \
    case num:                                                                                      \
        return #name;
        ZEPS_ERROR_TABLE(X_)
#undef X_
    default:
        return "UNKNOWN";
    }
}
