/*
 * criteo_gen.c - writes a Criteo-format data set from a hidden model
 * (criteo_gen.h says what the model is and why).
 *
 * Speed is the point of most of the shape here: a million lines must take
 * seconds, not minutes. Zipf ranks are drawn from an exact inverse-CDF table
 * over the first HEAD ranks (binary search) and from the continuous power
 * law beyond them (one pow()), so no field needs a table as large as its
 * vocabulary; the weights of head ranks are cached, tail weights come from
 * a generator keyed by (field, rank); lines are formatted by hand into one
 * large buffer. The same pass collects what truth.json reports: distinct
 * values (a bitset per field over ranks), the truth's logits on the test
 * split, and the integer fields for the dense-only baseline, a logistic
 * regression fitted by Newton's method (14 parameters).
 */
#include "criteo_gen.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "ctr_metrics.h"
#include "errors.h"
#include "now.h"
#include "rng.h"
#include "zeps_errors.h"

/* Ranks whose probabilities (and weights) are tabulated per field. */
#define HEAD     16384
#define MAX_RANK 16
/* The dense-only baseline is fitted on at most this many training lines. */
#define FIT_MAX 1000000
#define OUTBUF  (1u << 20)

/* Stream numbers of zp_rng_seed, so the draws of each purpose are apart. */
enum { S_FIELD = 1, S_DENSE = 2, S_WEIGHT = 3, S_EXAMPLE = 4 };

/* Vocabulary sizes of the 26 categorical fields of the Criteo Kaggle set
 * (distinct values per column of train.txt), times opts.scale. */
static const double kaggle_vocab[ZP_CRITEO_NCAT] = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572,
};

/* Share of empty values per integer field, roughly as in the Kaggle set. */
static const double dense_missing[ZP_CRITEO_NDENSE] = {0.45, 0.0,  0.21, 0.22, 0.03, 0.22, 0.04,
                                                       0.0,  0.04, 0.45, 0.04, 0.76, 0.22};

typedef struct field {
    uint64_t vocab;
    int nhead;
    double *cum;                     /* cum[k-1] = sum_{j<=k} j^-s, k = 1..nhead */
    double head_sum;                 /* cum[nhead-1] */
    double tail_a, tail_b, tail_int; /* continuous tail on [nhead+.5, vocab+.5] */
    double total;                    /* head_sum + tail_int */
    double sigma;                    /* weight scale */
    double missing;                  /* probability of an empty value */
    uint32_t key;                    /* value string = hex(fmix32((rank-1) ^ key)) */
    float *w;                        /* weights of ranks 1..nhead */
    float *v;                        /* interaction factors, nhead x rank */
    float w_missing;
    float v_missing[MAX_RANK];
    uint64_t *seen; /* bitset over ranks 1..vocab */
    int seen_missing;
} field;

typedef struct gen {
    const zp_criteo_gen_opts *o;
    double s;
    int r;
    field f[ZP_CRITEO_NCAT];
    double mu[ZP_CRITEO_NDENSE], sd[ZP_CRITEO_NDENSE], beta[ZP_CRITEO_NDENSE],
        center[ZP_CRITEO_NDENSE];
    /* collected for the figures */
    float *fit_x, *fit_y; /* dense features of the first FIT_MAX training lines */
    size_t nfit;
    float *test_logit, *test_y, *test_x;
    size_t ntest;
    uint64_t pos[2];
    double t0;
} gen;

/* One example, as drawn. */
typedef struct example {
    int label;
    long long x[ZP_CRITEO_NDENSE];
    int xmissing[ZP_CRITEO_NDENSE];
    uint64_t rank[ZP_CRITEO_NCAT]; /* 0 = missing */
    double logit;
} example;

