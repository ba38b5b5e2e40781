/*
 * ctr_data.h - click-log readers for the ctr model, as an ops table.
 *
 * A reader turns one text line into an example: a 0/1 label, a fixed
 * number of dense features and a variable number of (u64 id, weight)
 * features. Two formats:
 *
 *   criteo  label \t I1..I13 \t C1..C26 (40 tab-separated fields; empty =
 *           missing). Dense feature j = log(1 + I_j) for I_j > 0, else 0.
 *           Every categorical field gives one id, weight 1: a field-aware
 *           hash of (field, value) - the value's 32-bit hex number or, for
 *           any other string, its xxHash - through zp_sparse_hash_id, so one string
 *           in two fields gives two ids, and an empty field its own
 *           "missing in field f" id.
 *   libsvm  label idx:val idx:val ... (label 0/1 or -1/+1); the feature
 *           index is the id, val its weight; no dense features.
 *
 * Examples are stored compactly: all ids in one array with per-example
 * offsets (CSR), weights beside them, labels and dense features in flat
 * arrays - no allocation per example. A worker loads only its partition,
 * lines i with i mod nparts == part.
 */
#ifndef ZP_CTR_DATA_H
#define ZP_CTR_DATA_H

#include <stddef.h>
#include <stdint.h>

#define ZP_CTR_MAX_DENSE 64

typedef struct zp_ctr_data {
    size_t n;            /* examples */
    int ndense;          /* dense features per example */
    float *label;        /* n, 0 or 1 */
    float *dense;        /* n * ndense */
    size_t *off;         /* n + 1: example i's ids are ids[off[i] .. off[i+1]) */
    uint64_t *ids;       /* off[n] */
    float *val;          /* off[n]: the weight of each id; NULL when all are 1 (criteo) */
    size_t cap, idcap;   /* allocated examples and ids */
    int weighted;        /* val is kept */
    uint64_t file_lines; /* lines of the whole file (every partition, empty ones too) */
} zp_ctr_data;

/* A format. parse() appends one line (len bytes, no newline, not
 * terminated) to d; on a malformed line it returns ZEPS_EDATA with what is
 * wrong in why (the caller adds file and line) and leaves d unchanged. */
typedef struct zp_ctr_reader_ops {
    const char *name;
    int ndense;
    int weighted; /* ids carry weights (else every weight is 1 and val stays NULL) */
    int (*parse)(zp_ctr_data *d, const char *line, size_t len, char *why, size_t whylen);
} zp_ctr_reader_ops;

extern const zp_ctr_reader_ops zp_ctr_data_criteo_ops;
extern const zp_ctr_reader_ops zp_ctr_data_libsvm_ops;

/* The reader called `name` ("criteo", "libsvm"), or NULL. */
const zp_ctr_reader_ops *zp_ctr_data_reader_find(const char *name);

/* An empty data set for `ndense` dense features, with per-id weights if
 * `weighted`. */
zp_ctr_data *zp_ctr_data_new(int ndense, int weighted);
void zp_ctr_data_destroy(zp_ctr_data **dp);

/* Read lines i = part, part + nparts, ... of the file at `path` (at most
 * max_examples of them; 0 = no limit) with `ops`. Empty lines are skipped
 * (they count as lines). The whole file is read either way, and its line
 * count kept in file_lines, so every worker knows the largest partition. On success *out owns the
 * data. On error returns ZEPS_EDATA (malformed line: "path:line: what") or ZEPS_EIO (cannot read)
 * with a message in err. */
int zp_ctr_data_load(zp_ctr_data **out, const zp_ctr_reader_ops *ops, const char *path, int part,
                     int nparts, uint64_t max_examples, char *err, size_t errlen);

/* The id criteo gives the value string s (len bytes) of categorical field
 * `field` (0-based; len 0 = missing). */
uint64_t zp_ctr_data_criteo_id(int field, const char *s, size_t len);

#endif
