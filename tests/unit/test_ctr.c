/*
 * test_ctr.c - the ctr workload without servers: the Criteo-format
 * generator (deterministic, its distinct-id count agrees with what the
 * reader finds), the criteo and libsvm readers (good lines, missing fields,
 * every malformed case named with its file and line, partitions), AUC
 * against the quadratic pair count with ties, the model's gradient against
 * finite differences, and an in-process training run (rows in a local hash
 * map, tests/support/ctr_local.c) that gets within 0.02 AUC of the hidden model and
 * well above the dense-only baseline.
 */
#include "check_main.h"
#include "scratch.h"
#include "criteo_gen.h"
#include "ctr_data.h"
#include "ctr_local.h"
#include "ctr_metrics.h"
#include "ctr_math.h"
#include "model.h"
#include "rng.h"
#include "zeps_errors.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh temporary directory; removed (with its files) by rmdir_all. */
static void make_dir(char *buf, size_t len)
{
    ck_assert_int_eq(zt_scratch_dir(buf, len, "ctr"), 0);
}

static void rmdir_all(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static zp_criteo_truth gen(const char *dir, uint64_t train, uint64_t test, uint64_t seed,
                           double scale)
{
    zp_criteo_gen_opts o;
    zp_criteo_gen_defaults(&o);
    o.out_dir = dir;
    o.train = train;
    o.test = test;
    o.seed = seed;
    o.scale = scale;
    zp_criteo_truth t;
    char err[1200];
    int rc = zp_criteo_gen_write(&o, &t, err, sizeof(err));
    ck_assert_msg(rc == 0, "generate: %s", err);
    return t;
}

static int files_equal(const char *a, const char *b)
{
    size_t la, lb;
    char *x = read_all(a, &la), *y = read_all(b, &lb);
    int eq = la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return eq;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static zp_ctr_data *load(const char *dir, const char *name, const zp_ctr_reader_ops *ops)
{
    char path[600], err[1500];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    zp_ctr_data *d = NULL;
    int rc = zp_ctr_data_load(&d, ops, path, 0, 1, 0, err, sizeof(err));
    ck_assert_msg(rc == 0, "load %s: %s", path, err);
    return d;
}

START_TEST(generator_deterministic)
{
    char a[64], b[64], c[64], pa[128], pb[128];
    make_dir(a, sizeof(a));
    make_dir(b, sizeof(b));
    make_dir(c, sizeof(c));
    zp_criteo_truth ta = gen(a, 3000, 1000, 5, 0.01);
    zp_criteo_truth tb = gen(b, 3000, 1000, 5, 0.01);
    gen(c, 3000, 1000, 6, 0.01);
    const char *files[] = {"train.txt", "test.txt"};
    for (int i = 0; i < 2; i++) {
        snprintf(pa, sizeof(pa), "%s/%s", a, files[i]);
        snprintf(pb, sizeof(pb), "%s/%s", b, files[i]);
        ck_assert_msg(files_equal(pa, pb), "%s differs for the same seed", files[i]);
        snprintf(pb, sizeof(pb), "%s/%s", c, files[i]);
        ck_assert_msg(!files_equal(pa, pb), "%s equal for different seeds", files[i]);
    }
    ck_assert(ta.truth_auc == tb.truth_auc && ta.distinct_total == tb.distinct_total);

    /* The reader finds exactly the distinct (field, value) pairs the
     * generator counted, and the labels it drew. */
    zp_ctr_data *tr = load(a, "train.txt", &zp_ctr_data_criteo_ops);
    zp_ctr_data *te = load(a, "test.txt", &zp_ctr_data_criteo_ops);
    ck_assert_uint_eq(tr->n, 3000);
    ck_assert_uint_eq(te->n, 1000);
    size_t n = tr->off[tr->n] + te->off[te->n];
    uint64_t *ids = malloc(n * sizeof(uint64_t));
    memcpy(ids, tr->ids, tr->off[tr->n] * sizeof(uint64_t));
    memcpy(ids + tr->off[tr->n], te->ids, te->off[te->n] * sizeof(uint64_t));
    qsort(ids, n, sizeof(uint64_t), cmp_u64);
    size_t distinct = n > 0;
    for (size_t i = 1; i < n; i++)
        distinct += ids[i] != ids[i - 1];
    ck_assert_uint_eq(distinct, ta.distinct_total);
    double pos = 0;
    for (size_t i = 0; i < tr->n; i++)
        pos += tr->label[i];
    ck_assert_double_eq_tol(pos / 3000.0, ta.pos_rate_train, 1e-9);
    ck_assert(ta.truth_auc > ta.dense_auc + 0.03);
    /* truth.json is there and names the figures */
    size_t len;
    snprintf(pa, sizeof(pa), "%s/truth.json", a);
    char *json = read_all(pa, &len);
    ck_assert_ptr_nonnull(strstr(json, "\"truth_test_auc\""));
    ck_assert_ptr_nonnull(strstr(json, "\"dense_only_test_auc\""));
    ck_assert_ptr_nonnull(strstr(json, "\"distinct_ids_total\""));
    free(json);
    free(ids);
    zp_ctr_data_destroy(&tr);
    zp_ctr_data_destroy(&te);
    rmdir_all(a);
    rmdir_all(b);
    rmdir_all(c);
}
END_TEST

START_TEST(generator_bad_options)
{
    zp_criteo_gen_opts o;
    zp_criteo_gen_defaults(&o);
    o.out_dir = "/tmp";
    char err[256];
    zp_criteo_truth t;
    o.zipf = 1.0;
    ck_assert_int_eq(zp_criteo_gen_write(&o, &t, err, sizeof(err)), ZEPS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "zipf"));
    o.zipf = 1.1;
    o.out_dir = "/proc/zeps-no-such-dir/x";
    ck_assert_int_eq(zp_criteo_gen_write(&o, &t, err, sizeof(err)), ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/proc/zeps-no-such-dir/x"));
}
END_TEST

/* A criteo line: label, 13 ints, 26 categorical values. */
static void criteo_line(char *buf, size_t len, const char *label, const char *const ints[13],
                        const char *const cats[26])
{
    size_t n = (size_t)snprintf(buf, len, "%s", label);
    for (int j = 0; j < 13; j++)
        n += (size_t)snprintf(buf + n, len - n, "\t%s", ints[j]);
    for (int j = 0; j < 26; j++)
        n += (size_t)snprintf(buf + n, len - n, "\t%s", cats[j]);
    snprintf(buf + n, len - n, "\n");
}

static const char *const good_ints[13] = {"5", "",  "-1", "0", "100", "1", "2",
                                          "3", "4", "5",  "6", "7",   "8"};
static const char *const good_cats[26] = {
    "0000abcd", "0000abcd", "",  "",  "deadbeef", "hello", "1", "2", "3",  "4",  "5",  "6",  "7",
    "8",        "9",        "a", "b", "c",        "d",     "e", "f", "10", "11", "12", "13", "14"};

START_TEST(reader_criteo_good)
{
    char dir[64], path[128], line[1024], text[8192] = "";
    make_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/c.txt", dir);
    for (int i = 0; i < 5; i++) {
        criteo_line(line, sizeof(line), i % 2 ? "1" : "0", good_ints, good_cats);
        strcat(text, line);
    }
    /* a CRLF line and an empty line are fine too */
    criteo_line(line, sizeof(line), "1", good_ints, good_cats);
    strcpy(line + strlen(line) - 1, "\r\n\n");
    strcat(text, line);
    zt_scratch_write(path, text);
    zp_ctr_data *d = load(dir, "c.txt", &zp_ctr_data_criteo_ops);
    ck_assert_uint_eq(d->n, 6);
    ck_assert_int_eq(d->ndense, 13);
    ck_assert(d->label[0] == 0.0f && d->label[1] == 1.0f && d->label[5] == 1.0f);
    ck_assert_float_eq_tol(d->dense[0], (float)log1p(5.0), 1e-6);
    ck_assert(d->dense[1] == 0.0f && d->dense[2] == 0.0f && d->dense[3] == 0.0f);
    ck_assert_float_eq_tol(d->dense[4], (float)log1p(100.0), 1e-6);
    ck_assert_uint_eq(d->off[1] - d->off[0], 26);
    const uint64_t *id = &d->ids[0];
    ck_assert(id[0] == zp_ctr_data_criteo_id(0, "0000abcd", 8));
    ck_assert(id[0] == zp_ctr_data_criteo_id(0, "abcd", 4)); /* the same hex value */
    ck_assert(id[0] != id[1]);                          /* same string, another field */
    ck_assert(id[2] == zp_ctr_data_criteo_id(2, "", 0) && id[2] != id[3]); /* missing per field */
    ck_assert(id[5] == zp_ctr_data_criteo_id(5, "hello", 5));
    ck_assert_ptr_null(d->val);  /* weights are all 1: not stored */
    for (int k = 0; k < 26; k++) /* every line has the same ids */
        ck_assert(d->ids[5 * 26 + k] == id[k]);
    zp_ctr_data_destroy(&d);

    /* partitions: lines 2 and 4 for part 1 of 2; at most 1 with a cap */
    char err[512];
    ck_assert_int_eq(zp_ctr_data_load(&d, &zp_ctr_data_criteo_ops, path, 1, 2, 0, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(d->n, 3); /* lines 2, 4, 6 */
    ck_assert(d->label[0] == 1.0f && d->label[1] == 1.0f);
    zp_ctr_data_destroy(&d);
    ck_assert_int_eq(zp_ctr_data_load(&d, &zp_ctr_data_criteo_ops, path, 0, 2, 1, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(d->n, 1);
    zp_ctr_data_destroy(&d);
    rmdir_all(dir);
}
END_TEST

/* Load a file of two good lines then `bad` as line 3; expect ZEPS_EDATA
 * naming path:3 and containing `want`. */
static void expect_bad(const zp_ctr_reader_ops *ops, const char *good, const char *bad,
                       const char *want)
{
    char dir[64], path[128], err[1500];
    make_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/bad.txt", dir);
    size_t n = strlen(good) * 2 + strlen(bad) + 2;
    char *text = malloc(n);
    snprintf(text, n, "%s%s%s\n", good, good, bad);
    zt_scratch_write(path, text);
    free(text);
    zp_ctr_data *d = NULL;
    int rc = zp_ctr_data_load(&d, ops, path, 0, 1, 0, err, sizeof(err));
    ck_assert_msg(rc == ZEPS_EDATA, "'%s' accepted", bad);
    ck_assert_ptr_null(d);
    char where[160];
    snprintf(where, sizeof(where), "%s:3: ", path);
    ck_assert_msg(strstr(err, where) != NULL, "'%s' not in '%s'", where, err);
    ck_assert_msg(strstr(err, want) != NULL, "'%s' not in '%s'", want, err);
    /* the partition without line 3 reads fine */
    rc = zp_ctr_data_load(&d, ops, path, 1, 2, 0, err, sizeof(err));
    ck_assert_msg(rc == 0, "part 1 of 2: %s", err);
    ck_assert_uint_eq(d->n, 1);
    zp_ctr_data_destroy(&d);
    rmdir_all(dir);
}

START_TEST(reader_criteo_malformed)
{
    char good[1024], bad[1024];
    criteo_line(good, sizeof(good), "1", good_ints, good_cats);
    const char *ints[13];
    const char *cats[26];
    memcpy(ints, good_ints, sizeof(ints));
    memcpy(cats, good_cats, sizeof(cats));

    /* wrong field counts: one missing, one extra */
    criteo_line(bad, sizeof(bad), "1", ints, cats);
    *strrchr(bad, '\t') = '\0';
    expect_bad(&zp_ctr_data_criteo_ops, good, bad, "39 tab-separated fields, expected 40");
    criteo_line(bad, sizeof(bad), "1", ints, cats);
    strcpy(bad + strlen(bad) - 1, "\tx");
    expect_bad(&zp_ctr_data_criteo_ops, good, bad, "41 tab-separated fields");
    expect_bad(&zp_ctr_data_criteo_ops, good, "1", "1 tab-separated fields");

    /* bad labels */
    const char *labels[] = {"2", "", "-1", "1.0", "yes"};
    for (int i = 0; i < 5; i++) {
        criteo_line(bad, sizeof(bad), labels[i], ints, cats);
        bad[strlen(bad) - 1] = '\0';
        expect_bad(&zp_ctr_data_criteo_ops, good, bad, "bad label");
    }
    /* bad integers, named by field */
    const char *nums[] = {"12x", "-", "1.5", "0x10", "1234567890123456789"};
    for (int i = 0; i < 5; i++) {
        ints[3] = nums[i];
        criteo_line(bad, sizeof(bad), "0", ints, cats);
        bad[strlen(bad) - 1] = '\0';
        char want[64];
        snprintf(want, sizeof(want), "field 5 (I4): bad integer '%s'", nums[i]);
        expect_bad(&zp_ctr_data_criteo_ops, good, bad, want);
    }
    /* a file that is not there */
    char err[512];
    zp_ctr_data *d = NULL;
    ck_assert_int_eq(zp_ctr_data_load(&d, &zp_ctr_data_criteo_ops, "/nonexistent/zeps.txt", 0, 1, 0,
                                      err, sizeof(err)),
                     ZEPS_EIO);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/zeps.txt"));
}
END_TEST

START_TEST(reader_libsvm)
{
    char dir[64], path[128];
    make_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/l.txt", dir);
    zt_scratch_write(path, "1 3:1 7:0.5\n-1 2:1\n+1\n0 5:2 5:1  9:-0.25\t\n");
    zp_ctr_data *d = load(dir, "l.txt", &zp_ctr_data_libsvm_ops);
    ck_assert_uint_eq(d->n, 4);
    ck_assert_int_eq(d->ndense, 0);
    ck_assert(d->label[0] == 1 && d->label[1] == 0 && d->label[2] == 1 && d->label[3] == 0);
    ck_assert_uint_eq(d->off[1], 2);
    ck_assert_uint_eq(d->off[2], 3);
    ck_assert_uint_eq(d->off[3], 3); /* no features */
    ck_assert_uint_eq(d->off[4], 6);
    ck_assert(d->ids[0] == 3 && d->ids[1] == 7 && d->val[1] == 0.5f);
    ck_assert(d->ids[5] == 9 && d->val[5] == -0.25f);
    zp_ctr_data_destroy(&d);
    rmdir_all(dir);

    const char *good = "1 3:1\n";
    expect_bad(&zp_ctr_data_libsvm_ops, good, "2 3:1", "bad label '2'");
    expect_bad(&zp_ctr_data_libsvm_ops, good, "0.5 3:1", "bad label");
    expect_bad(&zp_ctr_data_libsvm_ops, good, "1 3-1", "bad feature '3-1'");
    expect_bad(&zp_ctr_data_libsvm_ops, good, "1 x:1", "bad feature 'x:1'");
    expect_bad(&zp_ctr_data_libsvm_ops, good, "1 3:abc", "bad value in '3:abc'");
    expect_bad(&zp_ctr_data_libsvm_ops, good, "1 3:inf", "bad value");
    expect_bad(&zp_ctr_data_libsvm_ops, good, "1 3:", "bad value");
}
END_TEST

/* AUC by counting pairs: (positive above negative) + ties / 2. */
static double auc_pairs(const float *s, const float *y, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (y[i] > 0.5f && y[j] < 0.5f) {
                den += 1;
                num += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
            }
    return num / den;
}

START_TEST(auc_against_pair_count)
{
    enum { N = 2000 };
    static float s[N], y[N];
    zp_rng r;
    zp_rng_seed(&r, 11, 0, 0);
    for (int round = 0; round < 4; round++) {
        double grid = round == 0 ? 0 : round == 1 ? 0.5 : round == 2 ? 0.05 : 2.0;
        for (int i = 0; i < N; i++) {
            y[i] = zp_rng_uniform(&r) < 0.3 ? 1.0f : 0.0f;
            double v = zp_rng_normal(&r) + (y[i] > 0 ? 0.7 : 0.0);
            /* coarse grids make many ties, across labels too */
            s[i] = (float)(grid > 0 ? floor(v / grid) * grid : v);
        }
        double want = auc_pairs(s, y, N), got = zp_ctr_metrics_auc(s, y, N);
        ck_assert_msg(fabs(want - got) < 1e-12, "grid %g: %.15f vs %.15f", grid, got, want);
    }
    float s4[4] = {0.1f, 0.2f, 0.3f, 0.4f}, y4[4] = {0, 0, 1, 1};
    ck_assert_double_eq(zp_ctr_metrics_auc(s4, y4, 4), 1.0);
    float flat[4] = {1, 1, 1, 1};
    ck_assert_double_eq(zp_ctr_metrics_auc(flat, y4, 4), 0.5);
    float yb[4] = {1, 1, 0, 0};
    ck_assert_double_eq(zp_ctr_metrics_auc(s4, yb, 4), 0.0);
    float one[2] = {0, 0};
    ck_assert(isnan(zp_ctr_metrics_auc(s4, one, 2)));
    /* logloss from logits: log 2 at 0, and the direct formula elsewhere */
    float z[3] = {0.0f, 2.0f, -40.0f}, yz[3] = {1, 0, 0};
    double direct = (log(2.0) - log(1.0 - 1.0 / (1.0 + exp(-2.0))) + log1p(exp(-40.0))) / 3.0;
    ck_assert_double_eq_tol(zp_ctr_metrics_logloss(z, yz, 3), direct, 1e-12);
    /* z = 0 counts as a 0 prediction: only the third is right */
    ck_assert_double_eq_tol(zp_ctr_metrics_accuracy(z, yz, 3), 1.0 / 3.0, 1e-12);
}
END_TEST

/* Check every coordinate of the analytic gradient against central
 * differences of the mean loss, on criteo examples (weights 1, dense
 * features) and libsvm examples (weights != 1, repeated ids). */
static void grad_check(const zp_ctr_data *d, uint32_t dim)
{
    size_t ex[8];
    size_t nb = d->n < 8 ? d->n : 8;
    for (size_t i = 0; i < nb; i++)
        ex[i] = nb - 1 - i; /* not in file order */
    size_t np = zp_ctr_math_batch_positions(d, ex, nb);
    int nw = d->ndense + 1;
    const size_t W = 1 + (size_t)dim; /* a row: linear weight, then embedding */
    float *rows = malloc(np * W * sizeof(float)), *gr = malloc(np * W * sizeof(float));
    float dw[ZP_CTR_MAX_DENSE + 1], gd[ZP_CTR_MAX_DENSE + 1];
    zp_rng r;
    zp_rng_seed(&r, 3, dim, np);
    for (size_t i = 0; i < np * W; i++)
        rows[i] = (float)((i % W == 0 ? 0.3 : 0.4) * zp_rng_normal(&r));
    for (int j = 0; j < nw; j++)
        dw[j] = (float)(0.2 * zp_rng_normal(&r));
    zp_ctr_math_pass(d, ex, nb, dim, rows, dw, NULL, gr, 1.0, gd);
    /* row_scale multiplies the rows' gradient only (the model's nb) */
    float *g3 = malloc(np * W * sizeof(float)), gd3[ZP_CTR_MAX_DENSE + 1];
    zp_ctr_math_pass(d, ex, nb, dim, rows, dw, NULL, g3, 3.0, gd3);
    for (size_t i = 0; i < np * W; i++)
        ck_assert_msg(fabs(g3[i] - 3.0 * gr[i]) <= 1e-6 * fabs(3.0 * gr[i]), "row grad %zu", i);
    ck_assert_mem_eq(gd3, gd, (size_t)nw * sizeof(float));
    free(g3);
    float *params[2] = {rows, dw};
    const float *grads[2] = {gr, gd};
    size_t counts[2] = {np * W, (size_t)nw};
    const double h = 1e-2;
    double worst = 0;
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < counts[t]; i++) {
            float keep = params[t][i];
            params[t][i] = (float)(keep + h);
            double up = zp_ctr_math_pass(d, ex, nb, dim, rows, dw, NULL, NULL, 0, NULL);
            params[t][i] = (float)(keep - h);
            double dn = zp_ctr_math_pass(d, ex, nb, dim, rows, dw, NULL, NULL, 0, NULL);
            params[t][i] = keep;
            double fd = (up - dn) / (2 * h), an = grads[t][i];
            double e = fabs(fd - an) / (1e-4 + fabs(fd));
            worst = e > worst ? e : worst;
            ck_assert_msg(fabs(fd - an) <= 2e-3 * fabs(fd) + 2e-5,
                          "table %d coordinate %zu: analytic %g, finite difference %g", t, i, an,
                          fd);
        }
    free(rows);
    free(gr);
}

START_TEST(gradient_finite_differences)
{
    char dir[64], path[128];
    make_dir(dir, sizeof(dir));
    gen(dir, 20, 10, 9, 0.01);
    zp_ctr_data *c = load(dir, "test.txt", &zp_ctr_data_criteo_ops);
    grad_check(c, 4);
    grad_check(c, 1);
    zp_ctr_data_destroy(&c);
    snprintf(path, sizeof(path), "%s/l.txt", dir);
    zt_scratch_write(path, "1 3:1.5 7:0.5 3:1\n0 2:-1 9:2\n1 3:0.25\n0 4:1 5:1 6:1 7:1\n");
    zp_ctr_data *l = load(dir, "l.txt", &zp_ctr_data_libsvm_ops);
    grad_check(l, 3);
    zp_ctr_data_destroy(&l);
    rmdir_all(dir);
}
END_TEST

START_TEST(in_process_training)
{
    char dir[64];
    make_dir(dir, sizeof(dir));
    /* vocabularies at 1% of the Kaggle sizes: at 50k lines the values are
     * seen often enough to be learnt */
    zp_criteo_truth truth = gen(dir, 50000, 20000, 1, 0.01);
    zp_ctr_data *tr = load(dir, "train.txt", &zp_ctr_data_criteo_ops);
    zp_ctr_data *te = load(dir, "test.txt", &zp_ctr_data_criteo_ops);
    zt_ctr_local_opts o = {.dim = 8,
                           .epochs = 2,
                           .batch = 256,
                           .lr_sparse = 0.05,
                           .lr_emb = 0.003,
                           .lr_dense = 0.05,
                           .init_scale = 0.01,
                           .seed = 1};
    zt_ctr_local_result r;
    ck_assert_int_eq(zt_ctr_local_train(tr, te, &o, &r), 0);
    printf("in-process: AUC %.4f logloss %.4f (hidden model %.4f / %.4f, dense only %.4f / "
           "%.4f), %zu rows, %.1f s\n",
           r.auc, r.logloss, truth.truth_auc, truth.truth_logloss, truth.dense_auc,
           truth.dense_logloss, r.rows, r.seconds);
    ck_assert_msg(r.auc >= truth.truth_auc - 0.02, "AUC %.4f, hidden model %.4f", r.auc,
                  truth.truth_auc);
    ck_assert_msg(r.auc > truth.dense_auc + 0.03, "AUC %.4f, dense only %.4f", r.auc,
                  truth.dense_auc);
    ck_assert(r.logloss < truth.dense_logloss);
    ck_assert_uint_eq(r.rows, truth.distinct_total);
    zp_ctr_data_destroy(&tr);
    zp_ctr_data_destroy(&te);
    rmdir_all(dir);
}
END_TEST

/* The ctr model's minibatch of a step does not depend on the steps asked
 * before it: a worker resuming at a clock within an epoch (a restart from
 * a snapshot) reads what an uninterrupted one reads there (it read an
 * order never shuffled, and crashed). */
START_TEST(batch_pick_resumes_mid_epoch)
{
    char dir[64], path[96];
    make_dir(dir, sizeof(dir));
    gen(dir, 2000, 200, 1, 0.01);
    zp_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    snprintf(cfg.model, sizeof(cfg.model), "ctr");
    snprintf(cfg.ctr_format, sizeof(cfg.ctr_format), "criteo");
    snprintf(path, sizeof(path), "%s/train.txt", dir);
    snprintf(cfg.ctr_train_file, sizeof(cfg.ctr_train_file), "%s", path);
    snprintf(path, sizeof(path), "%s/test.txt", dir);
    snprintf(cfg.ctr_test_file, sizeof(cfg.ctr_test_file), "%s", path);
    snprintf(cfg.ctr_sparse_optimizer, sizeof(cfg.ctr_sparse_optimizer), "adagrad");
    cfg.ctr_emb_dim = 4;
    cfg.batch_size = 64;
    cfg.seed = 3;
    const zp_model_ops *ops = zp_model_find("ctr");
    zp_model *a = NULL, *b = NULL;
    char err[256];
    ck_assert_msg(ops->create(&a, &cfg, 1, 2, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(ops->create(&b, &cfg, 1, 2, err, sizeof(err)) == 0, "%s", err);
    int64_t spe = ops->steps_per_epoch(a), at = 2 * spe + spe / 2; /* mid third epoch */
    ck_assert_int_gt(spe, 4);
    zp_model_batch *ba = ops->batch_new(a), *bb = ops->batch_new(b);
    const uint64_t *ia = NULL, *ib = NULL;
    size_t na = 0, nb = 0;
    for (int64_t step = 0; step <= at; step++) /* a: every step from the start */
        ops->batch_pick(a, ba, step, &ia, &na);
    ops->batch_pick(b, bb, at, &ib, &nb); /* b: resumed there */
    ck_assert_uint_gt(na, 0);
    ck_assert_uint_eq(na, nb);
    ck_assert(memcmp(ia, ib, na * sizeof(uint64_t)) == 0);
    ops->batch_free(&ba);
    ops->batch_free(&bb);
    ops->destroy(&a);
    ops->destroy(&b);
    rmdir_all(dir);
}
END_TEST

int main(void)
{
    const zt_case cases[] = {
        {"generator_deterministic", 30, {generator_deterministic}},
        {"generator_bad_options", 10, {generator_bad_options}},
        {"reader_criteo_good", 10, {reader_criteo_good}},
        {"reader_criteo_malformed", 20, {reader_criteo_malformed}},
        {"reader_libsvm", 10, {reader_libsvm}},
        {"auc_against_pair_count", 30, {auc_against_pair_count}},
        {"gradient_finite_differences", 30, {gradient_finite_differences}},
        {"in_process_training", 120, {in_process_training}},
        {"batch_pick_resumes_mid_epoch", 30, {batch_pick_resumes_mid_epoch}},
    };
    return zt_run_cases("ctr", cases, sizeof(cases) / sizeof(cases[0]));
}