/* murmur3's 32-bit finaliser: a bijection of 32-bit integers. */
static uint32_t fmix32(uint32_t h)
{
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* Weights of rank k shrink as 1/sqrt(1 + k/k0): a value seen only a
 * handful of times in a million lines carries little of the signal. */
static double shrink(const gen *g, uint64_t rank)
{
    return 1.0 / sqrt(1.0 + (double)rank / g->o->rare_k0);
}

/* Weight and interaction factors of (field fi, rank k), k = 0 for missing. */
static void draw_weight(const gen *g, int fi, uint64_t k, float *w, float *v)
{
    zp_rng r;
    zp_rng_seed(&r, g->o->seed ^ 0x77656967687473ull, (uint64_t)(S_WEIGHT * 64 + fi), k);
    double a = k ? shrink(g, k) : 1.0;
    *w = (float)(g->f[fi].sigma * a * zp_rng_normal(&r));
    for (int d = 0; d < g->r; d++)
        v[d] = (float)(g->o->interaction_scale * a * zp_rng_normal(&r));
}

static int setup_field(gen *g, int fi)
{
    field *f = &g->f[fi];
    zp_rng r;
    zp_rng_seed(&r, g->o->seed, S_FIELD, (uint64_t)fi);
    double v = floor(kaggle_vocab[fi] * g->o->scale + 0.5);
    f->vocab = v < 2 ? 2 : (uint64_t)v;
    f->sigma = 0.1 + 0.3 * zp_rng_uniform(&r);
    /* about a third of the fields are often empty, as in the real logs */
    f->missing = zp_rng_uniform(&r) < 0.35 ? 0.1 + 0.4 * zp_rng_uniform(&r) : 0.0;
    f->key = (uint32_t)zp_rng_next(&r);
    f->nhead = f->vocab < HEAD ? (int)f->vocab : HEAD;
    f->cum = zp_alloc((size_t)f->nhead * sizeof(double));
    double sum = 0;
    for (int k = 1; k <= f->nhead; k++) {
        sum += pow((double)k, -g->s);
        f->cum[k - 1] = sum;
    }
    f->head_sum = sum;
    if (f->vocab > (uint64_t)f->nhead) {
        f->tail_a = pow(f->nhead + 0.5, 1.0 - g->s);
        f->tail_b = pow((double)f->vocab + 0.5, 1.0 - g->s);
        f->tail_int = (f->tail_a - f->tail_b) / (g->s - 1.0);
    }
    f->total = f->head_sum + f->tail_int;
    f->w = zp_alloc((size_t)f->nhead * sizeof(float));
    f->v = zp_alloc_zeroed((size_t)f->nhead * (size_t)(g->r ? g->r : 1), sizeof(float));
    for (int k = 1; k <= f->nhead; k++)
        draw_weight(g, fi, (uint64_t)k, &f->w[k - 1], &f->v[(size_t)(k - 1) * (size_t)g->r]);
    draw_weight(g, fi, 0, &f->w_missing, f->v_missing);
    f->seen = zp_alloc_zeroed((size_t)(f->vocab / 64 + 1), sizeof(uint64_t));
    return 0;
}

static void setup_dense(gen *g)
{
    zp_rng r;
    zp_rng_seed(&r, g->o->seed, S_DENSE, 0);
    for (int j = 0; j < ZP_CRITEO_NDENSE; j++) {
        g->mu[j] = 0.5 + 3.5 * zp_rng_uniform(&r);
        g->sd[j] = 0.5 + 1.0 * zp_rng_uniform(&r);
        g->beta[j] = 0.3 * zp_rng_normal(&r);
        /* E[log1p(x)] is near mu for present values: centring keeps the
         * intercept (and so the positive rate) about where --bias puts it */
        g->center[j] = (1.0 - dense_missing[j]) * g->mu[j];
    }
}

/* The rank (1..vocab) for a uniform u in [0, 1): exact over the head,
 * the inverse of the continuous power law's CDF over the tail. */
static uint64_t zipf_rank(const field *f, double s, double u)
{
    double t = u * f->total;
    if (t < f->head_sum) {
        int lo = 0, hi = f->nhead - 1; /* the first k with cum[k] > t */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (f->cum[mid] > t)
                hi = mid;
            else
                lo = mid + 1;
        }
        return (uint64_t)lo + 1;
    }
    double y = f->tail_a - (t - f->head_sum) / f->tail_int * (f->tail_a - f->tail_b);
    double k = floor(pow(y, 1.0 / (1.0 - s)) + 0.5);
    if (k < f->nhead + 1.0)
        k = f->nhead + 1.0;
    if (k > (double)f->vocab)
        k = (double)f->vocab;
    return (uint64_t)k;
}

static double dense_feature(long long x)
{
    return x > 0 ? log1p((double)x) : 0.0;
}

