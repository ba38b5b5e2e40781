/*
 * test_config_doc.c - docs/configuration.md against the key tables of
 * common/config_keys.c, so that the page cannot drift from the code.
 *
 * Each section and group of the page ("## `cluster` section", "### `ctr`
 * group", ...) has a table whose rows are "| `key` | type | default |
 * allowed | meaning |". For every key of zp_config_keys_sections (walking
 * the nested groups) the test wants exactly one row under its section, and
 * no row for a key the tables lack; then, per row: the type column names
 * the key's kind; the first code span of the default column is the value
 * zp_config_keys_defaults() sets (a required key says "required"); the
 * allowed column names every choice of a choice key and no other quoted
 * word, and the bounds of a numeric key (its imin/imax or fmin/fmax, a bound
 * that depends on `workers` excepted). The page is read from
 * $ZEPS_SOURCE_DIR (set by ctest).
 */
#include "check_main.h"
#include "config.h"
#include "config_int.h"

#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 256

/* One table row of the page: its section path and its cells. */
typedef struct doc_row {
    char path[160]; /* "cluster.weighting.lambda" */
    char type[64];  /* the type cell */
    char dflt[256]; /* the default cell */
    char allowed[512];
    int line;
    int matched;
} doc_row;

typedef struct doc {
    doc_row rows[MAX_ROWS];
    int nrows;
} doc;

static char *read_page(void)
{
    const char *src = getenv("ZEPS_SOURCE_DIR");
    ck_assert_msg(src != NULL, "ZEPS_SOURCE_DIR is not set (run through ctest)");
    char path[1024];
    snprintf(path, sizeof(path), "%s/docs/configuration.md", src);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    ck_assert_msg(n < sizeof(text) - 1, "%s is larger than the test's buffer", path);
    text[n] = '\0';
    return text;
}

/* The first `code span` of s into out ("" when none). */
static void first_span(const char *s, char *out, size_t len)
{
    out[0] = '\0';
    const char *a = strchr(s, '`');
    const char *b = a ? strchr(a + 1, '`') : NULL;
    if (b != NULL && (size_t)(b - a) <= len)
        snprintf(out, len, "%.*s", (int)(b - a - 1), a + 1);
}

/* A heading names the section its table belongs to: "## `cluster` section",
 * "### `weighting` group" (a group of cluster unless written with its
 * section, "`training.ctr`"). Other headings end the section. */
static void heading(const char *line, char *section, size_t len)
{
    char span[48];
    first_span(line, span, sizeof(span));
    section[0] = '\0';
    if (span[0] == '\0')
        return;
    if (strstr(line, " section") != NULL || strchr(span, '.') != NULL)
        snprintf(section, len, "%s", span);
    else if (strstr(line, " group") != NULL)
        snprintf(section, len, "cluster.%s", span);
}

/* Copy cell i (0 = the key) of a "| a | b | ..." line; a `|` inside a code
 * span or escaped as "\|" does not split. */
static void cell(const char *line, int i, char *out, size_t len)
{
    int k = -1;
    bool code = false;
    const char *start = NULL;
    for (const char *p = line; *p != '\0'; p++) {
        if (*p == '`')
            code = !code;
        if (*p != '|' || code || (p > line && p[-1] == '\\'))
            continue;
        if (k == i) {
            snprintf(out, len, "%.*s", (int)(p - start), start);
            return;
        }
        k++;
        start = p + 1;
    }
    out[0] = '\0';
}

static void parse_doc(doc *d, char *text)
{
    char section[64] = "";
    int lineno = 0;
    d->nrows = 0;
    bool fenced = false;
    for (char *line = text, *next; line != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        lineno++;
        if (strncmp(line, "```", 3) == 0)
            fenced = !fenced;
        if (fenced)
            continue;
        if (line[0] == '#') {
            heading(line, section, sizeof(section));
            continue;
        }
        if (section[0] == '\0' || strncmp(line, "| `", 3) != 0)
            continue;
        ck_assert_int_lt(d->nrows, MAX_ROWS);
        doc_row *r = &d->rows[d->nrows++];
        char key[64], c0[128];
        cell(line, 0, c0, sizeof(c0));
        first_span(c0, key, sizeof(key));
        snprintf(r->path, sizeof(r->path), "%s.%s", section, key);
        cell(line, 1, r->type, sizeof(r->type));
        cell(line, 2, r->dflt, sizeof(r->dflt));
        cell(line, 3, r->allowed, sizeof(r->allowed));
        r->line = lineno;
    }
}

