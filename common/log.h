/*
 * log.h - leveled logging to stderr.
 *
 * Lines look like "2026-11-22T08:30:01.123Z server[1] INFO message". The level
 * and the "who" prefix are process-wide, set once at start-up before any
 * other thread runs; that is the one piece of global state zeps keeps, as a
 * logger is shared by everything in a process by nature.
 */
#ifndef ZP_LOG_H
#define ZP_LOG_H

typedef enum zp_log_level {
    ZP_LOG_DEBUG = 0,
    ZP_LOG_INFO = 1,
    ZP_LOG_WARN = 2,
    ZP_LOG_ERROR = 3,
} zp_log_level;

/* Set the minimum level printed and the name printed on each line. */
void zp_log_init(const char *who, zp_log_level level);

/* "debug" | "info" | "warn" | "error" -> level; -1 if unknown. */
int zp_log_level_from_name(const char *name);

int zp_log_enabled(zp_log_level level);

void zp_log(zp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define zp_debug(...)                                                                              \
    do {                                                                                           \
        if (zp_log_enabled(ZP_LOG_DEBUG))                                                          \
            zp_log(ZP_LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)
#define zp_info(...) zp_log(ZP_LOG_INFO, __VA_ARGS__)
#define zp_warn(...) zp_log(ZP_LOG_WARN, __VA_ARGS__)
#define zp_error(...) zp_log(ZP_LOG_ERROR, __VA_ARGS__)

#endif
