/*
 * fail.c - libzeps: the client's last error; see fail.h.
 */
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

#include "client.h"

int zp_fail(zeps_client *c, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof(c->err), fmt, ap);
    va_end(ap);
    return code;
}