/* Draw example i of split `split` (0 train, 1 test) and its truth logit. */
static void draw_example(gen *g, int split, uint64_t i, example *e)
{
    zp_rng r;
    zp_rng_seed(&r, g->o->seed, (uint64_t)(S_EXAMPLE * 4 + split), i);
    double z = g->o->bias;
    for (int j = 0; j < ZP_CRITEO_NDENSE; j++) {
        e->xmissing[j] = zp_rng_uniform(&r) < dense_missing[j];
        double n = zp_rng_normal(&r);
        e->x[j] = e->xmissing[j] ? 0 : (long long)floor(exp(g->mu[j] + g->sd[j] * n)) - 1;
        if (!e->xmissing[j])
            z += g->beta[j] * (dense_feature(e->x[j]) - g->center[j]);
        else
            z -= g->beta[j] * g->center[j];
    }
    double vsum[MAX_RANK] = {0}, vsq = 0;
    for (int fi = 0; fi < ZP_CRITEO_NCAT; fi++) {
        field *f = &g->f[fi];
        double um = zp_rng_uniform(&r), uk = zp_rng_uniform(&r);
        float wtail, vtail[MAX_RANK];
        const float *v;
        float w;
        uint64_t k = um < f->missing ? 0 : zipf_rank(f, g->s, uk);
        e->rank[fi] = k;
        if (k == 0) {
            w = f->w_missing;
            v = f->v_missing;
            f->seen_missing = 1;
        } else if (k <= (uint64_t)f->nhead) {
            w = f->w[k - 1];
            v = &f->v[(k - 1) * (uint64_t)g->r];
        } else {
            draw_weight(g, fi, k, &wtail, vtail);
            w = wtail;
            v = vtail;
        }
        if (k)
            f->seen[(k - 1) / 64] |= 1ull << ((k - 1) % 64);
        z += w;
        for (int d = 0; d < g->r; d++) {
            vsum[d] += v[d];
            vsq += (double)v[d] * v[d];
        }
    }
    /* sum over field pairs of <v_a, v_b>, by (|sum|^2 - sum |v|^2) / 2 */
    double pair = -vsq;
    for (int d = 0; d < g->r; d++)
        pair += vsum[d] * vsum[d];
    z += 0.5 * pair;
    e->logit = z;
    e->label = zp_rng_uniform(&r) < zp_sigmoid(z);
}

/* A buffered output file: formatted by hand, written in OUTBUF pieces. */
typedef struct out {
    FILE *f;
    char path[1100], tmp[1120];
    char *buf;
    size_t len;
    int failed;
} out;

static void out_flush(out *o)
{
    if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len)
        o->failed = errno ? errno : EIO;
    o->len = 0;
}