/* Numbers written in a cell: 10, -1, −1 (U+2212), 1e-8, 2^40, 2^63−1. */
static int numbers(const char *s, double *out, int max)
{
    int n = 0;
    for (const char *p = s; *p != '\0' && n < max;) {
        int neg = 0;
        if (*p == '-' && p[1] >= '0' && p[1] <= '9')
            neg = 1, p++;
        else if (strncmp(p, "\xe2\x88\x92", 3) == 0 && p[3] >= '0' && p[3] <= '9')
            neg = 1, p += 3;
        if (*p < '0' || *p > '9' || (p > s && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z')))) {
            p++;
            continue;
        }
        char *end;
        double v = strtod(p, &end);
        if (*end == '^') {
            v = pow(v, strtod(end + 1, &end));
            if (strncmp(end,
                        "\xe2\x88\x92"
                        "1",
                        4) == 0 ||
                strncmp(end, "-1", 2) == 0)
                v -= 1, end += end[0] == '-' ? 2 : 4;
        }
        out[n++] = neg ? -v : v;
        p = end;
    }
    return n;
}

static bool has_number(const char *cell_text, double v)
{
    double got[32];
    int n = numbers(cell_text, got, 32);
    for (int i = 0; i < n; i++)
        if (got[i] == v || fabs(got[i] - v) <= 1e-9 * fabs(v))
            return true;
    return false;
}

static const char *kind_type(key_kind k)
{
    switch (k) {
    case K_INT:
    case K_UINT64:
    case K_MEGABYTES:
        return "int";
    case K_FLOAT:
        return "float";
    case K_BOOL:
        return "bool";
    case K_RANKS:
        return "array of ints";
    case K_ENDPOINTS:
        return "array of strings";
    case K_GROUP:
        return "group";
    default:
        return "string";
    }
}

/* The default of k in cfg, written as the page writes it in a code span. */
static void default_text(const zp_config *cfg, const key_spec *k, char *out, size_t len)
{
    const char *f = (const char *)cfg + k->off;
    switch (k->kind) {
    case K_INT:
        snprintf(out, len, "%d", *(const int *)f);
        break;
    case K_UINT64:
        snprintf(out, len, "%llu", (unsigned long long)*(const uint64_t *)f);
        break;
    case K_MEGABYTES:
        snprintf(out, len, "%llu", (unsigned long long)(*(const uint64_t *)f >> 20));
        break;
    case K_FLOAT:
        snprintf(out, len, "%g", *(const double *)f);
        break;
    case K_BOOL:
        snprintf(out, len, "%s", *(const bool *)f ? "true" : "false");
        break;
    case K_STRING:
    case K_CHOICE:
        snprintf(out, len, "\"%s\"", f);
        break;
    case K_ENUM:
        snprintf(out, len, "\"%s\"", k->choices[*(const int *)f]);
        break;
    case K_FLAG:
        snprintf(out, len, "\"%s\"", k->choices[*(const bool *)f ? 1 : 0]);
        break;
    case K_RANKS:
        snprintf(out, len, "[]");
        break;
    default:
        out[0] = '\0';
    }
}

/* "" when the row agrees with the key, else what differs. */
static void compare(const zp_config *cfg, const key_spec *k, const doc_row *r, char *why,
                    size_t len)
{
    why[0] = '\0';
    if (strstr(r->type, kind_type(k->kind)) == NULL) {
        snprintf(why, len, "type '%s', want '%s'", r->type, kind_type(k->kind));
        return;
    }
    if (k->required) {
        if (strstr(r->dflt, "required") == NULL)
            snprintf(why, len, "default '%s' does not say required", r->dflt);
        return;
    }
    char want[300], got[256];
    default_text(cfg, k, want, sizeof(want));
    first_span(r->dflt, got, sizeof(got));
    bool same = strcmp(want, got) == 0;
    if (k->kind == K_FLOAT) {
        char *end;
        double v = strtod(got, &end);
        same = got[0] != '\0' && *end == '\0' && v == *(const double *)((const char *)cfg + k->off);
    }
    if (want[0] != '\0' && !same) {
        snprintf(why, len, "default `%s`, the code's is `%s`", got, want);
        return;
    }
    if (k->choices != NULL) {
        int nq = 0;
        for (const char *p = r->allowed; (p = strstr(p, "`\"")) != NULL; p += 2)
            nq++;
        int nc = 0;
        for (; k->choices[nc] != NULL; nc++) {
            char q[80];
            snprintf(q, sizeof(q), "`\"%s\"`", k->choices[nc]);
            if (strstr(r->allowed, q) == NULL) {
                snprintf(why, len, "allowed does not name %s", q);
                return;
            }
        }
        if (nq != nc)
            snprintf(why, len, "allowed names %d choices, the code has %d", nq, nc);
        return;
    }
    bool by_workers = strstr(r->allowed, "workers") != NULL;
    if (k->kind == K_INT || k->kind == K_UINT64 || k->kind == K_MEGABYTES) {
        bool max_ok = by_workers || has_number(r->allowed, (double)k->imax) ||
                      (k->imax == LLONG_MAX && strstr(r->allowed, "\xe2\x89\xa5") != NULL);
        if (!has_number(r->allowed, (double)k->imin) || !max_ok)
            snprintf(why, len, "allowed '%s', the code's range is %lld..%lld", r->allowed, k->imin,
                     k->imax);
    } else if (k->kind == K_FLOAT) {
        bool max_ok = isinf(k->fmax) || has_number(r->allowed, k->fmax);
        if (!has_number(r->allowed, k->fmin) || !max_ok)
            snprintf(why, len, "allowed '%s', the code's range is %g..%g", r->allowed, k->fmin,
                     k->fmax);
    }
}

/* Check the keys of one section against the rows, recursing into groups;
 * returns the number of keys that disagree (each printed). */
static int check_section(const zp_config *cfg, doc *d, const char *prefix, const section_spec *s)
{
    int bad = 0;
    for (size_t i = 0; i < s->nkeys; i++) {
        const key_spec *k = &s->keys[i];
        char path[160];
        snprintf(path, sizeof(path), "%s.%s", prefix, k->name);
        doc_row *row = NULL;
        for (int j = 0; j < d->nrows; j++)
            if (strcmp(d->rows[j].path, path) == 0)
                row = &d->rows[j], row->matched++;
        char why[700] = "no row in its section's table";
        if (row != NULL)
            compare(cfg, k, row, why, sizeof(why));
        if (why[0] != '\0') {
            fprintf(stderr, "docs/configuration.md:%d: '%s': %s\n", row ? row->line : 0, path, why);
            bad++;
        }
        if (k->kind == K_GROUP)
            bad += check_section(cfg, d, path, k->group);
    }
    return bad;
}

/* Every key of config_keys.c has its row, true to the code, and every row
 * its key. Mutation: a default, a bound or a choice changed in
 * config_keys.c, or a key added without a row, fails here. */
START_TEST(every_key_documented)
{
    static doc d;
    parse_doc(&d, read_page());
    ck_assert_int_ge(d.nrows, 80); /* the page was read and its tables found */
    zp_config *cfg = calloc(1, sizeof(*cfg));
    zp_config_keys_defaults(cfg);
    int bad = 0;
    for (int s = 0; s < ZP_CONFIG_NSECTIONS; s++)
        bad += check_section(cfg, &d, zp_config_keys_sections[s].name, &zp_config_keys_sections[s]);
    for (int j = 0; j < d.nrows; j++) {
        if (d.rows[j].matched == 1)
            continue;
        fprintf(stderr, "docs/configuration.md:%d: row '%s' %s\n", d.rows[j].line, d.rows[j].path,
                d.rows[j].matched ? "appears twice" : "names no key of config_keys.c");
        bad++;
    }
    free(cfg);
    ck_assert_msg(bad == 0, "%d rows of docs/configuration.md disagree with the code", bad);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_doc");
    TCase *tc = tcase_create("doc");
    tcase_add_test(tc, every_key_documented);
    suite_add_tcase(s, tc);
    return zt_run_suite(s);
}
