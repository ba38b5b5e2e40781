/*
 * errors.c - text for the zeps_err codes, generated from the one table in
 * zeps_errors.h.
 */
#include "zeps_errors.h"

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
