/*
 * config_fixture.h - what the cluster-file tests share (test_config: the
 * reader; test_config_keys: the keys of each concern): the smallest valid
 * file as HEAD ... TAIL, parse_ok for text that must parse, and
 * expect_error for text that must fail with a given code and message parts.
 * Every text is parsed as "cluster.conf", so messages can be checked for the
 * file name, the line and the full key path. Static inline helpers that
 * assert with Check: call them from a test.
 */
#ifndef ZT_CONFIG_FIXTURE_H
#define ZT_CONFIG_FIXTURE_H

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "zeps_errors.h"

/* The smallest valid file: lines 1-3, then whatever a test adds, then "};". */
#define HEAD                                                                                       \
    "cluster = {\n"                                                                                \
    "  servers = [\"tcp://127.0.0.1:17000\"];\n"                                                   \
    "  workers = 2;\n"
#define TAIL "};\n"

static inline zp_config *new_cfg(void)
{
    zp_config *cfg = malloc(sizeof(*cfg));
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

/* Parse `text` as "cluster.conf" and check that it fails with `code` and a
 * message holding every one of the NULL-terminated substrings. */
static inline void expect_error(const char *text, int code, ...)
{
    zp_config *cfg = new_cfg();
    char err[512];
    memset(err, 'x', sizeof(err));
    int rc = zp_config_parse(cfg, text, "cluster.conf", err, sizeof(err));
    free(cfg);
    ck_assert_msg(rc == code, "expected %s, got %s (%s) for:\n%s", zeps_errname(code),
                  zeps_errname(rc), err, text);
    ck_assert_msg(memchr(err, '\0', sizeof(err)) != NULL, "message not terminated");
    va_list ap;
    va_start(ap, code);
    for (const char *want = va_arg(ap, const char *); want != NULL; want = va_arg(ap, const char *))
        ck_assert_msg(strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
    va_end(ap);
}

/* Parse `text`, which must be valid, into a new config the caller frees. */
static inline zp_config *parse_ok(const char *text)
{
    zp_config *cfg = new_cfg();
    char err[512];
    int rc = zp_config_parse(cfg, text, "cluster.conf", err, sizeof(err));
    ck_assert_msg(rc == ZEPS_OK, "parse failed: %s (%s)", zeps_errname(rc), err);
    ck_assert_str_eq(err, "");
    return cfg;
}

#endif
