/*
 * log.c - see log.h. One fprintf per line so lines from concurrent processes
 * sharing a terminal do not interleave mid-line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static char log_who[64] = "zeps";
static zp_log_level log_min = ZP_LOG_INFO;

void zp_log_init(const char *who, zp_log_level level)
{
    snprintf(log_who, sizeof(log_who), "%s", who ? who : "zeps");
    log_min = level;
}

int zp_log_level_from_name(const char *name)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

int zp_log_enabled(zp_log_level level)
{
    return level >= log_min;
}

void zp_log(zp_log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < log_min)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(stderr, "%s.%03dZ %s %s %s\n", ts, (int)(tv.tv_usec / 1000), log_who,
            tags[level < 0 || level > 3 ? 1 : level], msg);
}
