/*
 * ctl_json.c - see ctl_json.h.
 */
#include "ctl_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

char *zp_ctl_json_slurp(const char *path, size_t max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = zp_alloc(max + 1);
    size_t n = fread(text, 1, max, f);
    fclose(f);
    text[n] = '\0';
    return text;
}

double zp_ctl_json_number(const char *text, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    for (const char *p = strstr(text, pat); p; p = strstr(p + 1, pat)) {
        const char *q = p + strlen(pat);
        q += strspn(q, " \t\r\n");
        if (*q != ':')
            continue;
        q += 1 + strspn(q + 1, " \t\r\n");
        char *end;
        double v = strtod(q, &end);
        return end == q ? NAN : v;
    }
    return NAN;
}
