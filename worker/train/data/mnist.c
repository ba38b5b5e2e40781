/*
 * mnist.c - IDX reader, training partitions, minibatch order, softmax
 * cross-entropy and the seeded generator shared by the built-in models.
 *
 * Files are read whole with zlib (gzread also passes uncompressed files
 * through). Images are kept as bytes only while reading; just the examples a
 * worker owns are converted to floats, so N workers on one machine hold the
 * training set once between them, not N times. Every check on a file names the
 * file: a worker that dies on bad data should say which file to look at.
 */
#include "alloc.h"
#include "errors.h"
#include "mnist.h"
#include "rng.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "zeps_errors.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_MAX_EXAMPLES 10000000u
#define IDX_MAX_SIDE     4096u
#define IDX_MAX_BYTES    ((uint64_t)1 << 32)

/* ---- IDX files -------------------------------------------------------------- */

/* One IDX file read whole: its dimensions and its bytes. */
typedef struct idx_file {
    uint32_t dims[3];
    uint8_t *data;
    size_t bytes;
} idx_file;

static int gz_read_exact(gzFile f, void *buf, size_t n, const char *path, const char *what,
                         char *err, size_t errlen)
{
    uint8_t *p = buf;
    size_t done = 0;
    while (done < n) {
        size_t want = n - done;
        if (want > (size_t)INT_MAX / 2)
            want = (size_t)INT_MAX / 2;
        int got = gzread(f, p + done, (unsigned)want);
        if (got < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            return zp_errors_set(err, errlen, ZEPS_EDATA, "%s: read error in %s: %s", path, what,
                                 msg != NULL ? msg : "unknown zlib error");
        }
        if (got == 0)
            return zp_errors_set(err, errlen, ZEPS_EDATA,
                                 "%s: file truncated: %s needs %zu bytes, got %zu", path, what, n,
                                 done);
        done += (size_t)got;
    }
    return 0;
}

static uint32_t be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Read the IDX file at path, which must have magic `magic` and `ndims`
 * dimensions. On success f->data is owned by the caller. */
static int idx_read(idx_file *f, const char *path, uint32_t magic, int ndims, char *err,
                    size_t errlen)
{
    memset(f, 0, sizeof(*f));
    if (access(path, F_OK) != 0)
        return zp_errors_set(err, errlen, ZEPS_EDATA,
                             "%s: %s (the Fashion-MNIST files come with "
                             "`apt-get install dataset-fashion-mnist`, or set training.data_dir)",
                             path, strerror(errno));
    gzFile gz = gzopen(path, "rb");
    if (gz == NULL)
        return zp_errors_set(err, errlen, ZEPS_EDATA, "%s: cannot open: %s", path,
                             errno != 0 ? strerror(errno) : "zlib error");

    uint8_t head[16];
    size_t headlen = 4 + 4 * (size_t)ndims;
    int rc = gz_read_exact(gz, head, headlen, path, "the header", err, errlen);
    if (rc != 0)
        goto fail;
    uint32_t got = be32(head);
    if (got != magic) {
        rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                           "%s: bad IDX magic 0x%08x, expected 0x%08x (not an IDX %s file?)", path,
                           got, magic, ndims == 1 ? "label" : "image");
        goto fail;
    }
    uint64_t bytes = 1;
    for (int i = 0; i < ndims; i++) {
        f->dims[i] = be32(head + 4 + 4 * i);
        uint32_t max = i == 0 ? IDX_MAX_EXAMPLES : IDX_MAX_SIDE;
        if (f->dims[i] == 0 || f->dims[i] > max) {
            rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s: dimension %d is %u, expected 1..%u",
                               path, i, f->dims[i], max);
            goto fail;
        }
        bytes *= f->dims[i];
    }
    if (bytes > IDX_MAX_BYTES) {
        rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s: %llu bytes of data is too large", path,
                           (unsigned long long)bytes);
        goto fail;
    }
    f->bytes = (size_t)bytes;
    f->data = malloc(f->bytes);
    if (f->data == NULL) {
        rc = zp_errors_set(err, errlen, ZEPS_ENOMEM, "%s: cannot allocate %zu bytes", path,
                           f->bytes);
        goto fail;
    }
    rc = gz_read_exact(gz, f->data, f->bytes, path, "the data", err, errlen);
    if (rc != 0)
        goto fail;
    uint8_t extra;
    if (gzread(gz, &extra, 1) != 0) {
        rc = zp_errors_set(err, errlen, ZEPS_EDATA,
                           "%s: data after the %zu bytes the header declares", path, f->bytes);
        goto fail;
    }
    gzclose(gz);
    return 0;

