/*
 * ctr_data.c - the criteo and libsvm readers (ctr_data.h) and the compact
 * example store they fill.
 *
 * Parsing is by hand over the line's bytes (no strtok, no sscanf): a
 * Criteo day is ~200M lines, and the reader must not be the slow part of
 * training. Each line is parsed into a small scratch area first and only
 * appended when it is wholly valid, so a bad line leaves the store as it
 * was and the message can name the field that is wrong.
 */
#include "ctr_data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "alloc.h"
#include "errors.h"
#include "sparse_hash.h"
#include "zeps_errors.h"

#define CRITEO_NDENSE  13
#define CRITEO_NCAT    26
#define CRITEO_NFIELDS (1 + CRITEO_NDENSE + CRITEO_NCAT)
/* Seed of the field-aware id hash ("zeps_ctr"). */
#define CTR_ID_SEED 0x7a6570735f637472ull
#define ID_MISSING  (1ull << 40)
#define ID_STRING   (1ull << 41)

zp_ctr_data *zp_ctr_data_new(int ndense, int weighted)
{
    zp_ctr_data *d = zp_alloc_zeroed(1, sizeof(*d));
    d->ndense = ndense;
    d->weighted = weighted;
    d->off = zp_alloc_zeroed(1, sizeof(size_t));
    return d;
}

void zp_ctr_data_destroy(zp_ctr_data **dp)
{
    if (!dp || !*dp)
        return;
    zp_ctr_data *d = *dp;
    free(d->label);
    free(d->dense);
    free(d->off);
    free(d->ids);
    free(d->val);
    free(d);
    *dp = NULL;
}

/* Room for one more example with `nids` ids; grows geometrically. */
static void reserve(zp_ctr_data *d, size_t nids)
{
    if (d->n + 1 > d->cap) {
        d->cap = d->cap ? 2 * d->cap : 1024;
        d->label = zp_alloc_resize(d->label, d->cap * sizeof(float));
        d->dense =
            zp_alloc_resize(d->dense, d->cap * (size_t)(d->ndense ? d->ndense : 1) * sizeof(float));
        d->off = zp_alloc_resize(d->off, (d->cap + 1) * sizeof(size_t));
    }
    size_t need = d->off[d->n] + nids;
    if (need > d->idcap) {
        size_t c = d->idcap ? 2 * d->idcap : 16384;
        while (c < need)
            c *= 2;
        d->idcap = c;
        d->ids = zp_alloc_resize(d->ids, c * sizeof(uint64_t));
        if (d->weighted)
            d->val = zp_alloc_resize(d->val, c * sizeof(float));
    }
}

static void append(zp_ctr_data *d, float label, const float *dense, const uint64_t *ids,
                   const float *val, size_t nids)
{
    reserve(d, nids);
    size_t i = d->n, o = d->off[i];
    d->label[i] = label;
    if (d->ndense)
        memcpy(&d->dense[i * (size_t)d->ndense], dense, (size_t)d->ndense * sizeof(float));
    memcpy(&d->ids[o], ids, nids * sizeof(uint64_t));
    if (d->weighted)
        memcpy(&d->val[o], val, nids * sizeof(float));
    d->off[i + 1] = o + nids;
    d->n++;
}

/* A short, printable excerpt of s for messages. */
static const char *excerpt(const char *s, size_t len, char *buf, size_t buflen)
{
    size_t n = len < buflen - 4 ? len : buflen - 4;
    for (size_t i = 0; i < n; i++)
        buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    if (n < len)
        memcpy(buf + n, "...", 4);
    else
        buf[n] = '\0';
    return buf;
}

uint64_t zp_ctr_data_criteo_id(int field, const char *s, size_t len)
{
    uint64_t f = (uint64_t)(field + 1) << 32;
    if (len == 0)
        return zp_sparse_hash_id(f | ID_MISSING, CTR_ID_SEED);
    if (len <= 8) {
        uint64_t v = 0;
        size_t i = 0;
        for (; i < len; i++) {
            char c = s[i];
            int x = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (x < 0)
                break;
            v = v << 4 | (uint64_t)x;
        }
        if (i == len)
            return zp_sparse_hash_id(f | v, CTR_ID_SEED);
    }
    /* not a 32-bit hex value: hash the bytes, keeping the field apart */
    uint64_t h = (uint64_t)XXH3_64bits_withSeed(s, len, (XXH64_hash_t)(field + 1));
    return zp_sparse_hash_id(h ^ f ^ ID_STRING, CTR_ID_SEED);
}

