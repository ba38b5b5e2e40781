/*
 * ctl_json.h - reading the flat JSON files zeps writes itself (a worker's
 * result, `zepsctl local`'s summary, `zepsctl bench --json`). Their layout
 * is fixed by zeps, so a key is found by strstr and its number read with
 * strtod; no JSON library is needed or pretended.
 */
#ifndef ZP_CTL_JSON_H
#define ZP_CTL_JSON_H

#include <stddef.h>

/* The whole file at path (at most max bytes), NUL-terminated; the caller
 * frees it. NULL if it cannot be opened. */
char *zp_ctl_json_slurp(const char *path, size_t max);

/* The number after the first "key": at or after text; NAN if the key is
 * absent or its value is not a number (null). */
double zp_ctl_json_number(const char *text, const char *key);

#endif