static char *put_int(char *p, long long v)
{
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    if (v < 0)
        *p++ = '-';
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static void write_line(gen *g, out *o, const example *e)
{
    static const char hex[] = "0123456789abcdef";
    if (o->len + 512 > OUTBUF)
        out_flush(o);
    char *p = o->buf + o->len;
    *p++ = (char)('0' + e->label);
    for (int j = 0; j < ZP_CRITEO_NDENSE; j++) {
        *p++ = '\t';
        if (!e->xmissing[j])
            p = put_int(p, e->x[j]);
    }
    for (int fi = 0; fi < ZP_CRITEO_NCAT; fi++) {
        *p++ = '\t';
        if (e->rank[fi] == 0)
            continue;
        uint32_t h = fmix32((uint32_t)(e->rank[fi] - 1) ^ g->f[fi].key);
        for (int s = 28; s >= 0; s -= 4)
            *p++ = hex[(h >> s) & 15];
    }
    *p++ = '\n';
    o->len = (size_t)(p - o->buf);
}

static int out_open(out *o, const char *dir, const char *name, char *err, size_t errlen)
{
    snprintf(o->path, sizeof(o->path), "%s/%s", dir, name);
    snprintf(o->tmp, sizeof(o->tmp), "%s.tmp", o->path);
    o->f = fopen(o->tmp, "w");
    if (!o->f)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cannot write %s: %s", o->tmp, strerror(errno));
    o->buf = zp_alloc(OUTBUF);
    o->len = 0;
    o->failed = 0;
    return 0;
}

/* Flush, fsync, close and rename into place. */
static int out_close(out *o, char *err, size_t errlen)
{
    out_flush(o);
    free(o->buf);
    o->buf = NULL;
    if (fflush(o->f) != 0 && !o->failed)
        o->failed = errno;
    if (fsync(fileno(o->f)) != 0 && !o->failed)
        o->failed = errno;
    if (fclose(o->f) != 0 && !o->failed)
        o->failed = errno;
    o->f = NULL;
    if (!o->failed && rename(o->tmp, o->path) != 0)
        o->failed = errno;
    if (o->failed) {
        unlink(o->tmp);
        return zp_errors_set(err, errlen, ZEPS_EIO, "cannot write %s: %s", o->path,
                             strerror(o->failed));
    }
    return 0;
}

static void progress(gen *g, const char *what, uint64_t i, uint64_t n)
{
    if (g->o->progress)
        fprintf(stderr, "gen-criteo: %s %llu/%llu (%.0f%%), %.1f s\n", what, (unsigned long long)i,
                (unsigned long long)n, 100.0 * (double)i / (double)n, zp_now_s() - g->t0);
}

static int write_split(gen *g, int split, char *err, size_t errlen)
{
    const char *name = split ? "test.txt" : "train.txt";
    uint64_t n = split ? g->o->test : g->o->train;
    out o;
    int rc = out_open(&o, g->o->out_dir, name, err, errlen);
    if (rc)
        return rc;
    for (uint64_t i = 0; i < n; i++) {
        example e;
        draw_example(g, split, i, &e);
        write_line(g, &o, &e);
        g->pos[split] += (uint64_t)e.label;
        float *x = NULL;
        if (split == 0 && g->nfit < FIT_MAX) {
            x = &g->fit_x[g->nfit * ZP_CRITEO_NDENSE];
            g->fit_y[g->nfit++] = (float)e.label;
        } else if (split == 1) {
            x = &g->test_x[g->ntest * ZP_CRITEO_NDENSE];
            g->test_logit[g->ntest] = (float)e.logit;
            g->test_y[g->ntest++] = (float)e.label;
        }
        for (int j = 0; x && j < ZP_CRITEO_NDENSE; j++)
            x[j] = e.xmissing[j] ? 0.0f : (float)dense_feature(e.x[j]);
        if ((i + 1) % (1u << 20) == 0)
            progress(g, name, i + 1, n);
    }
    return out_close(&o, err, errlen);
}

/* Solve the symmetric positive definite system A x = b (n x n, row-major)
 * by Cholesky, in place: A is overwritten, b becomes x. */
static void cholesky_solve(double *A, double *b, int n)
{
    for (int j = 0; j < n; j++) {
        double d = A[j * n + j];
        for (int k = 0; k < j; k++)
            d -= A[j * n + k] * A[j * n + k];
        d = sqrt(d > 1e-300 ? d : 1e-300);
        A[j * n + j] = d;
        for (int i = j + 1; i < n; i++) {
            double s = A[i * n + j];
            for (int k = 0; k < j; k++)
                s -= A[i * n + k] * A[j * n + k];
            A[i * n + j] = s / d;
        }
    }
    for (int i = 0; i < n; i++) { /* L y = b */
        double s = b[i];
        for (int k = 0; k < i; k++)
            s -= A[i * n + k] * b[k];
        b[i] = s / A[i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) { /* L^T x = y */
        double s = b[i];
        for (int k = i + 1; k < n; k++)
            s -= A[k * n + i] * b[k];
        b[i] = s / A[i * n + i];
    }
}

/* The dense-only baseline: logistic regression on the 13 transformed
 * integer fields and an intercept, fitted by Newton's method (with a tiny
 * ridge for conditioning) on the first FIT_MAX training lines, scored on
 * the test split. */
static void fit_dense(gen *g, zp_criteo_truth *t)
{
    enum { P = ZP_CRITEO_NDENSE + 1 };
    double beta[P] = {0};
    for (int it = 0; it < 12 && g->nfit > 0; it++) {
        double H[P * P] = {0}, grad[P] = {0};
        for (size_t i = 0; i < g->nfit; i++) {
            const float *x = &g->fit_x[i * ZP_CRITEO_NDENSE];
            double xv[P], z = beta[ZP_CRITEO_NDENSE];
            for (int j = 0; j < ZP_CRITEO_NDENSE; j++) {
                xv[j] = x[j];
                z += beta[j] * x[j];
            }
            xv[ZP_CRITEO_NDENSE] = 1.0;
            double p = zp_sigmoid(z), w = p * (1 - p), r = p - g->fit_y[i];
            for (int a = 0; a < P; a++) {
                grad[a] += r * xv[a];
                for (int b = 0; b <= a; b++)
                    H[a * P + b] += w * xv[a] * xv[b];
            }
        }
        for (int a = 0; a < P; a++) {
            H[a * P + a] += 1e-6 * (double)g->nfit;
            for (int b = 0; b < a; b++)
                H[b * P + a] = H[a * P + b];
        }
        cholesky_solve(H, grad, P);
        double step = 0;
        for (int a = 0; a < P; a++) {
            beta[a] -= grad[a];
            step += fabs(grad[a]);
        }
        if (step < 1e-9)
            break;
    }
    float *z = zp_alloc((g->ntest ? g->ntest : 1) * sizeof(float));
    for (size_t i = 0; i < g->ntest; i++) {
        const float *x = &g->test_x[i * ZP_CRITEO_NDENSE];
        double s = beta[ZP_CRITEO_NDENSE];
        for (int j = 0; j < ZP_CRITEO_NDENSE; j++)
            s += beta[j] * x[j];
        z[i] = (float)s;
    }
    t->dense_logloss = zp_ctr_metrics_logloss(z, g->test_y, g->ntest);
    t->dense_auc = zp_ctr_metrics_auc(z, g->test_y, g->ntest);
    free(z);
}

static uint64_t popcount_bits(const uint64_t *v, size_t words)
{
    uint64_t n = 0;
    for (size_t i = 0; i < words; i++)
        n += (uint64_t)__builtin_popcountll(v[i]);
    return n;
}

static void json_fig(FILE *f, const char *key, double v, const char *after)
{
    if (isfinite(v))
        fprintf(f, "  \"%s\": %.6f%s\n", key, v, after);
    else
        fprintf(f, "  \"%s\": null%s\n", key, after);
}

static int write_truth(gen *g, const zp_criteo_truth *t, char *err, size_t errlen)
{
    out o;
    int rc = out_open(&o, g->o->out_dir, "truth.json", err, errlen);
    if (rc)
        return rc;
    FILE *f = o.f;
    const zp_criteo_gen_opts *op = g->o;
    fprintf(f, "{\n  \"format\": \"criteo\",\n");
    fprintf(f, "  \"train_examples\": %llu,\n  \"test_examples\": %llu,\n",
            (unsigned long long)t->train, (unsigned long long)t->test);
    fprintf(f, "  \"seed\": %llu,\n  \"zipf\": %g,\n  \"scale\": %g,\n",
            (unsigned long long)op->seed, op->zipf, op->scale);
    fprintf(f, "  \"interaction_rank\": %d,\n  \"interaction_scale\": %g,\n  \"bias\": %g,\n",
            op->interaction_rank, op->interaction_scale, op->bias);
    fprintf(f, "  \"rare_k0\": %g,\n", op->rare_k0);
    fprintf(f, "  \"distinct_ids_total\": %llu,\n  \"distinct_ids_per_field\": [",
            (unsigned long long)t->distinct_total);
    for (int i = 0; i < ZP_CRITEO_NCAT; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)t->distinct[i]);
    fprintf(f, "],\n  \"vocabulary_per_field\": [");
    for (int i = 0; i < ZP_CRITEO_NCAT; i++)
        fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)t->vocab[i]);
    fprintf(f, "],\n");
    json_fig(f, "positive_rate_train", t->pos_rate_train, ",");
    json_fig(f, "positive_rate_test", t->pos_rate_test, ",");
    json_fig(f, "truth_test_logloss", t->truth_logloss, ",");
    json_fig(f, "truth_test_auc", t->truth_auc, ",");
    json_fig(f, "dense_only_test_logloss", t->dense_logloss, ",");
    json_fig(f, "dense_only_test_auc", t->dense_auc, ",");
    fprintf(f,
            "  \"dense_only_model\": \"logistic regression on log(1+x) of the 13 integer "
            "fields (missing or x <= 0 -> 0) and an intercept, fitted by Newton's method "
            "on the first %d training lines\",\n",
            FIT_MAX);
    json_fig(f, "seconds", t->seconds, "");
    fprintf(f, "}\n");
    return out_close(&o, err, errlen);
}