fail:
    free(f->data);
    f->data = NULL;
    gzclose(gz);
    return rc;
}

/* Read both files of a set and check they agree. */
static int read_pair(idx_file *img, idx_file *lab, const char *images_path, const char *labels_path,
                     char *err, size_t errlen)
{
    int rc = idx_read(img, images_path, IDX_IMAGES_MAGIC, 3, err, errlen);
    if (rc != 0)
        return rc;
    rc = idx_read(lab, labels_path, IDX_LABELS_MAGIC, 1, err, errlen);
    if (rc != 0) {
        free(img->data);
        return rc;
    }
    if (img->dims[0] != lab->dims[0]) {
        rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s has %u images but %s has %u labels",
                           images_path, img->dims[0], labels_path, lab->dims[0]);
        goto fail;
    }
    for (size_t i = 0; i < lab->bytes; i++) {
        if (lab->data[i] >= ZP_MNIST_CLASSES) {
            rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s: label %zu is %u, expected 0..%d",
                               labels_path, i, lab->data[i], ZP_MNIST_CLASSES - 1);
            goto fail;
        }
    }
    return 0;

fail:
    free(img->data);
    free(lab->data);
    return rc;
}

/* Convert the kept examples of a read pair into *ds (floats in [0, 1]). */
static int select_examples(zp_dataset *ds, const idx_file *img, const idx_file *lab,
                           const uint32_t *keep, int nkeep, const char *images_path, char *err,
                           size_t errlen)
{
    int n = keep != NULL ? nkeep : (int)img->dims[0];
    size_t dim = (size_t)img->dims[1] * img->dims[2];
    zp_dataset d = {.n = n, .dim = (int)dim, .rows = (int)img->dims[1], .cols = (int)img->dims[2]};
    d.x = malloc((size_t)(n > 0 ? n : 1) * dim * sizeof(float));
    d.y = malloc((size_t)(n > 0 ? n : 1));
    if (d.x == NULL || d.y == NULL) {
        free(d.x);
        free(d.y);
        return zp_errors_set(err, errlen, ZEPS_ENOMEM, "%s: cannot allocate %d examples",
                             images_path, n);
    }
    for (int i = 0; i < n; i++) {
        uint32_t k = keep != NULL ? keep[i] : (uint32_t)i;
        if (k >= img->dims[0]) {
            free(d.x);
            free(d.y);
            return zp_errors_set(err, errlen, ZEPS_EDATA, "%s: example %u requested, file has %u",
                                 images_path, k, img->dims[0]);
        }
        const uint8_t *src = img->data + (size_t)k * dim;
        float *dst = d.x + (size_t)i * dim;
        for (size_t j = 0; j < dim; j++)
            dst[j] = (float)src[j] * (1.0f / 255.0f);
        d.y[i] = lab->data[k];
    }
    *ds = d;
    return 0;
}

int zp_mnist_read(zp_dataset *ds, const char *images_path, const char *labels_path,
                  const uint32_t *keep, int nkeep, char *err, size_t errlen)
{
    idx_file img, lab;
    memset(ds, 0, sizeof(*ds));
    int rc = read_pair(&img, &lab, images_path, labels_path, err, errlen);
    if (rc != 0)
        return rc;
    rc = select_examples(ds, &img, &lab, keep, nkeep, images_path, err, errlen);
    free(img.data);
    free(lab.data);
    return rc;
}

void zp_mnist_dataset_fini(zp_dataset *ds)
{
    if (ds == NULL)
        return;
    free(ds->x);
    free(ds->y);
    memset(ds, 0, sizeof(*ds));
}

/* ---- partitions and minibatches --------------------------------------------- */

/* Stream numbers that keep the generator's uses apart. */
#define STREAM_PARTITION 0x7061727469ull /* "parti" */
#define STREAM_EPOCH     0x65706f6368ull /* "epoch" */

int zp_mnist_partition(uint64_t seed, int total, int n, int rank, int num_workers, uint32_t *out)
{
    assert(total > 0 && n > 0 && n <= total && num_workers > 0);
    assert(rank >= 0 && rank < num_workers);
    uint32_t *perm = zp_alloc_zeroed((size_t)total, sizeof(*perm));
    for (int i = 0; i < total; i++)
        perm[i] = (uint32_t)i;
    zp_rng r;
    zp_rng_seed(&r, seed, STREAM_PARTITION, 0);
    zp_rng_shuffle(&r, perm, (size_t)total);
    int64_t lo = (int64_t)rank * n / num_workers;
    int64_t hi = (int64_t)(rank + 1) * n / num_workers;
    memcpy(out, perm + lo, (size_t)(hi - lo) * sizeof(*out));
    free(perm);
    return (int)(hi - lo);
}