/* An optional '-' and 1..18 digits. */
static int parse_int(const char *s, size_t len, long long *out)
{
    size_t i = 0;
    int neg = 0;
    if (len > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == len || len - i > 18)
        return -1;
    long long v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

static int criteo_parse(zp_ctr_data *d, const char *line, size_t len, char *why, size_t whylen)
{
    const char *start[CRITEO_NFIELDS];
    size_t flen[CRITEO_NFIELDS];
    int nf = 0;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    size_t a = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && line[i] != '\t')
            continue;
        if (nf < CRITEO_NFIELDS) {
            start[nf] = line + a;
            flen[nf] = i - a;
        }
        nf++;
        a = i + 1;
    }
    if (nf != CRITEO_NFIELDS)
        return zp_errors_set(why, whylen, ZEPS_EDATA,
                             "%d tab-separated fields, expected %d (label, 13 integer, 26 "
                             "categorical)",
                             nf, CRITEO_NFIELDS);
    char ex[48];
    float label;
    if (flen[0] == 1 && (start[0][0] == '0' || start[0][0] == '1'))
        label = (float)(start[0][0] - '0');
    else
        return zp_errors_set(why, whylen, ZEPS_EDATA, "bad label '%s' (expected 0 or 1)",
                             excerpt(start[0], flen[0], ex, sizeof(ex)));
    float dense[CRITEO_NDENSE];
    for (int j = 0; j < CRITEO_NDENSE; j++) {
        const char *s = start[1 + j];
        size_t l = flen[1 + j];
        long long v = 0;
        if (l > 0 && parse_int(s, l, &v) != 0)
            return zp_errors_set(why, whylen, ZEPS_EDATA, "field %d (I%d): bad integer '%s'", 2 + j,
                                 1 + j, excerpt(s, l, ex, sizeof(ex)));
        dense[j] = v > 0 ? (float)log1p((double)v) : 0.0f;
    }
    uint64_t ids[CRITEO_NCAT];
    float val[CRITEO_NCAT];
    for (int c = 0; c < CRITEO_NCAT; c++) {
        ids[c] =
            zp_ctr_data_criteo_id(c, start[1 + CRITEO_NDENSE + c], flen[1 + CRITEO_NDENSE + c]);
        val[c] = 1.0f;
    }
    append(d, label, dense, ids, val, CRITEO_NCAT);
    return 0;
}

/* libsvm: label, then index:value pairs separated by blanks. */
static int libsvm_parse(zp_ctr_data *d, const char *line, size_t len, char *why, size_t whylen)
{
    enum { MAXF = 4096 };
    uint64_t ids[MAXF];
    float val[MAXF];
    size_t n = 0;
    char tok[64], ex[48];
    float label = 0;
    int have_label = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
            i++;
        if (i == len)
            break;
        size_t a = i;
        while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            i++;
        size_t tl = i - a;
        if (tl >= sizeof(tok))
            return zp_errors_set(why, whylen, ZEPS_EDATA, "token '%s' too long",
                                 excerpt(line + a, tl, ex, sizeof(ex)));
        memcpy(tok, line + a, tl);
        tok[tl] = '\0';
        if (!have_label) {
            char *end;
            double y = strtod(tok, &end);
            if (*end || !(y == 0 || y == 1 || y == -1))
                return zp_errors_set(why, whylen, ZEPS_EDATA,
                                     "bad label '%s' (expected 0/1 or -1/+1)", tok);
            label = y > 0 ? 1.0f : 0.0f;
            have_label = 1;
            continue;
        }
        if (tok[0] < '0' || tok[0] > '9')
            return zp_errors_set(why, whylen, ZEPS_EDATA, "bad feature '%s' (expected index:value)",
                                 tok);
        char *colon;
        errno = 0;
        unsigned long long idx = strtoull(tok, &colon, 10);
        if (errno || *colon != ':')
            return zp_errors_set(why, whylen, ZEPS_EDATA, "bad feature '%s' (expected index:value)",
                                 tok);
        char *end;
        double v = strtod(colon + 1, &end);
        if (end == colon + 1 || *end || !isfinite(v))
            return zp_errors_set(why, whylen, ZEPS_EDATA, "bad value in '%s' (expected a number)",
                                 tok);
        if (n == MAXF)
            return zp_errors_set(why, whylen, ZEPS_EDATA, "more than %d features", MAXF);
        ids[n] = idx;
        val[n++] = (float)v;
    }
    if (!have_label)
        return zp_errors_set(why, whylen, ZEPS_EDATA, "no label");
    append(d, label, NULL, ids, val, n);
    return 0;
}

const zp_ctr_reader_ops zp_ctr_data_criteo_ops = {
    .name = "criteo",
    .ndense = CRITEO_NDENSE,
    .weighted = 0,
    .parse = criteo_parse,
};

const zp_ctr_reader_ops zp_ctr_data_libsvm_ops = {
    .name = "libsvm",
    .ndense = 0,
    .weighted = 1,
    .parse = libsvm_parse,
};

const zp_ctr_reader_ops *zp_ctr_data_reader_find(const char *name)
{
    static const zp_ctr_reader_ops *const readers[] = {&zp_ctr_data_criteo_ops,
                                                       &zp_ctr_data_libsvm_ops};
    for (size_t i = 0; name && i < sizeof(readers) / sizeof(readers[0]); i++)
        if (strcmp(readers[i]->name, name) == 0)
            return readers[i];
    return NULL;
}

int zp_ctr_data_load(zp_ctr_data **out, const zp_ctr_reader_ops *ops, const char *path, int part,
                     int nparts, uint64_t max_examples, char *err, size_t errlen)
{
    if (nparts < 1 || part < 0 || part >= nparts)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "partition %d of %d", part, nparts);
    FILE *f = fopen(path, "r");
    if (!f)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cannot open %s: %s", path, strerror(errno));
    zp_ctr_data *d = zp_ctr_data_new(ops->ndense, ops->weighted);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint64_t lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        /* past the cap, lines are still counted: file_lines must be the
         * same on every worker */
        if ((lineno - 1) % (uint64_t)nparts != (uint64_t)part ||
            (max_examples && d->n >= max_examples))
            continue;
        if (len > 0 && line[len - 1] == '\n')
            len--;
        if (len == 0)
            continue;
        char why[256];
        if (ops->parse(d, line, (size_t)len, why, sizeof(why)) != 0) {
            rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s:%llu: %s", path,
                               (unsigned long long)lineno, why);
            break;
        }
    }
    d->file_lines = lineno;
    if (rc == 0 && ferror(f))
        rc = zp_errors_set(err, errlen, ZEPS_EIO, "reading %s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (rc) {
        zp_ctr_data_destroy(&d);
        return rc;
    }
    *out = d;
    return 0;
}