void zp_criteo_gen_defaults(zp_criteo_gen_opts *o)
{
    *o = (zp_criteo_gen_opts){
        .train = 1000000,
        .test = 100000,
        .seed = 1,
        .zipf = 1.1,
        .scale = 1.0,
        .interaction_rank = 4,
        .interaction_scale = 0.05,
        .bias = -1.6,
        .rare_k0 = 100,
    };
}

static void gen_free(gen *g)
{
    for (int fi = 0; fi < ZP_CRITEO_NCAT; fi++) {
        free(g->f[fi].cum);
        free(g->f[fi].w);
        free(g->f[fi].v);
        free(g->f[fi].seen);
    }
    free(g->fit_x);
    free(g->fit_y);
    free(g->test_x);
    free(g->test_y);
    free(g->test_logit);
}

int zp_criteo_gen_write(const zp_criteo_gen_opts *o, zp_criteo_truth *out_truth, char *err,
                        size_t errlen)
{
    if (!o->out_dir || !o->out_dir[0])
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "no output directory");
    if (!(o->zipf > 1.0 && o->zipf <= 4.0))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "zipf exponent %g outside (1, 4]", o->zipf);
    if (!(o->scale > 0 && o->scale <= 100))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "scale %g outside (0, 100]", o->scale);
    if (o->interaction_rank < 0 || o->interaction_rank > MAX_RANK)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "interaction rank %d outside 0..%d",
                             o->interaction_rank, MAX_RANK);
    if (!(o->rare_k0 > 0))
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "rare_k0 %g must be > 0", o->rare_k0);
    if (o->train < 1 || o->test < 2)
        return zp_errors_set(err, errlen, ZEPS_EINVAL, "need at least 1 train and 2 test examples");
    if (mkdir(o->out_dir, 0777) != 0 && errno != EEXIST)
        return zp_errors_set(err, errlen, ZEPS_EIO, "cannot create %s: %s", o->out_dir,
                             strerror(errno));
    gen *g = zp_alloc_zeroed(1, sizeof(*g));
    g->o = o;
    g->s = o->zipf;
    g->r = o->interaction_rank;
    g->t0 = zp_now_s();
    for (int fi = 0; fi < ZP_CRITEO_NCAT; fi++)
        setup_field(g, fi);
    setup_dense(g);
    size_t nfit = o->train < FIT_MAX ? (size_t)o->train : FIT_MAX;
    g->fit_x = zp_alloc(nfit * ZP_CRITEO_NDENSE * sizeof(float));
    g->fit_y = zp_alloc(nfit * sizeof(float));
    g->test_x = zp_alloc((size_t)o->test * ZP_CRITEO_NDENSE * sizeof(float));
    g->test_y = zp_alloc((size_t)o->test * sizeof(float));
    g->test_logit = zp_alloc((size_t)o->test * sizeof(float));

    zp_criteo_truth t = {.train = o->train, .test = o->test};
    int rc = write_split(g, 0, err, errlen);
    if (rc == 0)
        rc = write_split(g, 1, err, errlen);
    if (rc == 0) {
        for (int fi = 0; fi < ZP_CRITEO_NCAT; fi++) {
            field *f = &g->f[fi];
            t.vocab[fi] = f->vocab;
            t.distinct[fi] = popcount_bits(f->seen, f->vocab / 64 + 1) + (uint64_t)f->seen_missing;
            t.distinct_total += t.distinct[fi];
        }
        t.pos_rate_train = (double)g->pos[0] / (double)o->train;
        t.pos_rate_test = (double)g->pos[1] / (double)o->test;
        t.truth_logloss = zp_ctr_metrics_logloss(g->test_logit, g->test_y, g->ntest);
        t.truth_auc = zp_ctr_metrics_auc(g->test_logit, g->test_y, g->ntest);
        if (o->progress)
            fprintf(stderr, "gen-criteo: fitting the dense-only baseline\n");
        fit_dense(g, &t);
        t.seconds = zp_now_s() - g->t0;
        rc = write_truth(g, &t, err, errlen);
    }
    if (rc == 0) { /* make the renames durable */
        int fd = open(o->out_dir, O_RDONLY | O_DIRECTORY);
        if (fd >= 0) {
            fsync(fd);
            close(fd);
        }
    }
    gen_free(g);
    free(g);
    if (rc == 0 && out_truth)
        *out_truth = t;
    return rc;
}