struct zp_mnist_data {
    zp_dataset train; /* this worker's partition, in partition order */
    zp_dataset test;  /* the whole test set */
    int batch;
    int steps;
    int rank;
    uint64_t seed;
    uint32_t *order;     /* epoch order_epoch's visiting order of train */
    int64_t order_epoch; /* -1: order not built yet */
    float *bx;           /* minibatch: batch x dim */
    uint8_t *by;
    float *logits; /* ZP_MNIST_EVAL_CHUNK x ZP_MNIST_CLASSES */
};

static int set_path(char *buf, size_t len, const char *dir, const char *file, char *err,
                    size_t errlen)
{
    int n = snprintf(buf, len, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= len)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "data_dir too long: %s", dir);
    return 0;
}

static int load_train(zp_mnist_data *d, const zp_config *cfg, int rank, int num_workers, char *err,
                      size_t errlen)
{
    char ipath[ZP_PATH_MAX + 64], lpath[ZP_PATH_MAX + 64];
    int rc =
        set_path(ipath, sizeof(ipath), cfg->data_dir, "train-images-idx3-ubyte.gz", err, errlen);
    if (rc == 0)
        rc = set_path(lpath, sizeof(lpath), cfg->data_dir, "train-labels-idx1-ubyte.gz", err,
                      errlen);
    if (rc != 0)
        return rc;
    idx_file img, lab;
    rc = read_pair(&img, &lab, ipath, lpath, err, errlen);
    if (rc != 0)
        return rc;
    int total = (int)img.dims[0];
    int n = cfg->max_train_examples > 0 && cfg->max_train_examples < total ? cfg->max_train_examples
                                                                           : total;
    if (n < num_workers) {
        rc = zp_errors_set(err, errlen, ZEPS_ECONFIG,
                           "%d training examples cannot be split over %d workers", n, num_workers);
    } else {
        uint32_t *part = zp_alloc_zeroed((size_t)(n / num_workers + 1), sizeof(*part));
        int k = zp_mnist_partition(cfg->seed, total, n, rank, num_workers, part);
        rc = select_examples(&d->train, &img, &lab, part, k, ipath, err, errlen);
        free(part);
    }
    free(img.data);
    free(lab.data);
    return rc;
}

static int load_test(zp_mnist_data *d, const zp_config *cfg, char *err, size_t errlen)
{
    char ipath[ZP_PATH_MAX + 64], lpath[ZP_PATH_MAX + 64];
    int rc =
        set_path(ipath, sizeof(ipath), cfg->data_dir, "t10k-images-idx3-ubyte.gz", err, errlen);
    if (rc == 0)
        rc =
            set_path(lpath, sizeof(lpath), cfg->data_dir, "t10k-labels-idx1-ubyte.gz", err, errlen);
    if (rc == 0)
        rc = zp_mnist_read(&d->test, ipath, lpath, NULL, 0, err, errlen);
    if (rc == 0 && d->test.dim != d->train.dim)
        rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s: images are %dx%d, training images %dx%d",
                           ipath, d->test.rows, d->test.cols, d->train.rows, d->train.cols);
    return rc;
}

int zp_mnist_data_new(zp_mnist_data **out, const zp_config *cfg, int rank, int num_workers,
                      char *err, size_t errlen)
{
    if (num_workers < 1 || rank < 0 || rank >= num_workers)
        return zp_errors_set(err, errlen, ZEPS_ERANK, "worker rank %d outside 0..%d", rank,
                             num_workers - 1);
    if (cfg->batch_size < 1)
        return zp_errors_set(err, errlen, ZEPS_ECONFIG, "training.batch_size must be >= 1, not %d",
                             cfg->batch_size);
    zp_mnist_data *d = zp_alloc_zeroed(1, sizeof(*d));
    int rc = load_train(d, cfg, rank, num_workers, err, errlen);
    if (rc != 0)
        goto fail;
    if (d->train.dim != ZP_MNIST_PIXELS) {
        rc = zp_errors_set(err, errlen, ZEPS_EDATA, "%s: images are %dx%d, the models need 28x28",
                           cfg->data_dir, d->train.rows, d->train.cols);
        goto fail;
    }
    rc = load_test(d, cfg, err, errlen);
    if (rc != 0)
        goto fail;
    d->batch = cfg->batch_size;
    d->steps = d->train.n / d->batch > 0 ? d->train.n / d->batch : 1;
    d->rank = rank;
    d->seed = cfg->seed;
    d->order = zp_alloc_zeroed((size_t)d->train.n, sizeof(*d->order));
    d->order_epoch = -1;
    d->bx = zp_alloc_zeroed((size_t)d->batch * ZP_MNIST_PIXELS, sizeof(float));
    d->by = zp_alloc_zeroed((size_t)d->batch, 1);
    d->logits = zp_alloc_zeroed((size_t)ZP_MNIST_EVAL_CHUNK * ZP_MNIST_CLASSES, sizeof(float));
    *out = d;
    return 0;

fail:
    zp_mnist_data_destroy(&d);
    return rc;
}

void zp_mnist_data_destroy(zp_mnist_data **dp)
{
    if (dp == NULL || *dp == NULL)
        return;
    zp_mnist_data *d = *dp;
    zp_mnist_dataset_fini(&d->train);
    zp_mnist_dataset_fini(&d->test);
    free(d->order);
    free(d->bx);
    free(d->by);
    free(d->logits);
    free(d);
    *dp = NULL;
}

int zp_mnist_data_batch_size(const zp_mnist_data *d)
{
    return d->batch;
}

int zp_mnist_data_steps(const zp_mnist_data *d)
{
    return d->steps;
}

int zp_mnist_data_part_size(const zp_mnist_data *d)
{
    return d->train.n;
}

void zp_mnist_data_batch(zp_mnist_data *d, int64_t step, const float **x, const uint8_t **y)
{
    assert(step >= 0);
    int64_t epoch = step / d->steps;
    if (epoch != d->order_epoch) {
        /* Built from the identity every time, never from the previous
         * epoch's order, so a step's batch does not depend on call history. */
        for (int i = 0; i < d->train.n; i++)
            d->order[i] = (uint32_t)i;
        zp_rng r;
        zp_rng_seed(&r, d->seed ^ STREAM_EPOCH, (uint64_t)d->rank, (uint64_t)epoch);
        zp_rng_shuffle(&r, d->order, (size_t)d->train.n);
        d->order_epoch = epoch;
    }
    int64_t pos = (step % d->steps) * d->batch;
    for (int i = 0; i < d->batch; i++) {
        uint32_t k = d->order[(pos + i) % d->train.n];
        memcpy(d->bx + (size_t)i * ZP_MNIST_PIXELS, d->train.x + (size_t)k * ZP_MNIST_PIXELS,
               ZP_MNIST_PIXELS * sizeof(float));
        d->by[i] = d->train.y[k];
    }
    *x = d->bx;
    *y = d->by;
}

double zp_mnist_xent(const float *logits, const uint8_t *y, int n, float scale, float *dlogits,
                     int *correct)
{
    double total = 0.0;
    int right = 0;
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * ZP_MNIST_CLASSES;
        int arg = 0;
        for (int k = 1; k < ZP_MNIST_CLASSES; k++)
            if (l[k] > l[arg])
                arg = k;
        double max = l[arg];
        double e[ZP_MNIST_CLASSES], sum = 0.0;
        for (int k = 0; k < ZP_MNIST_CLASSES; k++) {
            e[k] = exp((double)l[k] - max);
            sum += e[k];
        }
        total += log(sum) + max - (double)l[y[i]];
        right += arg == y[i];
        if (dlogits != NULL) {
            float *dl = dlogits + (size_t)i * ZP_MNIST_CLASSES;
            for (int k = 0; k < ZP_MNIST_CLASSES; k++)
                dl[k] = scale * (float)(e[k] / sum - (k == y[i] ? 1.0 : 0.0));
        }
    }
    if (correct != NULL)
        *correct += right;
    return total;
}

int zp_mnist_evaluate(zp_mnist_data *d, zp_mnist_forward_fn fwd, void *ctx, float *const *w,
                      zp_eval *out)
{
    double loss = 0.0;
    int correct = 0;
    for (int at = 0; at < d->test.n; at += ZP_MNIST_EVAL_CHUNK) {
        int n = d->test.n - at < ZP_MNIST_EVAL_CHUNK ? d->test.n - at : ZP_MNIST_EVAL_CHUNK;
        fwd(ctx, w, d->test.x + (size_t)at * ZP_MNIST_PIXELS, n, d->logits);
        loss += zp_mnist_xent(d->logits, d->test.y + at, n, 0.0f, NULL, &correct);
    }
    memset(out, 0, sizeof(*out));
    out->examples = d->test.n;
    out->loss = loss / d->test.n;
    out->accuracy = (double)correct / d->test.n;
    return 0;
}
